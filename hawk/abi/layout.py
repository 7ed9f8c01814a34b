"""A kernel's layout: the contract between its compiled code and the runtime, with no MLIR in it.

`Layout` says which buffers the compiled lane function takes, in which order and with which element type, and
what the reductions and sinks are. It round-trips through JSON, which is how an artifact's sidecar carries it
to a machine that has only NumPy and the target's runtime.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field

from hawk.abi.exact import words as exact_words
from hawk.abi.signature import Signature


@dataclass(frozen=True)
class Spec:
    """One specialisation: the float dtype, the integer dtype of each Index plane, and what policy="auto"
    means for a sum over lanes ("fast", or "ordered" for artifacts, whose partials the host adds exactly: the
    exact sum rounded once, docs/ordered.md). `float_outputs`: the per-lane float outputs whose array has another
    float dtype than the run's (the store converts into it, docs/semantics.md); empty for every other run.
    `copy_slots`: the largest sink that keeps private copies (0: PAIR_SLOTS; $HAWK_COPY_SLOTS lowers it so that
    tests reach the slot-range form with small sinks: it is in repr(spec), hence in every cache key, and in the
    hawk IR's facts).
    `cell_slots`: the largest reduction keeping axes with a copy per chunk (0: PRIVATE_SLOTS; a host plan's
    specs say CELL_SLOTS, since a GPU runs a thread per kept slot instead of a few threads with large copies).
    `mxcsr`: the code runs on x86-64 with AVX and FMA (a host plan's or native artifact's built there), whose
    MXCSR's sticky inexact flag the ordered sums over every lane and along rows may read to prove a block exact,
    float64 terms cut on a grid (hawk/passes/lower/flag_chains.py).
    `sae`: the code runs on an x86-64 CPU with AVX-512F (a host plan's or native artifact's on such a machine):
    ordered chains may round without raising MXCSR's inexact flag and read the flag to prove a block exact
    (hawk/passes/lower/flag_chains.py). `fma_pipes`: the code runs on an x86-64 CPU whose FMAs have pipes of their
    own beside two adders (AMD Zen): the compensated chains' TwoSums write three of their subtractions as FMAs
    (hawk/passes/lower/reduce_full.py), the same bits."""

    float_dtype: str
    index_dtypes: tuple[tuple[str, str], ...]
    auto_sum: str = "fast"
    float_outputs: tuple[tuple[str, str], ...] = ()
    copy_slots: int = 0
    cell_slots: int = 0
    sae: bool = False
    fma_pipes: bool = False
    mxcsr: bool = False


@dataclass(frozen=True)
class Reduction:
    kind: str  # sum | mean | max | min | fold (hawk.reduce with an operator of the user's: hawk/passes/lower/folds.py)
    over: tuple[str, ...]  # reduced lane axes
    kept: tuple[str, ...]  # kept lane axes, in grid order
    policy: str
    payload: tuple[int, ...]
    cell: str  # the output it lands in ('result' for a return)
    masked: bool


@dataclass(frozen=True)
class Buffer:
    """One argument of the compiled lane function."""

    name: str
    role: str  # in | index | param | table | out | len | cell | count | sink | scan | scanoff | scratch | meta | err
    # (len: the length of an output written by key, one int64, after its out buffer)
    dtype: str  # 'f' (the kernel's float), 'f32' or 'f64' (a float output of its own dtype), 'i8' ... 'i64'


@dataclass
class Layout:
    name: str
    sig: Signature
    outputs: dict[str, str]  # output name -> 'lane' | 'cell'
    reductions: list[Reduction]
    sinks: dict[str, tuple[int, ...]]  # sink -> payload shape of what is scattered into it
    index_keys: dict[str, list[tuple[str, int]]]  # Index plane used directly as a key -> (sink, key position)
    sink_policy: dict[str, str] = field(default_factory=dict)  # sink -> plain | compensated | ordered
    buffers: list[Buffer] = field(default_factory=list)
    cells_in: list[str] = field(default_factory=list)  # internal cells an earlier stage wrote (split kernels)
    cells_out: list[str] = field(default_factory=list)  # internal cells this stage writes for a later one
    private: dict[str, int] = field(default_factory=dict)  # sink or kept cell -> slots of each chunk's own copy
    stored: list[str] = field(default_factory=list)  # sinks some scatter stores into with =
    mixed: list[str] = field(default_factory=list)  # stored sinks that some scatter also adds into with +=
    blocks: list[tuple[int, str, str]] = field(default_factory=list)  # block reductions: (span, kind, policy)
    keyed: dict[str, int] = field(default_factory=dict)  # a keyed scan's cell -> its keys (keyed_values)
    comps: dict[str, int] = field(default_factory=dict)  # a func scan's cell -> components per lane (rscan_values)
    line_pad: bool = False  # sinks' copies lie `stride` values apart (False: layouts made before 2026-12-05)
    fold_keys: dict[str, str] = field(default_factory=dict)  # a sink (one key axis) every scatter adds into at a
    # key straight from this one Index plane: only the slots the run's keys name can differ from their fill in
    # its copies, so a run of few lanes folds those alone (eagle/native/folds.py, executor.c keyed_fold)

    @property
    def block_span(self) -> int:
        """Lanes that hold whole kept slots of every block reduction (their spans' lcm; 0: none)."""
        return math.lcm(*(b[0] for b in self.blocks)) if self.blocks else 0

    @property
    def width(self) -> int:
        """Partials one chunk writes for the reductions over every lane (see chunk_slots)."""
        return sum(chunk_slots(r) for r in self.reductions if not r.kept)

    @property
    def exact_components(self) -> int:
        """Components of the ordered sums over every lane (each keeps an exact accumulator per chunk)."""
        return sum(_size(r.payload) for r in self.reductions if not r.kept and ordered(r))

    def exact_width(self, dtype: str) -> int:
        """int64 words of one chunk's exact accumulators for its ordered sums over every lane (hawk/exact.py)."""
        return self.exact_components * exact_words(dtype)

    def exact_names(self) -> list[str]:
        """Ordered sinks and ordered kept cells: each slot keeps an exact accumulator."""
        return [b.name for b in self.buffers if b.role == "exact" and b.name != "#exact"]

    def private_cells(self) -> list[str]:
        """Cells of reductions keeping lane axes that each chunk accumulates in its own copy."""
        return [n for n in self.private if n not in self.sinks]

    def stride(self, name: str) -> int:
        """Values from one chunk's private copy of `name` to the next in its buffers (priv, mark, pairs): its
        slots, rounded up to LINE_VALUES for a sink of fewer than PAD_BELOW slots (line_pad), so that two
        chunks' copies never share a 128-byte pair of cache lines (the line and the one the core fetches beside
        it): a 100-bin float32 histogram's copies shared one, and two threads ran it 2.5x slower than one."""
        n = self.private[name]
        return padded(n) if self.line_pad and name in self.sinks else n

    def sink_values(self, name: str) -> int:
        """A sink's values: its slots times its payload's components (a copy's values, where it has copies)."""
        return _size(self.sinks[name]) * _size(tuple(a.extent for a in self.sig.get(name).axes))

    def pairs_side_by_side(self, name: str) -> bool:
        """Whether a compensated `name` keeps each slot's (sum, correction) side by side in its companion and in
        each chunk's copy: a sink of more than SIDE_BY_SIDE values (see there). Else its sums come first, then
        its corrections (a kept cell: its column loops read and write whole vectors of sums)."""
        return name in self.sinks and self.sink_values(name) > SIDE_BY_SIDE

    def copy_values(self, cells_only: bool = False) -> int:
        """Values one chunk's private copies hold in all, which is what grows with the number of chunks: a
        plain sink's slots, a stored one's slots and marks, a compensated one's pairs, a kept cell's slots, an
        ordered sink's or cell's (high, low) pairs; `cells_only`: those of kept cells alone."""
        n = 0
        for name in self.private:
            if cells_only and name in self.sinks:
                continue
            slots = self.stride(name)
            if self.policy_of(name) == "ordered":  # (high, low) pairs
                n += 2 * slots
            elif name not in self.sinks:
                n += slots
            elif name in self.stored:
                n += 2 * slots
            else:
                n += {"plain": 1, "compensated": 2}.get(self.sink_policy.get(name), 0) * slots
        return n

    def slot_ranges(self) -> bool:
        """Whether this stage runs in slot ranges on the host (see wants_slot_ranges): its #parts buffer says how
        many ranges a launch splits each sink's slots into (1 wherever a launcher leaves it as allocated)."""
        return any(b.role == "parts" for b in self.buffers)

    def fixed_chunks(self) -> bool:
        """Whether this stage's chunks are a fixed function of its lanes and sizes, never of the thread count (one
        thread runs them all in turn): a stage with a private copy of a large sink (over PRIVATE_SLOTS) or of a
        sink both stored and added into, whose results then have the same bits at every thread count."""
        return any(n in self.sinks and self.policy_of(n) != "ordered" and (slots > PRIVATE_SLOTS or n in self.mixed)
                   for n, slots in self.private.items())

    def atomic_sinks(self) -> list[str]:
        """Sinks a GPU with float atomics adds into directly: plain, added to only, over PRIVATE_SLOTS slots. Those
        up to PAIR_SLOTS have a private copy per chunk on the host and spirv; a GPU that adds atomically gives them
        none (eagle.targets.device: no copies, so every thread of a large grid can run)."""
        return [n for n in self.sinks if self.private.get(n, PRIVATE_SLOTS + 1) > PRIVATE_SLOTS
                and n not in self.stored and self.sink_policy.get(n) == "plain"]

    def parallel_span(self, atomics: bool = False) -> int | None:
        """Lanes a chunk boundary must be a multiple of so that chunks never write one slot (None: they would,
        run one chunk). Private sinks never collide, nor do atomic sinks where `atomics`; a reduction keeping
        leading lane axes writes each kept slot from one contiguous span of lanes."""
        shared = set(self.atomic_sinks()) if atomics else set()
        # an ordered sink too large for copies shares one exact accumulator per slot, added into atomically
        shared |= {n for n in self.sinks if self.sink_policy.get(n) == "ordered" and n not in self.stored}
        if any(n not in self.private and n not in shared for n in self.sinks):
            return None
        span = 1
        axes = [a.label for a in self.sig.lane_axes()]
        if any(r.kind == "fold" and not r.kept for r in self.reductions):
            span = ORDERED_BLOCK  # a fold's blocks of lanes each belong to one chunk (or GPU thread)
        if has_scan(self):
            span = SCAN_BLOCK  # a scan's blocks of lanes each belong to one chunk (or GPU thread)
        for r in self.reductions:
            if not r.kept or r.cell in self.private or (r.kind in ("sum", "mean") and r.policy == "ordered"):
                continue  # a kept cell with a copy per chunk, or exact accumulators, never collides
            if list(r.kept) != axes[:len(r.kept)]:
                return None
            inner = [a.extent for a in self.sig.lane_axes()[len(r.kept):]]
            if any(e is None for e in inner):
                return None
            span = math.lcm(span, _size(tuple(inner)))
        if self.block_span:  # a block reduction's slot (hawk/passes/lower/block.py) belongs to one chunk
            span = math.lcm(span, self.block_span)
        return span

    def policy_of(self, name: str) -> str:
        """The sum policy of a sink, or of a cell kept by a reduction over some axes."""
        if name in self.sink_policy:
            return self.sink_policy[name]
        r = next(r for r in self.reductions if r.cell == name)
        return sum_policy(r.policy, True)

    def buffer_index(self, name: str, role: str | None = None) -> int:
        for k, b in enumerate(self.buffers):
            if b.name == name and (role is None or b.role == role):
                return k
        raise KeyError(name)


# Compensated sums over every lane run lanes in blocks of ORDERED_BLOCK, each with ORDERED_CHAINS interleaved
# Neumaier chains (independent chains let the loop pipeline). "ordered" sums are exact (hawk/exact.py): any
# split gives the same bits, so they need no block structure.
ORDERED_BLOCK = 1024
ORDERED_CHAINS = 8
# On the host, a block's compensated chains are this many (four 512-bit vectors of float64 sums side by side): with
# eight, each block was one vector's chain of 128 dependent adds, bound by the add's latency; the block's end folds
# them back to ORDERED_CHAINS by TwoSums (hawk/passes/lower/reduce_full.py). Kernels with a wide payload keep eight.
COMPENSATED_CHAINS = 32


# GPU launch forms (hawk/passes/lower_gpu_tree.py, hawk/passes/lower_gpu.py); workgroups of WORKGROUP threads.
#   "tree":   no sinks, no reduction keeping lane axes, no ordered sum. A workgroup takes a GROUP_ALIGN-aligned
#             span of lanes, its threads every WORKGROUP-th lane of it (coalesced), its partials meet in shared
#             memory.
#   "slots":  no sinks, no ordered sum, and every reduction keeps the same lane axes: a thread per kept slot runs
#             that slot's lanes in lane order (the host's order); sums over every lane meet in shared memory as in
#             "tree".
#   "blocks": block reductions of one span and nothing else across lanes (block_tree): each workgroup runs rounds
#             of block_round lanes, a slot's threads fold its lanes, meet in a shared-memory tree and all read
#             the total (hawk/passes/lower/block.py).
#   "chunks": everything else (ordered sums and sinks included): a chunk of lanes per thread, as a host chunk runs
#             it; ordered terms go into exact accumulators (the thread's own for sums over every lane, one per
#             slot shared by every thread, with integer atomics, for sinks and kept cells).
WORKGROUP = 64
GROUP_ALIGN = ORDERED_BLOCK
SHARED_BUDGET = 16384  # bytes of workgroup memory every Vulkan device offers


def tree_shared(lay: Layout) -> int:
    """float64 elements of the tree forms' workgroup array: every thread's partials."""
    return lay.width * WORKGROUP


def kept_run(lay: Layout) -> tuple[str, tuple[str, ...]] | None:
    """("leading" | "trailing" | "any", kept axes) when every reduction keeps the same lane axes (a proper part
    of them): leading ones give each kept slot a contiguous span of lanes, trailing ones evenly spaced lanes;
    None when reductions keep different axes."""
    kept = {r.kept for r in lay.reductions if r.kept}
    if len(kept) != 1:
        return None
    (k,) = kept
    axes = tuple(a.label for a in lay.sig.lane_axes())
    if len(k) >= len(axes):
        return None
    if axes[:len(k)] == k:
        return "leading", k
    if axes[len(axes) - len(k):] == k:
        return "trailing", k
    return "any", k


def block_tree(lay: Layout) -> bool:
    """Whether a stage runs in the "blocks" form: block reductions (hawk/passes/lower/block.py) of one span, none
    an ordered sum, and nothing else across lanes (no other reduction, sink, scan or store by key)."""
    return bool(lay.blocks) and len({b[0] for b in lay.blocks}) == 1 and \
        not any(b[1] in ("sum", "mean") and b[2] == "ordered" for b in lay.blocks) and \
        not (lay.reductions or lay.sinks or has_scan(lay) or
             any(m.startswith("scatter") for m in lay.outputs.values()))


def block_round(lay: Layout) -> int:
    """Lanes one workgroup of the "blocks" form runs at a time: P slots of S lanes, P the largest power of two
    with P * S <= WORKGROUP (at least 1); each slot's WORKGROUP / P threads share its lanes."""
    span = lay.block_span
    p = 1
    while 2 * p * span <= WORKGROUP:
        p *= 2
    return p * span


def kept_slots(lay: Layout, extents: tuple[int, ...]) -> int:
    """Kept slots of a "slots" stage for a run with these lane extents."""
    _, k = kept_run(lay)
    labels = [a.label for a in lay.sig.lane_axes()]
    return _size(tuple(extents[labels.index(a)] for a in k))


def gpu_form(lay: Layout, fbytes: int) -> str:
    """How a stage runs on a GPU: "tree", "slots" or "chunks" (see above). The lowering and the runtime both
    ask, so they always agree."""
    if block_tree(lay):
        return "blocks"
    if lay.sinks or tree_shared(lay) * 8 > SHARED_BUDGET or has_ordered(lay) or has_scan(lay) or \
            lay.blocks or any(r.kind == "fold" for r in lay.reductions):  # folds, scans and other block
        # reductions: the host's lane code per thread
        return "chunks"
    if not any(r.kept for r in lay.reductions):
        return "tree"
    if kept_run(lay) is None:
        return "chunks"
    return "slots"


# Scans (hawk.scan, hawk/passes/lower/scan.py): lanes go in blocks of SCAN_BLOCK, counted from lane 0 whatever the
# threads or target. The stage before the scan writes each block's total (and whether a reset= flag was set in it)
# into a "scan" buffer of SCAN_ENTRY values per block, which its finish turns into each block's starting offset
# (the in-order fold of the earlier blocks' totals); the stage that reads the scan starts each block from there.
SCAN_BLOCK = 4096
SCAN_ENTRY = 2  # (total, flag) per block; the finish leaves (offset, flag)
SCAN_ROLES = ("scan", "scanoff", "rscan")  # the totals a stage writes, the offsets a later stage reads
# rscan: a reverse scan's (hawk.scan(x, reverse=True)) or a func scan's two planes of the run's lanes, (x, flag)
# written by the stage, turned by its finish into (inclusive, exclusive) running values, read by a later stage as
# its "scanoff" (a func scan over Vector or Matrix values: each plane holds its components one after another)


def has_scan(lay: Layout) -> bool:
    """Whether a stage writes a scan's block totals or reads its offsets (its chunks start on SCAN_BLOCK)."""
    return any(b.role in SCAN_ROLES for b in lay.buffers)


def writes_scan(lay: Layout) -> bool:
    """Whether a stage writes a scan's block totals or lane values (a stage that only reads a forward scan's
    offsets, "scanoff", writes nothing a chunk owns: every chunk may run every block, as slot ranges do)."""
    return any(b.role in SCAN_ROLES and b.role != "scanoff" for b in lay.buffers)


def scan_values(lanes: int) -> int:
    """Values of a "scan" buffer for a run of `lanes` lanes (at least one entry)."""
    return SCAN_ENTRY * max(1, -(-lanes // SCAN_BLOCK))


def rscan_values(lanes: int, comps: int = 1) -> int:
    """Values of an "rscan" buffer (hawk/passes/lower/scan.py): two planes of `comps` values per lane (a scan by a
    func over Vector or Matrix values has several: Layout.comps), for at least one lane."""
    return 2 * comps * max(1, lanes)


def keyed_values(lanes: int, keys: int) -> int:
    """Values of a keyed scan's "scan" buffer (hawk/passes/lower/scan_keyed.py): two rows of `keys` values per
    block (its per-key totals, turned into offsets by the finish; the running values of the stage that reads it)."""
    return 2 * keys * max(1, -(-lanes // SCAN_BLOCK))


LINE_VALUES = 32  # a sink's copies start this many values apart at least (Layout.stride): 128 bytes of float32
PAD_BELOW = 4096  # ... when they hold fewer slots (the shared lines of larger ones are a small part of their stores)


def padded(slots: int) -> int:
    """A small sink's copy stride (Layout.stride): its slots rounded up to LINE_VALUES below PAD_BELOW."""
    return -(-slots // LINE_VALUES) * LINE_VALUES if slots < PAD_BELOW else slots


PRIVATE_SLOTS = 1 << 16  # sinks up to this many slots get private copies (one per chunk, thread-count chunking)
# Larger plain, auto and compensated sinks, and sinks both stored and added into, get private copies up to
# PAIR_SLOTS slots too, in a fixed number of chunks (Layout.fixed_chunks; eagle.launch.SPLIT_CHUNKS, all the
# copies within eagle.launch.COPY_BYTES): fewer, larger chunks as the sink grows, so a big sink never runs as one
# chunk on the host or one GPU thread for want of room. Beyond PAIR_SLOTS a stage that only scatters (and writes
# per-lane outputs) runs in slot ranges on the host (wants_slot_ranges: no copies at all); split-stages gives
# such scatters in any other stage a stage of their own (hawk/passes/split_sinks.py).
# Ordered sinks and kept cells: one exact accumulator per slot (hawk/exact.py: 576 bytes a float64 slot) that
# every chunk shares (integer atomic adds), allocated zeroed once and left zeroed by the finish. Up to
# PAIR_SLOTS slots, each host chunk also keeps its own (high, low) float pair per slot (two error-free TwoSums a
# term, 16 bytes a float64 slot; the launcher keeps all the copies within eagle.launch.COPY_BYTES), and only a
# term the pair cannot take exactly goes to the accumulator, which then stays mostly untouched (zero pages).
PAIR_SLOTS = 1 << 25
SIDE_BY_SIDE = 1 << 11  # a compensated sink of more values keeps each slot's (sum, correction) side by side
# (Layout.pairs_side_by_side), so that a term added at a random key touches one cache line, not two. Float64, one
# thread, bound launches, sums then corrections -> side by side: 1e6 random keys into 4096 slots 1.27 -> 1.02 ms,
# 8192 slots 1.87 -> 1.12, 16384 slots 2.26 -> 1.27; 1e7 into 10**6 slots 94 -> 74 (a plain sink: 65); 2048 slots
# 1.00 either way. A smaller sink keeps its sums, then its corrections: stored one value at a time, they ran
# faster there than the pairs' 16-byte stores (1024 slots: 0.95 against 1.02 ms)
CELL_SLOTS = 1 << 22  # on the host, a sum, mean, max or min keeping fixed axes gets a copy per chunk up to this
# many slots (x components), so that its chunks run on every thread (eagle.launch caps the copies by
# PRIVATE_VALUES and COPY_BYTES, and gives a chunk CELL_LANES lanes a copy value); Spec.cell_slots. Until
# 2026-12-05 PRIVATE_SLOTS: an "auto" column sum of 101 rows of 200,000 float64 columns ran as one chunk, 8.3 ms
# on one thread of two, 4.3 ms in 4 chunks now
COPY_SLOTS_ENV = "HAWK_COPY_SLOTS"  # overrides PAIR_SLOTS for a specialisation made while it is set (tests)


def copy_slots_setting() -> int:
    """$HAWK_COPY_SLOTS as a whole number >= 1 (0 when unset or empty: PAIR_SLOTS): read when a specialisation
    is made (make_spec), so it lands in the Spec and so in every cache key of what is compiled for it."""
    text = os.environ.get(COPY_SLOTS_ENV, "").strip()
    if not text:
        return 0
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"${COPY_SLOTS_ENV} must be a whole number of slots >= 1, got {text!r}")
    return value


def private_sink_slots(slots: int, policy: str, stored: bool, added: bool, limit: int = PAIR_SLOTS) -> int:
    """Slots of each chunk's private copy of a sink that is not ordered (0: none): a sink only added into (plain
    or compensated), only stored into (with marks), or both stored and plain-added into (marks; the finish
    replaces a slot a chunk stored, else adds the chunk's copy), up to `limit` (PAIR_SLOTS) slots."""
    if policy == "ordered" or not (stored or added) or (stored and added and policy != "plain"):
        return 0
    return slots if slots <= limit else 0


def slot_range_form(lay: Layout, reads_outputs: bool = False) -> bool:
    """Whether a stage's effects fit the slot-range form (the one statement of the rule: wants_slot_ranges
    below, and split-stages' hawk/passes/split_sinks.py, which splits a stage so that its large sinks' scatters
    fit it): it scatters into sinks and writes only per-lane outputs it never reads (`reads_outputs`: the body
    reads some output plane it writes), with no reductions over every lane or kept axes, scan totals, cells or
    stores by key. It may read a scan's offsets (a keyed one's too, its running values in a buffer of each
    chunk's own: at most hawk.frontend.scan_keyed.MAX_KEYS of them) and fold block reductions: every chunk makes
    those again, block by block and tile by tile, with one chunk's bits."""
    if not lay.sinks or lay.reductions or lay.cells_out or writes_scan(lay):
        return False
    return not (lay.outputs and (reads_outputs or any(mode != "lane" for mode in lay.outputs.values())))


def wants_slot_ranges(lay: Layout, reads_outputs: bool = False) -> bool:
    """Whether a stage runs in slot ranges on the host (issues 10 and 11: no single-thread cliff for sinks of
    any size): its effects fit the form (slot_range_form) and some sink would make it run as one chunk (too
    large for copies). Each of the launch's P chunks then runs every lane and applies only the
    scatters whose slot falls in its own range of each sink (slot_range), and chunk 0 alone writes the per-lane
    outputs: every slot sees its terms, stores and adds in lane order from one chunk, so the results have the
    bits of one chunk, under every policy, at every P. Its sinks keep no copies (analysis drops those a smaller
    sink would have had), so it needs no memory beyond the sinks. The cost: every chunk reads every lane's inputs
    (P times the streaming), for 1/P of the random slot accesses that dominate a scatter into a sink this large."""
    return slot_range_form(lay, reads_outputs) and lay.parallel_span() is None


def slot_range(slots: int, part: int, parts: int) -> tuple[int, int]:
    """Slots [lo, hi) of a sink that chunk `part` of `parts` applies in the slot-range form (the lowering's
    hawk/passes/lower/slot_ranges.py computes the same bounds): contiguous, covering every slot once."""
    return part * slots // parts, (part + 1) * slots // parts


def has_ordered(lay: Layout) -> bool:
    """Whether a stage has any ordered sum (over every lane, keeping axes, or an ordered sink)."""
    return any(ordered(r) for r in lay.reductions) or "ordered" in lay.sink_policy.values()


def ordered(r: Reduction) -> bool:
    return r.kind in ("sum", "mean") and r.policy == "ordered"


def compensated(r: Reduction) -> bool:
    """A compensated sum or mean (max and min ignore the policy): a kept cell's copies are (sum, correction) pairs."""
    return r.kind in ("sum", "mean") and r.policy == "compensated"


def sum_policy(policy: str, scatter: bool) -> str:
    """What a policy word means for one sum: 'fast' | 'plain' | 'compensated' | 'ordered'."""
    if policy == "auto":
        return "compensated" if scatter else "fast"
    return policy


def chunk_slots(r: Reduction) -> int:
    """Partials per chunk for one full reduction: components (x2 when compensated), plus a count for mean."""
    n = _size(r.payload)
    if r.kind == "fold":  # its partials live in its "fold" buffer
        return 0
    if r.kind in ("sum", "mean"):
        p = sum_policy(r.policy, False)
        n = 0 if p == "ordered" else (2 * n if p == "compensated" else n)
    return n + (r.kind == "mean")


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def fold_values(r: Reduction, lanes: int, cell_values: int) -> int:
    """Floats of a fold's "fold" buffer (hawk/passes/lower/folds.py) for a run of `lanes` lanes whose cell holds
    `cell_values` values: a flag and the payload per block of ORDERED_BLOCK lanes, or per kept slot."""
    n = _size(r.payload)
    entries = cell_values // n if r.kept else -(-lanes // ORDERED_BLOCK)
    return entries * (n + 1)



def make_spec(sig: Signature, float_dtype: str, index_dtypes: dict[str, str], auto_sum: str = "fast",
              float_outputs: dict[str, str] | None = None, cell_slots: int = 0, sae: bool = False,
              fma_pipes: bool = False, mxcsr: bool = False) -> Spec:
    """The specialisation for a run: its float dtype and each Index plane's dtype (int32 unless given) and each
    integer output's (Mutable[Index]: int64 unless given); `float_outputs`: float outputs given another float
    dtype (those equal to the run's are dropped, so such a run shares the plain run's specialisation);
    `cell_slots`, `sae`, `fma_pipes`, `mxcsr`: Spec's."""
    given = float_outputs or {}
    floats = tuple((p.name, given[p.name]) for p in sig.planes
                   if p.kind == "output" and not p.integer and given.get(p.name, float_dtype) != float_dtype)
    return Spec(float_dtype, tuple((p.name, index_dtypes.get(p.name, "int32" if p.kind == "index" else "int64"))
                                   for p in sig.planes if p.integer_plane), auto_sum, floats, copy_slots_setting(),
                cell_slots, sae, fma_pipes, mxcsr)


def layout_to_json(lay: Layout) -> dict:
    return {"name": lay.name, "signature": lay.sig.to_json(), "outputs": lay.outputs,
            "reductions": [asdict(r) for r in lay.reductions],
            "sinks": {k: list(v) for k, v in lay.sinks.items()},
            "index_keys": {k: [list(u) for u in v] for k, v in lay.index_keys.items()},
            "sink_policy": lay.sink_policy, "buffers": [asdict(b) for b in lay.buffers],
            "cells_in": lay.cells_in, "cells_out": lay.cells_out, "private": lay.private, "stored": lay.stored,
            **({"mixed": lay.mixed} if lay.mixed else {}),
            **({"blocks": [list(b) for b in lay.blocks]} if lay.blocks else {}),
            **({"keyed": lay.keyed} if lay.keyed else {}),
            **({"comps": lay.comps} if lay.comps else {}),
            **({"line_pad": True} if lay.line_pad else {}),
            **({"fold_keys": lay.fold_keys} if lay.fold_keys else {})}


def layout_from_json(d: dict) -> Layout:
    reds = [Reduction(r["kind"], tuple(r["over"]), tuple(r["kept"]), r["policy"], tuple(r["payload"]), r["cell"],
                      bool(r["masked"])) for r in d["reductions"]]
    lay = Layout(d["name"], Signature.from_json(d["signature"]), dict(d["outputs"]), reds,
                 {k: tuple(v) for k, v in d["sinks"].items()},
                 {k: [(s, int(p)) for s, p in v] for k, v in d["index_keys"].items()})
    lay.sink_policy = dict(d["sink_policy"])
    lay.cells_in, lay.cells_out = list(d["cells_in"]), list(d["cells_out"])
    lay.private = {k: int(v) for k, v in d["private"].items()}
    lay.stored = [str(n) for n in d.get("stored", [])]
    lay.mixed = [str(n) for n in d.get("mixed", [])]
    lay.blocks = [(int(b[0]), str(b[1]), str(b[2])) for b in d.get("blocks", [])]
    lay.keyed = {str(k): int(v) for k, v in d.get("keyed", {}).items()}
    lay.comps = {str(k): int(v) for k, v in d.get("comps", {}).items()}
    lay.line_pad = bool(d.get("line_pad", False))
    lay.fold_keys = {str(k): str(v) for k, v in d.get("fold_keys", {}).items()}
    lay.buffers = [Buffer(b["name"], b["role"], b["dtype"]) for b in d["buffers"]]
    return lay
