// PASSES: map-lanes-gpu{subgroup=32 atomics=false wide=false}
// KERNEL: opt_compensated (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// map-lanes-gpu in the tree form gpu-form chose: with 32-thread subgroups the per-thread (sum, correction)
// states first meet by a shuffle-xor butterfly (offsets 16, 8, 4, 2, 1), then one state per subgroup goes
// through workgroup memory; the gpu.module goes before the finish build-finish made.
// CHECK: module attributes {gpu.container_module, hawk.layout = {
// CHECK: gpu.module @opt_compensated_gpu
// CHECK: gpu.func @opt_compensated_lanes(
// CHECK-SAME: kernel
// CHECK: scf.for {{.+}} step %c64
// CHECK-COUNT-10: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK: gpu.return
// CHECK: func.func @opt_compensated_finish(
// CHECK-NOT: hawk.

module attributes {hawk.layout = {buffers = ["x:in:f", "t:cell:f", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], index_keys = [], name = "opt_compensated", outputs = [["t", "cell"]], private = [], reductions = [{cell = "t", kept = [], kind = "sum", masked = false, over = ["sample"], payload = [], policy = "compensated"}], signature = {planes = [{axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "output", name = "t", payload = [], sorted = false}], returns}, sink_policy = [], sinks = [], stored = []}} {
  func.func @opt_compensated(%arg0: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"}, %arg1: !hawk.total<f64, array<i64>, []> {hawk.name = "t"}) attributes {hawk.axes = ["sample"], hawk.gpu_form = "tree", hawk.kernel, hawk.layout = {buffers = ["x:in:f", "t:cell:f", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], index_keys = [], name = "opt_compensated", outputs = [["t", "cell"]], private = [], reductions = [{cell = "t", kept = [], kind = "sum", masked = false, over = ["sample"], payload = [], policy = "compensated"}], signature = {planes = [{axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "output", name = "t", payload = [], sorted = false}], returns}, sink_policy = [], sinks = [], stored = []}, hawk.outputs = [["t", "cell"]], hawk.signature = {planes = [{axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "output", name = "t", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %1 = "hawk.reduce"(%0) {kind = "sum", over = ["sample"], policy = "compensated"} : (f64) -> f64
    "hawk.cell"(%arg1, %1) : (!hawk.total<f64, array<i64>, []>, f64) -> ()
    return
  }
  func.func @opt_compensated_finish(%arg0: memref<?xf64>, %arg1: memref<?xf64>, %arg2: memref<?xf64>, %arg3: memref<?xi64>, %arg4: memref<?xi64>, %arg5: memref<?xi64>) {
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
    %c2_1 = arith.constant 2 : index
    %cst = arith.constant 0.000000e+00 : f64
    %cst_2 = arith.constant 0.000000e+00 : f64
    %cst_3 = arith.constant 0.000000e+00 : f64
    %c0_4 = arith.constant 0 : index
    %c1_5 = arith.constant 1 : index
    %11:2 = scf.for %arg6 = %c0_4 to %5 step %c1_5 iter_args(%arg7 = %cst, %arg8 = %cst_2) -> (f64, f64) {
      %16 = arith.muli %arg6, %c2_1 : index
      %c0_8 = arith.constant 0 : index
      %17 = arith.addi %16, %c0_8 : index
      %c0_9 = arith.constant 0 : index
      %18 = arith.addi %17, %c0_9 : index
      %19 = memref.load %arg2[%18] : memref<?xf64>
      %c1_10 = arith.constant 1 : index
      %20 = arith.addi %17, %c1_10 : index
      %21 = memref.load %arg2[%20] : memref<?xf64>
      %22 = arith.addf %arg7, %19 : f64
      %23 = math.absf %arg7 : f64
      %24 = math.absf %19 : f64
      %25 = arith.cmpf oge, %23, %24 : f64
      %26 = arith.subf %arg7, %22 : f64
      %27 = arith.addf %26, %19 : f64
      %28 = arith.subf %19, %22 : f64
      %29 = arith.addf %28, %arg7 : f64
      %cst_11 = arith.constant 0x7FF0000000000000 : f64
      %30 = math.absf %22 : f64
      %31 = arith.cmpf olt, %30, %cst_11 : f64
      %32 = arith.select %25, %27, %29 : f64
      %33 = arith.addf %arg8, %32 : f64
      %34 = arith.select %31, %33, %arg8 : f64
      %35 = arith.addf %34, %21 : f64
      scf.yield %22, %35 : f64, f64
    }
    %cst_6 = arith.constant 0x7FF0000000000000 : f64
    %12 = math.absf %11#0 : f64
    %13 = arith.cmpf olt, %12, %cst_6 : f64
    %14 = arith.addf %11#0, %11#1 : f64
    %15 = arith.select %13, %14, %11#0 : f64
    %c0_7 = arith.constant 0 : index
    memref.store %15, %arg1[%c0_7] : memref<?xf64>
    return
  }
}
