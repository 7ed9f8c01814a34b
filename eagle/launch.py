"""Running compiled lane code: allocate a run's buffers from its Layout, launch, collect the results.

Pure NumPy and ctypes (no MLIR), so that loaded artifacts run where the compiler is not installed. A library
here is anything with `lanes(void**)` and `finish(void**)` callables (eagle.targets.host.HostLibrary).

Nothing lost: a launch either succeeds or leaves the caller's arrays as they were. Arrays the caller passed for
outputs and sinks are written in place, unless some check can still fail after the compiled code has written
them (a scatter's key check at run time, in this stage or a later one; any GPU launch): then the compiled code
writes scratch copies (`staged`), copied into the caller's arrays by `commit()` once every stage has run.
"""

from __future__ import annotations

import ctypes
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from eagle.array import Array
from eagle.binding import Binder, Bound, physical_memory, reduced_shape
from eagle.errors import InputError
from eagle.settings import is_whole, min_chunk_setting
from hawk.exact import words as exact_words
from hawk.layout import ORDERED_BLOCK, Layout

_IDENT = {"sum": 0.0, "mean": 0.0, "max": -np.inf, "min": np.inf}
OVERSPLIT = 4  # chunks per thread: threads take chunks as they come free, so a thread slowed by other work on
# its core (another library's spinning pool, say) leaves its later chunks to the others
PRIVATE_VALUES = 1 << 20  # beyond one chunk per thread, private copies of sinks and cells stay within this
_POOL: ThreadPoolExecutor | None = None
PHYSICAL = physical_memory()


def _pool(n: int) -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None or _POOL._max_workers < n:
        _POOL = ThreadPoolExecutor(max_workers=n, thread_name_prefix="eagle")
    return _POOL


def lane_range(kernel: str, base, count, lanes: int, stages: int) -> tuple[int, int]:
    """Lanes [lo, hi) of a run given `base=` / `count=` (every lane when neither is given): whole numbers inside
    the lanes, and only for a single-stage kernel (a split one reads totals over every lane)."""
    if base is None and count is None:
        return 0, lanes
    for arg, v in (("base", base), ("count", count)):
        if v is not None and not is_whole(v):
            raise InputError(f"kernel '{kernel}': {arg}= takes a whole number of lanes, got {v!r} "
                             f"({type(v).__name__})")
    if stages > 1:
        raise InputError(f"kernel '{kernel}': this kernel reads a value reduced over every lane, so it runs over "
                         f"every lane (no base= or count=); it runs in {stages} stages")
    lo = 0 if base is None else int(base)
    hi = lanes if count is None else lo + int(count)
    if not 0 <= lo <= hi <= lanes:
        raise InputError(f"kernel '{kernel}': base={base} count={count} is outside the {lanes} lanes")
    return lo, hi


def prepare_stages(runs: list, b: Bound, lo: int, hi: int, device_stage=None) -> tuple[list, dict]:
    """Every stage of a run prepared (keys and shapes checked, buffers allocated) before any launches, so a bad
    key or a wrong-shaped plane for a late stage is refused before the first stage writes anything. `runs`: (host
    library, Launcher) per stage; `device_stage(k, cuts)`: stage k's DeviceStage on a GPU target (None on the
    host). Stages up to the last one that checks keys as it runs (every stage on a GPU) write scratch copies of
    the caller's arrays. Returns (stages, results by name)."""
    late = max((k for k, (_, launcher) in enumerate(runs) if device_stage is not None or launcher.checks_at_run_time),
               default=-1)
    stages: list = []
    results: dict = {}
    cuts: dict = {}
    for k, (lib, launcher) in enumerate(runs):
        if device_stage is not None:
            stage = device_stage(k, cuts)
        else:
            stage = launcher.prepare(lib, b, lo, hi, cuts, staged=k <= late)
        stages.append(stage)
        results.update(stage.results)
        cuts.update(stage.cells_out)
    return stages, results


def run_stages(stages: list) -> None:
    """Launch every stage of a run in order, then commit them all: a stage that refuses (a bad key found at run
    time) leaves the caller's arrays as they were, whichever stage it is."""
    for st in stages:
        st.launch()
    for st in stages:
        st.commit()


class PackedArgs:
    """The packed argument array of one call: 5 slots (ptr, ptr, offset, size, stride) per buffer, and the
    array of pointers to those slots that `_mlir_<fn>(void **)` takes."""

    def __init__(self, buffers: list[np.ndarray]):
        n = 5 * len(buffers)
        self.vals = (ctypes.c_int64 * n)()
        base = ctypes.addressof(self.vals)
        self.ptrs = (ctypes.c_void_p * n)(*range(base, base + 8 * n, 8))
        self.keep = buffers
        flat = []
        for a in buffers:
            p = _address(a)
            flat += (p, p, 0, a.size, 1)
        self.vals[:] = flat


def _address(a: np.ndarray) -> int:
    """The address of an array's first element: through the buffer protocol (~0.2 us), or `ndarray.ctypes`
    (~0.8 us) for what that refuses (read-only or empty arrays)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError, BufferError):
        return a.ctypes.data


class Launcher:
    """Runs one specialisation of a kernel: buffers in layout order, chunks, finish, results."""

    def __init__(self, binder: Binder, layout: Layout, threads: int, min_chunk: int | None = None):
        self.binder, self.lay, self.threads = binder, layout, threads
        self.min_chunk = min_chunk_setting(min_chunk)
        self.last_chunks = 0  # chunks of the latest launch prepared (what tests read to see a run split)
        self.red = {r.cell: r for r in layout.reductions}
        self.meta_k = layout.buffer_index("#meta")
        self.span = layout.parallel_span()
        # chunk boundaries fall on ordered blocks and on the spans of lanes that share a kept slot
        self.align = 0 if self.span is None else math.lcm(self.span, ORDERED_BLOCK)
        self.err_k = layout.buffer_index("#err")

    def chunks(self, b: Bound, lanes: int) -> int:
        if self.span is None or self.threads == 1:
            return 1
        most = self.threads * OVERSPLIT
        copies = self.lay.copy_values()
        if copies:
            most = min(most, max(self.threads, PRIVATE_VALUES // copies))
        return max(1, min(most, lanes // max(self.min_chunk, self.aligned(b))))

    @property
    def checks_at_run_time(self) -> bool:
        """Whether the compiled code can refuse after writing: every scatter checks its keys as it runs."""
        return bool(self.lay.sinks)

    def chunk_bounds(self, b: Bound, lo: int, hi: int) -> list[tuple[int, int]]:
        """The chunks of lanes [lo, hi): every one non-empty, every boundary inside the range aligned (so each
        ordered block, kept span and ordered scatter segment is run by one chunk, whatever the chunk count)."""
        n = self.chunks(b, hi - lo)
        if n == 1:
            return [(lo, hi)]
        align = self.aligned(b)
        step = -(-(hi - lo) // n)
        step = -(-step // align) * align
        first = (lo // align) * align  # first + step > lo: the first chunk is never empty
        cuts = [lo] + [c for c in range(first + step, hi, step)] + [hi]
        return list(zip(cuts[:-1], cuts[1:], strict=True))

    def aligned(self, b: Bound) -> int:
        """Chunk boundaries: the layout's alignment (compensated blocks, spans of lanes that share a kept slot)."""
        return self.align

    def run(self, lib, b: Bound, lo: int = 0, hi: int | None = None,
            cuts: dict[str, np.ndarray] | None = None) -> tuple[dict[str, Array], dict[str, np.ndarray]]:
        """Launch lanes [lo, hi) of a one-stage run: the results by name, and the internal cells it wrote."""
        p = self.prepare(lib, b, lo, hi, cuts)
        p.fire()
        return p.results, p.cells_out

    def prepare(self, lib, b: Bound, lo: int = 0, hi: int | None = None,
                cuts: dict[str, np.ndarray] | None = None, staged: bool | None = None) -> Prepared:
        """Allocate every buffer and build the packed arguments once; `fire()` launches (again and again).
        `staged`: write scratch copies of the caller's arrays (default: when this stage checks keys as it runs;
        a multi-stage run also asks it of the stages before one that does)."""
        hi = b.lanes if hi is None else hi
        self.binder.check_keys(self.lay, b)
        bounds = self.chunk_bounds(b, lo, hi)
        nchunks = self.last_chunks = len(bounds)
        staged = self.checks_at_run_time if staged is None else staged
        buffers, results, copies, resets, stage = self.buffers(b, nchunks, {} if cuts is None else cuts,
                                                               staged=staged)
        meta = buffers[self.meta_k]
        meta[0], meta[1] = lo, hi
        calls = [PackedArgs(buffers)] if nchunks == 1 else self.chunk_args(b, buffers, bounds)
        finish = calls[0] if nchunks == 1 else PackedArgs(buffers)
        out_cells = {c: buffers[self.lay.buffer_index(c, "cell")] for c in self.lay.cells_out}
        return Prepared(self, lib, buffers, calls, finish, nchunks, results, copies, resets, out_cells, stage)

    def check_errors(self, err: np.ndarray) -> None:
        """Raise for lanes that scattered outside a sink: err holds (count, first bad key, sink) per chunk."""
        per = err.reshape(-1, 3)
        bad = np.flatnonzero(per[:, 0])
        if bad.size:
            count, first, sink_k = int(per[:, 0].sum()), int(per[bad[0], 1]), int(per[bad[0], 2])
            sink = self.lay.buffers[sink_k].name
            axes = self.binder.sig.get(sink).axes
            raise InputError(f"sink '{sink}' of kernel '{self.binder.name}': {count} lane(s) scattered to a key "
                             f"outside it (first bad key: {first}); valid keys on axis '{axes[0].label}' are "
                             f"0..{axes[0].extent - 1}")

    def buffers(self, b: Bound, nchunks: int, cuts: dict[str, np.ndarray], cell_copies: int | None = None,
                staged: bool = False, pair_copies: int | None = None):
        """Every buffer in layout order, the results by name, (caller array, result) copies of given cells, what
        resets at every launch and, when `staged`, (caller array, scratch copy) pairs: the compiled code then
        writes the scratch copies of the outputs and sinks the caller passed. Kept cells with private copies get
        `cell_copies` of them (default: one per chunk), ordered ones `pair_copies` copies of their pairs (default:
        one per chunk; a GPU stage, whose threads deposit every term, none)."""
        bufs: list[np.ndarray] = []
        results: dict[str, Array] = {}
        copies = []
        stage: list[tuple[np.ndarray, np.ndarray]] = []  # (caller's array, the scratch copy written instead)
        resets: list[tuple[np.ndarray, float]] = []  # what starts fresh at every launch
        sig = self.binder.sig
        for buf in self.lay.buffers:
            role, name = buf.role, buf.name
            if role in ("in", "index", "param", "table"):
                bufs.append(b.arrays[name])
            elif role == "cut":
                bufs.append(cuts[name])
            elif role == "cell" and name in self.lay.cells_out and name not in self.lay.outputs:
                r = self.red[name]  # internal: a total (per kept position) that only later stages read
                bufs.append(np.full(math.prod(reduced_shape(r, b, sig.lane_axes())), _IDENT[r.kind], dtype=b.dtype))
                resets.append((bufs[-1], _IDENT[r.kind]))
            elif role in ("out", "sink"):
                shape = self.binder.output_shape(name, self.lay, b)
                p = sig.get(name)
                alt = None
                if p is not None and p.kind == "output" and len(p.payload.shape) == 2:
                    alt = (math.prod(p.payload.shape), *b.extents)
                a = self.binder.given_buffer(name, shape, b, alt)
                shared = cuts.get(f"#run:{name}")  # what an earlier stage of this run writes it into: add to that
                if shared is not None:  # (the earlier stage resets or stages and commits it)
                    a = shared if a is None else a
                    bufs.append(shared.reshape(-1))
                elif a is None:
                    self.check_room(name, role, shape, b)
                    a = cuts[f"#run:{name}"] = np.zeros(shape, dtype=b.dtype)
                    if role == "sink":
                        resets.append((a, 0.0))
                    bufs.append(a.reshape(-1))
                elif staged:
                    stage.append((a, np.empty_like(a)))
                    cuts[f"#run:{name}"] = stage[-1][1]
                    bufs.append(stage[-1][1].reshape(-1))
                else:
                    bufs.append(a.reshape(-1))
                results[name] = Array(a)
            elif role == "cell":
                r = self.red[name]
                shape = reduced_shape(r, b, sig.lane_axes())
                a = np.full(math.prod(shape), _IDENT[r.kind], dtype=b.dtype)
                bufs.append(a)
                resets.append((a, _IDENT[r.kind]))
                self.cell_results(name, r, a, shape, b, results, copies)
            elif role == "count":
                r = self.red[name]
                bufs.append(np.zeros(math.prod(reduced_shape(r, b, sig.lane_axes())[len(r.payload):]), dtype=b.dtype))
                resets.append((bufs[-1], 0.0))
            elif role == "priv" and name not in self.lay.sinks:  # a kept cell: copies start at its identity
                r = self.red[name]
                fill = -0.0 if r.kind == "sum" else _IDENT[r.kind]
                n = self.lay.private[name] * (nchunks if cell_copies is None else cell_copies)
                bufs.append(np.full(n, fill, dtype=b.dtype))
                resets.append((bufs[-1], fill))
            elif role == "priv":
                slots = self.lay.private[name]
                if self.lay.policy_of(name) == "compensated":
                    bufs.append(np.zeros(2 * slots * nchunks, dtype=np.float64))
                else:
                    bufs.append(np.zeros(slots * nchunks, dtype=b.dtype))
                resets.append((bufs[-1], 0.0))
            elif role == "mark":  # which slots of its private copy a chunk stored into
                bufs.append(np.zeros(self.lay.private[name] * nchunks, dtype=np.int64))
                resets.append((bufs[-1], 0))
            elif role == "scratch":
                bufs.append(np.zeros(max(self.lay.width, 1) * nchunks, dtype=np.float64))
            elif role == "exact":  # exact accumulators (hawk/exact.py): per chunk, or per slot of a sink or cell
                bufs.append(np.zeros(max(self.exact_words(name, b.dtype, bufs, nchunks), 1), dtype=np.int64))
                if name == "#exact":  # (a sink's or cell's: zeroed here, and the finish leaves them zeroed)
                    resets.append((bufs[-1], 0))
            elif role == "pairs":  # each chunk's (high, low) float pairs of an ordered sink or kept cell
                n = nchunks if pair_copies is None else pair_copies
                bufs.append(np.zeros(2 * self.lay.private[name] * n, dtype=b.dtype))
                resets.append((bufs[-1], 0.0))
            elif role == "comp":  # compensated: (sum, correction) of the lanes' terms in float64
                target = next(a for bb, a in zip(self.lay.buffers, bufs, strict=False)
                              if bb.name == name and bb.role in ("sink", "cell"))
                fill, comp = 0.0, np.zeros(2 * target.size, dtype=np.float64)
                bufs.append(comp)
                resets.append((bufs[-1], fill))
            elif role == "meta":
                bufs.append(np.array([0, b.lanes, 0, b.lanes, *b.extents], dtype=np.int64))
            elif role == "err":
                bufs.append(np.zeros(3 * nchunks, dtype=np.int64))
                resets.append((bufs[-1], 0))
            else:
                raise RuntimeError(f"unknown buffer role {role!r} in the layout of '{self.lay.name}'")
        return bufs, results, copies, resets, stage

    def exact_words(self, name: str, dtype, bufs: list[np.ndarray], nchunks: int) -> int:
        """int64 words of an "exact" buffer: every chunk's accumulators of the ordered sums over every lane
        (#exact), or one accumulator per slot of an ordered sink or kept cell (a mean's counts after its values)
        that every chunk adds into atomically, then a count of the terms the chunks' pairs could not take."""
        w = exact_words(np.dtype(dtype).name)
        if name == "#exact":
            return self.lay.exact_width(np.dtype(dtype).name) * nchunks
        slots = sum(a.size for bb, a in zip(self.lay.buffers, bufs, strict=False)
                    if bb.name == name and bb.role in ("sink", "cell", "count"))
        return slots * w + 1

    def check_room(self, name: str, role: str, shape: tuple[int, ...], b: Bound) -> None:
        """Refuse, naming the plane, an output or sink the run would allocate beyond the machine's memory (a sink's
        size is fixed by its declaration and its payload, not by the lanes the binder checks), instead of NumPy's
        bare MemoryError."""
        need = math.prod(shape) * b.dtype.itemsize
        if PHYSICAL is not None and need > PHYSICAL:
            what = "sink" if role == "sink" else "output"
            raise InputError(f"{what} '{name}' of kernel '{self.binder.name}': shaped {shape}, it would need {need} "
                             f"bytes ({need / 2**30:.1f} GiB) but this machine has {PHYSICAL} bytes "
                             f"({PHYSICAL / 2**30:.1f} GiB) of memory: declare fewer slots")

    def cell_results(self, name, r, a, shape, b: Bound, results, copies):
        given = b.given.get(name)
        if name == "result" or not r.payload:
            out = a.reshape(shape if shape else (1,))
            results[name] = Array(out)
        else:
            per = a.reshape(math.prod(r.payload), -1)
            kept = shape[len(r.payload):]
            for k in range(per.shape[0]):
                results[f"{name}_{k}"] = Array(per[k].reshape(kept if kept else (1,)))
            out = a.reshape(shape)
        if given is not None:
            if given.dtype != b.dtype or given.size != a.size or not given.flags.c_contiguous:
                raise InputError(f"plane '{name}' of kernel '{self.binder.name}': the cell is written in place and "
                                 f"must be a C-contiguous {b.dtype} array of {a.size} element(s), got "
                                 f"{given.dtype} {given.shape}")
            copies.append((given, out))

    def chunk_args(self, b: Bound, buffers, bounds: list[tuple[int, int]]) -> list[PackedArgs]:
        """One call per chunk: the same buffers, with a meta of its own ([start, stop, chunk, L, extents...])."""
        calls = []
        for c, (start, stop) in enumerate(bounds):
            bufs = list(buffers)
            bufs[self.meta_k] = np.array([start, stop, c, b.lanes, *b.extents], dtype=np.int64)
            calls.append(PackedArgs(bufs))
        return calls


def commit(copies, staged) -> None:
    """Hand a stage's results to the caller's arrays: given cells, then the scratch copies of staged arrays."""
    for dst, src in copies:
        np.copyto(dst, src.reshape(dst.shape))
    for dst, src in staged:
        np.copyto(dst, src)


class Prepared:
    """One stage of one run with every buffer allocated: `fire()` = `launch()` (reset what must start fresh,
    run the chunks, finish, check) then `commit()` (write the caller's cells and staged arrays). `nchunks`: the
    chunks each launch runs."""

    def __init__(self, launcher: Launcher, lib, buffers, calls, finish, nchunks, results, copies, resets,
                 cells_out, staged=()):
        self.launcher, self.lib, self.buffers = launcher, lib, buffers
        self.calls, self.finish_args, self.nchunks = calls, finish, nchunks
        self.results, self.copies, self.resets, self.cells_out = results, copies, resets, cells_out
        self.staged = list(staged)
        self.meta = buffers[launcher.meta_k]
        self.err = buffers[launcher.err_k]

    def fire(self) -> None:
        self.launch()
        self.commit()

    def commit(self) -> None:
        commit(self.copies, self.staged)

    def launch(self) -> None:
        for dst, src in self.staged:  # the scratch copies start from what the caller's arrays hold now
            np.copyto(src, dst)
        for a, fill in self.resets:
            a.fill(fill)
        lanes = self.lib.lanes
        if self.nchunks == 1:
            self.meta[2] = 0
            lanes(self.calls[0].ptrs)
        else:  # the calling thread and the pool's take the chunks as they come free (the order of the partials,
            # and so the results, do not depend on which thread ran which chunk)
            todo = iter(self.calls)

            def work():
                for a in todo:
                    lanes(a.ptrs)

            workers = min(self.launcher.threads, self.nchunks)
            futures = [_pool(workers).submit(work) for _ in range(workers - 1)]
            work()
            for f in futures:
                f.result()
        self.meta[2] = self.nchunks
        self.lib.finish(self.finish_args.ptrs)
        if self.err.any():
            self.launcher.check_errors(self.err)
