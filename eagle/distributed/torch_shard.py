"""eagle.torch inside a torch.distributed process group: `eagle.torch.wrap(kernel, group=g)` runs the kernel on
each rank's shard of the lanes and combines cells and sinks across the group.

Every rank calls the wrapped kernel with its own shard (any sizes: shards need not be equal). Per stage: the
lanes half in one native call, the partial state combined with torch.distributed collectives on the group
(`all_gather` of per-chunk buffers, `all_reduce(SUM)` of the int64 exact accumulators of ordered sinks and of a
plain sink's adds; a passed sink's prior content added once), then the finish half in one native call, the same
on every rank; cut cells pass to the next stage, so the stages of a split kernel run in step on every rank.
Ordered cells and sinks are bitwise equal to the one-process run whatever the rank count and the shard sizes.
Shards that run fewer chunks pad with empty ones, so every rank's state has one shape: the chunk counts are
agreed by one `all_reduce(MAX)` per call. gloo on CPU (NCCL works for the collectives, but the kernel runs on the
host: tensors must be CPU tensors). Gradients: the backward runs the adjoint kernel sharded the same way.
"""

from __future__ import annotations

import hashlib
import math
import numbers

import numpy as np
import torch
import torch.distributed as dist

from eagle import native
from eagle.bridge import keyed_outputs
from eagle.distributed.geometry import run_python
from eagle.distributed.grads import (
    FLOATS,
    gather_form,
    gather_halo,
    local_gather,
    local_rows,
    own_rows,
    prior_gradient,
    renamed,
    stencil_planes,
    whole_rows_adjoint,
    winners,
)
from eagle.distributed.run import Move, ShardedRun, bind_sharded, needed_chunks, pick
from eagle.distributed.sinks import FOLD, XSUM
from eagle.distributed.stages import BITS, ERR, GATHER, KEYED, keyed_result, refusal
from eagle.errors import InputError
from eagle.interop import as_host_array


def _host(tk, name: str, v) -> np.ndarray:
    if isinstance(v, torch.Tensor):
        if v.device.type != "cpu":
            raise InputError(f"plane '{name}' of kernel '{tk.name}': a sharded eagle.torch call runs on the host "
                             f"and takes CPU tensors, got one on {v.device}: pass `.cpu()`")
        v = v.detach()
    return as_host_array(v, name, tk.name)


def sharded_call(tk, group, planes: dict):
    """`tk` (an eagle.torch.TorchKernel) over this rank's planes, cells and sinks combined across `group`. When a
    float input or a sink's prior content requires grad, through an autograd Function whose backward runs the
    adjoint kernel sharded across `group` the same way (eagle/distributed/grads.py)."""
    from eagle.reverse import forward_of

    kinds = {p.name: p.kind for p in tk.plan.kernel.signature.planes}
    keyed = forward_of(tk.plan).keyed  # (an output written by key: its initial contents, as a sink's prior)
    track = [n for n, v in planes.items() if isinstance(v, torch.Tensor) and v.requires_grad
             and (kinds.get(n) in (*FLOATS, "sink") or n in keyed)]
    if track and torch.is_grad_enabled():
        spec = _Spec(tk, group, planes, track)
        outs = _Sharded.apply(spec, *[planes[n] for n in track])
        results = dict(zip(spec.names, outs, strict=True))
    else:
        results = _run(tk, group, planes)[0]
    return results[next(iter(results))] if len(results) == 1 else results


class _Spec:
    """What a sharded call's backward needs besides the tracked tensors."""

    def __init__(self, tk, group, planes: dict, track: list[str]):
        self.tk, self.group, self.planes, self.track = tk, group, dict(planes), track
        self.names: list[str] = []
        self.binding = None


class _Sharded(torch.autograd.Function):
    """A sharded call as one autograd node: forward the sharded run, backward the sharded adjoint."""

    @staticmethod
    def forward(ctx, spec: _Spec, *tensors):
        results, spec.binding = _run(spec.tk, spec.group, spec.planes)
        spec.names = list(results)
        ctx.spec = spec
        return tuple(results.values())

    @staticmethod
    def backward(ctx, *grads):
        spec = ctx.spec
        got = _backward(spec, {n: g for n, g in zip(spec.names, grads, strict=True)
                               if g is not None and n not in spec.tk.ints})  # (an integer output: no cotangent)
        return (None, *[got.get(n) for n in spec.track])


def _backward(spec: _Spec, cot: dict) -> dict:
    """Gradients of the tracked planes: the adjoint run sharded across the group (per-lane gradients are this
    rank's lanes'; Param and Table gradients, exact sums over every rank's lanes, the same on every rank); a
    sink's prior content gets the sink's cotangent."""
    from eagle.reverse import adjoint_inputs, cotangents, forward_of, refuse_repeats, unstored_positions

    tk, b = spec.tk, spec.binding
    fwd = forward_of(tk.plan)
    kinds = {p.name: p.kind for p in tk.plan.kernel.signature.planes}
    cot = {n: _host(tk, n, g) for n, g in cot.items()}
    wrt = tuple(n for n in spec.track if kinds[n] in FLOATS)
    stencil = stencil_planes(tk.plan, wrt) if wrt else []
    ext = tuple(b.extents)
    if stencil:  # the adjoint is specialised to the whole grid: every rank's rows, and where this rank's start
        rows = torch.zeros(dist.get_world_size(spec.group), dtype=torch.int64)
        rows[dist.get_rank(spec.group)] = ext[0]
        dist.all_reduce(rows, op=dist.ReduceOp.SUM, group=spec.group)
        r0, ext = int(rows[:dist.get_rank(spec.group)].sum()), (int(rows.sum()), *ext[1:])
    positions = fwd.positions(spec.planes, ext)  # (outputs written by key: every rank passed the whole array)
    inputs = adjoint_inputs(fwd, spec.planes, tuple(b.extents), b.dtype)  # (outputs read: zeros)
    wins, tables = _winners(spec, wrt, ext, inputs, positions)
    refuse_repeats(fwd, {n: wins[n] for n, _ in positions})  # (the whole run's counts: every rank refuses alike)
    grads = {}
    for s in spec.track:
        shape = spec.planes[s].shape
        if kinds[s] == "sink":
            g = prior_gradient(tk.plan.kernel, s, cot.get(s), wins.get(s))
        elif s in fwd.keyed:  # an output written by key: its initial content where no rank stored
            g = None if cot.get(s) is None else unstored_positions(np.asarray(cot[s], b.dtype).reshape(-1), wins[s])
        else:
            continue
        grads[s] = torch.zeros(shape, dtype=spec.planes[s].dtype) if g is None else \
            torch.from_numpy(np.array(g, dtype=b.dtype).reshape(shape)).to(spec.planes[s].dtype)
    if not wrt:
        return grads
    inputs.update(tables)
    form = gather_form(tk.plan, wrt, ext) if stencil else None
    if form is not None:  # plan.reverse's gather form; the scatter adjoint below where a lane's pair erred
        got = _gathered(spec, form, wrt, ext, r0, rows, cot, inputs, stencil)
        tk.last_sharded_reverse = "gather" if got is not None else "scatter"
        if got is not None:
            return {**grads, **got}
    def gather(design, axes: dict) -> dict:  # the cotangents; rows read whole: every rank's, in rank order
        cts = cotangents(forward_of(tk.plan), design, cot, tuple(b.extents), b.dtype)
        for name, axis in axes.items():
            parts = [None] * dist.get_world_size(spec.group)
            dist.all_gather_object(parts, np.asarray(cts[name]), group=spec.group)
            cts[name] = np.ascontiguousarray(np.concatenate(parts, axis=axis))
        return cts

    adj, design, cts = whole_rows_adjoint(tk.plan, wrt, ext, "the process group", gather, positions)
    runner = _runner(tk, adj)
    try:
        got = _run(runner, spec.group, {**inputs, **cts})[0]
    except InputError as exc:
        raise renamed(tk.name, exc) from None
    for x in wrt:
        v, g = spec.planes[x], got[design.grad[x]]
        if x in stencil:  # the whole grid's gradient, the same on every rank: this rank's rows
            g = torch.from_numpy(np.ascontiguousarray(own_rows(g.numpy(), r0, b.extents[0], ext[0],
                                                               math.prod(ext[1:]))))
        grads[x] = g.reshape(v.shape).to(v.dtype)
    return grads


def _winners(spec: _Spec, wrt: tuple, ext: tuple, inputs: dict, positions: tuple) -> tuple[dict, dict]:
    """The winners of sinks stored into with `= v` and the stores counted into outputs written by key
    (eagle/distributed/grads.py `winners`), their kernel run sharded across the group like the forward."""
    tk = spec.tk

    def across(win, planes):
        try:
            got = _run(_runner(tk, win), spec.group, planes)[0]
        except InputError as exc:
            raise renamed(tk.name, exc) from None
        return {n: np.asarray(v) for n, v in got.items()}

    return winners(tk.plan, wrt, ext, across, {**spec.planes, **inputs}, spec.binding.dtype, positions=positions)


def _runner(tk, plan):
    """A reverse kernel's plan as `_run` takes a kernel, made once per wrapped kernel."""
    runner = tk.__dict__.setdefault("_shard_adjoints", {}).get(id(plan))
    if runner is None:
        runner = tk.__dict__["_shard_adjoints"][id(plan)] = _Adjoint(plan)
    return runner


def _gathered(spec: _Spec, form, wrt: tuple, ext: tuple, r0: int, rows: torch.Tensor, cot: dict, inputs: dict,
              stencil: list) -> dict | None:
    """The gradients in plan.reverse's gather form (hawk/reverse/gather.py): the shares adjoint run sharded (its
    reads of neighbours through halos), then each rank gathers its rows from its shares and its neighbours' share
    rows as a grid of its own (eagle/distributed/grads.py `local_rows`), and the Params' shares are summed
    sharded (ordered). None when a lane's (high, low) pair erred on any rank (the flags summed over the group):
    every rank then runs the scatter adjoint, as plan.reverse does."""
    from eagle.reverse import cotangents, forward_of

    tk, b, group = spec.tk, spec.binding, spec.group
    adj, design, sk, g = form
    cts = cotangents(forward_of(tk.plan), design, cot, tuple(b.extents), b.dtype)
    try:
        got = _run(_runner(tk, adj), group, {**inputs, **cts})[0]
    except InputError as exc:
        raise renamed(tk.name, exc) from None
    shards, rank = dist.get_world_size(group), dist.get_rank(group)
    n, total, w, h = b.extents[0], ext[0], math.prod(ext[1:]), gather_halo(g)
    a0, a1 = local_rows(r0, n, total, h)
    halo = _edges(group, shards, rank, rows)
    local = {}
    for s in g.shares:  # this rank's share rows with h of each neighbour's, cut at the grid's edges
        p = g.payload.get(s, 1)  # (a Vector plane's components: exchanged row by row, laid out first again)
        own = got[s].numpy().reshape(p, n, w).transpose(1, 0, 2).reshape(n, p * w)
        rows_h = (halo(own, h) if h else own)[h - (r0 - a0):h + (a1 - r0)]
        local[s] = np.ascontiguousarray(rows_h.reshape(a1 - a0, p, w).transpose(1, 0, 2)).reshape(p, a1 - a0,
                                                                                                 *ext[1:])
        if s not in g.payload:
            local[s] = local[s][0]
    out = local_gather(tk.plan, wrt, ext, (a1 - a0, *ext[1:])).run(**local)
    flag = torch.tensor([float(np.asarray(out[g.flag]).reshape(-1)[0])], dtype=torch.float64)
    dist.all_reduce(flag, op=dist.ReduceOp.SUM, group=group)
    if flag.item() > 0:
        return None
    merged = dict(got)
    for name in g.grad.values():
        merged[name] = torch.from_numpy(np.asarray(out[name]).reshape(-1, a1 - a0, w)[:, r0 - a0:r0 - a0 + n].copy())
    if sk is not None:
        merged.update(_run(_runner(tk, sk), group, {s: got[s] for s in g.sums.values()})[0])
    grads = {}
    for x in wrt:
        v, gx = spec.planes[x], merged[design.grad[x]]
        if x in stencil and x not in g.grad:  # (a plane the gather form leaves to a scatter: the whole grid's)
            gx = torch.from_numpy(np.ascontiguousarray(own_rows(gx.numpy(), r0, n, total, w)))
        grads[x] = gx.reshape(v.shape).to(v.dtype)
    return grads


class _Adjoint:
    """The adjoint's plan as `_run` takes a kernel (its name, its plan, a place for its prepared runs)."""

    def __init__(self, plan):
        self.plan, self.name = plan, plan.kernel.name


def _run(tk, group, planes: dict) -> tuple[dict, object]:
    """(results by name as tensors, this rank's binding) of one sharded run, no autograd."""
    if not dist.is_initialized():
        raise InputError(f"kernel '{tk.name}': eagle.torch.wrap(..., group=...) runs inside a torch.distributed "
                         f"process group: call torch.distributed.init_process_group first")
    shards, rank = dist.get_world_size(group), dist.get_rank(group)
    refused, call = None, ""
    try:
        arrays, params, grid, priors = _split(tk, planes)
        b, how = bind_sharded(tk.plan, {**arrays, **{n: 0.0 for n in params}, **grid}, "the process group",
                              keyed=True)
        call = _call_of(b, params, priors, {n: arrays[n].shape for n in keyed_outputs(tk.plan) if n in arrays})
    except Exception as exc:  # noqa: BLE001 (told to every rank below, then raised here)
        refused = exc
    # one collective for every rank's rows (where this one's start), refusal and call: a rank that refuses
    # alone, or calls with other dtypes or Params, would leave the others waiting in a collective, or combine
    # partial states of different shapes; so every rank refuses alike, before any launch
    meet = torch.zeros((3, shards), dtype=torch.int64)
    meet[0, rank] = 0 if refused is not None else b.extents[0] if b.extents else b.lanes
    meet[1, rank] = refused is not None
    meet[2, rank] = int.from_bytes(hashlib.sha256(call.encode()).digest()[:7], "little")
    dist.all_reduce(meet, op=dist.ReduceOp.SUM, group=group)
    if refused is not None:
        raise refused
    if int(meet[1].sum()):
        bad = [r for r in range(shards) if int(meet[1, r])]
        raise InputError(f"kernel '{tk.name}': rank(s) {bad} of the process group refused this call (their error "
                         f"says why), so no rank runs it")
    if len(set(meet[2].tolist())) > 1:
        calls: list = [None] * shards
        dist.all_gather_object(calls, call, group=group)
        other = next(r for r in range(shards) if calls[r] != calls[0])
        raise InputError(f"kernel '{tk.name}': the ranks of the process group call it differently: rank 0 with "
                         f"{calls[0]}, rank {other} with {calls[other]}; every rank passes the same planes, "
                         f"dtypes and Params (only the leading lane axis may differ in length)")
    rows = meet[0].clone()
    r0, total = int(rows[:rank].sum()), int(rows.sum())
    span = [(r0, total)]
    agreed = torch.tensor(needed_chunks(tk.plan, b, how, span), dtype=torch.int64)
    dist.all_reduce(agreed, op=dist.ReduceOp.MAX, group=group)
    counts = [int(c) for c in agreed]
    starts = [0, *np.cumsum(rows.numpy()).tolist()]
    key = ("shard", id(group), shards, tuple(starts) if how.block else (r0, total), tuple(counts),
           tuple(sorted((n, a.shape, a.dtype.str) for n, a in {**b.arrays, **arrays}.items())),
           tuple(sorted(grid.items())))
    runs = tk.__dict__.setdefault("_shard_runs", {})
    run = runs.get(key)
    if run is None:
        run = runs[key] = ShardedRun(tk.plan, b, how, shards, span, counts, starts)
    ops = {n: b.arrays.get(n, a) for n, a in arrays.items()}  # (an output written by key: the array passed)
    ops.update({n: np.array([v], dtype=run.dtype) for n, v in params.items()})
    pri = {n: np.ascontiguousarray(p, dtype=run.dtype).reshape(-1) for n, p in priors.items()}
    edges = _edges(group, shards, rank, rows)

    def lanes(half, operands):
        operands = [np.ascontiguousarray(o).reshape(-1) for o in operands]
        rets = [np.empty(shape, dtype) for shape, dtype in half.call.rets]
        for i, j in half.call.aliases.items():  # (a keyed scan's offsets: written in place)
            operands[i] = rets[j] = np.array(operands[i])
        run_python(half, half.geo[0], operands, rets)
        return rets

    def finish(half, operands):
        operands = [np.ascontiguousarray(o).reshape(-1) for o in operands]
        rets = [np.empty(shape, dtype) for shape, dtype in half.call.rets]
        for i, j in half.call.aliases.items():
            rets[j] = operands[i]
        half.call.run_native([native.address(a) if a.size else 0 for a in operands + rets])
        return rets

    def gather(a):
        t = torch.from_numpy(np.ascontiguousarray(a))
        parts = [torch.empty_like(t) for _ in range(shards)]
        dist.all_gather(parts, t, group=group)
        return torch.cat(parts).numpy()

    def combine(kind, a, fold=None):
        if kind in (GATHER, ERR):
            return gather(a)
        if kind == FOLD:  # a large sink's copies: one per rank (eagle/distributed/sinks.py)
            one, bad = fold.run(a)
            if fold.exact:  # an erred pair on any rank: every rank moves the copies whole
                t = torch.tensor([bad], dtype=torch.int64)
                dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)
                if int(t[0]):
                    return gather(a)
            return fold.spread(np, gather(one), shards)
        if kind == XSUM:  # summed only when some rank's pairs spilled into them (else every rank's are zero)
            t = torch.from_numpy(a[-1:].copy())
            dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)
            if not int(t[0]):
                return a
        if kind == KEYED:  # each position from the last rank whose stores changed its bits, else as it was
            return keyed_result(a, fold, rank, lambda x: _reduced(x, dist.ReduceOp.MAX, group),
                                lambda x: _reduced(x, dist.ReduceOp.SUM, group), np, _bitcast)
        if kind == BITS and a.dtype.kind == "f":  # one rank's bits per entry, zeros elsewhere: an integer sum
            dist.all_reduce(torch.from_numpy(_bitcast(a)), op=dist.ReduceOp.SUM, group=group)
            return a
        dist.all_reduce(torch.from_numpy(a), op=dist.ReduceOp.SUM, group=group)
        return a

    def refuse(half, err):  # the same gathered #err on every rank: all raise alike, before any finish
        refusal(half, err)
        return err

    move = Move(np, gather, lambda table: table[rank], how.block)
    got = run.drive(ops, pri, lanes, finish, combine, refuse, lambda a, p: a + p, edges, move)
    return {n: torch.from_numpy(np.array(pick(*v))) for n, v in got.items()}, b


def _bitcast(a: np.ndarray, dtype=None) -> np.ndarray:
    """A float array's bits as integers of its width (a view), or integers' back as `dtype`."""
    return a.view(dtype or f"i{a.itemsize}")


def _reduced(a: np.ndarray, op, group) -> np.ndarray:
    """`a` reduced by `op` over the group (a copy)."""
    t = torch.from_numpy(np.array(a))
    dist.all_reduce(t, op=op, group=group)
    return t.numpy()


def _call_of(b, params: dict, priors: dict, keyed: dict | None = None) -> str:
    """What every rank's call must share, in words (what the partial states' shapes and the results depend on):
    the float dtype, the lane extents after the leading one, the Params, the sinks whose prior content is passed,
    the shapes of the outputs written by key (`keyed`: name -> shape; their positions)."""
    ext = f", lane extents {tuple(b.extents[1:])} after the leading one" if len(b.extents) > 1 else ""
    pri = f", prior contents of {sorted(priors)}" if priors else ""
    pos = "".join(f", '{n}' of shape {tuple(shape)}" for n, shape in sorted((keyed or {}).items()))
    return f"{b.dtype} planes{ext}, Params {dict(sorted(params.items()))}{pri}{pos}"


def _split(tk, planes: dict) -> tuple[dict, dict, dict, dict]:
    """(arrays, params, grid extents, sinks' prior contents) of one rank's planes, refusing what a sharded call
    does not take."""
    kinds = {p.name: p.kind for p in tk.plan.kernel.signature.planes}
    arrays, params, grid, priors = {}, {}, {}, {}
    for name, v in planes.items():
        kind = kinds.get(name)
        if kind is None and isinstance(v, (int, np.integer)):
            grid[name] = int(v)
        elif kind == "param":
            params[name] = float(v.item() if isinstance(v, torch.Tensor) else np.asarray(v).reshape(-1)[0])
        elif kind == "sink":
            priors[name] = _host(tk, name, v)
        elif kind == "output" and name in keyed_outputs(tk.plan):  # its positions: the whole array, every rank
            arrays[name] = _host(tk, name, v)
        elif kind == "output":
            raise InputError(f"plane '{name}' of kernel '{tk.name}': a sharded run hands per-lane outputs back as "
                             f"new tensors; leave '{name}' out")
        elif kind is not None and not isinstance(v, numbers.Number):
            arrays[name] = _host(tk, name, v)
        else:
            tk.plan.binder.bind(planes)  # the binder's own message
    return arrays, params, grid, priors


def _edges(group, shards: int, rank: int, rows: torch.Tensor):
    """`halo(a, h)` for this rank: a plane with h rows of each neighbour rank around its own (zeros past the grid's
    edges), exchanged with one all_gather of every rank's first and last h rows."""

    def halo(a: np.ndarray, h: int) -> np.ndarray:
        a = a.reshape(int(rows[rank]), -1)  # (the binder's plane may be flat)
        if int(rows.min()) < h:
            raise InputError(f"a rank holds {int(rows.min())} row(s), fewer than the halo of {h} rows its "
                             f"neighbours read: give every rank at least {h} rows")
        t = torch.from_numpy(np.ascontiguousarray(np.concatenate([a[:h], a[-h:]])))
        parts = [torch.empty_like(t) for _ in range(shards)]
        dist.all_gather(parts, t, group=group)
        zero = np.zeros_like(a[:h])
        up = parts[rank - 1].numpy()[h:] if rank > 0 else zero
        down = parts[rank + 1].numpy()[:h] if rank + 1 < shards else zero
        return np.concatenate([up, a, down])

    return halo
