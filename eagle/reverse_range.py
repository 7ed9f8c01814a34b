"""The reverse of a launch bound to a lane range, `plan.bind(base=, count=, ...).reverse(ct)`.

A range runs lanes [base, base + count) of a single-stage kernel; its totals fold only those lanes. When no lane
reads another lane's planes or its own position (no `.at` of a per-lane plane, no Grid, no output written by
key), those lanes compute exactly what a run over the planes' slices [base:base + count] computes, lane for
lane and total for total, so the range's gradients are that run's: plan.reverse of the slices, with the
per-lane gradients put back at the range's place in arrays of the planes' full size (zero outside the range,
where no lane ran, as `jax.grad` of a sliced function gives) and the Param, Table and sink gradients as they
come. Any other kernel is refused by name, saying why. Per-lane planes lay their payload first and lanes last
(eagle/binding.py), so the slice is `[..., base:base + count]`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from eagle.binding import read_at
from eagle.errors import InputError


def _lane_planes(kernel) -> tuple[set[str], set[str]]:
    """(per-lane inputs, per-lane outputs) of `kernel`."""
    sig = kernel.signature
    ins = {p.name for p in sig.planes if p.kind in ("lane", "index")}
    outs = {n for n, mode in kernel.outputs.items() if mode == "lane"}
    return ins, outs


def refusal(kernel, keyed: tuple[str, ...]) -> str | None:
    """Why lanes of a range do not compute what a run over the slices computes, or None."""
    sig = kernel.signature
    if any(p.kind == "grid" for p in sig.planes):
        return "a Grid kernel's lanes have coordinates, which a run over the slices would renumber"
    ins, _ = _lane_planes(kernel)
    read = sorted(ins & read_at(kernel))
    if read:
        return f"plane '{read[0]}' is read at other lanes (.at), which may lie outside the range"
    if keyed:
        return f"output '{keyed[0]}' is written by key (positions, not lanes)"
    return None


def range_reverse(launch, cotangent, wrt, lo: int, hi: int, reverse) -> dict:
    """The gradients of `launch` (bound to lanes [lo, hi)) for `cotangent`: `reverse(planes, cotangent, wrt)`
    (plan.reverse's door) on the planes' slices, per-lane gradients widened back to the planes' size."""
    from eagle.array import Array
    from eagle.reverse import forward_of

    plan = launch.plan
    kernel, fwd = plan.kernel, forward_of(plan)
    why = refusal(kernel, fwd.keyed)
    if why is not None:
        raise InputError(f"kernel '{kernel.name}': reverse: this launch is bound to lanes [{lo}, {hi}) of "
                         f"{launch.bound.lanes} (base=/count=), and {why}: bind without base= and count= to "
                         "differentiate every lane")
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
