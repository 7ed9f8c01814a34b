"""eagle.jax under plain `jax.jit` with sharded inputs: `eagle.jax.wrap(kernel, partition=True)` lets XLA's
partitioner split the call by the inputs' shardings (`jax.experimental.custom_partitioning`).

When the per-lane planes arrive sharded along their leading lane axis over one mesh axis (a `NamedSharding`),
the partition rule keeps them where they are and runs the sharded path of eagle/distributed/jax_shard.py on each
shard with that mesh axis: per-lane outputs stay sharded the same way, cells and sinks are combined with
collectives of the partial state only (so the compiled HLO holds no all-gather of a lane input) and come back
replicated. Unsharded (or replicated) inputs run the ordinary one-device call. The rule is given both ways XLA
asks for it: the callbacks (GSPMD) and a Shardy `sharding_rule` in which the planes share one factor per lane
axis.
"""

from __future__ import annotations

import warnings

import jax
import numpy as np
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from eagle.errors import InputError


class Partitioned:
    """One kernel's partitioned call for one set of operand names, shapes and static grid extents."""

    def __init__(self, jk, names: list[str], lane_dims: list[int | None], grid: dict, avals: list):
        self.jk, self.names, self.lane_dims, self.grid = jk, names, lane_dims, grid
        whole = self._whole
        out = jax.eval_shape(whole, *avals)
        self.result_names = sorted(out)
        nla = len(jk.plan.kernel.signature.lane_axes())
        outputs, rows = _lane_outputs(jk.plan), _leading_kept(jk.plan)
        self.result_dims = [(out[n].ndim - nla) if n in outputs else
                            (out[n].ndim - rows[_cell(n, rows)]) if _cell(n, rows) else None
                            for n in self.result_names]
        f = custom_partitioning(lambda *ops: self._tuple(whole(*ops)))
        f.def_partition(partition=self._partition, infer_sharding_from_operands=self._infer,
                        sharding_rule=self._rule(avals, out, nla))
        self.fn = f
        self.avals = avals
        self._diff = None
        self._svjp = None

    def differentiable(self):
        """The partitioned call with a custom VJP: its backward is the adjoint kernel (hawk/reverse) called the same
        way (partitioned by its inputs' shardings, which are the forward's and the cotangents'), so gradients are
        the sharded adjoint's: bitwise plan.reverse's (eagle/distributed/grads.py)."""
        if self._diff is None:
            f = jax.custom_vjp(lambda *ops: self.fn(*ops))
            f.defvjp(lambda *ops: (self.fn(*ops), ops), self._backward)
            self._diff = f
        return self._diff

    def _backward(self, ops: tuple, gs: tuple) -> tuple:
        import jax.numpy as jnp

        from eagle.distributed.grads import FLOATS, adjoint_plan, prior_gradient, renamed, stencil_planes
        from eagle.jax import JaxKernel
        from eagle.reverse import adjoint_inputs, cotangents, forward_of

        jk = self.jk
        if forward_of(jk.plan).keyed:  # (it cannot run sharded: its forward ran as the one-device call over
            # gathered lanes, and so does its gradient, that call's own VJP)
            _, vjp = jax.vjp(lambda *full: self._tuple(self._whole(*full)), *ops)
            return tuple(None if np.issubdtype(o.dtype, np.integer) else g
                         for o, g in zip(ops, vjp(tuple(gs)), strict=True))
        planes = dict(zip(self.names, ops, strict=True))
        cot = dict(zip(self.result_names, gs, strict=True))
        wrt = tuple(n for n in self.names if jk.kinds[n] in FLOATS)
        lane = [(a, d) for a, d in zip(self.avals, self.lane_dims, strict=True) if d is not None]
        extents = tuple(lane[0][0].shape[lane[0][1]:]) if lane else ()
        floats = [n for n in self.names if jk.kinds[n] in ("lane", "table", "sink")] + list(wrt)
        dtype = np.dtype(planes[floats[0]].dtype if floats else np.float64)
        inputs = {n: planes[n].reshape(()) if jk.kinds[n] == "param" else planes[n] for n in self.names
                  if jk.kinds[n] in (*FLOATS, "index")}
        inputs.update(adjoint_inputs(forward_of(jk.plan), {}, extents, dtype, xp=jnp))  # (outputs read: zeros)
        priors = [n for n in self.names if jk.kinds[n] == "sink" and n in cot]
        # a stencil (plan.reverse's gather form) and row results (their cotangents keyed by each shard's own rows):
        # the shard_map form's gradient on each shard, which finds the winners itself
        shard_form = bool(wrt) and bool(stencil_planes(jk.plan, wrt) or _leading_kept(jk.plan))
        wins, tables = self._winners(wrt, extents, dtype, inputs) if priors or (wrt and not shard_form) else ({}, {})
        grads = {n: jnp.asarray(prior_gradient(jk.plan.kernel, n, cot[n], wins.get(n), xp=jnp)).reshape(
            planes[n].shape).astype(planes[n].dtype) for n in priors}
        if wrt:
            if shard_form:
                if self._svjp is None:
                    try:  # (what shards cannot differentiate is refused here, not inside the partitioner)
                        adjoint_plan(jk.plan, wrt, extents, "a mesh axis (partition=True)")
                    except InputError as exc:
                        raise renamed(jk.name, exc) from None
                    self._svjp = _StencilVjp(self, wrt, ops, gs)
                grads.update(zip(wrt, self._svjp.fn(*ops, *gs), strict=True))
                return tuple(grads.get(n) for n in self.names)
            adj, design, _ = adjoint_plan(jk.plan, wrt, extents, "a mesh axis (partition=True)")
            ak = jk._adjoints.get(("partition", id(adj)))
            if ak is None:
                ak = jk._adjoints[("partition", id(adj))] = JaxKernel(adj.kernel, plan=adj, partition=True)
            inputs.update(tables)
            cts = cotangents(forward_of(jk.plan), design, cot, extents, dtype, xp=jnp, strict=False)
            try:
                got = ak(**inputs, **cts, **self.grid)
            except InputError as exc:
                raise renamed(jk.name, exc) from None
            got = got if isinstance(got, dict) else {next(iter(design.grad.values())): got}
            for x in wrt:
                grads[x] = got[design.grad[x]].reshape(planes[x].shape).astype(planes[x].dtype)
        return tuple(grads.get(n) for n in self.names)

    def _winners(self, wrt: tuple, extents: tuple, dtype, inputs: dict) -> tuple[dict, dict]:
        """The winners of sinks stored into with `= v` (eagle/distributed/grads.py `winners`), their kernel run
        like the forward (partition=True: sharded where it can run sharded)."""
        import jax.numpy as jnp

        from eagle.distributed.grads import winners
        from eagle.jax import JaxKernel

        jk = self.jk

        def partitioned(win, planes):
            wk = jk._adjoints.get(("partition", id(win)))
            if wk is None:
                wk = jk._adjoints[("partition", id(win))] = JaxKernel(win.kernel, plan=win, partition=True)
            return wk(**planes)

        return winners(jk.plan, wrt, extents, partitioned, {**inputs, **self.grid}, dtype, xp=jnp)

    def _planes(self, ops) -> dict:
        planes = dict(zip(self.names, ops, strict=True))
        for n in self.names:
            if self.jk.kinds[n] == "param":
                planes[n] = planes[n].reshape(())
        return {**planes, **self.grid}

    def _whole(self, *ops) -> dict:
        got = self.jk._call_whole(**self._planes(ops))
        return got if isinstance(got, dict) else {_only_name(self.jk.plan): got}

    def _tuple(self, res: dict) -> tuple:
        return tuple(res[n] for n in self.result_names)

    def _axis(self, arg_shapes) -> str | None:
        """The mesh axis the first per-lane operand is sharded over along its leading lane axis (None: not)."""
        for s, d in zip(arg_shapes, self.lane_dims, strict=True):
            if d is None or not isinstance(s.sharding, NamedSharding):
                continue
            spec = tuple(s.sharding.spec) + (None,) * (len(s.shape) - len(s.sharding.spec))
            ax = spec[d]
            if isinstance(ax, tuple):
                if len(ax) != 1:
                    raise InputError(f"kernel '{self.jk.name}': plane '{self.names[self.lane_dims.index(d)]}' is "
                                     f"sharded over mesh axes {ax}; shard its lanes over one mesh axis")
                ax = ax[0]
            return ax
        return None

    def _shardings(self, mesh, axis, dims) -> tuple:
        return tuple(NamedSharding(mesh, P(*([None] * d + [axis])) if d is not None and axis is not None else P())
                     for d in dims)

    def _infer(self, mesh, arg_shapes, result_shape):
        return self._shardings(mesh, self._axis(arg_shapes), self.result_dims)

    def _partition(self, mesh, arg_shapes, result_shape):
        axis = self._axis(arg_shapes)
        if axis is not None and self._refused(mesh, axis, arg_shapes):
            axis = None  # the one-device call over gathered lanes (warned)
        args = self._shardings(mesh, axis, self.lane_dims)
        results = self._shardings(mesh, axis, self.result_dims)
        if axis is None:
            return mesh, lambda *ops: self._tuple(self._whole(*ops)), results, args
        from eagle.distributed.jax_shard import sharded_call

        def lower(*ops):
            got = sharded_call(self.jk, axis, self._planes(ops))
            return self._tuple(got if isinstance(got, dict) else {self.result_names[0]: got})

        return mesh, lower, results, args

    def _refused(self, mesh, axis: str, arg_shapes) -> bool:
        """Whether the kernel cannot run sharded over `axis` (eagle/distributed/stages.py check_shardable: a `.at`
        read that can reach any lane, ...). Under plain jit the call's meaning is the whole run's, so it then runs
        as one call over the gathered lanes, with a warning naming the kernel and the reason (inside shard_map and
        in torch groups the same kernel is refused: there each shard's call is the user's)."""
        from eagle.distributed.run import bind_sharded

        shards = mesh.shape[axis]
        stand = {}
        for n, s, d in zip(self.names, arg_shapes, self.lane_dims, strict=True):
            if self.jk.kinds[n] == "sink":  # a sink's prior content: added once by the sharded call, not bound
                continue
            shape = list(s.shape)
            if d is not None:
                shape[d] //= shards
            stand[n] = 0.0 if self.jk.kinds[n] == "param" else np.zeros(shape, np.dtype(s.dtype))
        key = ("refused", axis, shards, tuple((n, np.shape(v)) for n, v in stand.items()))
        if key not in self.jk._calls:
            try:
                bind_sharded(self.jk.plan, {**stand, **self.grid}, f"mesh axis '{axis}'")
                self.jk._calls[key] = False
            except InputError as exc:
                warnings.warn(f"{exc}. Under jax.jit it runs unsharded instead: XLA gathers its lanes onto every "
                              f"device", stacklevel=2)
                self.jk._calls[key] = True
        return self.jk._calls[key]

    def _rule(self, avals, out: dict, nla: int) -> str:
        """Shardy's rule: a factor per lane axis shared by every per-lane plane and output, one of its own for
        every other dimension."""
        return _rule([(a.ndim, d) for a, d in zip(avals, self.lane_dims, strict=True)],
                     [(out[n].ndim, d) for n, d in zip(self.result_names, self.result_dims, strict=True)])


class _StencilVjp:
    """A stencil's gradients under partition=True (and those through row results, a cell keeping the leading
    axis), as one custom_partitioning function of (operands, cotangents): on a shard it differentiates the
    shard_map form of the call (eagle/distributed/jax_shard.py), whose backward is plan.reverse's gather form with
    halo share rows (eagle/distributed/jax_grads.py) or the adjoint keyed by the shard's own rows, so the
    gradients are bitwise plan.reverse's; unsharded (or a kernel that cannot run sharded, as Partitioned._refused
    says), the one-device call's VJP over the gathered lanes. (The forward it differentiates feeds nothing: XLA
    drops it.)"""

    def __init__(self, part: Partitioned, wrt: tuple, ops: tuple, gs: tuple):
        self.part, self.wrt, self.n = part, wrt, len(ops)
        self.at = [part.names.index(x) for x in wrt]
        dims = [part.lane_dims[i] for i in self.at]
        f = custom_partitioning(self._whole)
        f.def_partition(partition=self._partition,
                        infer_sharding_from_operands=lambda mesh, shapes, _: part._shardings(
                            mesh, part._axis(shapes[:self.n]), dims),
                        sharding_rule=_rule([(o.ndim, d) for o, d in zip(ops, part.lane_dims, strict=True)]
                                            + [(g.ndim, d) for g, d in zip(gs, part.result_dims, strict=True)],
                                            [(ops[i].ndim, d) for i, d in zip(self.at, dims, strict=True)]))
        self.fn = f

    def _vjp(self, call, args: tuple) -> tuple:
        ops, cots = list(args[:self.n]), tuple(args[self.n:])

        def forward(*diff):
            full = list(ops)
            for i, d in zip(self.at, diff, strict=True):
                full[i] = d
            return call(full)

        _, vjp = jax.vjp(forward, *[ops[i] for i in self.at])
        return tuple(vjp(cots))

    def _whole(self, *args) -> tuple:
        part = self.part
        return self._vjp(lambda full: part._tuple(part._whole(*full)), args)

    def _partition(self, mesh, arg_shapes, result_shape):
        from eagle.distributed.jax_shard import sharded_call

        part = self.part
        axis = part._axis(arg_shapes[:self.n])
        if axis is not None and part._refused(mesh, axis, arg_shapes[:self.n]):
            axis = None  # the forward runs whole over gathered lanes (warned): so does its gradient
        args = part._shardings(mesh, axis, part.lane_dims) + part._shardings(mesh, axis, part.result_dims)
        results = part._shardings(mesh, axis, [part.lane_dims[i] for i in self.at])
        if axis is None:
            return mesh, self._whole, results, args

        def call(full):
            got = sharded_call(part.jk, axis, part._planes(full))
            return part._tuple(got if isinstance(got, dict) else {part.result_names[0]: got})

        return mesh, lambda *a: self._vjp(call, a), results, args


def _rule(ins: list[tuple[int, int | None]], outs: list[tuple[int, int | None]]) -> str:
    """A Shardy rule over operands and results given as (ndim, first lane dimension or None): a factor per lane
    axis shared by all, one of its own for every other dimension."""
    count = [0]

    def dims(ndim, lane_dim):
        fs = []
        for k in range(ndim):
            if lane_dim is not None and k >= lane_dim:
                fs.append(f"l{k - lane_dim}")
            else:
                count[0] += 1
                fs.append(f"u{count[0]}")
        return " ".join(fs)

    return ", ".join(dims(*a) for a in ins) + " -> " + ", ".join(dims(*a) for a in outs)


def _lane_outputs(plan) -> set[str]:
    """The per-lane outputs (sharded like the lanes); not those written by key, whose positions no shard owns."""
    from eagle.bridge import keyed_outputs

    spec = plan.kernel.default_spec()
    return {b.name for k in range(plan.kernel.stage_count) for b in plan.kernel.layout(spec, k).buffers
            if b.role == "out"} - keyed_outputs(plan)


def _leading_kept(plan) -> dict[str, int]:
    """Cells keeping a leading block of lane axes (a row sum: each shard's own rows), by name: how many axes."""
    from eagle.distributed.stages import leading_cells

    spec, kernel = plan.kernel.default_spec(), plan.kernel
    found = {}
    for k in range(kernel.stage_count):
        lay = kernel.layout(spec, k)
        local = leading_cells(kernel, lay)
        found.update({r.cell: len(r.kept) for r in lay.reductions if r.cell in local})
    return found


def _cell(name: str, cells: dict) -> str | None:
    """The cell a result is (or is a component of: <cell>_<k>), if among `cells`."""
    base, _, tail = name.rpartition("_")
    return name if name in cells else base if tail.isdigit() and base in cells else None


def _only_name(plan) -> str:
    from eagle.bridge import result_names

    return result_names(plan)[0][0]


def partitioned_call(jk, planes: dict):
    """`jk`'s call as a custom_partitioning function of its planes: XLA splits it by the inputs' shardings."""
    import jax.numpy as jnp

    grid = {n: int(v) for n, v in planes.items() if jk.kinds.get(n) is None and isinstance(v, (int, np.integer))}
    arrays = {n: v for n, v in planes.items() if n not in grid and v is not None}
    names = [n for n in jk.order if n in arrays]
    if any(n not in jk.kinds for n in arrays):
        jk.plan.binder.bind(planes)  # the binder's own message for an unknown plane
    ops = [jnp.asarray(arrays[n]).reshape(1) if jk.kinds[n] == "param" else jnp.asarray(arrays[n]) for n in names]
    nla = len(jk.plan.kernel.signature.lane_axes())
    lane_dims = [o.ndim - nla if jk.kinds[n] in ("lane", "index") else None for n, o in zip(names, ops, strict=True)]
    key = ("partition", tuple((n, o.shape, np.dtype(o.dtype).str) for n, o in zip(names, ops, strict=True)),
           tuple(sorted(grid.items())))
    part = jk._calls.get(key)
    if part is None:
        avals = [jax.ShapeDtypeStruct(o.shape, o.dtype) for o in ops]
        part = jk._calls[key] = Partitioned(jk, names, lane_dims, grid, avals)
    res = dict(zip(part.result_names, part.differentiable()(*ops), strict=True))
    return res[part.result_names[0]] if len(res) == 1 else res
