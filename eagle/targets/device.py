"""What every GPU target shares: how a stage runs on a device.

A GPU stage is the host lane function turned into a kernel where each thread runs one chunk of lanes (see
hawk/passes/lower_gpu.py). A launch: allocate the stage's buffers on the host exactly as for a host run (with T
chunks), copy them to the device, run T threads, copy the written buffers back, and run the stage's finish on
the host — the same compiled finish as a host run, so ordered totals carry the host's bits.

A target supplies: `compile(lowered) -> bytes` (the device binary), `check(binary)` (the offline validator:
ptxas, ld.lld, spirv-val), and `runtime()` -> a DeviceRuntime, or RuntimeMissing naming what is missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from eagle.errors import RuntimeMissing
from hawk.layout import GROUP_ALIGN, ORDERED_BLOCK, WORKGROUP, Layout, gpu_form, kept_slots

WRITTEN = ("out", "cell", "count", "sink", "comp", "priv", "mark", "scratch", "blocks", "err")
MAX_THREADS = 1 << 16  # chunks per launch (chunk form)
MAX_GROUPS = 65535  # workgroups per launch (tree form): Vulkan's guaranteed minimum
MAX_PRIVATE_THREADS = 256  # chunks when sinks are privatised (each chunk owns a copy of each sink) ...
PRIVATE_BUDGET = 1 << 18  # ... or more, while all the copies together hold at most this many values


@dataclass(frozen=True)
class Grid:
    """How a stage's lanes are spread over a launch: `chunks` sets of partials for the host finish to combine,
    made by `groups` workgroups of `block` threads (hawk.layout's forms: "tree" and "slots" write a set per
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


def plan_grid(layout: Layout, end: int, fbytes: int, extents: tuple[int, ...], atomics: bool = False) -> Grid:
    """The launch for lanes [0, end) of a run with these lane extents. "tree": workgroups take GROUP_ALIGN-aligned
    spans; "slots": a thread per kept slot; "chunks": one chunk when threads would collide, else chunks that start
    on ordered blocks and on the spans of lanes that share a kept slot."""
    form = gpu_form(layout, fbytes)
    if form == "tree":
        c = max(GROUP_ALIGN, -(-end // MAX_GROUPS))
        c = -(-c // GROUP_ALIGN) * GROUP_ALIGN
        return Grid(c, max(1, -(-end // c)), WORKGROUP, form)
    if form == "slots":
        slots = kept_slots(layout, extents)
        return Grid(-(-math.prod(extents) // max(slots, 1)), max(1, -(-slots // WORKGROUP)), WORKGROUP, form)
    span = layout.parallel_span(atomics)
    if span is None or end == 0:
        return Grid(max(end, 1), 1, 1)
    align = span
    if layout.blocked or any(r.kind in ("sum", "mean") and not r.kept for r in layout.reductions):
        align = math.lcm(align, ORDERED_BLOCK)
    align = math.lcm(align, layout.segment_align(math.prod(extents)))  # whole ordered scatter segments per thread
    cap = MAX_THREADS
    copies = layout.copy_values()
    if copies:
        cap = min(MAX_THREADS, max(MAX_PRIVATE_THREADS, PRIVATE_BUDGET // copies))
    c = max(align, -(-end // cap))
    c = -(-c // align) * align
    t = -(-end // c)
    return Grid(c, t, min(WORKGROUP, t))


def device_meta(b, grid: Grid, lo: int, hi: int) -> np.ndarray:
    """meta for a GPU launch: [C, base, chunks, L, extents..., end]."""
    return np.array([grid.span, lo, grid.chunks, b.lanes, *b.extents, hi], dtype=np.int64)


class DeviceRuntime:
    """A target's runtime: load a binary and launch its kernel over numpy buffers (copied in and back).
    `float_atomics`: its target's binaries add into large plain sinks with atomics (as the target's own flag)."""

    name = "device"
    float_atomics = False

    def launch(self, binary: bytes, entry: str, buffers: list[np.ndarray], written: list[bool], grid: Grid):
        raise NotImplementedError


def device_binary(key: str, name: str, target, gpu_module) -> bytes:
    """The device binary for `key`: from the disk cache if its bytes match their recorded sha256, else compiled
    from `gpu_module()` by the target and cached (atomically, with its seal). The key is extended with the LLVM
    version, which compiles every GPU target."""
    from eagle import cache

    d = cache.cache_dir()
    path = d / f"{name}-{cache.key(key, 'llvm=' + cache.host_cpu()['llvm'])}.{target.suffix}" if d else None
    if path is not None:
        binary = cache.read_entry(path)
        if binary:
            return binary
    binary = target.compile(gpu_module())
    if path is not None:
        cache.write_entry(path, binary)
    return binary


def missing(target: str, what: str, how: str) -> RuntimeMissing:
    return RuntimeMissing(f"target '{target}' compiled, but running it needs {what}, which this machine lacks "
                          f"({how}); the binary can still be built into an artifact and run elsewhere")


class DeviceStage:
    """One stage of one run on a device, buffers allocated: `fire()` = `launch()` (copy in, launch, copy back,
    finish on the host, check) then `commit()`. The caller's arrays are always staged: the device's results
    reach them only once every stage of the run has succeeded. `nchunks`: the grid's sets of partials."""

    def __init__(self, launcher, binary: bytes, entry: str, runtime: DeviceRuntime, finish_lib, b, lo: int, hi: int,
                 cuts: dict):
        lay = launcher.lay
        launcher.binder.check_keys(lay, b)
        self.grid = plan_grid(lay, hi, np.dtype(b.dtype).itemsize, tuple(b.extents), runtime.float_atomics)
        self.launcher, self.binary, self.entry, self.runtime, self.finish_lib = launcher, binary, entry, runtime, \
            finish_lib
        copies = self.grid.chunks if self.grid.form == "chunks" else 1  # tree forms: one thread per kept slot
        self.buffers, self.results, self.copies, self.resets, self.staged = launcher.buffers(
            b, self.grid.chunks, cuts, copies, staged=True)
        self.nchunks = launcher.last_chunks = self.grid.chunks
        meta_k = launcher.meta_k
        self.buffers[meta_k] = device_meta(b, self.grid, lo, hi)
        self.host_meta = np.array([lo, hi, self.grid.chunks, b.lanes, *b.extents], dtype=np.int64)
        self.written = [buf.role in WRITTEN for buf in lay.buffers]
        self.cells_out = {c: self.buffers[lay.buffer_index(c, "cell")] for c in lay.cells_out}

    def fire(self) -> None:
        self.launch()
        self.commit()

    def commit(self) -> None:
        from eagle.launch import commit

        commit(self.copies, self.staged)

    def launch(self) -> None:
        from eagle.launch import PackedArgs

        for dst, src in self.staged:
            np.copyto(src, dst)
        for a, fill in self.resets:
            a.fill(fill)
        self.runtime.launch(self.binary, self.entry, self.buffers, self.written, self.grid)
        host = list(self.buffers)
        host[self.launcher.meta_k] = self.host_meta
        args = PackedArgs(host)
        self.finish_lib.finish(args.ptrs)
        err = self.buffers[self.launcher.err_k]
        if err.any():
            self.launcher.check_errors(err)
