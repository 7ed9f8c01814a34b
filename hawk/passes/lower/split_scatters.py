"""Three host forms of a lane loop whose only effects are adds of scalars into sinks no lane stores into (no
reduction; a chunk-loop form of chunk_loops.flat_driver):

- plain sinks with a key computed in the kernel (`hawk.scatter(counts)[m.index(t * 256.0, 256)] += 1.0`): two
  passes per block of lanes. The first computes every lane's keys and values into small buffers with no store
  into a sink, so LLVM vectorizes it; the second adds them into the sink lane by lane, in lane order (the same
  adds, in the same order, as one pass). Fused, the sink's loads and stores sit between the key computations
  and the loop stays scalar.
- ordered sinks kept in per-chunk (high, low) pairs (scatters.exact_add), whatever the keys (paired_driver):
  PAIR_LANES lanes at a time run the body, then their two TwoSums side by side in one vector, each lane on its
  own slot's pair (gathered, then scattered back). Those are the very steps exact_add runs on each lane, so
  every pair ends with the same bits as lane by lane; when the group's slots coincide or some pair would lose
  a bit, the group takes exact_add lane by lane, and a group with a key outside the sink (or -1) runs lane by
  lane as one pass would (its errors reported in lane order). The two TwoSums are a dozen dependent flops that
  kept an ordered scatter near twice a plain one's time; side by side, the lanes share them. (The two-pass form
  does not pay here: reading the block's buffers back behind the pairs' scattered stores cost more than the
  vector saved.)
- compensated sinks kept in per-chunk copies (a scatter's "auto"), whatever the keys: the same groups, each
  lane's Neumaier step (scatters.comp_add's) side by side in one vector of float64 (comp_adds), kept when the
  group's slots all differ, else lane by lane. Lane by lane, the step's dependent flops through the slot's
  (sum, correction) made an auto scatter slower than an ordered one (10.7 against 7.3 ms at 1e7 lanes into 1024
  slots, 2 threads; 24 against 20 ms on one); grouped, 7.4 and 10 ms, near a plain scatter's.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf, vector

from hawk.ir.access import is_plane_value, scatter_keys, scatter_mode, sink_name, stored_value
from hawk.ir.build import create
from hawk.passes import exact_emit
from hawk.passes.analysis import key_source, payload_of
from hawk.passes.lower import planes, scatters
from hawk.passes.lower.context import Lowering, clone_body, rewrite_ops

SPLIT_BLOCK = 256  # lanes per block: the key and value buffers stay in L1
PAIR_LANES = 4  # lanes of an ordered scatter whose pair updates run side by side (one vector of floats)
_NE, _UNE = 1, 13  # arith.cmpi "ne", arith.cmpf "une"


def paired(cx: Lowering, op) -> bool:
    """An ordered += of a scalar into a sink whose slots this chunk keeps in (high, low) pairs, keyed otherwise
    than straight from a Sorted[Index] plane (whose neighbouring lanes share their slot: a group would always
    fall back to lane by lane)."""
    sink = sink_name(op)
    for k in scatter_keys(op):
        src = key_source(k)
        spec = cx.lay.sig.get(src) if src else None
        if spec is not None and spec.kind == "index" and spec.sorted:
            return False
    if scatter_mode(op) != "add" or sink not in cx.lay.private or sink in cx.lay.stored or \
            payload_of(stored_value(op).type):
        return False
    policy = cx.lay.sink_policy.get(sink)
    if policy == "compensated":  # (whole-number counts add plainly: the two-pass form takes them)
        return sink not in getattr(cx, "count_sinks", ()) and (sink, "priv") in cx.bufs
    return policy == "ordered" and (sink, "pairs") in cx.bufs


def scatter_body(body: ir.Block) -> list | None:
    """The body's top-level scatters when it has no control flow and no hawk op but reads of planes, params,
    lanes and extents, scatters and cells (else None)."""
    from hawk.ir.dialect import is_hawk

    found, ok = [], [True]

    def visit(op):
        if op.name.startswith("scf.") or \
                (is_hawk(op) and op.name[5:] not in ("load", "param", "lane", "extent", "at", "scatter", "cell")):
            ok[0] = False
        return ir.WalkResult.ADVANCE

    for op in body.operations:
        op.operation.walk(visit)
        if op.operation.name == "hawk.scatter":
            found.append(op)
    return found if ok[0] else None


def split_scatters(cx: Lowering, body: ir.Block) -> list | None:
    """The body's scatters when the two-pass form applies (else None): every effect a top-level add of a scalar
    into a sink no lane stores into, no reduction, and either every scatter ordered into pairs (`paired`) or
    every one plain with at least one key computed in the kernel (a key read straight from an Index plane gains
    nothing there)."""
    if not cx.exact_pairs or cx.lay.reductions or len(cx.axes) != 1:
        return None
    scatters_ = scatter_body(body)
    if not scatters_:
        return None
    if all(paired(cx, op) for op in scatters_):
        return scatters_
    computed = False
    for op in scatters_:
        sink = sink_name(op)
        counts = sink in getattr(cx, "count_sinks", ())  # whole-number counts: plain adds (chunk_loops.count_sinks)
        if scatter_mode(op) != "add" or (cx.lay.sink_policy.get(sink) != "plain" and not counts) or \
                sink in cx.lay.stored or payload_of(stored_value(op).type):
            return None
        computed = computed or any(key_source(k) is None for k in scatter_keys(op))
    return scatters_ if computed else None


def split_driver(cx: Lowering, body: ir.Block, chunk0: list[ir.Value]) -> list[ir.Value]:
    """for block: for lane: keys and values into buffers; for lane: the scatter-adds from the buffers (ordered
    scatters into pairs: paired_driver)."""
    e = cx.e
    if all(paired(cx, op) for op in body.operations if op.operation.name == "hawk.scatter"):
        return paired_driver(cx, body, chunk0)
    B = SPLIT_BLOCK
    outer = scf.ForOp(cx.lo, cx.hi, e.c(B), chunk0)
    with ir.InsertionPoint(outer.body):
        start = outer.induction_variable
        end = e.op("arith.minui", e.add_i(start, e.c(B)), cx.hi)
        first = scf.ForOp(start, end, e.c(1), [])
        with ir.InsertionPoint(first.body):
            anchor = scf.YieldOp([])
        copies = clone_body(cx, body, anchor)
        # each scatter's operands: constants are made again in the second pass, the rest go through buffers
        parked = []
        with ir.InsertionPoint(anchor), body.owner.location:
            at = e.op("arith.subi", first.induction_variable, start)
            for n, op in enumerate(c for c in copies if c.operation.name == "hawk.scatter"):
                slots = []
                for k, v in enumerate(op.operands):
                    if is_plane_value(v):  # the sink itself: kept as it is
                        slots.append(("keep", v))
                    elif not isinstance(v.owner, ir.Block) and v.owner.name == "arith.constant":
                        slots.append(("const", v.owner))
                    else:
                        buf = cx.temp(B, v.type, tag=f"split{n}.{k}")
                        e.store(v, buf, at)
                        slots.append(("buf", buf))
                parked.append((op, slots))
        cx.lane, cx.accs, cx.j = first.induction_variable, [], None
        rewrite_ops(cx, [c for c in copies if c.operation.name != "hawk.scatter"])
        second = scf.ForOp(start, end, e.c(1), [])
        with ir.InsertionPoint(second.body), body.owner.location:
            at = e.op("arith.subi", second.induction_variable, start)
            again = []
            for op, slots in parked:
                vals = [slot if how == "keep" else slot.operation.clone().results[0] if how == "const"
                        else e.load(slot, at) for how, slot in slots]
                new = op.operation.clone()
                for k, v in enumerate(vals):
                    new.operands[k] = v
                again.append(new)
                op.operation.erase()
            cx.lane = second.induction_variable
            rewrite_ops(cx, again)
            scf.YieldOp([])
        anchor.operation.erase()
        with ir.InsertionPoint(first.body):
            scf.YieldOp([])
        scf.YieldOp(list(outer.inner_iter_args))
    return list(outer.results)


def paired_driver(cx: Lowering, body: ir.Block, chunk0: list[ir.Value]) -> list[ir.Value]:
    """for group of PAIR_LANES lanes: the body once per lane, then the group's ordered adds side by side
    (pair_adds) when every key lies inside its sink, else each lane's scatters in lane order; the lanes left
    over (fewer than PAIR_LANES) one by one."""
    e = cx.e
    W = PAIR_LANES
    loop, anchor, stop = group_loop(cx, W, chunk0)
    with ir.InsertionPoint(anchor), body.owner.location:  # (the group's input lines, AHEAD lanes on)
        planes.prefetch_ahead(cx, body, loop.induction_variable, W)
    lanes, groups = [], []
    for j in range(W):
        with ir.InsertionPoint(anchor), body.owner.location:
            lane = e.add_i(loop.induction_variable, e.c(j)) if j else loop.induction_variable
        lanes.append(lane)
        groups.append(lane_scatters(cx, body, anchor, lane))
    with ir.InsertionPoint(anchor), body.owner.location:
        plan, valid = [], None
        for n, op in enumerate(groups[0]):
            sink = sink_name(op)
            spec = cx.lay.sig.get(sink)
            per = []
            for j in range(W):
                keys = scatter_keys(groups[j][n])
                ok, _, idx, slots = scatters.key_index(cx, spec, keys)
                if slots >= scatters.PREFETCH_SLOTS:  # (a hint for the lane PREFETCH_KEYS ahead)
                    cx.lane = lanes[j]
                    scatters.prefetch_pair(cx, sink, keys, slots)
                valid = ok if valid is None else e.op("arith.andi", valid, ok)
                per.append((idx, stored_value(groups[j][n])))
            plan.append((sink, per))
        branch = scf.IfOp(valid, [], has_else=True)
        with ir.InsertionPoint(branch.then_block):  # every key inside its sink
            for sink, per in plan:
                (pair_adds if cx.lay.sink_policy.get(sink) == "ordered" else comp_adds)(cx, sink, per)
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):  # a key -1 or outside: lane by lane, errors in lane order
            for j in range(W):
                again = [op.operation.clone() for op in groups[j]]
                cx.lane = None  # (no lane of its own: the group's pairs were prefetched above)
                rewrite_ops(cx, again)
            scf.YieldOp([])
    for group in groups:
        for op in group:
            op.operation.erase()
    tail = scf.ForOp(stop, cx.hi, e.c(1), list(loop.results))
    with ir.InsertionPoint(tail.body):
        anchor = scf.YieldOp(list(tail.inner_iter_args))
    copies = clone_body(cx, body, anchor)
    cx.lane, cx.accs, cx.j = tail.induction_variable, [], None
    rewrite_ops(cx, copies)
    return list(tail.results)


def group_loop(cx: Lowering, width: int, init: list[ir.Value]):
    """The loop over the chunk's whole groups of `width` lanes, from cx.lo, carrying `init`: (the loop, the
    placeholder yield ending its body, the first lane after the last whole group)."""
    e = cx.e
    span = e.op("arith.subi", cx.hi, cx.lo)
    stop = e.add_i(cx.lo, e.op("arith.subi", span, e.op("arith.remui", span, e.c(width))))
    loop = scf.ForOp(cx.lo, stop, e.c(width), init)
    with ir.InsertionPoint(loop.body):
        anchor = scf.YieldOp(list(loop.inner_iter_args))
    return loop, anchor, stop


def lane_scatters(cx: Lowering, body: ir.Block, anchor, lane: ir.Value) -> list:
    """The body copied before `anchor` for `lane`, every op lowered but its scatters: those copies, not yet
    lowered (their keys and values are lowered values), for the caller to lower or erase."""
    copies = clone_body(cx, body, anchor)
    kept = [c for c in copies if c.operation.name == "hawk.scatter"]  # (before rewrite_ops erases the rest)
    cx.lane, cx.accs, cx.j = lane, [], None
    rewrite_ops(cx, [c for c in copies if c.operation.name != "hawk.scatter"])
    return kept


def _distinct(cx: Lowering, lanes: list[tuple[ir.Value, ir.Value]], keep: ir.Value | None = None) -> ir.Value:
    """i1: the lanes' slots (each lane's first entry) all differ (and `keep`, when given)."""
    e = cx.e
    for a in range(len(lanes)):
        for b in range(a + 1, len(lanes)):
            ne = e.cmpi(_NE, lanes[a][0], lanes[b][0])
            keep = ne if keep is None else e.op("arith.andi", keep, ne)
    return keep


def pair_adds(cx: Lowering, sink: str, lanes: list[tuple[ir.Value, ir.Value]]) -> None:
    """Each lane's (slot, term) into the slot's (high, low) pair by exact_add's two TwoSums, the lanes side by
    side: kept when every lane's second error is zero and the slots all differ, else exact_add lane by lane
    (from the pairs as they were)."""
    e = cx.e
    W = len(lanes)
    pairs = cx.bufs[(sink, "pairs")]
    base = scatters.copy_start(cx, sink)
    at = [e.mul_i(e.add_i(idx, base), e.c(2)) for idx, _ in lanes]
    two = [e.vload(pairs, p, 2, e.f64) for p in at]  # [high, low] of each lane's slot (float64 pairs)
    while len(two) > 1:  # concatenated: [h0, l0, h1, l1, ...]
        m = ir.VectorType(two[0].type).shape[0]
        two = [e.shuffle(two[k], two[k + 1], list(range(2 * m))) for k in range(0, len(two), 2)]
    both = two[0]
    hi = e.shuffle(both, both, list(range(0, 2 * W, 2)))
    lo = e.shuffle(both, both, list(range(1, 2 * W, 2)))
    wide = [e.widen(v, e.f64) for _, v in lanes]
    x = create("vector.from_elements", wide, [ir.VectorType.get([W], e.f64)]).result
    s1, e1 = e.two_sum(hi, x)
    s2, e2 = e.two_sum(lo, e1)
    lost = e.cmpf(_UNE, e2, e.splat(0.0, e2.type))  # (NaN: an inf or NaN sum)
    if not isinstance(e.f, ir.F64Type):  # (a float32 kernel's pair stays below 2**127, as in scatters.exact_add)
        lost = e.op("arith.ori", lost, exact_emit.past_f32(e, s1))
    lost = e.any_of(lost)
    keep = _distinct(cx, lanes, e.op("arith.xori", lost, e.c(1, e.i1)))
    branch = scf.IfOp(keep, [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        mixed = e.shuffle(s1, s2, [k for j in range(W) for k in (j, W + j)])
        for j, p in enumerate(at):
            e.vstore(e.shuffle(mixed, mixed, [2 * j, 2 * j + 1]), pairs, p)
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        for idx, v in lanes:
            scatters.exact_add(cx, sink, idx, v)
        scf.YieldOp([])


def comp_adds(cx: Lowering, sink: str, lanes: list[tuple[ir.Value, ir.Value]]) -> None:
    """Each lane's (slot, term) into the slot's (sum, correction) pair of this chunk's compensated copy by one
    Neumaier step (scatters.comp_add's), the lanes side by side: kept when the slots all differ (each lane then
    steps its own pair, with comp_add's very bits), else comp_add lane by lane (from the pairs as they were)."""
    e = cx.e
    W = len(lanes)
    places = [scatters.pair_at(cx, sink, idx) for idx, _ in lanes]
    comp, at, at_c = places[0][0], [p[1] for p in places], [p[2] for p in places]
    vec = ir.VectorType.get([W], e.f64)

    def gather(values):
        return create("vector.from_elements", values, [vec]).result

    s, c = gather([e.load(comp, p) for p in at]), gather([e.load(comp, p) for p in at_c])
    t, c2 = e.neumaier(s, c, gather([e.widen(v, e.f64) for _, v in lanes]))
    branch = scf.IfOp(_distinct(cx, lanes), [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        for j in range(W):
            e.store(vector.extract(t, [], [j]), comp, at[j])
            e.store(vector.extract(c2, [], [j]), comp, at_c[j])
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        for idx, v in lanes:
            scatters.comp_add(cx, sink, idx, e.widen(v, e.f64))
        scf.YieldOp([])
