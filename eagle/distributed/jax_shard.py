"""eagle.jax inside `jax.shard_map`: `eagle.jax.wrap(kernel, axis_name="d")` runs the kernel on each shard's
lanes and combines cells and sinks across the named mesh axis.

Per stage, inside the shard_map body: the lanes half as one XLA custom call (the same C handler as eagle.jax,
eagle/call_plan.c) giving the per-lane outputs and the shard's partial state; the state combined with JAX's own
collectives over `axis_name` (`all_gather(tiled=True)` of per-chunk buffers, `psum` of the int64 exact
accumulators of ordered sinks, `psum` of a plain sink's float adds; a passed sink's prior content added once);
then the finish half as a second custom call, the same on every shard, handing back the cells (and the cut cells
the next stage reads). Ordered cells and sinks are rounded once from the exact total over every shard: bitwise
equal to the one-device run. The state is a few values per chunk (an exact accumulator is 576 bytes), never the
lanes. int64 state needs `jax_enable_x64`. Under jax.grad / jax.vjp a custom VJP runs the adjoint kernel
sharded the same way (eagle/distributed/grads.py): gradients bitwise plan.reverse's.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from eagle.bridge import keyed_outputs
from eagle.distributed.geometry import dist_plan
from eagle.distributed.grads import (
    FLOATS,
    gather_form,
    prior_gradient,
    renamed,
    stencil_planes,
    whole_rows_adjoint,
    winners,
)
from eagle.distributed.run import Move, ShardedRun, bind_sharded, needed_chunks, pick
from eagle.distributed.sinks import FOLD, XSUM
from eagle.distributed.stages import BITS, ERR, GATHER, KEYED, check_plan, keyed_result
from eagle.errors import InputError
from eagle.jax import TARGET, keep_for_process
from eagle.reverse import adjoint_inputs, cotangents, forward_of, unstored_positions

LANES, CHECK, FOLDS = "eagle_dist_lanes", "eagle_dist_check", "eagle_dist_fold"


def _lanes_handler() -> None:
    """dist.c's XLA handlers for lanes halves and refusals, registered once."""
    if not _REGISTERED:
        from eagle.distributed.stages import library

        jax.ffi.register_ffi_target(LANES, jax.ffi.pycapsule(library().eagle_dist_lanes), platform="cpu")
        jax.ffi.register_ffi_target(CHECK, jax.ffi.pycapsule(library().eagle_dist_check), platform="cpu")
        jax.ffi.register_ffi_target(FOLDS, jax.ffi.pycapsule(library().eagle_dist_fold), platform="cpu")
        _REGISTERED.append(True)


_REGISTERED: list = []


def axis_size(axis_name) -> int:
    """Shards along `axis_name` (static: inside shard_map)."""
    try:
        return int(jax.lax.axis_size(axis_name))
    except (NameError, ValueError, TypeError) as exc:
        raise InputError(f"eagle.jax.wrap(..., axis_name={axis_name!r}): call it inside jax.shard_map over a mesh "
                         f"with that axis ({exc})") from None


def sharded_call(jk, axis_name, planes: dict):
    """`jk` (an eagle.jax.JaxKernel) over this shard's planes, cells and sinks combined over `axis_name`."""
    from eagle.jax import _handler

    _handler()
    _lanes_handler()
    if not jax.config.jax_enable_x64:
        raise InputError(f"kernel '{jk.name}': a sharded run combines exact int64 accumulators across shards: set "
                         f"jax.config.update('jax_enable_x64', True)")
    arrays, params, grid, priors = {}, {}, {}, {}
    for name, v in planes.items():
        kind = jk.kinds.get(name)
        if kind is None and isinstance(v, (int, np.integer)):
            grid[name] = int(v)
        elif kind == "param":
            params[name] = v
        elif kind == "sink":
            priors[name] = jnp.asarray(v)
        elif kind == "output" and name in keyed_outputs(jk.plan):  # its positions: the whole array, replicated
            arrays[name] = jnp.asarray(v)
        elif kind == "output":
            raise InputError(f"plane '{name}' of kernel '{jk.name}': a sharded run hands per-lane outputs back as "
                             f"new arrays; leave '{name}' out")
        elif kind is not None and v is not None:
            arrays[name] = jnp.asarray(v)
        else:
            jk.plan.binder.bind(planes)  # the binder's own message for an unknown plane
    jk._check_x64(arrays, params)
    shards = axis_size(axis_name)
    key = ("shard", axis_name, shards, tuple(sorted((n, a.shape, np.dtype(a.dtype).str) for n, a in arrays.items())),
           tuple(sorted(params)), tuple(sorted(grid.items())))
    run = jk._calls.get(key)
    if run is None:
        stand = {n: np.zeros(a.shape, np.dtype(a.dtype)) for n, a in arrays.items()}
        stand.update({n: 0.0 for n in params})
        b, how = bind_sharded(jk.plan, {**stand, **grid}, f"mesh axis '{axis_name}'", keyed=True)
        rows = b.extents[0]
        spans = [(s * rows, shards * rows) for s in range(shards)]  # shard_map's shards: equal runs of rows
        run = jk._calls[key] = ShardedRun(jk.plan, b, how, shards, spans, needed_chunks(jk.plan, b, how, spans),
                                          [s * rows for s in range(shards + 1)])
        keep_for_process(run)  # a compiled program names its call plans
    fdt = run.dtype
    ops = dict(arrays)
    ops.update({n: jnp.asarray(v, dtype=fdt).reshape(1) for n, v in params.items()})
    for n, p in priors.items():
        priors[n] = p.astype(fdt).reshape(-1)

    def fire(half, operands, aliases=None):
        rets = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in half.call.rets]
        return list(jax.ffi.ffi_call(TARGET, rets, input_output_aliases=aliases or None)(
            *[o.reshape(-1) for o in operands], plan=np.int64(half.call.native_plan())))

    def lanes(half, operands):  # dist.c's handler: this shard's row of the geometry table first
        rets = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in half.call.rets]
        geo = jnp.asarray(half.geo)[jax.lax.axis_index(axis_name)]
        aliases = {i + 1: j for i, j in half.call.aliases.items()}  # (a keyed scan's offsets: written in place)
        got = jax.ffi.ffi_call(LANES, rets, input_output_aliases=aliases or None)(
            geo, *[o.reshape(-1) for o in operands], plan=np.int64(dist_plan(half)))
        # typed varying along the axis (each shard's own lanes and partials): a per-lane output's cotangent is
        # then the shard's own slice, not the sum of every shard's
        return [_like(a, _varying(geo)) for a in got]  # (nothing to type where shard_map does not check)

    def halo(a, h):  # h rows of each neighbour around this shard's rows (zeros past the grid's edges)
        if h > a.shape[0]:
            raise InputError(f"kernel '{jk.name}': a shard of {a.shape[0]} row(s) cannot hand its neighbours a "
                             f"halo of {h} rows: use fewer shards along '{axis_name}'")
        up = jax.lax.ppermute(a[-h:], axis_name, [(s, s + 1) for s in range(shards - 1)])
        down = jax.lax.ppermute(a[:h], axis_name, [(s + 1, s) for s in range(shards - 1)])
        return jnp.concatenate([up, a, down])

    def gather(a):
        return jax.lax.all_gather(a, axis_name, tiled=True)

    def combine(kind, a, fold=None):
        if kind in (GATHER, ERR):
            return gather(a)
        if kind == FOLD:  # a large sink's copies: one per shard (eagle/distributed/sinks.py)
            one, bad = jax.ffi.ffi_call(FOLDS, [jax.ShapeDtypeStruct((fold.values,), a.dtype),
                                                jax.ShapeDtypeStruct((1,), jnp.int64)])(a, plan=np.int64(fold.address))
            one, bad = _like(one, _varying(a)), _like(bad, _varying(a))
            few = fold.spread(jnp, gather(one), shards)
            if not fold.exact:
                return few  # (an erred pair on any shard: every shard moves the copies whole)
            return jax.lax.cond(jax.lax.psum(bad, axis_name)[0] > 0, lambda: gather(a), lambda: few)
        if kind == XSUM:  # summed only when some shard's pairs spilled into them (else all zero)
            spilled = jax.lax.psum(a[-1:], axis_name)[0]
            return jax.lax.cond(spilled != 0, lambda: jax.lax.psum(a, axis_name), lambda: jnp.zeros(a.shape, a.dtype))
        if kind == KEYED:  # each position from the last shard whose stores changed its bits, else as it was
            return keyed_result(a, fold, jax.lax.axis_index(axis_name), lambda x: jax.lax.pmax(x, axis_name),
                                lambda x: jax.lax.psum(x, axis_name), jnp, _bitcast)
        if kind == BITS and jnp.issubdtype(a.dtype, jnp.floating):  # one shard's bits per entry, zeros elsewhere
            return _bitcast(jax.lax.psum(_bitcast(a), axis_name), a.dtype)
        return jax.lax.psum(a, axis_name)  # ISUM: int64 limbs, exact; FSUM: a plain sink's float adds; BITS

    move = Move(jnp, lambda a: jax.lax.all_gather(a, axis_name, tiled=True),
                lambda table: jnp.asarray(np.stack(table))[jax.lax.axis_index(axis_name)], run.how.block)

    def refuse(half, err):  # every shard fails here alike when any shard's lanes refused; the finish waits on it
        return jax.ffi.ffi_call(CHECK, jax.ShapeDtypeStruct(err.shape, err.dtype), input_output_aliases={0: 0})(
            err, plan=np.int64(check_plan(half)))

    names = list(ops) + [f"#prior:{n}" for n in priors]

    def body(*values):
        planes = dict(zip(names, values, strict=True))
        got = run.drive({n: planes[n] for n in ops}, {n: planes[f"#prior:{n}"] for n in priors}, lanes,
                        lambda h, o: fire(h, o, h.call.aliases), combine, refuse, lambda a, b: a + b, halo, move)
        # a row sum's cell is each shard's own rows: varying along the axis, like a per-lane output
        return {n: _like(pick(*v), frozenset({axis_name})) if n in run.local else pick(*v) for n, v in got.items()}

    args = [*ops.values(), *priors.values()]
    vma = [_varying(a) for a in args]  # (residuals lose it)
    call = jax.custom_vjp(body)
    call.defvjp(lambda *values: (body(*values), values),
                lambda values, gs: _backward(jk, axis_name, run, names, grid, values, gs, vma))
    results = call(*args)
    return results[next(iter(results))] if len(results) == 1 else results


def _backward(jk, axis_name, run, names: list[str], grid: dict, values: tuple, gs: dict, vma: list) -> tuple:
    """The gradients of a sharded call's operands: the adjoint kernel run sharded over `axis_name` the same way
    (eagle/distributed/grads.py). Per-lane gradients are this shard's; Param and Table gradients (the adjoint's
    exact sums over every shard's lanes) and a sink's prior content's are the whole run's, the same on every
    shard."""
    planes = dict(zip(names, values, strict=True))
    fwd = forward_of(jk.plan)
    wrt = tuple(n for n in names if jk.kinds.get(n) in FLOATS)
    stencil = stencil_planes(jk.plan, wrt) if wrt else []
    rows, ext = run.extents[0], tuple(run.extents)
    if stencil:  # the adjoint is specialised to the whole grid (shard_map's shards: equal runs of rows)
        ext = (axis_size(axis_name) * rows, *ext[1:])
    positions = fwd.positions(planes, ext)  # (outputs written by key: every shard passed the whole array)
    inputs = {n: planes[n] for n in names if jk.kinds.get(n) in (*FLOATS, "index")}
    # outputs read before they are assigned: a sharded run starts them at zero (passed outputs are refused)
    inputs.update(adjoint_inputs(fwd, {}, tuple(run.extents), run.dtype, xp=jnp))
    wins, tables = _winners(jk, axis_name, run, wrt, ext, inputs, grid, positions)
    gs = dict(gs)
    for n, _ in positions:  # the whole run's counts: a position stored twice refuses, as plan.reverse does
        gs[n] = jk._unrepeated(fwd, n, wins[n], jnp.asarray(gs[n], run.dtype).reshape(-1))
    grads: dict = {}
    for n in names:
        if n.startswith("#prior:"):  # a sink's prior content: one more term of each slot's sum
            s = n[len("#prior:"):]
            g = prior_gradient(jk.plan.kernel, s, gs[s], wins.get(s), xp=jnp)
            grads[n] = jnp.asarray(g).reshape(-1).astype(planes[n].dtype)
        elif n in fwd.keyed:  # an output written by key: its initial content where no shard stored
            grads[n] = unstored_positions(gs[n], wins[n], jnp).reshape(planes[n].shape).astype(planes[n].dtype)
    if wrt:
        inputs.update(tables)
        shapes = {x: (planes[x].shape, planes[x].dtype) for x in wrt}

        def scatter():
            return _adjoint_grads(jk, axis_name, run, wrt, ext, stencil, inputs, gs, grid, shapes, positions)

        form = gather_form(jk.plan, wrt, ext) if stencil else None
        if form is not None:  # plan.reverse's gather form; the scatter adjoint where a lane's pair erred
            from eagle.distributed.jax_grads import gathered

            grads.update(gathered(jk, axis_name, run, wrt, ext, stencil, form, inputs, gs, grid, shapes, scatter,
                                  _like))
        else:
            grads.update(scatter())
    return tuple(_like(grads.get(n), v) for n, v in zip(names, vma, strict=True))


def _winners(jk, axis_name, run, wrt: tuple, ext: tuple, inputs: dict, grid: dict,
             positions: tuple) -> tuple[dict, dict]:
    """The winners of sinks stored into with `= v` and the stores counted into outputs written by key
    (eagle/distributed/grads.py `winners`), their kernel run sharded over `axis_name` like the forward."""
    def sharded(win, planes):
        key = ("shard", axis_name, id(win))
        if key not in jk._adjoints:
            from eagle.jax import JaxKernel

            jk._adjoints[key] = JaxKernel(win.kernel, plan=win, axis_name=axis_name)
        try:
            return jk._adjoints[key](**planes)
        except InputError as exc:
            raise renamed(jk.name, exc) from None

    return winners(jk.plan, wrt, ext, sharded, {**inputs, **grid}, run.dtype, xp=jnp, positions=positions)


def _adjoint_grads(jk, axis_name, run, wrt: tuple, ext: tuple, stencil: list, inputs: dict, gs: dict,
                   grid: dict, shapes: dict, positions: tuple) -> dict:
    """The gradients of `wrt` from the adjoint kernel run sharded (for a stencil: specialised to the whole grid
    `ext`, its gradient the whole grid's, of which each shard keeps its rows)."""
    def gather(design, axes: dict) -> dict:  # the cotangents; rows read whole: every shard's, in row order
        cts = cotangents(forward_of(jk.plan), design, dict(gs), tuple(run.extents), run.dtype, xp=jnp,
                         strict=False)
        return {n: jax.lax.all_gather(c, axis_name, axis=axes[n], tiled=True) if n in axes else c
                for n, c in cts.items()}

    adj, design, cts = whole_rows_adjoint(jk.plan, wrt, ext, f"mesh axis '{axis_name}'", gather, positions)
    ak = jk._adjoints.get(("shard", axis_name, id(adj)))
    if ak is None:
        from eagle.jax import JaxKernel

        ak = jk._adjoints[("shard", axis_name, id(adj))] = JaxKernel(adj.kernel, plan=adj, axis_name=axis_name)
    try:
        got = ak(**inputs, **cts, **grid)
    except InputError as exc:
        raise renamed(jk.name, exc) from None
    got = got if isinstance(got, dict) else {next(iter(design.grad.values())): got}
    rows, grads = run.extents[0], {}
    for x in wrt:
        g = got[design.grad[x]]
        if x in stencil:  # the whole grid's gradient, the same on every shard: this shard's rows
            g = jax.lax.dynamic_slice_in_dim(g.reshape(-1, ext[0], math.prod(ext[1:])),
                                             jax.lax.axis_index(axis_name) * rows, rows, axis=1)
        grads[x] = g.reshape(shapes[x][0]).astype(shapes[x][1])
    return grads


def _like(g, want: frozenset):
    """`g` typed like its primal under shard_map: the custom calls' results are typed invariant (the same on every
    shard); a gradient of a per-shard operand is varying along the primal's axes. (Where nothing is typed, as
    in a custom_partitioning lowering, where the axis index itself is not varying: nothing to do.)"""
    if g is None:
        return None
    have = _varying(g)
    missing = tuple(a for a in sorted(want - have) if a in _varying(jax.lax.axis_index(a)))
    return jax.lax.pcast(g, missing, to="varying") if missing else g


def _varying(a) -> frozenset:
    """The mesh axes along which `a` varies inside shard_map (its aval's manual axis type)."""
    t = jax.typeof(a)
    mat = getattr(t, "manual_axis_type", None)
    return frozenset(getattr(mat, "varying", None) or getattr(t, "vma", None) or ())


def _bitcast(a, dtype=None):
    """A float array's bits as integers of its width, or integers' back as `dtype`."""
    return jax.lax.bitcast_convert_type(a, dtype or {4: jnp.int32, 8: jnp.int64}[np.dtype(a.dtype).itemsize])
