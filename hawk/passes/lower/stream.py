"""Streaming stores for large per-lane outputs (host).

A store to a line that is not in the cache first reads the line (read for ownership), so a lane loop whose outputs
are larger than the caches moves every output byte twice over the memory bus. Non-temporal stores write whole
lines without reading them (a 1e7-lane float64 map on two threads here: 3.9 ms with plain stores, 2.8 ms
streaming). They pay off only past the caches: below, the lines stay cached for whoever reads the output next and
streaming them out costs (2x slower at 1e5 lanes, break-even near 40 MB of output on this machine). So the choice is
made per launch, from the bytes of the stage's per-lane outputs (`flag`: at least STREAM_BYTES).

A lane loop the lowering marks (`mark`: the flat loop, a grid's row loops) whose body stores per-lane outputs at its
own lane becomes (`stream_loops`)

    if streaming: for each block of BLOCK lanes: the loop over the block, those stores into a local buffer (it
                  stays in L1); then each buffer into its output: plain stores up to the output's next 64-byte line,
                  aligned non-temporal vector stores of whole lines, plain stores for the rest
    else:         the loop as it was

and the function ends, when streaming, with a fence: non-temporal stores are weakly ordered, and the fence makes
them visible before the chunk reports that it is done. The values stored are the same on both paths: only how they
reach memory differs, so no result depends on the choice.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import llvm, scf, vector

from hawk.passes.lower.context import LINE, Lowering

STREAM_BYTES = 48 << 20  # a launch's per-lane outputs of at least this many bytes are streamed
BLOCK = 1024  # lanes a streamed block buffers (8 KiB of float64 an output: in L1 with room to spare)
MARK = "hawk.stream"
_UGE, _ULT = 9, 6  # arith.cmpi


def mark(cx: Lowering, loop: scf.ForOp) -> None:
    """Let stream_loops stream this lane loop's per-lane stores (host lowerings only)."""
    if cx.target == "host":
        loop.operation.attributes[MARK] = ir.UnitAttr.get()


def flag(cx: Lowering) -> ir.Value | None:
    """Whether this launch streams: its per-lane outputs' bytes (the buffers' sizes) reach STREAM_BYTES. None when
    the stage writes no per-lane output."""
    e = cx.e
    total = None
    for b in cx.lay.buffers:
        if b.role == "out":
            buf = cx.bufs[(b.name, b.role)]
            size = e.mul_i(e.dim(buf), e.c(_bytes(buf)))
            total = size if total is None else e.add_i(total, size)
    return None if total is None else e.cmpi(_UGE, total, e.c(STREAM_BYTES))


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
    """Positions, in the loop's body, of the stores into per-lane outputs at the loop's lane, for the outputs
    nothing else in the loop touches (a step other than 1 or another use of the output: not streamed)."""
    step = loop.operands[2].owner
    if isinstance(step, ir.Block) or step.name != "arith.constant" or \
            ir.IntegerAttr(step.attributes["value"]).value != 1:
        return []
    body = loop.regions[0].blocks[0]
    lane = body.arguments[0]
    found, other = {}, set()
    for k, op in enumerate(body.operations):
        if op.name == "memref.store" and op.operands[1] in outs and len(op.operands) == 3 and op.operands[2] == lane:
            if op.operands[1] in found:
                other.add(op.operands[1])
            found[op.operands[1]] = k
    uses = []

    def visit(op):
        uses.extend(v for v in op.operands if v in outs)
        return ir.WalkResult.ADVANCE

    for op in body.operations:
        op.walk(visit)
    for buf in found:
        if sum(1 for v in uses if v == buf) != 1:
            other.add(buf)
    return sorted(k for buf, k in found.items() if buf not in other)


def _split(cx: Lowering, loop, stores: list[int]) -> None:
    """`if streaming: the loop in buffered blocks, each block streamed out; else: the loop`, in the loop's place."""
    e = cx.e
    lo, hi = loop.operands[0], loop.operands[1]
    inits = list(loop.operands[3:])
    with ir.InsertionPoint(loop), loop.location:
        either = scf.IfOp(cx.stream, [r.type for r in loop.results], has_else=True)
        with ir.InsertionPoint(either.then_block):
            outer = scf.ForOp(lo, hi, e.c(BLOCK), inits)
            with ir.InsertionPoint(outer.body):
                start = outer.induction_variable
                end = e.op("arith.minui", e.add_i(start, e.c(BLOCK)), hi)
                count = e.op("arith.subi", end, start)
                inner = loop.clone()
                inner.operands[0], inner.operands[1] = start, end
                for k, v in enumerate(outer.inner_iter_args):
                    inner.operands[3 + k] = v
                copies = _buffer_stores(cx, inner, stores, start)
                for buf, out in copies:
                    _stream_out(cx, buf, out, start, count)
                scf.YieldOp(list(inner.results))
            scf.YieldOp(list(outer.results))
        for k, r in enumerate(loop.results):
            r.replace_all_uses_with(either.results[k])
        with ir.InsertionPoint(either.else_block):
            done = scf.YieldOp(list(loop.results))
        loop.move_before(done)


def _buffer_stores(cx: Lowering, loop, stores: list[int], start: ir.Value) -> list[tuple[ir.Value, ir.Value]]:
    """The copy's stores at `stores` now go into a block buffer each, at lane - start: (buffer, output) pairs."""
    e = cx.e
    body = loop.regions[0].blocks[0]
    ops = list(body.operations)
    pairs = []
    for k in stores:
        st = ops[k]
        out = st.operands[1]
        buf = cx.local_buffer(BLOCK, ir.MemRefType(out.type).element_type)
        with ir.InsertionPoint(st), st.location:
            e.store(st.operands[0], buf, e.op("arith.subi", body.arguments[0], start))
        st.erase()
        pairs.append((buf, out))
    return pairs


def _stream_out(cx: Lowering, buf: ir.Value, out: ir.Value, start: ir.Value, count: ir.Value) -> None:
    """buf[0, count) into out[start, start + count): plain stores up to out's next 64-byte line, non-temporal
    stores of whole lines, plain stores after (an output not aligned to its element: plain stores only)."""
    e = cx.e
    elem = ir.MemRefType(out.type).element_type
    size = _bytes(out)
    per_line = LINE // size
    at = e.add_i(cx.at_top(("address", out), lambda: e.address(out)), e.mul_i(start, e.c(size)))
    past = e.op("arith.remui", at, e.c(LINE))
    head = e.op("arith.divui", e.op("arith.remui", e.op("arith.subi", e.c(LINE), past), e.c(LINE)), e.c(size))
    odd = e.cmpi(1, e.op("arith.remui", at, e.c(size)), e.c(0))  # (ne)
    head = e.select(odd, count, e.op("arith.minui", head, count))
    lines = e.op("arith.divui", e.op("arith.subi", count, head), e.c(per_line))
    mid = e.add_i(head, e.mul_i(lines, e.c(per_line)))
    _plain(cx, buf, out, start, e.c(0), head)
    loop = scf.ForOp(head, mid, e.c(per_line), [])
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        v = e.vload(buf, i, per_line, elem)
        vector.StoreOp(v, out, [e.add_i(start, i)], nontemporal=True, alignment=LINE)
        scf.YieldOp([])
    _plain(cx, buf, out, start, mid, count)


def _plain(cx: Lowering, buf: ir.Value, out: ir.Value, start: ir.Value, a: ir.Value, b: ir.Value) -> None:
    e = cx.e
    loop = scf.ForOp(a, b, e.c(1), [])
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        e.store(e.load(buf, i), out, e.add_i(start, i))
        scf.YieldOp([])


def _bytes(buf: ir.Value) -> int:
    return max(1, ir.MemRefType(buf.type).element_type.width // 8)
