// PASSES: plan-buffers,lower-host-lanes
// KERNEL: opt_softmax (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// Block reductions on the host (hawk/passes/lower/block.py): the layout records them (span 16, kind, policy)
// and has no reduction of its own. A chunk runs in tiles of 4096 lanes (256 rows); per tile, a first loop over
// the rows folds each row's max (arith.maximumf) into a buffer of the tile's 256 rows, a second folds each row's
// sum of exp(x - max) (reading the max back) and keeps each lane's exp in a buffer of the tile's 4096 lanes,
// then the rows' lane loop divides that kept exp by its row's sum (the exp it would recompute is left dead, for
// canonicalize to drop).
// CHECK: hawk.layout = {blocks = {{\[}}[16, "max", "auto"], [16, "sum", "auto"]]
// CHECK-SAME: reductions = []
// CHECK-LABEL: func.func @opt_softmax_lanes(
// CHECK: %[[KEPT:.+]] = memref.alloca() {alignment = 64 : i64} : memref<4096xf64>
// CHECK-COUNT-2: memref.alloca() {alignment = 64 : i64} : memref<256xf64>
// CHECK: scf.for %[[TILE:.+]] = %{{.+}} to %{{.+}} step
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step
// CHECK: %[[MAX:.+]] = scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%{{.+}} = %cst{{.*}}) -> (f64)
// CHECK: arith.maximumf
// CHECK: memref.store %[[MAX]], %[[TOPS:[a-z_0-9]+]][
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step
// CHECK: %[[SUM:.+]] = scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%{{.+}} = %{{.+}}) -> (f64)
// CHECK: memref.load %[[TOPS]]
// CHECK: %[[EX:.+]] = math.exp
// CHECK: arith.addf {{.+}} fastmath<
// CHECK: memref.store %[[EX]], %[[KEPT]][
// CHECK: memref.store %[[SUM]], %[[SUMS:[a-z_0-9]+]][
// CHECK: scf.for
// CHECK: %[[BACK:.+]] = memref.load %[[KEPT]][
// CHECK: %[[S:.+]] = memref.load %[[SUMS]][
// CHECK: arith.divf %[[BACK]], %[[S]]
// CHECK-LABEL: func.func @opt_softmax_finish(

module {
  func.func @opt_softmax(%arg0: !hawk.plane<f64, array<i64>, ["row", "col"]> {hawk.name = "x"}, %arg1: !hawk.output<f64, array<i64>, ["row", "col"]> {hawk.name = "z"}) attributes {hawk.axes = ["row", "col"], hawk.kernel, hawk.outputs = [["z", "lane"]], hawk.signature = {planes = [{axes = [["row", unit], ["col", 16]], kind = "grid", name = "g", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "output", name = "z", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["row", "col"]>) -> f64
    %1 = "hawk.block_reduce"(%0) {kind = "max", over = ["col"], policy = "auto"} : (f64) -> f64
    %2 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["row", "col"]>) -> f64
    %3 = arith.subf %2, %1 : f64
    %4 = math.exp %3 : f64
    %5 = "hawk.block_reduce"(%4) {kind = "sum", over = ["col"], policy = "auto"} : (f64) -> f64
    %6 = arith.divf %4, %5 : f64
    "hawk.store"(%arg1, %6) : (!hawk.output<f64, array<i64>, ["row", "col"]>, f64) -> ()
    return
  }
}
