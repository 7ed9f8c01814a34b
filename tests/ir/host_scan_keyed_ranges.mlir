// PASSES: plan-buffers,lower-host-lanes
// KERNEL: opt_keyed_big (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// The second stage of a keyed scan whose values go into a sink too large for private copies: a slot-range stage
// (its "#parts" buffer), where every chunk runs every block. At a block's first lane the block's row of 16 offsets
// is copied into a row of the chunk's own (an alloca), not into the shared buffer's second half, and each lane
// folds its value into that row at its key.
// CHECK: hawk.layout = {buffers = [{{.*}}"cut0:scanoff:f"{{.*}}"#parts:parts:i64"
// CHECK-LABEL: func.func @opt_keyed_big_2_lanes(
// CHECK: %[[ROW:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16xf64>
// CHECK: scf.for %{{.+}} = %{{.+}} to %c16{{.*}} step
// CHECK: %[[OFF:.+]] = memref.load %{{.+}}[%{{.+}}] : memref<?xf64>
// CHECK: memref.store %[[OFF]], %[[ROW]][%{{.+}}] : memref<16xf64>
// CHECK: %[[PREV:.+]] = memref.load %[[ROW]][%{{.+}}] : memref<16xf64>
// CHECK: %[[NEW:.+]] = arith.addf %[[PREV]], %{{.+}} : f64
// CHECK: memref.store %[[NEW]], %[[ROW]][%{{.+}}] : memref<16xf64>
// CHECK-LABEL: func.func @opt_keyed_big_2_finish(

module {
  func.func @opt_keyed_big_2(%arg0: !hawk.plane<i32, array<i64>, ["sample"]> {hawk.name = "k"}, %arg1: !hawk.plane<i32, array<i64>, ["sample"]> {hawk.name = "d"}, %arg2: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"}, %arg3: !hawk.sink<f64, array<i64>, ["slot"]> {hawk.name = "big"}, %arg4: !hawk.total<f64, array<i64>, []> {hawk.name = "cut0"}) attributes {hawk.axes = ["sample"], hawk.kernel, hawk.outputs = [], hawk.signature = {planes = [{axes = [], kind = "index", name = "k", payload = [], sorted = false}, {axes = [], kind = "index", name = "d", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [["slot", 40000000]], kind = "sink", name = "big", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {d = i32, k = i32}}, hawk.stage = {cells_in = ["cut0"], cells_out = [], owns = ["big"]}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<i32, array<i64>, ["sample"]>) -> i32
    %1 = arith.extsi %0 : i32 to i64
    %2 = "hawk.load"(%arg2) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %3 = "hawk.load"(%arg1) : (!hawk.plane<i32, array<i64>, ["sample"]>) -> i32
    %4 = arith.extsi %3 : i32 to i64
    %5 = "hawk.scan_apply"(%arg4, %2, %4) {keys = 16 : i64, mode = "inclusive", op = "add", order = "lane"} : (!hawk.total<f64, array<i64>, []>, f64, i64) -> f64
    "hawk.scatter"(%arg3, %5, %1) {mode = "add", policy = "auto"} : (!hawk.sink<f64, array<i64>, ["slot"]>, f64, i64) -> ()
    return
  }
}
