// PASSES: lower-finish-to-llvm
// KERNEL: opt_hist (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// A GPU stage after lower-gpu-lanes: the host finish goes to the LLVM dialect, the gpu.module is left for the
// target's own lowering.
// CHECK: module attributes {gpu.container_module, hawk.layout = {buffers = ["k:index:i32",
// CHECK-NOT: func.func
// CHECK: llvm.func @opt_hist_finish(
// CHECK: gpu.module @opt_hist_gpu {
// CHECK: gpu.func @opt_hist_lanes(%arg0: memref<?xi32>
// CHECK: memref.load
// CHECK: gpu.return

module attributes {gpu.container_module, hawk.layout = {buffers = ["k:index:i32", "x:in:f", "bins:sink:f", "bins:comp:f64", "bins:priv:f64", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], fold_keys = {bins = "k"}, index_keys = [["k", [["bins", 0]]]], name = "opt_hist", outputs = [], private = [["bins", 8]], reductions = [], signature = {planes = [{axes = [], kind = "index", name = "k", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [["bin", 8]], kind = "sink", name = "bins", payload = [], sorted = false}], returns}, sink_policy = [["bins", "compensated"]], sinks = [["bins", []]], stored = []}} {
  gpu.module @opt_hist_gpu {
    gpu.func @opt_hist_lanes(%arg0: memref<?xi32>, %arg1: memref<?xf64>, %arg2: memref<?xf64>, %arg3: memref<?xf64>, %arg4: memref<?xf64>, %arg5: memref<?xf64>, %arg6: memref<?xi64>, %arg7: memref<?xi64>, %arg8: memref<?xi64>) kernel {
      %c2_i64 = arith.constant 2 : i64
      %c1_i64 = arith.constant 1 : i64
      %cst = arith.constant 0x7FF0000000000000 : f64
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %c-1_i64 = arith.constant -1 : i64
      %c8_i64 = arith.constant 8 : i64
      %c0_i64 = arith.constant 0 : i64
      %c5 = arith.constant 5 : index
      %c3 = arith.constant 3 : index
      %c2 = arith.constant 2 : index
      %c1 = arith.constant 1 : index
      %c0 = arith.constant 0 : index
      %0 = memref.load %arg7[%c0] : memref<?xi64>
      %1 = arith.index_cast %0 : i64 to index
      %2 = memref.load %arg7[%c1] : memref<?xi64>
      %3 = arith.index_cast %2 : i64 to index
      %4 = memref.load %arg7[%c2] : memref<?xi64>
      %5 = arith.index_cast %4 : i64 to index
      %6 = memref.load %arg7[%c5] : memref<?xi64>
      %7 = arith.index_cast %6 : i64 to index
      %thread_id_x = gpu.thread_id  x
      %block_id_x = gpu.block_id  x
      %block_dim_x = gpu.block_dim  x
      %8 = arith.muli %block_id_x, %block_dim_x : index
      %9 = arith.addi %8, %thread_id_x : index
      %10 = arith.muli %9, %1 : index
      %11 = arith.addi %10, %1 : index
      %12 = arith.minui %11, %7 : index
      %13 = arith.maxui %10, %3 : index
      %14 = arith.minui %13, %12 : index
      %15 = arith.cmpi ult, %9, %5 : index
      scf.if %15 {
        scf.for %arg9 = %14 to %12 step %c1 {
          %16 = memref.load %arg0[%arg9] : memref<?xi32>
          %17 = arith.extsi %16 : i32 to i64
          %18 = memref.load %arg1[%arg9] : memref<?xf64>
          %19 = arith.cmpi sge, %17, %c0_i64 : i64
          %20 = arith.cmpi slt, %17, %c8_i64 : i64
          %21 = arith.andi %19, %20 : i1
          %22 = arith.index_cast %16 : i32 to index
          scf.if %21 {
            %23 = arith.muli %9, %c16 : index
            %24 = arith.addi %22, %23 : index
            %25 = arith.addi %24, %c8 : index
            %26 = memref.load %arg4[%24] : memref<?xf64>
            %27 = memref.load %arg4[%25] : memref<?xf64>
            %28 = arith.addf %26, %18 : f64
            %29 = math.absf %26 : f64
            %30 = math.absf %18 : f64
            %31 = arith.cmpf oge, %29, %30 : f64
            %32 = arith.subf %26, %28 : f64
            %33 = arith.addf %32, %18 : f64
            %34 = arith.subf %18, %28 : f64
            %35 = arith.addf %34, %26 : f64
            %36 = math.absf %28 : f64
            %37 = arith.cmpf olt, %36, %cst : f64
            %38 = arith.select %31, %33, %35 : f64
            %39 = arith.addf %27, %38 : f64
            %40 = arith.select %37, %39, %27 : f64
            memref.store %28, %arg4[%24] : memref<?xf64>
            memref.store %40, %arg4[%25] : memref<?xf64>
          } else {
            %23 = arith.cmpi ne, %17, %c-1_i64 : i64
            scf.if %23 {
              %24 = arith.muli %9, %c3 : index
              %25 = arith.addi %24, %c1 : index
              %26 = memref.load %arg8[%24] : memref<?xi64>
              %27 = arith.cmpi eq, %26, %c0_i64 : i64
              %28 = arith.addi %26, %c1_i64 : i64
              memref.store %28, %arg8[%24] : memref<?xi64>
              %29 = memref.load %arg8[%25] : memref<?xi64>
              %30 = arith.select %27, %17, %29 : i64
              memref.store %30, %arg8[%25] : memref<?xi64>
              %31 = arith.addi %24, %c2 : index
              memref.store %c2_i64, %arg8[%31] : memref<?xi64>
            }
          }
        }
      }
      gpu.return
    }
  }
  func.func @opt_hist_finish(%arg0: memref<?xi32>, %arg1: memref<?xf64>, %arg2: memref<?xf64>, %arg3: memref<?xf64>, %arg4: memref<?xf64>, %arg5: memref<?xf64>, %arg6: memref<?xi64>, %arg7: memref<?xi64>, %arg8: memref<?xi64>) {
    %cst = arith.constant 0.000000e+00 : f64
    %cst_0 = arith.constant 0x7FF0000000000000 : f64
    %c16 = arith.constant 16 : index
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    %c0 = arith.constant 0 : index
    %dim = memref.dim %arg4, %c0 : memref<?xf64>
    %0 = arith.divui %dim, %c16 : index
    scf.for %arg9 = %c0 to %0 step %c1 {
      scf.for %arg10 = %c0 to %c8 step %c1 {
        %1 = arith.addi %arg10, %c8 : index
        %2 = arith.muli %arg9, %c16 : index
        %3 = arith.addi %2, %arg10 : index
        %4 = memref.load %arg3[%arg10] : memref<?xf64>
        %5 = memref.load %arg3[%1] : memref<?xf64>
        %6 = memref.load %arg4[%3] : memref<?xf64>
        %7 = arith.addf %4, %6 : f64
        %8 = math.absf %4 : f64
        %9 = math.absf %6 : f64
        %10 = arith.cmpf oge, %8, %9 : f64
        %11 = arith.subf %4, %7 : f64
        %12 = arith.addf %11, %6 : f64
        %13 = arith.subf %6, %7 : f64
        %14 = arith.addf %13, %4 : f64
        %15 = math.absf %7 : f64
        %16 = arith.cmpf olt, %15, %cst_0 : f64
        %17 = arith.select %10, %12, %14 : f64
        %18 = arith.addf %5, %17 : f64
        %19 = arith.select %16, %18, %5 : f64
        memref.store %7, %arg3[%arg10] : memref<?xf64>
        %20 = arith.addi %3, %c8 : index
        %21 = memref.load %arg4[%20] : memref<?xf64>
        %22 = arith.addf %19, %21 : f64
        memref.store %22, %arg3[%1] : memref<?xf64>
      }
    }
    %dim_1 = memref.dim %arg2, %c0 : memref<?xf64>
    scf.for %arg9 = %c0 to %dim_1 step %c1 {
      %1 = arith.addi %arg9, %dim_1 : index
      %2 = memref.load %arg2[%arg9] : memref<?xf64>
      %3 = memref.load %arg3[%arg9] : memref<?xf64>
      %4 = arith.addf %2, %3 : f64
      %5 = memref.load %arg3[%1] : memref<?xf64>
      %6 = arith.cmpf oeq, %5, %cst : f64
      %7 = arith.addf %4, %5 : f64
      %8 = arith.select %6, %4, %7 : f64
      memref.store %8, %arg2[%arg9] : memref<?xf64>
    }
    return
  }
}
