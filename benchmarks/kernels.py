"""The hawk kernels the suite times (ours). Each is the plain way a user would write the operation.

Kernels with a fixed axis extent (the grid's fast axis) are made per extent by a factory and kept, so a size
reuses the compiled kernel. Mutable outputs are assigned in the body: pyproject ignores F841/F821 here.
No `from __future__ import annotations`: the factories' annotations name a closure variable (the extent), which
string annotations cannot see.
"""

import functools

import hawk
import hawk.math as m
from benchmarks.data import BINS, DT, KEYS
from hawk import Grid, Index, Mutable, Param, Scalar, Sorted, Vector


# --- reductions over every lane ---------------------------------------------------------------------------
@hawk.kernel
def sum_auto(x: Scalar) -> Scalar:
    return hawk.sum(x)


@hawk.kernel
def sum_compensated(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="compensated")


@hawk.kernel
def sum_ordered(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="ordered")


@hawk.kernel
def sum_positive(x: Scalar) -> Scalar:
    return hawk.sum(x, where=x > 0.0)


@hawk.kernel
def mean_all(x: Scalar) -> Scalar:
    return hawk.mean(x)


@hawk.kernel
def max_all(x: Scalar) -> Scalar:
    return hawk.max(x)


# --- scatter-add into KEYS slots: random keys (Index) and sorted keys (Sorted[Index]), per policy ----------
@hawk.kernel
def scatter_plain(key: Index, x: Scalar, acc: Mutable["slot":KEYS]):
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def scatter_auto(key: Index, x: Scalar, acc: Mutable["slot":KEYS]):
    hawk.scatter(acc)[key] += x


@hawk.kernel
def scatter_ordered(key: Index, x: Scalar, acc: Mutable["slot":KEYS]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def scatter_sorted_plain(key: Sorted[Index], x: Scalar, acc: Mutable["slot":KEYS]):
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def scatter_sorted_auto(key: Sorted[Index], x: Scalar, acc: Mutable["slot":KEYS]):
    hawk.scatter(acc)[key] += x


@hawk.kernel
def scatter_sorted_ordered(key: Sorted[Index], x: Scalar, acc: Mutable["slot":KEYS]):
    hawk.scatter(acc, policy="ordered")[key] += x


# --- histogram of t in [0, 1) into BINS bins (m.index clamps to the end bins) ------------------------------
@hawk.kernel
def histogram_auto(t: Scalar, counts: Mutable["bin":BINS]):
    hawk.scatter(counts)[m.index(t * 256.0, BINS)] += 1.0


@hawk.kernel
def histogram_plain(t: Scalar, counts: Mutable["bin":BINS]):
    hawk.scatter(counts, policy="plain")[m.index(t * 256.0, BINS)] += 1.0


# --- a two-stage kernel: every lane reads the mean over all lanes ---------------------------------------
@hawk.kernel
def centre(x: Scalar) -> Scalar:
    return x - hawk.mean(x)


# --- particles: a Vector[3] payload per lane ---------------------------------------------------------------
@hawk.kernel
def particles(p: Vector[3], v: Vector[3]) -> Vector[3]:
    q = p + DT * v
    return m.where(q > 1.0, 2.0 - q, q)  # reflected at the wall x = 1 (each component)


# --- grids: the fast axis is fixed per kernel ------------------------------------------------------------
@functools.cache
def row_sums(cols: int):
    """Sum over the fast axis of a (rows, cols) grid: one value per row."""

    @hawk.kernel
    def row_sums(g: Grid["row", "col":cols], x: Scalar) -> Scalar:
        return hawk.sum(x, over="col")

    return row_sums


@functools.cache
def row_max_masked(cols: int):
    """The largest value below 0.5 of each row (a masked max keeping the slow axis)."""

    @hawk.kernel
    def row_max_masked(g: Grid["row", "col":cols], x: Scalar) -> Scalar:
        return hawk.max(x, over="col", where=x < 0.5)

    return row_max_masked


@functools.cache
def row_softmax(cols: int):
    """Softmax over the fast axis of a (rows, cols) grid: a max and a sum per row, both read in the body (block
    reductions, docs/semantics.md "Block reductions": one launch)."""

    @hawk.kernel
    def row_softmax(g: Grid["row", "col":cols], x: Scalar) -> Scalar:
        top = hawk.max(x, over="col")
        ex = m.exp(x - top)
        return ex / hawk.sum(ex, over="col")

    return row_softmax


@functools.cache
def row_sums_ordered(cols: int):
    """The exact sum of each row, rounded once (policy "ordered")."""

    @hawk.kernel
    def row_sums_ordered(g: Grid["row", "col":cols], x: Scalar) -> Scalar:
        return hawk.sum(x, over="col", policy="ordered")

    return row_sums_ordered


@functools.cache
def col_sums(cols: int):
    """Sum over the slow axis of a (rows, cols) grid: one value per column."""

    @hawk.kernel
    def col_sums(g: Grid["row", "col":cols], x: Scalar) -> Scalar:
        return hawk.sum(x, over="row")

    return col_sums


@functools.cache
def col_sums_ordered(cols: int):
    """The exact sum of each column, rounded once (policy "ordered")."""

    @hawk.kernel
    def col_sums_ordered(g: Grid["row", "col":cols], x: Scalar) -> Scalar:
        return hawk.sum(x, over="row", policy="ordered")

    return col_sums_ordered


@functools.cache
def diffuse(cols: int):
    """One explicit 5-point diffusion step on a (rows, cols) grid; the border is held fixed.

    `last_row` is rows - 1 (the slow extent is bound at run time, so the kernel takes it as a Param)."""

    @hawk.kernel
    def diffuse(g: Grid["row", "col":cols], u: Scalar, rate: Param, last_row: Param) -> Scalar:
        r = g.row
        c = g.col
        if m.land(m.land(r > 0, m.to_float(r) < last_row), m.land(c > 0, c < cols - 1)):
            nxt = u + rate * (u.at(row=r - 1) + u.at(row=r + 1) + u.at(col=c - 1) + u.at(col=c + 1) - 4.0 * u)
        else:
            nxt = u
        return nxt

    return diffuse


# --- tiny kernels for per-call overhead ------------------------------------------------------------------
@hawk.kernel
def tiny_map(x: Scalar) -> Scalar:
    return x + 1.0


@hawk.kernel
def tiny_sum(x: Scalar) -> Scalar:
    return hawk.sum(x)
