"""Rules for reductions over every lane (hawk.reduce without kept axes), per policy: "fast" sums and max/min in
the chunk state (max/min with NaN/zero flags on the host: host_emit.fast_extremum), "compensated" Neumaier
pairs per chain, "ordered" terms into exact accumulators (hawk/passes/exact_emit.py), on the host through
two-float chains over full blocks (`ordered_chain_step`, `flush_pairs`; a block whose chains lost a bit
deposits its terms again, from a term buffer or by rerunning a body that writes nothing: `redo_block`).
Wide payloads: wide.py. The hawk.reduce rule picks the reduction's form: a fold (folds.py), a kept-axis total
(reduce_kept.py) or this.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf, vector

from hawk.abi.layout import ORDERED_BLOCK, ORDERED_CHAINS
from hawk.ir.access import reduce_mask, reduce_value
from hawk.ir.build import create
from hawk.passes import exact_emit
from hawk.passes.lower import folds, planes, reduce_kept, wide
from hawk.passes.lower.context import Lowering, clone_body, rewrite_ops, rule
from hawk.passes.lower.state import Acc

_UNE = 13  # arith.cmpf "une": unordered or not equal
_UNO, _OEQ, _UEQ = 14, 1, 8  # arith.cmpf "uno" (either is NaN), "oeq", "ueq" (equal or either is NaN)


@rule("hawk.reduce")
def lower_reduce(cx: Lowering, op) -> None:
    """A reduction in the form planned for it: a fold, a kept-axis total (in registers under the nested driver,
    else into its cell), or a total over every lane into the chunk state."""
    r = next(cx.reductions)
    if r.kind == "fold":
        folds.reduce_fold(cx, op, r)
    elif r.kept and cx.nested is not None:
        reduce_kept.reduce_nested(cx, op, r)
    elif r.kept:
        reduce_kept.reduce_kept(cx, op, r)
    else:
        reduce_full(cx, op, next(cx.full_iter))


def extremum_step(cx: Lowering, acc: Acc, c: int, x: ir.Value, mask: ir.Value | None) -> None:
    """One lane into a max/min with flags: the packed max and the sum of NaNs and zeros (both masked)."""
    e, s = cx.e, cx.accs
    k, nk = acc.slot + c, acc.flags + c
    new = e.fast_extremum(acc.policy, s[k], x)
    s[k] = new if mask is None else e.select(mask, new, s[k])
    special = e.cmpf(_UEQ, x, e.cf(0.0))  # NaN, +0.0 or -0.0
    if mask is not None:
        special = e.op("arith.andi", special, mask)
    if acc.policy == "max":
        s[nk] = e.fast_add(s[nk], e.select(special, x, e.cf(-0.0)))
    else:  # (not an add of -x: LLVM may turn that into a subtraction, which keeps a NaN's sign)
        s[nk] = e.fast_sub(s[nk], e.select(special, x, e.cf(0.0)))


def finish_extrema(cx: Lowering, final: list[ir.Value]) -> None:
    """A chunk's max/min as arith.maximumf/minimumf would give it: a NaN met wins; a zero result is +0.0 for
    max when a +0.0 was met, else -0.0 (min: -0.0 when a -0.0 was met). Both come from the flag sum."""
    e = cx.e
    for acc in cx.full:
        for c in range(acc.n) if acc.flags >= 0 else ():
            m, flag = final[acc.slot + c], final[acc.flags + c]
            zero = flag if acc.policy == "max" else e.op("arith.negf", flag)
            m = e.select(e.cmpf(_OEQ, m, e.cf(0.0)), zero, m)
            final[acc.slot + c] = e.select(e.cmpf(_UNO, flag, flag), flag, m)


def reduce_full(cx: Lowering, op, acc: Acc) -> None:
    e = cx.e
    r, s = acc.r, cx.accs
    v = reduce_value(op)
    mask = reduce_mask(op)
    if acc.wide:
        wide.reduce_wide(cx, acc, v, mask)
        xs = []
    elif acc.policy != "ordered":
        xs = e.elems(v, r.payload)

    def keep(new, old):  # a masked lane adds nothing
        return new if mask is None else e.select(mask, new, old)

    if acc.policy == "ordered" and acc.pairs and isinstance(cx.j, int):  # a full block: chain j
        ordered_chain_step(cx, acc, v, mask)
    elif acc.policy == "ordered":  # each component into this chunk's exact accumulator for it
        exact = cx.bufs[("#exact", "exact")]
        w = exact_emit.words_of(e.f)
        base = e.add_i(e.mul_i(cx.chunk, e.c(cx.lay.exact_width(exact_emit.fmt(e.f)))), e.c(acc.exact_at))
        for c, x in planes.components(cx, v, r.payload):
            exact_emit.deposit(e, exact, e.add_i(base, e.mul_i(c, e.c(w))), x, mask)
    elif acc.policy == "compensated":
        for c, x in enumerate(xs):
            x = e.widen(x, e.f64)
            if isinstance(cx.j, int):  # a straight-line copy: its own chain
                ks = nchunk_red_total(cx) + acc.chain + cx.j * 2 * acc.n + c
                kc = ks + acc.n
            else:
                ks, kc = acc.slot + c, acc.slot + acc.n + c
            ns, nc = e.neumaier(s[ks], s[kc], x)
            s[ks] = keep(ns, s[ks])
            s[kc] = keep(nc, s[kc])
    else:
        for c, x in enumerate(xs):
            if acc.flags >= 0:  # in the kernel's type (plan_state)
                extremum_step(cx, acc, c, x, mask)
                continue
            x = e.widen(x, e.f64)
            if acc.policy == "fast":
                if mask is not None:
                    x = e.select(mask, x, e.cf(0.0, e.f64))
                s[acc.slot + c] = e.fast_add(s[acc.slot + c], x)
            else:
                s[acc.slot + c] = keep(e.extremum(acc.policy, s[acc.slot + c], x), s[acc.slot + c])
    if r.kind == "mean":
        k = acc.slot + (0 if acc.policy == "ordered" or acc.wide else
                        acc.n * (2 if acc.policy == "compensated" else 1))
        one = e.c(1, e.i64) if mask is None else e.op("arith.extui", mask, t=e.i64)
        s[k] = e.op("arith.addi", s[k], one)


def term_buffer(cx: Lowering) -> ir.Value:
    """The current block's terms of the ordered sums kept in pairs (component-major, ORDERED_BLOCK each)."""
    return cx.temp(cx.n_terms * ORDERED_BLOCK, cx.e.f, tag="terms")


def ordered_chain_step(cx: Lowering, acc: Acc, v: ir.Value, mask: ir.Value | None) -> None:
    """Copy j of a group in a full block: the lane's terms kept for ordered_chains_step, which adds the
    group's terms to the chains once every copy has run (one vector per component, its lanes loaded side by
    side), and stored in the block's term buffer unless a lost-bit block reruns the body (cx.recompute)."""
    e = cx.e
    at = None if cx.recompute else e.op("arith.subi", cx.lane, cx.block_start)
    for c, x in enumerate(e.elems(v, acc.r.payload)):
        if mask is not None:
            x = e.select(mask, x, e.cf(0.0))
        if at is not None:
            e.store(x, term_buffer(cx), e.add_i(at, e.c((acc.term_at + c) * ORDERED_BLOCK)))
        cx.pending.setdefault((acc.chain, c), [None] * ORDERED_CHAINS)[cx.j] = x


def ordered_chains_step(cx: Lowering) -> None:
    """A group's terms (one per chain) into the chains' (high, low) pairs: two error-free TwoSums on
    vectors of ORDERED_CHAINS lanes. When the second TwoSum's error is not zero a pair no longer holds its
    chain's exact sum: the block's flag is set and flush_pairs deposits the block's terms instead (as it does
    when a sum overflowed: once inf or NaN, a pair stays so to the block's end)."""
    e = cx.e
    s = cx.accs
    lanes = ir.VectorType.get([ORDERED_CHAINS], e.f)
    zero = e.splat(0.0, lanes)
    bad = None
    for acc in cx.full:
        if not acc.pairs:
            continue
        for c in range(acc.n):
            xv = create("vector.from_elements", cx.pending[(acc.chain, c)], [lanes]).result
            k = nchunk_red_total(cx) + acc.chain + 2 * c
            s1, e1 = e.two_sum(s[k], xv)
            s2, e2 = e.two_sum(s[k + 1], e1)
            s[k], s[k + 1] = s1, s2
            lost = e.cmpf(_UNE, e2, zero)  # (a sum that overflows stays inf or NaN: flush_pairs looks)
            bad = lost if bad is None else e.op("arith.ori", bad, lost)
    if bad is None:
        return
    k = nchunk_red_total(cx) + cx.exact_flag  # a flag per chain, reduced once at the block's end
    s[k] = e.op("arith.ori", s[k], bad)


def any_of(cx: Lowering, flags: ir.Value) -> ir.Value:
    """Whether any entry of a vector of i1 is set."""
    kind = {"kind": ir.Attribute.parse("#vector.kind<or>")}
    return create("vector.reduction", [flags], [cx.e.i1], kind).result


def flush_pairs(cx: Lowering, res: list[ir.Value], nchunk: int, body: ir.Block) -> None:
    """The end of a full block: deposit each chain's (high, low) pair into the chunk's exact accumulators,
    or, when a chain lost a bit, the block's terms one by one (from the term buffer, or recomputed by the
    body when cx.recompute). Either way the accumulators gain exactly the block's terms."""
    if cx.exact_flag is None:
        return
    e = cx.e
    exact = cx.bufs[("#exact", "exact")]
    w = exact_emit.words_of(e.f)
    chunk_base = e.mul_i(cx.chunk, e.c(cx.lay.exact_width(exact_emit.fmt(e.f))))
    redo = res[nchunk + cx.exact_flag]
    lanes = ir.VectorType.get([ORDERED_CHAINS], e.f)
    for acc in cx.full:
        for k in range(acc.chain, acc.chain + 2 * acc.n) if acc.pairs else ():
            v = res[nchunk + k]  # v - v is NaN where v is inf or NaN
            redo = e.op("arith.ori", redo, e.cmpf(_UNE, e.op("arith.subf", v, v), e.splat(0.0, lanes)))
    branch = scf.IfOp(any_of(cx, redo), [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        if cx.recompute:  # the block's lanes again, one by one, each term deposited (no term buffer)
            redo_block(cx, body, res)
        for acc in cx.full if not cx.recompute else ():
            if not acc.pairs:
                continue
            for c in range(acc.n):
                base = e.add_i(chunk_base, e.c(acc.exact_at + c * w))
                each = scf.ForOp(e.c(0), e.c(ORDERED_BLOCK), e.c(1), [])
                with ir.InsertionPoint(each.body):
                    at = e.add_i(each.induction_variable, e.c((acc.term_at + c) * ORDERED_BLOCK))
                    exact_emit.deposit(e, exact, base, e.load(term_buffer(cx), at))
                    scf.YieldOp([])
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        for acc in cx.full:
            if not acc.pairs:
                continue
            for c in range(acc.n):
                base = e.add_i(chunk_base, e.c(acc.exact_at + c * w))
                for k in (nchunk + acc.chain + 2 * c, nchunk + acc.chain + 2 * c + 1):
                    for j in range(ORDERED_CHAINS):
                        exact_emit.deposit(e, exact, base, vector.extract(res[k], [], [j]))
        scf.YieldOp([])


def can_recompute(cx: Lowering, body: ir.Block) -> bool:
    """Whether a full block's terms may be recomputed by running the body again rather than kept in a term
    buffer: the body writes nothing (no store, no scatter) and every other reduction keeps its state in the
    loop's values (which a rerun discards), none in memory (kept totals, folds, wide states, deposits)."""
    if any(r.kept or r.kind == "fold" for r in cx.lay.reductions) or cx.runs:
        return False
    if any(a.wide or (a.policy == "ordered" and not a.pairs) for a in cx.full):
        return False
    writes = []

    def visit(op):  # (a scan's running value is loop state a rerun would start from the block's end)
        if op.name in ("hawk.store", "hawk.scatter", "hawk.scan_totals", "hawk.scan_apply"):
            writes.append(op)
        return ir.WalkResult.ADVANCE

    for op in body.operations:
        op.operation.walk(visit)
    return not writes


def redo_block(cx: Lowering, body: ir.Block, state: list[ir.Value]) -> None:
    """A full block's lanes one by one, each lane's ordered terms deposited into the chunk's accumulators
    (reduce_full with no chain); what the rerun does to the loop state is dropped, so other reductions count
    each lane once."""
    e = cx.e
    each = scf.ForOp(e.c(0), e.c(ORDERED_BLOCK), e.c(1), [])
    with ir.InsertionPoint(each.body):
        anchor = scf.YieldOp([])
    with ir.InsertionPoint(anchor), body.owner.location:
        cx.lane = e.add_i(cx.block_start, each.induction_variable)
    cx.accs, cx.j = list(state), each.induction_variable
    rewrite_ops(cx, clone_body(cx, body, anchor))


def nchunk_red_total(cx: Lowering) -> int:
    """Chain state follows the whole chunk state (reductions, sorted runs, flags, scans) in the iter_args."""
    return cx.nchunk_red + sum(r.width for r in cx.runs) + cx.n_flags + cx.n_scans
