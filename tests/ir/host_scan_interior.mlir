// PASSES: plan-buffers,lower-host-lanes,canonicalize
// KERNEL: opt_runs (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// A block's lanes run in three loops (hawk/passes/lower/scan_interior.py): the interior one, between the
// general ones, reads both neighbours without clamps, and with `last = lane.extent("i") - 1` (hawk.extent)
// the test `i == last` is false there and `m.min(i + 1, last)` is `i + 1`: no clamp, no test, no `or` is left.
// CHECK-LABEL: func.func @opt_runs_2_lanes(
// CHECK: scf.for
// CHECK: scf.for
// CHECK: arith.cmpi eq
// CHECK: arith.minsi
// CHECK: scf.yield
// CHECK: scf.for
// CHECK-NOT: arith.minsi
// CHECK-NOT: arith.cmpi eq
// CHECK-NOT: arith.ori
// CHECK: scf.yield
// CHECK: scf.for
// CHECK: arith.cmpi eq
// CHECK: arith.minsi
// CHECK-LABEL: func.func @opt_runs_2_finish(

module {
  func.func @opt_runs_2(%arg0: !hawk.plane<i32, array<i64>, ["i"]> {hawk.name = "k"}, %arg1: !hawk.plane<f64, array<i64>, ["i"]> {hawk.name = "x"}, %arg2: !hawk.output<f64, array<i64>, ["i"]> {hawk.name = "y"}, %arg3: !hawk.total<f64, array<i64>, []> {hawk.name = "cut0"}) attributes {hawk.axes = ["i"], hawk.kernel, hawk.outputs = [["y", "lane"]], hawk.signature = {planes = [{axes = [["i", unit]], kind = "grid", name = "lane", payload = [], sorted = false}, {axes = [], kind = "index", name = "k", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "output", name = "y", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {k = i32}}, hawk.stage = {cells_in = ["cut0"], cells_out = [], owns = ["y"]}} {
    %0 = "hawk.lane"() {axis = "i"} : () -> i64
    %1 = "hawk.extent"() {axis = "i"} : () -> i64
    %c1_i64 = arith.constant 1 : i64
    %2 = arith.subi %1, %c1_i64 : i64
    %c0_i64 = arith.constant 0 : i64
    %3 = arith.cmpi eq, %0, %c0_i64 : i64
    %4 = "hawk.load"(%arg0) : (!hawk.plane<i32, array<i64>, ["i"]>) -> i32
    %5 = arith.extsi %4 : i32 to i64
    %c1_i64_0 = arith.constant 1 : i64
    %6 = arith.subi %0, %c1_i64_0 : i64
    %c0_i64_1 = arith.constant 0 : i64
    %7 = arith.maxsi %6, %c0_i64_1 : i64
    %8 = "hawk.at"(%arg0, %7) {axes = ["#"]} : (!hawk.plane<i32, array<i64>, ["i"]>, i64) -> i32
    %9 = arith.extsi %8 : i32 to i64
    %10 = arith.cmpi ne, %5, %9 : i64
    %11 = arith.ori %3, %10 : i1
    %12 = arith.cmpi eq, %0, %2 : i64
    %13 = "hawk.load"(%arg0) : (!hawk.plane<i32, array<i64>, ["i"]>) -> i32
    %14 = arith.extsi %13 : i32 to i64
    %c1_i64_2 = arith.constant 1 : i64
    %15 = arith.addi %0, %c1_i64_2 : i64
    %16 = arith.minsi %15, %2 : i64
    %17 = "hawk.at"(%arg0, %16) {axes = ["#"]} : (!hawk.plane<i32, array<i64>, ["i"]>, i64) -> i32
    %18 = arith.extsi %17 : i32 to i64
    %19 = arith.cmpi ne, %14, %18 : i64
    %20 = arith.ori %12, %19 : i1
    %21 = "hawk.load"(%arg1) : (!hawk.plane<f64, array<i64>, ["i"]>) -> f64
    %22 = "hawk.scan_apply"(%arg3, %21, %11) {mode = "inclusive", op = "add"} : (!hawk.total<f64, array<i64>, []>, f64, i1) -> f64
    %cst = arith.constant 0.000000e+00 : f64
    %23 = arith.select %20, %22, %cst : f64
    "hawk.store"(%arg2, %23) : (!hawk.output<f64, array<i64>, ["i"]>, f64) -> ()
    return
  }
}
