"""What the framework bridges (eagle.torch, eagle.warp) share: a kernel's results by name and shape, from the
shapes and dtypes of the planes alone, without running anything.

PyTorch's fake tensors and torch.compile need a kernel's output shapes before (or instead of) a run, possibly as
symbolic sizes. The rules are the binder's and the launcher's own: the lane extents come from
`Binder.extents_of` and the output shapes from `Binder.output_shape` / `reduced_shape`, fed stand-ins that carry
only a shape and a dtype, so a bridge cannot drift from what `Plan.run` hands back (the torch tests check the
two against each other through opcheck's fake-tensor test).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from eagle.binding import reduced_shape

_PER_LANE = ("lane", "index")
_FLOAT_KINDS = ("lane", "table", "output", "sink")


class Shaped:
    """A plane as the shape rules see it: a shape (ints, or symbolic sizes) and a NumPy dtype."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class Results:
    """A run's results: shapes by name (sorted, as Plan.run's dict), the run's float dtype, each result's dtype
    (the float dtype, or an integer output's: Mutable[Index]), and the names that are the caller's own arrays
    (passed outputs and sinks, written in place and handed back as they are)."""

    shapes: dict[str, tuple]
    dtype: np.dtype
    aliased: frozenset[str]
    dtypes: dict[str, np.dtype]


def result_names(plan) -> tuple[tuple[str, ...], frozenset[str]]:
    """Every result name of a plan's runs, sorted, and those that are written into the caller's array when
    passed (per-lane outputs and sinks; a passed cell is copied into, and its result is a fresh array)."""
    kernel = plan.kernel
    spec = kernel.default_spec()
    names: dict[str, bool] = {}
    for k in range(kernel.stage_count):
        lay = kernel.layout(spec, k)
        red = {r.cell: r for r in lay.reductions}
        for buf in lay.buffers:
            if buf.role in ("out", "sink"):
                names[buf.name] = True
            elif buf.role == "cell" and not _internal(lay, buf.name):
                for name in _cell_names(buf.name, red[buf.name]):
                    names[name] = False
    return tuple(sorted(names)), frozenset(n for n, own in names.items() if own)


def _internal(lay, name: str) -> bool:
    return name in lay.cells_out and name not in lay.outputs


def _cell_names(name: str, r) -> list[str]:
    if name == "result" or not r.payload:
        return [name]
    return [f"{name}_{k}" for k in range(math.prod(r.payload))]


def check_dtypes(plan, planes: dict[str, Shaped]) -> np.dtype:
    """The run's float dtype, refusing what `Binder.bind` refuses with its own words (non-float values,
    non-integer keys, an integer output of another dtype than int8 to int64, two float dtypes in one run)."""
    b = plan.binder
    for name, s in planes.items():
        p = b.plane_specs[name]
        if p.kind in _FLOAT_KINDS:  # (an integer output: as_array checks its integer dtype)
            b.as_array(p, np.zeros(1, s.dtype))  # raises the binder's message for a non-float dtype
        elif p.kind == "index" and s.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise b.fail(name, f"is an Index plane and takes int32 or int64 keys, got {s.dtype}")
    return b.float_dtype(planes)


def result_shapes(plan, planes: dict[str, Shaped], grid: dict, passed: frozenset[str] = frozenset()) -> Results:
    """The results a run with these planes hands back (see the module docstring). `planes`: the array planes
    (not Params) by name; `grid`: the free grid axis' extent by label when passed (an int or a symbolic size);
    `passed`: the outputs, sinks and cells the caller passes to be written in place."""
    kernel, b = plan.kernel, plan.binder
    dtype = check_dtypes(plan, planes)
    idt = {n: s.dtype.name for n, s in planes.items() if b.plane_specs[n].kind == "index" or
           b.plane_specs[n].integer}  # (Index planes, and integer outputs passed: compiled for their dtypes)
    spec = kernel.spec_for(dtype.name, idt)
    ints = dict(spec.index_dtypes)
    ext = SimpleNamespace(extents=_extents(plan, planes, grid))
    shapes: dict[str, tuple] = {}
    dtypes: dict[str, np.dtype] = {}
    aliased = set()
    for k in range(kernel.stage_count):
        lay = kernel.layout(spec, k)
        red = {r.cell: r for r in lay.reductions}
        for buf in lay.buffers:
            name = buf.name
            if buf.role in ("out", "sink"):
                if name in passed:
                    shapes[name] = planes[name].shape
                    aliased.add(name)
                else:
                    shapes[name] = tuple(b.output_shape(name, lay, ext))
                p = b.sig.get(name)  # (None for a returned value: a float)
                dtypes[name] = np.dtype(ints[name]) if p is not None and p.integer else dtype
            elif buf.role == "cell" and not _internal(lay, name):
                r = red[name]
                shape = reduced_shape(r, ext, b.axes)
                if name == "result" or not r.payload:
                    shapes[name] = shape or (1,)
                    dtypes[name] = dtype
                else:
                    kept = shape[len(r.payload):]
                    for cell in _cell_names(name, r):
                        shapes[cell], dtypes[cell] = kept or (1,), dtype
    return Results(dict(sorted(shapes.items())), dtype, frozenset(aliased), dtypes)


def keyed_outputs(plan) -> frozenset[str]:
    """The output planes written by key (hawk.scatter(out)[k] = v): positions no lane writes keep the array's
    content, zeros when the caller leaves the plane out."""
    b = plan.binder
    return frozenset(p.name for p in b.sig.planes if b.outputs.get(p.name, "").startswith("scatter"))


def refuse_keyed(plan, how: str) -> None:
    """Sharded runs (`how`: which) refuse by name, before anything runs, an output plane written by key: its
    positions are not lanes, so no shard owns them. One device's bridges take it; a per-lane integer output
    (Mutable[Index]) stays sharded like a float one on every sharded path."""
    b, by_key = plan.binder, keyed_outputs(plan)
    for p in b.sig.planes:
        if p.kind == "output" and p.name in by_key:
            raise b.fail(p.name, f"written by key (hawk.scatter({p.name})[k] = v), has positions, not lanes, so "
                                 f"{how} do not take it: run this kernel on one device (eagle.jax.wrap or "
                                 f"eagle.torch.wrap without sharding, or eagle.deploy(kernel).run(...))")


def _extents(plan, planes: dict[str, Shaped], grid: dict) -> tuple:
    """The lane extents by the binder's rules (and with its messages). Symbolic sizes (torch.SymInt under
    torch.compile) skip `Binder.extents_of`, which would turn them into plain ints (a recompile per size): the
    extents are then read off the planes the same way, and the run itself checks that they agree."""
    b = plan.binder
    sizes = [d for s in planes.values() for d in s.shape] + list(grid.values())
    if all(isinstance(d, (int, np.integer)) for d in sizes):
        return tuple(b.extents_of({**grid, **planes}, planes))
    ext: list = [a.extent for a in b.axes]
    if b.sig.grid is not None and b.axes[0].label in grid:
        ext[0] = grid[b.axes[0].label]
    for name, s in planes.items():
        p = b.plane_specs[name]
        if p.kind in _PER_LANE or (p.kind == "output" and b.outputs.get(name) == "lane"):
            lane_shape, _ = b.lane_shape_of(p, s)
            for k, have in enumerate(lane_shape[:len(ext)]):
                if ext[k] is None:
                    ext[k] = have
    if ext[0] is None:
        return tuple(b.extents_of({}, {}))  # raises the binder's "cannot tell how many lanes" message
    return tuple(ext)
