"""eagle.deploy(kernel) -> Plan: binds planes, allocates outputs and cells, launches the compiled code.

A host run launches `<k>_lanes` over chunks of lanes (on a thread pool when the kernel's writes cannot collide),
then `<k>_finish`, which combines the chunks' partial totals in chunk order into the cells.
"""

from __future__ import annotations

import ctypes
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from eagle import cache
from eagle.array import Array
from eagle.binding import Binder, Bound, reduced_shape
from eagle.errors import InputError
from eagle.targets import host
from hawk.kernel import Kernel
from hawk.passes.analysis import Layout

_IDENT = {"sum": 0.0, "mean": 0.0, "max": -np.inf, "min": np.inf}
_MIN_CHUNK = 1 << 16
_POOL: ThreadPoolExecutor | None = None


def _pool(n: int) -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None or _POOL._max_workers < n:
        _POOL = ThreadPoolExecutor(max_workers=n, thread_name_prefix="eagle")
    return _POOL


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


class _Args:
    """The packed argument array of one call: 5 slots (ptr, ptr, offset, size, stride) per buffer."""

    def __init__(self, buffers: list[np.ndarray]):
        n = 5 * len(buffers)
        self.vals = (ctypes.c_int64 * n)()
        self.ptrs = (ctypes.c_void_p * n)()
        base = ctypes.addressof(self.vals)
        for i in range(n):
            self.ptrs[i] = base + 8 * i
        self.keep = buffers
        for k, a in enumerate(buffers):
            p = a.ctypes.data
            self.vals[5 * k:5 * k + 5] = [p, p, 0, a.size, 1]


class Plan:
    """A kernel deployed for a target. `run(**planes, **extents)` validates, launches and returns results."""

    def __init__(self, kernel: Kernel, target: str = "host", threads: int | None = None):
        if not isinstance(kernel, Kernel):
            raise TypeError(f"eagle.deploy takes a @hawk.kernel, got {type(kernel).__name__}")
        if target not in ("host", "auto", "cpu"):
            raise ValueError(f"target {target!r} is not available in this release; use 'host'")
        self.kernel, self.target = kernel, "host"
        self.threads = threads if threads is not None else int(os.environ.get("EAGLE_THREADS", os.cpu_count() or 1))
        if self.threads < 1:
            raise ValueError("threads must be at least 1")
        self.binder = Binder(kernel)

    def __repr__(self) -> str:
        return f"<eagle.Plan {self.kernel.name} target={self.target} threads={self.threads}>"

    def library(self, b: Bound) -> host.HostLibrary:
        spec = b.spec
        text = self.kernel.hawk_ir(spec)
        key = cache.key(text, repr(spec), self.target, "opt3")
        return host.load(key, self.kernel.name, lambda: self.kernel.lowered(spec).llvm_ir)

    # ---- run ----------------------------------------------------------------------------------------
    def run(self, **kwargs):
        b = self.binder.bind(kwargs)
        layout = self.kernel.layout(b.spec)
        self.binder.check_keys(layout, b)
        lib = self.library(b)
        buffers, results, copies = self._buffers(layout, b)
        self._launch(lib, layout, b, buffers)
        err = buffers[layout.buffer_index("#err")]
        if err[0]:
            sink = layout.buffers[int(err[2])].name
            raise InputError(f"sink '{sink}' of kernel '{self.kernel.name}': {int(err[0])} lane(s) scattered to "
                             f"a key outside it (first bad key: {int(err[1])}); valid keys are 0.."
                             f"{self.kernel.signature.get(sink).axes[0].extent - 1} on each axis")
        for dst, src in copies:
            np.copyto(dst, src.reshape(dst.shape))
        if len(results) == 1:
            return next(iter(results.values()))
        return {k: results[k] for k in sorted(results)}

    def _buffers(self, layout: Layout, b: Bound):
        """Every buffer in layout order, plus the results by name and (caller array, result) copies."""
        bufs: list[np.ndarray] = []
        results: dict[str, Array] = {}
        copies = []
        red = {r.cell: r for r in layout.reductions}
        nchunks = self._chunks(layout, b)
        for buf in layout.buffers:
            role, name = buf.role, buf.name
            if role in ("in", "index", "param", "table"):
                bufs.append(b.arrays[name])
            elif role in ("out", "sink"):
                shape = self.binder.output_shape(name, layout, b)
                p = self.kernel.signature.get(name)
                alt = None
                if p is not None and p.kind == "output" and len(p.payload.shape) == 2:
                    alt = (_prod(p.payload.shape), *b.extents)
                a = self.binder.given_buffer(name, shape, b, alt)
                if a is None:
                    a = np.zeros(shape, dtype=b.dtype)
                bufs.append(a.reshape(-1))
                results[name] = Array(a)
            elif role == "cell":
                r = red[name]
                shape = reduced_shape(r, b, self.kernel.signature.lane_axes())
                a = np.full(_prod(shape), _IDENT[r.kind], dtype=b.dtype)
                bufs.append(a)
                self._cell_results(name, r, a, shape, b, results, copies)
            elif role == "count":
                r = red[name]
                bufs.append(np.zeros(_prod(reduced_shape(r, b, self.kernel.signature.lane_axes())[len(r.payload):]),
                                     dtype=b.dtype))
            elif role == "scratch":
                bufs.append(np.zeros(max(layout.width, 1) * nchunks, dtype=b.dtype))
            elif role == "meta":
                bufs.append(np.array([0, b.lanes, 0, b.lanes, *b.extents], dtype=np.int64))
            elif role == "err":
                bufs.append(np.zeros(3, dtype=np.int64))
        return bufs, results, copies

    def _cell_results(self, name, r, a, shape, b: Bound, results, copies):
        given = b.given.get(name)
        if name == "result":
            out = a.reshape(shape if shape else (1,))
            results[name] = Array(out)
        elif not r.payload:
            out = a.reshape(shape if shape else (1,))
            results[name] = Array(out)
        else:
            per = a.reshape(_prod(r.payload), -1)
            kept = shape[len(r.payload):]
            for k in range(per.shape[0]):
                results[f"{name}_{k}"] = Array(per[k].reshape(kept if kept else (1,)))
            out = a.reshape(shape)
        if given is not None:
            if given.dtype != b.dtype or given.size != a.size or not given.flags.c_contiguous:
                raise InputError(f"plane '{name}' of kernel '{self.kernel.name}': the cell is written in place and "
                                 f"must be a C-contiguous {b.dtype} array of {a.size} element(s), got "
                                 f"{given.dtype} {given.shape}")
            copies.append((given, out))

    def _chunks(self, layout: Layout, b: Bound) -> int:
        shared_writes = any(r.kept for r in layout.reductions) or bool(layout.sinks)
        if shared_writes or self.threads == 1:
            return 1
        return max(1, min(self.threads, b.lanes // _MIN_CHUNK))

    def _launch(self, lib: host.HostLibrary, layout: Layout, b: Bound, buffers: list[np.ndarray]) -> None:
        nchunks = self._chunks(layout, b)
        meta_k = layout.buffer_index("#meta")
        if nchunks == 1:
            args = _Args(buffers)
            lib.lanes(args.ptrs)
        else:
            step = -(-b.lanes // nchunks)
            calls = []
            for c in range(nchunks):
                lo, hi = c * step, min(b.lanes, (c + 1) * step)
                bufs = list(buffers)
                bufs[meta_k] = np.array([lo, hi, c, b.lanes, *b.extents], dtype=np.int64)
                calls.append(_Args(bufs))
            list(_pool(nchunks).map(lambda a: lib.lanes(a.ptrs), calls))
        meta = buffers[meta_k]
        meta[2] = nchunks
        lib.finish(_Args(buffers).ptrs)


def deploy(kernel: Kernel, target: str = "host", threads: int | None = None) -> Plan:
    """Build a plan that runs `kernel` on `target` ('host' for the CPU)."""
    return Plan(kernel, target, threads)
