// PASSES: lower-to-llvm
// KERNEL: opt_total (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// Upstream dialects to the LLVM dialect: only llvm ops remain, the reassociable add keeps its flags, and the
// layout stays on the module.
// CHECK: module attributes {hawk.layout = {buffers = ["v:in:f", "result:cell:f",
// CHECK-NOT: memref.
// CHECK-NOT: scf.
// CHECK: llvm.func @opt_total_lanes(
// CHECK: llvm.fadd {{.+}} {fastmathFlags = #llvm.fastmath<{{(contract, reassoc|reassoc, contract)}}>} : f64
// CHECK: llvm.func @opt_total_finish(
// CHECK-NOT: func.func
// CHECK-NOT: memref.

module attributes {hawk.layout = {buffers = ["v:in:f", "result:cell:f", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], index_keys = [], name = "opt_total", outputs = [["result", "cell"]], private = [], reductions = [{cell = "result", kept = [], kind = "sum", masked = false, over = ["sample"], payload = [], policy = "auto"}], signature = {planes = [{axes = [], kind = "lane", name = "v", payload = [], sorted = false}], returns = []}, sink_policy = [], sinks = [], stored = []}} {
  func.func @opt_total_lanes(%arg0: memref<?xf64>, %arg1: memref<?xf64>, %arg2: memref<?xf64>, %arg3: memref<?xi64>, %arg4: memref<?xi64>, %arg5: memref<?xi64>) {
    %cst = arith.constant 0.000000e+00 : f64
    %c2 = arith.constant 2 : index
    %c1 = arith.constant 1 : index
    %c0 = arith.constant 0 : index
    %0 = memref.load %arg4[%c0] : memref<?xi64>
    %1 = arith.index_cast %0 : i64 to index
    %2 = memref.load %arg4[%c1] : memref<?xi64>
    %3 = arith.index_cast %2 : i64 to index
    %4 = memref.load %arg4[%c2] : memref<?xi64>
    %5 = arith.index_cast %4 : i64 to index
    %6 = scf.for %arg6 = %1 to %3 step %c1 iter_args(%arg7 = %cst) -> (f64) {
      %7 = memref.load %arg0[%arg6] : memref<?xf64>
      %8 = arith.mulf %7, %7 : f64
      %9 = arith.addf %arg7, %8 fastmath<reassoc,contract> : f64
      scf.yield %9 : f64
    }
    memref.store %6, %arg2[%5] : memref<?xf64>
    return
  }
  func.func @opt_total_finish(%arg0: memref<?xf64>, %arg1: memref<?xf64>, %arg2: memref<?xf64>, %arg3: memref<?xi64>, %arg4: memref<?xi64>, %arg5: memref<?xi64>) {
    %cst = arith.constant 0.000000e+00 : f64
    %c2 = arith.constant 2 : index
    %c1 = arith.constant 1 : index
    %c0 = arith.constant 0 : index
    %0 = memref.load %arg4[%c2] : memref<?xi64>
    %1 = arith.index_cast %0 : i64 to index
    %2 = scf.for %arg6 = %c0 to %1 step %c1 iter_args(%arg7 = %cst) -> (f64) {
      %3 = memref.load %arg2[%arg6] : memref<?xf64>
      %4 = arith.addf %arg7, %3 : f64
      scf.yield %4 : f64
    }
    memref.store %2, %arg1[%c0] : memref<?xf64>
    return
  }
}
