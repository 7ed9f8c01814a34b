"""The native stage executor: a host stage launch in one foreign call (executor.c), and the argument block it runs.

`library()` builds executor.c with the system C compiler into hawk's disk cache (keyed by the source's hash, the
compiler and the machine; sealed and checked like every cache entry) and loads it with ctypes; a run then costs
one ctypes call per stage (the GIL released) that resets buffers, runs every chunk on a persistent pool of
pthreads plus the calling thread, waits and finishes. Where no C compiler is found or the build fails, eagle
runs stages as before (a Python thread pool) and says why once, in a debug-level log ("eagle.native").

Why a small pool of our own and not OpenMP in the compiled code (`convert-scf-to-openmp`): the C compiler is
already required (scripts/setup.sh installs it to link kernels), while OpenMP would add libomp to every machine
that runs an artifact and change the artifacts' ABI (their packed `lanes`/`finish` functions stay as they are
here, so artifacts built before run unchanged). Chunking stays in Python, a fixed function of the lane count and
the settings, so an ordered sum's bits never depend on the thread count or on which thread ran a chunk.

`StageArgs` is one stage's argument block, shared by both executors: every buffer's descriptor once (5 int64
slots), each chunk's packed pointer array pointing at those slots (and at a meta of its own), the resets, the
staged copies and the stage struct executor.c reads. Replacing a buffer is two stores (`set_buffer`).
"""

from __future__ import annotations

import ctypes
import sys
import threading
from pathlib import Path

import numpy as np

from eagle.native import cbuild
from eagle.settings import native_setting

SOURCE = Path(__file__).with_name("executor.c")
_LOCK = threading.Lock()
_STATE: dict = {}  # "lib": the loaded library or None, "why": why not
FIRES = [0]  # native launches so far in this process (tests read it to see the native path taken)


class Reset(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_int64), ("kind", ctypes.c_int64), ("bytes", ctypes.c_int64),
                ("value", ctypes.c_double), ("split", ctypes.c_int64), ("clean", ctypes.c_int64)]


class Copy(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_int64), ("src", ctypes.c_void_p), ("bytes", ctypes.c_int64)]


class Fold(ctypes.Structure):
    """executor.c's eagle_fold: what to fold, and (written by each launch) how it went: `skip`/`failed` (an
    ordered sink left to the compiled finish: a term spilled / a slot's pair lost a bit), `parts` and `threads`
    (the ranges of slots run, the threads that ran them)."""
    _fields_ = [("priv", ctypes.c_int64), ("target", ctypes.c_int64), ("kind", ctypes.c_int64),
                ("slots", ctypes.c_int64), ("exact", ctypes.c_int64), ("lost", ctypes.c_void_p),
                ("skip", ctypes.c_int64), ("failed", ctypes.c_int64), ("parts", ctypes.c_int64),
                ("threads", ctypes.c_int64), ("refill", ctypes.c_int64), ("keys", ctypes.c_int64),
                ("key_bytes", ctypes.c_int64), ("sink", ctypes.c_int64), ("sink_bytes", ctypes.c_int64),
                ("comp_refill", ctypes.c_int64), ("sparse", ctypes.c_int64), ("direct", ctypes.c_int64)]


def _fold(priv: int, target: int, kind: int, slots: int, exact: int = -1, lost: np.ndarray | None = None,
          keys: int = -1, sink: int = -1) -> Fold:
    return Fold(priv, target, kind, slots, exact, 0 if lost is None else address(lost), keys=keys, sink=sink)


class Stage(ctypes.Structure):
    _fields_ = [("lanes", ctypes.c_void_p), ("finish", ctypes.c_void_p), ("vals", ctypes.c_void_p),
                ("chunk_args", ctypes.c_void_p), ("finish_args", ctypes.c_void_p), ("nchunks", ctypes.c_int64),
                ("threads", ctypes.c_int64), ("resets", ctypes.c_void_p), ("nresets", ctypes.c_int64),
                ("copies", ctypes.c_void_p), ("ncopies", ctypes.c_int64), ("meta_buf", ctypes.c_int64),
                ("err_buf", ctypes.c_int64), ("folds", ctypes.c_void_p), ("nfolds", ctypes.c_int64),
                ("nparts", ctypes.c_int64), ("copy_back", ctypes.c_int64), ("diverts", ctypes.c_void_p),
                ("ndiverts", ctypes.c_int64)]


def _compiler() -> str | None:
    return cbuild.compiler()


def _load_or_build() -> ctypes.CDLL:
    lib = cbuild.load(SOURCE, "eagle-native", ["-ffp-contract=off"], "eagle/native/executor.c")
    try:
        return _bind(lib)
    except AttributeError as exc:
        raise RuntimeError(f"eagle/native/executor.c lacks {exc}") from None


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.eagle_fire.argtypes = [ctypes.c_void_p]
    lib.eagle_fire.restype = ctypes.c_int
    lib.eagle_pool_size.argtypes = []
    lib.eagle_pool_size.restype = ctypes.c_int
    lib.eagle_set_dealt.argtypes = [ctypes.c_int]
    lib.eagle_set_dealt.restype = ctypes.c_int
    lib.eagle_call_ieee.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.eagle_call_ieee.restype = None
    return lib


def library() -> ctypes.CDLL | None:
    """The native executor, built and loaded once per process; None when it is turned off ($EAGLE_NATIVE=0) or
    cannot be built here (the reason: `unavailable_reason()`, logged once at debug level)."""
    lib = _STATE.get("lib", False)
    if lib is not False:
        return lib
    with _LOCK:
        if "lib" not in _STATE:
            if not native_setting():
                _STATE["lib"], _STATE["why"] = None, "turned off by $EAGLE_NATIVE"
            else:
                try:
                    _STATE["lib"], _STATE["why"] = _load_or_build(), None
                except (OSError, RuntimeError, AttributeError) as exc:
                    _STATE["lib"], _STATE["why"] = None, str(exc)
            if _STATE["lib"] is None:
                import logging  # (here: importing logging costs a warm start about 4 ms)

                logging.getLogger("eagle.native").debug(
                    "eagle runs host stages on a Python thread pool: the native executor is unavailable (%s)",
                    _STATE["why"])
        return _STATE["lib"]


def call_ieee(entry, args) -> None:
    """Call a compiled entry (a ctypes function of one pointer) on `args` with IEEE subnormals and round to nearest,
    whatever the calling thread's mode (executor.c, fp_ieee; without the native executor, eagle.fpenv.ieee)."""
    lib = library()
    if lib is None:
        from eagle import fpenv

        with fpenv.ieee():
            entry(args)
    else:
        lib.eagle_call_ieee(ctypes.cast(entry, ctypes.c_void_p), ctypes.cast(args, ctypes.c_void_p))


def unavailable_reason() -> str | None:
    """Why `library()` is None (None when it loaded, or was not asked for yet)."""
    return _STATE.get("why")


def pool_size() -> int:
    """Threads of the native pool started so far (0 without the native executor)."""
    lib = library()
    return 0 if lib is None else lib.eagle_pool_size()


def deal_tasks(on: bool) -> bool:
    """For tests: with `on`, every phase of a launch (its chunks, the ranges of a fold) is dealt out to the calling
    thread and each pool thread the launch asks for, task k to the (k mod P)-th of those P, so each of them really
    runs a share (the caller waits for a worker that wakes late); off (the default), threads claim tasks as they
    come, and on a loaded machine a late worker may find none left. Never changes a result. Returns the previous
    setting (False without the native executor)."""
    lib = library()
    return False if lib is None else bool(lib.eagle_set_dealt(int(on)))


def _data_field() -> int | None:
    """Where an ndarray object keeps the address of its first element, for `address` to read: NumPy's C struct
    (PyArrayObject) starts with the object header, then `char *data`. Checked here against `ndarray.ctypes` on a
    few arrays (a view at an offset, an empty one, a read-only one); None where that does not hold or `id` is no
    address (not CPython): `address` then asks the buffer protocol."""
    if sys.implementation.name != "cpython":
        return None
    at = object.__basicsize__
    ro = np.arange(4.0)
    ro.flags.writeable = False
    probes = [np.zeros(3), np.arange(10.0)[3:], np.arange(6.0).reshape(2, 3)[1], np.empty(0), ro]
    if all((ctypes.c_void_p.from_address(id(a) + at).value or 0) == a.ctypes.data for a in probes):
        return at
    return None


_DATA_AT = _data_field()


def address(a: np.ndarray, _at=_DATA_AT, _read=ctypes.c_void_p.from_address, _nd=np.ndarray) -> int:
    """The address of an array's first element: read from the array object itself (~0.25 us; `_data_field`),
    else through the buffer protocol (~0.5 us), or `ndarray.ctypes` (~1 us) for what that refuses (read-only or
    empty arrays). Plan.run asks it for every input and result of every reused run."""
    if _at is not None and type(a) is _nd:
        return _read(id(a) + _at).value or 0
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError, BufferError):
        return a.ctypes.data


def function_address(fn) -> int:
    """The raw address of a ctypes foreign function (a library's `lanes` or `finish`)."""
    return ctypes.cast(fn, ctypes.c_void_p).value


class StageArgs:
    """One stage's arguments for `nchunks` chunks: `buffers` in layout order (flat), chunk c's meta
    `metas[c]` ([start, stop, c, L, extents...]; None for a single chunk, which reads buffer `meta_k`),
    `resets` ((buffer index, fill) pairs; those in `split`, a copy per chunk laid out chunk by chunk, are reset by
    each chunk, its own part just before its lanes), `folds` ((copies, sink or companion, kind, slots, exact
    accumulators, lost flags), eagle/native/folds.py: a large sink's copies or an ordered sink's pairs,
    folded in chunk order by `nparts` ranges of slots in parallel before the finish, which then finds none;
    executor.c) and `copies` ((buffer index, caller's array) pairs: the
    scratch copy in that buffer starts from the caller's array). `chunk_ptrs[c]` / `finish_ptrs`: what
    `_mlir_<fn>(void **)` takes; `fire()` runs a launch natively (see executor.c) and returns whether #err holds
    a refusal."""

    def __init__(self, lib, buffers: list[np.ndarray], metas: list | None, meta_k: int, err_k: int,
                 resets: list[tuple[int, float]], copies: list[tuple[int, np.ndarray]], threads: int,
                 split: frozenset[int] = frozenset(), folds: tuple = (), nparts: int = 1, diverts=()):
        n = len(buffers)
        self.keep = list(buffers)  # the arrays whose addresses the slots hold
        self.vals = (ctypes.c_int64 * (5 * n))()
        base = ctypes.addressof(self.vals)
        for k, a in enumerate(buffers):
            self.set_buffer(k, a)
            self.vals[5 * k + 3], self.vals[5 * k + 4] = a.size, 1
        self.finish_ptrs = (ctypes.c_void_p * (5 * n))(*range(base, base + 40 * n, 8))
        self.metas, self.meta_vals, self.chunk_ptrs = metas or [], [], []
        for m in self.metas:  # each chunk: the shared slots, but a meta of its own
            mv = (ctypes.c_int64 * 5)(address(m), address(m), 0, m.size, 1)
            ptrs = (ctypes.c_void_p * (5 * n))(*range(base, base + 40 * n, 8))
            mb = ctypes.addressof(mv)
            ptrs[5 * meta_k:5 * meta_k + 5] = list(range(mb, mb + 40, 8))
            self.meta_vals.append(mv)
            self.chunk_ptrs.append(ptrs)
        if not self.chunk_ptrs:
            self.chunk_ptrs = [self.finish_ptrs]
        nchunks = len(self.chunk_ptrs)
        self.chunk_table = (ctypes.c_void_p * nchunks)(*(ctypes.addressof(p) for p in self.chunk_ptrs))
        self.resets, self.nresets = (Reset * max(len(resets), 1))(), len(resets)
        for r, (k, fill) in zip(self.resets, resets, strict=False):
            a = buffers[k]
            zero = fill == 0 and not np.signbit(fill)
            r.buf, r.bytes, r.value, r.split = k, a.itemsize, float(fill), int(k in split)
            r.kind = 0 if zero else 1 if a.dtype == np.float64 else 2
            if not zero and a.dtype not in (np.float64, np.float32):
                raise RuntimeError(f"internal error: buffer {k} ({a.dtype}) resets to {fill}, which only float "
                                   "buffers take")
        self.copies = (Copy * max(len(copies), 1))()
        self.copy_src = []
        for j, (k, src) in enumerate(copies):
            self.copies[j].buf, self.copies[j].bytes = k, src.nbytes
            self.set_copy(j, src)
        self.diverts = (Copy * max(len(diverts), 1))()  # (buffer, scratch): where a refused launch's fold and
        self.divert_keep = [a for _, a in diverts]  # finish write a sink that is written in place
        for j, (k, a) in enumerate(diverts):
            self.diverts[j].buf, self.diverts[j].src, self.diverts[j].bytes = k, address(a), a.nbytes
        self.lib = lib
        self.fold_plan = list(folds)  # (keeps each fold's `lost` flags alive)
        self.folds = (Fold * max(len(folds), 1))(*(_fold(*f) for f in folds))
        reset_of = {k: j for j, (k, _) in enumerate(resets)}
        for f in self.folds[:len(folds)]:  # (a copies' fold sets them back to their fill as it reads them)
            f.refill = reset_of.get(f.priv, -1) if f.kind <= 2 else -1
            f.key_bytes = buffers[f.keys].itemsize if f.keys >= 0 else 0
            f.sink_bytes = buffers[f.sink].itemsize if f.sink >= 0 else 0
            f.comp_refill = reset_of.get(f.target, -1) if f.kind == 2 else -1
        self.stage = Stage(0, 0, base, ctypes.addressof(self.chunk_table), ctypes.addressof(self.finish_ptrs),
                           nchunks, threads, ctypes.addressof(self.resets), len(resets),
                           ctypes.addressof(self.copies), len(copies), meta_k, err_k,
                           ctypes.addressof(self.folds), len(folds), max(1, nparts), 0,
                           ctypes.addressof(self.diverts), len(diverts))
        self.stage_address = ctypes.addressof(self.stage)
        if lib is not None:  # what `fire` passes, made once: a c_void_p goes through ctypes faster than an int
            self._fire, self._stage_arg = lib.eagle_fire, ctypes.c_void_p(self.stage_address)

    def functions(self, lanes, finish) -> None:
        """The compiled lanes and finish functions the native launch calls (ctypes foreign functions)."""
        self.stage.lanes, self.stage.finish = function_address(lanes), function_address(finish)

    def set_buffer(self, k: int, a: np.ndarray) -> None:
        """Buffer k is now `a` (flat, C-contiguous, of the size buffer k had when the block was built)."""
        v = self.vals
        v[5 * k] = v[5 * k + 1] = address(a)
        self.keep[k] = a

    def set_copy(self, j: int, src: np.ndarray) -> None:
        """Staged copy j now starts from the caller's array `src` (C-contiguous, of the same size)."""
        self.copies[j].src = address(src)
        if j < len(self.copy_src):
            self.copy_src[j] = src
        else:
            self.copy_src.append(src)

    def fold_report(self) -> list[dict]:
        """How the latest native launch's folds went, per fold: kind, parts (ranges of slots) and threads that
        ran, for an ordered sink whether it was left to the compiled finish (skip: a term spilled; failed: a
        slot's pair lost a bit), whether the fold set the copies back to their fill as it read them, whether it
        was keyed (sparse: a run of few lanes folded only the slots its keys name), and whether a compensated
        sink's one copy was finished straight into the sink (direct: the companion left at its fill)."""
        return [{"kind": f.kind, "slots": f.slots, "parts": f.parts, "threads": f.threads, "skip": bool(f.skip),
                 "failed": bool(f.failed), "refilled": f.refill >= 0, "sparse": bool(f.sparse),
                 "direct": bool(f.direct)}
                for f in self.folds[:len(self.fold_plan)]]

    def clean(self) -> list[int]:
        """The buffers the latest native launch's folds left holding their fill (the next launch skips their
        reset: executor.c fold_range)."""
        return [r.buf for r in self.resets[:self.nresets] if r.clean]

    def fire(self) -> bool:
        FIRES[0] += 1
        return self._fire(self._stage_arg) != 0
