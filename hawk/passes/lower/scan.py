"""Scans (`hawk.scan`, split by hawk/passes/stages.py into `hawk.scan_totals` and `hawk.scan_apply`).

The bits contract (docs/semantics.md, "Scans"): lanes go in blocks of SCAN_BLOCK counted from lane 0 (a host
chunk and a GPU thread of the chunk form always start on a block: Layout.parallel_span).

  stage s     `scan_totals`: each block's lanes folded one by one in lane order, starting from the identity,
              into a running value carried in the lane loop's iter_args; the block's last lane writes the total
              (and, with reset=, whether a flag was set in the block) into entry b of the "scan" buffer
              (SCAN_ENTRY values per block). The finish (`finish_scans`, on the host for every target) turns
              the totals into offsets in place: off_0 = identity, off_b+1 = t_b if f_b else off_b (+) t_b.
  stage s+1   `scan_apply`: the running value starts each block from its offset and folds the block's lanes
              one by one in lane order: prev = off_b at a block's first lane, else the previous lane's value;
              inclusive y = prev (+) x, exclusive y = prev (then prev (+) x carries on); with reset=, a flagged
              lane starts afresh: inclusive y = x, exclusive y = identity.

Where the lane loop would be flat, `scan_driver` cuts it at block boundaries and starts each block's running
values (identity or offset) outside the lanes' loop and writes the totals after it. Two shortcuts there change
no bit: a segmented total (reset=) of a value computed from the lane alone keeps no running value per lane (the
loop finds the block's last flagged lane; a tail loop folds the value from there: what the chain would hold),
and with neighbour reads a block's interior runs without their clamps (scan_interior.py). Under the other shapes
(blocked chains, nested or column rows) the rules do it per lane with a select at a block's first lane and a
guarded store at its last. Either way every target runs the same operations (a GPU thread runs a block as a
host chunk does), so the bits never depend on threads, loop shape or target.

A reverse scan (reverse=True: from the last lane down) cannot run in the lanes' ascending loops, so its stage s
`scan_totals` stores each lane's value (and reset flag) into the "rscan" buffer, two planes of the run's lanes
(values, then flags), and that stage's finish folds them from the last lane down, one by one, in place: the
planes become (inclusive, exclusive) (`finish_reverse`); stage s+1's `scan_apply` loads its lane's value from
one of them (contiguous reads). One sequential fold on the host for every
target: np.cumsum(x[::-1])[::-1] bit for bit at any size, the same bits on every thread count and target. With
reset=, a flagged lane starts its segment (as in the forward scan), so running down, the lane below it starts
afresh; a segment's last lane gets the identity as its exclusive value.

A scan by a @hawk.func (op "func": hawk.scan(x, op=f)) runs the same way in either direction: its stage s
stores the lanes' values (and flags) into the "rscan" planes, and the finish folds them one by one with the
combiner's code, from the first lane up (or, reverse=True, the last down): itertools.accumulate's bits at any
size, since a non-associative operator allows no other order (`finish_func`).

The operators: add (float: arith.addf; integer: wrapping arith.addi), mul (arith.mulf; wrapping arith.muli: a
running product, np.cumprod's bits up to SCAN_BLOCK lanes), and min/max with np.minimum's rule (a where a < b or
a is NaN, else b; hawk.math's m.min), integer minsi/maxsi.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import memref, scf

from hawk.abi.layout import SCAN_BLOCK, SCAN_ENTRY
from hawk.ir.access import (
    combiner_name,
    combiners,
    fold_identity,
    scan_cell,
    scan_in_finish,
    scan_key,
    scan_keys,
    scan_mode,
    scan_op,
    scan_order,
    scan_reset,
    scan_reverse,
    scan_value,
)
from hawk.ir.dialect import is_hawk
from hawk.passes.host_emit import size
from hawk.passes.lower import scan_interior, stream
from hawk.passes.lower.context import Lowering, clone_ops, rewrite_ops, rule
from hawk.passes.lower.scan_keyed import finish_keyed, keyed_apply, keyed_totals

_SLOT = "hawk.scan_slot"  # where a scan's running value sits among the loop's iter_args (copies keep it)
_I64_MAX, _I64_MIN = (1 << 63) - 1, -(1 << 63)
_EQ, _OLT, _OGT, _UNE = 0, 4, 2, 13


def plan_scans(cx: Lowering, body: ir.Block, chunk: list[ir.Value]) -> None:
    """Give each scan of the body its running value (and, for block totals with reset=, a flag) among the chunk
    state, and record each scan cell's operator and type for the finish."""
    before = len(chunk)
    for op in body.operations:
        if not (is_hawk(op, "scan_totals") or is_hawk(op, "scan_apply")):
            continue
        t = scan_value(op).type
        if scan_keys(op) is not None or scan_in_finish(op):  # keyed: running values in memory (scan_keyed.py);
            if is_hawk(op, "scan_totals"):  # reversed or by a func: none in the lanes' loop, the finish runs it
                cx.scans[scan_cell(op)] = (scan_op(op), t, form_of(op))
            continue
        op.attributes[_SLOT] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(chunk))
        chunk.append(identity(cx, scan_op(op), t))
        if is_hawk(op, "scan_totals"):
            cx.scans[scan_cell(op)] = (scan_op(op), t, "blocks")
            if scan_reset(op) is not None:
                chunk.append(cx.e.c(0, cx.e.i1))
    cx.n_scans = len(chunk) - before  # (the chains follow: ordered_chains.nchunk_red_total)


def form_of(op) -> str | tuple:
    """How a scan's stages and finish run it: "blocks" (block totals, then offsets), "lanes" / "lanes+flags" (a
    reverse scan: the lanes' values, and flags, folded down by the finish), ("keyed", keys, order) (per-block,
    per-key totals: scan_keyed.py), ("rkeyed", keys) (a reversed keyed scan: the lanes' values and keys, folded
    down per key by the finish) or ("func", combiner, flags, reverse, identity, shape, keys) (a scan by a
    @hawk.func: the lanes' values of that shape, and flags or keys, folded by the finish in lane order, or
    down, per key when keys is not None)."""
    if scan_op(op) == "func":  # (keyed: its keys where the flags would be)
        ident = fold_identity(op)
        return ("func", combiner_name(op), scan_reset(op) is not None, scan_reverse(op),
                0.0 if ident is None else ident, payload(scan_value(op).type), scan_keys(op))
    if scan_keys(op) is not None:
        return ("rkeyed", scan_keys(op)) if scan_reverse(op) else ("keyed", scan_keys(op), scan_order(op))
    if scan_reverse(op):
        return "lanes+flags" if scan_reset(op) is not None else "lanes"
    return "blocks"


def _slot(op) -> int:
    return ir.IntegerAttr(op.attributes[_SLOT]).value


def identity(cx: Lowering, op: str, t: ir.Type) -> ir.Value:
    """add: -0.0 (so that -0.0 + x is x, bit for bit) or 0; mul: 1 (1.0 * x is x, bit for bit); min: +inf or
    INT64_MAX; max: -inf or INT64_MIN."""
    e = cx.e
    if isinstance(t, ir.IntegerType):
        return e.c({"add": 0, "mul": 1, "min": _I64_MAX, "max": _I64_MIN}[op], t)
    return e.cf({"add": -0.0, "mul": 1.0, "min": float("inf"), "max": float("-inf")}[op], t)


def combine(cx: Lowering, op: str, a: ir.Value, b: ir.Value) -> ir.Value:
    """a (+) b for the scan's operator: the running value a, then the lane's value b."""
    e = cx.e
    if isinstance(a.type, ir.IntegerType):
        name = {"add": "arith.addi", "mul": "arith.muli", "min": "arith.minsi", "max": "arith.maxsi"}[op]
        return e.op(name, a, b)
    if op == "add":
        return e.add(a, b)
    if op == "mul":
        return e.op("arith.mulf", a, b)
    first = e.op("arith.ori", e.cmpf(_OLT if op == "min" else _OGT, a, b), e.cmpf(_UNE, a, a))
    return e.select(first, a, b)


def _restart(cx: Lowering, reset: ir.Value, x: ir.Value, new: ir.Value) -> ir.Value:
    """A segmented scan's value at a lane: x where the lane resets, else `new` (on the host without a branch:
    the flag changes at data-dependent run boundaries, host_emit.Emit.blend)."""
    return cx.e.blend(reset, x, new) if cx.target == "host" else cx.e.select(reset, x, new)


def _block_start(cx: Lowering) -> ir.Value:
    """Whether this lane is the first of its SCAN_BLOCK."""
    e = cx.e
    return e.cmpi(_EQ, e.op("arith.andi", cx.lane, e.c(SCAN_BLOCK - 1)), e.c(0))


def _entry(cx: Lowering) -> ir.Value:
    """Where this lane's block entry starts in a scan buffer."""
    e = cx.e
    return e.mul_i(e.op("arith.shrui", cx.lane, e.c(SCAN_BLOCK.bit_length() - 1)), e.c(SCAN_ENTRY))


def _flag_value(cx: Lowering, flag: ir.Value, t: ir.Type) -> ir.Value:
    e = cx.e
    if isinstance(t, ir.IntegerType):
        return e.op("arith.extui", flag, t=t)
    return e.op("arith.uitofp", flag, t=t)


def _forward_ops(body: ir.Block) -> list:
    """The body's forward scans' ops (a reverse scan keeps no running value in the lanes' loop)."""
    return [op for op in body.operations
            if (is_hawk(op, "scan_totals") or is_hawk(op, "scan_apply")) and not scan_in_finish(op)
            and scan_keys(op) is None]


def has_scans(body: ir.Block) -> bool:
    """Whether the lanes' loop carries running values of scans (scan_driver cuts it in blocks)."""
    return bool(_forward_ops(body))


def scan_driver(cx: Lowering, body: ir.Block, chunk0: list[ir.Value]) -> list[ir.Value]:
    """The flat lane loop cut at SCAN_BLOCK boundaries: for block: (start the scans' running values) for lane:
    body; (write the block totals). A block's running values start outside its lane loop, so each lane costs
    one operation of the scan's chain (an integer total's loop is a plain reduction LLVM vectorizes). Chunks
    start on a block (Layout.parallel_span), so a chunk's first block starts from its offset as every other.

    A segmented total (reset=) whose value is a pure function of the lane (`lane_slice`) keeps no running
    value in the lanes' loop: the loop only tracks the block's last flagged lane, and a tail loop after it
    folds the value from there to the block's end (recomputed from the lane), which is all the total holds:
    the same operations in the same order as the chain, so the same bits, without a float chain per lane."""
    from hawk.passes.lower.chunk_loops import lower_body

    e = cx.e
    ops = _forward_ops(body)
    tails = [(op, sl) for op in ops if is_hawk(op, "scan_totals") and scan_reset(op) is not None
             for sl in [lane_slice(body, scan_value(op))] if sl is not None]
    B = e.c(SCAN_BLOCK)
    blo = e.op("arith.divui", cx.lo, B)
    bhi = e.op("arith.divui", e.add_i(cx.hi, e.c(SCAN_BLOCK - 1)), B)
    outer = scf.ForOp(blo, bhi, e.c(1), chunk0)
    with ir.InsertionPoint(outer.body):
        blk = outer.induction_variable
        first = e.mul_i(blk, B)
        start = e.op("arith.maxui", first, cx.lo)
        end = e.op("arith.minui", e.add_i(first, B), cx.hi)
        at = e.mul_i(blk, e.c(SCAN_ENTRY))
        inits = list(outer.inner_iter_args)
        for op in ops:
            k, t = _slot(op), scan_value(op).type
            if is_hawk(op, "scan_apply"):
                inits[k] = e.load(cx.bufs[(scan_cell(op), "scanoff")], at)
            else:
                inits[k] = identity(cx, scan_op(op), t)
                if scan_reset(op) is not None:
                    inits[k + 1] = e.c(0, e.i1)
        n = len(inits)
        state = inits + [start] * len(tails)  # (+ each tail's last flagged lane)
        totals = [(scan_cell(op), _slot(op), scan_value(op).type, scan_reset(op) is not None)
                  for op in ops if is_hawk(op, "scan_totals")]
        m = scan_interior.margin(cx, body)
        cx.scan_tails = {_slot(op): n + j for j, (op, _) in enumerate(tails)}
        cx.scan_blocked = True
        if m:  # neighbour reads: the block's interior without their clamps (the body copied, not moved)
            res = scan_interior.three_loops(cx, body, start, end, state, m)
            pending = _tails(cx, tails, res, n, end)
        else:
            inner = scf.ForOp(start, end, e.c(1), state)
            stream.mark(cx, inner)
            with ir.InsertionPoint(inner.body):
                anchor = scf.YieldOp(list(inner.inner_iter_args))
            res = list(inner.results)
            pending = _tails(cx, tails, res, n, end)  # (copies of the body's ops, before they move)
            lower_body(cx, body, anchor, inner, inner.induction_variable, inner.inner_iter_args)
        cx.scan_blocked, cx.scan_tails = False, {}
        for k, (total, lowered) in pending:
            for lane, clones in lowered:
                cx.lane = lane
                rewrite_ops(cx, clones)
            res[k] = total
        res = res[:n]
        for cell, k, t, flagged in totals:
            buf = cx.bufs[(cell, "scan")]
            e.store(res[k], buf, at)
            e.store(_flag_value(cx, res[k + 1] if flagged else e.c(0, e.i1), t), buf, e.add_i(at, e.c(1)))
        scf.YieldOp(res)
    return list(outer.results)


_PURE_HAWK = ("lane", "extent", "load", "at", "param", "cut_read")  # hawk ops whose value depends on the lane only


def lane_slice(body: ir.Block, x: ir.Value) -> list | None:
    """The body's ops that compute x, in body order, when each is a pure function of the lane (arith/math ops
    and reads of planes, params and earlier stages' totals) with scalar results; None otherwise."""
    need, todo = set(), [x]
    while todo:
        v = todo.pop()
        owner = v.owner
        if isinstance(owner, ir.Block):
            continue  # a block argument: the kernel's plane handles, which a copy may read too
        op = owner.operation
        name = op.name
        if op.block != body or len(op.regions) or not (name.startswith(("arith.", "math."))
                                                      or name in {f"hawk.{n}" for n in _PURE_HAWK}):
            return None
        if any(not isinstance(r.type, (ir.IntegerType, ir.FloatType, ir.IndexType)) for r in op.results):
            return None
        if op in need:
            continue
        need.add(op)
        todo.extend(op.operands)
    return [op for op in body.operations if op.operation in need]


def _tails(cx: Lowering, tails: list, res: list[ir.Value], n: int, end: ir.Value) -> list:
    """Each tail's (slot, _tail(...)), from the lane loops' final state `res` (a tail's last flagged lane
    follows the n slots of the chunk state)."""
    return [(_slot(op), _tail(cx, op, sl, res[n + j], res[_slot(op) + 1], end)) for j, (op, sl) in enumerate(tails)]


def _tail(cx: Lowering, op, sl: list, last: ir.Value, found: ir.Value, end: ir.Value):
    """A segmented total from its block's last flagged lane `last` (the block's first lane when `found` is
    false) to `end`: x there (or identity (+) x), then (+) x of each later lane. Returns (the total, the slice
    copies to lower for each lane value: [(lane, copies)]), built at the insertion point."""
    e = cx.e
    kind, t = scan_op(op), scan_value(op).type
    x0, c0 = _copy_slice(sl, scan_value(op))
    acc0 = e.select(found, x0, combine(cx, kind, identity(cx, kind, t), x0))
    loop = scf.ForOp(e.add_i(last, e.c(1)), end, e.c(1), [acc0])
    with ir.InsertionPoint(loop.body):
        anchor = scf.YieldOp([loop.inner_iter_args[0]])
        with ir.InsertionPoint(anchor):
            x, c1 = _copy_slice(sl, scan_value(op))
            new = combine(cx, kind, loop.inner_iter_args[0], x)
        anchor.operation.erase()
        scf.YieldOp([new])
    return loop.results[0], [(last, c0), (loop.induction_variable, c1)]


def _copy_slice(sl: list, x: ir.Value) -> tuple[ir.Value, list]:
    """Copies of the slice's ops at the insertion point: (x's copy, the copies)."""
    mapping: dict = {}
    copies = clone_ops(sl, ir.InsertionPoint.current, mapping)
    return mapping[x], copies


@rule("hawk.scan")
def lower_unsplit_scan(cx: Lowering, op) -> None:
    """A hawk.scan is never lowered as it is: split-stages makes it scan_totals and scan_apply (and drops one
    nothing reads)."""
    raise RuntimeError(f"internal error: kernel '{cx.lay.name}' reached the lowering with an unsplit hawk.scan; "
                       "run split-stages first (hawk-opt --target T splits a kernel into its stages)")


@rule("hawk.scan_totals")
def lower_scan_totals(cx: Lowering, op) -> None:
    """This lane into its block's running total; the block's last lane (or the chunk's) writes it out."""
    e = cx.e
    if scan_in_finish(op):
        return _store_lane(cx, op)
    if scan_keys(op) is not None:
        return keyed_totals(cx, op)
    k, x, reset, kind = _slot(op), scan_value(op), scan_reset(op), scan_op(op)
    blocked = cx.scan_blocked  # scan_driver starts each block's total and writes it out itself
    if blocked and k in cx.scan_tails:  # the total is folded after the loop from the last flagged lane
        j = cx.scan_tails[k]
        cx.accs[j] = e.op("arith.maxui", cx.accs[j], e.select(reset, cx.lane, e.c(0)))  # (a max: vectorizes)
        cx.accs[k + 1] = e.op("arith.ori", cx.accs[k + 1], reset)
        return None
    start = None if blocked else _block_start(cx)
    prev = cx.accs[k] if blocked else e.select(start, identity(cx, kind, x.type), cx.accs[k])
    new = combine(cx, kind, prev, x)
    if reset is not None:
        new = _restart(cx, reset, x, new)
        seen = cx.accs[k + 1] if blocked else e.select(start, e.c(0, e.i1), cx.accs[k + 1])
        cx.accs[k + 1] = e.op("arith.ori", seen, reset)
    cx.accs[k] = new
    if blocked:
        return None
    nxt = e.add_i(cx.lane, e.c(1))
    last = e.op("arith.ori", e.cmpi(_EQ, e.op("arith.andi", nxt, e.c(SCAN_BLOCK - 1)), e.c(0)),
                e.cmpi(_EQ, nxt, cx.hi))
    write = scf.IfOp(last, [], has_else=False)
    with ir.InsertionPoint(write.then_block):
        buf = cx.bufs[(scan_cell(op), "scan")]
        at = _entry(cx)
        e.store(new, buf, at)
        flag = cx.accs[k + 1] if reset is not None else e.c(0, e.i1)
        e.store(_flag_value(cx, flag, x.type), buf, e.add_i(at, e.c(1)))
        scf.YieldOp([])
    return None


@rule("hawk.scan_apply")
def lower_scan_apply(cx: Lowering, op) -> ir.Value:
    """This lane's scanned value: its block's offset at the block's first lane, else the running value, (+) x."""
    e = cx.e
    if scan_keys(op) is not None and not scan_in_finish(op):
        return keyed_apply(cx, op)
    buf = cx.bufs[(scan_cell(op), "scanoff")]
    if scan_in_finish(op):  # the finish of the stage before left the planes (inclusive, exclusive)
        shape = payload(scan_value(op).type)
        first = 0 if scan_mode(op) == "inclusive" else size(shape)
        return e.pack([e.load(buf, _at(cx, first + k, cx.lane)) for k in range(size(shape))], shape)
    k, x, reset, kind = _slot(op), scan_value(op), scan_reset(op), scan_op(op)
    prev = cx.accs[k] if cx.scan_blocked else e.select(_block_start(cx), e.load(buf, _entry(cx)), cx.accs[k])
    new = combine(cx, kind, prev, x)
    if reset is not None:
        new = _restart(cx, reset, x, new)
    cx.accs[k] = new
    if scan_mode(op) == "inclusive":
        return new
    return prev if reset is None else _restart(cx, reset, identity(cx, kind, x.type), prev)


def _store_lane(cx: Lowering, op) -> None:
    """A reverse scan's stage s: this lane's value (and reset flag, or a keyed scan's key, -1 for a key outside
    0..n-1 after counting it as a bad key) into the planes of the "rscan" buffer."""
    from hawk.passes.lower.scan_keyed import _inside
    from hawk.passes.lower.scatters import report_bad_key

    e = cx.e
    x, reset, n = scan_value(op), scan_reset(op), scan_keys(op)
    buf = cx.bufs[(scan_cell(op), "rscan")]
    shape = payload(x.type)
    for k, v in enumerate(e.elems(x, shape)):  # (a Vector or Matrix value: one plane per component)
        e.store(v, buf, _at(cx, k, cx.lane))
    if reset is not None:
        e.store(_flag_value(cx, reset, _element(x.type)), buf, _at(cx, size(shape), cx.lane))
    if n is not None:
        key = scan_key(op)
        inside = _inside(cx, key, n)
        report_bad_key(cx, scan_cell(op), key, e.op("arith.andi", e.op("arith.xori", inside, e.c(1, e.i1)),
                                                    e.cmpi(1, key, e.c(-1, e.i64))), role="rscan")
        k = e.select(inside, key, e.c(-1, e.i64))
        et = _element(x.type)
        kv = k if isinstance(et, ir.IntegerType) else e.op("arith.sitofp", k, t=et)
        e.store(kv, buf, _at(cx, size(shape), cx.lane))


def _plane(cx: Lowering) -> ir.Value:
    """Where the second plane of an "rscan" buffer starts: max(1, lanes) (spirv has no memref.dim)."""
    return cx.e.op("arith.maxui", cx.L, cx.e.c(1))


def _at(cx: Lowering, k: int, lane: ir.Value, plane: ir.Value | None = None) -> ir.Value:
    """Where a lane's value in plane k of an "rscan" buffer lies (planes of `plane` values: _plane's default)."""
    if k == 0:
        return lane
    return cx.e.add_i(cx.e.mul_i(_plane(cx) if plane is None else plane, cx.e.c(k)), lane)


def payload(t: ir.Type) -> tuple[int, ...]:
    """The shape of a scanned value: () for a number, a Vector's or Matrix's for a func's scan of those."""
    return tuple(ir.VectorType(t).shape) if isinstance(t, ir.VectorType) else ()


def _element(t: ir.Type) -> ir.Type:
    return ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t


def finish_reverse(cx: Lowering, cell: str, kind: str, t: ir.Type, flags: bool) -> None:
    """A reverse scan's lanes, from the last down, into the planes (inclusive, exclusive) in place: prev = the
    identity at the last lane and below a flagged lane (a segment's last lane), else the lane above's inclusive
    value; inclusive = prev (+) x, exclusive = prev. (The buffer holds at least one lane: an empty run folds one
    zero nobody reads.)"""
    e = cx.e
    buf = cx.bufs[(cell, "rscan")]
    n = e.op("arith.divui", e.dim(buf), e.c(2))
    ident = identity(cx, kind, t)
    loop = scf.ForOp(e.c(0), n, e.c(1), [ident, e.c(1, e.i1)])
    with ir.InsertionPoint(loop.body):
        run, cut = loop.inner_iter_args
        lane = e.op("arith.subi", e.op("arith.subi", n, e.c(1)), loop.induction_variable)
        second = e.add_i(n, lane)
        x = e.load(buf, lane)
        prev = e.select(cut, ident, run)
        incl = combine(cx, kind, prev, x)
        cut_next = _is_set(cx, e.load(buf, second), t) if flags else e.c(0, e.i1)
        e.store(incl, buf, lane)
        e.store(prev, buf, second)
        scf.YieldOp([incl, cut_next])


def finish_func(cx: Lowering, cell: str, t: ir.Type, name: str, flags: bool, reverse: bool, ident: float,
                shape: tuple[int, ...], keys: int | None = None) -> None:
    """A scan by a @hawk.func: the lanes one by one in lane order (reverse: from the last down), into the planes
    (inclusive, exclusive) in place (a Vector or Matrix value: a plane per component, the flags in the first
    exclusive one). A run's first lane (the first lane, a flagged lane; reverse: the last lane, a lane below a
    flagged one) takes its x as it is (inclusive) and the identity (exclusive); every other lane's inclusive
    value is f(the lane before's, x) and its exclusive value the lane before's. The func is never called with
    the identity, and its code is pure, so it runs at every lane and a select keeps x where a run starts (the
    same ops as a fold's: folds.fold_into)."""
    from hawk.passes.lower.folds import call_combiner

    if keys is not None:
        return finish_func_keyed(cx, cell, t, name, reverse, ident, shape, keys)
    e = cx.e
    buf = cx.bufs[(cell, "rscan")]
    fn = combiners(cx.module)[name]
    c = size(shape)
    n = e.op("arith.divui", e.dim(buf), e.c(2 * c))
    identity = e.cf(ident, t)
    loop = scf.ForOp(e.c(0), n, e.c(1), [identity, e.c(0, e.i1)])
    with ir.InsertionPoint(loop.body):
        run, seen = loop.inner_iter_args
        i = loop.induction_variable
        lane = e.op("arith.subi", e.op("arith.subi", n, e.c(1)), i) if reverse else i
        x = e.pack([e.load(buf, _at(cx, k, lane, n)) for k in range(c)], shape)
        flag = _is_set(cx, e.load(buf, _at(cx, c, lane, n)), _element(t)) if flags else e.c(0, e.i1)
        if flags and not reverse:  # a flagged lane starts its run
            seen = e.op("arith.andi", seen, e.op("arith.xori", flag, e.c(1, e.i1)))
        incl = e.select(seen, call_combiner(fn, run, x), x)
        excl = e.select(seen, run, identity)
        for k, (a, b) in enumerate(zip(e.elems(incl, shape), e.elems(excl, shape), strict=True)):
            e.store(a, buf, _at(cx, k, lane, n))
            e.store(b, buf, _at(cx, c + k, lane, n))
        # reverse: the lane below a flagged lane starts afresh (a flagged lane is its segment's first)
        nxt = e.op("arith.xori", flag, e.c(1, e.i1)) if flags and reverse else e.c(1, e.i1)
        scf.YieldOp([incl, nxt])


def finish_func_keyed(cx: Lowering, cell: str, t: ir.Type, name: str, reverse: bool, ident: float,
                      shape: tuple[int, ...], keys: int) -> None:
    """A keyed scan by a @hawk.func: finish_func per key, each key's running value and whether it holds one in
    the finish's own memory (`keys` of each); a lane of key -1 gets the identity in both planes and changes
    nothing."""
    from hawk.passes.lower.folds import call_combiner

    e = cx.e
    buf = cx.bufs[(cell, "rscan")]
    fn = combiners(cx.module)[name]
    c = size(shape)
    et = _element(t)
    n = e.op("arith.divui", e.dim(buf), e.c(2 * c))
    identity = e.cf(ident, t)
    runs = memref.AllocaOp(ir.MemRefType.get([keys * c], et), [], []).result
    held = memref.AllocaOp(ir.MemRefType.get([keys], et), [], []).result  # (1.0 once the key holds a value)
    init = scf.ForOp(e.c(0), e.c(keys), e.c(1))
    with ir.InsertionPoint(init.body):
        e.store(e.cf(0.0, et), held, init.induction_variable)
        scf.YieldOp([])
    loop = scf.ForOp(e.c(0), n, e.c(1))
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        lane = e.op("arith.subi", e.op("arith.subi", n, e.c(1)), i) if reverse else i
        x = e.pack([e.load(buf, _at(cx, k, lane, n)) for k in range(c)], shape)
        kv = e.load(buf, _at(cx, c, lane, n))
        key = kv if isinstance(et, ir.IntegerType) else e.op("arith.fptosi", kv, t=e.i64)
        valid = e.cmpi(5, key, e.c(0, e.i64))  # (sge)
        slot = e.to_index(e.select(valid, key, e.c(0, e.i64)))
        base = e.mul_i(slot, e.c(c))
        run = e.pack([e.load(runs, e.add_i(base, e.c(k))) for k in range(c)], shape)
        seen = e.op("arith.andi", valid, _is_set(cx, e.load(held, slot), et))
        incl = e.select(seen, call_combiner(fn, run, x), x)
        excl = e.select(seen, run, identity)
        branch = scf.IfOp(valid, [], has_else=False)
        with ir.InsertionPoint(branch.then_block):
            for k, v in enumerate(e.elems(incl, shape)):
                e.store(v, runs, e.add_i(base, e.c(k)))
            e.store(e.cf(1.0, et), held, slot)
            scf.YieldOp([])
        for k, (a, b) in enumerate(zip(e.elems(e.select(valid, incl, identity), shape), e.elems(excl, shape),
                                       strict=True)):
            e.store(a, buf, _at(cx, k, lane, n))
            e.store(b, buf, _at(cx, c + k, lane, n))
        scf.YieldOp([])


def finish_reverse_keyed(cx: Lowering, cell: str, kind: str, t: ir.Type, keys: int) -> None:
    """A reversed keyed scan's lanes, from the last down, into the planes (inclusive, exclusive) in place: each
    key's running value (in `keys` values of the finish's own, starting from the identity) folds its lanes from
    the last down; a lane of key -1 gets the identity in both and changes nothing."""
    e = cx.e
    buf = cx.bufs[(cell, "rscan")]
    n = e.op("arith.divui", e.dim(buf), e.c(2))
    ident = identity(cx, kind, t)
    runs = memref.AllocaOp(ir.MemRefType.get([keys], t), [], []).result
    init = scf.ForOp(e.c(0), e.c(keys), e.c(1))
    with ir.InsertionPoint(init.body):
        e.store(ident, runs, init.induction_variable)
        scf.YieldOp([])
    loop = scf.ForOp(e.c(0), n, e.c(1))
    with ir.InsertionPoint(loop.body):
        lane = e.op("arith.subi", e.op("arith.subi", n, e.c(1)), loop.induction_variable)
        second = e.add_i(n, lane)
        x, kv = e.load(buf, lane), e.load(buf, second)
        k = kv if isinstance(t, ir.IntegerType) else e.op("arith.fptosi", kv, t=e.i64)
        valid = e.cmpi(5, k, e.c(0, e.i64))  # (sge)
        at = e.to_index(e.select(valid, k, e.c(0, e.i64)))
        prev = e.select(valid, e.load(runs, at), ident)
        incl = combine(cx, kind, prev, x)
        branch = scf.IfOp(valid, [], has_else=False)
        with ir.InsertionPoint(branch.then_block):
            e.store(incl, runs, at)
            scf.YieldOp([])
        e.store(e.select(valid, incl, ident), buf, lane)
        e.store(prev, buf, second)
        scf.YieldOp([])


def _is_set(cx: Lowering, flag: ir.Value, t: ir.Type) -> ir.Value:
    e = cx.e
    if isinstance(t, ir.IntegerType):
        return e.cmpi(1, flag, e.c(0, t))
    return e.cmpf(_UNE, flag, e.cf(0.0, t))


def finish_scans(cx: Lowering) -> None:
    """Each scan buffer's block totals into block offsets, in place and in block order (the finish); a reverse
    scan's lanes into its running values (finish_reverse)."""
    e = cx.e
    for cell, (kind, t, form) in cx.scans.items():
        if isinstance(form, tuple) and form[0] == "func":
            finish_func(cx, cell, t, *form[1:])
            continue
        if isinstance(form, tuple) and form[0] == "rkeyed":
            finish_reverse_keyed(cx, cell, kind, t, form[1])
            continue
        if isinstance(form, tuple):  # ("keyed", keys, order)
            finish_keyed(cx, cell, kind, t, form[1], form[2])
            continue
        if form != "blocks":
            finish_reverse(cx, cell, kind, t, form == "lanes+flags")
            continue
        buf = cx.bufs[(cell, "scan")]
        blocks = e.op("arith.divui", e.dim(buf), e.c(SCAN_ENTRY))
        loop = scf.ForOp(e.c(0), blocks, e.c(1), [identity(cx, kind, t)])
        with ir.InsertionPoint(loop.body):
            off = loop.inner_iter_args[0]
            at = e.mul_i(loop.induction_variable, e.c(SCAN_ENTRY))
            total, flag = e.load(buf, at), e.load(buf, e.add_i(at, e.c(1)))
            e.store(off, buf, at)
            scf.YieldOp([e.select(_is_set(cx, flag, t), total, combine(cx, kind, off, total))])
