"""The hawk IR the front end builds for a kernel (`kernel.mlir()`), checked with FileCheck."""

import re

import pytest

import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar, Table, Vector


def _named(text: str) -> str:
    """The IR with the kernel func's block arguments shown by their hawk.name (%arg0 -> %x), for readable checks."""
    header = next(line for line in text.splitlines() if "hawk.kernel" in line and "func.func" in line)
    names = dict(re.findall(r'%(arg\d+): [^{]*\{hawk.name = "(\w+)"\}', header))
    return re.sub(r"%(arg\d+)\b", lambda mt: "%" + names.get(mt.group(1), mt.group(1)), text)


# ------------------------------------------------------------------ reductions: where= and over=


@hawk.kernel
def ir_positive_total(v: Scalar, w: Scalar) -> Scalar:
    return hawk.sum(v * w, where=v > 0.0)


POSITIVE_TOTAL = """
# CHECK-LABEL: func.func @ir_positive_total(
# CHECK-SAME: %v: !hawk.plane<f64, array<i64>, ["sample"]> {hawk.name = "v"}
# CHECK-SAME: %result: !hawk.total<f64, array<i64>, []> {hawk.name = "result"}
# CHECK-SAME: attributes {hawk.axes = ["sample"], hawk.kernel
# CHECK-DAG: %[[V:.+]] = "hawk.load"(%v) : ({{.+}}) -> f64
# CHECK-DAG: %[[W:.+]] = "hawk.load"(%w) : ({{.+}}) -> f64
# CHECK: %[[VW:.+]] = arith.mulf %[[V]], %[[W]] : f64
# CHECK: %[[MASK:.+]] = arith.cmpf ogt, %{{.+}}, %{{.+}} : f64
# CHECK: %[[T:.+]] = "hawk.reduce"(%[[VW]], %[[MASK]])
# CHECK-SAME: {kind = "sum", over = ["sample"], policy = "auto"} : (f64, i1) -> f64
# CHECK: "hawk.cell"(%result, %[[T]]) : ({{.+}}, f64) -> ()
# CHECK-NEXT: return
"""


def test_sum_with_where_has_a_mask_operand(filecheck):
    filecheck(_named(ir_positive_total.mlir()), POSITIVE_TOTAL)


@hawk.kernel
def ir_unmasked_mean(v: Scalar, avg: Mutable[Scalar]):
    avg = hawk.mean(v, policy="ordered")


UNMASKED_MEAN = """
# CHECK: %[[V:.+]] = "hawk.load"(%v) : ({{.+}}) -> f64
# CHECK-NEXT: %[[T:.+]] = "hawk.reduce"(%[[V]]) {kind = "mean", over = ["sample"], policy = "ordered"}
# CHECK-SAME: : (f64) -> f64
# CHECK-NEXT: "hawk.cell"(%avg, %[[T]])
"""


def test_reduction_without_where_has_one_operand(filecheck):
    filecheck(_named(ir_unmasked_mean.mlir()), UNMASKED_MEAN)


@hawk.kernel
def ir_over_one(g: Grid["run", "step":5, "ch":3], v: Scalar) -> Scalar:
    return hawk.max(v, over="step")


@hawk.kernel
def ir_over_pair(g: Grid["run", "step":5, "ch":3], v: Scalar) -> Scalar:
    return hawk.min(v, over=("ch", 0))  # a label and a position, listed back in grid order


@hawk.kernel
def ir_over_last(g: Grid["run", "step":5, "ch":3], v: Scalar, lo: Mutable[Scalar], hi: Mutable[Scalar]):
    lo = hawk.sum(v, over=-1)
    hi = hawk.mean(v)


@pytest.mark.parametrize("kernel, checks", [
    (ir_over_one, '# CHECK: "hawk.reduce"(%{{.+}}) {kind = "max", over = ["step"], policy = "auto"}'),
    (ir_over_pair, '# CHECK: "hawk.reduce"(%{{.+}}) {kind = "min", over = ["run", "ch"], policy = "auto"}'),
    (ir_over_last, """
        # CHECK: %[[LO:.+]] = "hawk.reduce"(%{{.+}}) {kind = "sum", over = ["ch"], policy = "auto"}
        # CHECK: %[[HI:.+]] = "hawk.reduce"(%{{.+}}) {kind = "mean", over = ["run", "step", "ch"], policy = "auto"}
        # CHECK-DAG: "hawk.cell"(%lo, %[[LO]])
        # CHECK-DAG: "hawk.cell"(%hi, %[[HI]])
        """),
], ids=["label", "label-and-position", "last-and-default"])
def test_over_lists_the_reduced_axes(kernel, checks, filecheck):
    filecheck(_named(kernel.mlir()), checks)


@hawk.kernel
def ir_vector_total(p: Vector[3]) -> Vector[3]:
    return hawk.sum(p * 2.0)


VECTOR_TOTAL = """
# CHECK: %[[P:.+]] = "hawk.load"(%p) : ({{.+}}) -> vector<3xf64>
# CHECK: %[[T:.+]] = "hawk.reduce"(%{{.+}}) {kind = "sum", over = ["sample"], policy = "auto"}
# CHECK-SAME: : (vector<3xf64>) -> vector<3xf64>
"""


def test_vector_payload_reduces_as_a_vector(filecheck):
    filecheck(_named(ir_vector_total.mlir()), VECTOR_TOTAL)


# ------------------------------------------------------------------ scatter


@hawk.kernel
def ir_histogram(v: Scalar, bins: Mutable["bin":8]):
    hawk.scatter(bins)[m.index(v * 8.0, 8)] += 1.0


HISTOGRAM = """
# CHECK-LABEL: func.func @ir_histogram(
# CHECK: %[[K32:.+]] = arith.fptosi %{{.+}} : f64 to i32
# CHECK: %[[K:.+]] = arith.extsi %[[K32]] : i32 to i64
# CHECK: %[[ONE:.+]] = arith.constant 1.000000e+00 : f64
# CHECK: "hawk.scatter"(%bins, %[[ONE]], %[[K]]) {mode = "add", policy = "auto"} : ({{.+}}, f64, i64) -> ()
"""


def test_scatter_add_names_sink_and_mode(filecheck):
    filecheck(_named(ir_histogram.mlir()), HISTOGRAM)


@hawk.kernel
def ir_place(key: Index, row: Index, v: Scalar, slots: Mutable["r":2, "s":5]):
    hawk.scatter(slots, policy="plain")[row, key] = v


PLACE = """
# CHECK-DAG: %[[KEY:.+]] = "hawk.load"(%key) : ({{.+}}) -> i32
# CHECK-DAG: %[[ROW:.+]] = "hawk.load"(%row) : ({{.+}}) -> i32
# CHECK-DAG: %[[K64:.+]] = arith.extsi %[[KEY]] : i32 to i64
# CHECK-DAG: %[[R64:.+]] = arith.extsi %[[ROW]] : i32 to i64
# CHECK-DAG: %[[V:.+]] = "hawk.load"(%v) : ({{.+}}) -> f64
# CHECK: "hawk.scatter"(%slots, %[[V]], %[[R64]], %[[K64]]) {mode = "set", policy = "plain"}
# CHECK-SAME: : (!hawk.sink<f64, array<i64>, ["r", "s"]>, f64, i64, i64) -> ()
"""


def test_scatter_store_with_two_keys(filecheck):
    filecheck(_named(ir_place.mlir()), PLACE)


# ------------------------------------------------------------------ reads at other lanes, grid coordinates


@hawk.kernel
def ir_right_neighbour(g: Grid["row", "col":6], u: Scalar, out: Mutable[Scalar]):
    out = u.at(row=g.row, col=g.col + 1) - u


RIGHT_NEIGHBOUR = """
# CHECK: %[[ROW:.+]] = "hawk.lane"() {axis = "row"} : () -> i64
# CHECK: %[[COL:.+]] = "hawk.lane"() {axis = "col"} : () -> i64
# CHECK: %[[C1:.+]] = arith.constant 1 : i64
# CHECK: %[[NEXT:.+]] = arith.addi %[[COL]], %[[C1]] : i64
# CHECK: %[[AT:.+]] = "hawk.at"(%u, %[[ROW]], %[[NEXT]]) {axes = ["row", "col"]} : ({{.+}}, i64, i64) -> f64
# CHECK: %[[U:.+]] = "hawk.load"(%u) : ({{.+}}) -> f64
# CHECK: %[[D:.+]] = arith.subf %[[AT]], %[[U]] : f64
# CHECK: "hawk.store"(%out, %[[D]]) : ({{.+}}, f64) -> ()
"""


def test_at_with_named_axes(filecheck):
    filecheck(_named(ir_right_neighbour.mlir()), RIGHT_NEIGHBOUR)


@hawk.kernel
def ir_gather(g: Grid["row", "col":6], u: Scalar, src: Index, t: Table["a":2, "b":3]) -> Scalar:
    return u.at(src) + u.at(col=0) + t.at(b=2, a=1)


GATHER = """
# CHECK: %[[SRC:.+]] = "hawk.load"(%src) : ({{.+}}) -> i32
# CHECK: %[[I:.+]] = arith.extsi %[[SRC]] : i32 to i64
# CHECK: "hawk.at"(%u, %[[I]]) {axes = ["#"]} : ({{.+}}, i64) -> f64
# an axis left out keeps this lane's coordinate
# CHECK: %[[ROW:.+]] = "hawk.lane"() {axis = "row"} : () -> i64
# CHECK: "hawk.at"(%u, %[[ROW]], %{{.+}}) {axes = ["row", "col"]} : ({{.+}}, i64, i64) -> f64
# a table names every axis, in the table's order
# CHECK: "hawk.at"(%t, %{{.+}}, %{{.+}}) {axes = ["a", "b"]} : ({{.+}}, i64, i64) -> f64
"""


def test_at_with_a_lane_index_an_omitted_axis_and_a_table(filecheck):
    filecheck(_named(ir_gather.mlir()), GATHER)


@hawk.kernel
def ir_coordinates(g: Grid["row", "col":4], v: Scalar) -> Scalar:
    return v * g.col + g.row


COORDINATES = """
# CHECK: %[[V:.+]] = "hawk.load"(%v) : ({{.+}}) -> f64
# CHECK: %[[COL:.+]] = "hawk.lane"() {axis = "col"} : () -> i64
# CHECK: %[[FCOL:.+]] = arith.sitofp %[[COL]] : i64 to f64
# CHECK: %[[P:.+]] = arith.mulf %[[V]], %[[FCOL]] : f64
# CHECK: %[[ROW:.+]] = "hawk.lane"() {axis = "row"} : () -> i64
# CHECK: %[[FROW:.+]] = arith.sitofp %[[ROW]] : i64 to f64
# CHECK: %[[S:.+]] = arith.addf %[[P]], %[[FROW]] : f64
# CHECK: "hawk.store"(%result, %[[S]])
"""


def test_grid_coordinate_is_a_lane_op(filecheck):
    filecheck(_named(ir_coordinates.mlir()), COORDINATES)


@hawk.kernel
def ir_param(v: Scalar, scale: Param) -> Scalar:
    return v * scale


PARAM = """
# CHECK: %[[V:.+]] = "hawk.load"(%v) : ({{.+}}) -> f64
# CHECK: %[[S:.+]] = "hawk.param"(%scale) : ({{.+}}) -> f64
# CHECK: arith.mulf %[[V]], %[[S]] : f64
"""


def test_param_is_a_param_op(filecheck):
    filecheck(_named(ir_param.mlir()), PARAM)


# ------------------------------------------------------------------ control flow


@hawk.kernel
def ir_branch(v: Scalar, w: Scalar, lo: Mutable[Scalar], hi: Mutable[Scalar]):
    if v > w:
        a = w
        b = v
    else:
        a = v
        b = w * 2.0
    lo = a
    hi = b


BRANCH = """
# CHECK: %[[C:.+]] = arith.cmpf ogt, %{{.+}}, %{{.+}} : f64
# CHECK: %[[R:.+]]:2 = scf.if %[[C]] -> (f64, f64) {
# CHECK:   scf.yield %{{.+}}, %{{.+}} : f64, f64
# CHECK: } else {
# CHECK:   arith.mulf
# CHECK:   scf.yield %{{.+}}, %{{.+}} : f64, f64
# CHECK: }
# CHECK: "hawk.store"(%lo, %[[R]]#0)
# CHECK: "hawk.store"(%hi, %[[R]]#1)
"""


def test_if_else_becomes_scf_if_with_results(filecheck):
    filecheck(_named(ir_branch.mlir()), BRANCH)


@hawk.kernel
def ir_clip(v: Scalar) -> Scalar:
    t = v
    if v > 1.0:
        t = 1.0
    return t


CLIP = """
# an if without else still yields the value on both paths
# CHECK: %[[T:.+]] = scf.if %{{.+}} -> (f64) {
# CHECK: } else {
# CHECK: }
# CHECK: "hawk.store"(%result, %[[T]])
"""


def test_if_without_else_yields_the_old_value(filecheck):
    filecheck(_named(ir_clip.mlir()), CLIP)


@hawk.kernel
def ir_powers(v: Scalar, out: Mutable[Scalar]):
    acc = 0.0
    term = 1.0
    for _ in range(4):
        acc = acc + term
        term = term * v
    out = acc


POWERS = """
# CHECK: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f64
# CHECK: %[[ONE:.+]] = arith.constant 1.000000e+00 : f64
# CHECK: %[[L:.+]]:2 = scf.for %[[I:[a-z0-9_]+]] = %{{[a-z0-9_]+}} to %{{[a-z0-9_]+}} step %{{[a-z0-9_]+}}
# CHECK-SAME: iter_args(%[[ACC:.+]] = %[[ZERO]], %[[TERM:.+]] = %[[ONE]]) -> (f64, f64) {
# CHECK:   %[[A:.+]] = arith.addf %[[ACC]], %[[TERM]] : f64
# CHECK:   %[[T:.+]] = arith.mulf %[[TERM]], %{{.+}} : f64
# CHECK:   scf.yield %[[A]], %[[T]] : f64, f64
# CHECK: }
# CHECK: "hawk.store"(%out, %[[L]]#0)
"""


def test_for_over_range_becomes_scf_for_with_iter_args(filecheck):
    filecheck(_named(ir_powers.mlir()), POWERS)


@hawk.kernel
def ir_scatter_loop(v: Scalar, bins: Mutable["bin":3]):
    for i in range(3):
        hawk.scatter(bins)[i] += v * i


SCATTER_LOOP = """
# CHECK: scf.for %[[I:.+]] = %{{.+}} to %{{.+}} step %{{.+}} {
# CHECK:   "hawk.scatter"(%bins, %{{.+}}, %{{.+}}) {mode = "add", policy = "auto"}
# CHECK: }
"""


def test_scatter_in_a_for_sits_in_the_loop(filecheck):
    filecheck(_named(ir_scatter_loop.mlir()), SCATTER_LOOP)


# ------------------------------------------------------------------ dtype specialisation


@hawk.kernel
def ir_blend(g: Grid["row", "col":4], v: Vector[2], w: Scalar, k: Index, total: Mutable[Vector[2]],
             bins: Mutable["bin":4]):
    total = hawk.sum(v * w + v.at(col=0), where=w > 0.5)
    hawk.scatter(bins)[k] += w


BLEND_F32 = """
# CHECK-NOT: f64
# CHECK: "hawk.load"(%v) : ({{.+}}) -> vector<2xf32>
# CHECK: "hawk.load"(%w) : ({{.+}}) -> f32
# CHECK: "hawk.at"(%v, %{{.+}}, %{{.+}}) {axes = ["row", "col"]} : ({{.+}}, i64, i64) -> vector<2xf32>
# CHECK: arith.cmpf ogt, %{{.+}}, %{{.+}} : f32
# CHECK: "hawk.reduce"(%{{.+}}, %{{.+}}) {{.+}} : (vector<2xf32>, i1) -> vector<2xf32>
# CHECK: "hawk.load"(%k) : ({{.+}}) -> i32
# CHECK: "hawk.scatter"(%bins, %{{.+}}, %{{.+}}) {{.+}} : (!hawk.sink<f32, array<i64>, ["bin"]>, f32, i64) -> ()
# CHECK-NOT: f64
"""


def test_float32_specialisation_uses_f32(filecheck):
    filecheck(_named(ir_blend.mlir(dtype="float32")), BLEND_F32)
    f64 = ir_blend.mlir()
    assert "f32" not in f64 and "vector<2xf64>" in f64
    assert ir_blend.mlir(dtype="float32") != f64


BLEND_ARGS = """
# CHECK-LABEL: func.func @ir_blend(
# CHECK-SAME: %v: !hawk.plane<f64, array<i64: 2>, ["row", "col"]> {hawk.name = "v"},
# CHECK-SAME: %w: !hawk.plane<f64, array<i64>, ["row", "col"]> {hawk.name = "w"},
# CHECK-SAME: %k: !hawk.plane<i32, array<i64>, ["row", "col"]> {hawk.name = "k"},
# CHECK-SAME: %total: !hawk.total<f64, array<i64: 2>, []> {hawk.name = "total"},
# CHECK-SAME: %bins: !hawk.sink<f64, array<i64>, ["bin"]> {hawk.name = "bins"})
# CHECK-SAME: attributes {hawk.axes = ["row", "col"], hawk.kernel
"""


@hawk.kernel
def ir_kept(g: Grid["row", "col":4], v: Scalar, per_row: Mutable[Scalar], t: Table["a":2]) -> Scalar:
    per_row = hawk.sum(v, over="col")
    return v * t.at(a=1)


KEPT_ARGS = """
# the Grid is no argument; a total keeps the axes its reduction keeps; the return value is an output
# CHECK-LABEL: func.func @ir_kept(
# CHECK-SAME: %v: !hawk.plane<f64, array<i64>, ["row", "col"]> {hawk.name = "v"},
# CHECK-SAME: %per_row: !hawk.total<f64, array<i64>, ["row"]> {hawk.name = "per_row"},
# CHECK-SAME: %t: !hawk.table<f64, array<i64>, ["a"]> {hawk.name = "t"},
# CHECK-SAME: %result: !hawk.output<f64, array<i64>, ["row", "col"]> {hawk.name = "result"})
"""


def test_planes_are_typed_block_arguments(filecheck):
    filecheck(_named(ir_blend.mlir()), BLEND_ARGS)
    filecheck(_named(ir_kept.mlir()), KEPT_ARGS)


def test_hawk_ir_is_stable():
    # the same kernel and dtype print the same text (the cache key depends on it)
    assert ir_blend.mlir() == ir_blend.mlir("float64") == ir_blend.hawk_ir()


@hawk.kernel
def ir_read_then_reduce(x: Scalar, o: Mutable[Scalar], z: Mutable[Scalar]):
    z = x + o
    o = hawk.sum(x)


READ_THEN_REDUCE = """
# an output read before the kernel assigns it, then handed a total: it is a total, and the read loads it
# CHECK-LABEL: func.func @ir_read_then_reduce(
# CHECK-SAME: %o: !hawk.total<f64, array<i64>, []> {hawk.name = "o"}
# CHECK: "hawk.load"(%o) : (!hawk.total<f64, array<i64>, []>) -> f64
# CHECK: "hawk.cell"(%o, %{{.+}})
"""


def test_an_output_read_before_it_gets_a_total(filecheck):
    filecheck(_named(ir_read_then_reduce.mlir()), READ_THEN_REDUCE)
