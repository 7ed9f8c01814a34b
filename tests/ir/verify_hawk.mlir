// PASSES: verify-hawk
// KERNEL: opt_staged (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// A valid kernel goes through unchanged (its facts included).
// CHECK-LABEL: func.func @opt_staged(
// CHECK-SAME: hawk.kernel
// CHECK-SAME: hawk.spec = {float = f64, index = {i = i32}}
// CHECK: hawk.reduce{{.*}}kind = "sum"
// CHECK: hawk.reduce{{.*}}kind = "mean"
// CHECK: hawk.scatter
// CHECK: hawk.store

module {
  func.func @opt_staged(%arg0: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"}, %arg1: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "w"}, %arg2: !hawk.plane<i32, array<i64>, ["sample"]> {hawk.name = "i"}, %arg3: !hawk.total<f64, array<i64>, []> {hawk.name = "total"}, %arg4: !hawk.output<f64, array<i64>, ["sample"]> {hawk.name = "c"}, %arg5: !hawk.sink<f64, array<i64>, ["b"]> {hawk.name = "bins"}) attributes {hawk.axes = ["sample"], hawk.kernel, hawk.outputs = [["total", "cell"], ["c", "lane"]], hawk.signature = {planes = [{axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "lane", name = "w", payload = [], sorted = false}, {axes = [], kind = "index", name = "i", payload = [], sorted = false}, {axes = [], kind = "output", name = "total", payload = [], sorted = false}, {axes = [], kind = "output", name = "c", payload = [], sorted = false}, {axes = [["b", 8]], kind = "sink", name = "bins", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {i = i32}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %1 = "hawk.load"(%arg1) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %2 = arith.mulf %0, %1 : f64
    %3 = "hawk.reduce"(%2) {kind = "sum", over = ["sample"], policy = "auto"} : (f64) -> f64
    %4 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %5 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %6 = "hawk.reduce"(%5) {kind = "mean", over = ["sample"], policy = "auto"} : (f64) -> f64
    %7 = arith.subf %4, %6 : f64
    %8 = "hawk.load"(%arg2) : (!hawk.plane<i32, array<i64>, ["sample"]>) -> i32
    %9 = arith.extsi %8 : i32 to i64
    %10 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    "hawk.scatter"(%arg5, %10, %9) {mode = "add", policy = "auto"} : (!hawk.sink<f64, array<i64>, ["b"]>, f64, i64) -> ()
    "hawk.cell"(%arg3, %3) : (!hawk.total<f64, array<i64>, []>, f64) -> ()
    "hawk.store"(%arg4, %7) : (!hawk.output<f64, array<i64>, ["sample"]>, f64) -> ()
    return
  }
}
