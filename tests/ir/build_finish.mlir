// PASSES: build-finish
// KERNEL: opt_mean (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// build-finish alone: @<k>_finish is added after the kernel func, which stays as it was (hawk ops and all) for
// the lanes' lowering; the layout moves onto the module. A masked mean's finish adds the chunks' (sum, count)
// partials from #scratch (%arg3) in chunk order and divides once into the cell (%arg2).
// CHECK: module attributes {hawk.layout = {buffers = ["x:in:f", "w:in:f", "avg:cell:f", "#scratch:scratch:f64"
// CHECK: func.func @opt_mean(
// CHECK:   "hawk.reduce"(%{{.+}}) {kind = "mean", over = ["sample"], policy = "auto"}
// CHECK:   "hawk.cell"(%arg2
// CHECK-LABEL: func.func @opt_mean_finish(%arg0: memref<?xf64>, %arg1: memref<?xf64>, %arg2: memref<?xf64>, %arg3: memref<?xf64>
// CHECK-NOT: hawk.
// CHECK: %[[CHUNKS:.+]] = arith.index_cast %{{.+}} : i64 to index
// CHECK: %[[T:.+]]:2 = scf.for %[[C:[a-z0-9_]+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args({{.+}}) -> (f64, f64) {
// CHECK:   memref.load %arg3
// CHECK:   memref.load %arg3
// CHECK: %[[M:.+]] = arith.divf %[[T]]#0, %[[T]]#1 : f64
// CHECK: memref.store %[[M]], %arg2[%{{.+}}] : memref<?xf64>
// CHECK-NOT: func.func @opt_mean_lanes

module {
  func.func @opt_mean(%arg0: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"}, %arg1: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "w"}, %arg2: !hawk.total<f64, array<i64>, []> {hawk.name = "avg"}) attributes {hawk.axes = ["sample"], hawk.kernel, hawk.layout = {buffers = ["x:in:f", "w:in:f", "avg:cell:f", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], index_keys = [], name = "opt_mean", outputs = [["avg", "cell"]], private = [], reductions = [{cell = "avg", kept = [], kind = "mean", masked = true, over = ["sample"], payload = [], policy = "auto"}], signature = {planes = [{axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "lane", name = "w", payload = [], sorted = false}, {axes = [], kind = "output", name = "avg", payload = [], sorted = false}], returns}, sink_policy = [], sinks = [], stored = []}, hawk.outputs = [["avg", "cell"]], hawk.signature = {planes = [{axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "lane", name = "w", payload = [], sorted = false}, {axes = [], kind = "output", name = "avg", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %1 = "hawk.load"(%arg1) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %cst = arith.constant 0.000000e+00 : f64
    %2 = arith.cmpf ogt, %1, %cst : f64
    %3 = "hawk.reduce"(%0, %2) {kind = "mean", over = ["sample"], policy = "auto"} : (f64, i1) -> f64
    "hawk.cell"(%arg2, %3) : (!hawk.total<f64, array<i64>, []>, f64) -> ()
    return
  }
}
