"""The reverse of a launch bound to a lane range, `plan.bind(base=, count=, ...).reverse(ct)`.

A range runs lanes [base, base + count) of a single-stage kernel; its totals fold only those lanes. Its gradients
are those of what the range computed: its lanes' outputs, totals over its lanes, a sink's adds from its lanes
(zero outside the range where nothing there flows, as `jax.grad` of a sliced function gives; an output the body
reads before assigning it passes its initial contents through there, so its gradient there is its cotangent:
`pass_through`). Two ways:

- **slices**: when no lane reads another lane's planes or its own position (no `.at` of a per-lane plane, no
  Grid, no output written by key), those lanes compute exactly what a run over the planes' slices
  [base:base + count] computes, lane for lane and total for total, so the gradients are plan.reverse of the
  slices, per-lane ones put back at the range's place in arrays of the planes' full size. Any adjoint serves,
  staged ones included (a max's, a mean's: the slices are a run of their own);
- **span**: otherwise (a stencil, coordinates, reads of other lanes, stores by key), the adjoint's lanes run
  over the same range (eagle/reverse.Reverse's `span`): each range lane recomputes what it computed, reading any
  lane's inputs as the forward did, and sends its cotangents where its reads went, so lanes outside the range get
  what range lanes' reads send them and nothing else; a stencil's gather runs over every lane. The adjoint must
  run in one launch (a staged one needs its totals over its own run) and keep no lane axis in a cell (a kept
  slot's cotangent is held by the slot's first lane, which may lie outside the range): those are refused by name.

Per-lane planes lay their payload first and lanes last (eagle/binding.py), so a slice is `[..., base:base + count]`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from eagle.binding import read_at


def _lane_planes(kernel) -> tuple[set[str], set[str]]:
    """(per-lane inputs, per-lane outputs) of `kernel`."""
    sig = kernel.signature
    ins = {p.name for p in sig.planes if p.kind in ("lane", "index")}
    outs = {n for n, mode in kernel.outputs.items() if mode == "lane"}
    return ins, outs


def by_slices(kernel, keyed: tuple[str, ...]) -> bool:
    """Whether the lanes of a range compute what a run over the slices computes (the slices way serves)."""
    sig = kernel.signature
    ins, _ = _lane_planes(kernel)
    return not any(p.kind == "grid" for p in sig.planes) and not (ins & read_at(kernel)) and not keyed


def span_refusal(design, runners) -> str | None:
    """Why the adjoint cannot run over a range's lanes only (the span way), or None."""
    staged = next((r.kernel.stage_count for r in runners if r is not None and r.kernel.stage_count > 1), None)
    if staged is not None:
        return (f"its adjoint runs in {staged} stages (its totals over its own lanes), and a range's lanes read "
                "other lanes or their coordinates, so no run over slices stands in")
    kept = sorted(design.kept)
    if kept:
        return (f"cell '{kept[0]}' keeps a lane axis, whose slots' cotangents lanes outside the range may hold, and "
                "the range's lanes read other lanes or their coordinates, so no run over slices stands in")
    return None


def range_reverse(launch, cotangent, wrt, lo: int, hi: int, reverse) -> dict:
    """The slices way: the gradients of `launch` (bound to lanes [lo, hi)) for `cotangent` from
    `reverse(planes, cotangent, wrt)` (plan.reverse's door) on the planes' slices, per-lane gradients widened back
    to the planes' size."""
    from eagle.array import Array

    plan = launch.plan
    kernel = plan.kernel
    ins, outs = _lane_planes(kernel)
    per_lane = ins | outs
    planes = {**launch.planes, **getattr(launch, "initial", {})}
    cut = {n: (np.asarray(v)[..., lo:hi] if n in per_lane and v is not None else v) for n, v in planes.items()}
    if isinstance(cotangent, Mapping):
        ct = {n: (np.asarray(c)[..., lo:hi] if n in outs and np.ndim(c) else c) for n, c in cotangent.items()}
    else:
        only = next(iter(kernel.outputs), None)
        ct = np.asarray(cotangent)[..., lo:hi] if only in outs and np.ndim(cotangent) else cotangent
    got = reverse(cut, ct, wrt)
    out = {}
    for n, g in got.items():
        if n not in per_lane:
            out[n] = g
            continue
        a = np.asarray(g)
        full = np.zeros((*a.shape[:-1], launch.bound.lanes), a.dtype)
        full[..., lo:hi] = a
        out[n] = Array(full.reshape(np.shape(planes[n])) if planes.get(n) is not None else full)
    return out


def pass_through(grads: dict, cotangent, fwd, lo: int, hi: int, lanes: int) -> dict:
    """An output the body reads before assigning it keeps its initial contents outside the range (no lane there
    writes it), as the launch hands it back: there its initial contents' gradient is the output's own cotangent
    (as `jax.grad` of `y.at[lo:hi].set(f(y[lo:hi]))` gives), zero where none is given."""
    names = [n for n in fwd.float_init if n in grads]
    if not names:
        return grads
    from eagle.array import Array

    cts = cotangent if isinstance(cotangent, Mapping) else \
        ({next(iter(fwd.outputs)): cotangent} if len(fwd.outputs) == 1 else {})
    out = dict(grads)
    for n in names:
        g = np.array(grads[n])  # (a copy: the door's buffers are the next call's)
        flat = g.reshape(-1, lanes)  # payload first, lanes last
        c = cts.get(n)
        ct = np.broadcast_to(np.asarray(0.0 if c is None else c, g.dtype), g.shape).reshape(-1, lanes)
        flat[:, :lo], flat[:, hi:] = ct[:, :lo], ct[:, hi:]
        out[n] = Array(g)
    return out
