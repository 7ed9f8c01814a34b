"""Check a run's arguments against a kernel and turn them into the buffers its lane function takes.

Everything the caller passes is checked here, before anything runs: names, shapes, dtypes, extents, key ranges,
the memory a run would allocate, and whether the arrays it writes are writable and overlap what it reads.
Inputs are never written: an input that is not C-contiguous with the run's dtype is copied, never converted in
place. Outputs and sinks the caller passes are written in place, so they must already have the right layout.
An input sharing memory with an array the run writes is copied first (the run reads it as it was before the
launch), except a per-lane input that is the very array of a per-lane output and is read at its own lane only
(`lane_local`): that one is updated in place. See docs/reliability.md.
"""

from __future__ import annotations

import ast
import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from eagle.errors import InputError
from eagle.interop import as_host_array
from hawk.abi.layout import Layout, Reduction, Spec, make_spec
from hawk.abi.signature import PlaneSpec, Signature

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))  # dtype equality is cheap; dtype.name is not
_INDEX = (np.dtype(np.int32), np.dtype(np.int64))
_INT_OUTPUTS = (np.dtype(np.int8), np.dtype(np.int16), *_INDEX)  # what a Mutable[Index] array may be
MAX_LANES = (1 << 63) - 1  # lane indices are 64-bit integers in compiled code


def physical_memory() -> int | None:
    """Bytes of physical memory on this machine (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


_PHYSICAL = physical_memory()


def read_at(kernel) -> frozenset[str]:
    """The names the kernel's body reads with `.at(...)` (planes read at other lanes, or Tables by key)."""
    return frozenset(n.func.value.id for n in ast.walk(kernel.source.tree)
                     if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "at"
                     and isinstance(n.func.value, ast.Name))


def lane_local_inputs(kernel) -> frozenset[str]:
    """The per-lane input planes of a single-stage kernel that no `.at` reads: each lane reads them at its own
    lane only, so one may be the very array of a per-lane output and be updated in place. Empty for a split
    kernel (a later stage reads its inputs again after an earlier one wrote)."""
    if kernel.stage_count != 1:
        return frozenset()
    at = read_at(kernel)
    return frozenset(p.name for p in kernel.signature.planes if p.kind == "lane" and p.name not in at)


@dataclass
class Bound:
    """A run's arguments, checked: the specialisation, the lane extents and every buffer by (name, role)."""

    spec: Spec
    extents: tuple[int, ...]
    lanes: int
    dtype: np.dtype
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # input planes by name (contiguous)
    given: dict[str, np.ndarray] = field(default_factory=dict)  # outputs/sinks the caller passed
    device: dict = field(default_factory=dict)  # device planes' buffers (eagle/targets/device_planes.py)


class Binder:
    """Checks runs of one kernel, known by its name, signature and output modes (no compiler needed)."""

    def __init__(self, name: str, sig: Signature, outputs: dict[str, str],
                 lane_local: frozenset[str] = frozenset(), mixed: bool = False, cell_slots: int = 0,
                 sae: bool = False, fma_pipes: bool = False, mxcsr: bool = False):
        self.name, self.sig, self.outputs = name, sig, outputs
        self.cell_slots = cell_slots  # the specs' Spec.cell_slots (a host plan's: CELL_SLOTS)
        self.sae = sae  # the specs' Spec.sae (a host plan's on an x86-64 CPU with AVX-512F)
        self.fma_pipes = fma_pipes  # the specs' Spec.fma_pipes (a host plan's on AMD Zen)
        self.mxcsr = mxcsr  # the specs' Spec.mxcsr (a host plan's on x86-64 with AVX and FMA)
        # mixed: a per-lane float output may have another float dtype than the run's (compiled per dtype: a Plan's
        # binder); elsewhere (artifacts, built for whole-run dtypes) every float plane shares the run's dtype
        self.mixed = mixed
        self.lane_local = lane_local  # per-lane inputs a per-lane output may be the very array of (see above)
        self.axes = self.sig.lane_axes()
        self._specs: dict = {}
        self._out_dtypes: dict = {}  # out_dtype's latest answer per output (Plan.run asks at every run)
        # what every bind checks against, made once
        self._labels = {a.label for a in self.axes} if self.sig.grid is not None else set()
        self.plane_specs = {p.name: p for p in self.sig.planes if p.kind != "grid"}
        self._required = [p.name for p in self.plane_specs.values() if p.kind in ("lane", "index", "param", "table")]
        # values each lane adds to what a run allocates: its per-lane outputs (when the caller does not pass them)
        self._per_lane = [(n, math.prod(self._payload(n))) for n, mode in outputs.items() if mode == "lane"]
        self._small = (1 << 30) // (8 * max(1, sum(size for _, size in self._per_lane)))  # lanes surely fine

    def _payload(self, name: str) -> tuple[int, ...]:
        if name == "result":
            return self.sig.returns.shape if self.sig.returns is not None else ()
        p = self.sig.get(name)
        return p.payload.shape if p is not None else ()

    def fail(self, plane: str | None, msg: str) -> InputError:
        who = f"plane '{plane}' of " if plane else ""
        return InputError(f"{who}kernel '{self.name}': {msg}")

    # ---- step 1: names and dtypes -------------------------------------------------------------------
    def bind(self, kwargs: dict) -> Bound:
        labels, planes = self._labels, self.plane_specs
        unknown = [n for n in kwargs if n not in planes and n not in labels]
        if unknown:
            extra = f" and grid axes {sorted(labels)}" if labels else ""
            raise self.fail(None, f"got unknown argument '{unknown[0]}'; it takes planes {sorted(planes)}{extra}")
        missing = [n for n in self._required if n not in kwargs]
        if missing:
            raise self.fail(missing[0], "is missing: pass it by name to run(...)")
        arrays = {n: self.as_array(planes[n], kwargs[n]) for n in kwargs if n in planes}
        dtype, own = self.run_dtypes(arrays) if self.mixed else (self.float_dtype(arrays), {})
        idt = {}
        for p in planes.values():
            if p.kind == "index":
                a = arrays[p.name]
                if a.dtype not in _INDEX:
                    raise self.fail(p.name, f"is an Index plane and takes int32 or int64 keys, got {a.dtype}")
                idt[p.name] = a.dtype.name
            elif p.integer and p.name in arrays:  # an integer output: compiled for the array's dtype
                idt[p.name] = arrays[p.name].dtype.name
        key = (dtype.char, tuple(idt.items()), tuple(own.items()))  # every dtype the code is compiled for
        spec = self._specs.get(key)
        if spec is None:
            spec = self._specs[key] = make_spec(self.sig, dtype.name, idt, float_outputs=own,
                                                        cell_slots=self.cell_slots, sae=self.sae,
                                                        fma_pipes=self.fma_pipes, mxcsr=self.mxcsr)
        extents = self.extents_of(kwargs, arrays)
        b = Bound(spec, extents, math.prod(extents), dtype)
        self._check_size(b)
        for name, a in arrays.items():
            p = planes[name]
            if p.kind in ("output", "sink"):
                b.given[name] = a
            else:
                b.arrays[name] = self._input(p, a, b)
        if b.given:
            self._check_written(b)
        return b

    def as_array(self, p: PlaneSpec, v) -> np.ndarray:
        if p.kind == "param":
            a = np.asarray(v)
            if a.size != 1:
                raise self.fail(p.name, f"is a Param and takes one number, got an array of shape {a.shape}")
            if a.dtype.kind not in "fiub":
                got = (f"the integer {v}, beyond int64 (a Param is read as a float: pass float({v}))"
                       if isinstance(v, int) else f"{type(v).__name__} {a.dtype}")
                raise self.fail(p.name, f"is a Param and takes a number, got {got}")
            return a
        if p.kind in ("output", "sink") and not isinstance(v, np.ndarray):
            raise self.fail(p.name, f"is written in place, so pass a NumPy array (got {type(v).__name__})")
        a = v if isinstance(v, np.ndarray) else as_host_array(v, p.name, self.name)  # DLPack, NumPy-likes
        ma = sys.modules.get("numpy.ma")  # (never imported here: a masked array exists only once it was)
        if ma is not None and isinstance(a, ma.MaskedArray) and ma.is_masked(a):  # a kernel reads hidden values
            raise self.fail(p.name, "is a masked array with masked entries; a kernel reads every value, masked "
                                    "or not: pass a.filled(value), or the mask as a plane and where= on it")
        if p.integer:
            if a.dtype not in _INT_OUTPUTS:
                raise self.fail(p.name, f"is Mutable[Index], an integer output, and takes an int8, int16, int32 or "
                                        f"int64 array, got {a.dtype} (allocate it with np.zeros(n, dtype=np.int64), "
                                        f"or omit it; an unsigned array can be passed as its signed view, "
                                        f"a.view(np.int{8 * a.dtype.itemsize}), the same bits)")
            return a
        if p.kind in ("lane", "table", "output", "sink") and a.dtype not in _FLOATS:
            how = "np.asarray(..., dtype=np.float64)" if isinstance(v, (list, tuple)) else ".astype(np.float64)"
            raise self.fail(p.name, f"takes float32 or float64 values, got {a.dtype} (convert with {how})")
        return a

    def float_dtype(self, arrays: dict[str, np.ndarray]) -> np.dtype:
        """The one float dtype of every float plane (inputs, outputs, sinks) of a run through a door that keeps
        one: an artifact (built per float dtype; its binder is not `mixed`) or a JAX/torch bridge call (through
        eagle.bridge.check_dtypes, on a Plan's binder). Two float dtypes are refused, naming both planes and
        what to do (Plan.run promotes instead: run_dtypes)."""
        seen: dict[np.dtype, str] = {}
        for n, a in arrays.items():
            p = self.sig.get(n)
            if p.kind in ("lane", "table", "output", "sink") and not p.integer:
                seen.setdefault(a.dtype, n)
        if len(seen) > 1:
            (d1, n1), (d2, n2) = list(seen.items())[:2]
            door = "a call through the JAX or torch bridge" if self.mixed else "an artifact, built per float dtype,"
            raise self.fail(n2, f"is {d2} but plane '{n1}' is {d1}: {door} runs every float plane in one dtype; "
                                f"convert one of them (.astype(np.float64) widens float32 exactly), or run the "
                                f"kernel through eagle.deploy(...).run, which promotes float32 inputs beside "
                                f"float64 ones to float64")
        return next(iter(seen), np.dtype(np.float64))

    def run_dtypes(self, arrays: dict[str, np.ndarray]) -> tuple[np.dtype, dict[str, str]]:
        """The run's float dtype and the per-lane float outputs passed with another float dtype (name -> dtype).

        The run computes in its float inputs' dtype (per-lane planes and tables), promoted as NumPy, torch and
        JAX (x64) promote: float64 when any float input is float64, else float32. A float32 input of a float64
        run is widened (exactly) into a float64 copy by `_input`, once per bind, so every value in the body,
        sums included, is float64. With no float input, the widest float output passed (float64 when none
        is): a Param is a number, rounded once at the store. A per-lane output (stored per lane or by key)
        takes the dtype of the array passed for it and each store converts into it; a sink or a total (cell)
        accumulates in the run's dtype, so it must have that one."""
        sig, outs = self.sig, self.outputs
        inputs = {n: a for n, a in arrays.items() if sig.get(n).kind in ("lane", "table")}
        written = {n: a for n, a in arrays.items() if sig.get(n).kind in ("output", "sink") and not sig.get(n).integer}
        if inputs:
            dtype = _FLOATS[1] if any(a.dtype == _FLOATS[1] for a in inputs.values()) else _FLOATS[0]
        else:
            dtype = max((a.dtype for a in written.values()), key=lambda d: d.itemsize, default=np.dtype(np.float64))
        own = {}
        for n, a in written.items():
            if a.dtype == dtype:
                continue
            mode = outs.get(n, "")
            if sig.get(n).kind == "output" and (mode == "lane" or mode.startswith("scatter")):
                own[n] = a.dtype.name
                continue
            what = "a sink" if sig.get(n).kind == "sink" else "a total (a cell)"
            src = f"its float inputs' ({', '.join(sorted(inputs))})" if inputs else "its widest output's"
            raise self.fail(n, f"is {what}, which adds up in the run's float dtype {dtype} ({src}), got {a.dtype}: "
                               f"pass a {dtype} array (a per-lane output may have another float dtype; a sink or "
                               f"total may not)")
        return dtype, own

    # ---- step 2: the lane extents ---------------------------------------------------------------------
    def lane_shape_of(self, p: PlaneSpec, a: np.ndarray) -> tuple[tuple[int, ...], str]:
        """The lane part of a per-lane plane's shape, and how its payload was laid out."""
        pay = p.payload.shape
        n = len(self.axes)
        if p.kind == "index" or not pay:
            return a.shape, "scalar"
        if a.ndim == len(pay) + n and a.shape[:len(pay)] == pay:
            return a.shape[len(pay):], "full"
        if a.ndim == 1 + n and a.shape[0] == math.prod(pay):
            return a.shape[1:], "flat"
        want = (math.prod(pay), *["lanes"] * n)
        raise self.fail(p.name, f"is {p.describe()} and must be shaped {want} (payload first, lanes last), "
                                f"got {a.shape}")

    def extents_of(self, kwargs: dict, arrays: dict[str, np.ndarray]) -> tuple[int, ...]:
        ext: list[int | None] = [a.extent for a in self.axes]
        if self.sig.grid is not None:
            first = self.axes[0]
            if first.label in kwargs:
                v = kwargs[first.label]
                if first.extent is not None:
                    raise self.fail(None, f"grid axis '{first.label}' is fixed at {first.extent}; do not pass it")
                if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                    raise self.fail(None, f"grid axis '{first.label}' takes a positive integer extent, got {v!r}")
                ext[0] = int(v)
        for n, a in arrays.items():
            p = self.sig.get(n)
            if p.kind in ("lane", "index") or (p.kind == "output" and self.outputs.get(n) == "lane"):
                lane_shape, _ = self.lane_shape_of(p, a)
                if len(lane_shape) != len(self.axes):
                    raise self.fail(n, f"has {len(lane_shape)} lane axes but the kernel has "
                                       f"{len(self.axes)} ({[x.label for x in self.axes]}); shape {a.shape}")
                for k, (have, want) in enumerate(zip(lane_shape, ext, strict=True)):
                    label = self.axes[k].label
                    if want is None:
                        ext[k] = have
                    elif have != want:
                        source = "fixed by the kernel" if self.axes[k].extent is not None else "bound earlier"
                        raise self.fail(n, f"has extent {have} on lane axis '{label}' but that axis is {want} "
                                           f"({source}); shape {a.shape}")
        if ext[0] is None:
            hint = f"pass {self.axes[0].label}=<extent>" if self.sig.grid is not None else "pass a per-lane plane"
            raise self.fail(None, f"cannot tell how many lanes to run: {hint}")
        return tuple(int(e) for e in ext)

    # ---- step 3: inputs ----------------------------------------------------------------------------------
    def _input(self, p: PlaneSpec, a: np.ndarray, b: Bound) -> np.ndarray:
        if p.kind == "param":
            with np.errstate(over="ignore"):  # a float64 number past float32's range is inf in a float32 run
                return np.array([a.reshape(-1)[0]], dtype=b.dtype)
        if p.kind == "table":
            want = tuple(x.extent for x in p.axes)
            if a.shape != want:
                raise self.fail(p.name, f"is {p.describe()} and must be shaped {want}, got {a.shape}")
            return np.ascontiguousarray(a, dtype=b.dtype).reshape(-1)
        if p.kind == "index":
            return np.ascontiguousarray(a).reshape(-1)
        return np.ascontiguousarray(a, dtype=b.dtype).reshape(-1)

    def _check_size(self, b: Bound) -> None:
        """Refuse a lane count that overflows 64-bit lane indices, or per-lane outputs larger than the machine's
        memory, before anything is allocated (NumPy would raise a bare MemoryError, or worse, swap)."""
        if b.lanes <= self._small:  # the common case: surely fine, nothing to compute
            return
        axis = self.axes[0].label
        where = f"grid axis '{axis}' = {b.extents[0]} gives {b.lanes} lanes ({' x '.join(map(str, b.extents))})"
        if b.lanes > MAX_LANES:
            raise self.fail(None, f"{where}, more than 64-bit lane indices reach ({MAX_LANES}): bind a smaller "
                                  f"extent")
        per_lane = sum(size for name, size in self._per_lane if name not in b.given)
        need = b.lanes * per_lane * b.dtype.itemsize
        if _PHYSICAL is not None and need > _PHYSICAL:
            raise self.fail(None, f"{where}; its per-lane outputs would need {need} bytes ({need / 2**30:.1f} GiB) "
                                  f"but this machine has {_PHYSICAL} bytes ({_PHYSICAL / 2**30:.1f} GiB) of memory: "
                                  f"bind a smaller extent and run the lanes in pieces")

    def _check_written(self, b: Bound) -> None:
        """The arrays the caller passed for the run to write: writable, not overlapping each other, and not
        overlapping an input the run reads (such an input is copied first, unless it is lane-local, above)."""
        outs = b.given
        self.check_writable(outs, "run", strided_later=True)
        for name, x in b.arrays.items():
            for out, o in outs.items():
                if np.may_share_memory(x, o) and not self._same_lanes(name, x, out, o):
                    b.arrays[name] = x.copy()  # read as it was before the launch, as `.at` and tables promise
                    break

    def check_writable(self, outs: dict[str, np.ndarray], door: str, strided_later: bool = False) -> None:
        """The arrays the caller passed for a `door` ("run", "loop") to write: writable, and not sharing memory
        with one another (the result would depend on which is written last). `strided_later`: a strided array is
        refused afterwards for its layout, so only C-contiguous ones are compared here."""
        for name, a in outs.items():
            if not a.flags.writeable:
                raise self.fail(name, "is written in place but the array passed is read-only (writeable=False): "
                                      f"pass a writable array, or omit it and read the result the {door} hands back")
        seen = list(outs.items())
        for k, (name, a) in enumerate(seen):
            for other, o in seen[:k]:
                if (not strided_later or a.flags.c_contiguous and o.flags.c_contiguous) and np.may_share_memory(a, o):
                    raise self.fail(name, f"shares memory with plane '{other}', which this {door} also writes: the "
                                          "result would depend on which is written last; pass separate arrays")

    def _same_lanes(self, name: str, x: np.ndarray, out: str, o: np.ndarray) -> bool:
        """Whether input `name` (flat, contiguous) is the very array of per-lane output `out`, and each lane reads
        it at its own lane only: then lane i reads its values before it writes them, and nobody else reads them."""
        return (name in self.lane_local and self.outputs.get(out) == "lane" and o.flags.c_contiguous
                and x.dtype == o.dtype and x.size == o.size and np.may_share_memory(x[:1], o.reshape(-1)[:1]))

    # ---- step 4: outputs and sinks ---------------------------------------------------------------------
    def output_shape(self, name: str, layout: Layout, b: Bound) -> tuple[int, ...]:
        """The shape handed back for a per-lane output or sink."""
        p = self.sig.get(name)
        if name == "result" or (p is not None and p.kind == "output"):
            shape = self.sig.returns.shape if name == "result" else p.payload.shape
            return (*shape, *b.extents)
        pay = layout.sinks.get(name, ())
        return (*pay, *(a.extent for a in p.axes))

    def given_buffer(self, name: str, shape: tuple[int, ...], b: Bound,
                     alt: tuple[int, ...] | None = None) -> np.ndarray | None:
        """The caller's array for an output, checked for writing in place (None when not passed)."""
        a = b.given.get(name)
        if a is None:
            return None
        want = self.out_dtype(name, b)
        if a.dtype != want:
            raise self.fail(name, f"is written in place and must be {want} like the run's other planes, "
                                  f"got {a.dtype}")
        if self.outputs.get(name, "").startswith("scatter"):  # written by key: any length, flat positions
            shape = alt = a.shape
        if a.shape != shape and a.shape != alt:
            raise self.fail(name, f"must be shaped {shape}, got {a.shape}")
        if not a.flags.c_contiguous or not a.flags.writeable:
            raise self.fail(name, "is written in place and must be a writable C-contiguous array "
                                  "(pass np.ascontiguousarray(...) and read the result back)")
        return a

    def out_dtype(self, name: str, b: Bound) -> np.dtype:
        """The dtype of an output's array: the run's float dtype, a float output's own (Spec.float_outputs), or
        an integer output's (int8, int16, int32 or int64)."""
        known = self._out_dtypes.get(name)  # (spec, run dtype, dtype) of the latest run that asked
        if known is not None and known[0] is b.spec and known[1] is b.dtype:
            return known[2]
        p = self.sig.get(name)
        if p is not None and p.integer:
            dt = np.dtype(dict(b.spec.index_dtypes)[name])
        elif b.spec.float_outputs:
            dt = np.dtype(dict(b.spec.float_outputs).get(name, b.dtype))
        else:
            dt = b.dtype
        self._out_dtypes[name] = (b.spec, b.dtype, dt)
        return dt

    def key_limit(self, sink: str, pos: int, b: Bound) -> tuple[int, str]:
        """The slots key position `pos` of a sink reaches, and how the message names them; for an output plane
        written by key, the length of its array (the caller's, else the lane count)."""
        p = self.sig.get(sink)
        if p.kind == "output":
            a = b.given.get(sink)
            n = a.size if a is not None else b.lanes
            return n, f"output plane '{sink}' ({n} values: positions 0..{n - 1}, or -1 to write nothing)"
        n = p.axes[pos].extent
        return n, f"sink '{sink}' (axis '{p.axes[pos].label}' has {n} slots: keys 0..{n - 1})"

    # ---- step 5: keys --------------------------------------------------------------------------------
    def check_keys(self, layout: Layout, b: Bound) -> None:
        for plane, uses in layout.index_keys.items():
            keys = b.arrays[plane]
            if keys.size == 0:
                continue
            lo, hi = int(keys.min()), int(keys.max())
            for sink, pos in uses:
                n, what = self.key_limit(sink, pos, b)
                if lo < -1 or hi >= n:  # key -1 adds nothing under every policy
                    bad = lo if lo < -1 else hi
                    raise self.fail(plane, f"holds key {bad}, outside {what}")
        if os.environ.get("HAWK_CHECK_SORTED", "") not in ("", "0"):
            for p in self.sig.planes:
                if p.kind == "index" and p.sorted:
                    k = b.arrays[p.name]
                    runs = 1 + int(np.count_nonzero(k[1:] != k[:-1])) if k.size else 0
                    if runs != np.unique(k).size:
                        raise self.fail(p.name, "is declared Sorted[Index] but equal keys are not grouped "
                                                "together (sort the keys, or declare it Index)")


def reduced_shape(r: Reduction, b: Bound, axes) -> tuple[int, ...]:
    labels = [a.label for a in axes]
    kept = tuple(b.extents[labels.index(a)] for a in r.kept)
    return (*r.payload, *kept)
