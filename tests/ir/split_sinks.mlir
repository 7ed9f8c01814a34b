// PASSES: split-stages
// KERNEL: opt_big_sink (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// A stage that sums and scatters into a sink too large for private copies (40,000,000 slots, over PAIR_SLOTS)
// becomes two stage funcs (hawk/passes/split_sinks.py): the sum and the small sink's scatter, then the large
// sink's scatter alone (a slot-range stage), which computes its term again from the planes it reads.
// CHECK-LABEL: func.func @opt_big_sink(
// CHECK-NOT: hawk.name = "big"
// CHECK-SAME: hawk.stage = {cells_in = [], cells_out = [], owns = ["result", "small"]}
// CHECK: hawk.scatter{{.*}}policy = "plain"
// CHECK: hawk.reduce{{.*}}policy = "ordered"
// CHECK: hawk.cell
// CHECK-NOT: hawk.scatter
// CHECK-LABEL: func.func @opt_big_sink_2(
// CHECK-SAME: hawk.name = "k"
// CHECK-SAME: hawk.name = "x"
// CHECK-SAME: hawk.name = "big"
// CHECK-NOT: hawk.name = "small"
// CHECK-SAME: hawk.stage = {cells_in = [], cells_out = [], owns = ["big"]}
// CHECK-NOT: hawk.reduce
// CHECK: arith.mulf
// CHECK: hawk.scatter{{.*}}policy = "auto"
// CHECK-NOT: hawk.reduce
// CHECK-NOT: hawk.cell
// CHECK-NOT: hawk.scatter

module {
  func.func @opt_big_sink(%arg0: !hawk.plane<i32, array<i64>, ["sample"]> {hawk.name = "k"}, %arg1: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"}, %arg2: !hawk.sink<f64, array<i64>, ["slot"]> {hawk.name = "big"}, %arg3: !hawk.sink<f64, array<i64>, ["bin"]> {hawk.name = "small"}, %arg4: !hawk.total<f64, array<i64>, []> {hawk.name = "result"}) attributes {hawk.axes = ["sample"], hawk.kernel, hawk.outputs = [["result", "cell"]], hawk.signature = {planes = [{axes = [], kind = "index", name = "k", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [["slot", 40000000]], kind = "sink", name = "big", payload = [], sorted = false}, {axes = [["bin", 8]], kind = "sink", name = "small", payload = [], sorted = false}], returns = []}, hawk.spec = {float = f64, index = {k = i32}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<i32, array<i64>, ["sample"]>) -> i32
    %1 = arith.extsi %0 : i32 to i64
    %2 = "hawk.load"(%arg1) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %cst = arith.constant 2.000000e+00 : f64
    %3 = arith.mulf %2, %cst : f64
    "hawk.scatter"(%arg2, %3, %1) {mode = "add", policy = "auto"} : (!hawk.sink<f64, array<i64>, ["slot"]>, f64, i64) -> ()
    %4 = "hawk.load"(%arg0) : (!hawk.plane<i32, array<i64>, ["sample"]>) -> i32
    %5 = arith.extsi %4 : i32 to i64
    %c8_i64 = arith.constant 8 : i64
    %c3_i64 = arith.constant 3 : i64
    %6 = arith.shrsi %5, %c3_i64 : i64
    %c7_i64 = arith.constant 7 : i64
    %7 = arith.andi %5, %c7_i64 : i64
    %8 = "hawk.load"(%arg1) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    "hawk.scatter"(%arg3, %8, %7) {mode = "add", policy = "plain"} : (!hawk.sink<f64, array<i64>, ["bin"]>, f64, i64) -> ()
    %9 = "hawk.load"(%arg1) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %10 = "hawk.reduce"(%9) {kind = "sum", over = ["sample"], policy = "ordered"} : (f64) -> f64
    "hawk.cell"(%arg4, %10) : (!hawk.total<f64, array<i64>, []>, f64) -> ()
    return
  }
}
