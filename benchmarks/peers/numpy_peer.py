"""NumPy: the natural call for each operation, with out= where NumPy takes one."""

from __future__ import annotations

import numpy as np

from benchmarks.data import BINS, DT, KEYS, RATE, Data
from benchmarks.ops import Impl

NAME = "numpy"


def load() -> None:
    pass


def version() -> str:
    return np.__version__


def stencil_into(u: np.ndarray, o: np.ndarray, tmp: np.ndarray, rate) -> np.ndarray:
    """One diffusion step into o with one reused temporary: no allocation per call."""
    c = u[1:-1, 1:-1]
    np.add(u[:-2, 1:-1], u[2:, 1:-1], out=tmp)
    tmp += u[1:-1, :-2]
    tmp += u[1:-1, 2:]
    tmp -= np.multiply(c, 4.0, out=o[1:-1, 1:-1])  # o's interior holds 4u for a moment
    tmp *= rate
    np.add(c, tmp, out=o[1:-1, 1:-1])
    o[0], o[-1] = u[0], u[-1]
    o[1:-1, 0], o[1:-1, -1] = u[1:-1, 0], u[1:-1, -1]
    return o


def impls(op: str, d: Data) -> dict[str, Impl]:
    x, dt = d.x, d.dtype
    o1 = np.zeros((), dtype=dt)
    if op == "sum":
        return {"numpy": Impl(lambda: np.add.reduce(x, out=o1))}
    if op == "masked_sum":
        mask = np.empty(x.shape, dtype=bool)
        return {"numpy": Impl(lambda: np.add.reduce(x, where=np.greater(x, 0, out=mask), out=o1))}
    if op == "mean":
        return {"numpy": Impl(lambda: np.mean(x, out=o1))}
    if op == "max":
        return {"numpy": Impl(lambda: np.maximum.reduce(x, out=o1))}
    if op == "row_sum":
        o = np.zeros(d.rows, dtype=dt)
        return {"numpy": Impl(lambda: np.add.reduce(d.u, axis=1, out=o))}
    if op == "row_max_masked":
        o, mask = np.zeros(d.rows, dtype=dt), np.empty(d.u.shape, dtype=bool)
        return {"numpy": Impl(lambda: np.maximum.reduce(d.u, axis=1, where=np.less(d.u, 0.5, out=mask),
                                                        initial=-np.inf, out=o))}
    if op == "row_softmax":
        e = np.zeros_like(d.u)
        s = np.zeros((d.rows, 1), dtype=dt)

        def softmax():
            np.subtract(d.u, np.maximum.reduce(d.u, axis=1, keepdims=True), out=e)
            np.exp(e, out=e)
            return np.divide(e, np.add.reduce(e, axis=1, keepdims=True, out=s), out=e)

        return {"numpy": Impl(softmax)}
    if op == "col_sum":
        o = np.zeros(d.cols, dtype=dt)
        return {"numpy": Impl(lambda: np.add.reduce(d.u, axis=0, out=o))}
    if op in ("scatter_random", "scatter_sorted"):
        keys = d.skeys if op == "scatter_sorted" else d.keys
        acc = np.zeros(KEYS, dtype=dt)

        def add_at():
            acc.fill(0)
            np.add.at(acc, keys, x)
            return acc

        return {"numpy bincount": Impl(lambda: np.bincount(keys, weights=x, minlength=KEYS)),
                "numpy add.at": Impl(add_at)}
    if op == "histogram":
        t = d.t
        scale = dt.type(256.0)
        return {"numpy histogram": Impl(lambda: np.histogram(t, BINS, (0.0, 1.0))[0]),
                "numpy bincount": Impl(lambda: np.bincount(np.clip(np.floor(t * scale), 0, BINS - 1).astype(np.intp),
                                                           minlength=BINS))}
    if op == "stencil":
        o = np.zeros_like(d.u)
        tmp = np.zeros((d.rows - 2, d.cols - 2), dtype=dt)
        rate = dt.type(RATE)
        return {"numpy": Impl(lambda: stencil_into(d.u, o, tmp, rate))}
    if op == "centre":
        y = np.zeros_like(x)
        return {"numpy": Impl(lambda: np.subtract(x, np.mean(x), out=y))}
    if op == "particles":
        q, r, mask = np.zeros_like(d.p), np.zeros_like(d.p), np.empty(d.p.shape, dtype=bool)

        def step():
            np.add(np.multiply(d.v, dt.type(DT), out=q), d.p, out=q)
            np.subtract(dt.type(2.0), q, out=r)
            np.copyto(r, q, where=np.less_equal(q, 1.0, out=mask))
            return r

        return {"numpy": Impl(step)}
    return {}
