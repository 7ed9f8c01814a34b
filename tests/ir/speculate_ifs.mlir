// PASSES: speculate-ifs
// Written by hand (the pass works on any scf.if): a branch of pure float ops becomes both arms and a select;
// one that divides integers (which could fault for a lane that does not take it) stays a branch, and so does one
// that stores a vector (a store the lane does not reach must not happen: it wrote past a stack buffer once).
// CHECK-LABEL: func.func @pure(
// CHECK-NOT: scf.if
// CHECK-DAG: %[[S:.+]] = arith.addf %arg1, %arg2 : f64
// CHECK-DAG: %[[P:.+]] = arith.mulf %arg1, %arg2 : f64
// CHECK: %[[R:.+]] = arith.select %arg0, %[[S]], %[[P]] : f64
// CHECK: return %[[R]] : f64
// CHECK-LABEL: func.func @divides(
// CHECK: scf.if %arg0 -> (i64)
// CHECK: arith.floordivsi
// CHECK-NOT: arith.select
// CHECK-LABEL: func.func @stores(
// CHECK: scf.if %arg0 -> (f64)
// CHECK: vector.store
// CHECK-NOT: arith.select

module {
  func.func @pure(%c: i1, %a: f64, %b: f64) -> f64 {
    %r = scf.if %c -> (f64) {
      %s = arith.addf %a, %b : f64
      scf.yield %s : f64
    } else {
      %p = arith.mulf %a, %b : f64
      scf.yield %p : f64
    }
    return %r : f64
  }
  func.func @divides(%c: i1, %a: i64, %b: i64) -> i64 {
    %r = scf.if %c -> (i64) {
      %q = arith.floordivsi %a, %b : i64
      scf.yield %q : i64
    } else {
      scf.yield %a : i64
    }
    return %r : i64
  }
  func.func @stores(%c: i1, %a: f64, %buf: memref<16xf64>, %at: index) -> f64 {
    %r = scf.if %c -> (f64) {
      %v = vector.broadcast %a : f64 to vector<8xf64>
      vector.store %v, %buf[%at] : memref<16xf64>, vector<8xf64>
      scf.yield %a : f64
    } else {
      scf.yield %a : f64
    }
    return %r : f64
  }
}
