// PASSES: lower-gpu-lanes{subgroup=0 atomics=false wide=false}
// KERNEL: opt_compensated (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// Tree form (no sinks, nothing kept, no ordered sum): a workgroup's threads take every 64th lane of its span,
// their (sum, correction) partials meet pairwise in workgroup memory, 6 levels with a barrier each; thread 0
// writes the group's partials. The host finish stays beside the gpu.module.
// CHECK: module attributes {gpu.container_module, hawk.layout = {
// CHECK: gpu.module @opt_compensated_gpu
// CHECK: gpu.func @opt_compensated_lanes(
// CHECK-SAME: workgroup(%{{.+}} : memref<128xf64, #gpu.address_space<workgroup>>)
// CHECK-SAME: kernel
// CHECK: %[[TID:.+]] = gpu.thread_id x
// CHECK: scf.for {{.+}} step %c64
// CHECK-COUNT-6: gpu.barrier
// CHECK: arith.cmpi eq, %[[TID]]
// CHECK: gpu.return
// CHECK: func.func @opt_compensated_finish(

module {
  func.func @opt_compensated(%arg0: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"}, %arg1: !hawk.total<f64, array<i64>, []> {hawk.name = "t"}) attributes {hawk.axes = ["sample"], hawk.kernel, hawk.layout = {buffers = ["x:in:f", "t:cell:f", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], index_keys = [], name = "opt_compensated", outputs = [["t", "cell"]], private = [], reductions = [{cell = "t", kept = [], kind = "sum", masked = false, over = ["sample"], payload = [], policy = "compensated"}], signature = {planes = [{axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "output", name = "t", payload = [], sorted = false}], returns}, sink_policy = [], sinks = [], stored = []}, hawk.outputs = [["t", "cell"]], hawk.signature = {planes = [{axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "output", name = "t", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    %1 = "hawk.reduce"(%0) {kind = "sum", over = ["sample"], policy = "compensated"} : (f64) -> f64
    "hawk.cell"(%arg1, %1) : (!hawk.total<f64, array<i64>, []>, f64) -> ()
    return
  }
}
