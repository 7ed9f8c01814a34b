"""The operations the suite times: for each, our variants (hawk kernels through eagle), the NumPy reference and
the check every output must pass before (and after) it is timed.

An implementation is an `Impl`: `call()` runs the operation once with reused buffers, `fetch(value)` turns what
`call()` returned into a NumPy array for the check. Peers live in benchmarks/peers/.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import eagle
from benchmarks import kernels as K
from benchmarks.data import BINS, DT, KEYS, RATE, Data, ordered_scatter, ordered_sum


@dataclass
class Impl:
    call: Callable[[], object]
    fetch: Callable[[object], np.ndarray] = np.asarray
    kind: str = "peer"  # "ours" (counted in ratios), "peer" (counted as a peer), "info" (shown, not counted)
    check: str = "default"  # which tolerance: "default", "compensated", "ordered", "plain"
    plan: object = None  # ours: the eagle plan and the planes bound (the memory probe runs plan.run(**planes))
    planes: dict | None = None


class Mismatch(AssertionError):
    """An implementation's output disagrees with the NumPy reference."""


@dataclass
class Op:
    name: str
    title: str
    ours: Callable[[Data], dict[str, Impl]]  # variant name -> Impl
    reference: Callable[[Data], np.ndarray]  # float64 (or exact) reference
    scale: Callable[[Data], np.ndarray]  # per-entry size of the terms (sum of |terms|), for tolerances
    exact: bool = False  # max, histograms: every impl must match bit for bit (as values)


def _ours(kernel, check: str = "default", **planes) -> Impl:
    """A bound launch (buffers allocated once, reused at every launch), as peers reuse out= buffers."""
    plan = eagle.deploy(kernel)
    return Impl(plan.bind(**planes).launch, kind="ours", check=check, plan=plan, planes=planes)


def _run(kernel, **planes) -> Impl:
    """Plan.run: checks the planes and allocates the outputs at every call."""
    plan = eagle.deploy(kernel)
    return Impl(lambda: plan.run(**planes), kind="info", plan=plan, planes=planes)


# ---- ours ------------------------------------------------------------------------------------------------
def ours_sum(d: Data) -> dict[str, Impl]:
    out = np.zeros(1, dtype=d.dtype)
    red = eagle.reduce(d.x, out, policy="auto")
    return {
        "hawk auto": _ours(K.sum_auto, x=d.x),
        "hawk compensated": _ours(K.sum_compensated, "compensated", x=d.x),
        "hawk ordered": _ours(K.sum_ordered, "ordered", x=d.x),
        "hawk auto (Plan.run)": _run(K.sum_auto, x=d.x),
        "eagle.reduce auto": Impl(red.launch, kind="info"),
    }


def ours_scatter(sorted_keys: bool):
    def ours(d: Data) -> dict[str, Impl]:
        keys = d.skeys if sorted_keys else d.keys
        ks = (K.scatter_sorted_plain, K.scatter_sorted_auto, K.scatter_sorted_ordered) if sorted_keys else \
             (K.scatter_plain, K.scatter_auto, K.scatter_ordered)
        return {
            "hawk plain": _ours(ks[0], "plain", key=keys, x=d.x),
            "hawk auto": _ours(ks[1], "compensated", key=keys, x=d.x),
            "hawk ordered": _ours(ks[2], "ordered", key=keys, x=d.x),
        }

    return ours


def ours_one(kernel_of, check: str = "default", **extra):
    """A single 'hawk' variant: kernel_of(d) -> kernel; planes from the Data by the names in extra."""

    def ours(d: Data) -> dict[str, Impl]:
        planes = {k: (v(d) if callable(v) else v) for k, v in extra.items()}
        return {"hawk": _ours(kernel_of(d), check, **planes)}

    return ours


def ours_row(d: Data) -> dict[str, Impl]:
    return {"hawk": _ours(K.row_sums(d.cols), x=d.u),
            "hawk ordered": _ours(K.row_sums_ordered(d.cols), "ordered", x=d.u)}


def ours_col(d: Data) -> dict[str, Impl]:
    return {"hawk": _ours(K.col_sums(d.cols), x=d.u),
            "hawk ordered": _ours(K.col_sums_ordered(d.cols), "ordered", x=d.u)}


def ours_hist(d: Data) -> dict[str, Impl]:
    return {
        "hawk auto": _ours(K.histogram_auto, t=d.t),
        "hawk plain": _ours(K.histogram_plain, t=d.t),
    }


# ---- references (float64 or exact) ----------------------------------------------------------------------
def ref_scatter(keys_of):
    """Per-slot sums accurate well below the dtype's rounding: long double for float64 data (a float64 bincount
    is off by up to (lanes per slot) x eps, more than a compensated sum may be), float64 for float32 data."""

    def exact(d: Data) -> np.ndarray:
        keys = getattr(d, keys_of)
        if d.dtype == np.float64:
            acc = np.zeros(KEYS, dtype=np.longdouble)
            np.add.at(acc, keys, d.x.astype(np.longdouble))
            return acc.astype(np.float64)
        return np.bincount(keys, weights=d.x.astype(np.float64), minlength=KEYS)

    return lambda d: d.memo(("scatter", keys_of), lambda: exact(d))


def ref_hist(d: Data) -> np.ndarray:
    idx = np.clip(np.floor(d.t * d.dtype.type(256.0)), 0, BINS - 1).astype(np.int64)
    return np.bincount(idx, minlength=BINS).astype(np.float64)


def ref_stencil(d: Data) -> np.ndarray:
    u = d.u.astype(np.float64)
    o = u.copy()
    c = u[1:-1, 1:-1]
    o[1:-1, 1:-1] = c + RATE * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * c)
    return o


def scale_stencil(d: Data) -> np.ndarray:
    a = np.abs(d.u.astype(np.float64))
    s = a.copy()
    s[1:-1, 1:-1] += RATE * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + 4.0 * a[1:-1, 1:-1])
    return s


def ref_centre(d: Data) -> np.ndarray:
    x = d.x.astype(np.float64)
    return x - d.exact_sum(d.x) / d.n


def ref_row_max_masked(d: Data) -> np.ndarray:
    return np.max(d.u, axis=1, where=d.u < 0.5, initial=-np.inf).astype(np.float64)


def ref_softmax(d: Data) -> np.ndarray:
    u = d.u.astype(np.float64)
    e = np.exp(u - u.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def ref_particles(d: Data) -> np.ndarray:
    q = d.p.astype(np.float64) + DT * d.v.astype(np.float64)
    return np.where(q > 1.0, 2.0 - q, q)


def _one(v) -> np.ndarray:
    return np.array([v], dtype=np.float64)


OPS: list[Op] = [
    Op("sum", "sum over every lane (policy auto / compensated / ordered)", ours_sum,
       reference=lambda d: _one(d.exact_sum(d.x)), scale=lambda d: _one(d.abs_sum())),
    Op("masked_sum", "masked sum: sum of x where x > 0", ours_one(lambda d: K.sum_positive, x=lambda d: d.x),
       reference=lambda d: _one(d.exact_sum(np.where(d.x > 0, d.x, 0))), scale=lambda d: _one(d.abs_sum())),
    Op("mean", "mean over every lane", ours_one(lambda d: K.mean_all, x=lambda d: d.x),
       reference=lambda d: _one(d.exact_sum(d.x) / d.n), scale=lambda d: _one(d.abs_sum() / d.n)),
    Op("max", "max over every lane", ours_one(lambda d: K.max_all, x=lambda d: d.x),
       reference=lambda d: _one(d.x.max()), scale=lambda d: _one(0.0), exact=True),
    Op("row_sum", "sum over the fast axis of a (rows, 1000) grid: one sum per row",
       ours_row, reference=lambda d: d.u.astype(np.float64).sum(axis=1),
       scale=lambda d: np.abs(d.u.astype(np.float64)).sum(axis=1)),
    Op("row_max_masked", "max over the fast axis of a (rows, 1000) grid where x < 0.5: one max per row",
       ours_one(lambda d: K.row_max_masked(d.cols), x=lambda d: d.u), reference=ref_row_max_masked,
       scale=lambda d: np.zeros(d.rows), exact=True),
    Op("row_softmax", "softmax over the fast axis of a (rows, 1000) grid: max and sum read per row, one launch",
       ours_one(lambda d: K.row_softmax(d.cols), x=lambda d: d.u), reference=ref_softmax, scale=ref_softmax),
    Op("col_sum", "sum over the slow axis of a (rows, 1000) grid: one sum per column",
       ours_col, reference=lambda d: d.u.astype(np.float64).sum(axis=0),
       scale=lambda d: np.abs(d.u.astype(np.float64)).sum(axis=0)),
    Op("scatter_random", "scatter-add into 1024 keys, random keys", ours_scatter(False),
       reference=ref_scatter("keys"),
       scale=lambda d: np.bincount(d.keys, weights=np.abs(d.x.astype(np.float64)), minlength=KEYS)),
    Op("scatter_sorted", "scatter-add into 1024 keys, sorted keys (Sorted[Index])", ours_scatter(True),
       reference=ref_scatter("skeys"),
       scale=lambda d: np.bincount(d.skeys, weights=np.abs(d.x.astype(np.float64)), minlength=KEYS)),
    Op("histogram", "histogram of t in [0, 1) into 256 bins", ours_hist,
       reference=ref_hist, scale=lambda d: np.zeros(BINS), exact=True),
    Op("stencil", "5-point .at stencil (one diffusion step) on a (rows, 1000) grid",
       ours_one(lambda d: K.diffuse(d.cols), u=lambda d: d.u, rate=RATE, last_row=lambda d: float(d.rows - 1)),
       reference=ref_stencil, scale=scale_stencil),
    Op("centre", "two-stage kernel: y = x - mean(x)", ours_one(lambda d: K.centre, x=lambda d: d.x),
       reference=ref_centre, scale=lambda d: np.abs(d.x.astype(np.float64)) + abs(d.exact_sum(d.x) / d.n)),
    Op("particles", "Vector[3] lanes (n / 3 of them): p + dt v, reflected at 1 per component",
       ours_one(lambda d: K.particles, p=lambda d: d.p, v=lambda d: d.v),
       reference=ref_particles, scale=lambda d: 2.0 + np.abs(d.p.astype(np.float64)) + np.abs(d.v * DT)),
]
OP_NAMES = [op.name for op in OPS]


# ---- checks ---------------------------------------------------------------------------------------------
def tolerance(dtype: np.dtype, check: str, kind: str, n_terms: int) -> float:
    """Allowed |got - reference| relative to the sum of |terms|. Loose enough for any summation order of a
    correct result, tight enough that a missing, doubled or misplaced term fails."""
    eps = float(np.finfo(dtype).eps)
    if check == "compensated":
        return 3.0 * eps  # documented bound: 1 x eps x sum|terms| (+ the final rounding to the dtype)
    if kind != "ours":
        return 1e-3 if dtype == np.float32 else 1e-10
    return 1e-4 if dtype == np.float32 else 1e-10


def check_output(op: Op, d: Data, name: str, impl: Impl, got) -> None:
    """Raise Mismatch when `got` (the fetched output) is not the operation's result."""
    ref = op.reference(d)
    g = np.asarray(got, dtype=np.float64).reshape(-1)
    r = np.asarray(ref, dtype=np.float64).reshape(-1)
    where = f"{op.name} {d.dtype.name} n={d.n}: {name}"
    if g.shape != r.shape:
        raise Mismatch(f"{where}: output has {g.size} value(s), expected {r.size}")
    if not np.all(np.isfinite(g)):
        raise Mismatch(f"{where}: output has non-finite values")
    if op.exact:
        if not np.array_equal(g, r):
            bad = int(np.argmax(g != r))
            raise Mismatch(f"{where}: differs from NumPy at [{bad}]: {g[bad]!r} vs {r[bad]!r}")
        return
    if impl.check == "ordered":
        want = (np.asarray([ordered_sum(d.x)]) if op.name == "sum" else
                np.asarray([ordered_sum(np.ascontiguousarray(c)) for c in d.u.T]) if op.name == "col_sum" else
                np.asarray([ordered_sum(r) for r in d.u]) if op.name == "row_sum" else
                ordered_scatter(d.skeys if op.name == "scatter_sorted" else d.keys, d.x, KEYS))
        w = np.asarray(want, dtype=np.float64).reshape(-1)
        if not np.array_equal(g, w):
            bad = int(np.argmax(g != w))
            raise Mismatch(f"{where}: not the exact sum's bits at [{bad}]: {g[bad]!r} vs {w[bad]!r}")
        return
    tol = tolerance(d.dtype, impl.check, impl.kind, d.n)
    if impl.check == "plain" and d.dtype == np.float32:
        tol = 1e-3  # one float32 add per lane into each slot: error grows with the lanes per slot
    scale = np.asarray(op.scale(d), dtype=np.float64).reshape(-1)
    err = np.abs(g - r)
    allowed = tol * scale + float(np.finfo(d.dtype).eps) * np.abs(r)
    if np.any(err > allowed):
        bad = int(np.argmax(err - allowed))
        raise Mismatch(f"{where}: |got - reference| = {err[bad]:.3g} at [{bad}] exceeds {allowed[bad]:.3g} "
                       f"(got {g[bad]!r}, reference {r[bad]!r}, tolerance {tol:.1e} x sum|terms|)")
