"""A stencil's gradient through eagle.jax in plan.reverse's gather form (hawk/reverse/gather.py), with its bits.

jax.grad of a wrapped kernel ran the scatter adjoint: a plane read at its neighbours gets its gradient from an
ordered scatter into one slot per lane, which costs several times the forward. plan.reverse gathers those terms
instead when every read of the plane is the lane's own coordinates plus constants, and the backward here runs the
same kernels as FFI calls, so they stay inside XLA:

1. the shares adjoint (each lane's cotangent shares, stored in per-lane planes, and the Params' shares);
2. the gather (each lane adds the shares its neighbours' reads sent it, in a (high, low) pair rounded once; its
   flag cell counts the lanes whose pair erred: a term not finite, or a sum past the pair's reach);
3. the Param sums (the ordered sum of each Param's share plane);
4. where the flag is set, `lax.cond` takes the scatter adjoint's gradients instead, as plan.reverse does.

The bits are plan.reverse's either way. Sharded calls do the same with halos (eagle/distributed/jax_grads.py).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np


def gathered(jk, form, wrt: tuple, args: tuple, planes: dict, extents: tuple,
             scatter: Callable[[dict, dict, dict], dict]) -> dict:
    """The gradients of `wrt` (shaped and typed like `planes`) from the gather form `form` (eagle.reverse
    gather_for's), or from `scatter(inputs, cts, tables)` (the scatter adjoint's) where some lane's pair erred.
    `args`: the adjoint's (inputs, cotangents, winners tables), each a dict of arrays.

    Under `jax.vmap` a `lax.cond` on a batched flag would become a select that runs both sides, the scatter
    adjoint for every element included; the batch rule here runs the gather form over the batch, then the
    scatter adjoint over the batch only if some element's pair erred (its bits are the same for the others)."""
    adj, design, gk, sk, g = form
    # grid extents passed by label stay Python ints: custom_vmap would trace them, and a traced extent is no extent
    inputs, cts, tables = args
    static = {n: v for n, v in inputs.items() if isinstance(v, (int, np.integer))}
    args = ({n: v for n, v in inputs.items() if n not in static}, cts, tables)

    def gather(inputs: dict, cts: dict, tables: dict) -> tuple[dict, jax.Array]:
        inputs = {**inputs, **static}
        got = jk._bridge(adj)(**inputs, **cts, **tables)
        got = got if isinstance(got, dict) else {g.shares[0]: got}
        out = jk._bridge(gk)(**{s: got[s].reshape(_shape(g, s, extents)) for s in g.shares})
        merged = {**got, **{g.grad[x]: out[g.grad[x]] for x in g.grad}}
        if sk is not None:
            sums = jk._bridge(sk)(**{s: got[s].reshape(_shape(g, s, extents)) for s in g.sums.values()})
            merged.update(sums if isinstance(sums, dict) else {next(iter(g.sums)): sums})
        mine = {x: merged[design.grad[x]].reshape(planes[x].shape).astype(planes[x].dtype) for x in wrt}
        return mine, jnp.max(out[g.flag])

    def whole(inputs: dict, cts: dict, tables: dict) -> dict:
        return scatter({**inputs, **static}, cts, tables)

    @jax.custom_batching.custom_vmap
    def either(inputs: dict, cts: dict, tables: dict) -> dict:
        mine, flag = gather(inputs, cts, tables)
        return jax.lax.cond(flag > 0, lambda: whole(inputs, cts, tables), lambda: mine)

    @either.def_vmap
    def batched(axis_size: int, in_batched: tuple, inputs: dict, cts: dict, tables: dict) -> tuple[dict, dict]:
        axes = jax.tree.map(lambda b: 0 if b else None, tuple(in_batched))
        inputs, cts, tables = jax.tree.map(jnp.asarray, (inputs, cts, tables))  # (eager vmap hands NumPy's)
        mine, flags = jax.vmap(gather, in_axes=axes)(inputs, cts, tables)
        out = jax.lax.cond(jnp.max(flags) > 0, lambda: jax.vmap(whole, in_axes=axes)(inputs, cts, tables),
                           lambda: mine)
        return out, jax.tree.map(lambda _: True, out)

    return either(*args)


def _shape(g, share: str, extents: tuple) -> tuple:
    """A share plane's shape as the gather takes it: a Vector plane's components first (payload first, lanes
    last, as every plane), then the lane extents."""
    p = g.payload.get(share)
    return (p, *extents) if p else tuple(extents)
