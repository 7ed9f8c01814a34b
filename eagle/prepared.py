"""A run prepared once per set of shapes, whose arrays are swapped in per call: what the bridges launch.

A framework bridge sees the same shapes call after call, with new arrays each time (fresh output tensors, inputs
that XLA or torch place where they like). `PreparedRun` binds stand-ins of those shapes, prepares every stage of
the run once (its buffers and the native executor's argument blocks: eagle/native) and records where each
operand and result lives among the stages' buffers. A call then writes the real arrays' addresses into those
buffer slots and fires the stages in order: no binding, no allocation, no argument packing. eagle.torch calls
`run_native` (one ctypes call into eagle/call_plan.c per launch); eagle.jax hands the same plan to XLA, whose FFI
handler (in the same C file) does the same per call.

Operands are the kernel's input planes (Params as one-element arrays) and the outputs and sinks the caller
passes; results are the distinct stage buffers that hold a result (a vector cell's components share one), and
`picks` says where each named result lies in them.
"""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import numpy as np

from eagle import native
from eagle.bridge import Shaped, check_dtypes, keyed_outputs
from eagle.errors import InputError
from eagle.native import cbuild

SOURCE = Path(__file__).with_name("call_plan.c")
_LOCK = threading.Lock()
_LIB: dict = {}
_TLS = threading.local()  # per thread: the buffer eagle_call_run writes a refusal's message into


class _CallStage(ctypes.Structure):
    _fields_ = [("stage", ctypes.c_void_p), ("err", ctypes.c_void_p), ("nchunks", ctypes.c_int64),
                ("messages", ctypes.c_void_p)]


class _CallPlan(ctypes.Structure):  # the head of call_plan.c's call_plan; its mutex follows (eagle_call_plan_size)
    _fields_ = [("fire", ctypes.c_void_p), ("nstages", ctypes.c_int64), ("stages", ctypes.c_void_p),
                ("nargs", ctypes.c_int64), ("nrets", ctypes.c_int64), ("first", ctypes.c_void_p),
                ("slots", ctypes.c_void_p), ("kernel", ctypes.c_char_p)]


def library() -> ctypes.CDLL:
    """call_plan.c built with the system C compiler (against jaxlib's XLA FFI headers when jax is installed, so the
    library also holds eagle.jax's handler), cached like the native executor and sealed, loaded once."""
    with _LOCK:
        if "lib" in _LIB:
            return _LIB["lib"]
        if native.library() is None:
            raise RuntimeError("a prepared run needs eagle's native executor" +
                               (f": {native.unavailable_reason()}" if native.unavailable_reason() else ""))
        lib = cbuild.load(SOURCE, "eagle-call-plan", cbuild.xla_flags(), "eagle/call_plan.c")
        for fn in ("eagle_call_plan_size", "eagle_call_stage_size"):
            getattr(lib, fn).restype = ctypes.c_int64
        lib.eagle_call_plan_init.argtypes = [ctypes.c_void_p]
        lib.eagle_call_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64]
        lib.eagle_call_run.restype = ctypes.c_int
        if lib.eagle_call_stage_size() != ctypes.sizeof(_CallStage):
            raise RuntimeError("eagle/call_plan.c's structures do not match eagle/prepared.py's")
        _LIB["lib"] = lib
        return lib


class PreparedRun:
    """Every stage of one run of `plan` for these shapes, prepared once (host target, native executor)."""

    def __init__(self, plan, shaped: dict[str, Shaped], params: dict[str, np.dtype], grid: dict,
                 passed: tuple[str, ...], order: list[str]):
        check_dtypes(plan, shaped)  # one float dtype: Plan.run would promote by a copy the operands never see
        dummy = {n: np.zeros(s.shape, s.dtype) for n, s in shaped.items()}
        dummy.update({n: 0.0 for n in params})
        b = plan.binder.bind({**dummy, **grid})
        parts = [plan.prepare(b.spec, k) for k in range(plan.kernel.stage_count)]
        cuts: dict = {}
        self.stages, results = [], {}
        # an output the caller leaves out but the body reads holds zeros (as in Plan.run), as does one written by
        # key (its unwritten positions): the framework's result buffer patched in at each call holds anything, so
        # the stage that first takes it zeroes it every launch
        zeroed = (frozenset(plan.kernel.initial_reads()) | keyed_outputs(plan)) - set(passed)
        for host_lib, launcher in parts:
            st = launcher.prepare(host_lib, b, 0, b.lanes, cuts, staged=False, zeroed=zeroed)
            if st.args.lib is None:
                raise RuntimeError(f"kernel '{plan.kernel.name}': the native executor is unavailable here "
                                   f"({native.unavailable_reason()})")
            self.stages.append(st)
            results.update(st.results)
            cuts.update(st.cells_out)
        self.name = plan.kernel.name
        self.extents = tuple(b.extents)
        self.dtype = b.dtype
        self.operands = [n for n in order if n in shaped or n in params]
        planes = {n: (b.arrays[n] if n in b.arrays else dummy[n]) for n in self.operands}
        for n in passed:  # a passed output or sink: the stage buffer the binder took for it
            planes[n] = np.asarray(results[n])
        self.rets: list[tuple[tuple[int, ...], np.dtype]] = []
        self.picks: dict[str, tuple[int, int, tuple]] = {}
        ret_bufs: list[np.ndarray] = []
        for name in sorted(results):
            a = np.asarray(results[name])
            at = native.address(a)
            owner = self._owner(at, a.nbytes)
            if owner is None:
                raise RuntimeError(f"kernel '{self.name}': result '{name}' is not a stage buffer")
            j = next((k for k, o in enumerate(ret_bufs) if native.address(o) == native.address(owner)), None)
            if j is None:
                j = len(ret_bufs)
                ret_bufs.append(owner)
                self.rets.append(((owner.size,), owner.dtype))
            self.picks[name] = (j, (at - native.address(owner)) // a.itemsize, a.shape)
        self.aliases = {self.operands.index(n): self.picks[n][0] for n in passed}
        # where each operand (then each result) lives: (stage, buffer index) pairs
        self.places: list[list[tuple[int, int]]] = []
        for t in [planes[n] for n in self.operands] + ret_bufs:
            self.places.append([(s, k) for s, st in enumerate(self.stages) for k, a in enumerate(st.args.keep)
                                if a.size and t.size and native.address(a) == native.address(t)])
        self._table = None

    def _owner(self, at: int, nbytes: int):
        for st in self.stages:
            for a in st.args.keep:
                lo = native.address(a) if a.size else -1
                if lo <= at and at + nbytes <= lo + a.nbytes:
                    return a
        return None

    def slot_table(self) -> tuple[ctypes.Array, ctypes.Array]:
        """(first, slots): the patches of operand i (then result j) are slots[first[i]:first[i + 1]], each the
        address of a stage buffer's descriptor (pointer, aligned pointer) -- what eagle/jax_ffi.c writes."""
        if self._table is None:
            slots, first = [], [0]
            for places in self.places:
                slots += [ctypes.addressof(self.stages[s].args.vals) + 40 * k for s, k in places]
                first.append(len(slots))
            self._table = ((ctypes.c_int64 * len(first))(*first), (ctypes.c_void_p * max(len(slots), 1))(*slots))
        return self._table

    # ---- the native call plan (eagle/call_plan.c) ------------------------------------------------------------
    def native_plan(self) -> int:
        """The address of this run's call_plan (built once): what eagle_call_run and the XLA handler read."""
        if getattr(self, "_address", None) is not None:
            return self._address
        lib = library()
        self._first, self._slots = self.slot_table()
        self._messages = [self._sink_messages(st) for st in self.stages]
        self._cstages = (_CallStage * len(self.stages))()
        for cs, st, msgs in zip(self._cstages, self.stages, self._messages, strict=True):
            cs.stage, cs.err = st.args.stage_address, native.address(st.err)
            cs.nchunks, cs.messages = st.err.size // 3, ctypes.addressof(msgs)
        self._kernel = self.name.encode()
        self._raw = ctypes.create_string_buffer(lib.eagle_call_plan_size())
        head = _CallPlan.from_buffer(self._raw)
        head.fire = native.function_address(native.library().eagle_fire)
        head.nstages, head.stages = len(self.stages), ctypes.addressof(self._cstages)
        head.nargs, head.nrets = len(self.operands), len(self.rets)
        head.first, head.slots, head.kernel = ctypes.addressof(self._first), ctypes.addressof(self._slots), self._kernel
        if lib.eagle_call_plan_init(ctypes.addressof(self._raw)) != 0:
            raise RuntimeError("could not set up a call plan's lock")
        self._ptr_type = ctypes.c_void_p * max(len(self.places), 1)
        self._run = lib.eagle_call_run
        self._address = ctypes.addressof(self._raw)
        return self._address

    def run_native(self, addresses: list[int]) -> None:
        """One launch, in one foreign call: the operands' then the results' data addresses swapped in, every stage
        fired; a refusal raises eagle's InputError with its message. Safe from several threads: the addresses travel
        in this call's own array, the message in this thread's buffer, and the C side runs one call of a plan at a
        time."""
        plan = self._address if getattr(self, "_address", None) is not None else self.native_plan()
        msg = getattr(_TLS, "msg", None)
        if msg is None:
            msg = _TLS.msg = ctypes.create_string_buffer(512)
        if self._run(plan, self._ptr_type(*addresses), msg, 512):
            for st in self.stages:  # the launcher's own words for what its #err buffer holds
                if st.err.any():
                    st.launcher.check_errors(st.err)
            raise InputError(msg.value.decode())

    def _sink_messages(self, st):
        """printf formats (count, first bad key) of Launcher.check_errors's message, per sink buffer index."""
        lay = st.launcher.lay
        msgs = (ctypes.c_char_p * len(lay.buffers))()
        keep = []
        for k, buf in enumerate(lay.buffers):
            if buf.role == "sink":
                ax = st.launcher.binder.sig.get(buf.name).axes[0]
                text = (f"sink '{buf.name}' of kernel '{self.name}': %lld lane(s) scattered to a key outside it "
                        f"(first bad key: %lld); valid keys on axis '{ax.label}' are 0..{ax.extent - 1}").encode()
                keep.append(text)
                msgs[k] = text
        msgs._keep = keep  # the strings live as long as the table
        return msgs

    def results(self, rets: list) -> dict:
        """The named results, sliced out of the result buffers (NumPy arrays, or any array type that slices)."""
        out = {}
        for name, (j, off, shape) in self.picks.items():
            size = int(np.prod(shape)) if shape else 1
            out[name] = rets[j].reshape(-1)[off:off + size].reshape(shape)  # (an aliased result: its operand's shape)
        return out
