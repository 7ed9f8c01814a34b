// TARGET: nvvm
// KERNEL: opt_hist (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// The nvvm target's whole default pipeline from the hawk IR (warp shuffles, float atomics, wide loops): the
// gpu.module in upstream dialects beside the host finish in the LLVM dialect, the layout on the module.
// CHECK: module attributes {gpu.container_module, hawk.layout = {buffers = ["k:index:i32", "x:in:f", "bins:sink:f"
// CHECK: llvm.func @opt_hist_finish(
// CHECK: gpu.module @opt_hist_gpu {
// CHECK: gpu.func @opt_hist_lanes(
// CHECK-SAME: kernel
// CHECK: gpu.return

module {
  func.func @opt_hist(%arg0: !hawk.plane<i32, array<i64>, ["sample"]> {hawk.name = "k"}, %arg1: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"}, %arg2: !hawk.sink<f64, array<i64>, ["bin"]> {hawk.name = "bins"}) attributes {hawk.axes = ["sample"], hawk.kernel, hawk.outputs = [], hawk.signature = {planes = [{axes = [], kind = "index", name = "k", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [["bin", 8]], kind = "sink", name = "bins", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {k = i32}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<i32, array<i64>, ["sample"]>) -> i32
    %1 = arith.extsi %0 : i32 to i64
    %2 = "hawk.load"(%arg1) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    "hawk.scatter"(%arg2, %2, %1) {mode = "add", policy = "auto"} : (!hawk.sink<f64, array<i64>, ["bin"]>, f64, i64) -> ()
    return
  }
}
