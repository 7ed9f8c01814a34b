// PASSES: lower-gpu-lanes{subgroup=0 atomics=false wide=tree}
// KERNEL: opt_softmax (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// The "blocks" form (hawk.abi.layout.block_tree: block reductions of one span, nothing else across lanes): each
// workgroup runs rounds of 4 rows (64 lanes), 16 threads a row. Per round, the threads fold their lanes' max,
// meet in a pairwise tree in workgroup memory (barriers every thread reaches), read the row's max; the same
// for the sum of exp(x - max); then each thread runs the body for its lanes with both totals in registers.
// CHECK: gpu.func @opt_softmax_lanes(
// CHECK-SAME: workgroup(%[[TOPS:.+]] : memref<64xf64, #gpu.address_space<workgroup>>, %[[SUMS:.+]] : memref<64xf64, #gpu.address_space<workgroup>>)
// CHECK-SAME: kernel
// CHECK: scf.for %[[ROUND:.+]] = %{{.+}} to %{{.+}} step
// CHECK: %[[MAX:.+]] = scf.for %{{.+}} iter_args(%{{.+}} = %{{.+}}) -> (f64)
// CHECK: memref.store %[[MAX]], %[[TOPS]]
// CHECK-COUNT-4: gpu.barrier
// CHECK: gpu.barrier
// CHECK: memref.load %[[TOPS]]
// CHECK: gpu.barrier
// CHECK: %[[SUM:.+]] = scf.for %{{.+}} iter_args(%{{.+}} = %{{.+}}) -> (f64)
// CHECK: math.exp
// CHECK: memref.store %[[SUM]], %[[SUMS]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[SUMS]]
// CHECK: scf.for
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: gpu.return

module {
  func.func @opt_softmax(%arg0: !hawk.plane<f64, array<i64>, ["row", "col"]> {hawk.name = "x"}, %arg1: !hawk.output<f64, array<i64>, ["row", "col"]> {hawk.name = "z"}) attributes {hawk.axes = ["row", "col"], hawk.kernel, hawk.layout = {blocks = [[16, "max", "auto"], [16, "sum", "auto"]], buffers = ["x:in:f", "z:out:f", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], index_keys = [], name = "opt_softmax", outputs = [["z", "lane"]], private = [], reductions = [], signature = {planes = [{axes = [["row", unit], ["col", 16]], kind = "grid", name = "g", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "output", name = "z", payload = [], sorted = false}], returns}, sink_policy = [], sinks = [], stored = []}, hawk.outputs = [["z", "lane"]], hawk.signature = {planes = [{axes = [["row", unit], ["col", 16]], kind = "grid", name = "g", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "output", name = "z", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["row", "col"]>) -> f64
    %1 = "hawk.block_reduce"(%0) {kind = "max", over = ["col"], policy = "auto"} : (f64) -> f64
    %2 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["row", "col"]>) -> f64
    %3 = arith.subf %2, %1 : f64
    %4 = math.exp %3 : f64
    %5 = "hawk.block_reduce"(%4) {kind = "sum", over = ["col"], policy = "auto"} : (f64) -> f64
    %6 = arith.divf %4, %5 : f64
    "hawk.store"(%arg1, %6) : (!hawk.output<f64, array<i64>, ["row", "col"]>, f64) -> ()
    return
  }
}
