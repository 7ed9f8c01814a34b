"""A sharded run of a kernel for one set of per-shard shapes: every stage's two halves (eagle/distributed/
stages.py), and the walk through them that a framework drives with its own collectives.

`bind_sharded` binds one shard's planes and checks the kernel can run sharded (its Reach: halos, global
coordinates); `needed_chunks` says how many chunks the shards need per stage; `ShardedRun` prepares per stage a
lanes half (C chunks, and each shard's geometry) and a finish half (S * C chunks; S shards). `drive` walks the
stages with callables the framework supplies: `lanes(half, operands)` and `finish(half, operands)` fire a half
(an XLA custom call, or a ctypes call), `combine(kind, array, fold)` is the cross-shard collective for one state
buffer (gather along the chunk axis, int64 sum, float sum, an integer sum of a scan's block totals' bits or a
reverse scan's lane values' bits, each written by one shard; the #err triples are gathered; a large sink's copies
folded per shard first and its exact accumulators summed only when used: eagle/distributed/sinks.py; an output
written by key, `combine(KEYED, stored, before)`: each position from a shard that changed its bits, else as before),
`refuse(half, err)` looks at the gathered #err before the finish half (it raises, or fails the XLA program, on every
shard alike: a key outside a sink on any shard), `add(a, b)` adds a sink's prior content, `halo(a, rows)`
surrounds a plane with its neighbours' rows, and a `Move` passes the few lanes of scan blocks that straddle shards
(Reach.block: every shard runs whole blocks at their global lane numbers, bitwise the one-device scan; a plane read
with halos gets theirs too). What comes back says where each of Plan.run's results lies: per-lane outputs are the
shard's own (its lanes), cells and sinks are the whole run's, the same on every shard.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from eagle.distributed.geometry import bounds, geometry, realigned, window
from eagle.distributed.rows import own_slots, place_slots, slots
from eagle.distributed.stages import (
    ERR,
    FSUM,
    KEYED,
    LOCAL,
    Half,
    check_shardable,
    finish_stage,
    lanes_stage,
    leading_cells,
)
from eagle.errors import InputError


def bind_sharded(plan, planes: dict, where: str, keyed: bool = False):
    """(binding, Reach) of one shard's planes: bound as Plan.run binds them, the kernel checked for sharding.
    `keyed`: outputs written by key are taken (shard_map, torch groups), passed whole (their positions)."""
    from eagle.bridge import keyed_outputs

    kernel = plan.kernel
    if plan.target != "host":
        raise InputError(f"kernel '{kernel.name}': sharded runs take the host target (got '{plan.target}')")
    b = plan.binder.bind(planes)
    by_key = keyed_outputs(plan) if keyed else frozenset()
    for n in by_key - set(b.given):
        raise InputError(f"plane '{n}' of kernel '{kernel.name}': written by key (hawk.scatter({n})[k] = v), its "
                         f"positions are not lanes: a sharded run writes into the whole array passed as `{n}=` "
                         f"(every shard the same array, its length the positions; zeros to start from nothing)")
    for n in set(b.given) - by_key:
        raise InputError(f"plane '{n}' of kernel '{kernel.name}': a sharded run does not take outputs or sinks to "
                         f"write in place here; leave it out (a sink's prior content: pass it as `{n}=` to the "
                         f"wrapped call, which adds it once)")
    cache = plan.__dict__.setdefault("_shard_reach", {})
    row = math.prod(b.extents[1:]) if len(b.extents) > 1 else 0
    how = cache.get((b.spec, where, row, keyed))
    if how is None:
        how = cache[(b.spec, where, row, keyed)] = check_shardable(plan, b.spec, where, row, keyed)
    return b, how


def needed_chunks(plan, b, how, spans: list[tuple[int, int]]) -> list[int]:
    """Per stage, the most chunks any of these shards (first row, rows in all) runs."""
    return [max(len(bounds(plan, b, k, how, r0, rows)[0]) for r0, rows in spans)
            for k in range(plan.kernel.stage_count)]


class ShardedRun:
    """Every stage of a sharded run, prepared once for one shard's binding `b`: `spans` are (first row, rows in
    all) of each shard whose geometry a call may need (every shard for JAX, whose program is the same on all;
    this rank's for torch); `counts` the chunks every shard runs per stage (at least `needed_chunks`)."""

    def __init__(self, plan, b, how, shards: int, spans: list[tuple[int, int]], counts: list[int],
                 starts: list[int] | None = None):
        self.name, self.shards, self.how = plan.kernel.name, shards, how
        self.halves: list[tuple[Half, Half]] = []
        self.payload = {p.name: math.prod(p.payload.shape) for p in plan.kernel.signature.planes
                        if p.kind in ("lane", "output") and p.payload.shape}  # components of each Vector plane
        self.rows = b.extents[0] if b.extents else b.lanes
        self.lanes = b.lanes
        total, tail = 0, 0
        self.windows: dict = {}
        if how.block:  # shards run whole scan blocks: `starts` are every shard's first row, then the row count
            w = math.prod(b.extents[1:])
            total, tail = starts[-1] * w, how.block
            self.tails, self.heads = realigned([r * w for r in starts], how.block)
            # a plane read with .at: h rows before the shard's own lanes, and past them the lanes it runs with
            # their h rows (a shard runs fewer than `block` lanes past its own)
            self.windows = {n: (h * w, (-(-how.block // w) + h) * w) for n, h in how.halo.items() if h}
            self.windows = {n: (lo, hi, window([r * w for r in starts], lo, hi))
                            for n, (lo, hi) in self.windows.items()}
        cuts: dict = {}
        self.local: set[str] = set()  # results that are each shard's own slots (a row sum's), not the whole run's
        self.row_cuts: dict = {}  # a row cell cut between stages whose lanes read it at whole-run slots: Slots
        # a shard at whole-run lane numbers writes a row cell's state at the whole run's slots (rows.py): the
        # first row of each shard whose geometry a call may need, to take its own out
        whole = spans[0][1] if how.global_lanes and not how.block else 0
        self.first_rows = [np.array([r0], dtype=np.int64) for r0, _ in spans]
        for k, c in enumerate(counts):
            lh = lanes_stage(plan, b, k, c, cuts, total, tail, whole)
            lh.geo = np.stack([geometry(plan, b, k, lh, how, r0, rows) for r0, rows in spans])
            self._halo_sizes(lh, b)
            self._whole_cuts(lh)
            fh = finish_stage(plan, b, k, c * shards, cuts, total)
            self.halves.append((lh, fh))
            self.local |= fh.local
            cuts.update(fh.call.stages[0].cells_out)
            if whole:  # a row cell cut for later stages: their lanes read it at whole-run slots (rows.py)
                lay = plan.kernel.layout(b.spec, k)
                rows_kept = leading_cells(plan.kernel, lay)
                for r in lay.reductions:
                    if r.cell in fh.cells_out and r.cell in rows_kept:
                        self.row_cuts[r.cell] = slots(r, "cell", tuple(b.extents), whole, b.dtype)
        self.dtype, self.extents = b.dtype, tuple(b.extents)

    def _halo_sizes(self, lh: Half, b) -> None:
        """A plane read with halos, or extended past the shard's lanes (whole scan blocks), is handed over with
        more lanes than its own: its slot's length says how many, since on the host the compiled code steps between
        a plane's components by its buffer's length over its components (hawk/passes/lower/planes.py
        `component_stride`)."""
        w = math.prod(b.extents[1:])
        vals = lh.call.stages[0].args.vals
        for i, j in enumerate(lh.operands):
            name, p = lh.names[i], self.payload.get(lh.names[i], 1)
            h = self.how.halo.get(name, 0)
            if self.how.block and lh.roles[i] in ("in", "index"):
                lo, hi, _ = self.windows.get(name, (0, self.how.block, None))
                vals[5 * j + 3] = p * (lo + self.lanes + hi + SLACK)
            elif h and lh.roles[i] == "in":
                vals[5 * j + 3] = p * (self.rows + 2 * h) * w

    def _whole_cuts(self, lh: Half) -> None:
        """A row cell cut from an earlier stage is handed to this stage's lanes laid out for the whole run's
        slots (`_placed`): its slot says that length, which the compiled code steps between components by."""
        vals = lh.call.stages[0].args.vals
        for i, j in enumerate(lh.operands):
            s = self.row_cuts.get(lh.names[i])
            if s is not None and lh.roles[i] == "cut":
                vals[5 * j + 3] = s.size(s.rows)

    def _placed(self, a, s, move: Move):
        """A row cell cut (this shard's rows, from its finish) laid out for the whole run's slots."""
        first = self.first_rows[0][0] if len(self.first_rows) == 1 else move.row(self.first_rows)[0]
        return place_slots(move.xp, a, s, first, self.rows)

    def _with_halo(self, halo: Callable, a, name: str, h: int):
        """Plane `name` with `h` rows of each neighbour shard around its own; a plane with components (laid out
        component by component, lanes last) is exchanged row-major, then laid out by component again."""
        p = self.payload.get(name, 1)
        if p == 1:
            return halo(a, h)
        got = halo(a.reshape(p, self.rows, -1).transpose(1, 0, 2), h)
        return got.reshape(self.rows + 2 * h, p, -1).transpose(1, 0, 2).reshape(-1)

    def _own(self, a, s, move: Move):
        """This shard's rows of a row cell's state laid out for the whole run (eagle/distributed/rows.py): the
        first row is static under torch (one span) and this shard's row of a table under JAX."""
        first = self.first_rows[0][0] if len(self.first_rows) == 1 else move.row(self.first_rows)[0]
        return own_slots(move.xp, a, s, first, self.rows)

    def drive(self, planes: dict, priors: dict, lanes: Callable, finish: Callable, combine: Callable,
              refuse: Callable, add: Callable, halo: Callable, move: Move | None = None) -> dict:
        """Run every stage: `planes` by name (inputs as the lanes half takes them, Params as 1-element arrays),
        `priors` a sink's prior content by name; `halo(array, rows)` gives a plane with `rows` rows of each
        neighbour shard around it (zeros past the grid's edges); `move` passes lanes between neighbouring shards
        when they run whole scan blocks (Reach.block). Returns, by name, where each result lies."""
        planes, priors = dict(planes), dict(priors)
        for n, h in self.how.halo.items():
            if h and n in planes and not self.how.block:
                planes[n] = self._with_halo(halo, planes[n], n, h)
        if self.how.block:  # each per-lane plane followed by the lanes this shard runs past its own (and a plane
            # read with .at: with their halo rows, and its own halo rows before)
            lane_planes = {n for lh, _ in self.halves for n, r in zip(lh.names, lh.roles, strict=False)
                           if r in ("in", "index")}
            for n in sorted(lane_planes & set(planes)):  # (in one order on every shard: collectives)
                p = self.payload.get(n, 1)
                if n in self.windows:
                    lo, hi, table = self.windows[n]
                    planes[n] = move.surround(planes[n], lo, hi, table, p)
                else:
                    planes[n] = move.extend(planes[n], self.tails, p)
        out: dict = {}
        cut: dict = {}
        for lh, fh in self.halves:
            got = lanes(lh, [planes[n] if n in planes else self._placed(cut[n], self.row_cuts[n], move)
                             if n in self.row_cuts else cut[n] for n in lh.names])
            if KEYED in lh.kinds:  # outputs written by key: every shard's stores into the whole array, combined
                got = list(got)
                for i, kind in enumerate(lh.kinds):
                    if kind == KEYED:
                        name = lh.planes[len(lh.operands) + i]
                        got[i] = planes[name] = combine(KEYED, got[i], planes[name].reshape(-1))
            if self.how.block:  # per-lane outputs: the shard's own lanes, wherever they ran
                got = list(got)
                for i in range(len(lh.results)):
                    if lh.kinds[i] is None and lh.roles[len(lh.operands) + i] == "out":
                        p = self.payload.get(lh.planes[len(lh.operands) + i], 1)
                        got[i] = move.settle(got[i], self.lanes, self.heads, p)
            for name, (j, off, shape) in lh.picks.items():
                out[name] = (got, j, off, shape)
            fs = fh.call.stages[0]
            sinks = {j: bb.name for j, bb in enumerate(fs.launcher.lay.buffers) if bb.role == "sink"}
            state = []
            for i, (k, kind, arr) in enumerate(zip(lh.results, lh.kinds, got, strict=True)):
                if kind in (None, KEYED):
                    continue
                v = arr if kind == LOCAL else combine(kind, arr, lh.folds.get(i))  # (LOCAL: this shard's own)
                if i in lh.own:  # (a row cell's state at whole-run slots: this shard's rows of it)
                    v = self._own(v, lh.own[i], move)
                if kind == ERR:
                    v = refuse(fh, v)
                if kind == FSUM and k in sinks and sinks[k] in priors:
                    v = add(v, priors[sinks[k]])
                elif kind == FSUM and k in sinks and "float" in str(v.dtype):  # an omitted sink starts at +0.0, as
                    v = v + 0.0  # on one device (its partials start at -0.0: a slot of only -0.0 terms is +0.0)
                state.append(v)
            done = finish(fh, [cut[n] for n in fh.names] + state)
            for name, (j, off, shape) in fh.picks.items():
                out[name] = (done, j, off, shape)
                if name in sinks.values():  # a later stage scattering into this sink adds to what this one
                    # finished (the prior passed included), as on one device, where its buffer carries over
                    priors[name] = pick(done, j, off, shape).reshape(-1)
            cut.update({c: done[j] for c, j in fh.cells_out.items()})
        return {name: (rets, j, off, shape) for name, (rets, j, off, shape) in sorted(out.items())}


SLACK = 64  # zeros after an extended plane: the compiled code may load a key plane up to 64 lanes past the lane
# it runs, to prefetch a scatter's slot (clamped to the whole run's last lane: hawk/passes/lower/scatters.py)


class Move:
    """Lanes between shards that run whole scan blocks (eagle/distributed/geometry.py `realigned`, `window`), with
    the framework's `gather(a)` (every shard's `a`, concatenated in shard order along its first axis), `row(table)`
    (this shard's row of a per-shard table) and array module `xp` (numpy or jax.numpy). A plane of `p` components
    lies component by component (each the lanes long): it moves as a (lanes, p) array, laid out by component again
    after, each component as long as the others (the compiled code steps between them by that length)."""

    def __init__(self, xp, gather: Callable, row: Callable, unit: int):
        self.xp, self.gather, self.row, self.unit = xp, gather, row, unit

    def _pad(self, a, n: int, front: bool = False):
        """`a` (lanes first) padded with zeros to `n` lanes (in front, or after)."""
        xp = self.xp
        z = xp.zeros((n - a.shape[0], *a.shape[1:]), dtype=a.dtype)
        return xp.concatenate([z, a] if front else [a, z])

    def _pick(self, got, src):
        """Lanes `src` of a gather (-1: a zero lane)."""
        xp = self.xp
        ok = (src >= 0)[:, None] if got.ndim == 2 else src >= 0
        return xp.where(ok, got[xp.maximum(src, 0)], xp.zeros((), dtype=got.dtype))

    @staticmethod
    def _lanes(a, p: int):
        """A plane as lanes first: flat for one component, else (lanes, p)."""
        return a.reshape(-1) if p == 1 else a.reshape(p, -1).T

    @staticmethod
    def _lay_out(a):
        """Lanes first back to component by component, flat."""
        return a if a.ndim == 1 else a.T.reshape(-1)

    def _slack(self, a):
        return self.xp.zeros((SLACK, *a.shape[1:]), dtype=a.dtype)

    def extend(self, a, tails: list, p: int = 1):
        """A per-lane plane's own lanes, then the `unit` lanes after them that this shard runs (zeros where not),
        then SLACK zeros (per component)."""
        xp = self.xp
        a = self._lanes(a, p)
        got = self.gather(self._pad(a[:self.unit], self.unit))
        tail = self._pick(got, self.row(tails)).astype(a.dtype)
        return self._lay_out(xp.concatenate([a, tail, self._slack(a)]))

    def surround(self, a, before: int, after: int, table: list, p: int = 1):
        """A plane read with `.at` by a shard that runs whole blocks: `before` lanes before its own (its halo),
        its own, `after` lanes past them (those it runs and their halo; geometry.py `window`), then SLACK zeros
        (per component); zeros past the run's edges."""
        xp = self.xp
        a = self._lanes(a, p)
        n = a.shape[0]
        mine = xp.concatenate([self._pad(a[max(n - before, 0):], before, front=True), self._pad(a[:after], after)])
        near = self._pick(self.gather(mine), self.row(table)).astype(a.dtype)
        return self._lay_out(xp.concatenate([near[:before], a, near[before:], self._slack(a)]))

    def settle(self, a, n: int, heads: list, p: int = 1):
        """A per-lane output of `n` own lanes then `unit` lanes run past them (per component): the own lanes, each
        from the shard that ran it."""
        xp = self.xp
        a = self._lanes(a, p)
        got = self.gather(self._pad(a[n:n + self.unit], self.unit))
        src = self.row(heads)
        m = src.shape[0]
        ok = (src >= 0)[:, None] if a.ndim == 2 else src >= 0
        head = xp.where(ok, got[xp.maximum(src, 0)], a[:m])
        return self._lay_out(xp.concatenate([head, a[m:n]]))


def pick(rets, j: int, off: int, shape: tuple):
    """A named result out of a half's result buffers (any array type that slices and reshapes)."""
    size = int(np.prod(shape)) if shape else 1
    return rets[j][off:off + size].reshape(shape)
