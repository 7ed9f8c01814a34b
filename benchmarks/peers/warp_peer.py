"""Warp on the CPU (one thread there): wp.utils.array_sum for sums, atomic_add kernels for scatters and histograms,
a 2-D kernel for the stencil. Arrays wrap NumPy's memory without copies; outputs are reused."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from benchmarks.data import BINS, KEYS, RATE, Data
from benchmarks.ops import Impl

NAME = "warp"
wp = None
_K: dict = {}


def load() -> None:
    global wp
    import warp as _wp

    _wp.config.log_level = logging.WARNING  # no banner, no "module loaded" lines
    _wp.init()
    wp = _wp
    _define()


def version() -> str:
    return wp.config.version


def _define() -> None:
    @wp.kernel
    def scatter_add(keys: wp.array(dtype=wp.int64), x: wp.array(dtype=Any), out: wp.array(dtype=Any)):
        i = wp.tid()
        wp.atomic_add(out, int(keys[i]), x[i])

    @wp.kernel
    def histogram(t: wp.array(dtype=Any), out: wp.array(dtype=Any)):
        i = wp.tid()
        b = wp.clamp(int(wp.floor(t[i] * t.dtype(256.0))), 0, 255)
        wp.atomic_add(out, b, out.dtype(1.0))

    @wp.kernel
    def stencil(u: wp.array2d(dtype=Any), out: wp.array2d(dtype=Any), rate: Any):
        r, c = wp.tid()
        rows = u.shape[0]
        cols = u.shape[1]
        if r > 0 and r < rows - 1 and c > 0 and c < cols - 1:
            out[r, c] = u[r, c] + rate * (u[r - 1, c] + u[r + 1, c] + u[r, c - 1] + u[r, c + 1]
                                          - u.dtype(4.0) * u[r, c])
        else:
            out[r, c] = u[r, c]

    @wp.kernel
    def subtract_mean(x: wp.array(dtype=Any), total: wp.array(dtype=Any), y: wp.array(dtype=Any)):
        i = wp.tid()
        y[i] = x[i] - total[0] / x.dtype(x.shape[0])

    _K.update(scatter_add=scatter_add, histogram=histogram, stencil=stencil, subtract_mean=subtract_mean)


def _w(d: Data, name: str):
    key = ("warp", name)
    if key not in d.cache:
        d.cache[key] = wp.array(getattr(d, name), copy=False, device="cpu")
    return d.cache[key]


def _launch(kernel, dim, inputs, out) -> Impl:
    def call():
        wp.launch(kernel, dim=dim, inputs=inputs, device="cpu")
        return out

    return Impl(call, fetch=lambda o: o.numpy())


def impls(op: str, d: Data) -> dict[str, Impl]:
    wdt = wp.float64 if d.dtype.name == "float64" else wp.float32
    if op == "sum":
        s = wp.zeros(1, dtype=wdt, device="cpu")
        x = _w(d, "x")

        def total():
            wp.utils.array_sum(x, out=s)
            return s

        return {"warp": Impl(total, fetch=lambda o: o.numpy())}
    if op in ("scatter_random", "scatter_sorted"):
        k, x = _w(d, "skeys" if op == "scatter_sorted" else "keys"), _w(d, "x")
        acc = wp.zeros(KEYS, dtype=wdt, device="cpu")

        def scatter():
            acc.zero_()
            wp.launch(_K["scatter_add"], dim=d.n, inputs=[k, x, acc], device="cpu")
            return acc

        return {"warp": Impl(scatter, fetch=lambda o: o.numpy())}
    if op == "histogram":
        t = _w(d, "t")
        h = wp.zeros(BINS, dtype=wdt, device="cpu")

        def hist():
            h.zero_()
            wp.launch(_K["histogram"], dim=d.n, inputs=[t, h], device="cpu")
            return h

        return {"warp": Impl(hist, fetch=lambda o: o.numpy())}
    if op == "stencil":
        o = wp.zeros(d.u.shape, dtype=wdt, device="cpu")
        return {"warp": _launch(_K["stencil"], d.u.shape, [_w(d, "u"), o, wdt(RATE)], o)}
    if op == "centre":
        x = _w(d, "x")
        s = wp.zeros(1, dtype=wdt, device="cpu")
        y = wp.zeros(d.n, dtype=wdt, device="cpu")

        def centre():
            wp.utils.array_sum(x, out=s)
            wp.launch(_K["subtract_mean"], dim=d.n, inputs=[x, s, y], device="cpu")
            return y

        return {"warp": Impl(centre, fetch=lambda o: np.asarray(o.numpy()))}
    return {}
