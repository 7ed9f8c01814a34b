// PASSES: scalarize-payloads
// Written by hand (the pass reads only the loops' hawk.lanes marks): in a marked lane loop, payload arithmetic
// (selects, compares and math too) becomes one scalar op per component between vector.extract and
// vector.from_elements; a loop that carries a vector from lane to lane, an unmarked loop and a vector wider than a
// narrow payload keep their vector ops; exp on a payload is split wherever it is (expand-math then expands each).
// CHECK-LABEL: func.func @marked(
// CHECK: scf.for
// CHECK-NOT: hawk.lanes
// CHECK-DAG: %[[A0:.+]] = vector.extract %{{.+}}[0] : f64 from vector<3xf64>
// CHECK-DAG: %[[S0:.+]] = arith.mulf %[[A0]], %{{.+}} : f64
// CHECK-DAG: arith.mulf {{.+}} : f64
// CHECK-DAG: arith.mulf {{.+}} : f64
// CHECK: vector.from_elements {{.+}} : vector<3xf64>
// CHECK-COUNT-3: arith.cmpf olt, {{.+}} : f64
// CHECK: vector.from_elements {{.+}} : vector<3xi1>
// CHECK-COUNT-3: arith.select {{.+}} : f64
// CHECK: vector.from_elements {{.+}} : vector<3xf64>
// CHECK-COUNT-3: math.sqrt {{.+}} : f64
// CHECK-NOT: arith.mulf {{.+}} : vector<3xf64>
// CHECK: vector.store
// CHECK-LABEL: func.func @carried(
// CHECK: arith.addf {{.+}} : vector<3xf64>
// CHECK-LABEL: func.func @unmarked(
// CHECK: arith.mulf {{.+}} : vector<3xf64>
// CHECK-COUNT-3: math.exp {{.+}} : f64
// CHECK-LABEL: func.func @wide(
// CHECK: arith.mulf {{.+}} : vector<16xf64>

module {
  func.func @marked(%buf: memref<?xf64>, %lo: index, %hi: index, %s: f64) {
    %c1 = arith.constant 1 : index
    scf.for %i = %lo to %hi step %c1 {
      %v = vector.load %buf[%i] : memref<?xf64>, vector<3xf64>
      %b = vector.broadcast %s : f64 to vector<3xf64>
      %p = arith.mulf %v, %b : vector<3xf64>
      %lt = arith.cmpf olt, %p, %v : vector<3xf64>
      %m = arith.select %lt, %p, %v : vector<3xi1>, vector<3xf64>
      %r = math.sqrt %m : vector<3xf64>
      vector.store %r, %buf[%i] : memref<?xf64>, vector<3xf64>
    } {hawk.lanes}
    return
  }
  func.func @carried(%buf: memref<?xf64>, %lo: index, %hi: index) -> vector<3xf64> {
    %c1 = arith.constant 1 : index
    %z = arith.constant dense<0.0> : vector<3xf64>
    %t = scf.for %i = %lo to %hi step %c1 iter_args(%acc = %z) -> (vector<3xf64>) {
      %v = vector.load %buf[%i] : memref<?xf64>, vector<3xf64>
      %n = arith.addf %acc, %v : vector<3xf64>
      scf.yield %n : vector<3xf64>
    } {hawk.lanes}
    return %t : vector<3xf64>
  }
  func.func @unmarked(%buf: memref<?xf64>, %lo: index, %hi: index) {
    %c1 = arith.constant 1 : index
    scf.for %i = %lo to %hi step %c1 {
      %v = vector.load %buf[%i] : memref<?xf64>, vector<3xf64>
      %p = arith.mulf %v, %v : vector<3xf64>
      %e = math.exp %p : vector<3xf64>
      vector.store %e, %buf[%i] : memref<?xf64>, vector<3xf64>
    }
    return
  }
  func.func @wide(%buf: memref<?xf64>, %lo: index, %hi: index) {
    %c1 = arith.constant 1 : index
    scf.for %i = %lo to %hi step %c1 {
      %v = vector.load %buf[%i] : memref<?xf64>, vector<16xf64>
      %p = arith.mulf %v, %v : vector<16xf64>
      vector.store %p, %buf[%i] : memref<?xf64>, vector<16xf64>
    } {hawk.lanes}
    return
  }
}
