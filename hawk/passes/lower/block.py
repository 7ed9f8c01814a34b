"""Block reductions (`hawk.block_reduce`, written by split-stages: docs/semantics.md "Block reductions"): a total
over the trailing lane axes that lanes of the same stage read, computed inside the stage's launch.

The lanes of one kept slot are contiguous (slot = lane // span, span <= stages.BLOCK_LANES) and a chunk (a host
chunk, or a GPU thread of the chunk form) always holds whole slots (Layout.block_span is part of
Layout.parallel_span). A chunk runs its lanes in tiles of whole slots, aligned on multiples of the tile from lane
0 (so the loop shapes inside keep their own alignments: ordered blocks, scan blocks):

    for tile:
        for phase:                       block reductions that read no other, then those that read them, ...
            for slot of the tile:        one loop over the slot's lanes: the reductions' inputs, recomputed,
                                         folded in lane order; the slot's totals into a buffer of the tile
        the stage's loop shape over the tile's lanes (chunk_loops), each block reduction read from that buffer

Each slot's total is folded by one loop in lane order, the same code on every target, so it does not depend on
the thread count, the chunking or the target: "ordered" deposits every term into an exact accumulator and
rounds once (hawk/exact.py: the exact sum, the same bits everywhere), "compensated" keeps a Neumaier pair,
"auto" and "plain" add (auto may reassociate: a sum of at most BLOCK_LANES terms), max and min are exact (NaN
wins, max(-0.0, 0.0) = 0.0: `extremum`, spelled out so that SPIR-V agrees). A mean divides the (rounded) sum
once by the count of lanes the mask keeps (NaN for none).

GPU targets run such a stage in the chunk form (a thread is a host chunk, above), or, when its block reductions
share one span, none is an ordered sum and nothing else crosses lanes (hawk.abi.layout.block_tree), in the
"blocks" form of `lower_gpu_blocks`: a slot's threads fold strided lanes and meet in a workgroup tree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import scf

from hawk.abi.layout import ORDERED_BLOCK, SCAN_BLOCK
from hawk.ir.access import policy, reduce_kind, reduce_mask, reduce_over, reduce_value
from hawk.ir.build import create
from hawk.ir.dialect import is_hawk
from hawk.passes import exact_emit
from hawk.passes.lower import reduce_kept, scan
from hawk.passes.lower.context import Lowering, clone_ops, rewrite_ops, rule
from hawk.passes.stages import _used_values

TILE_LANES = 4096  # host tiles hold at least this many lanes (a GPU thread's tile is one alignment span)
MEMO_VALUES = 4 * TILE_LANES  # the most floats of values folds keep for the body, per chunk (GPU: a 16th)
_MARK, _ACC = "hawk.block", "hawk.block_acc"  # a block reduction's number; on a copy that folds: its state slot
_MEMO = "hawk.block_memo"  # a placeholder reading back a value a fold kept (its op's position in the body)


@dataclass
class Block:
    """One block reduction of the stage: where it sits in the body, what it folds, and its buffers."""

    n: int  # its number (the mark its copies keep)
    at: int  # position among the body's top-level ops
    kind: str  # sum | mean | max | min
    policy: str  # auto | plain | compensated | ordered
    span: int  # lanes per kept slot
    phase: int  # 0: reads no block reduction; p: reads one of phase p - 1 (at most)
    totals: ir.Value | None = None  # the tile's slots' totals (the stage's float type)
    exact: ir.Value | None = None  # ordered: the slot's exact accumulator (int64 words)
    slot: int = 0  # while a phase folds: its first state slot among the loop's iter_args


def has_blocks(body: ir.Block) -> bool:
    return any(is_hawk(op, "block_reduce") for op in body.operations)


def _top(body: ir.Block) -> list:
    return [op for op in body.operations if op.operation.name != "func.return"]


def plan_blocks(cx: Lowering, body: ir.Block) -> list[Block]:
    """Number the stage's block reductions (the mark their copies keep) and find each one's phase."""
    ext = {a.label: a.extent for a in cx.lay.sig.lane_axes()}
    ops = _top(body)
    producer = {r: k for k, op in enumerate(ops) for r in op.results}
    phase: dict[int, int] = {}  # per op: the phase its value is ready in
    blocks: list[Block] = []
    for k, op in enumerate(ops):
        p = 0
        for v in _used_values(op):
            j = producer.get(v)
            if j is not None:
                p = max(p, phase[j])
        if is_hawk(op, "block_reduce"):
            op.operation.attributes[_MARK] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(blocks))
            span = math.prod(ext[a] for a in reduce_over(op))
            blocks.append(Block(len(blocks), k, reduce_kind(op), policy(op), span, p))
            p += 1
        phase[k] = p
    return blocks


def tile_lanes(cx: Lowering, body: ir.Block, blocks: list[Block]) -> int:
    """Lanes of a tile: whole slots of every block reduction, whole ordered blocks where the blocked loop shape
    or a fold runs, whole scan blocks where a scan does; on the host at least TILE_LANES."""
    align = math.lcm(*(b.span for b in blocks))
    if any(a.policy == "compensated" or a.pairs for a in cx.full) or any(r.kind == "fold" for r in cx.lay.reductions):
        align = math.lcm(align, ORDERED_BLOCK)
    if scan.has_scans(body):
        align = math.lcm(align, SCAN_BLOCK)
    return align * max(1, TILE_LANES // align) if cx.target == "host" else align


def tiled(cx: Lowering, body: ir.Block, chunk0: list[ir.Value], drive) -> list[ir.Value]:
    """The chunk's lanes [lo, hi) in tiles: each tile's block totals first, then `drive(state)` (a loop shape
    of chunk_loops over the tile, as over a chunk) with the chunk state carried from tile to tile."""
    e = cx.e
    blocks = cx.blocks = plan_blocks(cx, body)
    tile = tile_lanes(cx, body, blocks)
    for b in blocks:
        b.totals = cx.local_buffer(tile // b.span, e.f)
        if b.kind in ("sum", "mean") and b.policy == "ordered":
            b.exact = cx.local_buffer(exact_emit.words_of(e.f), e.i64)
    cx.block_memo = _plan_memos(cx, body, blocks, tile)
    lo, hi = cx.lo, cx.hi
    loop = scf.ForOp(e.op("arith.divui", lo, e.c(tile)), e.op("arith.divui", e.add_i(hi, e.c(tile - 1)), e.c(tile)),
                     e.c(1), chunk0)
    with ir.InsertionPoint(loop.body):
        base = e.mul_i(loop.induction_variable, e.c(tile))
        tlo = e.op("arith.maxui", base, lo)
        thi = e.op("arith.minui", e.add_i(base, e.c(tile)), hi)
        cx.block_base = base  # (a later phase reads the totals of an earlier one)
        for p in sorted({b.phase for b in blocks}):
            for span in sorted({b.span for b in blocks if b.phase == p}):
                fold_slots(cx, body, [b for b in blocks if b.phase == p and b.span == span], tlo, thi, base)
        cx.lo, cx.hi = tlo, thi
        _read_memos(cx, body)
        scf.YieldOp(list(drive(list(loop.inner_iter_args))))
    cx.lo, cx.hi, cx.block_base, cx.block_memo = lo, hi, None, {}
    return list(loop.results)


def _plan_memos(cx: Lowering, body: ir.Block, blocks: list[Block], tile: int) -> dict:
    """Values a fold computes that the body uses beyond the folds (exp(x - top) in a softmax): each fold keeps
    them per lane in a buffer of the tile, and the body reads them there instead of computing them again.
    Plain ops of the stage's float type only (no hawk op, no region); by the op's position in the body. The
    buffers live on the stack (GPU: private memory): at most MEMO_VALUES floats in all, else none."""
    budget = MEMO_VALUES if cx.target == "host" else MEMO_VALUES // 16
    ops = _top(body)
    groups = {(b.phase, b.span) for b in blocks}
    closures = [_closure(ops, {b.at for b in blocks if (b.phase, b.span) == g}) for g in sorted(groups)]
    memo: dict[int, ir.Value] = {}
    for need in closures:
        inside = {ops[k].operation for k in need}
        for k in need:
            op = ops[k]
            if is_hawk(op) or len(op.results) != 1 or op.results[0].type != cx.e.f or \
                    len(op.operation.regions) or k in memo:
                continue
            if any(u.owner.operation not in inside for u in op.results[0].uses) and \
                    (len(memo) + 1) * tile <= budget:
                memo[k] = cx.local_buffer(tile, cx.e.f)
    return memo


def _read_memos(cx: Lowering, body: ir.Block) -> None:
    """Before the body's loop shape: each kept value's uses in the body read it from its buffer (a marked
    hawk.block_reduce placeholder the rule turns into that load; the op itself is left unused)."""
    ops = _top(body)
    for k in sorted(cx.block_memo):
        v = ops[k].results[0]
        users = [u.owner for u in v.uses]
        with ir.InsertionPoint.after(ops[k]), ops[k].location:
            read = create("hawk.block_reduce", [v], [v.type], {"kind": "sum", "over": [], "policy": "auto"})
        read.attributes[_MEMO] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), k)
        for owner in users:
            owner.operation.replace_uses_of_with(v, read.result)


def fold_lanes(cx: Lowering, body: ir.Block, group: list[Block], start, end, step) -> list[ir.Value]:
    """One loop over lanes start, start + step, ... < end folding the group's reductions (the ops they need
    copied from the body, block reductions of earlier phases read); the final fold states."""
    ops = _top(body)
    inits: list[ir.Value] = []
    for b in group:
        b.slot = len(inits)
        inits += _initial(cx, b)
    lanes = scf.ForOp(start, end, step, inits)
    with ir.InsertionPoint(lanes.body):
        anchor = scf.YieldOp(list(lanes.inner_iter_args))
    need = _closure(ops, {b.at for b in group})
    mapping: dict = {}
    copies = clone_ops([ops[k] for k in need], ir.InsertionPoint(anchor), mapping)
    memo = getattr(cx, "block_memo", {})
    kept = [(mapping[ops[k].results[0]], memo[k]) for k in need if k in memo]
    for op in copies:
        _drop_effects(op)
        if is_hawk(op, "block_reduce") and _number(op) in {b.n for b in group}:
            op.operation.attributes[_ACC] = ir.UnitAttr.get()
    saved = (cx.known_coords, cx.kept_slot, cx.kept_count, cx.interior)
    cx.known_coords, cx.kept_slot, cx.kept_count, cx.interior = {}, None, None, {}
    cx.lane, cx.accs, cx.j = lanes.induction_variable, list(lanes.inner_iter_args), None
    rewrite_ops(cx, copies)
    cx.known_coords, cx.kept_slot, cx.kept_count, cx.interior = saved
    with ir.InsertionPoint(anchor):
        for v, buf in kept:  # values the body reads back (_plan_memos)
            cx.e.store(v, buf, cx.e.op("arith.subi", lanes.induction_variable, cx.block_base))
    anchor.operation.erase()
    with ir.InsertionPoint(lanes.body):
        scf.YieldOp(cx.accs)
    return list(lanes.results)


def fold_slots(cx: Lowering, body: ir.Block, group: list[Block], tlo, thi, base) -> None:
    """For each slot of the tile: one loop over its lanes in [tlo, thi) folding the group's reductions (the
    ops they need copied from the body, other block reductions read from their totals), then the totals."""
    e = cx.e
    span = group[0].span
    slots = scf.ForOp(e.op("arith.divui", tlo, e.c(span)), e.op("arith.divui", e.add_i(thi, e.c(span - 1)),
                                                                e.c(span)), e.c(1), [])
    with ir.InsertionPoint(slots.body):
        s = slots.induction_variable
        row0 = e.mul_i(s, e.c(span))
        start = e.op("arith.maxui", row0, tlo)
        end = e.op("arith.minui", e.add_i(row0, e.c(span)), thi)
        at = e.op("arith.subi", s, e.op("arith.divui", base, e.c(span)))
        saved, cx.lane_row = cx.lane_row, (span, row0)  # (the slot's lanes: one row)
        res = fold_lanes(cx, body, group, start, end, e.c(1))
        cx.lane_row = saved
        for b in group:
            e.store(_total(cx, b, res), b.totals, at)
        scf.YieldOp([])


def _closure(ops: list, roots: set[int]) -> list[int]:
    """Positions of the top-level ops the roots need, in body order; another block reduction is read from its
    totals, so what it needs is not."""
    producer = {r: k for k, op in enumerate(ops) for r in op.results}
    need, stack = set(roots), list(roots)
    while stack:
        k = stack.pop()
        if is_hawk(ops[k], "block_reduce") and k not in roots:
            continue
        for v in _used_values(ops[k]):
            j = producer.get(v)
            if j is not None and j not in need:
                need.add(j)
                stack.append(j)
    return sorted(need)


def _drop_effects(op) -> None:
    """A copy that only computes values: stores inside it (a store under an if) go."""
    found: list = []
    op.operation.walk(lambda o: (found.append(o) if is_hawk(o) and o.operation.name[5:] in
                                 ("store", "scatter", "cell") else None, ir.WalkResult.ADVANCE)[1])
    for o in found:
        o.operation.erase()


def _number(op) -> int:
    return ir.IntegerAttr(op.operation.attributes[_MARK]).value


def _initial(cx: Lowering, b: Block) -> list[ir.Value]:
    """A slot's starting fold state: the identity (and a Neumaier correction; a mean's lane count); an ordered
    sum's accumulator is cleared instead."""
    e = cx.e
    state = [e.identity(b.kind)]
    if b.kind in ("sum", "mean") and b.policy == "compensated":
        state.append(e.cf(0.0))
    if b.exact is not None:
        exact_emit.clear(e, b.exact, e.c(0), e.f)
        state = []
    if b.kind == "mean":
        state.append(e.c(0, e.i64))
    return state


def _total(cx: Lowering, b: Block, res: list[ir.Value]) -> ir.Value:
    e = cx.e
    at = b.slot
    if b.exact is not None:
        v = exact_emit.round_acc(e, b.exact, e.c(0), e.f)
    else:
        v = res[at]
        at += 1
        if b.kind in ("sum", "mean") and b.policy == "compensated":
            v = e.add(v, res[at])
            at += 1
    if b.kind == "mean":
        v = e.op("arith.divf", v, e.op("arith.uitofp", res[at], t=e.f))
    return v


def extremum(cx: Lowering, kind: str, a: ir.Value, b: ir.Value) -> ir.Value:
    """max or min with NumPy's NaN (a NaN operand wins) and IEEE's zeros (max(-0.0, 0.0) = 0.0, min = -0.0): on the
    host arith.maximumf / minimumf, on GPUs spelled out in compares and selects, so that every target gives the
    same bits (SPIR-V's FMin/FMax leave the sign of a zero result open)."""
    e = cx.e
    if cx.target == "host":  # arith.maximumf / minimumf: the same IEEE rules, and LLVM vectorizes them
        return e.extremum(kind, a, b)
    bits = ir.IntegerType.get_signless(64 if isinstance(e.f, ir.F64Type) else 32)
    wins = e.cmpf(4 if kind == "min" else 2, a, b)  # olt / ogt
    same = e.op("arith.andi" if kind == "max" else "arith.ori", e.op("arith.bitcast", a, t=bits),
                e.op("arith.bitcast", b, t=bits))  # equal values: only zeros differ, in the sign bit
    r = e.select(wins, a, e.select(e.cmpf(1, a, b), e.op("arith.bitcast", same, t=e.f), b))  # oeq
    return e.select(e.cmpf(14, a, b), e.add(a, b), r)  # uno: a NaN operand gives NaN


@rule("hawk.block_reduce")
def lower_block_reduce(cx: Lowering, op) -> ir.Value | None:
    """In a slot's fold (a copy marked to fold): this lane's term into the fold state; elsewhere: this lane's
    slot's total from the tile's buffer."""
    e = cx.e
    if _MEMO in op.operation.attributes:  # a value a fold kept for the body (_read_memos)
        buf = cx.block_memo[ir.IntegerAttr(op.operation.attributes[_MEMO]).value]
        return e.load(buf, e.op("arith.subi", cx.lane, cx.block_base))
    b = cx.blocks[_number(op)]
    if _ACC not in op.operation.attributes:
        if getattr(cx, "block_regs", None) is not None:  # the "blocks" form: the slot's total in a register
            return cx.block_regs[b.n]
        row = cx.lane_row
        lane = row[1] if row is not None and b.span % row[0] == 0 else cx.lane  # (the row's lanes: one slot)
        return e.load(b.totals, e.op("arith.divui", e.op("arith.subi", lane, cx.block_base), e.c(b.span)))
    x, mask, s, k = reduce_value(op), reduce_mask(op), cx.accs, b.slot
    if b.kind in ("max", "min"):
        if cx.target == "host":  # (a masked-out lane offers an identity LLVM cannot fold: a vectorized loop)
            s[k] = reduce_kept.masked_extremum(cx, b.kind, s[k], x, mask)
            return None
        new = extremum(cx, b.kind, s[k], x)
        s[k] = new if mask is None else e.select(mask, new, s[k])
        return None
    if b.exact is not None and cx.target == "gpu" and getattr(cx, "block_regs", None) is not None:
        raise ValueError("internal error: the blocks form takes no ordered block sums (hawk.abi.layout.block_tree)")
    if b.exact is not None:
        exact_emit.deposit(e, b.exact, e.c(0), x, mask)
    elif b.policy == "compensated":
        ns, nc = e.neumaier(s[k], s[k + 1], x)
        s[k], s[k + 1] = (ns, nc) if mask is None else (e.select(mask, ns, s[k]), e.select(mask, nc, s[k + 1]))
    else:
        x = x if mask is None else e.select(mask, x, e.cf(0.0))
        s[k] = e.fast_add(s[k], x) if b.policy == "auto" else e.add(s[k], x)
    if b.kind == "mean":
        at = k + (0 if b.exact is not None else 2 if b.policy == "compensated" else 1)
        s[at] = e.op("arith.addi", s[at], e.c(1, e.i64) if mask is None else e.op("arith.extui", mask, t=e.i64))
    return None


# ---- the "blocks" GPU form (hawk.abi.layout.block_tree) ------------------------------------------------------


def _parts(b: Block) -> int:
    """Floats of one thread's fold state in the workgroup tree: the value (a compensated sum: and its
    correction), a mean's count."""
    return 1 + (b.kind in ("sum", "mean") and b.policy == "compensated") + (b.kind == "mean")


def lower_gpu_blocks(module: ir.Module, layout, ftype: ir.Type, itypes: dict[str, ir.Type], wide: bool = False):
    """A stage of block reductions as a GPU kernel of workgroups (meta = [C, base, G, L, extents..., end], as the
    tree form): group g runs lanes [g*C, g*C + C) in rounds of block_round lanes, P slots of S lanes each, and
    a slot's T = WORKGROUP / P threads take its lanes u, u + T, ... Per round and phase each thread folds its
    lanes, the T states meet in a pairwise tree in workgroup memory (the same barriers for every thread), and
    every thread reads its slot's total; then each thread runs the body for its lanes with the totals in
    registers. Max and min give the host's bits (they are exact); sums and means stay within their policy's
    bound (a tree of T partial folds)."""
    from hawk.abi.layout import WORKGROUP, block_round
    from hawk.ir.access import kernel_func
    from hawk.ir.build import create
    from hawk.passes.lower import chunk_loops, state
    from hawk.passes.lower.context import lanes_point
    from hawk.passes.lower_gpu import gpu_context, gpu_lanes_func, gpu_return

    cx = gpu_context(module, layout, ftype, itypes, wide=wide)
    e = cx.e
    kfunc = kernel_func(module)
    body = kfunc.regions[0].blocks[0]
    with lanes_point(module, layout.name), kfunc.location:  # (before the finish build-finish made)
        lanes = gpu_lanes_func(cx)
    with kfunc.location:
        blocks = cx.blocks = plan_blocks(cx, body)
    space = ir.Attribute.parse("#gpu.address_space<workgroup>")
    shared_t = ir.MemRefType.get([WORKGROUP], e.f, memory_space=space)
    nshared = sum(_parts(b) for b in blocks)
    lanes.operation.attributes["workgroup_attributions"] = ir.IntegerAttr.get(e.i64, nshared)
    entry = lanes.add_entry_block()
    shared = [entry.add_argument(shared_t, kfunc.location) for _ in range(nshared)]
    cx.bufs = cx.args(lanes)
    cx.begin(entry)
    S, R = layout.block_span, block_round(layout)
    P = R // S
    T = WORKGROUP // P
    with ir.InsertionPoint(entry), kfunc.location:
        cx.read_meta()
        meta = cx.bufs[("#meta", "meta")]
        C = e.to_index(e.load(meta, e.c(0)))
        base = e.to_index(e.load(meta, e.c(1)))
        end = e.to_index(e.load(meta, e.c(4 + len(cx.axes))))
        dim = ir.Attribute.parse("#gpu<dim x>")
        tid = create("gpu.thread_id", [], [e.index], {"dimension": dim}).result
        cx.chunk = create("gpu.block_id", [], [e.index], {"dimension": dim}).result
        cx.copy = e.c(0)
        glo = e.op("arith.minui", e.op("arith.maxui", e.mul_i(cx.chunk, C), base), end)
        ghi = e.op("arith.minui", e.add_i(e.mul_i(cx.chunk, C), C), end)
        chunk0, _ = state.plan_state(cx, body)  # (nothing: a blocks stage has no other reduction)
        cx.nested, cx.j = None, None
        p = e.op("arith.divui", tid, e.c(T))
        u = e.op("arith.remui", tid, e.c(T))
        rounds = scf.ForOp(e.op("arith.divui", glo, e.c(R)), e.op("arith.divui", e.add_i(ghi, e.c(R - 1)), e.c(R)),
                           e.c(1), [])
        with ir.InsertionPoint(rounds.body):
            s0 = e.mul_i(e.add_i(e.mul_i(rounds.induction_variable, e.c(P)), p), e.c(S))
            lo = e.op("arith.maxui", s0, glo)
            hi = e.op("arith.maxui", e.op("arith.minui", e.add_i(s0, e.c(S)), ghi), lo)
            first = e.add_i(lo, u)
            cx.block_regs = {}
            at = 0
            for ph in sorted({b.phase for b in blocks}):
                group = [b for b in blocks if b.phase == ph]
                res = fold_lanes(cx, body, group, first, e.op("arith.maxui", hi, first), e.c(T))
                for b in group:
                    cx.block_regs[b.n] = _tree(cx, b, res, shared[at:at + _parts(b)], tid, u, p, T)
                    at += _parts(b)
            loop = scf.ForOp(first, e.op("arith.maxui", hi, first), e.c(T), chunk0)
            with ir.InsertionPoint(loop.body):
                anchor = scf.YieldOp(list(loop.inner_iter_args))
            chunk_loops.lower_body(cx, body, anchor, loop, loop.induction_variable, loop.inner_iter_args)
            scf.YieldOp([])
        cx.block_regs = None
        gpu_return(cx, lanes)
    kfunc.operation.erase()


def _tree(cx: Lowering, b: Block, res: list[ir.Value], red: list[ir.Value], tid, u, p, T: int) -> ir.Value:
    """The T threads of a slot combine their fold states pairwise in workgroup memory (thread u with u + half,
    half = T/2, T/4, ... 1); every thread then reads the slot's total. Barriers are reached by every thread."""
    from mlir.dialects import gpu

    e = cx.e
    vals = [res[b.slot]]
    if len(red) > 1 + (b.kind == "mean"):
        vals.append(res[b.slot + 1])
    if b.kind == "mean":
        vals.append(e.op("arith.uitofp", res[b.slot + len(vals)], t=e.f))
    for v, buf in zip(vals, red, strict=True):
        e.store(v, buf, tid)
    half = T // 2
    while half:
        gpu.BarrierOp()
        step = scf.IfOp(e.cmpi(6, u, e.c(half)), [], has_else=False)  # ult
        with ir.InsertionPoint(step.then_block):
            other = e.add_i(tid, e.c(half))
            mine = [e.load(buf, tid) for buf in red]
            theirs = [e.load(buf, other) for buf in red]
            for v, buf in zip(_combine(cx, b, mine, theirs), red, strict=True):
                e.store(v, buf, tid)
            scf.YieldOp([])
        half //= 2
    gpu.BarrierOp()
    lead = e.mul_i(p, e.c(T))
    got = [e.load(buf, lead) for buf in red]
    gpu.BarrierOp()  # (every thread has read before the next tree writes)
    v = got[0]
    if b.kind in ("sum", "mean") and b.policy == "compensated":
        v = e.add(v, got[1])
    if b.kind == "mean":
        v = e.op("arith.divf", v, got[-1])
    return v


def _combine(cx: Lowering, b: Block, a: list[ir.Value], c: list[ir.Value]) -> list[ir.Value]:
    """Two threads' fold states as one."""
    e = cx.e
    if b.kind in ("max", "min"):
        return [extremum(cx, b.kind, a[0], c[0])]
    out = list(a)
    if b.policy == "compensated":
        ns, nc = e.neumaier(a[0], a[1], c[0])
        out[0], out[1] = ns, e.add(nc, c[1])
    else:
        out[0] = e.add(a[0], c[0])
    if b.kind == "mean":
        out[-1] = e.add(a[-1], c[-1])
    return out
