"""Plain and compensated scatter-adds keyed by a Sorted[Index] plane, on the host: whole groups of a run's lanes
add side by side.

sorted_runs sums each run of equal keys in registers lane by lane: one add (plain) or one Neumaier step
(compensated) after another, each waiting on the last, so a long run took the add's latency a lane (1e7 lanes into
1024 slots on two threads: plain 6.7-8.5 ms, compensated 12 ms, where the ordered form's vector registers took 7;
here 4.1-4.6 ms both; docs/ordered.md has more sizes).
Here the chunk's lanes run in groups of GROUP lanes, the body once per lane (its scatter left unlowered, as the
ordered form's sorted_pairs does):

    for group:
        every key the run's:  terms side by side into GROUP partial sums (plain: one vector add;
                              compensated: GROUP chains, Knuth's TwoSum with the errors added plainly)
        the run's and one other key (the group's last):
                              the run's lanes into the partial sums, those into the run's registers, the run
                              flushed; the other lanes start the partial sums of the other key's run
        else:                 the partial sums into the run's registers (once, when some group filled them),
                              then the lanes one by one (sorted_runs.sorted_step: a new key flushes the run)
    the partial sums into the run's registers; the chunk's last lanes one by one (chunk_loops.flat_driver)

A chunk whose runs are too short for groups (_long_runs) runs its lanes in sorted_streams' four streams instead.

Every key of a group is compared (not only its first and last): a bound launch reads its keys again at every
launch, so they may no longer be sorted, and the lane-by-lane steps are right for any order. The order of the adds
changes, which neither policy fixes: plain sums keep the bound of a sum of their terms, compensated ones the
chains' (reduce_full.carried_chains: Sum2 per chain, the chains folded by TwoSums). The partial sums start at
-0.0, which adds nothing, even to a -0.0 sum; an inf or NaN term leaves the run's correction as it was, as the
Neumaier step does.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf, vector

from hawk.ir.access import scatter_keys, sink_name, stored_value
from hawk.ir.build import create
from hawk.ir.dialect import is_hawk
from hawk.passes.analysis import key_source, payload_of
from hawk.passes.host_emit import _EQ
from hawk.passes.lower import planes, reduce_full, sorted_runs, sorted_streams, split_scatters
from hawk.passes.lower.context import Lowering, lower_copy
from hawk.passes.speculate import NO_SPECULATE

GROUP = 32  # lanes of a group: four 512-bit vectors of float64 partial sums, enough to hide the add's latency
LONG_RUN = 32  # the chunk's lanes per key (its keys' spread) from which it runs in groups (_long_runs)
MAX_PARTS = 6  # vectors of partial sums at most (a payload's components; compensated ones twice): 24 of AVX-512's
# 32 registers in float64
_OLT, _SGE, _UGE = 4, 5, 9  # arith.cmpf "olt"; arith.cmpi "sge", "uge"


def wanted(cx: Lowering, body: ir.Block):
    """The body's one scatter when this form applies (else None): the host, one lane axis, no reduction, scan or
    fold, and the body's only effect one plain or compensated += keyed by a Sorted[Index] plane (a sorted run:
    sorted_runs.is_sorted_scatter; a scalar, or a payload whose partial sums are at most MAX_PARTS vectors) into a
    sink no lane stores into."""
    if cx.target != "host" or len(cx.runs) != 1 or cx.lay.reductions or len(cx.axes) != 1 or cx.n_scans:
        return None
    run = cx.runs[0]
    if run.wide or run.regs > MAX_PARTS or run.policy not in ("plain", "compensated"):
        return None
    found = split_scatters.scatter_body(body)
    if found is None or len(found) != 1 or any(is_hawk(op, "cell") for op in body.operations):
        return None
    (op,) = found
    return op if "hawk.run" in op.attributes and sink_name(op) not in cx.lay.stored else None


def first(cx: Lowering, body: ir.Block, chunk0: list[ir.Value]) -> tuple[ir.Value, list[ir.Value]] | None:
    """(the first lane after the chunk's whole groups, the chunk state there, the run's partial sums folded in)
    when this form applies, else None."""
    op = wanted(cx, body)
    if op is None:
        return None
    e = cx.e
    run = cx.runs[0]
    comp = run.policy == "compensated"
    vec = ir.VectorType.get([GROUP], e.f64 if comp else e.f)
    n = len(chunk0)
    parts0 = [e.splat(-0.0, vec)] * run.k + ([e.splat(0.0, vec)] * run.k if comp else [])  # (sums, corrections)
    span = e.op("arith.subi", cx.hi, cx.lo)
    long = _long_runs(cx, key_source(scatter_keys(op)[0]), span)
    stop = e.select(long, e.add_i(
        cx.lo, e.op("arith.subi", span, e.op("arith.remui", span, e.c(GROUP)))), cx.lo)
    loop = scf.ForOp(cx.lo, stop, e.c(GROUP), [*chunk0, *parts0, e.c(0, e.i1)])
    with ir.InsertionPoint(loop.body):
        anchor = scf.YieldOp(list(loop.inner_iter_args))
    with ir.InsertionPoint(anchor), body.owner.location:  # (the group's input lines, planes.AHEAD lanes on)
        planes.prefetch_ahead(cx, body, loop.induction_variable, GROUP, raw=True)
    scatters = []
    for j in range(GROUP):
        with ir.InsertionPoint(anchor), body.owner.location:
            lane = e.add_i(loop.induction_variable, e.c(j)) if j else loop.induction_variable
        scatters += split_scatters.lane_scatters(cx, body, anchor, lane)
    with ir.InsertionPoint(anchor), body.owner.location:
        state = list(loop.inner_iter_args)
        chunk, parts, used = state[:n], state[n:-1], state[-1]
        keys = [scatter_keys(s)[0] for s in scatters]
        mine = e.pack([e.cmpi(_EQ, k, chunk[run.slot]) for k in keys], (GROUP,))  # (the run's lanes)
        same = e.all_of(mine)
        lanes = [e.elems(stored_value(s), payload_of(stored_value(s).type)) for s in scatters]
        terms = [e.widen(e.pack([x[c] for x in lanes], (GROUP,)), vec.element_type) for c in range(run.k)]
        branch = scf.IfOp(same, [v.type for v in state], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            added = _added(cx, parts, terms)
            last = run.slot + run.width - 1  # (the run's lane count)
            counted = chunk[:last] + [e.op("arith.addi", chunk[last], e.c(GROUP, e.i64))] + chunk[last + 1:]
            scf.YieldOp(counted + added + [e.c(1, e.i1)])
        with ir.InsertionPoint(branch.else_block):  # (the run's lanes and one other key's, else lane by lane)
            theirs = e.pack([e.cmpi(_EQ, k, keys[-1]) for k in keys], (GROUP,))
            two = scf.IfOp(e.all_of(e.op("arith.ori", mine, theirs)), [v.type for v in state], has_else=True)
            with ir.InsertionPoint(two.then_block):
                scf.YieldOp(_two_keys(cx, chunk, parts, mine, terms, keys[-1]))
            with ir.InsertionPoint(two.else_block):
                each = scf.ForOp(loop.induction_variable, e.add_i(loop.induction_variable, e.c(GROUP)), e.c(1),
                                 _folded(cx, chunk, parts, used))
                with ir.InsertionPoint(each.body):
                    inner = scf.YieldOp(list(each.inner_iter_args))
                scf.YieldOp(list(each.results) + parts0 + [e.c(0, e.i1)])
            scf.YieldOp(list(two.results))
        scf.YieldOp(list(branch.results))
    anchor.operation.erase()
    for s in scatters:
        s.operation.erase()
    # (the lanes one by one: sorted_runs.sorted_step, a new key flushing the run)
    lower_copy(cx, body, inner, each.induction_variable, each.inner_iter_args)
    res = list(loop.results)
    with body.owner.location:
        state = _folded(cx, res[:n], res[n:-1], res[-1])
    return sorted_streams.streams(cx, body, stop, state, long)  # (short runs: sorted_streams.py)


def _added(cx: Lowering, parts: list[ir.Value], terms: list[ir.Value]) -> list[ir.Value]:
    """The partial sums (sums, then a compensated run's corrections) with each component's terms added: plain by
    a vector add, compensated by TwoSum chains whose errors go into the corrections."""
    e = cx.e
    k = len(terms)
    if len(parts) == k:
        return [e.add(p, t) for p, t in zip(parts, terms, strict=True)]
    pairs = [e.two_sum(p, t) for p, t in zip(parts[:k], terms, strict=True)]
    return [s for s, _ in pairs] + [e.add(c, err) for c, (_, err) in zip(parts[k:], pairs, strict=True)]


def _two_keys(cx: Lowering, chunk: list[ir.Value], parts: list[ir.Value], mine: ir.Value, terms: list[ir.Value],
              other: ir.Value) -> list[ir.Value]:
    """A group whose lanes hold the run's key (`mine`, a vector of i1) or one other key (`other`, the group's
    last): the run's lanes go into the partial sums, which go into the run's registers, and the run is flushed;
    the other lanes start the partial sums of a run of `other` (registers empty). Any order of the two keys'
    lanes is right: each lane's term reaches its own key's slot. The loop state after the group."""
    e = cx.e
    run = cx.runs[0]
    neg0 = e.splat(-0.0, terms[0].type)
    filled = _added(cx, parts, [e.select(mine, t, neg0) for t in terms])
    at, last = run.slot + 1, run.slot + run.width - 1
    count = create("vector.reduction", [e.op("arith.extui", mine, t=ir.VectorType.get([GROUP], e.i64))], [e.i64],
                   {"kind": ir.Attribute.parse("#vector.kind<add>")}).result
    regs = _fold(cx, chunk[at:at + run.regs], filled)
    sorted_runs.flush_run(cx, run, [chunk[run.slot], *regs, e.op("arith.addi", chunk[last], count)])
    fresh = [e.cf(-0.0, r.type) if c < run.k else e.cf(0.0, r.type) for c, r in enumerate(regs)]
    started = [other, *fresh, e.op("arith.subi", e.c(GROUP, e.i64), count)]
    rest = [e.select(mine, neg0, t) for t in terms] + [e.splat(0.0, terms[0].type)] * (len(parts) - len(terms))
    return chunk[:run.slot] + started + chunk[run.slot + run.width:] + rest + [e.c(1, e.i1)]


def _long_runs(cx: Lowering, plane: str, span: ir.Value) -> ir.Value:
    """Whether the chunk's runs are long enough for groups (an i1): it holds a group, and at least LONG_RUN lanes a
    key between its first lane's key and its last's, which bounds the runs' mean length from below when the keys
    are sorted (at about ten lanes a run nearly every group met another key, and the groups' checks and their
    lane loops' exits took 5-9% longer than lane by lane; at a hundred, groups were 1.3-1.6x faster; shorter runs
    take sorted_streams.py's streams)."""
    e = cx.e
    check = scf.IfOp(e.cmpi(_UGE, span, e.c(GROUP)), [e.i1], has_else=True)
    with ir.InsertionPoint(check.then_block):
        buf = cx.buf(plane)
        first_key, last_key = (e.load(buf, at) for at in (cx.lo, e.op("arith.subi", cx.hi, e.c(1))))
        if first_key.type != e.i64:  # (int32 keys)
            first_key, last_key = (e.op("arith.extsi", k, t=e.i64) for k in (first_key, last_key))
        keys = e.add_i(e.op("arith.subi", last_key, first_key), e.c(1, e.i64))
        lanes = e.op("arith.index_cast", span, t=e.i64)
        scf.YieldOp([e.cmpi(_SGE, lanes, e.op("arith.muli", keys, e.c(LONG_RUN, e.i64)))])
    with ir.InsertionPoint(check.else_block):
        scf.YieldOp([e.c(0, e.i1)])
    return check.results[0]


def _folded(cx: Lowering, chunk: list[ir.Value], parts: list[ir.Value], used: ir.Value) -> list[ir.Value]:
    """The chunk state with the run's partial sums `parts` added into its registers when `used` (an i1) says
    that some group filled them since they were last folded."""
    run = cx.runs[0]
    at = run.slot + 1
    regs = chunk[at:at + run.regs]
    branch = scf.IfOp(used, [v.type for v in regs], has_else=True)
    branch.operation.attributes[NO_SPECULATE] = ir.UnitAttr.get()  # (folded always, short runs took 14% longer)
    with ir.InsertionPoint(branch.then_block):
        scf.YieldOp(_fold(cx, regs, parts))
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp(regs)
    return chunk[:at] + list(branch.results) + chunk[at + len(regs):]


def _fold(cx: Lowering, regs: list[ir.Value], parts: list[ir.Value]) -> list[ir.Value]:
    """The run's registers (its sums; a compensated one's sums, then corrections) with the partial sums (laid out
    alike) added, component by component: plain ones by halves; compensated chains by halves through TwoSums
    (their errors into the corrections), then into the run's pair by a Neumaier step, the corrections after it
    unless the sum is no longer finite."""
    e = cx.e
    k = cx.runs[0].k
    out_sums, out_cors = [], []
    for c in range(k):
        sums, cors = reduce_full.halve_chains(e, parts[c], parts[k + c] if len(parts) > k else None, 1)
        total = vector.extract(sums, [], [0])
        if cors is None:
            out_sums.append(e.add(regs[c], total))
            continue
        s, cor = e.neumaier(regs[c], regs[k + c], total)
        finite = e.cmpf(_OLT, e.abs(s), e.cf(float("inf"), s.type))
        out_sums.append(s)
        out_cors.append(e.select(finite, e.add(cor, vector.extract(cors, [], [0])), cor))
    return out_sums + out_cors
