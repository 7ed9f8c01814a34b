"""A stencil's gradient inside `jax.shard_map` in plan.reverse's gather form (hawk/reverse/gather.py), with the
one-device bits.

plan.reverse differentiates a stencil with two lane kernels: the shares adjoint (each lane's cotangent shares, in
per-lane planes) and the gather (each lane adds the shares its neighbours' reads sent it, in a (high, low) pair
rounded once), with the scatter adjoint as the fallback where some lane's pair erred. Sharded:

1. the shares adjoint runs sharded like any kernel (its reads of neighbours through halos, eagle/distributed);
2. each shard receives `h` rows of share planes from each neighbour (`ppermute`) and runs the gather as a grid of
   its own over its rows and those (cut at the whole grid's edges: eagle/distributed/grads.py `local_rows`), so
   each of its rows adds the same terms in the same order as on one device. The gather's clamps at the grid's
   edges are compiled in, so the first and last shards (local grids of rows + h) and the others (rows + 2h) run
   two builds of it, picked per shard by `lax.switch` on the shard's index;
3. the Params' shares are summed by the Param sums kernel run sharded (ordered: exact over every shard);
4. the gathers' flags (lanes whose pair erred) are summed over the axis; where any is set, every shard takes
   the scatter adjoint instead (`lax.cond` on the same value everywhere), as plan.reverse does.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from eagle.distributed.grads import gather_halo, local_gather
from eagle.errors import InputError
from eagle.reverse import cotangents, forward_of


def gathered(jk, axis_name, run, wrt: tuple, ext: tuple, stencil: list, form, inputs: dict, gs: dict, grid: dict,
             shapes: dict, scatter: Callable, like: Callable) -> dict:
    """The gradients of `wrt` (shaped by `shapes`) in gather form; `scatter()` gives them from the scatter
    adjoint (taken on every shard when any shard's gather flags a lane); `like(g, axes)` types a value varying."""
    from eagle.distributed.grads import renamed
    from eagle.distributed.jax_shard import axis_size
    from eagle.jax import JaxKernel

    adj, design, sk, g = form
    cache = jk._adjoints

    def sharded(plan):
        key = ("shard", axis_name, id(plan))
        if key not in cache:
            cache[key] = JaxKernel(plan.kernel, plan=plan, axis_name=axis_name)
        return cache[key]

    def local(plan):
        key = ("local", id(plan))
        if key not in cache:
            cache[key] = JaxKernel(plan.kernel, plan=plan)
        return cache[key]

    cts = cotangents(forward_of(jk.plan), design, dict(gs), tuple(run.extents), run.dtype, xp=jnp, strict=False)
    try:
        got = sharded(adj)(**inputs, **cts, **grid)
    except InputError as exc:
        raise renamed(jk.name, exc) from None
    got = got if isinstance(got, dict) else {g.shares[0]: got}
    shards, rows = axis_size(axis_name), run.extents[0]
    w, h = math.prod(ext[1:]), gather_halo(g)
    if h > rows:
        raise InputError(f"kernel '{jk.name}': the gradient's gather reads {h} rows of each neighbour shard, and "
                         f"a shard holds {rows}: use fewer shards along '{axis_name}'")
    me = jax.lax.axis_index(axis_name)
    axes = frozenset({axis_name})

    def halo(a):  # h rows of each neighbour around this shard's (zeros past the grid's edges; rows: axis 1)
        up = jax.lax.ppermute(a[:, -h:], axis_name, [(s, s + 1) for s in range(shards - 1)])
        down = jax.lax.ppermute(a[:, :h], axis_name, [(s + 1, s) for s in range(shards - 1)])
        return jnp.concatenate([up, a, down], axis=1)

    # (components, rows, lanes a row) of each share plane: a Vector plane's components first, a Scalar's one
    shares = {s: got[s].reshape(g.payload.get(s, 1), rows, w) for s in g.shares}
    if h and shards > 1:
        shares = {s: halo(a) for s, a in shares.items()}
    names = sorted(g.grad)

    def branch(extent: int, lo: int, keep: int):
        """The gather over local rows [lo, lo + extent) of the haloed shares, keeping rows [keep, keep + rows)."""
        gk = local(local_gather(jk.plan, wrt, ext, (extent, *ext[1:])))

        def run_it(sh):
            out = gk(**{s: _plane(a[:, lo:lo + extent], g.payload.get(s), ext) for s, a in sh.items()})
            outs = [like(out[g.grad[x]].reshape(-1, extent, w)[:, keep:keep + rows], axes) for x in names]
            return (*outs, like(out[g.flag].reshape(()), axes))
        return run_it

    if not h or shards == 1:
        branches = [branch(rows + (2 * h if shards > 1 else 0), 0, h if shards > 1 else 0)]
        index = jnp.int32(0)
    else:  # the first shard: its rows and the next's h; the last: the previous h and its rows; others: both
        branches = [branch(rows + h, h, 0), branch(rows + h, 0, h)]
        index = jnp.where(me == 0, 0, 1)
        if shards > 2:
            branches.append(branch(rows + 2 * h, 0, h))
            index = jnp.where(me == 0, 0, jnp.where(me == shards - 1, 1, 2))
    out = jax.lax.switch(index, branches, shares) if len(branches) > 1 else branches[0](shares)
    flag = jax.lax.psum(out[-1], axis_name)
    grads_g = dict(zip((g.grad[x] for x in names), out[:-1], strict=True))
    if sk is not None:
        sums = sharded(sk)(**{s: got[s] for s in g.sums.values()}, **grid)
        grads_g.update(sums if isinstance(sums, dict) else {next(iter(g.sums)): sums})
    merged = {**got, **grads_g}

    def gather_result():
        res = {}
        for x in wrt:
            v = merged[design.grad[x]]
            if x in stencil and x not in g.grad:  # (left to a scatter in the shares adjoint: the whole grid's)
                v = jax.lax.dynamic_slice_in_dim(v.reshape(-1, ext[0], w), me * rows, rows, axis=1)
            res[x] = v.reshape(shapes[x][0]).astype(shapes[x][1])
        return res

    mine = gather_result()
    return jax.lax.cond(flag > 0, lambda: _typed(scatter(), mine, like), lambda: mine)


def _typed(got: dict, want: dict, like: Callable) -> dict:
    """`got` typed varying wherever `want` (the other branch's) is, so both branches of the cond agree."""
    from eagle.distributed.jax_shard import _varying

    return {k: like(v, _varying(want[k])) for k, v in got.items()}


def _plane(a, payload: int | None, ext: tuple):
    """A (components, rows, lanes a row) share block shaped as the gather takes the plane (payload first, then
    the rows and the grid's other axes; a Scalar's without a payload axis)."""
    shape = (a.shape[1], *ext[1:])
    return a.reshape(payload, *shape) if payload else a[0].reshape(shape)
