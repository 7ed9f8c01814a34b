// PASSES: plan-buffers
// KERNEL: opt_staged (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// The first stage's Layout as the func's hawk.layout: the buffers in the compiled function's order
// (name:role:dtype, 'f' the kernel's float), the compensated sink's companion and per-chunk private copy,
// the reductions with their cells and the Index plane used directly as a key.
// CHECK-LABEL: func.func @opt_staged(
// CHECK-SAME: hawk.layout = {buffers = ["x:in:f", "w:in:f", "i:index:i32", "total:cell:f", "cut0:cell:f", "bins:sink:f", "bins:comp:f64", "bins:priv:f64", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"]
// CHECK-SAME: cells_in = [], cells_out = ["cut0"]
// CHECK-SAME: index_keys = {{\[\["i", \[\["bins", 0\]\]\]\]}}
// CHECK-SAME: name = "opt_staged", outputs = {{\[\["total", "cell"\]\]}}
// CHECK-SAME: private = {{\[\["bins", 8\]\]}}
// CHECK-SAME: reductions = [{cell = "total", kept = [], kind = "sum", masked = false, over = ["sample"], payload = [], policy = "auto"}, {cell = "cut0", kept = [], kind = "mean"
// CHECK-SAME: sink_policy = {{\[\["bins", "compensated"\]\]}}, sinks = {{\[\["bins", \[\]\]\]}}

module {
  func.func @opt_staged(%arg0: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"}, %arg1: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "w"}, %arg2: !hawk.plane<i32, array<i64>, ["sample"]> {hawk.name = "i"}, %arg3: !hawk.total<f64, array<i64>, []> {hawk.name = "total"}, %arg4: !hawk.sink<f64, array<i64>, ["b"]> {hawk.name = "bins"}, %arg5: !hawk.total<f64, array<i64>, []> {hawk.name = "cut0"}) attributes {hawk.axes = ["sample"], hawk.kernel, hawk.outputs = [["total", "cell"], ["c", "lane"]], hawk.signature = {planes = [{axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "lane", name = "w", payload = [], sorted = false}, {axes = [], kind = "index", name = "i", payload = [], sorted = false}, {axes = [], kind = "output", name = "total", payload = [], sorted = false}, {axes = [], kind = "output", name = "c", payload = [], sorted = false}, {axes = [["b", 8]], kind = "sink", name = "bins", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {i = i32}}, hawk.stage = {cells_in = [], cells_out = ["cut0"], owns = ["bins", "total"]}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %1 = "hawk.load"(%arg1) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %2 = arith.mulf %0, %1 : f64
    %3 = "hawk.reduce"(%2) {kind = "sum", over = ["sample"], policy = "auto"} : (f64) -> f64
    %4 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %5 = "hawk.reduce"(%4) {kind = "mean", over = ["sample"], policy = "auto"} : (f64) -> f64
    %6 = "hawk.load"(%arg2) : (!hawk.plane<i32, array<i64>, ["sample"]>) -> i32
    %7 = arith.extsi %6 : i32 to i64
    %8 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    "hawk.scatter"(%arg4, %8, %7) {mode = "add", policy = "auto"} : (!hawk.sink<f64, array<i64>, ["b"]>, f64, i64) -> ()
    "hawk.cell"(%arg3, %3) : (!hawk.total<f64, array<i64>, []>, f64) -> ()
    "hawk.cell"(%arg5, %5) : (!hawk.total<f64, array<i64>, []>, f64) -> ()
    return
  }
}
