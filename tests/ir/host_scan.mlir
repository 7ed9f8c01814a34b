// PASSES: plan-buffers,lower-host-lanes
// KERNEL: opt_scan (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// The second stage of a scan: its block offsets come in as a "scanoff" buffer. The lane loop is cut into blocks of
// 4096 lanes; each block's running value starts from the block's offset (entry 2 * block) outside the lanes' loop,
// so a lane costs one add in the loop-carried chain (and the reset= select) besides its own work.
// CHECK: hawk.layout = {buffers = [{{.*}}"cut0:scanoff:f"
// CHECK-LABEL: func.func @opt_scan_2_lanes(
// CHECK: %[[B:.+]] = arith.constant 4096 : index
// CHECK: scf.for %[[BLK:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%{{.+}} = %{{.+}}) -> (f64)
// CHECK: %[[AT:.+]] = arith.muli %[[BLK]], %c2{{.*}} : index
// CHECK: %[[OFF:.+]] = memref.load %{{.+}}[%[[AT]]]
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[RUN:.+]] = %[[OFF]]) -> (f64)
// CHECK-NOT: arith.select %{{.+}}, %{{.+}}, %[[RUN]]
// CHECK: %[[NEW:.+]] = arith.addf %[[RUN]], %{{.+}} : f64
// CHECK: %[[Y:.+]] = arith.select %{{.+}}, %{{.+}}, %[[NEW]] : f64
// CHECK: memref.store %[[Y]]
// CHECK: scf.yield %[[Y]] : f64
// CHECK-LABEL: func.func @opt_scan_2_finish(

module {
  func.func @opt_scan_2(%arg0: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"}, %arg1: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "start"}, %arg2: !hawk.output<f64, array<i64>, ["sample"]> {hawk.name = "y"}, %arg3: !hawk.total<f64, array<i64>, []> {hawk.name = "cut0"}) attributes {hawk.axes = ["sample"], hawk.kernel, hawk.outputs = [["y", "lane"]], hawk.signature = {planes = [{axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "lane", name = "start", payload = [], sorted = false}, {axes = [], kind = "output", name = "y", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {}}, hawk.stage = {cells_in = ["cut0"], cells_out = [], owns = ["y"]}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %1 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %2 = arith.mulf %0, %1 : f64
    %3 = "hawk.load"(%arg1) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %cst = arith.constant 0.000000e+00 : f64
    %4 = arith.cmpf ogt, %3, %cst : f64
    %5 = "hawk.scan_apply"(%arg3, %2, %4) {mode = "inclusive", op = "add"} : (!hawk.total<f64, array<i64>, []>, f64, i1) -> f64
    "hawk.store"(%arg2, %5) : (!hawk.output<f64, array<i64>, ["sample"]>, f64) -> ()
    return
  }
}
