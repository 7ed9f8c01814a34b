"""Rules for reading and writing planes: lane coordinates and extents (hawk.lane, hawk.extent), plane reads
(hawk.load, hawk.param), totals of earlier stages (hawk.cut_read), reads at other lanes or table entries (hawk.at)
and per-lane outputs (hawk.store). Wide payloads (host_emit.WIDE_PAYLOAD) move between memory and values through
loops over components (`gather`, `components`), so code size and compile time grow linearly with the payload.

The loop state comes from the context (hawk/passes/lower/context.py): `cx.lane`, `cx.L`, `cx.ext`, `cx.stride`,
`cx.known_coords` and `cx.interior` (set by the driver), `cx.bufs` (the function's buffers by (name, role)).
"""

from __future__ import annotations

from collections.abc import Iterator

from mlir import ir
from mlir.dialects import llvm, memref, scf

from hawk.ir.access import at_coords, cell_name, coord_axes, lane_axis, plane_name, store_key, stored_value
from hawk.passes.analysis import payload_of
from hawk.passes.host_emit import _SGE, _SLT, size
from hawk.passes.lower import slot_ranges
from hawk.passes.lower.context import Lowering, rule

_NE, _ULT, _UGE = 1, 6, 9  # arith.cmpi "ne", "ult", "uge"


def gather(cx: Lowering, shape, elem: ir.Type, at) -> ir.Value:
    """A wide payload read component by component in a loop: component c from `at(c)` (buffer, index)."""
    e = cx.e
    n = size(shape)
    tmp = cx.temp(n, elem)
    loop = scf.ForOp(e.c(0), e.c(n), e.c(1), [])
    with ir.InsertionPoint(loop.body):
        c = loop.induction_variable
        buf, i = at(c)
        e.store(e.load(buf, i), tmp, c)
        scf.YieldOp([])
    return e.shaped(e.vload(tmp, e.c(0), n, elem), shape)


def components(cx: Lowering, v: ir.Value, shape) -> Iterator[tuple[ir.Value, ir.Value]]:
    """(component index, value) of each component of v in row-major order: unrolled for a narrow payload;
    for a wide one, a single step inside a loop over components (v is parked in a buffer first), so the
    caller's code for one component is emitted once."""
    e = cx.e
    if not cx.is_wide(shape):
        for c, x in enumerate(e.elems(v, shape)):
            yield e.c(c), x
        return
    n = size(shape)
    elem = ir.VectorType(v.type).element_type
    tmp = cx.temp(n, elem)
    e.vstore(e.flat(v), tmp, e.c(0))
    loop = scf.ForOp(e.c(0), e.c(n), e.c(1), [])
    with ir.InsertionPoint(loop.body):
        c = loop.induction_variable
        yield c, e.load(tmp, c)
        scf.YieldOp([])


def coord(cx: Lowering, axis: str) -> ir.Value:
    if axis in cx.known_coords:
        return cx.known_coords[axis]
    k = cx.axes.index(axis)
    e = cx.e
    q = e.op("arith.divui", cx.lane, cx.stride[k]) if k < len(cx.axes) - 1 else cx.lane
    return q if k == 0 else e.op("arith.remui", q, cx.ext[k])


@rule("hawk.lane")
def lower_lane(cx: Lowering, op) -> ir.Value:
    return cx.e.to_i64(coord(cx, lane_axis(op)))


@rule("hawk.extent")
def lower_extent(cx: Lowering, op) -> ir.Value:
    """The run's extent of a Grid axis, from #meta (a sharded run's meta holds the whole grid's extents)."""
    return cx.e.to_i64(cx.ext[cx.axes.index(lane_axis(op))])


def plane_read(cx: Lowering, name: str, lane: ir.Value, t: ir.Type) -> ir.Value:
    e = cx.e
    buf = cx.buf(name)
    shape = payload_of(t)
    if not shape:
        return e.load(buf, lane)
    n = component_stride(cx, name, buf, size(shape))
    if cx.is_wide(shape):
        return gather(cx, shape, ir.VectorType(t).element_type,
                           lambda c: (buf, e.add_i(e.mul_i(c, n), lane)))
    return e.pack([e.load(buf, e.add_i(e.mul_i(e.c(c), n), lane)) for c in range(size(shape))], shape)


def component_stride(cx: Lowering, name: str, buf: ir.Value, components: int) -> ir.Value:
    """Elements between a per-lane plane's components: on the host its buffer's length over its components, taken
    once at the top of the function (a sharded run's shard holds its own lanes only: eagle/distributed), which is
    the lane count on one device; elsewhere the lane count (spirv has no memref.dim)."""
    if cx.target != "host" or cx.entry is None or not (isinstance(buf, ir.BlockArgument) and buf.owner == cx.entry):
        return cx.L
    key = ("#stride", name, buf.arg_number)
    if key not in cx.temps:
        e = cx.e
        with ir.InsertionPoint.at_block_begin(cx.entry):
            cx.temps[key] = e.op("arith.divui", e.dim(buf), e.c(components))
    return cx.temps[key]


@rule("hawk.load")
def lower_load(cx: Lowering, op) -> ir.Value:
    return plane_read(cx, plane_name(op), cx.lane, op.results[0].type)


@rule("hawk.cut_read")
def lower_cut_read(cx: Lowering, op) -> ir.Value:
    """A total an earlier stage wrote: the same value on every lane."""
    e = cx.e
    buf = cx.bufs[(cell_name(op), "cut")]
    shape = payload_of(op.results[0].type)
    kept = coord_axes(op)
    elem = ir.VectorType(op.results[0].type).element_type if shape else None
    if not kept:
        if cx.is_wide(shape):
            return gather(cx, shape, elem, lambda c: (buf, c))
        return e.pack([e.load(buf, e.c(c)) for c in range(size(shape))], shape)
    idx, n = kept_index(cx, kept)  # a total per kept position: this lane's one
    if cx.is_wide(shape):
        return gather(cx, shape, elem, lambda c: (buf, e.add_i(e.mul_i(c, n), idx)))
    return e.pack([e.load(buf, e.add_i(e.mul_i(e.c(c), n), idx)) for c in range(size(shape))], shape)


@rule("hawk.param")
def lower_param(cx: Lowering, op) -> ir.Value:
    """A Param, loaded once at the top of the function (nothing writes it): in the lane loop LLVM could not
    hoist the load (and the arithmetic on it, such as `int(n) - 1`) past the stores into outputs."""
    e = cx.e
    buf = cx.buf(plane_name(op))
    if cx.entry is None or not (isinstance(buf, ir.BlockArgument) and buf.owner == cx.entry):
        return e.load(buf, e.c(0))
    key = ("#param", plane_name(op))
    if key not in cx.temps:
        with ir.InsertionPoint.at_block_begin(cx.entry):
            cx.temps[key] = e.load(buf, e.c(0))
    return cx.temps[key]


@rule("hawk.at")
def lower_at(cx: Lowering, op) -> ir.Value:
    e = cx.e
    plane = plane_name(op)
    axes = coord_axes(op)
    coords = [e.to_index(v) for v in at_coords(op)]
    spec = cx.lay.sig.get(plane)
    if spec.kind == "table":
        idx, stride = e.c(0), 1
        for a, cv in reversed(list(zip(spec.axes, coords, strict=True))):
            idx = e.add_i(idx, e.mul_i(e.clamp(cv, e.c(a.extent)), e.c(stride)))
            stride *= a.extent
        return e.load(cx.buf(plane), idx)
    if axes == ["#"]:
        return plane_read(cx, plane, e.clamp(coords[0], cx.L), op.results[0].type)
    own = list(ir.DenseI64ArrayAttr(op.attributes["hawk.own_offsets"])) if "hawk.own_offsets" in \
        op.attributes else [None] * len(axes)
    lane = e.c(0)
    for a, cv, off in zip(axes, coords, own, strict=True):  # each coordinate clamped: the lane is in range too
        k = cx.axes.index(a)
        if off is not None and a in cx.interior and abs(off) <= cx.interior[a]:
            # own coordinate + off, off no further than the margin the driver keeps: in range. Computed from the
            # coordinate itself: a read clamped to the grid (`m.clamp(g.r + 1, 0, g.extent("r") - 1)`) is the
            # same lane here, and its clamps would keep LLVM from seeing contiguous loads
            inside = e.add_i(coord(cx, a), e.c(off))
        else:
            inside = e.clamp(cv, cx.ext[k])
        lane = e.add_i(lane, e.mul_i(inside, cx.stride[k]))
    return plane_read(cx, plane, lane, op.results[0].type)


@rule("hawk.store")
def lower_store(cx: Lowering, op) -> None:
    e = cx.e
    buf = cx.buf(plane_name(op), ("out",))
    v = stored_value(op)
    if store_key(op) is not None:
        return keyed_store(cx, plane_name(op), buf, v, store_key(op))
    shape = payload_of(v.type)
    n = component_stride(cx, plane_name(op), buf, size(shape)) if shape else None
    with slot_ranges.first_chunk(cx):  # (a slot-range stage: chunk 0 alone writes the lane outputs)
        for c, x in components(cx, v, shape):
            e.store(x, buf, e.add_i(e.mul_i(c, n), cx.lane) if shape else cx.lane)


def keyed_store(cx: Lowering, name: str, buf: ir.Value, v: ir.Value, key: ir.Value) -> None:
    """`hawk.scatter(out)[k] = v` into an output plane: v at flat position k of the caller's array, straight
    into it (no private copy: which of several lanes storing to one position wins is not specified). Key -1
    stores nothing; any other key outside [0, len) is reported through #err like a sink's bad key. On the host
    the store is unconditional, into the array or a spare slot (`spare_slot`); elsewhere under an scf.if."""
    from hawk.passes.lower.scatters import report_bad_key

    e = cx.e
    n = array_length(cx, name)
    spare = spare_slot(cx, buf)
    if spare is not None:  # no branch on the key: a lane that stores nothing stores into a slot of its own
        # one unsigned compare each (a negative key is huge), so that LLVM keeps a single branch, to the report,
        # which no valid key (-1 included) takes
        inside = e.cmpi(_ULT, key, n)
        bad = e.cmpi(_UGE, e.op("arith.addi", key, e.c(1, e.i64)), e.op("arith.addi", n, e.c(1, e.i64)))
        e.store(v, e.select(inside, buf, spare), e.select(inside, e.to_index(key), e.c(0)))
        report_bad_key(cx, name, key, bad, role="out")
        return
    inside = e.op("arith.andi", e.cmpi(_SGE, key, e.c(0, e.i64)), e.cmpi(_SLT, key, n))
    branch = scf.IfOp(inside, [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        e.store(v, buf, e.to_index(key))
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        report_bad_key(cx, name, key, e.cmpi(_NE, key, e.c(-1, e.i64)), role="out")
        scf.YieldOp([])


def spare_slot(cx: Lowering, buf: ir.Value) -> ir.Value | None:
    """On the host, a one-value buffer of `buf`'s type on the function's stack: a keyed store whose key is -1
    (most lanes of a compaction) writes there instead of branching (a branch on a data-dependent key costs a
    misprediction at every change). None elsewhere (a GPU or SPIR-V pointer cannot select between memories)."""
    t = buf.type
    if cx.target != "host" or cx.entry is None or not isinstance(t, ir.MemRefType) or t.rank != 1 \
            or t.memory_space is not None or not isinstance(t.layout, ir.AffineMapAttr) \
            or t.layout.value != ir.AffineMap.get_identity(1):
        return None
    key = ("#spare", str(t))
    if key not in cx.temps:
        with ir.InsertionPoint.at_block_begin(cx.entry):
            cx.temps[key] = memref.AllocaOp(t, [cx.e.c(1)] if t.is_dynamic_dim(0) else [], []).result
    return cx.temps[key]


def array_length(cx: Lowering, name: str) -> ir.Value:
    """The length of an output written by key, from its "len" buffer (every target can read a buffer; SPIR-V
    has no memref.dim), loaded once at the top of the function: in the lane loop LLVM could not hoist it past
    the stores into the output."""
    e = cx.e
    if cx.entry is None:
        return e.load(cx.bufs[(name, "len")], e.c(0))
    key = ("#len", name)
    if key not in cx.temps:
        with ir.InsertionPoint.at_block_begin(cx.entry):
            cx.temps[key] = e.load(cx.bufs[(name, "len")], e.c(0))
    return cx.temps[key]


def kept_index(cx: Lowering, kept) -> tuple[ir.Value, ir.Value]:
    """Linear index of this lane's kept coordinates, and the number of kept positions."""
    e = cx.e
    if cx.kept_slot is not None:  # the column driver knows it: lane - row * span
        return cx.kept_slot, cx.kept_count
    idx, n = e.c(0), e.c(1)
    for a in reversed(kept):
        k = cx.axes.index(a)
        idx = e.add_i(idx, e.mul_i(coord(cx, a), n))
        n = e.mul_i(n, cx.ext[k])
    return idx, n


AHEAD = 1024  # lanes between a group and the lanes its prefetch hints are for (8 KiB of float64: measured
# about as good as 512 and 2048 for sums and ordered scatters, docs/ordered.md)


def prefetch_ahead(cx: Lowering, body: ir.Block, lane: ir.Value, lanes: int, ahead: int = AHEAD,
                   raw: bool = False) -> None:
    """Read-prefetch hints (host) for the `lanes` lanes from `lane` + `ahead` of every scalar plane the body loads
    at its own lane: one hint per 64-byte line, the lane clamped to the chunk's last one (cx.hi - 1, inside every
    plane's buffer). Only hints: no result depends on them. Why: a loop that does more per lane than a plain
    sum's add (compensated and ordered chains, ordered and compensated scatters) left the hardware prefetcher
    behind once the data came from memory (docs/ordered.md, Prefetch); a column tile walks down rows, which the
    hardware's prefetcher does not follow at all (column_tiles). `raw`: the hints take raw addresses, past the
    buffer's end too near the chunk's (a prefetch never faults, and an address that is only an integer carries
    no bounds), for groups of several lines, where clamping each hint to the chunk's last lane took three scalar
    ops a line (a quarter of a float64 row chain's loop of 32 lanes; a scatter's groups of four lanes, a line or
    less, ran 5% slower without the clamp)."""
    if cx.target != "host":
        return
    e = cx.e
    last = None if raw else e.op("arith.subi", cx.hi, e.c(1))
    for buf, per_line in own_lane_planes(cx, body):
        if raw:
            size = ir.MemRefType(buf.type).element_type.width // 8
            start = e.add_i(cx.at_top(("address", buf), lambda buf=buf: e.address(buf)),
                            e.mul_i(e.add_i(lane, e.c(ahead)), e.c(size)))
        for k in range(0, lanes, per_line):
            if raw:
                at = e.op("arith.index_cast", e.add_i(start, e.c(k * size)) if k else start, t=e.i64)
                llvm.intr_prefetch(llvm.inttoptr(llvm.PointerType.get(), at), 0, 3, 1)
            else:
                memref.PrefetchOp(buf, [e.op("arith.minui", e.add_i(lane, e.c(ahead + k)), last)], False, 3, True)


def own_lane_planes(cx: Lowering, body: ir.Block) -> list[tuple[ir.Value, int]]:
    """(buffer, lanes per 64-byte line) of each scalar plane the body loads at its own lane."""
    names = []
    for op in body.operations:
        if op.name == "hawk.load" and not payload_of(op.results[0].type) and plane_name(op) not in names:
            names.append(plane_name(op))
    return [(cx.buf(n), 512 // ir.MemRefType(cx.buf(n).type).element_type.width) for n in names]
