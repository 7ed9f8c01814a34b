// PASSES: canonicalize
// KERNEL: opt_total (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// Upstream clean-up of the lane loop: the two loads of v become one (cse), x * x reads it twice.
// CHECK-LABEL: func.func @opt_total_lanes(
// CHECK: scf.for %[[LANE:[a-z0-9_]+]] = {{.+}} {
// CHECK-NEXT: %[[X:.+]] = memref.load %arg0[%[[LANE]]] : memref<?xf64>
// CHECK-NEXT: %[[SQ:.+]] = arith.mulf %[[X]], %[[X]] : f64
// CHECK-NEXT: arith.addf %{{.+}}, %[[SQ]] fastmath<reassoc,contract> : f64
// CHECK-NEXT: scf.yield
// CHECK-LABEL: func.func @opt_total_finish(

module attributes {hawk.layout = {buffers = ["v:in:f", "result:cell:f", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], index_keys = [], name = "opt_total", outputs = [["result", "cell"]], private = [], reductions = [{cell = "result", kept = [], kind = "sum", masked = false, over = ["sample"], payload = [], policy = "auto"}], signature = {planes = [{axes = [], kind = "lane", name = "v", payload = [], sorted = false}], returns = []}, sink_policy = [], sinks = [], stored = []}} {
  func.func @opt_total_lanes(%arg0: memref<?xf64>, %arg1: memref<?xf64>, %arg2: memref<?xf64>, %arg3: memref<?xi64>, %arg4: memref<?xi64>, %arg5: memref<?xi64>) {
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
    %cst = arith.constant 0.000000e+00 : f64
    %c1_1 = arith.constant 1 : index
    %11 = scf.for %arg6 = %1 to %3 step %c1_1 iter_args(%arg7 = %cst) -> (f64) {
      %14 = memref.load %arg0[%arg6] : memref<?xf64>
      %15 = memref.load %arg0[%arg6] : memref<?xf64>
      %16 = arith.mulf %14, %15 : f64
      %17 = arith.addf %arg7, %16 fastmath<reassoc,contract> : f64
      scf.yield %17 : f64
    } {hawk.lanes}
    %c1_2 = arith.constant 1 : index
    %12 = arith.muli %5, %c1_2 : index
    %c0_3 = arith.constant 0 : index
    %13 = arith.addi %12, %c0_3 : index
    memref.store %11, %arg2[%13] : memref<?xf64>
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
