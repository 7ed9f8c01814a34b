// PASSES: chunk-form
// KERNEL: opt_ordered (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// an ordered sum over every lane keeps two-float chains on the host (pairs=true, the default): blocks of lanes
// whose groups feed one chain each ("blocked").
// CHECK: func.func @opt_ordered(
// CHECK-SAME: hawk.chunk_form = "blocked"

module {
  func.func @opt_ordered(%arg0: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"}, %arg1: !hawk.total<f64, array<i64>, []> {hawk.name = "t"}) attributes {hawk.axes = ["sample"], hawk.kernel, hawk.layout = {buffers = ["x:in:f", "t:cell:f", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], index_keys = [], name = "opt_ordered", outputs = [["t", "cell"]], private = [], reductions = [{cell = "t", kept = [], kind = "sum", masked = false, over = ["sample"], payload = [], policy = "ordered"}], signature = {planes = [{axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "output", name = "t", payload = [], sorted = false}], returns}, sink_policy = [], sinks = [], stored = []}, hawk.outputs = [["t", "cell"]], hawk.signature = {planes = [{axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "output", name = "t", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %1 = "hawk.reduce"(%0) {kind = "sum", over = ["sample"], policy = "ordered"} : (f64) -> f64
    "hawk.cell"(%arg1, %1) : (!hawk.total<f64, array<i64>, []>, f64) -> ()
    return
  }
}
