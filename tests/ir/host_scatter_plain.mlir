// PASSES: lower-host-lanes
// KERNEL: opt_hist_plain (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// A plain scatter into a small sink: each chunk adds into its own copy at chunk * 8 + slot (bins:priv, %arg3),
// one float a slot, no companion; a key out of range is counted in #err; the finish adds the copies into the
// sink slot by slot in chunk order, unreassociated.
// CHECK: module attributes {hawk.layout = {buffers = ["k:index:i32", "x:in:f", "bins:sink:f", "bins:priv:f", "#scratch:scratch:f64"
// CHECK-SAME: sink_policy = {{\[\["bins", "plain"\]\]}}
// CHECK-LABEL: func.func @opt_hist_plain_lanes(
// CHECK: scf.for %[[LANE:[a-z0-9_]+]] =
// CHECK:   %[[X:.+]] = memref.load %arg1[%[[LANE]]] : memref<?xf64>
// CHECK:   scf.if
// CHECK:     %[[AT:.+]] = arith.addi %{{.+}}, %{{.+}} : index
// CHECK:     %[[OLD:.+]] = memref.load %arg3[%[[AT]]] : memref<?xf64>
// CHECK:     %[[NEW:.+]] = arith.addf %[[OLD]], %[[X]] : f64
// CHECK:     memref.store %[[NEW]], %arg3[%[[AT]]] : memref<?xf64>
// CHECK:   } else {
// CHECK:     memref.store %{{.+}}, %arg7[
// CHECK-LABEL: func.func @opt_hist_plain_finish(
// CHECK-NOT: reassoc
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step
// CHECK:   scf.for %[[SLOT:[a-z0-9_]+]] = %{{.+}} to %c8
// CHECK:     %[[OLD:.+]] = memref.load %arg2[%[[SLOT]]] : memref<?xf64>
// CHECK:     %[[PART:.+]] = memref.load %arg3[
// CHECK:     %[[S:.+]] = arith.addf %[[OLD]], %[[PART]] : f64
// CHECK:     memref.store %[[S]], %arg2[%[[SLOT]]] : memref<?xf64>

module {
  func.func @opt_hist_plain(%arg0: !hawk.plane<i32, array<i64>, ["sample"]> {hawk.name = "k"}, %arg1: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"}, %arg2: !hawk.sink<f64, array<i64>, ["bin"]> {hawk.name = "bins"}) attributes {hawk.axes = ["sample"], hawk.kernel, hawk.layout = {buffers = ["k:index:i32", "x:in:f", "bins:sink:f", "bins:priv:f", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], fold_keys = {bins = "k"}, index_keys = [["k", [["bins", 0]]]], name = "opt_hist_plain", outputs = [], private = [["bins", 8]], reductions = [], signature = {planes = [{axes = [], kind = "index", name = "k", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [["bin", 8]], kind = "sink", name = "bins", payload = [], sorted = false}], returns}, sink_policy = [["bins", "plain"]], sinks = [["bins", []]], stored = []}, hawk.outputs = [], hawk.signature = {planes = [{axes = [], kind = "index", name = "k", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [["bin", 8]], kind = "sink", name = "bins", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {k = i32}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<i32, array<i64>, ["sample"]>) -> i32
    %1 = arith.extsi %0 : i32 to i64
    %2 = "hawk.load"(%arg1) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    "hawk.scatter"(%arg2, %2, %1) {mode = "add", policy = "plain"} : (!hawk.sink<f64, array<i64>, ["bin"]>, f64, i64) -> ()
    return
  }
}
