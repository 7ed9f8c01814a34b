// PASSES: chunk-form
// KERNEL: opt_rows (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// chunk-form writes the loop shape a chunk of lanes runs in onto the kernel func, where lower-chunk-loop reads
// it: the one reduction keeps the leading axis with an "auto" sum, so a loop per kept slot over its contiguous
// lanes ("nested"). Nothing else changes.
// CHECK: func.func @opt_rows(
// CHECK-SAME: hawk.chunk_form = "nested"
// CHECK:   "hawk.reduce"
// CHECK-NOT: func.func

module {
  func.func @opt_rows(%arg0: !hawk.plane<f64, array<i64>, ["row", "col"]> {hawk.name = "x"}, %arg1: !hawk.total<f64, array<i64>, ["row"]> {hawk.name = "result"}) attributes {hawk.axes = ["row", "col"], hawk.kernel, hawk.layout = {buffers = ["x:in:f", "result:cell:f", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], index_keys = [], name = "opt_rows", outputs = [["result", "cell"]], private = [], reductions = [{cell = "result", kept = ["row"], kind = "sum", masked = false, over = ["col"], payload = [], policy = "auto"}], signature = {planes = [{axes = [["row", unit], ["col", 64]], kind = "grid", name = "g", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}], returns = []}, sink_policy = [], sinks = [], stored = []}, hawk.outputs = [["result", "cell"]], hawk.signature = {planes = [{axes = [["row", unit], ["col", 64]], kind = "grid", name = "g", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}], returns = []}, hawk.spec = {float = f64, index = {}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["row", "col"]>) -> f64
    %1 = "hawk.reduce"(%0) {kind = "sum", over = ["col"], policy = "auto"} : (f64) -> f64
    "hawk.cell"(%arg1, %1) : (!hawk.total<f64, array<i64>, ["row"]>, f64) -> ()
    return
  }
}
