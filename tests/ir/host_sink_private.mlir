// PASSES: lower-host-lanes
// KERNEL: opt_hist (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// Sink privatisation: each chunk adds (sum, correction) pairs into its own copy (bins:priv, %arg4); the finish
// merges the copies per slot in chunk order into the companion (bins:comp, %arg3), then folds that into the sink.
// CHECK: module attributes {hawk.layout = {buffers = ["k:index:i32", "x:in:f", "bins:sink:f", "bins:comp:f64", "bins:priv:f64", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"]
// CHECK-SAME: private = {{\[\["bins", 8\]\]}}
// CHECK-LABEL: func.func @opt_hist_lanes(
// CHECK: scf.for %[[LANE:[a-z0-9_]+]] =
// CHECK:   memref.load %arg0[%[[LANE]]] : memref<?xi32>
// CHECK:   arith.extsi %{{.+}} : i32 to i64
// CHECK:   scf.if
// CHECK:     memref.store %{{.+}}, %arg4[%{{.+}}] : memref<?xf64>
// CHECK:     memref.store %{{.+}}, %arg4[%{{.+}}] : memref<?xf64>
// CHECK:   } else {
// CHECK:     memref.store %{{.+}}, %arg8[%{{.+}}] : memref<?xi64>
// CHECK-LABEL: func.func @opt_hist_finish(
// CHECK: scf.for %[[CHUNK:[a-z0-9_]+]] = %{{.+}} to %{{.+}} step
// CHECK:   scf.for %[[SLOT:[a-z0-9_]+]] = %{{.+}} to %c8
// CHECK:     memref.load %arg3[%[[SLOT]]] : memref<?xf64>
// CHECK:     memref.load %arg4[
// CHECK:     memref.store %{{.+}}, %arg3[%[[SLOT]]] : memref<?xf64>
// CHECK: scf.for
// CHECK:   memref.load %arg3
// CHECK:   memref.store %{{.+}}, %arg2[%{{.+}}] : memref<?xf64>

module {
  func.func @opt_hist(%arg0: !hawk.plane<i32, array<i64>, ["sample"]> {hawk.name = "k"}, %arg1: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "x"}, %arg2: !hawk.sink<f64, array<i64>, ["bin"]> {hawk.name = "bins"}) attributes {hawk.axes = ["sample"], hawk.kernel, hawk.layout = {buffers = ["k:index:i32", "x:in:f", "bins:sink:f", "bins:comp:f64", "bins:priv:f64", "#scratch:scratch:f64", "#exact:exact:i64", "#meta:meta:i64", "#err:err:i64"], cells_in = [], cells_out = [], fold_keys = {bins = "k"}, index_keys = [["k", [["bins", 0]]]], name = "opt_hist", outputs = [], private = [["bins", 8]], reductions = [], signature = {planes = [{axes = [], kind = "index", name = "k", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [["bin", 8]], kind = "sink", name = "bins", payload = [], sorted = false}], returns}, sink_policy = [["bins", "compensated"]], sinks = [["bins", []]], stored = []}, hawk.outputs = [], hawk.signature = {planes = [{axes = [], kind = "index", name = "k", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [["bin", 8]], kind = "sink", name = "bins", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {k = i32}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<i32, array<i64>, ["sample"]>) -> i32
    %1 = arith.extsi %0 : i32 to i64
    %2 = "hawk.load"(%arg1) : (!hawk.plane<f64, array<i64>, ["sample"]>) -> f64
    "hawk.scatter"(%arg2, %2, %1) {mode = "add", policy = "auto"} : (!hawk.sink<f64, array<i64>, ["bin"]>, f64, i64) -> ()
    return
  }
}
