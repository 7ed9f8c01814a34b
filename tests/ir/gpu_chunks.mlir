// PASSES: lower-gpu-lanes{subgroup=0 atomics=false wide=false}
// KERNEL: opt_hist (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// Chunk form (a stage with a scatter): a chunk of lanes per global thread, run as a host chunk runs it, into the
// chunk's private copy of the sink; a thread past the last chunk does nothing.
// CHECK: gpu.func @opt_hist_lanes(
// CHECK-NOT: workgroup(
// CHECK-SAME: kernel
// CHECK-DAG: gpu.thread_id x
// CHECK-DAG: gpu.block_id x
// CHECK-DAG: gpu.block_dim x
// CHECK: scf.if
// CHECK: gpu.return
// CHECK: func.func @opt_hist_finish(

module {
  func.func @opt_hist(%arg0: !hawk.plane<i32, array<i64>, ["sample"]> {hawk.name = "k"}, %arg1: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"}, %arg2: !hawk.sink<f64, array<i64>, ["bin"]> {hawk.name = "bins"}) attributes {hawk.axes = ["sample"], hawk.kernel, hawk.layout = {buffers = ["k:index:i32", "x:in:f", "bins:sink:f", "bins:comp:f64", "bins:priv:f64", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], fold_keys = {bins = "k"}, index_keys = [["k", [["bins", 0]]]], name = "opt_hist", outputs = [], private = [["bins", 8]], reductions = [], signature = {planes = [{axes = [], kind = "index", name = "k", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [["bin", 8]], kind = "sink", name = "bins", payload = [], sorted = false}], returns}, sink_policy = [["bins", "compensated"]], sinks = [["bins", []]], stored = []}, hawk.outputs = [], hawk.signature = {planes = [{axes = [], kind = "index", name = "k", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [["bin", 8]], kind = "sink", name = "bins", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {k = i32}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<i32, array<i64>, ["sample"]>) -> i32
    %1 = arith.extsi %0 : i32 to i64
    %2 = "hawk.load"(%arg1) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    "hawk.scatter"(%arg2, %2, %1) {mode = "add", policy = "auto"} : (!hawk.sink<f64, array<i64>, ["bin"]>, f64, i64) -> ()
    return
  }
}
