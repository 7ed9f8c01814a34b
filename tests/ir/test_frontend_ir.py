"""The hawk IR the front end builds for a kernel (`kernel.mlir()`), checked with FileCheck."""

import pytest

import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar, Table, Vector

# ------------------------------------------------------------------ reductions: where= and over=


@hawk.kernel
def ir_positive_total(v: Scalar, w: Scalar) -> Scalar:
    return hawk.sum(v * w, where=v > 0.0)


POSITIVE_TOTAL = """
# CHECK-LABEL: func.func @ir_positive_total() attributes {hawk.axes = ["sample"], hawk.kernel}
# CHECK-DAG: %[[V:.+]] = "hawk.load"() {plane = "v"} : () -> f64
# CHECK-DAG: %[[W:.+]] = "hawk.load"() {plane = "w"} : () -> f64
# CHECK: %[[VW:.+]] = arith.mulf %[[V]], %[[W]] : f64
# CHECK: %[[MASK:.+]] = arith.cmpf ogt, %{{.+}}, %{{.+}} : f64
# CHECK: %[[T:.+]] = "hawk.reduce"(%[[VW]], %[[MASK]])
# CHECK-SAME: {kind = "sum", over = ["sample"], policy = "auto"} : (f64, i1) -> f64
# CHECK: "hawk.cell"(%[[T]]) {name = "result"} : (f64) -> ()
# CHECK-NEXT: return
"""


def test_sum_with_where_has_a_mask_operand(filecheck):
    filecheck(ir_positive_total.mlir(), POSITIVE_TOTAL)


@hawk.kernel
def ir_unmasked_mean(v: Scalar, avg: Mutable[Scalar]):
    avg = hawk.mean(v, policy="ordered")


UNMASKED_MEAN = """
# CHECK: %[[V:.+]] = "hawk.load"() {plane = "v"} : () -> f64
# CHECK-NEXT: %[[T:.+]] = "hawk.reduce"(%[[V]]) {kind = "mean", over = ["sample"], policy = "ordered"}
# CHECK-SAME: : (f64) -> f64
# CHECK-NEXT: "hawk.cell"(%[[T]]) {name = "avg"}
"""


def test_reduction_without_where_has_one_operand(filecheck):
    filecheck(ir_unmasked_mean.mlir(), UNMASKED_MEAN)


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
        # CHECK-DAG: "hawk.cell"(%[[LO]]) {name = "lo"}
        # CHECK-DAG: "hawk.cell"(%[[HI]]) {name = "hi"}
        """),
], ids=["label", "label-and-position", "last-and-default"])
def test_over_lists_the_reduced_axes(kernel, checks, filecheck):
    filecheck(kernel.mlir(), checks)


@hawk.kernel
def ir_vector_total(p: Vector[3]) -> Vector[3]:
    return hawk.sum(p * 2.0)


VECTOR_TOTAL = """
# CHECK: %[[P:.+]] = "hawk.load"() {plane = "p"} : () -> vector<3xf64>
# CHECK: %[[T:.+]] = "hawk.reduce"(%{{.+}}) {kind = "sum", over = ["sample"], policy = "auto"}
# CHECK-SAME: : (vector<3xf64>) -> vector<3xf64>
"""


def test_vector_payload_reduces_as_a_vector(filecheck):
    filecheck(ir_vector_total.mlir(), VECTOR_TOTAL)


# ------------------------------------------------------------------ scatter


@hawk.kernel
def ir_histogram(v: Scalar, bins: Mutable["bin":8]):
    hawk.scatter(bins)[m.index(v * 8.0, 8)] += 1.0


HISTOGRAM = """
# CHECK-LABEL: func.func @ir_histogram()
# CHECK: %[[K:.+]] = arith.fptosi %{{.+}} : f64 to i64
# CHECK: %[[ONE:.+]] = arith.constant 1.000000e+00 : f64
# CHECK: "hawk.scatter"(%[[ONE]], %[[K]]) {mode = "add", policy = "auto", sink = "bins"} : (f64, i64) -> ()
"""


def test_scatter_add_names_sink_and_mode(filecheck):
    filecheck(ir_histogram.mlir(), HISTOGRAM)


@hawk.kernel
def ir_place(key: Index, row: Index, v: Scalar, slots: Mutable["r":2, "s":5]):
    hawk.scatter(slots, policy="plain")[row, key] = v


PLACE = """
# CHECK-DAG: %[[KEY:.+]] = "hawk.load"() {plane = "key"} : () -> i32
# CHECK-DAG: %[[ROW:.+]] = "hawk.load"() {plane = "row"} : () -> i32
# CHECK-DAG: %[[K64:.+]] = arith.extsi %[[KEY]] : i32 to i64
# CHECK-DAG: %[[R64:.+]] = arith.extsi %[[ROW]] : i32 to i64
# CHECK-DAG: %[[V:.+]] = "hawk.load"() {plane = "v"} : () -> f64
# CHECK: "hawk.scatter"(%[[V]], %[[R64]], %[[K64]]) {mode = "set", policy = "plain", sink = "slots"}
# CHECK-SAME: : (f64, i64, i64) -> ()
"""


def test_scatter_store_with_two_keys(filecheck):
    filecheck(ir_place.mlir(), PLACE)


# ------------------------------------------------------------------ reads at other lanes, grid coordinates


@hawk.kernel
def ir_right_neighbour(g: Grid["row", "col":6], u: Scalar, out: Mutable[Scalar]):
    out = u.at(row=g.row, col=g.col + 1) - u


RIGHT_NEIGHBOUR = """
# CHECK: %[[ROW:.+]] = "hawk.lane"() {axis = "row"} : () -> i64
# CHECK: %[[COL:.+]] = "hawk.lane"() {axis = "col"} : () -> i64
# CHECK: %[[C1:.+]] = arith.constant 1 : i64
# CHECK: %[[NEXT:.+]] = arith.addi %[[COL]], %[[C1]] : i64
# CHECK: %[[AT:.+]] = "hawk.at"(%[[ROW]], %[[NEXT]]) {axes = ["row", "col"], plane = "u"} : (i64, i64) -> f64
# CHECK: %[[U:.+]] = "hawk.load"() {plane = "u"} : () -> f64
# CHECK: %[[D:.+]] = arith.subf %[[AT]], %[[U]] : f64
# CHECK: "hawk.store"(%[[D]]) {plane = "out"} : (f64) -> ()
"""


def test_at_with_named_axes(filecheck):
    filecheck(ir_right_neighbour.mlir(), RIGHT_NEIGHBOUR)


@hawk.kernel
def ir_gather(g: Grid["row", "col":6], u: Scalar, src: Index, t: Table["a":2, "b":3]) -> Scalar:
    return u.at(src) + u.at(col=0) + t.at(b=2, a=1)


GATHER = """
# CHECK: %[[SRC:.+]] = "hawk.load"() {plane = "src"} : () -> i32
# CHECK: %[[I:.+]] = arith.extsi %[[SRC]] : i32 to i64
# CHECK: "hawk.at"(%[[I]]) {axes = ["#"], plane = "u"} : (i64) -> f64
# an axis left out keeps this lane's coordinate
# CHECK: %[[ROW:.+]] = "hawk.lane"() {axis = "row"} : () -> i64
# CHECK: "hawk.at"(%[[ROW]], %{{.+}}) {axes = ["row", "col"], plane = "u"} : (i64, i64) -> f64
# a table names every axis, in the table's order
# CHECK: "hawk.at"(%{{.+}}, %{{.+}}) {axes = ["a", "b"], plane = "t"} : (i64, i64) -> f64
"""


def test_at_with_a_lane_index_an_omitted_axis_and_a_table(filecheck):
    filecheck(ir_gather.mlir(), GATHER)


@hawk.kernel
def ir_coordinates(g: Grid["row", "col":4], v: Scalar) -> Scalar:
    return v * g.col + g.row


COORDINATES = """
# CHECK: %[[V:.+]] = "hawk.load"() {plane = "v"} : () -> f64
# CHECK: %[[COL:.+]] = "hawk.lane"() {axis = "col"} : () -> i64
# CHECK: %[[FCOL:.+]] = arith.sitofp %[[COL]] : i64 to f64
# CHECK: %[[P:.+]] = arith.mulf %[[V]], %[[FCOL]] : f64
# CHECK: %[[ROW:.+]] = "hawk.lane"() {axis = "row"} : () -> i64
# CHECK: %[[FROW:.+]] = arith.sitofp %[[ROW]] : i64 to f64
# CHECK: %[[S:.+]] = arith.addf %[[P]], %[[FROW]] : f64
# CHECK: "hawk.store"(%[[S]]) {plane = "result"}
"""


def test_grid_coordinate_is_a_lane_op(filecheck):
    filecheck(ir_coordinates.mlir(), COORDINATES)


@hawk.kernel
def ir_param(v: Scalar, scale: Param) -> Scalar:
    return v * scale


PARAM = """
# CHECK: %[[V:.+]] = "hawk.load"() {plane = "v"} : () -> f64
# CHECK: %[[S:.+]] = "hawk.param"() {plane = "scale"} : () -> f64
# CHECK: arith.mulf %[[V]], %[[S]] : f64
"""


def test_param_is_a_param_op(filecheck):
    filecheck(ir_param.mlir(), PARAM)


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
# CHECK: "hawk.store"(%[[R]]#0) {plane = "lo"}
# CHECK: "hawk.store"(%[[R]]#1) {plane = "hi"}
"""


def test_if_else_becomes_scf_if_with_results(filecheck):
    filecheck(ir_branch.mlir(), BRANCH)


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
# CHECK: "hawk.store"(%[[T]]) {plane = "result"}
"""


def test_if_without_else_yields_the_old_value(filecheck):
    filecheck(ir_clip.mlir(), CLIP)


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
# CHECK: "hawk.store"(%[[L]]#0) {plane = "out"}
"""


def test_for_over_range_becomes_scf_for_with_iter_args(filecheck):
    filecheck(ir_powers.mlir(), POWERS)


@hawk.kernel
def ir_scatter_loop(v: Scalar, bins: Mutable["bin":3]):
    for i in range(3):
        hawk.scatter(bins)[i] += v * i


SCATTER_LOOP = """
# CHECK: scf.for %[[I:.+]] = %{{.+}} to %{{.+}} step %{{.+}} {
# CHECK:   "hawk.scatter"(%{{.+}}, %{{.+}}) {mode = "add", policy = "auto", sink = "bins"}
# CHECK: }
"""


def test_scatter_in_a_for_sits_in_the_loop(filecheck):
    filecheck(ir_scatter_loop.mlir(), SCATTER_LOOP)


# ------------------------------------------------------------------ dtype specialisation


@hawk.kernel
def ir_blend(g: Grid["row", "col":4], v: Vector[2], w: Scalar, k: Index, total: Mutable[Vector[2]],
             bins: Mutable["bin":4]):
    total = hawk.sum(v * w + v.at(col=0), where=w > 0.5)
    hawk.scatter(bins)[k] += w


BLEND_F32 = """
# CHECK-NOT: f64
# CHECK: "hawk.load"() {plane = "v"} : () -> vector<2xf32>
# CHECK: "hawk.load"() {plane = "w"} : () -> f32
# CHECK: "hawk.at"(%{{.+}}, %{{.+}}) {axes = ["row", "col"], plane = "v"} : (i64, i64) -> vector<2xf32>
# CHECK: arith.cmpf ogt, %{{.+}}, %{{.+}} : f32
# CHECK: "hawk.reduce"(%{{.+}}, %{{.+}}) {{.+}} : (vector<2xf32>, i1) -> vector<2xf32>
# CHECK: "hawk.load"() {plane = "k"} : () -> i32
# CHECK: "hawk.scatter"(%{{.+}}, %{{.+}}) {{.+}} : (f32, i64) -> ()
# CHECK-NOT: f64
"""


def test_float32_specialisation_uses_f32(filecheck):
    filecheck(ir_blend.mlir(dtype="float32"), BLEND_F32)
    f64 = ir_blend.mlir()
    assert "f32" not in f64 and "vector<2xf64>" in f64
    assert ir_blend.mlir(dtype="float32") != f64


def test_hawk_ir_is_stable():
    # the same kernel and dtype print the same text (the cache key depends on it)
    assert ir_blend.mlir() == ir_blend.mlir("float64") == ir_blend.hawk_ir()
