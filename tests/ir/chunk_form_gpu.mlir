// PASSES: chunk-form{pairs=false}
// KERNEL: opt_ordered (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// on a GPU (pairs=false) an ordered sum's terms go to the exact accumulators lane by lane, so a thread of the
// "chunks" form runs its lanes in one loop ("flat"); gpu-form chose that form here (an ordered sum).
// CHECK: func.func @opt_ordered(
// CHECK-SAME: hawk.chunk_form = "flat"
// CHECK-SAME: hawk.gpu_form = "chunks"

module {
  func.func @opt_ordered(%arg0: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"}, %arg1: !hawk.total<f64, array<i64>, []> {hawk.name = "t"}) attributes {hawk.axes = ["sample"], hawk.gpu_form = "chunks", hawk.kernel, hawk.layout = {buffers = ["x:in:f", "t:cell:f", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], index_keys = [], name = "opt_ordered", outputs = [["t", "cell"]], private = [], reductions = [{cell = "t", kept = [], kind = "sum", masked = false, over = ["sample"], payload = [], policy = "ordered"}], signature = {planes = [{axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "output", name = "t", payload = [], sorted = false}], returns}, sink_policy = [], sinks = [], stored = []}, hawk.outputs = [["t", "cell"]], hawk.signature = {planes = [{axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "output", name = "t", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %1 = "hawk.reduce"(%0) {kind = "sum", over = ["sample"], policy = "ordered"} : (f64) -> f64
    "hawk.cell"(%arg1, %1) : (!hawk.total<f64, array<i64>, []>, f64) -> ()
    return
  }
}
