"""The kernels and cases of the GPU check (scripts/gpu_check.py): contract cases and GPU benchmarks (the latter
time the benchmark suite's own kernels, benchmarks/kernels.py).

Imported only by `gpu_check.py build` (it needs the compiler). Each case names a kernel, how its inputs are made
and how each output is compared on the GPU: "exact" (bitwise: ordered sums and scatters, max/min, counts,
integer-valued work) or a relative tolerance (sums whose chunking differs between host and GPU, transcendental
math). Mutable outputs are assigned in kernel bodies (pyproject ignores F841/F821 here, as in tests/); no
`from __future__ import annotations`: hawk reads the annotations as values.
"""

from dataclasses import dataclass, field

import numpy as np

import hawk
import hawk.math as m
from benchmarks import kernels as K  # the suite's own kernels: the GPU benchmarks time the same code
from benchmarks.data import KEYS
from hawk import Grid, Index, Matrix, Mutable, Param, Scalar, Sorted, Vector

SLOTS = 64  # scatter slots of the contract cases
BINS = 256
WIDE = 100_000  # slots of a plain scatter too large for private copies: float atomics on nvvm and rocdl
RANGES = 3000  # slots of the slot-range case's sinks, built with HAWK_COPY_SLOTS=RANGE_COPY: too large for copies
RANGE_COPY = 1024
COLS = 16  # the fast axis of the contract grids
BENCH_COLS = 1000  # the fast axis of the benchmark grids
N = 30_011  # lanes of most contract cases: many GPU threads, small enough to store


# ============================================================================== contract kernels
@hawk.kernel
def gk_sum_ordered(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="ordered")


@hawk.kernel
def gk_sum_auto(x: Scalar) -> Scalar:
    return hawk.sum(x)  # an artifact builds it "ordered"


@hawk.kernel
def gk_sum_compensated(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="compensated")


@hawk.kernel
def gk_masked(x: Scalar, cut: Param, tot: Mutable[Scalar], avg: Mutable[Scalar], n_in: Mutable[Scalar]):
    tot = hawk.sum(x * x, where=x > cut, policy="ordered")
    avg = hawk.mean(x, where=x > cut, policy="ordered")
    n_in = hawk.sum(1.0, where=x > cut, policy="ordered")


@hawk.kernel
def gk_max(x: Scalar) -> Scalar:
    return hawk.max(x)


@hawk.kernel
def gk_min(x: Scalar) -> Scalar:
    return hawk.min(x * 2.0 - 1.0)


@hawk.kernel
def gk_row_sums(lane: Grid["row", "col":COLS], x: Scalar) -> Scalar:
    return hawk.sum(x * x, over="col")


@hawk.kernel
def gk_col_stats(lane: Grid["row", "col":COLS], x: Scalar, s: Mutable[Scalar], mu: Mutable[Scalar]):
    s = hawk.sum(x, over="row", where=x > 0.0)
    mu = hawk.mean(x, over="row")


@hawk.kernel
def gk_col_top(lane: Grid["row", "col":COLS], x: Scalar) -> Scalar:
    return hawk.max(x, over="row")


@hawk.kernel
def gk_grid_total(lane: Grid["row", "col":COLS], x: Scalar) -> Scalar:
    return hawk.sum(x, policy="ordered")


@hawk.kernel
def gk_vector_cells(v: Vector[3], tot: Mutable[Vector[3]], avg: Mutable[Vector[3]]):
    tot = hawk.sum(v, policy="ordered")
    avg = hawk.mean(v * 0.5, policy="ordered")


@hawk.kernel
def gk_matrix_cells(mm: Matrix[2, 3], tot: Mutable[Matrix[2, 3]], across: Mutable[Vector[2]]):
    tot = hawk.sum(mm, policy="ordered")
    across = mm.sum(axis="columns")


@hawk.kernel
def gk_matrix_peak(mm: Matrix[2, 3]) -> Matrix[2, 3]:
    return hawk.max(mm)


@hawk.kernel
def gk_scatter_plain(key: Index, x: Scalar, acc: Mutable["slot":SLOTS]):
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def gk_scatter_auto(key: Index, x: Scalar, acc: Mutable["slot":SLOTS]):
    hawk.scatter(acc)[key] += x


@hawk.kernel
def gk_scatter_compensated(key: Index, x: Scalar, acc: Mutable["slot":SLOTS]):
    hawk.scatter(acc, policy="compensated")[key] += x


@hawk.kernel
def gk_scatter_ordered(key: Index, x: Scalar, acc: Mutable["slot":SLOTS]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def gk_scatter_sorted_ordered(key: Sorted[Index], x: Scalar, acc: Mutable["slot":SLOTS]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def gk_scatter_vector(key: Index, v: Vector[2], acc: Mutable["slot":SLOTS]):
    hawk.scatter(acc, policy="ordered")[key] += v


@hawk.kernel
def gk_histogram(t: Scalar, counts: Mutable["bin":BINS]):
    hawk.scatter(counts)[m.index(t * 256.0, BINS)] += 1.0


@hawk.kernel
def gk_gather(x: Scalar, src: Index, y: Mutable[Scalar]):
    y = x.at(src) * 3.0 - x


@hawk.kernel
def gk_stencil(lane: Grid["row", "col":COLS], u: Scalar, rate: Param, last_row: Param) -> Scalar:
    r, c = lane.row, lane.col
    if m.land(m.land(r > 0, m.to_float(r) < last_row), m.land(c > 0, c < COLS - 1)):
        nxt = u + rate * (u.at(row=r - 1) + u.at(row=r + 1) + u.at(col=c - 1) + u.at(col=c + 1) - 4.0 * u)
    else:
        nxt = u
    return nxt


@hawk.kernel
def gk_share(x: Scalar, z: Mutable[Scalar]):
    z = x / hawk.sum(x)  # reads a total over every lane: two stages


@hawk.kernel
def gk_standardize(x: Scalar, z: Mutable[Scalar]):
    mu = hawk.mean(x)
    d = x - mu
    z = d / m.sqrt(hawk.mean(d * d))  # three stages


@hawk.kernel
def gk_math(x: Scalar, y: Mutable[Scalar], tot: Mutable[Scalar]):
    y = m.exp(x * 0.5) + m.sin(x)
    tot = hawk.sum(m.log(1.0 + x * x), policy="ordered")


@hawk.kernel
def gk_store_last(key: Index, x: Scalar, acc: Mutable["slot":SLOTS]):
    hawk.scatter(acc)[key] = x * 2.0


@hawk.kernel
def gk_store_passes(key: Index, x: Scalar, acc: Mutable["slot":SLOTS]):
    for j in range(3):  # a lane's later pass wins over its earlier one (the rule the reverse's winners kernel keeps)
        hawk.scatter(acc)[m.where(key < 0, -1, (key + j * 7) % SLOTS)] = x * (j + 1.0)


@hawk.kernel
def gk_scatter_wide(key: Index, x: Scalar, acc: Mutable["slot":WIDE]):
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def gk_rows_ordered(lane: Grid["row", "col":COLS], x: Scalar) -> Scalar:
    return hawk.sum(x, over="col", policy="ordered")


@hawk.kernel
def gk_cols_ordered(lane: Grid["row", "col":COLS], x: Scalar) -> Scalar:
    return hawk.mean(x, over="row", policy="ordered", where=x > -1.0)


@hawk.func
def gk_then(p, q):
    return m.vec(q[0] * p[0], q[0] * p[1] + q[1])  # affine maps (a, b): p, then q


@hawk.func
def gk_decay(a, b):
    return 0.75 * a + b


@hawk.kernel
def gk_scan_func(x: Scalar, key: Index, h: Mutable[Scalar], r: Mutable[Scalar], k: Mutable[Scalar]):
    h = hawk.scan(m.vec(0.5 + 0.25 * m.abs(m.sin(x)), x), op=gk_then)[1]  # folded by the finish, on the host
    r = hawk.scan(x, op=gk_decay, reverse=True, exclusive=True, identity=0.0)
    k = hawk.scan(x * x, op=gk_decay, by=key, keys=SLOTS)


@hawk.kernel
def gk_slot_ranges(key: Index, other: Index, x: Scalar, acc: Mutable["slot":RANGES], last: Mutable["slot":RANGES]):
    hawk.scatter(acc, policy="compensated")[key] += x  # (no float atomics for these: a GPU thread per slot range)
    hawk.scatter(last)[other] = x * 2.0


# ============================================================================== cases
@dataclass
class Case:
    """One check: `kernel` run on inputs from `inputs(n, dtype, rng)` (contract cases: stored in the bundle) or
    from the NumPy-only recipe `recipe` (benchmarks: made on the GPU machine, see gpu_check.recipe_inputs)."""

    name: str
    kernel: object
    sizes: tuple[int, ...] = (N,)
    dtypes: tuple[str, ...] = ("float64",)
    inputs: object = None
    recipe: dict | None = None
    exact: tuple[str, ...] = ("*",)  # outputs compared bitwise ("*": all); the others within rtol
    rtol: dict = field(default_factory=lambda: {"float64": 1e-12, "float32": 1e-5})
    bench: bool = False
    copy_slots: int = 0  # $HAWK_COPY_SLOTS while its kernel builds (0: unset): a smaller copy limit


def _x(n, dt, rng):
    return {"x": (rng.standard_normal(n) * 3.0 + 0.25).astype(dt)}


def _grid(n, dt, rng, cols=COLS, name="x"):
    rows = max(3, n // cols)
    return {name: rng.standard_normal((rows, cols)).astype(dt)}


def _keys(n, dt, rng, sort=False, vec=False):
    key = rng.integers(0, SLOTS, n, dtype=np.int32)
    if sort:
        key = np.sort(key)
    x = rng.standard_normal((2, n) if vec else n).astype(dt)
    return {"key": key, ("v" if vec else "x"): x}


def _range_keys(n, dt, rng):
    keys = rng.integers(-1, RANGES, (2, n), dtype=np.int32)  # (-1: no slot)
    return {"key": keys[0], "other": keys[1], "x": rng.standard_normal(n).astype(dt)}


def _adversarial(n, dt, rng):
    """Terms where any fixed order of float adds goes wrong, shuffled: cancellation to a tiny rest, magnitudes
    across the whole range, subnormals, partial sums past the largest finite value (whose exact sum is 0), -0.0."""
    info = np.finfo(dt)
    big = float(info.max)
    k = max(1, n // 6)
    parts = [np.array([1.0, 1e30, -1e30, float(info.eps) / 4] * (k // 4 + 1))[:k],
             rng.standard_normal(k) * 10.0 ** rng.integers(info.minexp // 4, info.maxexp // 4, k),
             rng.uniform(-1, 1, k) * float(info.tiny),
             np.array([big, big, -big, -big] * (k // 4)),  # adds up to 0 exactly
             np.full(k, -0.0)]
    x = np.concatenate(parts).astype(dt)
    x = np.concatenate([x, rng.standard_normal(max(0, n - x.size)).astype(dt)])[:n]
    rng.shuffle(x)
    return {"x": x}


def contract_cases() -> list[Case]:
    lengths = (1, 7, 1000, 4097, 100_003)  # ordered sums: many sizes
    both = ("float64", "float32")
    return [
        Case("sum_ordered", gk_sum_ordered, lengths, both, _x),
        Case("sum_ordered_adversarial", gk_sum_ordered, (6, 1000, N), both, _adversarial),  # the exact sum
        Case("sum_auto", gk_sum_auto, (1000, N), both, _x),
        Case("sum_compensated", gk_sum_compensated, (1000, N), both, _x, exact=()),
        Case("masked_ordered", gk_masked, (7, N), both, lambda n, dt, r: {**_x(n, dt, r), "cut": 0.5}),
        Case("max", gk_max, (1, N), both, _x),
        Case("min", gk_min, (1, N), both, _x),
        Case("over_fast_axis", gk_row_sums, (N,), both, _grid, exact=()),
        Case("over_slow_axis_where", gk_col_stats, (N,), ("float64",), _grid, exact=()),
        Case("over_slow_axis_max", gk_col_top, (N,), both, _grid),
        Case("grid_total_ordered", gk_grid_total, (N,), both, _grid),
        Case("vector_cells", gk_vector_cells, (N,), both,
             lambda n, dt, r: {"v": r.standard_normal((3, n)).astype(dt)}),
        Case("matrix_cells", gk_matrix_cells, (N,), ("float64",),
             lambda n, dt, r: {"mm": r.standard_normal((6, n)).astype(dt)}, exact=("tot",)),
        Case("matrix_peak", gk_matrix_peak, (N,), ("float64",),
             lambda n, dt, r: {"mm": r.standard_normal((6, n)).astype(dt)}),
        Case("scatter_plain", gk_scatter_plain, (N,), both, _keys, exact=()),
        Case("scatter_auto", gk_scatter_auto, (N,), both, _keys, exact=()),
        Case("scatter_compensated", gk_scatter_compensated, (N,), both, _keys, exact=()),
        Case("scatter_ordered", gk_scatter_ordered, (7, N), both, _keys),
        Case("scatter_ordered_adversarial", gk_scatter_ordered, (N,), both,
             lambda n, dt, r: {**_keys(n, dt, r), **_adversarial(n, dt, r)}),
        Case("scatter_sorted_ordered", gk_scatter_sorted_ordered, (N,), both,
             lambda n, dt, r: _keys(n, dt, r, sort=True)),
        Case("scatter_vector_ordered", gk_scatter_vector, (N,), ("float64",),
             lambda n, dt, r: _keys(n, dt, r, vec=True)),
        Case("histogram", gk_histogram, (N,), both, lambda n, dt, r: {"t": r.random(n).astype(dt)}),
        Case("store_last_lane", gk_store_last, (N,), both, _keys),
        Case("store_last_pass", gk_store_passes, (N,), ("float64",), _keys),
        Case("scatter_wide_atomic", gk_scatter_wide, (N,), both,
             lambda n, dt, r: {"key": r.integers(0, WIDE, n, dtype=np.int32), "x": r.standard_normal(n).astype(dt)},
             exact=()),
        Case("slot_ranges", gk_slot_ranges, (N,), both, _range_keys,
             copy_slots=RANGE_COPY),  # each slot's terms in lane order from one thread: the host's bits
        Case("over_fast_axis_ordered", gk_rows_ordered, (N,), both, _grid),
        Case("over_slow_axis_ordered_mean", gk_cols_ordered, (N,), both, _grid),
        Case("gather_at", gk_gather, (N,), both,
             lambda n, dt, r: {**_x(n, dt, r), "src": r.permutation(n).astype(np.int32)}, exact=()),
        Case("stencil_at", gk_stencil, (N,), both,
             lambda n, dt, r: {**_grid(n, dt, r, name="u"), "rate": 0.1, "last_row": float(max(3, n // COLS) - 1)},
             exact=()),
        Case("split_share", gk_share, (N,), both, lambda n, dt, r: {"x": r.random(n).astype(dt) + 0.5},
             exact=()),
        Case("split_standardize", gk_standardize, (N,), both, _x, exact=()),
        Case("math", gk_math, (N,), both, _x, exact=(),
             rtol={"float64": 1e-13, "float32": 1e-5}),
        Case("scan_func", gk_scan_func, (N,), both, _keys, exact=("r", "k"),  # (h reads m.sin in the lanes)
             rtol={"float64": 1e-12, "float32": 1e-4}),
    ]


def bench_cases() -> list[Case]:
    x = {"x": "signed"}
    keys = {"key": "keys", "x": "signed", "@keys": KEYS}
    grid = {"x": "signed", "@cols": BENCH_COLS}
    return [
        Case("bench_sum_auto", K.sum_auto, recipe=x, bench=True),
        Case("bench_sum_compensated", K.sum_compensated, recipe=x, bench=True, exact=()),
        Case("bench_sum_ordered", K.sum_ordered, recipe=x, bench=True),
        Case("bench_sum_positive", K.sum_positive, recipe=x, bench=True),
        Case("bench_max", K.max_all, recipe=x, bench=True),
        Case("bench_scatter_plain", K.scatter_plain, recipe=keys, bench=True, exact=()),
        Case("bench_scatter_auto", K.scatter_auto, recipe=keys, bench=True, exact=()),
        Case("bench_scatter_ordered", K.scatter_ordered, recipe=keys, bench=True),
        Case("bench_scatter_sorted", K.scatter_sorted_auto, recipe={**keys, "key": "sorted_keys"}, bench=True,
             exact=()),
        Case("bench_histogram", K.histogram_auto, recipe={"t": "unit"}, bench=True),
        Case("bench_centre", K.centre, recipe=x, bench=True, exact=()),
        Case("bench_row_sums", K.row_sums(BENCH_COLS), recipe=grid, bench=True, exact=()),
        Case("bench_col_sums", K.col_sums(BENCH_COLS), recipe=grid, bench=True, exact=()),
        Case("bench_diffuse", K.diffuse(BENCH_COLS), recipe={"u": "signed", "@cols": BENCH_COLS, "rate": 0.1,
                                                   "last_row": "@rows-1"}, bench=True, exact=()),
    ]
