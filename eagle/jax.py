"""eagle.jax: a hawk kernel inside JAX programs, through the XLA FFI (no Python on the call path under jit).

    f = eagle.jax.wrap(kernel, target="host", **deploy_options)
    out = f(x=x, w=w, scale=0.5)   # planes by name, as Plan.run takes them; one jax.Array, or a dict by name

`f` composes with `jax.jit` (the call is a custom call of the compiled program), `jax.vmap` (a loop of launches
inside XLA: `vmap_method="sequential"`, never a Python callback per element) and `jax.grad` / `jax.vjp` (a
custom VJP whose backward is the reverse's adjoint kernel, called through this bridge the same way, so gradients
stay inside XLA and carry the reverse's bits). Per kernel and per shape, eagle prepares every
stage of a run once (buffers, chunk argument blocks of the native executor) and a plan for the C handler
(eagle/jax_ffi.c) saying which stage buffers stand for each operand and result; a call patches XLA's buffer
addresses into them and fires the stages in order. Passed outputs and sinks alias their operands
(`input_output_aliases`). float64 planes need `jax_enable_x64` (the error says so). The host target only: GPU
targets run through `eagle.deploy` (device memory from a framework is not wired yet: docs/bridges.md).
"""

from __future__ import annotations

import ctypes
import hashlib
import platform
import subprocess
import tempfile
import threading
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from eagle import native
from eagle.bridge import Shaped, result_shapes
from eagle.errors import InputError

SOURCE = Path(__file__).with_name("jax_ffi.c")
TARGET = "eagle_hawk_call"
_LOCK = threading.Lock()
_LIB: dict = {}


def wrap(kernel, target: str = "host", **options) -> JaxKernel:
    """`kernel` deployed on `target` (options as eagle.deploy takes them), called with JAX arrays."""
    return JaxKernel(kernel, target, **options)


# ---- the C handler: built once, registered with XLA once ----------------------------------------------------------
class _CallStage(ctypes.Structure):
    _fields_ = [("stage", ctypes.c_void_p), ("err", ctypes.c_void_p), ("nchunks", ctypes.c_int64),
                ("messages", ctypes.c_void_p)]


class _CallPlan(ctypes.Structure):  # the head of jax_ffi.c's call_plan; its mutex follows (eagle_jax_plan_size)
    _fields_ = [("fire", ctypes.c_void_p), ("nstages", ctypes.c_int64), ("stages", ctypes.c_void_p),
                ("nargs", ctypes.c_int64), ("nrets", ctypes.c_int64), ("first", ctypes.c_void_p),
                ("slots", ctypes.c_void_p), ("kernel", ctypes.c_char_p)]


def _handler() -> ctypes.CDLL:
    """jax_ffi.c built with the system C compiler against jaxlib's FFI headers (cached like the native executor,
    sealed), loaded, and registered as the FFI target once per process."""
    with _LOCK:
        if "lib" in _LIB:
            return _LIB["lib"]
        from hawk import cache

        cc = native._compiler()
        if cc is None or native.library() is None:
            raise RuntimeError("eagle.jax needs a C compiler (cc, gcc or clang; or $CC) to build its XLA FFI handler "
                               "and eagle's native executor"
                               + (f": {native.unavailable_reason()}" if native.unavailable_reason() else ""))
        inc = jax.ffi.include_dir()
        tag = hashlib.sha256(SOURCE.read_bytes() + f"\0{cc}\0{platform.machine()}\0{inc}".encode()).hexdigest()[:20]
        d = cache.cache_dir()
        so = d / f"eagle-jax-ffi-{tag}.so" if d else None
        if so is None or not cache.entry_ok(so):
            tmp = Path(tempfile.mkdtemp(prefix="eagle-jax-"))
            built = tmp / "jax_ffi.so"
            argv = [cc, "-O2", "-std=gnu11", "-fPIC", "-shared", "-pthread", f"-I{inc}", "-o", str(built),
                    str(SOURCE)]
            r = subprocess.run(argv, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"eagle.jax: building the FFI handler failed: {r.stderr.strip()[-400:]}")
            if so is None or not cache.write_entry(so, built.read_bytes()):
                so = built
        lib = ctypes.CDLL(str(so))
        for fn in ("eagle_jax_plan_size", "eagle_jax_stage_size"):
            getattr(lib, fn).restype = ctypes.c_int64
        lib.eagle_jax_plan_init.argtypes = [ctypes.c_void_p]
        if lib.eagle_jax_stage_size() != ctypes.sizeof(_CallStage):
            raise RuntimeError("eagle.jax: the FFI handler's structures do not match eagle.jax's")
        jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(lib.eagle_jax_call), platform="cpu")
        _LIB["lib"] = lib
        return lib


# ---- one prepared call: every stage for one set of shapes ----------------------------------------------------------
class _Call:
    """Every stage of a run for fixed shapes, prepared once, and the call plan the C handler reads. `operands`: the
    plane names in operand order; `rets`: (shape, dtype) of each FFI result (a whole stage buffer); `picks`: result
    name -> (FFI result, offset, shape) that the Python side slices out after the call."""

    def __init__(self, jk: JaxKernel, shaped: dict[str, Shaped], params: dict[str, np.dtype], grid: dict,
                 passed: tuple[str, ...]):
        lib = _handler()
        plan = jk.plan
        dummy = {n: np.zeros(s.shape, s.dtype) for n, s in shaped.items()}
        dummy.update({n: 0.0 for n in params})
        b = plan.binder.bind({**dummy, **grid})
        parts = [plan.prepare(b.spec, k) for k in range(plan.kernel.stage_count)]
        cuts: dict = {}
        self.stages, results = [], {}
        for host_lib, launcher in parts:
            st = launcher.prepare(host_lib, b, 0, b.lanes, cuts, staged=False)
            if st.args.lib is None:
                raise RuntimeError("eagle.jax: the native executor did not take this stage")
            self.stages.append(st)
            results.update(st.results)
            cuts.update(st.cells_out)
        self.operands = [n for n in jk.order if n in shaped or n in params]
        self.extents = tuple(b.extents)
        planes = {n: (b.arrays[n] if n in b.arrays else dummy[n]) for n in self.operands}
        for n in passed:  # a passed output or sink: the stage buffer the binder took for it
            planes[n] = np.asarray(results[n])
        # the FFI results: each distinct stage buffer holding a result (a vector cell's components share one)
        self.rets, self.picks, ret_bufs = [], {}, []
        for name in sorted(results):
            a = np.asarray(results[name])
            at = native.address(a)
            owner = self._owner(at, a.nbytes)
            if owner is None:
                raise RuntimeError(f"eagle.jax: kernel '{jk.name}': result '{name}' is not a stage buffer")
            if not any(native.address(o) == native.address(owner) for o in ret_bufs):
                ret_bufs.append(owner)
                self.rets.append(jax.ShapeDtypeStruct((owner.size,), owner.dtype))
            j = next(k for k, o in enumerate(ret_bufs) if native.address(o) == native.address(owner))
            self.picks[name] = (j, (at - native.address(owner)) // a.itemsize, a.shape)
        self.aliases = {self.operands.index(n): self.picks[n][0] for n in passed}
        # patches: every stage buffer slot with the address of operand i (then of result j)
        targets = [planes[n] for n in self.operands] + ret_bufs
        slots, first = [], [0]
        for t in targets:
            for st in self.stages:
                base = ctypes.addressof(st.args.vals)
                for k, a in enumerate(st.args.keep):
                    if a.size and t.size and native.address(a) == native.address(t):
                        slots.append(base + 40 * k)
            first.append(len(slots))
        self._slots = (ctypes.c_void_p * max(len(slots), 1))(*slots)
        self._first = (ctypes.c_int64 * len(first))(*first)
        self._messages = [self._sink_messages(jk, st) for st in self.stages]
        self._cstages = (_CallStage * len(self.stages))()
        for cs, st, msgs in zip(self._cstages, self.stages, self._messages, strict=True):
            cs.stage, cs.err = st.args.stage_address, native.address(st.err)
            cs.nchunks, cs.messages = st.err.size // 3, ctypes.addressof(msgs)
        self._kernel = jk.name.encode()
        self._raw = ctypes.create_string_buffer(lib.eagle_jax_plan_size())
        head = _CallPlan.from_buffer(self._raw)
        head.fire = native.function_address(native.library().eagle_fire)
        head.nstages, head.stages = len(self.stages), ctypes.addressof(self._cstages)
        head.nargs, head.nrets = len(self.operands), len(self.rets)
        head.first, head.slots, head.kernel = ctypes.addressof(self._first), ctypes.addressof(self._slots), self._kernel
        if lib.eagle_jax_plan_init(ctypes.addressof(self._raw)) != 0:
            raise RuntimeError("eagle.jax: could not set up the call plan's lock")
        self.address = ctypes.addressof(self._raw)

    def _owner(self, at: int, nbytes: int):
        for st in self.stages:
            for a in st.args.keep:
                lo = native.address(a) if a.size else -1
                if lo <= at and at + nbytes <= lo + a.nbytes:
                    return a
        return None

    @staticmethod
    def _sink_messages(jk, st):
        """printf formats (count, first bad key) of Launcher.check_errors's message, per sink buffer index."""
        lay = st.launcher.lay
        msgs = (ctypes.c_char_p * len(lay.buffers))()
        keep = []
        for k, buf in enumerate(lay.buffers):
            if buf.role == "sink":
                ax = jk.plan.binder.sig.get(buf.name).axes[0]
                text = (f"sink '{buf.name}' of kernel '{jk.name}': %lld lane(s) scattered to a key outside it (first "
                        f"bad key: %lld); valid keys on axis '{ax.label}' are 0..{ax.extent - 1}").encode()
                keep.append(text)
                msgs[k] = text
        msgs._keep = keep  # the strings live as long as the table
        return msgs


class JaxKernel:
    """A deployed kernel called with JAX arrays: `f(**planes)` returns what Plan.run returns, as jax.Arrays."""

    def __init__(self, kernel, target: str = "host", plan=None, **options):
        import eagle

        if target != "host":
            raise ValueError(f"eagle.jax: kernel '{kernel.name}': the JAX bridge runs on the host target; deploy "
                             f"on '{target}' with eagle.deploy")
        self.plan = plan if plan is not None else eagle.deploy(kernel, target=target, **options)
        self.name = kernel.name
        sig = kernel.signature
        self.kinds = {p.name: p.kind for p in sig.planes}
        self.order = [p.name for p in sig.planes]
        self._calls: dict = {}
        self._fns: dict = {}
        self._adjoints: dict = {}

    def __repr__(self) -> str:
        return f"<eagle.jax kernel {self.name} target=host>"

    def __call__(self, **planes):
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
        outs = fn(*ops)
        results = {}
        for name, (j, off, shape) in call.picks.items():
            size = int(np.prod(shape)) if shape else 1
            results[name] = outs[j][off:off + size].reshape(shape)
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
        from eagle.reverse import adjoint_for

        planes = dict(zip(call.operands, ops, strict=True))
        floats = ("lane", "table", "param")
        wrt = tuple(n for n in call.operands if self.kinds[n] in floats)
        sinks = [n for n in call.operands if self.kinds[n] == "sink"]
        grads: dict = {}
        cot = {}
        for name, (j, off, shape) in call.picks.items():
            size = int(np.prod(shape)) if shape else 1
            cot[name] = gs[j][off:off + size].reshape(shape)
        if wrt:
            adj_plan, design, win = adjoint_for(self.plan, wrt, call.extents)
            if win is not None:
                raise InputError(f"kernel '{self.name}': eagle.jax differentiates kernels without `= v` stores into "
                                 f"sinks for now (use plan.reverse for those)")
            ak = self._adjoints.get(id(adj_plan))
            if ak is None:
                ak = self._adjoints[id(adj_plan)] = JaxKernel(adj_plan.kernel, plan=adj_plan)
            inputs = {n: (planes[n].reshape(()) if self.kinds[n] == "param" else planes[n])
                      for n in call.operands if self.kinds[n] not in ("output", "sink")}
            got = ak(**inputs, **self._cotangent_planes(design, cot, call))
            got = got if isinstance(got, dict) else {next(iter(design.grad.values())): got}
            for x in wrt:
                grads[x] = got[design.grad[x]].reshape(planes[x].shape).astype(planes[x].dtype)
        for s in sinks:  # a sink's initial contents: each slot is one more term of its sums
            grads[s] = cot[s].astype(planes[s].dtype)
        return tuple(grads.get(n) for n in call.operands)

    def _cotangent_planes(self, design, cot: dict, call: _Call) -> dict:
        """The adjoint's cotangent planes from the results' cotangents (eagle.reverse.cotangents, on JAX arrays)."""
        sig = self.plan.kernel.signature
        labels = [a.label for a in sig.lane_axes()]
        out = {}
        for name in design.ct:
            kind, pay = design.ct_kind[name], design.payload[name]
            size = int(np.prod(pay)) if pay else 1
            if name in cot:
                a = cot[name]
            elif all(f"{name}_{k}" in cot for k in range(size)):
                a = jnp.concatenate([cot[f"{name}_{k}"].reshape(-1) for k in range(size)])
            else:
                continue
            kept = tuple(call.extents[labels.index(ax)] for ax in design.kept.get(name, ()))
            if kind == "param":
                out[design.ct[name]] = a.reshape(-1)[:1]
            elif kind == "lane":
                out[design.ct[name]] = a.reshape((size, *call.extents) if len(pay) >= 2 else (*pay, *call.extents))
            else:
                axes = kept if name in self.plan.kernel.outputs else tuple(ax.extent for ax in sig.get(name).axes)
                out[design.ct[name]] = a.reshape(((size,) if size > 1 or not axes else ()) + axes)
        return out

    def _check_x64(self, arrays: dict, params: dict) -> None:
        if jax.config.jax_enable_x64:
            return
        for name, v in arrays.items():
            if np.dtype(getattr(v, "dtype", np.float32)) == np.float64:
                raise InputError(f"plane '{name}' of kernel '{self.name}': holds float64 values, but JAX runs in "
                                 f"32-bit mode and would round them to float32: set "
                                 f"jax.config.update('jax_enable_x64', True) (or pass float32)")
