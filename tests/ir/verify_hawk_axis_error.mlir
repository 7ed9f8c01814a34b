// PASSES: verify-hawk
// ERROR
// Written by hand: a lane extent (hawk.extent) of an axis the kernel does not have is refused with one line.
// CHECK: hawk-opt: error: {{.*}}verify_hawk_axis_error.mlir:13: kernel 'bad_axis': {{.*}}hawk.extent names axis 'col'; the kernel's lane axes are ['row']
// CHECK-NOT: Traceback

module {
  func.func @bad_axis(%x: !hawk.plane<f64, array<i64>, ["row"]> {hawk.name = "x"},
                      %y: !hawk.output<f64, array<i64>, ["row"]> {hawk.name = "y"})
      attributes {hawk.axes = ["row"], hawk.kernel} {
    %v = "hawk.load"(%x) : (!hawk.plane<f64, array<i64>, ["row"]>) -> f64
    %n = "hawk.extent"() {axis = "row"} : () -> i64
    %c = "hawk.extent"() {axis = "col"} : () -> i64
    %s = arith.addi %n, %c : i64
    %f = arith.sitofp %s : i64 to f64
    %w = arith.mulf %v, %f : f64
    "hawk.store"(%y, %w) : (!hawk.output<f64, array<i64>, ["row"]>, f64) -> ()
    return
  }
}
