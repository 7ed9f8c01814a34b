"""PyTorch (CPU, its default threads): tensors share NumPy's memory; outputs are reused through out= or in-place ops."""

from __future__ import annotations

from benchmarks.data import BINS, DT, KEYS, RATE, Data
from benchmarks.ops import Impl

NAME = "torch"
torch = None


def load() -> None:
    global torch
    import torch as _torch

    torch = _torch


def version() -> str:
    return torch.__version__


def _t(d: Data, name: str):
    key = ("torch", name)
    if key not in d.cache:
        d.cache[key] = torch.from_numpy(getattr(d, name))  # zero-copy
    return d.cache[key]


def _stencil(u, o, tmp, four_u, rate):
    c = u[1:-1, 1:-1]
    torch.add(u[:-2, 1:-1], u[2:, 1:-1], out=tmp)
    tmp.add_(u[1:-1, :-2]).add_(u[1:-1, 2:])
    torch.mul(c, 4.0, out=four_u)
    tmp.sub_(four_u).mul_(rate)
    torch.add(c, tmp, out=o[1:-1, 1:-1])
    o[0], o[-1] = u[0], u[-1]
    o[1:-1, 0], o[1:-1, -1] = u[1:-1, 0], u[1:-1, -1]
    return o


def impls(op: str, d: Data) -> dict[str, Impl]:
    tdt = torch.float64 if d.dtype.name == "float64" else torch.float32
    o1 = torch.zeros((), dtype=tdt)
    if op in ("sum", "masked_sum", "mean", "max", "centre"):
        x = _t(d, "x")
    if op == "sum":
        return {"torch": Impl(lambda: torch.sum(x, 0, out=o1))}
    if op == "masked_sum":
        mask = torch.empty(x.shape, dtype=torch.bool)
        tmp, zero = torch.empty_like(x), torch.zeros((), dtype=tdt)

        def masked():
            torch.gt(x, 0, out=mask)
            torch.where(mask, x, zero, out=tmp)
            return torch.sum(tmp, 0, out=o1)

        return {"torch": Impl(masked)}
    if op == "mean":
        return {"torch": Impl(lambda: torch.mean(x, 0, out=o1))}
    if op == "max":
        return {"torch": Impl(lambda: torch.amax(x, 0, out=o1))}
    if op == "row_max_masked":
        u = _t(d, "u")
        o, tmp = torch.zeros(u.shape[0], dtype=tdt), torch.empty_like(u)
        mask, low = torch.empty(u.shape, dtype=torch.bool), torch.tensor(float("-inf"), dtype=tdt)

        def masked():
            torch.where(torch.lt(u, 0.5, out=mask), u, low, out=tmp)
            return torch.amax(tmp, 1, out=o)

        return {"torch": Impl(masked)}
    if op in ("row_sum", "col_sum"):
        u = _t(d, "u")
        axis = 1 if op == "row_sum" else 0
        o = torch.zeros(u.shape[1 - axis], dtype=tdt)
        return {"torch": Impl(lambda: torch.sum(u, axis, out=o))}
    if op in ("scatter_random", "scatter_sorted"):
        k, x = _t(d, "skeys" if op == "scatter_sorted" else "keys"), _t(d, "x")
        acc = torch.zeros(KEYS, dtype=tdt)
        return {"torch scatter_add_": Impl(lambda: acc.zero_().scatter_add_(0, k, x)),
                "torch index_add_": Impl(lambda: acc.zero_().index_add_(0, k, x))}
    if op == "histogram":
        t = _t(d, "t")
        h = torch.zeros(BINS, dtype=tdt)
        return {"torch histc": Impl(lambda: torch.histc(t, BINS, 0.0, 1.0, out=h))}
    if op == "stencil":
        u = _t(d, "u")
        o = torch.zeros_like(u)
        tmp = torch.zeros((d.rows - 2, d.cols - 2), dtype=tdt)
        four_u = torch.zeros_like(tmp)
        return {"torch": Impl(lambda: _stencil(u, o, tmp, four_u, RATE))}
    if op == "centre":
        y = torch.zeros_like(x)
        return {"torch": Impl(lambda: torch.sub(x, torch.mean(x), out=y))}
    if op == "particles":
        p, v = _t(d, "p"), _t(d, "v")
        q, r, mask = torch.zeros_like(p), torch.zeros_like(p), torch.empty(p.shape, dtype=torch.bool)

        def step():
            torch.add(p, v, alpha=DT, out=q)
            torch.neg(q, out=r).add_(2.0)
            return torch.where(torch.le(q, 1.0, out=mask), q, r, out=r)

        return {"torch": Impl(step)}
    return {}
