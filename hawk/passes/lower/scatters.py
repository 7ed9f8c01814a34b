"""Rules for scatters into sinks (hawk.scatter: `+=` and `=` by key tuple, keys outside reported through #err)
and the shared step that adds a value into a slot of a sink or kept cell under its policy ("add-into": plain,
into this chunk's private copy, compensated through a companion, or ordered into exact accumulators). The "gpu"
variant of add-into takes float atomic adds into sinks too large to privatise where the target has them.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import memref, scf

from hawk.ir.access import scatter_keys, scatter_mode, sink_name, stored_value
from hawk.ir.build import create
from hawk.passes import exact_emit
from hawk.passes.analysis import payload_of
from hawk.passes.host_emit import _EQ, _SGE, _SLT, like, size
from hawk.passes.lower import planes, slot_ranges, sorted_runs
from hawk.passes.lower.context import Lowering, rule

_OEQ, _UGE, _UNE = 1, 10, 13  # arith.cmpf "oeq", "uge", "une"


@rule("add-into")
def add_into(cx: Lowering, policy: str, name: str, at: ir.Value, x: ir.Value, role: str) -> None:
    """Add x into slot `at` of buffer (name, role): plain, compensated or ordered (into the slot's exact
    accumulator: this chunk's copy, or the one copy every chunk shares, added into atomically)."""
    e = cx.e
    if policy == "plain" and name in cx.lay.private:  # this chunk's own copy of the sink
        buf = cx.bufs[(name, "priv")]
        at = e.add_i(at, copy_start(cx, name))
        e.store(e.add(e.load(buf, at), x), buf, at)
    elif policy == "plain":
        buf = cx.bufs[(name, role)]
        e.store(e.add(e.load(buf, at), x), buf, at)
    elif policy == "compensated":
        comp_add(cx, name, at, e.widen(x, e.f64))
    else:
        exact_add(cx, name, at, x)


@rule("add-into", target="gpu")
def add_into_gpu(cx: Lowering, policy: str, name: str, at: ir.Value, x: ir.Value, role: str) -> None:
    """A plain add into a large sink: one float atomic add where the target has them (the runtime then spreads
    the lanes over threads: `Layout.parallel_span(atomics=True)`). Ordered adds go to the exact accumulators
    (integer atomics where threads share one: every target has them)."""
    if name not in cx.atomic or role != "sink" or policy != "plain":
        return add_into(cx, policy, name, at, x, role)
    kind = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)  # arith::AtomicRMWKind::addf
    create("memref.atomic_rmw", [x, cx.bufs[(name, "sink")], at], [x.type], {"kind": kind})


def exact_add(cx: Lowering, name: str, at: ir.Value, x: ir.Value, live: ir.Value | None = None) -> None:
    """x into slot `at` of an ordered sink or kept cell: on the host, into this chunk's (high, low) pair of
    the slot (float64, also for float32 kernels: 106 bits, where float32 pairs held 48 and widely spread terms
    spilled often) by two error-free TwoSums, and only a term the pair cannot take exactly (the second TwoSum
    errs, a sum is not finite, or a float32 kernel's pair would reach 2**127) into the slot's shared exact
    accumulator, counted in its last word; on a GPU (and for a sink also stored into) every term into the
    accumulator."""
    e = cx.e
    buf = cx.bufs[(name, "exact")]
    w = exact_emit.words_of(e.f)
    shared = name not in cx.lay.stored  # every chunk adds into the one accumulator
    if not (cx.exact_pairs and name in cx.lay.private):  # (x may be a float32 kernel's float64 pair value)
        exact_emit.deposit_as(e, buf, e.mul_i(at, e.c(w)), x, e.f, live, atomic=shared)
        return
    pairs = cx.bufs[(name, "pairs")]
    p = e.mul_i(e.add_i(at, copy_start(cx, name)), e.c(2))
    q = e.add_i(p, e.c(1))
    if live is not None:
        x = e.select(live, x, e.cf(0.0))
    hi, lo = e.load(pairs, p), e.load(pairs, q)
    s1, s2, ok = pair_add(cx, hi, lo, e.c(1, e.i1), e.widen(x, e.f64))
    if not isinstance(e.f, ir.F64Type):  # (a float32 kernel's pair stays below 2**127: the finish's f32_parts)
        ok = e.op("arith.andi", ok, e.op("arith.xori", exact_emit.past_f32(e, s1), e.c(1, e.i1)))
    keep = scf.IfOp(ok, [], has_else=True)
    with ir.InsertionPoint(keep.then_block):
        e.store(s1, pairs, p)
        e.store(s2, pairs, q)
        scf.YieldOp([])
    with ir.InsertionPoint(keep.else_block):
        spill(cx, name, at, x)
        scf.YieldOp([])


def pair_limit(cx: Lowering) -> float:
    """The magnitude from which a term skips a register pair (sorted runs, nested kept totals, wide payloads) and
    goes straight to the exact accumulator: 2**(emax - 64) of the kernel's type, so that a pair's sums stay
    finite and a float32 kernel's float64 pair below 2**127 (exact_emit.f32_parts)."""
    return 2.0 ** ((1024 if cx.e.f == cx.e.f64 else 128) - 64)


def pair_step(cx: Lowering, hi: ir.Value, lo: ir.Value, x: ir.Value) -> tuple[ir.Value, ...]:
    """x (float64: one value, or a vector beside the vectors hi and lo) into (high, low) pairs by two TwoSums, the
    step sorted runs, nested kept totals and wide payloads share. A term at or above pair_limit (an inf, a NaN
    too) skips its pair; it, or else a non-zero second error, is the lane's `late` value, which the caller spills
    where `rare` holds: the pairs plus what they spilled stay the exact sum of the terms. Returns
    (hi, lo, rare, late)."""
    e = cx.e
    zero, limit = e.cf(0.0, like(x.type, e.f64)), e.cf(pair_limit(cx), like(x.type, e.f64))
    big = e.cmpf(_UGE, e.abs(x), limit)
    hi, e1 = e.two_sum(hi, e.select(big, zero, x))
    lo, e2 = e.two_sum(lo, e1)
    return hi, lo, e.op("arith.ori", big, e.cmpf(_UNE, e2, zero)), e.select(big, x, e2)


def pair_add(cx: Lowering, hi: ir.Value, lo: ir.Value, ok: ir.Value, x: ir.Value) -> tuple[ir.Value, ...]:
    """(hi, lo) += x by two TwoSums in float64 (the finish's and a nested driver's merge of pairs; scalars, or
    vectors side by side: finish_slots); ok stays true while the pair holds the exact sum (finite, no second
    error). Returns (hi, lo, ok)."""
    e = cx.e
    s1, e1 = e.two_sum(hi, x)
    s2, e2 = e.two_sum(lo, e1)
    fine = e.cmpf(_OEQ, e2, e.cf(0.0, e2.type))  # false for NaN too (a sum that is inf or NaN makes the error NaN)
    return s1, s2, e.op("arith.andi", ok, fine)


def spill(cx: Lowering, name: str, at: ir.Value, x: ir.Value) -> None:
    """x (of the kernel's type, or float64 from a float32 kernel's pairs: exact_emit.deposit_as) into slot `at`'s
    shared exact accumulator (a term a (high, low) pair could not take exactly); with
    per-chunk pairs, counted in the accumulator buffer's last word (the finish then rounds that sink from its
    accumulators)."""
    e = cx.e
    buf = cx.bufs[(name, "exact")]
    exact_emit.deposit_as(e, buf, e.mul_i(at, e.c(exact_emit.words_of(e.f))), x, e.f, atomic=True)
    if not (cx.exact_pairs and name in cx.lay.private):  # (no pairs: every term is in the accumulators)
        return
    last = e.op("arith.subi", e.dim(buf), e.c(1))
    create("memref.atomic_rmw", [e.c(1, e.i64), buf, last], [e.i64],
           {"kind": ir.IntegerAttr.get(e.i64, 1)})  # addi


def spill_lanes(cx: Lowering, name: str, at: ir.Value, rare: ir.Value, late: ir.Value) -> None:
    """Each lane of the float64 vector `late` where `rare` holds (pair_step's; a rare lane's value is never zero:
    a large term or a non-zero error) spilled into slot `at` of `name`. The lanes are parked in a small buffer
    and spilled in a loop: one copy of spill's code (an unrolled copy per lane made a library's build slow)."""
    e = cx.e
    n = ir.VectorType(late.type).shape[0]
    parked = cx.temp(n, e.f64, tag="spill-lanes")
    e.vstore(e.select(rare, late, e.splat(0.0, late.type)), parked, e.c(0))
    each = scf.ForOp(e.c(0), e.c(n), e.c(1), [])
    with ir.InsertionPoint(each.body):
        x = e.load(parked, each.induction_variable)
        one = scf.IfOp(e.cmpf(_UNE, x, e.cf(0.0, e.f64)), [], has_else=False)
        with ir.InsertionPoint(one.then_block):
            spill(cx, name, at, x)
            scf.YieldOp([])
        scf.YieldOp([])


def add_each(cx: Lowering, name: str, at: ir.Value, vals: list[ir.Value]) -> None:
    """exact_add of each of these float64 values into slot `at`, parked in a small buffer and added in a loop
    (one copy of exact_add's code)."""
    e = cx.e
    parked = cx.temp(len(vals), e.f64, tag="add-each")
    for i, v in enumerate(vals):
        e.store(v, parked, e.c(i))
    each = scf.ForOp(e.c(0), e.c(len(vals)), e.c(1), [])
    with ir.InsertionPoint(each.body):
        exact_add(cx, name, at, e.load(parked, each.induction_variable))
        scf.YieldOp([])


def pair_at(cx: Lowering, name: str, at: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(buffer, sum's index, correction's index) of slot `at`'s compensated pair of a sink or kept cell: this
    chunk's copy where it has copies, else the companion. A sink of more than SIDE_BY_SIDE values keeps its
    pairs side by side, a smaller one and a kept cell their sums before their corrections
    (Layout.pairs_side_by_side)."""
    e = cx.e
    private = name in cx.lay.private
    buf = cx.bufs[(name, "priv" if private else "comp")]
    base = copy_start(cx, name, 2) if private else None
    if cx.lay.pairs_side_by_side(name):
        s = e.mul_i(at, e.c(2))
        s = e.add_i(s, base) if private else s
        return buf, s, e.add_i(s, e.c(1))
    s = e.add_i(at, base) if private else at
    return buf, s, e.add_i(s, e.c(cx.lay.stride(name)) if private else slots_of(cx, name))


def comp_add(cx: Lowering, name: str, at: ir.Value, x: ir.Value, carry: ir.Value | None = None) -> None:
    """Neumaier-add x (float64) into the companion's (sum, correction) pair of slot `at` (pair_at); `carry` is a
    correction already gathered elsewhere (a sorted run's)."""
    e = cx.e
    comp, at, at_c = pair_at(cx, name, at)
    if carry is None and name in getattr(cx, "count_sinks", ()):  # whole-number counts: exact, no correction
        e.store(e.add(e.load(comp, at), x), comp, at)  # (chunk_loops.count_sinks: Neumaier's very bits)
        return
    s, c = e.neumaier(e.load(comp, at), e.load(comp, at_c), x)
    e.store(s, comp, at)
    e.store(c if carry is None else e.add(c, carry), comp, at_c)


def slots_of(cx: Lowering, name: str) -> ir.Value:
    """Slots of a sink (static) or of a cell kept by a reduction over some axes (from the lane extents)."""
    e = cx.e
    spec = cx.lay.sig.get(name)
    if spec is not None and spec.kind == "sink":
        return e.c(size(cx.lay.sinks.get(name, ())) * size(tuple(a.extent for a in spec.axes)))
    r = next(r for r in cx.lay.reductions if r.cell == name)
    n = e.c(size(r.payload))
    for a in r.kept:
        n = e.mul_i(n, cx.ext[cx.axes.index(a)])
    return n


def key_index(cx: Lowering, spec, keys: list[ir.Value]) -> tuple[ir.Value, ir.Value, ir.Value, int]:
    """(in range, any key is -1, linear slot, number of slots) of a key tuple."""
    e = cx.e
    ok = skip = None
    idx, stride = e.c(0), 1
    for a, kv in reversed(list(zip(spec.axes, keys, strict=True))):
        inside = e.op("arith.andi", e.cmpi(_SGE, kv, e.c(0, e.i64)), e.cmpi(_SLT, kv, e.c(a.extent, e.i64)))
        minus = e.cmpi(_EQ, kv, e.c(-1, e.i64))
        ok = inside if ok is None else e.op("arith.andi", ok, inside)
        skip = minus if skip is None else e.op("arith.ori", skip, minus)
        idx = e.add_i(idx, e.mul_i(e.to_index(kv), e.c(stride)))
        stride *= a.extent
    return ok, skip, idx, stride


@rule("hawk.scatter")
def lower_scatter(cx: Lowering, op) -> None:
    if "hawk.run" in op.attributes:  # keys from a Sorted[Index] plane: the run is summed in registers
        sorted_runs.sorted_step(cx, cx.runs[ir.IntegerAttr(op.attributes["hawk.run"]).value], op)
        return None
    e = cx.e
    sink = sink_name(op)
    spec = cx.lay.sig.get(sink)
    v, keys = stored_value(op), scatter_keys(op)
    ok, skip, idx, n = key_index(cx, spec, keys)
    shape = payload_of(v.type)
    mode = scatter_mode(op)
    policy = cx.lay.sink_policy.get(sink, "plain")
    if mode == "add" and policy == "ordered" and not shape and n >= PREFETCH_SLOTS:
        prefetch_pair(cx, sink, keys, n)
    branch = scf.IfOp(ok, [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        buf = cx.bufs[(sink, "sink")]
        with slot_ranges.own(cx, n, idx):  # (a slot-range stage: only this chunk's slots; slot_ranges.py)
            for c, x in planes.components(cx, v, shape):
                at = e.add_i(e.mul_i(c, e.c(n)), idx) if shape else idx
                if mode == "add":
                    cx.apply("add-into", policy, sink, at, x, "sink")
                elif (sink, "mark") in cx.bufs:  # this chunk's copy, and a mark: the finish takes the last chunk's
                    at = e.add_i(at, copy_start(cx, sink))
                    e.store(x, cx.bufs[(sink, "priv")], at)
                    e.store(e.c(1, e.i64), cx.bufs[(sink, "mark")], at)
                else:
                    e.store(x, buf, at)
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        # a key of -1 (on any axis) adds and stores nothing under every policy; any other key outside is
        # reported below, by sink, through the #err buffer
        report_bad_key(cx, sink, keys[0], e.op("arith.xori", skip, e.c(1, e.i1)))
        scf.YieldOp([])


PREFETCH_SLOTS = 1 << 16  # ordered sinks from this many slots get their pairs prefetched (16 B a slot: past L2)
PREFETCH_KEYS = 64  # how many lanes ahead: a random slot's cache miss takes about that many lanes' work


def prefetch_pair(cx: Lowering, sink: str, keys: list[ir.Value], n: int) -> None:
    """A write-prefetch hint for the (high, low) pair the lane PREFETCH_KEYS ahead will add into, when the key
    is read straight from an Index plane at this lane (a large ordered sink's lanes wait on that miss, with
    random keys, more than on the TwoSums). Only a hint: the lane is clamped to the last one, the slot into
    the sink (a key of -1 or outside prefetches a valid slot), and no result depends on it."""
    e = cx.e
    if not (cx.exact_pairs and sink in cx.lay.private and len(keys) == 1 and cx.lane is not None
            and (sink, "pairs") in cx.bufs):
        return
    casts, v = [], keys[0]
    while not isinstance(v.owner, ir.Block) and v.owner.name in ("arith.extsi", "arith.extui"):
        casts.append(v.owner)
        v = v.owner.operands[0]
    load = v.owner
    if isinstance(load, ir.Block) or load.name != "memref.load" or len(load.operands) != 2 \
            or load.operands[1] != cx.lane:
        return
    ahead = e.op("arith.minui", e.add_i(cx.lane, e.c(PREFETCH_KEYS)), e.op("arith.subi", cx.L, e.c(1)))
    key = e.load(load.operands[0], ahead)
    for c in reversed(casts):
        key = e.op(c.name, key, t=c.results[0].type)
    slot = e.op("arith.minui", e.to_index(key), e.c(n - 1))
    at = e.mul_i(e.add_i(slot, copy_start(cx, sink)), e.c(2))
    memref.PrefetchOp(cx.bufs[(sink, "pairs")], [at], True, 3, True)


def report_bad_key(cx: Lowering, sink: str, key: ir.Value, bad: ir.Value, role: str = "sink",
                   lanes: ir.Value | None = None) -> None:
    """When `bad`, count a key outside `sink` (or, role "out", an output plane written by key) in this chunk's
    three slots of the #err buffer (count, first bad key, sink): chunks never race, and the runtime reads the
    first bad key of the earliest chunk, which is the earliest bad lane's. `lanes` (an i64): how many lanes hold
    it (a sorted run's), else one."""
    e = cx.e
    report = scf.IfOp(bad if cx.bad_keys else slot_ranges.first_only(cx, bad), [], has_else=False)
    with ir.InsertionPoint(report.then_block):
        if cx.bad_keys:  # (a pair of its own: the caller reports it later)
            err, base = cx.bad_keys
        else:
            err, base = cx.bufs[("#err", "err")], e.mul_i(cx.chunk, e.c(3))
        count_at, key_at = base, e.add_i(base, e.c(1))
        first = e.cmpi(_EQ, e.load(err, count_at), e.c(0, e.i64))
        e.store(e.op("arith.addi", e.load(err, count_at), e.c(1, e.i64) if lanes is None else lanes), err, count_at)
        e.store(e.select(first, key, e.load(err, key_at)), err, key_at)
        if not cx.bad_keys:
            e.store(e.c(cx.lay.buffer_index(sink, role), e.i64), err, e.add_i(base, e.c(2)))
        scf.YieldOp([])


def copy_start(cx: Lowering, name: str, width: int = 1) -> ir.Value:
    """Where this chunk's private copy of a sink or cell starts in its "priv" buffer (copies of `width`
    values per slot: 2 for compensated pairs), Layout.stride apart."""
    return cx.e.mul_i(cx.copy, cx.e.c(width * cx.lay.stride(name)))
