"""Where a shard's lanes sit in the whole run: each chunk's meta and each plane's address shift.

A lanes half runs one shard's lanes in a fixed number of chunks; each chunk's meta is [start, stop, chunk, L,
extents...]. Without global lane numbers (no halo, no read of the leading coordinate) a shard is a run of its
own: lanes 0..n, its own extents. With them, the shard's lanes are its run of the whole grid, rows [r0, r0 + n)
of R: the metas carry the whole grid's L and extents and the shard's global lane range, so coordinates, `.at`
clamps at the grid's edges and ordered-block boundaries are those of the one-device run. The compiled code
then reads lane g of a plane at address + g elements; a shard's buffer holds only its rows (and a plane read
with `.at` its halo rows above and below), so the address the stage is given is the buffer's minus a shift:
(r0 - halo) x W elements for an input plane, r0 x W for a per-lane output (W: lanes per row).

`geometry` gives one shard's int64 vector: the shift of every operand and result of the lanes half, then every
chunk's meta; dist.c applies it (eagle.jax: as operand 0 of its XLA handler; eagle.torch: `run_python`).
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from eagle import native
from eagle.distributed.reach import Reach


def bounds(plan, b, k: int, how: Reach, r0: int, rows: int) -> tuple[list[tuple[int, int]], int, tuple]:
    """Stage k's chunk bounds for the shard holding rows [r0, r0 + rows) of `rows` in all (b: the shard's own
    binding), with the L and extents its metas carry."""
    _, launcher = plan.prepare(b.spec, k)
    w = math.prod(b.extents[1:])
    if how.global_lanes:
        ext = (rows, *b.extents[1:])
        lo, hi = r0 * w, (r0 + b.extents[0]) * w
        if how.block:  # whole blocks: from the first block start at or after the shard's first lane
            lo, hi = (min(-(-v // how.block) * how.block, rows * w) for v in (lo, hi))
    else:
        ext, lo, hi = tuple(b.extents), 0, b.lanes
    return launcher.chunk_bounds(b, lo, hi), math.prod(ext), ext


def geometry(plan, b, k: int, half, how: Reach, r0: int, rows: int) -> np.ndarray:
    """One shard's geometry vector for stage k's lanes half (see above)."""
    cuts, lanes, ext = bounds(plan, b, k, how, r0, rows)
    chunks = len(half.call.stages[0].args.metas)
    if len(cuts) > chunks:
        raise RuntimeError(f"kernel '{plan.kernel.name}': a shard needs {len(cuts)} chunks, prepared for {chunks}")
    hi = cuts[-1][1]
    cuts = cuts + [(hi, hi)] * (chunks - len(cuts))
    w = math.prod(b.extents[1:])
    shifts = []
    for role, name in zip(half.roles, half.planes, strict=True):
        if not how.global_lanes or role not in ("in", "index", "out"):
            shifts.append(0)
        elif role == "out":
            shifts.append(r0 * w)
        else:
            shifts.append((r0 - how.halo.get(name, 0)) * w)
    metas = [[lo, hi_, c, lanes, *ext] for c, (lo, hi_) in enumerate(cuts)]
    return np.array(shifts + [v for m in metas for v in m], dtype=np.int64)


def realigned(starts: list[int], unit: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Where the lanes a shard realigned to `unit` (Reach.block) runs but does not hold come from, and where those
    it holds but does not run went. `starts`: every shard's first lane, then the run's lane count. Shard s holds
    lanes [o(s), o(s+1)) and runs [A(s), A(s+1)), A(s) the first multiple of `unit` at or after o(s) (at most the
    lane count): A(s) >= o(s), and A(s+1) - o(s+1) < unit. Each shard hands on its first `unit` lanes (padded)
    and gets every shard's in one gather of S x unit values; so per shard

    * `tails[s]`: `unit` indices into that gather for the lanes o(s+1) + i it runs past its own (-1: not run);
    * `heads[s]`: for its first min(n(s), unit) own lanes, an index into the gather of every shard's per-lane
      output past its own lanes (its `unit` lanes from o(s+1)) where the shard that ran the lane put it (-1: its
      own run wrote it).
    """
    o = list(starts)
    S, L = len(o) - 1, o[-1]
    A = [min(-(-v // unit) * unit, L) for v in o]
    owner_of_held = np.repeat(np.arange(S), np.diff(o))  # lane -> the shard holding it
    tails, heads = [], []
    for s in range(S):
        t = np.full(unit, -1, dtype=np.int64)
        g = np.arange(o[s + 1], A[s + 1])
        q = owner_of_held[g] if g.size else g
        t[:g.size] = q * unit + (g - np.asarray(o)[q]) if g.size else t[:0]
        tails.append(t)
        m = min(o[s + 1] - o[s], unit)
        h = np.full(m, -1, dtype=np.int64)
        g = np.arange(o[s], min(A[s], o[s] + m))
        if g.size:
            ran = np.searchsorted(A, g, side="right") - 1  # the shard whose run holds lane g
            h[:g.size] = ran * unit + (g - np.asarray(o)[ran + 1])
        heads.append(h)
    return tails, heads


def window(starts: list[int], before: int, after: int) -> list[np.ndarray]:
    """Where the lanes around a shard's own come from when the shard runs whole blocks and reads neighbours with
    `.at` (a halo of `before` lanes, and `after` lanes past its own end: the lanes it runs past its own and their
    halo). Each shard hands on its last `before` lanes (right-aligned, zeros in front) then its first `after` lanes
    (zeros after) and gets every shard's in one gather of S x (before + after) values; `out[s]` holds, for lanes
    o(s) - before + i (i < before) then o(s+1) + i (i < after), an index into that gather (-1: past the run's
    edges, a zero). A lane before o(s) within `before` of it lies in its holder's last `before` lanes, one after
    o(s+1) within `after` of it in its holder's first `after`, whatever the shard sizes (empty shards too)."""
    o = np.asarray(starts, dtype=np.int64)
    S, L, unit = len(o) - 1, int(o[-1]), before + after
    owner = np.repeat(np.arange(S), np.diff(o))  # lane -> the shard holding it
    out = []
    for s in range(S):
        t = np.full(unit, -1, dtype=np.int64)
        g = np.arange(o[s] - before, o[s])
        ok = g >= 0
        q = owner[g[ok]]
        t[:before][ok] = q * unit + before - (o[q + 1] - g[ok])
        g = np.arange(o[s + 1], o[s + 1] + after)
        ok = g < L
        q = owner[g[ok]]
        t[before:][ok] = q * unit + before + (g[ok] - o[q])
        out.append(t)
    return out


def dist_plan(half) -> int:
    """The address of the lanes half's dist_plan (eagle/distributed/dist.c), built once: what the XLA handler
    `eagle_dist_lanes` reads."""
    if getattr(half, "_dist", None) is not None:
        return half._dist
    from eagle.distributed.stages import _DistPlan, library

    lib = library()
    call = half.call
    st = call.stages[0]
    first, slots = call.slot_table()
    elem = half.elem
    metas = st.args.metas
    keep = {"first": first, "slots": slots, "elem": (ctypes.c_int64 * max(len(elem), 1))(*elem),
            "metas": (ctypes.c_void_p * len(metas))(*[native.address(m) for m in metas]),
            "raw": ctypes.create_string_buffer(lib.eagle_dist_plan_size())}
    head = _DistPlan.from_buffer(keep["raw"])
    head.fire = native.function_address(native.library().eagle_fire)
    head.stage = st.args.stage_address
    head.nargs, head.nrets = len(half.operands), len(half.results)
    head.first, head.slots = ctypes.addressof(first), ctypes.addressof(slots)
    head.elem, head.metas = ctypes.addressof(keep["elem"]), ctypes.addressof(keep["metas"])
    head.nmetas, head.meta_len = len(metas), metas[0].size
    if lib.eagle_dist_plan_init(ctypes.addressof(keep["raw"])) != 0:
        raise RuntimeError("could not set up a sharded call plan's lock")
    half._keep = keep
    half._dist = ctypes.addressof(keep["raw"])
    return half._dist


def run_python(half, geo: np.ndarray, operands: list[np.ndarray], results: list[np.ndarray]) -> None:
    """Fire a lanes half from Python (eagle.torch) with this shard's geometry, through dist.c. A key outside a
    sink is not raised here: it is in the #err result, which every rank looks at once the ranks' are gathered."""
    from eagle.distributed.stages import library

    plan = dist_plan(half)
    arrays = operands + results
    ptrs = (ctypes.c_void_p * max(len(arrays), 1))(*[native.address(a) if a.size else 0 for a in arrays])
    g = np.ascontiguousarray(geo, dtype=np.int64)
    library().eagle_dist_run(plan, native.address(g), ptrs)
