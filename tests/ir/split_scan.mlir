// PASSES: split-stages
// KERNEL: opt_scan (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// A scan counts like a reduction: its result is ready one stage later. Stage 1 folds each 4096-lane block into the
// internal cell cut0 (hawk.scan_totals, written by the block's last lane; the finish turns totals into offsets);
// stage 2 recomputes the scanned value x * x and runs the scan from those offsets (hawk.scan_apply), then stores it.
// CHECK-LABEL: func.func @opt_scan(
// CHECK-SAME: %[[CUT:arg[0-9]+]]: !hawk.total<f64, array<i64>, []> {hawk.name = "cut0"}
// CHECK-SAME: hawk.stage = {cells_in = [], cells_out = ["cut0"], owns = []}
// CHECK: %[[V:.+]] = arith.mulf
// CHECK: %[[F:.+]] = arith.cmpf
// CHECK: hawk.scan_totals"(%[[CUT]], %[[V]], %[[F]]) {op = "add"}
// CHECK-NOT: hawk.store
// CHECK-LABEL: func.func @opt_scan_2(
// CHECK-SAME: %[[IN:arg[0-9]+]]: !hawk.total<f64, array<i64>, []> {hawk.name = "cut0"}
// CHECK-SAME: hawk.stage = {cells_in = ["cut0"], cells_out = [], owns = ["y"]}
// CHECK: %[[V2:.+]] = arith.mulf
// CHECK: %[[Y:.+]] = "hawk.scan_apply"(%[[IN]], %[[V2]], %{{.+}}) {mode = "inclusive", op = "add"}
// CHECK: hawk.store"(%{{.+}}, %[[Y]])
// CHECK-NOT: hawk.scan

module {
  func.func @opt_scan(%arg0: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"}, %arg1: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "start"}, %arg2: !hawk.output<f64, array<i64>, ["sample"]> {hawk.name = "y"}) attributes {hawk.axes = ["sample"], hawk.kernel, hawk.outputs = [["y", "lane"]], hawk.signature = {planes = [{axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "lane", name = "start", payload = [], sorted = false}, {axes = [], kind = "output", name = "y", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %1 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %2 = arith.mulf %0, %1 : f64
    %3 = "hawk.load"(%arg1) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %cst = arith.constant 0.000000e+00 : f64
    %4 = arith.cmpf ogt, %3, %cst : f64
    %5 = "hawk.scan"(%2, %4) {mode = "inclusive", op = "add"} : (f64, i1) -> f64
    "hawk.store"(%arg2, %5) : (!hawk.output<f64, array<i64>, ["sample"]>, f64) -> ()
    return
  }
}
