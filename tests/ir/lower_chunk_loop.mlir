// PASSES: lower-chunk-loop
// KERNEL: opt_total (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// lower-chunk-loop after build-finish: the kernel func becomes @<k>_lanes, put before the finish that is
// already there (left as it was); lanes [meta[0], meta[1]) in one loop, the chunk's partial into #scratch.
// CHECK-NOT: hawk.kernel
// CHECK-LABEL: func.func @opt_total_lanes(
// CHECK-NOT: hawk.
// CHECK: %[[LO:.+]] = memref.load %arg4[%c0] : memref<?xi64>
// CHECK: %[[HI:.+]] = memref.load %arg4[%c1] : memref<?xi64>
// (whole groups of 256 lanes with prefetch hints first: read_groups.py; then the chunk's last lanes)
// CHECK: %[[GROUPS:.+]] = scf.for %{{.+}} step %c256{{.*}} iter_args(%{{.+}}) -> (f64) {
// CHECK:   "llvm.intr.prefetch"
// CHECK: %[[ACC:.+]] = scf.for %[[LANE:[a-z0-9_]+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[A:[a-z0-9_]+]] = %[[GROUPS]]) -> (f64) {
// CHECK:   memref.load %arg0[%[[LANE]]] : memref<?xf64>
// CHECK:   arith.addf %[[A]], %{{.+}} fastmath<reassoc,contract> : f64
// CHECK: memref.store %[[ACC]], %arg2[%{{.+}}] : memref<?xf64>
// CHECK-LABEL: func.func @opt_total_finish(
// CHECK-NOT: func.func

module attributes {hawk.layout = {buffers = ["v:in:f", "result:cell:f", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], index_keys = [], name = "opt_total", outputs = [["result", "cell"]], private = [], reductions = [{cell = "result", kept = [], kind = "sum", masked = false, over = ["sample"], payload = [], policy = "auto"}], signature = {planes = [{axes = [], kind = "lane", name = "v", payload = [], sorted = false}], returns = []}, sink_policy = [], sinks = [], stored = []}} {
  func.func @opt_total(%arg0: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "v"}, %arg1: !hawk.total<f64, array<i64>, []> {hawk.name = "result"}) attributes {hawk.axes = ["sample"], hawk.chunk_form = "flat", hawk.kernel, hawk.layout = {buffers = ["v:in:f", "result:cell:f", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], index_keys = [], name = "opt_total", outputs = [["result", "cell"]], private = [], reductions = [{cell = "result", kept = [], kind = "sum", masked = false, over = ["sample"], payload = [], policy = "auto"}], signature = {planes = [{axes = [], kind = "lane", name = "v", payload = [], sorted = false}], returns = []}, sink_policy = [], sinks = [], stored = []}, hawk.outputs = [["result", "cell"]], hawk.signature = {planes = [{axes = [], kind = "lane", name = "v", payload = [], sorted = false}], returns = []}, hawk.spec = {float = f64, index = {}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %1 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %2 = arith.mulf %0, %1 : f64
    %3 = "hawk.reduce"(%2) {kind = "sum", over = ["sample"], policy = "auto"} : (f64) -> f64
    "hawk.cell"(%arg1, %3) : (!hawk.total<f64, array<i64>, []>, f64) -> ()
    return
  }
  func.func @opt_total_finish(%arg0: memref<?xf64>, %arg1: memref<?xf64>, %arg2: memref<?xf64>, %arg3: memref<?xi64>, %arg4: memref<?xi64>, %arg5: memref<?xi64>) {
    %c0 = arith.constant 0 : index
    %0 = memref.load %arg4[%c0] : memref<?xi64>
    %1 = arith.index_cast %0 : i64 to index
    %c1 = arith.constant 1 : index
    %2 = memref.load %arg4[%c1] : memref<?xi64>
    %3 = arith.index_cast %2 : i64 to index
    %c2 = arith.constant 2 : index
    %4 = memref.load %arg4[%c2] : memref<?xi64>
    %5 = arith.index_cast %4 : i64 to index
    %c3 = arith.constant 3 : index
    %6 = memref.load %arg4[%c3] : memref<?xi64>
    %7 = arith.index_cast %6 : i64 to index
    %c4 = arith.constant 4 : index
    %8 = memref.load %arg4[%c4] : memref<?xi64>
    %9 = arith.index_cast %8 : i64 to index
    %c1_0 = arith.constant 1 : index
    %10 = arith.muli %c1_0, %9 : index
    %c1_1 = arith.constant 1 : index
    %cst = arith.constant 0.000000e+00 : f64
    %cst_2 = arith.constant 0.000000e+00 : f64
    %cst_3 = arith.constant 0.000000e+00 : f64
    %c0_4 = arith.constant 0 : index
    %c1_5 = arith.constant 1 : index
    %11 = scf.for %arg6 = %c0_4 to %5 step %c1_5 iter_args(%arg7 = %cst) -> (f64) {
      %12 = arith.muli %arg6, %c1_1 : index
      %c0_7 = arith.constant 0 : index
      %13 = arith.addi %12, %c0_7 : index
      %c0_8 = arith.constant 0 : index
      %14 = arith.addi %13, %c0_8 : index
      %15 = memref.load %arg2[%14] : memref<?xf64>
      %16 = arith.addf %arg7, %15 : f64
      scf.yield %16 : f64
    }
    %c0_6 = arith.constant 0 : index
    memref.store %11, %arg1[%c0_6] : memref<?xf64>
    return
  }
}
