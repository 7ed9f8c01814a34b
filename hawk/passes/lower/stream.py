"""Streaming stores for large per-lane outputs (host).

A store to a line that is not in the cache first reads the line (read for ownership), so a lane loop whose outputs
are larger than the caches moves every output byte twice over the memory bus. Non-temporal stores write whole
lines without reading them (a 1e7-lane float64 map on two threads here: 3.9 ms with plain stores, 2.8 ms
streaming). They pay off only past the caches: below, the lines stay cached for whoever reads the output next and
streaming them out costs (2x slower at 1e5 lanes, break-even near 40 MB of output on this machine). So the choice is
made per launch, from the bytes of the stage's per-lane outputs (`flag`: at least STREAM_BYTES).

A lane loop the lowering marks (`mark`: the flat loop, a grid's row loops...) whose body stores per-lane outputs at
its own lane (a vector or matrix payload's component c at c * stride + lane) becomes (`stream_loops`)

    if streaming: for each block of BLOCK lanes: the loop over the block, those stores into a local buffer each
                  (they stay in L1); then each buffer into its output: plain stores up to the output's next
                  64-byte line, aligned non-temporal vector stores of whole lines, plain stores for the rest
    else:         the loop as it was

and the function ends, when streaming, with a fence: non-temporal stores are weakly ordered, and the fence makes
them visible before the chunk reports that it is done. The values stored are the same on both paths: only how they
reach memory differs, so no result depends on the choice.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import llvm, scf, vector

from hawk.ir.access import int_constant
from hawk.passes.lower import planes
from hawk.passes.lower.context import LINE, Lowering
from hawk.passes.scalarize import LANES

STREAM_BYTES = 48 << 20  # a launch's per-lane outputs of at least this many bytes are streamed
BLOCK = 1024  # lanes a streamed block buffers at most (8 KiB of float64 an output: in L1 with room to spare)
BUFFER_BYTES = 32 << 10  # ... and its buffers' bytes (a matrix payload's components: fewer lanes a block)
_PURE = ("arith.constant", "arith.addi", "arith.muli", "arith.divui", "arith.index_cast")
MARK = "hawk.stream"
_UGE, _ULT = 9, 6  # arith.cmpi


def mark(cx: Lowering, loop: scf.ForOp) -> None:
    """Let stream_loops stream this lane loop's per-lane stores, and scalarize-payloads split its payload
    arithmetic (hawk/passes/scalarize.py), host lowerings only."""
    if cx.target == "host":
        loop.operation.attributes[MARK] = ir.UnitAttr.get()
        loop.operation.attributes[LANES] = ir.UnitAttr.get()


def flag(cx: Lowering) -> ir.Value | None:
    """Whether this launch streams: its per-lane outputs' bytes (the buffers' sizes) reach STREAM_BYTES. None when
    the stage writes no per-lane output."""
    total = cx.buffer_bytes(("out",))
    return None if total is None else cx.e.cmpi(_UGE, total, cx.e.c(STREAM_BYTES))


def stream_loops(cx: Lowering, lanes) -> None:
    """Split every marked loop of the lanes function that stores per-lane outputs at its own lane (see the module's
    docstring), then end the function with a fence when it streamed. Call with the insertion point at the end of
    the function's entry block."""
    marked = []

    def visit(op):
        if op.name == "scf.for" and MARK in op.attributes:
            marked.append(op)
        return ir.WalkResult.ADVANCE

    lanes.operation.walk(visit)
    outs = {cx.bufs[(b.name, b.role)] for b in cx.lay.buffers if b.role == "out"}
    split = False
    for op in marked:
        del op.attributes[MARK]
        stores = _own_lane_stores(op, outs)
        if stores and cx.stream is not None:
            _split(cx, op, stores)
            split = True
    if split:
        fence = scf.IfOp(cx.stream, [], has_else=False)
        with ir.InsertionPoint(fence.then_block):
            llvm.FenceOp(llvm.AtomicOrdering.seq_cst)
            scf.YieldOp([])


def _own_lane_stores(loop, outs: set) -> list[int]:
    """Positions, in the loop's body, of its stores into per-lane outputs at the loop's lane plus an offset the
    loop does not change, for the outputs nothing else in the loop touches (a step other than 1: none)."""
    step = loop.operands[2].owner
    if isinstance(step, ir.Block) or step.name != "arith.constant" or \
            ir.IntegerAttr(step.attributes["value"]).value != 1:
        return []
    body = loop.regions[0].blocks[0]
    found: dict = {}
    for k, op in enumerate(body.operations):
        if op.name == "memref.store" and op.operands[1] in outs and len(op.operands) == 3 and \
                _offset(op.operands[2], body) is not False:
            found.setdefault(op.operands[1], []).append(k)
    uses = []

    def visit(op):
        uses.extend(v for v in op.operands if v in outs)
        return ir.WalkResult.ADVANCE

    for op in body.operations:
        op.walk(visit)
    return sorted(k for buf, ks in found.items() if sum(1 for v in uses if v == buf) == len(ks) for k in ks)


def _offset(index: ir.Value, body: ir.Block):
    """A store's index `lane` (None), `lane + offset` with an offset computed from values outside the loop by
    integer arithmetic alone (the offset), or anything else (False)."""
    lane = body.arguments[0]
    if index == lane:
        return None
    op = index.owner
    if isinstance(op, ir.Block) or op.operation.block != body or op.name != "arith.addi":
        return False
    a, b = op.operands
    for x, y in ((a, b), (b, a)):
        if x == lane and _invariant(y, body):
            return y
    return False


def _invariant(v: ir.Value, body: ir.Block) -> bool:
    """v is made from values defined outside the loop's body by _PURE ops alone."""
    if isinstance(v.owner, ir.Block):
        return v.owner != body
    op = v.owner.operation
    if op.block != body:
        return True
    return op.name in _PURE and all(_invariant(x, body) for x in op.operands)


def _hoisted(v: ir.Value, body: ir.Block) -> ir.Value:
    """v (_invariant in `body`) computed here, where the loop's body is out of reach."""
    if isinstance(v.owner, ir.Block) or v.owner.operation.block != body:
        return v
    op = v.owner.operation
    operands = [_hoisted(x, body) for x in op.operands]  # (made before the op that uses them)
    copy = op.clone()
    for k, x in enumerate(operands):
        copy.operands[k] = x
    return copy.results[0]


def _split(cx: Lowering, loop, stores: list[int]) -> None:
    """`if streaming: the loop in buffered blocks, each block streamed out; else: the loop`, in the loop's place."""
    e = cx.e
    lo, hi = loop.operands[0], loop.operands[1]
    inits = list(loop.operands[3:])
    ops = list(loop.regions[0].blocks[0].operations)
    per_lane = sum(_bytes(ops[k].operands[1]) for k in stores)
    block = max(64, min(BLOCK, BUFFER_BYTES // per_lane // 64 * 64))
    with ir.InsertionPoint(loop), loop.location:
        either = scf.IfOp(cx.stream, [r.type for r in loop.results], has_else=True)
        with ir.InsertionPoint(either.then_block):
            outer = scf.ForOp(lo, hi, e.c(block), inits)
            with ir.InsertionPoint(outer.body):
                start = outer.induction_variable
                _hint_reads(cx, loop, start, block)
                end = e.op("arith.minui", e.add_i(start, e.c(block)), hi)
                count = e.op("arith.subi", end, start)
                inner = loop.clone()
                inner.operands[0], inner.operands[1] = start, end
                for k, v in enumerate(outer.inner_iter_args):
                    inner.operands[3 + k] = v
                for buf, out, at in _buffer_stores(cx, inner, stores, start, block):
                    _stream_out(cx, buf, out, at, count)
                scf.YieldOp(list(inner.results))
            scf.YieldOp(list(outer.results))
        for k, r in enumerate(loop.results):
            r.replace_all_uses_with(either.results[k])
        with ir.InsertionPoint(either.else_block):
            done = scf.YieldOp(list(loop.results))
        loop.move_before(done)


MAX_STREAMS = 2  # reads of at most this many streams are hinted (six, a Vector[3] update's, ran 1.3x slower)


def _hint_reads(cx: Lowering, loop, start: ir.Value, block: int) -> None:
    """Prefetch hints for the block planes.AHEAD lanes past `start`, one a 64-byte line of each stream the loop's body
    loads at its own lane (a buffer plus an offset the loop does not change: a Vector plane's component; a
    constant offset, a neighbour's read, is the same stream), on raw addresses (a prefetch never faults), when
    there are at most MAX_STREAMS. The block streams its stores out past the caches, and its loads came from
    memory behind the hardware prefetcher: a 1e7-lane float64 map (x * 1.5 + 0.25) 0.85-0.9 of its time without
    them, the second stage of x - mean(x) 0.90-0.93 (docs/ordered.md, "Prefetch")."""
    e = cx.e
    body = loop.regions[0].blocks[0]
    streams = {}
    for op in body.operations:
        if op.name != "memref.load" or len(op.operands) != 2:
            continue
        off = _offset(op.operands[1], body)
        if off is False:
            continue
        if off is not None and int_constant(off) is not None:
            off = None  # (a neighbour's read: the lanes' own lines, give or take one)
        streams.setdefault((op.operands[0], off), None)
    if not streams or len(streams) > MAX_STREAMS:
        return
    ahead = e.add_i(start, e.c(planes.AHEAD))
    for buf, off in streams:
        size = _bytes(buf)
        first = ahead if off is None else e.add_i(ahead, _hoisted(off, body))
        at = e.add_i(cx.at_top(("address", buf), lambda buf=buf: e.address(buf)), e.mul_i(first, e.c(size)))
        lines = scf.ForOp(e.c(0), e.c(block * size), e.c(LINE), [])  # (a loop: the IR stays small)
        with ir.InsertionPoint(lines.body):
            a = e.op("arith.index_cast", e.add_i(at, lines.induction_variable), t=e.i64)
            llvm.intr_prefetch(llvm.inttoptr(llvm.PointerType.get(), a), 0, 3, 1)
            scf.YieldOp([])


def _buffer_stores(cx: Lowering, loop, stores: list[int], start: ir.Value, block: int) -> list[tuple]:
    """The copy's stores at `stores` now go into a block buffer each, at lane - start: (buffer, output, where the
    block's first lane goes in the output) for each, in the stores' order (two stores of one position: the later
    one's copy comes later, as its store did)."""
    e = cx.e
    body = loop.regions[0].blocks[0]
    ops = list(body.operations)
    found = []
    for k in stores:
        st = ops[k]
        out, offset = st.operands[1], _offset(st.operands[2], body)
        buf = cx.local_buffer(block, ir.MemRefType(out.type).element_type)
        with ir.InsertionPoint(st), st.location:
            e.store(st.operands[0], buf, e.op("arith.subi", body.arguments[0], start))
        found.append((buf, out, start if offset is None else e.add_i(start, _hoisted(offset, body))))
        st.erase()
    return found


def _stream_out(cx: Lowering, buf: ir.Value, out: ir.Value, first: ir.Value, count: ir.Value) -> None:
    """buf[0, count) into out[first, first + count): plain stores up to out's next 64-byte line, non-temporal
    stores of whole lines, plain stores after (an output not aligned to its element: plain stores only)."""
    e = cx.e
    elem = ir.MemRefType(out.type).element_type
    size = _bytes(out)
    per_line = LINE // size
    at = e.add_i(cx.at_top(("address", out), lambda: e.address(out)), e.mul_i(first, e.c(size)))
    past = e.op("arith.remui", at, e.c(LINE))
    head = e.op("arith.divui", e.op("arith.remui", e.op("arith.subi", e.c(LINE), past), e.c(LINE)), e.c(size))
    odd = e.cmpi(1, e.op("arith.remui", at, e.c(size)), e.c(0))  # (ne)
    head = e.select(odd, count, e.op("arith.minui", head, count))
    lines = e.op("arith.divui", e.op("arith.subi", count, head), e.c(per_line))
    mid = e.add_i(head, e.mul_i(lines, e.c(per_line)))
    _plain(cx, buf, out, first, e.c(0), head)
    loop = scf.ForOp(head, mid, e.c(per_line), [])
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        v = e.vload(buf, i, per_line, elem)
        vector.StoreOp(v, out, [e.add_i(first, i)], nontemporal=True, alignment=LINE)
        scf.YieldOp([])
    _plain(cx, buf, out, first, mid, count)


def _plain(cx: Lowering, buf: ir.Value, out: ir.Value, first: ir.Value, a: ir.Value, b: ir.Value) -> None:
    e = cx.e
    loop = scf.ForOp(a, b, e.c(1), [])
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        e.store(e.load(buf, i), out, e.add_i(first, i))
        scf.YieldOp([])


def _bytes(buf: ir.Value) -> int:
    return max(1, ir.MemRefType(buf.type).element_type.width // 8)
