// PASSES: split-stages
// KERNEL: opt_softmax (input written by tests/ir/make_inputs.py; edit the CHECK lines, not the IR)
// A softmax over the trailing axis "col" (16 lanes per row): both reductions are block reductions (trailing axes,
// fixed extents, at most 1024 lanes per kept slot), so reading them makes no stage boundary. split-stages leaves
// one func (no hawk.stage facts, no cut cells) and turns each read reduction into hawk.block_reduce.
// CHECK-LABEL: func.func @opt_softmax(
// CHECK-NOT: hawk.total
// CHECK-NOT: hawk.stage
// CHECK: %[[TOP:.+]] = "hawk.block_reduce"(%{{.+}}) {kind = "max", over = ["col"], policy = "auto"}
// CHECK: %[[D:.+]] = arith.subf %{{.+}}, %[[TOP]]
// CHECK: %[[EX:.+]] = math.exp %[[D]]
// CHECK: %[[S:.+]] = "hawk.block_reduce"(%{{.+}}) {kind = "sum", over = ["col"], policy = "auto"}
// CHECK: arith.divf %{{.+}}, %[[S]]
// CHECK-NOT: "hawk.reduce"
// CHECK-NOT: hawk.cut_read
// CHECK-NOT: func.func

module {
  func.func @opt_softmax(%arg0: !hawk.plane<f64, array<i64>, ["row", "col"]> {hawk.name = "x"}, %arg1: !hawk.output<f64, array<i64>, ["row", "col"]> {hawk.name = "z"}) attributes {hawk.axes = ["row", "col"], hawk.kernel, hawk.outputs = [["z", "lane"]], hawk.signature = {planes = [{axes = [["row", unit], ["col", 16]], kind = "grid", name = "g", payload = [], sorted = false}, {axes = [], kind = "lane", name = "x", payload = [], sorted = false}, {axes = [], kind = "output", name = "z", payload = [], sorted = false}], returns}, hawk.spec = {float = f64, index = {}}} {
    %0 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["row", "col"]>) -> f64
    %1 = "hawk.reduce"(%0) {kind = "max", over = ["col"], policy = "auto"} : (f64) -> f64
    %2 = "hawk.load"(%arg0) : (!hawk.plane<f64, array<i64>, ["row", "col"]>) -> f64
    %3 = arith.subf %2, %1 : f64
    %4 = math.exp %3 : f64
    %5 = "hawk.reduce"(%4) {kind = "sum", over = ["col"], policy = "auto"} : (f64) -> f64
    %6 = arith.divf %4, %5 : f64
    "hawk.store"(%arg1, %6) : (!hawk.output<f64, array<i64>, ["row", "col"]>, f64) -> ()
    return
  }
}
