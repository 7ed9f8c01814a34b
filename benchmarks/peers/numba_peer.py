"""Numba: parallel=True loops (prange) over every core, fastmath where a sum may be reassociated; outputs reused.

Scatters, histograms and column sums keep one private row of slots per thread and add the rows at the end (the
usual way to write them in Numba without atomics). Compiled functions are cached on disk (cache=True).
"""

from __future__ import annotations

import numpy as np

from benchmarks.data import DT, KEYS, RATE, Data
from benchmarks.ops import Impl

NAME = "numba"
numba = None
_K: dict = {}


def load() -> None:
    global numba
    import numba as _numba

    numba = _numba
    _compile()


def version() -> str:
    return numba.__version__


def _compile() -> None:
    njit, prange = numba.njit, numba.prange
    fast = dict(parallel=True, fastmath=True, cache=True)

    @njit(**fast)
    def total(x):
        s = 0.0
        for i in prange(x.size):
            s += x[i]
        return s

    @njit(**fast)
    def masked(x):
        s = 0.0
        for i in prange(x.size):
            if x[i] > 0:
                s += x[i]
        return s

    @njit(**fast)
    def mean(x):
        s = 0.0
        for i in prange(x.size):
            s += x[i]
        return s / x.size

    @njit(parallel=True, cache=True)
    def largest(x):
        m = -np.inf
        for i in prange(x.size):
            m = max(m, x[i])
        return m

    @njit(**fast)
    def row_sum(u, out):
        for r in prange(u.shape[0]):
            s = 0.0
            for c in range(u.shape[1]):
                s += u[r, c]
            out[r] = s
        return out

    @njit(**fast)
    def row_max_masked(u, out):
        for r in prange(u.shape[0]):
            m = -np.inf
            for c in range(u.shape[1]):
                v = u[r, c]
                if v < 0.5:
                    m = max(m, v)
            out[r] = m
        return out

    @njit(**fast)
    def col_sum(u, out, nt):
        local = np.zeros((nt, u.shape[1]), dtype=out.dtype)
        step = (u.shape[0] + nt - 1) // nt
        for t in prange(nt):
            for r in range(t * step, min(u.shape[0], (t + 1) * step)):
                for c in range(u.shape[1]):
                    local[t, c] += u[r, c]
        for c in range(u.shape[1]):
            s = 0.0
            for t in range(nt):
                s += local[t, c]
            out[c] = s
        return out

    @njit(**fast)
    def scatter_add(keys, x, out, nt):
        local = np.zeros((nt, out.size), dtype=out.dtype)
        step = (x.size + nt - 1) // nt
        for t in prange(nt):
            for i in range(t * step, min(x.size, (t + 1) * step)):
                local[t, keys[i]] += x[i]
        for j in range(out.size):
            s = 0.0
            for t in range(nt):
                s += local[t, j]
            out[j] = s
        return out

    @njit(**fast)
    def histogram(t, out, nt):
        nb = out.size
        local = np.zeros((nt, nb), dtype=np.int64)
        step = (t.size + nt - 1) // nt
        for k in prange(nt):
            for i in range(k * step, min(t.size, (k + 1) * step)):
                b = int(np.floor(t[i] * 256.0))
                b = min(max(b, 0), nb - 1)
                local[k, b] += 1
        for j in range(nb):
            s = 0
            for k in range(nt):
                s += local[k, j]
            out[j] = s
        return out

    @njit(**fast)
    def stencil(u, out, rate):
        rows, cols = u.shape
        for r in prange(rows):
            if r == 0 or r == rows - 1:
                for c in range(cols):
                    out[r, c] = u[r, c]
            else:
                out[r, 0] = u[r, 0]
                for c in range(1, cols - 1):
                    out[r, c] = u[r, c] + rate * (u[r - 1, c] + u[r + 1, c] + u[r, c - 1] + u[r, c + 1]
                                                  - 4.0 * u[r, c])
                out[r, cols - 1] = u[r, cols - 1]
        return out

    @njit(**fast)
    def centre(x, y):
        s = 0.0
        for i in prange(x.size):
            s += x[i]
        mu = s / x.size
        for i in prange(x.size):
            y[i] = x[i] - mu
        return y

    @njit(**fast)
    def particles(p, v, out, dt_):
        for i in prange(p.shape[1]):
            for c in range(3):
                q = p[c, i] + dt_ * v[c, i]
                out[c, i] = 2.0 - q if q > 1.0 else q
        return out

    _K.update(total=total, masked=masked, mean=mean, largest=largest, row_sum=row_sum,
              row_max_masked=row_max_masked, col_sum=col_sum, scatter_add=scatter_add, histogram=histogram,
              stencil=stencil, centre=centre, particles=particles)


def impls(op: str, d: Data) -> dict[str, Impl]:
    x, dt = d.x, d.dtype
    nt = numba.get_num_threads()  # one private row of slots per thread (passed in: keeps the functions cacheable)
    one = lambda v: np.array([v])  # noqa: E731  (scalar results: fetched as a 1-element array)
    simple = {"sum": "total", "masked_sum": "masked", "mean": "mean", "max": "largest"}
    if op in simple:
        f = _K[simple[op]]
        return {"numba": Impl(lambda: f(x), fetch=one)}
    if op in ("row_sum", "row_max_masked"):
        o, f = np.zeros(d.rows, dtype=dt), _K[op]
        return {"numba": Impl(lambda: f(d.u, o))}
    if op == "col_sum":
        o = np.zeros(d.cols, dtype=dt)
        return {"numba": Impl(lambda: _K["col_sum"](d.u, o, nt))}
    if op in ("scatter_random", "scatter_sorted"):
        keys = d.skeys if op == "scatter_sorted" else d.keys
        acc = np.zeros(KEYS, dtype=dt)
        return {"numba": Impl(lambda: _K["scatter_add"](keys, x, acc, nt))}
    if op == "histogram":
        h = np.zeros(256, dtype=np.int64)
        return {"numba": Impl(lambda: _K["histogram"](d.t, h, nt))}
    if op == "stencil":
        o = np.zeros_like(d.u)
        rate = dt.type(RATE)
        return {"numba": Impl(lambda: _K["stencil"](d.u, o, rate))}
    if op == "centre":
        y = np.zeros_like(x)
        return {"numba": Impl(lambda: _K["centre"](x, y))}
    if op == "particles":
        out = np.zeros_like(d.p)
        return {"numba": Impl(lambda: _K["particles"](d.p, d.v, out, dt.type(DT)))}
    return {}
