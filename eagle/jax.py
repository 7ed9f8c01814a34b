"""eagle.jax: a hawk kernel inside JAX programs, through the XLA FFI (no Python on the call path under jit).

    f = eagle.jax.wrap(kernel, target="host", **deploy_options)
    out = f(x=x, w=w, scale=0.5)   # planes by name, as Plan.run takes them; one jax.Array, or a dict by name

`f` composes with `jax.jit` (the call is a custom call of the compiled program), `jax.vmap` (a loop of launches
inside XLA: `vmap_method="sequential"`, never a Python callback per element) and `jax.grad` / `jax.vjp` (a
custom VJP whose backward is the reverse's adjoint kernel, after its winners kernel for sinks stored into with
`= v`, called through this bridge the same way, so gradients stay inside XLA and carry the reverse's bits). Per
kernel and per shape, eagle prepares every stage of a run once (buffers, chunk argument blocks of the native
executor) and a plan for the C handler (eagle/call_plan.c) saying which stage buffers stand for each operand and
result; a call patches XLA's buffer addresses into them and fires the stages in order. Passed outputs and sinks
alias their operands (`input_output_aliases`). float64 planes need `jax_enable_x64` (the error says so). The host
target only: GPU targets run through `eagle.deploy` (device memory from a framework is not wired yet:
docs/bridges.md).
"""

from __future__ import annotations

import ctypes
import math
import threading

import jax
import jax.numpy as jnp
import numpy as np

from eagle.bridge import Shaped, result_shapes
from eagle.errors import InputError
from eagle.prepared import PreparedRun, library

TARGET = "eagle_hawk_call"
REPEATS = "eagle_hawk_repeats"  # eagle/call_plan.c: an output written by key, checked in a backward
_LOCK = threading.Lock()
_REGISTERED: list = []
# Every call plan a compiled XLA program may name by address. A jitted program can outlive the wrapper that made
# it (and run asynchronously after the wrapper is gone), so plans are kept for the life of the process: one per
# kernel, shape and passed-output set (and per sharded run: eagle/distributed/jax_shard.py).
_LIVE: list = []


def keep_for_process(obj):
    """Keep `obj` (a call plan's owner) alive as long as the process: compiled programs name its plans."""
    _LIVE.append(obj)
    return obj


def wrap(kernel, target: str = "host", axis_name=None, partition: bool = False, **options) -> JaxKernel:
    """`kernel` deployed on `target` (options as eagle.deploy takes them), called with JAX arrays. With
    `axis_name`, called inside `jax.shard_map` on each shard's lanes: cells and sinks are combined across that
    mesh axis (eagle/distributed/jax_shard.py). With `partition=True`, under `jax.jit` the call follows its
    inputs' shardings (eagle/distributed/jit_shard.py)."""
    return JaxKernel(kernel, target, axis_name=axis_name, partition=partition, **options)


# ---- the C handler (eagle/call_plan.c), registered with XLA once ---------------------------------------------------
def _handler() -> None:
    with _LOCK:
        if not _REGISTERED:
            lib = library()
            jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(lib.eagle_jax_call), platform="cpu")
            jax.ffi.register_ffi_target(REPEATS, jax.ffi.pycapsule(lib.eagle_jax_repeats), platform="cpu")
            _REGISTERED.append(lib)


class _Call(PreparedRun):
    """A PreparedRun (eagle/prepared.py) with its native call plan built: its address is the custom call's `plan`
    attribute, read by the XLA FFI handler in eagle/call_plan.c."""

    def __init__(self, jk: JaxKernel, shaped: dict[str, Shaped], params: dict[str, np.dtype], grid: dict,
                 passed: tuple[str, ...]):
        _handler()
        super().__init__(jk.plan, shaped, params, grid, passed, jk.order)
        self.grid = dict(grid)
        rets = list(self.rets)
        for i, j in self.aliases.items():  # XLA aliases an operand only to a result of its very shape
            shape = tuple(shaped[self.operands[i]].shape)
            if math.prod(shape) == rets[j][0][0]:
                rets[j] = (shape, rets[j][1])
        self.rets = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in rets]
        self.address = self.native_plan()
        keep_for_process(self)


class JaxKernel:
    """A deployed kernel called with JAX arrays: `f(**planes)` returns what Plan.run returns, as jax.Arrays."""

    def __init__(self, kernel, target: str = "host", plan=None, axis_name=None, partition: bool = False,
                 **options):
        import eagle

        self.axis_name, self.partition = axis_name, partition
        if target != "host":
            raise ValueError(f"eagle.jax: kernel '{kernel.name}': the JAX bridge runs on the host target; deploy "
                             f"on '{target}' with eagle.deploy")
        self.plan = plan if plan is not None else eagle.deploy(kernel, target=target, **options)
        self.name = kernel.name
        sig = kernel.signature
        self.kinds = {p.name: p.kind for p in sig.planes}
        self.ints = frozenset(p.name for p in sig.planes if p.integer)  # integer outputs: no cotangent
        self.order = [p.name for p in sig.planes]
        self._calls: dict = {}
        self._fns: dict = {}
        self._adjoints: dict = {}
        self._formats: dict = {}  # output written by key -> its refusal format (a C string, kept: eagle/call_plan.c)

    def __repr__(self) -> str:
        return f"<eagle.jax kernel {self.name} target=host>"

    def __call__(self, **planes):
        if self.axis_name is not None:  # inside jax.shard_map: eagle/distributed/jax_shard.py
            from eagle.distributed.jax_shard import sharded_call

            return sharded_call(self, self.axis_name, planes)
        if self.partition:  # under jax.jit, split by the inputs' shardings: eagle/distributed/jit_shard.py
            from eagle.distributed.jit_shard import partitioned_call

            return partitioned_call(self, planes)
        return self._call_whole(**planes)

    def _call_whole(self, **planes):
        arrays, params, grid = {}, {}, {}
        for name, v in planes.items():
            kind = self.kinds.get(name)
            if kind is None and isinstance(v, (int, np.integer)):
                grid[name] = int(v)  # a free grid extent by its label
            elif kind == "param":
                params[name] = v
            elif kind is not None and v is not None:
                arrays[name] = v
            elif kind is None:
                self.plan.binder.bind(planes)  # the binder's own message for an unknown plane
        self._check_x64(arrays, params)
        arrays = {n: jnp.asarray(v) for n, v in arrays.items()}
        shaped = {n: Shaped(a.shape, np.dtype(a.dtype)) for n, a in arrays.items()}
        res = result_shapes(self.plan, shaped, grid, frozenset(n for n in arrays if self.kinds[n] in ("output",
                                                                                                      "sink")))
        fdt = res.dtype
        params = {n: jnp.asarray(v, dtype=fdt) for n, v in params.items()}
        passed = tuple(sorted(n for n in arrays if self.kinds[n] in ("output", "sink")))
        key = (tuple(sorted((n, s.shape, s.dtype.str) for n, s in shaped.items())), tuple(sorted(params)),
               tuple(sorted(grid.items())), passed)
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = _Call(self, shaped, {n: fdt for n in params}, grid, passed)
        ops = [arrays[n] if n in arrays else params[n].reshape(1) for n in call.operands]
        fn = self._fns.get(key)
        if fn is None:
            fn = self._fns[key] = self._differentiable(call)
        results = call.results(fn(*ops))
        return results[next(iter(results))] if len(results) == 1 else results

    # ---- gradients: the reverse as a second FFI call ------------------------------------------------------------
    def _differentiable(self, call: _Call):
        """The FFI call as a function of its operands with a custom VJP: the backward runs the adjoint kernel
        (hawk/reverse, as plan.reverse does) through this bridge too, so jax.grad stays inside XLA."""

        def forward(*ops):
            return tuple(jax.ffi.ffi_call(TARGET, call.rets, input_output_aliases=call.aliases or None,
                                          vmap_method="sequential")(*ops, plan=np.int64(call.address)))

        f = jax.custom_vjp(forward)
        f.defvjp(lambda *ops: (forward(*ops), ops), lambda ops, gs: self._backward(call, ops, gs))
        return f

    def _backward(self, call: _Call, ops: tuple, gs: tuple) -> tuple:
        from eagle.jax_gather import gathered
        from eagle.reverse import (
            adjoint_for,
            adjoint_inputs,
            cotangents,
            forward_of,
            gather_for,
            unstored_positions,
            unstored_prior,
        )

        planes = dict(zip(call.operands, ops, strict=True))
        fwd = forward_of(self.plan)
        floats = ("lane", "table", "param")
        # a passed output whose initial contents the kernel reads: differentiated like an input (docs/reverse.md)
        wrt = tuple(n for n in call.operands if self.kinds[n] in floats or n in fwd.float_init)
        # a sink's, or an output's written by key: where no lane stored, its initial content is the result's
        sinks = [n for n in call.operands if self.kinds[n] == "sink" or n in fwd.keyed]
        grads: dict = {}
        cot = {n: v for n, v in call.results(tuple(jnp.zeros(g.shape, r.dtype) if g.dtype == jax.dtypes.float0
                                                    else g for g, r in zip(gs, call.rets, strict=True))).items()
               if n not in self.ints}  # (an integer output's float0 cotangent: sliced as zeros, then dropped)
        if not wrt and not sinks:
            return tuple(None for _ in call.operands)
        positions = fwd.positions(planes, call.extents)
        adj_plan, design, win = adjoint_for(self.plan, wrt, call.extents, positions)
        inputs = adjoint_inputs(fwd, {n: (planes[n].reshape(()) if self.kinds[n] == "param" else planes[n])
                                      for n in call.operands}, call.extents, call.dtype, xp=jnp)
        inputs.update(call.grid)
        # sinks stored into with `= v`: the winners kernel finds the store that won each slot (or -1), as
        # plan.reverse does; the adjoint reads it as a Table, and a won slot's initial content has no gradient.
        # Outputs written by key: it counts the stores into each position, and a count above one refuses the
        # gradient as plan.reverse does, from inside the compiled backward (eagle/call_plan.c)
        wins = self._winners(win, design, positions, inputs, call) if win is not None else {}
        cts = cotangents(fwd, design, cot, call.extents, call.dtype, xp=jnp, strict=False)
        for n in design.positions:
            cts[design.ct[n]] = self._unrepeated(fwd, n, wins[n], cts[design.ct[n]])
        if wrt:
            tables = {design.win[s]: w for s, w in wins.items() if s in design.win}

            def scatter(inputs: dict, cts: dict, tables: dict) -> dict:
                got = self._bridge(adj_plan)(**inputs, **cts, **tables)
                got = got if isinstance(got, dict) else {next(iter(design.grad.values())): got}
                return {x: got[design.grad[x]].reshape(planes[x].shape).astype(planes[x].dtype) for x in wrt}

            form = gather_for(self.plan, wrt, call.extents)  # a stencil: plan.reverse's gather form
            grads.update(scatter(inputs, cts, tables) if form is None else
                         gathered(self, form, wrt, (inputs, cts, tables), planes, call.extents, scatter))
        for s in sinks:  # a sink's initial contents: each slot is one more term of its sums, unless a lane stored
            if s in design.positions:
                grads[s] = unstored_positions(cts[design.ct[s]], wins[s], jnp).reshape(planes[s].shape).astype(
                    planes[s].dtype)
                continue
            g = cot[s].astype(planes[s].dtype)
            grads[s] = unstored_prior(g, wins[s], jnp) if s in wins else g
        return tuple(grads.get(n) for n in call.operands)

    def _unrepeated(self, fwd, out: str, counts, ct):
        """`ct` (the cotangent of output `out`, written by key) once eagle/call_plan.c found no position counted
        more than once in `counts`; else the call fails with plan.reverse's refusal."""
        from eagle.reverse import repeats_format

        fmt = self._formats.get(out)
        if fmt is None:
            fmt = self._formats[out] = keep_for_process(ctypes.create_string_buffer(
                repeats_format(fwd, out).encode()))
        # (no side effect: the adjoint reads what it hands on, which keeps it; and XLA's SPMD partitioner, under
        # partition=True, takes an unsharded call only when it has none)
        check = jax.ffi.ffi_call(REPEATS, jax.ShapeDtypeStruct(ct.shape, ct.dtype), input_output_aliases={1: 0},
                                 vmap_method="sequential")
        return check(counts, ct, plan=np.int64(ctypes.addressof(fmt)))

    def _bridge(self, plan) -> JaxKernel:
        """The adjoint's (or winners') plan wrapped like this kernel, once per plan."""
        jk = self._adjoints.get(id(plan))
        if jk is None:
            jk = self._adjoints[id(plan)] = JaxKernel(plan.kernel, plan=plan)
        return jk

    def _winners(self, win, design, positions: tuple, inputs: dict, call: _Call) -> dict:
        """Per sink stored into with `= v`: its winning store number per slot (-1 where no lane stored), from
        the winners kernel run on sinks filled with -1 (passed sinks: aliased operands, as in any call); per
        output written by key, the stores counted into each position (from zeros)."""
        from eagle.reverse import winner_fills

        sig = self.plan.kernel.signature
        fills = winner_fills(design, sig, call.dtype, xp=jnp)
        fills.update({n: jnp.zeros(size, call.dtype) for n, size in positions})
        wk = self._bridge(win)
        got = wk(**{n: v for n, v in inputs.items() if n in wk.kinds or n in call.grid}, **fills)
        return got if isinstance(got, dict) else {next(iter(fills)): got}

    def _check_x64(self, arrays: dict, params: dict) -> None:
        if jax.config.jax_enable_x64:
            return
        for p in self.plan.kernel.signature.planes:
            if p.integer and arrays.get(p.name) is None:
                raise InputError(f"plane '{p.name}' of kernel '{self.name}': an integer output left out comes back "
                                 f"as int64, which JAX in 32-bit mode cannot hold: pass an int32 array for it "
                                 f"(jnp.zeros(shape, jnp.int32)), or set jax.config.update('jax_enable_x64', True)")
        for name, v in arrays.items():
            if np.dtype(getattr(v, "dtype", np.float32)) == np.float64:
                raise InputError(f"plane '{name}' of kernel '{self.name}': holds float64 values, but JAX runs in "
                                 f"32-bit mode and would round them to float32: set "
                                 f"jax.config.update('jax_enable_x64', True) (or pass float32)")
