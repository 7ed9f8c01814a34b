// PASSES: canonicalize
// KERNEL: opt_total (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// Upstream clean-up of the lane loop: the two loads of v become one (cse), x * x reads it twice.
// CHECK-LABEL: func.func @opt_total_lanes(
// (the groups' inner loop of read_groups.py first, the same in it; then the chunk's last lanes)
// CHECK: scf.for %[[K:[a-z0-9_]+]] = %c0 to %c256 step %c1 {{.+}} {
// CHECK-NEXT: %[[AT:.+]] = arith.addi %{{.+}}, %[[K]] : index
// CHECK-NEXT: %[[Y:.+]] = memref.load %arg0[%[[AT]]] : memref<?xf64>
// CHECK-NEXT: %[[YY:.+]] = arith.mulf %[[Y]], %[[Y]] : f64
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
    %11 = arith.subi %3, %1 : index
    %c256 = arith.constant 256 : index
    %12 = arith.remui %11, %c256 : index
    %13 = arith.subi %3, %12 : index
    %c256_1 = arith.constant 256 : index
    %intptr = memref.extract_aligned_pointer_as_index %arg0 : memref<?xf64> -> index
    %14 = scf.for %arg6 = %1 to %13 step %c256_1 iter_args(%arg7 = %cst) -> (f64) {
      %c1024 = arith.constant 1024 : index
      %18 = arith.addi %arg6, %c1024 : index
      %c8 = arith.constant 8 : index
      %19 = arith.muli %18, %c8 : index
      %20 = arith.addi %intptr, %19 : index
      %21 = arith.index_cast %20 : index to i64
      %22 = llvm.inttoptr %21 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%22) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c64 = arith.constant 64 : index
      %23 = arith.addi %20, %c64 : index
      %24 = arith.index_cast %23 : index to i64
      %25 = llvm.inttoptr %24 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%25) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c128 = arith.constant 128 : index
      %26 = arith.addi %20, %c128 : index
      %27 = arith.index_cast %26 : index to i64
      %28 = llvm.inttoptr %27 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%28) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c192 = arith.constant 192 : index
      %29 = arith.addi %20, %c192 : index
      %30 = arith.index_cast %29 : index to i64
      %31 = llvm.inttoptr %30 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%31) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c256_5 = arith.constant 256 : index
      %32 = arith.addi %20, %c256_5 : index
      %33 = arith.index_cast %32 : index to i64
      %34 = llvm.inttoptr %33 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%34) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c320 = arith.constant 320 : index
      %35 = arith.addi %20, %c320 : index
      %36 = arith.index_cast %35 : index to i64
      %37 = llvm.inttoptr %36 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%37) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c384 = arith.constant 384 : index
      %38 = arith.addi %20, %c384 : index
      %39 = arith.index_cast %38 : index to i64
      %40 = llvm.inttoptr %39 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%40) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c448 = arith.constant 448 : index
      %41 = arith.addi %20, %c448 : index
      %42 = arith.index_cast %41 : index to i64
      %43 = llvm.inttoptr %42 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%43) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c512 = arith.constant 512 : index
      %44 = arith.addi %20, %c512 : index
      %45 = arith.index_cast %44 : index to i64
      %46 = llvm.inttoptr %45 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%46) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c576 = arith.constant 576 : index
      %47 = arith.addi %20, %c576 : index
      %48 = arith.index_cast %47 : index to i64
      %49 = llvm.inttoptr %48 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%49) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c640 = arith.constant 640 : index
      %50 = arith.addi %20, %c640 : index
      %51 = arith.index_cast %50 : index to i64
      %52 = llvm.inttoptr %51 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%52) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c704 = arith.constant 704 : index
      %53 = arith.addi %20, %c704 : index
      %54 = arith.index_cast %53 : index to i64
      %55 = llvm.inttoptr %54 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%55) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c768 = arith.constant 768 : index
      %56 = arith.addi %20, %c768 : index
      %57 = arith.index_cast %56 : index to i64
      %58 = llvm.inttoptr %57 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%58) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c832 = arith.constant 832 : index
      %59 = arith.addi %20, %c832 : index
      %60 = arith.index_cast %59 : index to i64
      %61 = llvm.inttoptr %60 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%61) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c896 = arith.constant 896 : index
      %62 = arith.addi %20, %c896 : index
      %63 = arith.index_cast %62 : index to i64
      %64 = llvm.inttoptr %63 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%64) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c960 = arith.constant 960 : index
      %65 = arith.addi %20, %c960 : index
      %66 = arith.index_cast %65 : index to i64
      %67 = llvm.inttoptr %66 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%67) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1024_6 = arith.constant 1024 : index
      %68 = arith.addi %20, %c1024_6 : index
      %69 = arith.index_cast %68 : index to i64
      %70 = llvm.inttoptr %69 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%70) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1088 = arith.constant 1088 : index
      %71 = arith.addi %20, %c1088 : index
      %72 = arith.index_cast %71 : index to i64
      %73 = llvm.inttoptr %72 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%73) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1152 = arith.constant 1152 : index
      %74 = arith.addi %20, %c1152 : index
      %75 = arith.index_cast %74 : index to i64
      %76 = llvm.inttoptr %75 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%76) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1216 = arith.constant 1216 : index
      %77 = arith.addi %20, %c1216 : index
      %78 = arith.index_cast %77 : index to i64
      %79 = llvm.inttoptr %78 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%79) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1280 = arith.constant 1280 : index
      %80 = arith.addi %20, %c1280 : index
      %81 = arith.index_cast %80 : index to i64
      %82 = llvm.inttoptr %81 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%82) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1344 = arith.constant 1344 : index
      %83 = arith.addi %20, %c1344 : index
      %84 = arith.index_cast %83 : index to i64
      %85 = llvm.inttoptr %84 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%85) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1408 = arith.constant 1408 : index
      %86 = arith.addi %20, %c1408 : index
      %87 = arith.index_cast %86 : index to i64
      %88 = llvm.inttoptr %87 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%88) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1472 = arith.constant 1472 : index
      %89 = arith.addi %20, %c1472 : index
      %90 = arith.index_cast %89 : index to i64
      %91 = llvm.inttoptr %90 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%91) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1536 = arith.constant 1536 : index
      %92 = arith.addi %20, %c1536 : index
      %93 = arith.index_cast %92 : index to i64
      %94 = llvm.inttoptr %93 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%94) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1600 = arith.constant 1600 : index
      %95 = arith.addi %20, %c1600 : index
      %96 = arith.index_cast %95 : index to i64
      %97 = llvm.inttoptr %96 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%97) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1664 = arith.constant 1664 : index
      %98 = arith.addi %20, %c1664 : index
      %99 = arith.index_cast %98 : index to i64
      %100 = llvm.inttoptr %99 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%100) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1728 = arith.constant 1728 : index
      %101 = arith.addi %20, %c1728 : index
      %102 = arith.index_cast %101 : index to i64
      %103 = llvm.inttoptr %102 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%103) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1792 = arith.constant 1792 : index
      %104 = arith.addi %20, %c1792 : index
      %105 = arith.index_cast %104 : index to i64
      %106 = llvm.inttoptr %105 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%106) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1856 = arith.constant 1856 : index
      %107 = arith.addi %20, %c1856 : index
      %108 = arith.index_cast %107 : index to i64
      %109 = llvm.inttoptr %108 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%109) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1920 = arith.constant 1920 : index
      %110 = arith.addi %20, %c1920 : index
      %111 = arith.index_cast %110 : index to i64
      %112 = llvm.inttoptr %111 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%112) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c1984 = arith.constant 1984 : index
      %113 = arith.addi %20, %c1984 : index
      %114 = arith.index_cast %113 : index to i64
      %115 = llvm.inttoptr %114 : i64 to !llvm.ptr
      "llvm.intr.prefetch"(%115) <{cache = 1 : i32, hint = 3 : i32, rw = 0 : i32}> : (!llvm.ptr) -> ()
      %c0_7 = arith.constant 0 : index
      %c256_8 = arith.constant 256 : index
      %c1_9 = arith.constant 1 : index
      %116 = scf.for %arg8 = %c0_7 to %c256_8 step %c1_9 iter_args(%arg9 = %arg7) -> (f64) {
        %117 = arith.addi %arg6, %arg8 : index
        %118 = memref.load %arg0[%117] : memref<?xf64>
        %119 = memref.load %arg0[%117] : memref<?xf64>
        %120 = arith.mulf %118, %119 : f64
        %121 = arith.addf %arg9, %120 fastmath<reassoc,contract> : f64
        scf.yield %121 : f64
      } {hawk.lanes}
      scf.yield %116 : f64
    }
    %c1_2 = arith.constant 1 : index
    %15 = scf.for %arg6 = %13 to %3 step %c1_2 iter_args(%arg7 = %14) -> (f64) {
      %18 = memref.load %arg0[%arg6] : memref<?xf64>
      %19 = memref.load %arg0[%arg6] : memref<?xf64>
      %20 = arith.mulf %18, %19 : f64
      %21 = arith.addf %arg7, %20 fastmath<reassoc,contract> : f64
      scf.yield %21 : f64
    } {hawk.lanes}
    %c1_3 = arith.constant 1 : index
    %16 = arith.muli %5, %c1_3 : index
    %c0_4 = arith.constant 0 : index
    %17 = arith.addi %16, %c0_4 : index
    memref.store %15, %arg2[%17] : memref<?xf64>
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
