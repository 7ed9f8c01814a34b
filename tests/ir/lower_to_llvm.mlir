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
    %c1984 = arith.constant 1984 : index
    %c1920 = arith.constant 1920 : index
    %c1856 = arith.constant 1856 : index
    %c1792 = arith.constant 1792 : index
    %c1728 = arith.constant 1728 : index
    %c1664 = arith.constant 1664 : index
    %c1600 = arith.constant 1600 : index
    %c1536 = arith.constant 1536 : index
    %c1472 = arith.constant 1472 : index
    %c1408 = arith.constant 1408 : index
    %c1344 = arith.constant 1344 : index
    %c1280 = arith.constant 1280 : index
    %c1216 = arith.constant 1216 : index
    %c1152 = arith.constant 1152 : index
    %c1088 = arith.constant 1088 : index
    %c960 = arith.constant 960 : index
    %c896 = arith.constant 896 : index
    %c832 = arith.constant 832 : index
    %c768 = arith.constant 768 : index
    %c704 = arith.constant 704 : index
    %c640 = arith.constant 640 : index
    %c576 = arith.constant 576 : index
    %c512 = arith.constant 512 : index
    %c448 = arith.constant 448 : index
    %c384 = arith.constant 384 : index
    %c320 = arith.constant 320 : index
    %c192 = arith.constant 192 : index
    %c128 = arith.constant 128 : index
    %c64 = arith.constant 64 : index
    %c8 = arith.constant 8 : index
    %c1024 = arith.constant 1024 : index
    %c256 = arith.constant 256 : index
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
    %6 = arith.subi %3, %1 : index
    %7 = arith.remui %6, %c256 : index
    %8 = arith.subi %3, %7 : index
    %intptr = memref.extract_aligned_pointer_as_index %arg0 : memref<?xf64> -> index
    %9 = scf.for %arg6 = %1 to %8 step %c256 iter_args(%arg7 = %cst) -> (f64) {
      %11 = arith.addi %arg6, %c1024 : index
      %12 = arith.muli %11, %c8 : index
      %13 = arith.addi %intptr, %12 : index
      %14 = arith.index_cast %13 : index to i64
      %15 = llvm.inttoptr %14 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%15) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %16 = arith.addi %13, %c64 : index
      %17 = arith.index_cast %16 : index to i64
      %18 = llvm.inttoptr %17 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%18) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %19 = arith.addi %13, %c128 : index
      %20 = arith.index_cast %19 : index to i64
      %21 = llvm.inttoptr %20 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%21) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %22 = arith.addi %13, %c192 : index
      %23 = arith.index_cast %22 : index to i64
      %24 = llvm.inttoptr %23 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%24) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %25 = arith.addi %13, %c256 : index
      %26 = arith.index_cast %25 : index to i64
      %27 = llvm.inttoptr %26 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%27) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %28 = arith.addi %13, %c320 : index
      %29 = arith.index_cast %28 : index to i64
      %30 = llvm.inttoptr %29 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%30) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %31 = arith.addi %13, %c384 : index
      %32 = arith.index_cast %31 : index to i64
      %33 = llvm.inttoptr %32 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%33) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %34 = arith.addi %13, %c448 : index
      %35 = arith.index_cast %34 : index to i64
      %36 = llvm.inttoptr %35 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%36) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %37 = arith.addi %13, %c512 : index
      %38 = arith.index_cast %37 : index to i64
      %39 = llvm.inttoptr %38 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%39) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %40 = arith.addi %13, %c576 : index
      %41 = arith.index_cast %40 : index to i64
      %42 = llvm.inttoptr %41 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%42) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %43 = arith.addi %13, %c640 : index
      %44 = arith.index_cast %43 : index to i64
      %45 = llvm.inttoptr %44 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%45) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %46 = arith.addi %13, %c704 : index
      %47 = arith.index_cast %46 : index to i64
      %48 = llvm.inttoptr %47 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%48) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %49 = arith.addi %13, %c768 : index
      %50 = arith.index_cast %49 : index to i64
      %51 = llvm.inttoptr %50 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%51) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %52 = arith.addi %13, %c832 : index
      %53 = arith.index_cast %52 : index to i64
      %54 = llvm.inttoptr %53 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%54) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %55 = arith.addi %13, %c896 : index
      %56 = arith.index_cast %55 : index to i64
      %57 = llvm.inttoptr %56 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%57) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %58 = arith.addi %13, %c960 : index
      %59 = arith.index_cast %58 : index to i64
      %60 = llvm.inttoptr %59 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%60) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %61 = arith.addi %13, %c1024 : index
      %62 = arith.index_cast %61 : index to i64
      %63 = llvm.inttoptr %62 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%63) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %64 = arith.addi %13, %c1088 : index
      %65 = arith.index_cast %64 : index to i64
      %66 = llvm.inttoptr %65 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%66) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %67 = arith.addi %13, %c1152 : index
      %68 = arith.index_cast %67 : index to i64
      %69 = llvm.inttoptr %68 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%69) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %70 = arith.addi %13, %c1216 : index
      %71 = arith.index_cast %70 : index to i64
      %72 = llvm.inttoptr %71 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%72) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %73 = arith.addi %13, %c1280 : index
      %74 = arith.index_cast %73 : index to i64
      %75 = llvm.inttoptr %74 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%75) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %76 = arith.addi %13, %c1344 : index
      %77 = arith.index_cast %76 : index to i64
      %78 = llvm.inttoptr %77 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%78) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %79 = arith.addi %13, %c1408 : index
      %80 = arith.index_cast %79 : index to i64
      %81 = llvm.inttoptr %80 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%81) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %82 = arith.addi %13, %c1472 : index
      %83 = arith.index_cast %82 : index to i64
      %84 = llvm.inttoptr %83 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%84) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %85 = arith.addi %13, %c1536 : index
      %86 = arith.index_cast %85 : index to i64
      %87 = llvm.inttoptr %86 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%87) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %88 = arith.addi %13, %c1600 : index
      %89 = arith.index_cast %88 : index to i64
      %90 = llvm.inttoptr %89 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%90) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %91 = arith.addi %13, %c1664 : index
      %92 = arith.index_cast %91 : index to i64
      %93 = llvm.inttoptr %92 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%93) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %94 = arith.addi %13, %c1728 : index
      %95 = arith.index_cast %94 : index to i64
      %96 = llvm.inttoptr %95 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%96) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %97 = arith.addi %13, %c1792 : index
      %98 = arith.index_cast %97 : index to i64
      %99 = llvm.inttoptr %98 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%99) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %100 = arith.addi %13, %c1856 : index
      %101 = arith.index_cast %100 : index to i64
      %102 = llvm.inttoptr %101 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%102) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %103 = arith.addi %13, %c1920 : index
      %104 = arith.index_cast %103 : index to i64
      %105 = llvm.inttoptr %104 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%105) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %106 = arith.addi %13, %c1984 : index
      %107 = arith.index_cast %106 : index to i64
      %108 = llvm.inttoptr %107 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%108) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %109 = scf.for %arg8 = %c0 to %c256 step %c1 iter_args(%arg9 = %arg7) -> (f64) {
        %110 = arith.addi %arg6, %arg8 : index
        %111 = memref.load %arg0[%110] : memref<?xf64>
        %112 = arith.mulf %111, %111 : f64
        %113 = arith.addf %arg9, %112 fastmath<reassoc,contract> : f64
        scf.yield %113 : f64
      }
      scf.yield %109 : f64
    }
    %10 = scf.for %arg6 = %8 to %3 step %c1 iter_args(%arg7 = %9) -> (f64) {
      %11 = memref.load %arg0[%arg6] : memref<?xf64>
      %12 = arith.mulf %11, %11 : f64
      %13 = arith.addf %arg7, %12 fastmath<reassoc,contract> : f64
      scf.yield %13 : f64
    }
    memref.store %10, %arg2[%5] : memref<?xf64>
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
