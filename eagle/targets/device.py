"""What every GPU target shares: how a stage runs on a device.

A GPU stage is the host lane function turned into a kernel where each thread runs one chunk of lanes (see
hawk/passes/lower_gpu.py). A launch: allocate the stage's buffers on the host exactly as for a host run (with T
chunks), copy them to the device, run T threads, copy the written buffers back, and run the stage's finish on
the host — the same compiled finish as a host run. An ordered sum's threads deposit its terms into exact integer
accumulators (hawk/exact.py): each thread its own for sums over every lane (#exact), and every term of an
ordered sink or kept cell into the slot's one accumulator that all threads share (64-bit integer atomics; a
GPU keeps none of the host chunks' two-float pairs). The host finish combines and rounds them once: the same
bits as the host's under any grid.

A target's compiler (hawk/targets/) supplies the device binary; its runtime here (eagle/targets/__init__.py's
`runtime(name)`) is a DeviceRuntime, or RuntimeMissing naming what is missing.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from eagle import native
from eagle.errors import RuntimeMissing
from hawk.abi.layout import (
    GROUP_ALIGN,
    ORDERED_BLOCK,
    WORKGROUP,
    Layout,
    block_round,
    gpu_form,
    kept_slots,
    ordered,
)

WRITTEN = ("out", "cell", "count", "sink", "comp", "priv", "mark", "scratch", "exact", "err", "fold", "scan",
           "rscan")
MAX_THREADS = 1 << 16  # chunks per launch (chunk form)
MAX_GROUPS = 65535  # workgroups per launch (tree form): Vulkan's guaranteed minimum
MAX_PRIVATE_THREADS = 256  # chunks when sinks are privatised (each chunk owns a copy of each sink) ...
PRIVATE_BUDGET = 1 << 18  # ... or more, while all the copies together hold at most this many values
COPY_LIMIT = 1 << 24  # values of all the private copies together, whatever the floor above (128 MiB of 8-byte
# values: Vulkan devices bind storage buffers of 128 MiB at least)
EXACT_BUDGET = 1 << 22  # int64 words of the threads' exact accumulators for ordered sums over every lane (32 MiB)


@dataclass(frozen=True)
class Grid:
    """How a stage's lanes are spread over a launch: `chunks` sets of partials for the host finish to combine,
    made by `groups` workgroups of `block` threads (hawk.abi.layout's forms: "tree" and "slots" write a set per
    workgroup, "chunks" a set per thread, each thread running `span` consecutive lanes)."""

    span: int  # lanes per chunk ("tree": per workgroup; "slots": per kept slot)
    chunks: int
    block: int
    form: str = "chunks"

    @property
    def groups(self) -> int:
        return self.chunks if self.form != "chunks" else max(1, -(-self.chunks // self.block))

    @property
    def per_thread(self) -> int:
        """The most lanes one thread runs."""
        return -(-self.span // self.block) if self.form == "tree" else self.span


RANGE_THREADS = 256  # threads of a slot-range stage on a GPU (each runs every lane: a thread per range of each
# sink); a runtime may say fewer (DeviceRuntime.range_threads: a Vulkan device that is a CPU, lavapipe, where the
# invocations share the machine's few cores and each one's stream over every lane costs a core's time)


def plan_grid(layout: Layout, end: int, fbytes: int, extents: tuple[int, ...], atomics: bool = False,
              ranges: int = RANGE_THREADS) -> Grid:
    """The launch for lanes [0, end) of a run with these lane extents. "tree": workgroups take GROUP_ALIGN-aligned
    spans; "slots": a thread per kept slot; "chunks": one chunk when threads would collide, else chunks that start
    on the spans of lanes that share a kept slot (and on compensated blocks), as many as the memory of the
    threads' private copies and exact accumulators allows; a slot-range stage (in_ranges), up to `ranges` threads
    that each run every lane."""
    form = gpu_form(layout, fbytes)
    if form == "tree":
        c = max(GROUP_ALIGN, -(-end // MAX_GROUPS))
        c = -(-c // GROUP_ALIGN) * GROUP_ALIGN
        return Grid(c, max(1, -(-end // c)), WORKGROUP, form)
    if form == "blocks":  # workgroups of block reductions: rounds of block_round lanes each (lower/block.py)
        r = block_round(layout)
        c = max(r, -(-end // MAX_GROUPS))
        c = -(-c // r) * r
        return Grid(c, max(1, -(-end // c)), WORKGROUP, form)
    if form == "slots":
        slots = kept_slots(layout, extents)
        return Grid(-(-math.prod(extents) // max(slots, 1)), max(1, -(-slots // WORKGROUP)), WORKGROUP, form)
    span = layout.parallel_span(atomics)
    if in_ranges(layout, atomics) and end > 0:  # a thread per range of slots, each running every lane
        t = range_threads(layout, ranges)
        return Grid(end, t, min(WORKGROUP, t))
    if span is None or end == 0:
        return Grid(max(end, 1), 1, 1)
    align = span
    if any(r.kind in ("sum", "mean") and not r.kept and not ordered(r) for r in layout.reductions):
        align = math.lcm(align, ORDERED_BLOCK)  # whole blocks of a compensated sum's chains (as host chunks)
    c = max(align, -(-end // thread_cap(layout, fbytes, atomics)))
    c = -(-c // align) * align
    t = -(-end // c)
    return Grid(c, t, min(WORKGROUP, t))


def in_ranges(layout: Layout, atomics: bool = False) -> bool:
    """Whether a stage runs in slot ranges on a GPU: a slot-range stage (Layout.slot_ranges) whose threads
    would otherwise collide (float `atomics` that cover every sink let threads take their own lanes instead)."""
    return layout.slot_ranges() and layout.parallel_span(atomics) is None


def range_threads(layout: Layout, most: int = RANGE_THREADS) -> int:
    """Threads of a slot-range stage on a GPU (hawk.abi.layout.wants_slot_ranges): `most`, or fewer when a sink
    has fewer slots (every range then holds at least one slot of each sink). Each thread reads every lane, so
    more threads add reads of the lane planes (shared by a warp's threads) and take fewer scatters each."""
    slots = min((math.prod(a.extent for a in layout.sig.get(n).axes) for n in layout.sinks), default=1)
    return max(1, min(most, slots))


def thread_cap(layout: Layout, fbytes: int, atomics: bool = False) -> int:
    """The most chunk-form threads a launch may have: each owns a copy of every private sink and cell (plain,
    compensated or stored; ordered ones have none on a GPU) and exact accumulators for the ordered sums over
    every lane, so their memory grows with the threads. Order never changes an exact sum, so capping the
    threads changes no result."""
    cap = MAX_THREADS
    copies = device_copy_values(layout, atomics)
    if copies:
        cap = min(cap, max(MAX_PRIVATE_THREADS, PRIVATE_BUDGET // copies), max(1, COPY_LIMIT // copies))
    exact = layout.exact_width("float64" if fbytes == 8 else "float32")
    if exact:
        cap = min(cap, max(1, EXACT_BUDGET // exact))
    return cap


def device_copy_values(layout: Layout, atomics: bool = False) -> int:
    """Layout.copy_values for a GPU stage: its ordered sinks and cells keep no per-thread pairs (DeviceStage
    allocates none), their threads add every term into the shared exact accumulators; with float `atomics`,
    neither do its large plain sinks (Layout.atomic_sinks), added into directly."""
    direct = set(layout.atomic_sinks()) if atomics else set()
    private = {n: s for n, s in layout.private.items() if layout.policy_of(n) != "ordered" and n not in direct}
    return dataclasses.replace(layout, private=private).copy_values() if private != layout.private else \
        layout.copy_values()


def device_meta(b, grid: Grid, lo: int, hi: int) -> np.ndarray:
    """meta for a GPU launch: [C, base, chunks, L, extents..., end]."""
    return np.array([grid.span, lo, grid.chunks, b.lanes, *b.extents, hi], dtype=np.int64)


LANE_ROLES = frozenset({"in", "index", "out"})  # the roles of lane planes (what the transfer counts call planes)


class Transfers:
    """Copies between the host and one device, counted by direction ("up", "down") and by what was copied: a
    buffer's layout role ("in", "out", "cell", "scratch", ...) or "array" (eagle.asarray / Array.numpy). Tests
    read `planes()`: copies of lane planes, which device Arrays save."""

    def __init__(self):
        self.counts: Counter = Counter()
        self.bytes: Counter = Counter()

    def add(self, direction: str, what: str, nbytes: int) -> None:
        self.counts[(direction, what)] += 1
        self.bytes[(direction, what)] += nbytes

    def planes(self) -> int:
        """Copies of lane planes (inputs, Index keys, per-lane outputs) either way so far."""
        return sum(n for (_, what), n in self.counts.items() if what in LANE_ROLES)

    def total(self, what: str | None = None) -> int:
        """Copies either way so far (of `what` only, when given)."""
        return sum(n for (_, w), n in self.counts.items() if what is None or w == what)

    def reset(self) -> None:
        self.counts.clear()
        self.bytes.clear()

    def __repr__(self) -> str:
        return f"<Transfers {dict(self.counts)}>"


class DeviceBuffer:
    """Memory on one device, `nbytes` long, made by (or lent to) `runtime`: what a device eagle.Array holds and
    what a launch binds in place of a NumPy buffer (no copy). Each runtime subclasses it."""

    runtime: DeviceRuntime
    nbytes: int


class Placed(NamedTuple):
    """A launch argument already on the device: `buffer` (a DeviceBuffer of the launching runtime) holding `size`
    elements in `nbytes` (what the kernel's memref says; the buffer may be larger)."""

    buffer: DeviceBuffer
    size: int
    nbytes: int


class PointerBuffer(DeviceBuffer):
    """Device memory known by its address (CUDA, HIP): allocated by `runtime` (freed when collected) or lent by a
    framework's array `owner` (kept alive while this lives, never freed here)."""

    def __init__(self, runtime: DeviceRuntime, ptr: int, nbytes: int, owner=None):
        self.runtime, self.ptr, self.nbytes, self.owner = runtime, int(ptr), nbytes, owner

    def __del__(self):
        if getattr(self, "owner", 1) is None and self.ptr:
            try:
                self.runtime.free(self.ptr)
            except Exception:  # interpreter shutdown: the driver frees the context's memory
                pass
            self.ptr = 0

    def __repr__(self) -> str:
        return f"<device memory at {self.ptr:#x}, {self.nbytes} bytes{', lent' if self.owner is not None else ''}>"


class DeviceRuntime:
    """A target's runtime: load a binary and launch its kernel over buffers, each a NumPy array (copied in, and
    back when written) or a DeviceBuffer of this runtime (bound where it lies). `alloc`, `upload` and `download`
    move data for device Arrays; every copy is counted in `transfers`. `target`: the eagle target it serves (the
    `device` of its Arrays). `float_atomics`: its binaries add into large plain sinks with atomics."""

    name = "device"
    target = "device"
    float_atomics = False
    range_threads = RANGE_THREADS  # threads of a slot-range stage (plan_grid)
    transfers: Transfers

    @classmethod
    def shared(cls):
        """One runtime per process and class (its device Arrays and transfer counts are the plans'); raises
        RuntimeMissing, each time asked, where the machine lacks it."""
        made = cls.__dict__.get("_shared")
        if made is None:
            made = cls._shared = cls()
        return made

    def launch(self, binary: bytes, entry: str, buffers: list, written: list[bool], grid: Grid,
               roles: list[str] | None = None):
        raise NotImplementedError

    def alloc(self, nbytes: int) -> DeviceBuffer:
        raise NotImplementedError(f"target '{self.target}' keeps no device arrays")

    def upload(self, buf: DeviceBuffer, a: np.ndarray, what: str = "array") -> None:
        raise NotImplementedError

    def download(self, buf: DeviceBuffer, a: np.ndarray, what: str = "array", offset: int = 0) -> None:
        raise NotImplementedError

    def device_copy(self, src: DeviceBuffer, src_at: int, dst: DeviceBuffer, dst_at: int, nbytes: int) -> None:
        raise NotImplementedError(f"target '{self.target}' keeps no device arrays")

    def zero(self, buf: DeviceBuffer) -> None:
        raise NotImplementedError(f"target '{self.target}' keeps no device arrays")


def device_binary(key: str, name: str, suffix: str, compile: Callable[[], bytes]) -> bytes:
    """The device binary for `key`: from the disk cache if its bytes match their recorded sha256, else made by
    `compile()` (the compiler's, e.g. a kernel's `device_binary` for a target) and cached (atomically, with its
    seal) as `<name>-<key>.<suffix>`. The key is extended with the LLVM version, which compiles every GPU target."""
    from eagle import cache

    d = cache.cache_dir()
    path = d / f"{name}-{cache.key(key, 'llvm=' + cache.host_cpu()['llvm'])}.{suffix}" if d else None
    with cache.building(path):  # (another process compiling the same binary: wait for it, then read it)
        if path is not None:
            binary = cache.read_entry(path)
            if binary:
                return binary
        binary = compile()
        if path is not None:
            cache.write_entry(path, binary)
        return binary


def missing(target: str, what: str, how: str) -> RuntimeMissing:
    return RuntimeMissing(f"target '{target}' compiled, but running it needs {what}, which this machine lacks "
                          f"({how}); the binary can still be built into an artifact and run elsewhere")


class DeviceStage:
    """One stage of one run on a device, buffers allocated: `fire()` = `launch()` (copy in, launch, copy back,
    finish on the host, check) then `commit()`. The caller's arrays are always staged: the device's results
    reach them only once every stage of the run has succeeded. `nchunks`: the grid's sets of partials. Lane
    planes on the device (device Arrays, and then the per-lane outputs) are bound where they lie and never
    copied; the partials, cells and sinks the host finish reads travel each launch (docs/devices.md)."""

    def __init__(self, launcher, binary: bytes, entry: str, runtime: DeviceRuntime, finish_lib, b, lo: int, hi: int,
                 cuts: dict):
        lay = launcher.lay
        if getattr(b, "device", None):
            from eagle.targets.device_planes import fetch_keys

            fetch_keys(b, lay, runtime)
        launcher.binder.check_keys(lay, b)
        self.grid = plan_grid(lay, hi, np.dtype(b.dtype).itemsize, tuple(b.extents), runtime.float_atomics,
                              runtime.range_threads)
        self.launcher, self.binary, self.entry, self.runtime, self.finish_lib = launcher, binary, entry, runtime, \
            finish_lib
        copies = self.grid.chunks if self.grid.form == "chunks" else 1  # tree forms: one thread per kept slot
        direct = frozenset(lay.atomic_sinks()) if runtime.float_atomics else frozenset()  # float atomic adds
        self.buffers, self.results, self.copies, self.resets, self.staged = launcher.buffers(
            b, self.grid.chunks, cuts, copies, staged=True, pair_copies=0,  # threads deposit every ordered term
            no_copies=direct)
        self.nchunks = launcher.last_chunks = self.grid.chunks
        if in_ranges(lay, runtime.float_atomics):  # a thread per range of slots (plan_grid)
            self.buffers[lay.buffer_index("#parts")][0] = self.grid.chunks
        meta_k = launcher.meta_k
        self.buffers[meta_k] = device_meta(b, self.grid, lo, hi)
        self.host_meta = np.array([lo, hi, self.grid.chunks, b.lanes, *b.extents], dtype=np.int64)
        self.written = [buf.role in WRITTEN for buf in lay.buffers]
        self.roles = [buf.role for buf in lay.buffers]
        from eagle.stage import cell_index

        self.cells_out = {c: self.buffers[cell_index(lay, c)] for c in lay.cells_out}
        self.args = self._device_args(b, cuts)

    def _device_args(self, b, cuts: dict) -> list:
        """What the launch binds: the stage's buffers, with device buffers in place of the host stand-ins of the
        run's device input planes (`b.device`, eagle/targets/device_planes.py) and, when the run has any, of its
        per-lane outputs the caller did not pass (allocated here on the device, handed back as device Arrays).
        The host finish keeps the stand-ins: it reads no lane plane. `cuts["#device"]` maps a stand-in's address
        to its device buffer for every stage of the run (a later stage writing the same output finds it)."""
        on_device = getattr(b, "device", None)
        if not on_device:
            return self.buffers
        from eagle.array import DeviceArray
        from eagle.native import address

        lay = self.launcher.lay
        placed = cuts.setdefault("#device", {})
        for name, buf in on_device.items():
            if not name.startswith("#"):
                placed[address(b.arrays[name] if name in b.arrays else b.given[name])] = buf
        kept = []
        for caller, scratch in self.staged:  # a device output is written where it lies: no host scratch copy
            buf = placed.get(address(caller)) if caller.size else None
            if buf is None:
                kept.append((caller, scratch))
            else:
                placed[address(scratch)] = buf
        self.staged = kept
        args = list(self.buffers)
        for k, bb in enumerate(lay.buffers):
            if not args[k].size:
                continue
            at = address(args[k])
            buf = placed.get(at)
            mode = lay.outputs.get(bb.name, "cell")
            if buf is None and bb.role == "out" and mode in ("lane", "scatter", "scatter-run") and \
                    bb.name not in b.given:
                buf = placed[at] = self.runtime.alloc(args[k].nbytes)
                if mode != "lane":  # stored by key: the lanes no key reaches read 0, as the host's np.zeros
                    self.runtime.zero(buf)
            if buf is not None:
                args[k] = Placed(buf, args[k].size, args[k].nbytes)
        for name, r in list(self.results.items()):
            data = r.numpy()
            buf = placed.get(address(data)) if data.size else None
            if buf is not None:
                self.results[name] = DeviceArray(buf, data.shape, data.dtype, self.runtime.target)
        return args

    def fire(self) -> None:
        self.launch()
        self.commit()

    def commit(self) -> None:
        from eagle.stage import commit

        commit(self.copies, self.staged)

    def launch(self) -> None:
        from eagle.launch import PackedArgs

        for dst, src in self.staged:
            np.copyto(src, dst)
        for a, fill in self.resets:
            a.fill(fill)
        self.runtime.launch(self.binary, self.entry, self.args, self.written, self.grid, roles=self.roles)
        host = list(self.buffers)
        host[self.launcher.meta_k] = self.host_meta
        args = PackedArgs(host)
        native.call_ieee(self.finish_lib.finish, args.ptrs)
        err = self.buffers[self.launcher.err_k]
        if err.any():
            self.launcher.check_errors(err)
