"""Facts read off a hawk module that the lowering and the runtime both need: the kernel's layout.

`Layout` is the contract between the compiled code and eagle: which buffers the lane function takes, in which
order, with which element type and size. Lowering and runtime build it from the same analysis, so they cannot
disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir

from hawk.ir.dialect import attr_str, attr_strs, is_hawk
from hawk.signature import Signature


@dataclass(frozen=True)
class Reduction:
    kind: str  # sum | mean | max | min
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
    role: str  # in | index | param | table | out | cell | count | sink | scratch | meta | err
    dtype: str  # 'f' (the kernel's float), 'i32', 'i64'


@dataclass
class Layout:
    name: str
    sig: Signature
    outputs: dict[str, str]  # output name -> 'lane' | 'cell'
    reductions: list[Reduction]
    sinks: dict[str, tuple[int, ...]]  # sink -> payload shape of what is scattered into it
    index_keys: dict[str, list[tuple[str, int]]]  # Index plane used directly as a key -> (sink, key position)
    buffers: list[Buffer] = field(default_factory=list)

    @property
    def width(self) -> int:
        """Accumulators per chunk for the reductions over every lane (the partials one chunk writes)."""
        return sum(_size(r.payload) + (r.kind == "mean") for r in self.reductions if not r.kept)

    def buffer_index(self, name: str, role: str | None = None) -> int:
        for k, b in enumerate(self.buffers):
            if b.name == name and (role is None or b.role == role):
                return k
        raise KeyError(name)


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def payload_of(t: ir.Type) -> tuple[int, ...]:
    return tuple(ir.VectorType(t).shape) if isinstance(t, ir.VectorType) else ()


def analyse(module: ir.Module, sig: Signature, outputs: dict[str, str], name: str,
            itypes: dict[str, str]) -> Layout:
    """Read reductions, sinks and keys off the hawk func and fix the buffer order."""
    reductions: list[Reduction] = []
    sinks: dict[str, tuple[int, ...]] = {}
    index_keys: dict[str, list[tuple[str, int]]] = {}
    axes = [a.label for a in sig.lane_axes()]

    def visit(op):
        if is_hawk(op, "reduce"):
            over = tuple(attr_strs(op, "over"))
            cells = [u.owner for u in op.results[0].uses if is_hawk(u.owner, "cell")]
            cell = attr_str(cells[0], "name") if cells else ""
            reductions.append(Reduction(attr_str(op, "kind"), over, tuple(a for a in axes if a not in over),
                                        attr_str(op, "policy"), payload_of(op.results[0].type), cell,
                                        len(op.operands) > 1))
        elif is_hawk(op, "scatter"):
            sink = attr_str(op, "sink")
            sinks[sink] = payload_of(op.operands[0].type)
            for pos, k in enumerate(list(op.operands)[1:]):
                src = _key_source(k)
                if src is not None:
                    uses = index_keys.setdefault(src, [])
                    if (sink, pos) not in uses:
                        uses.append((sink, pos))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    lay = Layout(name, sig, dict(outputs), reductions, sinks, index_keys)
    bufs = lay.buffers
    for p in sig.planes:
        if p.kind == "lane":
            bufs.append(Buffer(p.name, "in", "f"))
        elif p.kind == "index":
            bufs.append(Buffer(p.name, "index", itypes[p.name]))
        elif p.kind == "param":
            bufs.append(Buffer(p.name, "param", "f"))
        elif p.kind == "table":
            bufs.append(Buffer(p.name, "table", "f"))
    for p in sig.planes:
        if p.kind == "output":
            bufs.append(Buffer(p.name, "cell" if outputs.get(p.name) == "cell" else "out", "f"))
    if "result" in outputs:
        bufs.append(Buffer("result", "cell" if outputs["result"] == "cell" else "out", "f"))
    for r in reductions:
        if r.kind == "mean" and r.kept:
            bufs.append(Buffer(r.cell, "count", "f"))
    for p in sig.planes:
        if p.kind == "sink":
            bufs.append(Buffer(p.name, "sink", "f"))
    bufs += [Buffer("#scratch", "scratch", "f"), Buffer("#meta", "meta", "i64"), Buffer("#err", "err", "i64")]
    return lay


def _key_source(v: ir.Value) -> str | None:
    """The Index plane a key comes straight from (through a sign extension), if any."""
    owner = v.owner
    if isinstance(owner, ir.Block):
        return None
    if owner.name == "arith.extsi":
        return _key_source(owner.operands[0])
    if is_hawk(owner, "load"):
        return attr_str(owner, "plane")
    return None
