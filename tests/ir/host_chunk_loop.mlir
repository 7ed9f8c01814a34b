// PASSES: lower-host-lanes
// KERNEL: opt_total (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// The chunk loop: lanes [meta[0], meta[1]) of one chunk; an "auto" sum's register accumulator may be
// reassociated; the chunk's partial lands in #scratch; the finish adds the chunks' partials in chunk order.
// CHECK: module attributes {hawk.layout = {buffers = ["v:in:f", "result:cell:f", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"]
// CHECK-LABEL: func.func @opt_total_lanes(%arg0: memref<?xf64>, %arg1: memref<?xf64>, %arg2: memref<?xf64>, %arg3: memref<?xi64>, %arg4: memref<?xi64>, %arg5: memref<?xi64>) {
// CHECK-NOT: hawk.
// CHECK: %[[LO:.+]] = memref.load %arg4[%c0] : memref<?xi64>
// CHECK: %[[HI:.+]] = memref.load %arg4[%c1] : memref<?xi64>
// A loop that only reads into sums runs whole groups of 256 lanes first (read_groups.py), each with prefetch
// hints for the lanes 1024 on and the body in an inner loop of constant trip count; then the last lanes.
// CHECK: %[[GROUPS:.+]] = scf.for %[[G:[a-z0-9_]+]] = %{{.+}} to %{{.+}} step %c256{{.*}} iter_args(%{{.+}}) -> (f64) {
// CHECK:   "llvm.intr.prefetch"
// CHECK:   scf.for %[[K:[a-z0-9_]+]] = %c0{{[_0-9]*}} to %c256{{[_0-9]*}} step
// CHECK:     %[[AT:.+]] = arith.addi %[[G]], %[[K]] : index
// CHECK:     memref.load %arg0[%[[AT]]] : memref<?xf64>
// CHECK: %[[ACC:.+]] = scf.for %[[LANE:[a-z0-9_]+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[A:[a-z0-9_]+]] = %[[GROUPS]]) -> (f64) {
// CHECK:   %[[X:.+]] = memref.load %arg0[%[[LANE]]] : memref<?xf64>
// CHECK:   %[[SQ:.+]] = arith.mulf %[[X]], %{{.+}} : f64
// CHECK:   %[[NEW:.+]] = arith.addf %[[A]], %[[SQ]] fastmath<reassoc,contract> : f64
// CHECK:   scf.yield %[[NEW]] : f64
// CHECK: memref.store %[[ACC]], %arg2[%{{.+}}] : memref<?xf64>
// CHECK-LABEL: func.func @opt_total_finish(
// CHECK: %[[SUM:.+]] = scf.for
// CHECK:   memref.load %arg2
// CHECK:   arith.addf
// CHECK-NOT: reassoc
// CHECK: memref.store %[[SUM]], %arg1[%{{.+}}] : memref<?xf64>

module {
  func.func @opt_total(%arg0: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "v"}, %arg1: !hawk.total<f64, array<i64>, []> {hawk.name = "result"}) attributes {hawk.axes = ["sample"], hawk.kernel, hawk.layout = {buffers = ["v:in:f", "result:cell:f", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], index_keys = [], name = "opt_total", outputs = [["result", "cell"]], private = [], reductions = [{cell = "result", kept = [], kind = "sum", masked = false, over = ["sample"], payload = [], policy = "auto"}], signature = {planes = [{axes = [], kind = "lane", name = "v", payload = [], sorted = false}], returns = []}, sink_policy = [], sinks = [], stored = []}, hawk.outputs = [["result", "cell"]], hawk.signature = {planes = [{axes = [], kind = "lane", name = "v", payload = [], sorted = false}], returns = []}, hawk.spec = {float = f64, index = {}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %1 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %2 = arith.mulf %0, %1 : f64
    %3 = "hawk.reduce"(%2) {kind = "sum", over = ["sample"], policy = "auto"} : (f64) -> f64
    "hawk.cell"(%arg1, %3) : (!hawk.total<f64, array<i64>, []>, f64) -> ()
    return
  }
}
