"""Running compiled lane code: allocate a run's buffers from its Layout, launch, collect the results.

Pure NumPy and ctypes (no MLIR), so that loaded artifacts run where the compiler is not installed. A library
here is anything with `lanes(void**)` and `finish(void**)` callables (eagle.targets.host.HostLibrary).

A launch is one call into the native executor (eagle/native: resets, every chunk on a pool of pthreads, finish)
where it could be built, else the same steps from Python with a Python thread pool (eagle/stage.py: `Prepared`,
whose `executor` says which). A prepared stage can be rebound to another run's arrays of the same shapes
(`Prepared.rebind`), which is how Plan.run reuses its buffers and argument blocks (eagle/native/reuse.py).

Nothing lost: a launch either succeeds or leaves the caller's arrays as they were. Arrays the caller passed for
outputs and sinks are written in place, unless some check can still fail after the compiled code has written
them (a scatter's key check at run time, in this stage or a later one; any GPU launch): then the compiled code
writes scratch copies (`staged`), copied into the caller's arrays by `commit()` once every stage has run. On the
host, an output plane stored by key (`hawk.scatter(out)[k] = v`) is the exception: it is written in place and a
copy saved at launch puts it back if the run refuses (`Prepared.restore`), one copy of the array instead of two.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from eagle import native
from eagle.array import Array
from eagle.binding import Binder, Bound, physical_memory, reduced_shape
from eagle.errors import InputError
from eagle.settings import MIN_CHUNK, chosen_chunk, is_whole, min_chunk_setting
from eagle.stage import IDENT, OVERSPLIT, Prepared
from hawk.abi.exact import words as exact_words
from hawk.abi.layout import (
    ORDERED_BLOCK,
    Layout,
    compensated,
    fold_values,
    has_scan,
    keyed_values,
    rscan_values,
    scan_values,
)

COPY_BYTES = 1 << 30  # the most memory every chunk's private copies may take together (one copy always)
PRIVATE_VALUES = 1 << 20  # beyond one chunk per thread, private copies of sinks and cells stay within this
SPLIT_CHUNKS = 32  # the most chunks of a stage whose chunking ignores the thread count (Layout.fixed_chunks: a
# large sink's or a stored-and-added sink's copies): its chunks, and so its bits, are the same at every thread count
COPY_LANES = 2  # ... and each of its chunks runs at least this many lanes per value of its copies: a copy costs
# about half a random-key lane per value to reset and fold (1e7 lanes into 1e6 compensated slots: 2 chunks)
OVERSPLIT_LANES = 1 << 16  # by default, chunks beyond one per thread (stage.OVERSPLIT) only while each keeps this
# many lanes: a chunk costs a few tenths of a microsecond (its handoff, its partials, the finish's fold of them), so
# 1e5 lanes on two threads ran slower in 6 chunks than in 2 (ordered float64 sum 10.3 -> 8.8 us, auto 5.8 -> 5.4)
CELL_LANES = 16  # by default a chunk runs at least this many lanes per value of its kept cells' copies: a column
# sum's lane costs a tenth of a scatter's (1000 columns at 1e5 lanes: 2 chunks; at 64, 1 chunk took 10.7 us float64
# where 2 take 7.1, and an ordered one 19.5 where 2 take 16.5-17, once the finish took eight slots at a time)
PHYSICAL = physical_memory()
LINE = 128  # bytes of a pair of cache lines (a core fetches a line's neighbour with it): chunks' own buffers start
# on one (lined)


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
                         f"every lane (no base= or count=); it runs in {stages} stages (reading a total or a "
                         "hawk.scan splits a kernel)")
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
            stage = launcher.prepare(lib, b, lo, hi, cuts, staged=k <= late, last=k == len(runs) - 1)
        stages.append(stage)
        results.update(stage.results)
        cuts.update(stage.cells_out)
    return stages, results


MAX_DIVERTS = 64  # sinks a launch writes in place at most (executor.c MAX_DIVERTS)

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
            p = native.address(a)
            flat += (p, p, 0, a.size, 1)
        self.vals[:] = flat


def _blocked(lay: Layout) -> bool:
    """Whether a stage's chunks must start on ORDERED_BLOCK lanes: anything but plain, fast, max and min
    reductions (compensated and ordered sums over every lane run blocks of lanes, folds and scans keep per-block
    state, sinks keep their segments). Block reductions need only whole slots (their span:
    Layout.parallel_span), and so do sums that keep axes: their chunks keep pairs of their own per slot (or hold
    whole slots), and tests/test_ordered_column_tiles.py cuts column sums' chunks anywhere."""
    return bool(lay.sinks) or has_scan(lay) or \
        any(r.kind not in ("sum", "mean", "max", "min") or
            (r.kind in ("sum", "mean") and r.policy not in ("auto", "plain") and not r.kept) for r in lay.reductions)


class Launcher:
    """Runs one specialisation of a kernel: buffers in layout order, chunks, finish, results."""

    def __init__(self, binder: Binder, layout: Layout, threads: int, min_chunk: int | None = None,
                 chosen: bool | None = None):
        self.binder, self.lay, self.threads = binder, layout, threads
        self.min_chunk = min_chunk_setting(min_chunk)
        # a chunk size the caller chose (min_chunk= or $EAGLE_MIN_CHUNK) is taken as it is; the default one also
        # keeps chunks at least as long as their private copies (see chunks). `chosen`: what the plan was told,
        # when `min_chunk` is the size it resolved (a plan resolves it once: settings.chosen_chunk)
        self.chosen_chunk = chosen_chunk(min_chunk) if chosen is None else chosen
        self.copies = layout.copy_values()  # values one chunk's private copies hold (see chunks)
        self.cell_copies = layout.copy_values(cells_only=True)  # ... of them in kept cells' copies
        self.last_chunks = 0  # chunks of the latest launch prepared (what tests read to see a run split)
        self.red = {r.cell: r for r in layout.reductions}
        self.assigned: frozenset[str] = frozenset()  # per-lane outputs every lane assigns before any read of them
        # (set by a host Plan from its kernel: those a run over every lane allocates uninitialized; see buffers)
        self.meta_k = layout.buffer_index("#meta")
        self.span = layout.parallel_span()
        self.fixed = layout.fixed_chunks()  # chunks that do not depend on the thread count (see chunks)
        # chunk boundaries fall on the spans of lanes that share a kept slot, and on ordered blocks unless nothing
        # in the stage runs lanes in blocks (a row sum's 1000-lane rows: lcm(1000, 1024) lanes would be one chunk)
        self.align = 0 if self.span is None else \
            math.lcm(self.span, ORDERED_BLOCK) if _blocked(layout) else self.span
        self.err_k = layout.buffer_index("#err")
        # a slot-range stage (Layout.slot_ranges): every chunk runs every lane, each applying its own slots
        self.parts_k = layout.buffer_index("#parts") if layout.slot_ranges() else None

    def chunks(self, b: Bound, lanes: int) -> int:
        """How many chunks lanes [lo, lo + lanes) run in. A stage with Layout.fixed_chunks takes as many as its
        lanes, its copies and SPLIT_CHUNKS allow (each chunk at least COPY_LANES lanes per value its copies hold,
        whatever min_chunk; a power of two, so that 2, 4, 8... threads share them evenly), whatever the thread
        count (one thread runs them in turn); any other takes up to OVERSPLIT per thread (by default only while
        each holds OVERSPLIT_LANES lanes), one with one thread, and a multiple of the thread count when it is more
        than that."""
        if self.span is None or (self.threads == 1 and not self.fixed):
            return 1
        most = SPLIT_CHUNKS if self.fixed else self.threads * OVERSPLIT
        if not (self.fixed or self.chosen_chunk):
            most = min(most, max(self.threads, lanes // OVERSPLIT_LANES))
        copies = self.copies
        if copies:
            if not self.fixed:
                most = min(most, max(self.threads, PRIVATE_VALUES // copies))
            most = min(most, max(1, COPY_BYTES // (8 * copies)))  # all the copies together: at most COPY_BYTES
        # by default a chunk takes at least as many lanes as its private copies hold values (CELL_LANES per value
        # of a kept cell's): resetting and combining a copy would otherwise cost more than the lanes it saves
        # (a fixed chunking takes the native executor's default where the caller chose none, so a run without
        # the executor, whose Python pool wants longer chunks, splits into the same chunks and gives the same bits)
        first = MIN_CHUNK if self.fixed and not self.chosen_chunk else self.min_chunk
        least = max(first, self.aligned(b), COPY_LANES * copies if self.fixed else
                    0 if self.chosen_chunk else copies + (CELL_LANES - 1) * self.cell_copies)
        n = max(1, min(most, lanes // least))
        if self.fixed:
            return 1 << (n.bit_length() - 1)
        return n - n % self.threads if n > self.threads else n  # (7 chunks on 2 threads: one thread runs 4)

    def range_parts(self, lanes: int) -> int:
        """Chunks of a slot-range stage (hawk.abi.layout.wants_slot_ranges): one per thread, each running every
        lane (at least min_chunk lanes per chunk's share); its results have one chunk's bits whatever the count."""
        return max(1, min(self.threads, lanes // max(self.min_chunk, 1)))

    @property
    def checks_at_run_time(self) -> bool:
        """Whether the compiled code can refuse after writing: every scatter checks its keys as it runs, and so does
        a keyed scan (forward or reversed)."""
        return bool(self.lay.sinks) or any(b.role == "fold" or (b.role in ("scan", "rscan") and b.name in
                                                                self.lay.keyed) for b in self.lay.buffers) or \
            "scatter-run" in self.lay.outputs.values()  # (an empty fold; an output plane stored by computed keys)

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
                cuts: dict[str, np.ndarray] | None = None, staged: bool | None = None,
                zeroed: frozenset[str] = frozenset(), last: bool = True) -> Prepared:
        """Allocate every buffer and build the packed arguments once; `fire()` launches (again and again).
        `staged`: write scratch copies of the caller's arrays (default: when this stage checks keys as it runs;
        a multi-stage run also asks it of the stages before one that does), or, for output planes stored by key,
        write them in place and save a copy that a refusal puts back. `zeroed`: omitted outputs the body reads
        before assigning, which every launch starts at zero (the bridges patch fresh, uninitialized result
        buffers in; Plan.run's own are new zeros, and a bound launch's carry the last launch's values on).
        `last`: the run's last stage (none after it can refuse, or read a plane that shares memory with a sink
        this one writes), so a staged sink only its finish writes is written in place (Launcher.direct_sinks)."""
        hi = b.lanes if hi is None else hi
        self.binder.check_keys(self.lay, b)
        if self.parts_k is not None:  # a slot-range stage: every chunk runs lanes [lo, hi), applying its own slots
            bounds = [(lo, hi)] * self.range_parts(hi - lo)
        else:
            bounds = self.chunk_bounds(b, lo, hi)
        nchunks = self.last_chunks = len(bounds)
        staged = self.checks_at_run_time if staged is None else staged
        recipe: list[tuple] = []
        saves: list[tuple[np.ndarray, np.ndarray]] = []
        diverts: list[tuple[int, np.ndarray]] | None = [] if staged and last else None
        buffers, results, copies, resets, stage = self.buffers(b, nchunks, {} if cuts is None else cuts,
                                                               staged=staged, recipe=recipe, saves=saves,
                                                               zeroed=zeroed, alias_cells=True,
                                                               whole=lo == 0 and hi == b.lanes, diverts=diverts)
        meta = buffers[self.meta_k]
        meta[0], meta[1] = lo, hi
        if self.parts_k is not None:
            buffers[self.parts_k][0] = nchunks
        metas = None if nchunks == 1 else [np.array([start, stop, c, b.lanes, *b.extents], dtype=np.int64)
                                           for c, (start, stop) in enumerate(bounds)]
        return Prepared(self, lib, buffers, metas, nchunks, results, copies, resets, stage, recipe, fold=True,
                        saves=saves, diverts=diverts or ())

    @property
    def direct_sinks(self) -> frozenset[str]:
        """The sinks a staged launch may write in place: plain or compensated, added into only, with private
        copies (the lanes write only those; the fold and the finish write the sink), in a stage whose finish
        cannot refuse (no hawk.reduce empty-slice check) and that is not in slot ranges (whose lanes add into the
        sink). A refusal is then known before the sink is written: the launch points the sink's buffer at a
        scratch array of its size for the fold and finish (eagle/native/executor.c `diverts`), instead of
        copying every passed sink in and out at every launch (8 MB: 1.6 ms)."""
        lay = self.lay
        if self.parts_k is not None or any(b.role == "fold" for b in lay.buffers):
            return frozenset()
        return frozenset(n for n in lay.private if n in lay.sinks and n not in lay.stored
                         and lay.sink_policy.get(n) in ("plain", "compensated"))

    def check_errors(self, err: np.ndarray) -> None:
        """Raise for lanes that scattered outside a sink: err holds (count, first bad key, sink) per chunk."""
        per = err.reshape(-1, 3)
        bad = np.flatnonzero(per[:, 0])
        if bad.size:
            count, first, sink_k = int(per[:, 0].sum()), int(per[bad[0], 1]), int(per[bad[0], 2])
            sink = self.lay.buffers[sink_k].name
            if self.lay.buffers[sink_k].role == "out":  # an output plane written by key (hawk.scatter(out)[k] = v)
                raise InputError(f"plane '{sink}' of kernel '{self.binder.name}': {count} lane(s) stored by key to "
                                 f"a position outside its array (first bad key: {first}); valid positions are "
                                 "0..len-1, and -1 writes nothing")
            if self.lay.buffers[sink_k].role in ("scan", "rscan"):  # hawk.scan(x, by=key, keys=n): a key outside
                raise InputError(f"kernel '{self.binder.name}': {count} lane(s) gave a keyed hawk.scan(x, by=key, "
                                 f"keys={self.lay.keyed[sink]}) a key outside 0..{self.lay.keyed[sink] - 1} "
                                 f"(first bad key: {first}); a key of -1 leaves its lane out")
            if self.lay.buffers[sink_k].role == "fold":  # hawk.reduce: an empty slice and no identity=
                raise InputError(fold_refusal(self.binder.name, self.red[sink], count, first))
            axes = self.binder.sig.get(sink).axes
            raise InputError(f"sink '{sink}' of kernel '{self.binder.name}': {count} lane(s) scattered to a key "
                             f"outside it (first bad key: {first}); valid keys on axis '{axes[0].label}' are "
                             f"0..{axes[0].extent - 1}")

    def buffers(self, b: Bound, nchunks: int, cuts: dict[str, np.ndarray], cell_copies: int | None = None,
                staged: bool = False, pair_copies: int | None = None, recipe: list | None = None,
                no_copies: frozenset[str] = frozenset(), saves: list | None = None,
                zeroed: frozenset[str] = frozenset(), alias_cells: bool = False, whole: bool = False,
                diverts: list | None = None):
        """Every buffer in layout order, the results by name, (caller array, result) copies of given cells, what
        resets at every launch and, when `staged`, (caller array, scratch copy) pairs: the compiled code then
        writes the scratch copies of the outputs and sinks the caller passed. Kept cells with private copies get
        `cell_copies` of them (default: one per chunk), ordered ones `pair_copies` copies of their pairs (default:
        one per chunk; a GPU stage, whose threads deposit every term, none). `recipe`, when given, gets one entry
        per buffer saying where a run's buffer comes from (what `Prepared.rebind` redoes for another run).
        `no_copies`: sinks whose private copies are left empty (a GPU adding into them with float atomics).
        `saves`, when given (a host stage): a staged output plane stored by key is written in place instead and
        (caller's array, the copy each launch saves it into) goes there: a refused run, the rare case, pays for
        the copy back, instead of every run paying for a second copy (scratch in, then scratch out). `zeroed`:
        omitted outputs reset to zero at every launch (see prepare). `alias_cells` (a host stage): in one chunk, a
        kept sum's, max's or min's only copy is the cell itself (the finish sees it and leaves the cell as the
        lanes left it), which saves a copy's reset and two passes over it (a copy of 200,000 slots in one chunk:
        150 us a launch). `whole`: the run covers every lane, so an omitted output in `self.assigned` (one every
        lane assigns before reading it) starts uninitialized rather than zeroed (8 MB of zeros took 0.3-0.9 ms).
        `diverts`, when given (a staged stage, the run's last): the `direct_sinks` the caller passed are written in
        place, and (buffer index, scratch array) goes there for each."""
        bufs: list[np.ndarray] = []
        how = [] if recipe is None else recipe
        results: dict[str, Array] = {}
        copies = []
        stage: list[tuple[np.ndarray, np.ndarray]] = []  # (caller's array, the scratch copy written instead)
        resets: list[tuple[np.ndarray, float]] = []  # what starts fresh at every launch
        sig = self.binder.sig
        cells: dict[str, int] = {}  # each cell's buffer (alias_cells)
        direct = self.direct_sinks if diverts is not None else frozenset()
        for buf in self.lay.buffers:
            role, name = buf.role, buf.name
            n_before = len(bufs)
            if role == "cell":
                cells[name] = n_before
            if role in ("in", "index", "param", "table"):
                bufs.append(b.arrays[name])
                how.append(("in", name))
            elif role in ("cut", "scanoff"):  # (scanoff: a scan's block offsets an earlier stage's finish left)
                bufs.append(cuts[name])
                how.append(("cut", name))
            elif role in ("scan", "rscan"):  # a scan's block totals (rscan: a reverse scan's values per lane)
                size = scan_values(b.lanes) if role == "scan" else rscan_values(b.lanes, self.lay.comps.get(name, 1))
                if role == "scan" and name in self.lay.keyed:  # a keyed scan: rows of per-key values per block
                    size = keyed_values(b.lanes, self.lay.keyed[name])
                bufs.append(np.zeros(size, dtype=np.int64 if buf.dtype == "i64" else b.dtype))
            elif role == "cell" and name in self.lay.cells_out and name not in self.lay.outputs:
                r = self.red[name]  # internal: a total (per kept position) that only later stages read
                bufs.append(np.full(math.prod(reduced_shape(r, b, sig.lane_axes())), IDENT[r.kind], dtype=b.dtype))
                resets.append((bufs[-1], IDENT[r.kind]))
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
                    how.append(("shared", name))
                elif a is None:
                    self.check_room(name, role, shape, b)
                    bare = whole and role == "out" and name in self.assigned and name not in zeroed
                    a = (np.empty if bare else np.zeros)(shape, dtype=self.binder.out_dtype(name, b))
                    cuts[f"#run:{name}"] = a
                    if role == "sink" or name in zeroed:
                        resets.append((a, 0.0))
                    bufs.append(a.reshape(-1))
                    how.append(("fresh", name, shape, bare))
                elif staged and saves is not None and self.lay.outputs.get(name, "").startswith("scatter"):
                    saves.append((a, np.empty_like(a)))  # written in place; launch() saves it, restore() puts back
                    cuts[f"#run:{name}"] = a
                    bufs.append(a.reshape(-1))
                    how.append(("saved", name))
                elif role == "sink" and name in direct and len(diverts) < MAX_DIVERTS:
                    diverts.append((len(bufs), np.empty(a.size, a.dtype)))  # (written in place: see direct_sinks)
                    bufs.append(a.reshape(-1))
                    how.append(("given", name))
                elif staged:
                    stage.append((a, np.empty_like(a)))
                    cuts[f"#run:{name}"] = stage[-1][1]
                    bufs.append(stage[-1][1].reshape(-1))
                    how.append(("staged", name))
                else:
                    bufs.append(a.reshape(-1))
                    how.append(("given", name))
                results[name] = Array(a)
            elif role == "cell":
                r = self.red[name]
                shape = reduced_shape(r, b, sig.lane_axes())
                a = np.full(math.prod(shape), IDENT[r.kind], dtype=b.dtype)
                bufs.append(a)
                resets.append((a, IDENT[r.kind]))
                self.cell_results(name, r, a, shape, b, results, copies)
                how.append(("cell", name, shape))
            elif role == "count":
                r = self.red[name]
                bufs.append(np.zeros(math.prod(reduced_shape(r, b, sig.lane_axes())[len(r.payload):]), dtype=b.dtype))
                resets.append((bufs[-1], 0.0))
            elif role == "priv" and name not in self.lay.sinks:  # a kept cell: copies start at its identity
                r = self.red[name]
                fill = -0.0 if r.kind == "sum" and not compensated(r) else IDENT[r.kind]
                if alias_cells and nchunks == 1 and cell_copies is None and r.kind != "mean" and \
                        not compensated(r) and name in cells:  # (a mean's copy holds its counts too)
                    a = bufs[cells[name]]  # (from the identity, +0.0 for a sum: the bits of identity + a copy
                    bufs.append(a)  # from -0.0, since neither can end at -0.0 and they agree on all else)
                    how.append(("alias", name, cells[name]))
                    continue
                n = self.lay.stride(name) * (nchunks if cell_copies is None else cell_copies)
                n *= 2 if compensated(r) else 1  # ((sum, correction) pairs: their sums, then corrections)
                bufs.append(lined(n, np.float64 if buf.dtype == "f64" else b.dtype))  # (set by the reset, as a
                resets.append((bufs[-1], fill))  # sink's copies below)
            elif role == "priv":  # a sink's copies start at -0.0, the identity of IEEE addition (a slot whose
                # prior and terms are all -0.0 stays so), written by the reset before every launch (each chunk's
                # own part on its own thread): allocated untouched (calloc), they are written once, not twice
                slots = 0 if name in no_copies else self.lay.stride(name)
                if self.lay.policy_of(name) == "compensated":
                    bufs.append(lined(2 * slots * nchunks, np.float64))
                else:
                    bufs.append(lined(slots * nchunks, b.dtype))
                resets.append((bufs[-1], -0.0))
            elif role == "mark":  # which slots of its private copy a chunk stored into
                bufs.append(lined(self.lay.stride(name) * nchunks, np.int64))
                resets.append((bufs[-1], 0))
            elif role == "scratch":
                bufs.append(lined(max(self.lay.width, 1) * nchunks, np.float64))
            elif role == "exact":  # exact accumulators (hawk/exact.py): per chunk, or per slot of a sink or cell
                bufs.append(lined(max(self.exact_words(name, b.dtype, bufs, nchunks), 1), np.int64))
                if name == "#exact":  # (a sink's or cell's: zeroed here, and the finish leaves them zeroed)
                    resets.append((bufs[-1], 0))
            elif role == "pairs":  # each chunk's (high, low) float pairs of an ordered sink or kept cell: float64
                n = nchunks if pair_copies is None else pair_copies  # (an artifact of format 3 has the kernel's)
                bufs.append(lined(2 * self.lay.stride(name) * n, np.float64 if buf.dtype == "f64" else b.dtype))
                resets.append((bufs[-1], 0.0))
            elif role == "parked":  # a (high, low) float64 pair per slot of an ordered kept cell (and per count)
                bufs.append(np.zeros(max(2 * self.slot_values(name, bufs), 1), dtype=np.float64))  # (the finish
                # leaves them zeroed)
            elif role == "comp":  # compensated: (sum, correction) of the lanes' terms in float64
                target = next(a for bb, a in zip(self.lay.buffers, bufs, strict=False)
                              if bb.name == name and bb.role in ("sink", "cell"))
                fill, comp = -0.0, np.zeros(2 * target.size)  # (-0.0 by the reset, as the copies above)
                bufs.append(comp)
                resets.append((bufs[-1], fill))
            elif role == "fold":  # hawk.reduce's per-block (or per-kept-slot) flags and values, zeroed
                r = self.red[name]
                cell_values = math.prod(reduced_shape(r, b, sig.lane_axes()))
                bufs.append(np.zeros(max(fold_values(r, b.lanes, cell_values), 1), dtype=b.dtype))
                resets.append((bufs[-1], 0.0))
            elif role == "meta":
                bufs.append(np.array([0, b.lanes, 0, b.lanes, *b.extents], dtype=np.int64))
            elif role == "parts":  # a slot-range stage's ranges per sink: 1 (every slot) unless prepare says more
                bufs.append(np.ones(1, dtype=np.int64))
            elif role == "len":  # the length of an output plane written by key (its keys are checked against it)
                bufs.append(np.array([bufs[self.lay.buffer_index(name, "out")].size], dtype=np.int64))
            elif role == "err":
                bufs.append(np.zeros(3 * nchunks, dtype=np.int64))
                resets.append((bufs[-1], 0))
            else:
                raise RuntimeError(f"unknown buffer role {role!r} in the layout of '{self.lay.name}'")
            if len(how) == n_before:
                how.append(("keep",))  # internal: the same buffer serves every run of this shape
        return bufs, results, copies, resets, stage

    def exact_words(self, name: str, dtype, bufs: list[np.ndarray], nchunks: int) -> int:
        """int64 words of an "exact" buffer: every chunk's accumulators of the ordered sums over every lane
        (#exact), or one accumulator per slot of an ordered sink or kept cell (a mean's counts after its values)
        that every chunk adds into atomically, then a count of the terms the chunks' pairs could not take."""
        w = exact_words(np.dtype(dtype).name)
        if name == "#exact":
            return self.lay.exact_width(np.dtype(dtype).name) * nchunks
        return self.slot_values(name, bufs) * w + 1

    def slot_values(self, name: str, bufs: list[np.ndarray]) -> int:
        """Values of an ordered sink or kept cell (a kept mean's counts included) among the buffers made so far."""
        return sum(a.size for bb, a in zip(self.lay.buffers, bufs, strict=False)
                   if bb.name == name and bb.role in ("sink", "cell", "count"))

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


def fold_refusal(kernel: str, r, count: int, first: int) -> str:
    """The refusal of a hawk.reduce whose operator has no identity= when some slice had no lanes to fold."""
    none = "where= kept no lane" if r.masked else "there were no lanes"
    where = none if not r.kept else \
        f"{count} kept slot(s) had none to fold (the first: slot {first} along {list(r.kept)}; {none} there)"
    what = "the return value" if r.cell == "result" else f"'{r.cell}'"
    return (f"kernel '{kernel}': hawk.reduce into {what} has nothing to fold: {where}, and its operator has no "
            "identity; pass identity=<value> for empty slices, or make sure every slice gets a lane")


def lined(n: int, dtype, fill: float = 0.0) -> np.ndarray:
    """n values of dtype, all `fill`, starting on a pair of cache lines (LINE): the buffers each chunk writes its
    own part of (private copies, pairs, accumulators, chunk state; a small sink's copies lie Layout.stride
    apart). numpy's own allocations start on 16 bytes, so two chunks' copies of a 256-slot float64 histogram
    shared the line between them about three times in four, and their stores to its bins bounced it between the
    cores: 1e5 lanes on two threads took 51-57 us, one thread 52; on lines, 31-36 us."""
    dt = np.dtype(dtype)
    raw = np.zeros(n * dt.itemsize + LINE, dtype=np.uint8)  # (calloc: large zeroed buffers stay untouched pages)
    skip = -raw.ctypes.data % LINE
    out = raw[skip:skip + n * dt.itemsize].view(dt)
    if fill != 0.0 or math.copysign(1.0, fill) < 0:
        out.fill(fill)
    return out
