// PASSES: verify-hawk
// ERROR
// Written by hand: a reduction inside a for loop is refused with one line naming the kernel.
// CHECK: hawk-opt: error: {{.*}}verify_hawk_error.mlir:16: kernel 'bad_loop': {{.*}}may not sit inside a for loop
// CHECK-NOT: Traceback

module {
  func.func @bad_loop(%x: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"},
                      %s: !hawk.total<f64, array<i64>, []> {hawk.name = "s"})
      attributes {hawk.axes = ["sample"], hawk.kernel} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    scf.for %i = %c0 to %c3 step %c1 {
      %v = "hawk.load"(%x) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
      %t = "hawk.reduce"(%v) {kind = "sum", over = ["sample"], policy = "auto"} : (f64) -> f64
      "hawk.cell"(%s, %t) : (!hawk.total<f64, array<i64>, []>, f64) -> ()
    }
    return
  }
}
