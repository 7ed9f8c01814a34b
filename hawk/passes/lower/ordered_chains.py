"""The host's shortcut for ordered sums over every lane: blocks of ORDERED_BLOCK lanes add their terms, a
group of ORDERED_CHAINS lanes at a time (cx.block_groups groups: fewer in a block cut short by the chunk's end),
into two-float chains (side by side in one vector) whose every step is checked to be exact, so a block hands the
chunk a few floats instead of a deposit per term (docs/ordered.md).

- float64, biased chains: a chain's pair starts at (M, M * 2**-44) with M = 1.5 * 2**p, p predicted from the
  largest term of an earlier block. While every high stays in M's binade, each step is two Fast2Sums (the
  Sterbenz lemma makes them exact), and the low's own error is checked to be zero: six flops a group plus two
  bitwise ORs of flags. A block that breaks either condition runs again over its term buffer through the
  float32 form below, which also finds the block's largest term and so the next blocks' p.
- float32 (and the float64 retry): Knuth TwoSum chains from (0, 0), the second TwoSum's error checked zero.
- The group's terms come from copies of the body side by side (packed into one vector), or, when the body
  writes or reads neighbours, from the term buffer that a plain loop of the body filled first (chunk_loops.py):
  the SLP vectorizer leaves such copies scalar, the loop vectorizer does not.
- A block whose chains lost a bit deposits its terms one by one (from the term buffer, or by rerunning a body
  that writes nothing: `redo_block`).
- Every exact block's pairs go into the chunk's own (high, low) vector pairs by more checked TwoSums
  (`merge_pairs`); those are deposited once, at the chunk's end.
Each route adds exactly the block's terms to the chunk's accumulators, so the speed depends on the data and
the result never does.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf, vector

from hawk.abi.layout import ORDERED_BLOCK, ORDERED_CHAINS
from hawk.ir.build import create
from hawk.passes import exact_emit
from hawk.passes.lower.context import Lowering, clone_body, rewrite_ops

_UNE = 13  # arith.cmpf "une": unordered or not equal
B = ORDERED_BLOCK
LOW_SHIFT = 44  # the low's bias is M * 2**-LOW_SHIFT: a chain's 128 errors (each <= 2**(p-53)) stay in its binade
HEADROOM = 9  # p = (exponent of the largest term) + HEADROOM: 128 terms' partial sums stay within M +- 2**(p-1)
P_RANGE = (-1022 + LOW_SHIFT, 1022)  # p keeps M and the low's bias normal (and the low's ulp >= 2**-1074)
P_START = 16  # a chunk's first guess


def biased(cx: Lowering) -> bool:
    """Whether the chains are biased (float64)."""
    return isinstance(cx.e.f, ir.F64Type)


def pair_width(cx: Lowering) -> int:
    """Chains per block (cx.pair_w): ORDERED_CHAINS, or twice as many float32 ones (a full 512-bit vector of
    TwoSum chains; the body then runs in groups of that many copies) when no compensated or wide sum shares
    the blocks (their chains' grouping is fixed)."""
    if biased(cx) or any(a.policy == "compensated" or a.wide for a in cx.full):
        return ORDERED_CHAINS
    return 2 * ORDERED_CHAINS


def widen_chain0(cx: Lowering, chain0: list[ir.Value]) -> list[ir.Value]:
    """The chain state's first values with cx.pair_w lanes for the pairs and the flags (plan_state makes them
    ORDERED_CHAINS wide)."""
    if not cx.n_terms or cx.pair_w == ORDERED_CHAINS:
        return chain0
    out = list(chain0)
    zero = cx.e.splat(0.0, _lanes(cx))
    for acc in cx.full:
        for k in range(acc.chain, acc.chain + 2 * acc.n) if acc.pairs else ():
            out[k] = zero
    out[cx.exact_flag] = _bits(cx, zero)
    return out


def nchunk_red_total(cx: Lowering) -> int:
    """Chain state follows the whole chunk state (reductions, sorted runs, flags, scans) in the iter_args."""
    return cx.nchunk_red + sum(r.width for r in cx.runs) + cx.n_flags + cx.n_scans


def _lanes(cx: Lowering) -> ir.Type:
    return ir.VectorType.get([cx.pair_w], cx.e.f)


def _bits_t(cx: Lowering) -> ir.Type:
    return ir.VectorType.get([cx.pair_w], ir.IntegerType.get_signless(cx.e.f.width))


def _bits(cx: Lowering, v: ir.Value) -> ir.Value:
    return cx.e.op("arith.bitcast", v, t=_bits_t(cx))


def any_of(cx: Lowering, flags: ir.Value) -> ir.Value:
    """Whether any entry of a vector of i1 is set."""
    kind = {"kind": ir.Attribute.parse("#vector.kind<or>")}
    return create("vector.reduction", [flags], [cx.e.i1], kind).result


def nonzero(cx: Lowering, flags: ir.Value) -> ir.Value:
    """Per lane, whether ORed bits (of errors, of exponent differences) show a loss: read as a float, the OR is
    zero (or -0.0: sign bits only) when nothing was lost, non-zero or NaN otherwise."""
    e = cx.e
    return e.cmpf(_UNE, e.op("arith.bitcast", flags, t=_lanes(cx)), e.splat(0.0, _lanes(cx)))


def term_buffer(cx: Lowering) -> ir.Value:
    """The current block's terms of the ordered sums kept in pairs (component-major, ORDERED_BLOCK each)."""
    return cx.temp(cx.n_terms * B, cx.e.f, tag="terms")


def chunk_pairs(cx: Lowering) -> ir.Value:
    """Per component of an ordered sum kept in pairs (`acc.term_at + c`): the chunk's (high, low) vectors
    (2 * cx.pair_w words), then (float64) its bias M splat over cx.pair_w words."""
    return cx.temp(cx.n_terms * 3 * cx.pair_w, cx.e.f, tag="chunk pairs")


def _components(cx: Lowering):
    for acc in cx.full:
        for c in range(acc.n) if acc.pairs else ():
            yield acc, c, 3 * cx.pair_w * (acc.term_at + c)


def _acc_base(cx: Lowering, acc, c: int) -> ir.Value:
    e = cx.e
    chunk_base = e.mul_i(cx.chunk, e.c(cx.lay.exact_width(exact_emit.fmt(e.f))))
    return e.add_i(chunk_base, e.c(acc.exact_at + c * exact_emit.words_of(e.f)))


def start_chunk_pairs(cx: Lowering) -> None:
    """Zero the chunk's pairs and set its first guess of M (before its first block)."""
    e = cx.e
    zero = e.splat(0.0, _lanes(cx))
    for _, _, at in _components(cx):
        e.vstore(zero, chunk_pairs(cx), e.c(at))
        e.vstore(zero, chunk_pairs(cx), e.c(at + cx.pair_w))
        e.vstore(e.splat(1.5 * 2.0 ** P_START, _lanes(cx)), chunk_pairs(cx), e.c(at + 2 * cx.pair_w))


def deposit_chunk_pairs(cx: Lowering) -> None:
    """Deposit the chunk's pairs into its exact accumulators (after its last block)."""
    e = cx.e
    exact = cx.bufs[("#exact", "exact")]
    for acc, c, at in _components(cx):
        base = _acc_base(cx, acc, c)
        for j in range(2 * cx.pair_w):
            exact_emit.deposit(e, exact, base, e.load(chunk_pairs(cx), e.c(at + j)))


def chain_inits(cx: Lowering, inits: list[ir.Value], nchunk: int) -> list[ir.Value]:
    """A full block's first chain state: biased chains start at (M, M * 2**-LOW_SHIFT)."""
    if not (cx.n_terms and biased(cx)):
        return inits
    e = cx.e
    out = list(inits)
    for acc, c, at in _components(cx):
        m = e.vload(chunk_pairs(cx), e.c(at + 2 * cx.pair_w), cx.pair_w, e.f)
        k = nchunk + acc.chain + 2 * c
        out[k], out[k + 1] = m, e.op("arith.mulf", m, e.splat(2.0 ** -LOW_SHIFT, _lanes(cx)))
    return out


# ---- the chains ------------------------------------------------------------------------------------------

def ordered_chain_step(cx: Lowering, acc, v: ir.Value, mask: ir.Value | None) -> None:
    """Copy j of a group in a full block: the lane's terms kept for ordered_chains_step, which adds the
    group's terms to the chains once every copy has run (one vector per component, its lanes side by side)."""
    e = cx.e
    for c, x in enumerate(e.elems(v, acc.r.payload)):
        if mask is not None:
            x = e.select(mask, x, e.cf(0.0))
        cx.pending.setdefault((acc.chain, c), [None] * cx.pair_w)[cx.j] = x


def ordered_chains_step(cx: Lowering) -> None:
    """A group's terms (one per chain) into the chains' (high, low) pairs, and into the block's term buffer
    (one vector store at cx.group_at, the group's first lane in the block) unless a lost-bit block reruns the
    body (cx.recompute). The bits that show a loss are ORed into the block's flags: the low's error (both
    forms), and (biased) the sign and exponent bits in which a new high differs from the one before (a high
    leaving M's binade: a Fast2Sum may have erred); a sum that overflows stays inf or NaN, which the flags
    (biased) or flush_pairs (TwoSum) see."""
    e = cx.e
    s = cx.accs
    bad = None
    for acc in cx.full:
        for c in range(acc.n) if acc.pairs else ():
            xv = cx.pending[(acc.chain, c)]
            if isinstance(xv, list):  # (else a vector loaded from the term buffer: buffered_chains_step)
                xv = create("vector.from_elements", xv, [_lanes(cx)]).result
                if not cx.recompute:
                    e.vstore(xv, term_buffer(cx), e.add_i(cx.group_at, e.c((acc.term_at + c) * B)))
            k = nchunk_red_total(cx) + acc.chain + 2 * c
            if biased(cx):
                s[k], s[k + 1], lost = _biased_step(cx, s[k], s[k + 1], xv)
            else:
                s1, e1 = e.two_sum(s[k], xv)
                s2, e2 = e.two_sum(s[k + 1], e1)
                s[k], s[k + 1], lost = s1, s2, _bits(cx, e2)
            bad = lost if bad is None else e.op("arith.ori", bad, lost)
    if bad is None:
        return
    k = nchunk_red_total(cx) + cx.exact_flag  # ORed per chain, looked at once at the block's end
    s[k] = e.op("arith.ori", s[k], bad)


def store_lane_terms(cx: Lowering, at: ir.Value) -> None:
    """The term loop of a full block (chunk_loops.terms_first): the lane's terms, kept by ordered_chain_step as
    copy 0 of cx.pending, into the block's term buffer at `at` (the lane's index in the block)."""
    e = cx.e
    for acc in cx.full:
        for c in range(acc.n) if acc.pairs else ():
            e.store(cx.pending[(acc.chain, c)][0], term_buffer(cx), e.add_i(at, e.c((acc.term_at + c) * B)))
    cx.pending = {}


def buffered_chains_step(cx: Lowering) -> None:
    """Like ordered_chains_step, for a group whose terms the term loop already wrote: one vector load per
    component from the term buffer at cx.group_at, into the chains."""
    e = cx.e
    for acc in cx.full:
        for c in range(acc.n) if acc.pairs else ():
            at = e.add_i(cx.group_at, e.c((acc.term_at + c) * B))
            cx.pending[(acc.chain, c)] = e.vload(term_buffer(cx), at, cx.pair_w, e.f)
    ordered_chains_step(cx)


def _biased_step(cx: Lowering, hi: ir.Value, lo: ir.Value, x: ir.Value):
    """(high, low) += x by two Fast2Sums: exact while the highs stay in one binade (then s - hi is exact by
    Sterbenz and x - (s - hi) is the add's rounding error, a float) and the low's error is zero (the low stays in
    its own binade, above every error it takes). Returns the new pair and the bits that show a loss."""
    e = cx.e
    s = e.add(hi, x)
    e1 = e.op("arith.subf", x, e.op("arith.subf", s, hi))
    s2 = e.add(lo, e1)
    e2 = e.op("arith.subf", e1, e.op("arith.subf", s2, lo))
    top = create("arith.constant", [], [_bits_t(cx)], {"value": ir.DenseElementsAttr.get_splat(
        _bits_t(cx), ir.IntegerAttr.get(ir.IntegerType.get_signless(64), -(1 << 52)))}).result  # sign, exponent
    moved = e.op("arith.andi", e.op("arith.xori", _bits(cx, s), _bits(cx, hi)), top)
    return s, s2, e.op("arith.ori", moved, _bits(cx, e2))


# ---- a block's end -----------------------------------------------------------------------------------------

def flush_pairs(cx: Lowering, res: list[ir.Value], nchunk: int, body: ir.Block) -> None:
    """The end of a full block: add its chains' pairs into the chunk's pairs (biased: less the biases, which is
    exact in the binade), or when the chains lost a bit, retry (biased) or deposit the block's terms one by one
    (from the term buffer, or recomputed by the body when cx.recompute). Either way the chunk gains exactly
    the block's terms."""
    if cx.exact_flag is None:
        return
    e = cx.e
    redo = nonzero(cx, res[nchunk + cx.exact_flag])
    for acc, c, _ in _components(cx) if not biased(cx) else ():
        for k in (nchunk + acc.chain + 2 * c, nchunk + acc.chain + 2 * c + 1):
            v = res[k]  # v - v is NaN where v is inf or NaN
            redo = e.op("arith.ori", redo, e.cmpf(_UNE, e.op("arith.subf", v, v), e.splat(0.0, _lanes(cx))))
    branch = scf.IfOp(any_of(cx, redo), [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        if biased(cx):
            retry_block(cx)
        elif cx.recompute:  # the block's lanes again, one by one, each term deposited (no term buffer)
            redo_block(cx, body, res)
        else:
            deposit_terms(cx)
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        pairs = []
        for acc, c, at in _components(cx):
            k = nchunk + acc.chain + 2 * c
            hi, lo = res[k], res[k + 1]
            if biased(cx):
                m = e.vload(chunk_pairs(cx), e.c(at + 2 * cx.pair_w), cx.pair_w, e.f)
                hi = e.op("arith.subf", hi, m)
                lo = e.op("arith.subf", lo, e.op("arith.mulf", m, e.splat(2.0 ** -LOW_SHIFT, _lanes(cx))))
            pairs.append((acc, c, at, hi, lo))
        merge_pairs(cx, pairs)
        scf.YieldOp([])


def deposit_terms(cx: Lowering) -> None:
    """Every term of the block's groups (cx.block_groups of them), from the term buffer, into the chunk's exact
    accumulators."""
    e = cx.e
    exact = cx.bufs[("#exact", "exact")]
    for acc, c, _ in _components(cx):
        base = _acc_base(cx, acc, c)
        each = scf.ForOp(e.c(0), e.mul_i(cx.block_groups, e.c(cx.pair_w)), e.c(1), [])
        with ir.InsertionPoint(each.body):
            at = e.add_i(each.induction_variable, e.c((acc.term_at + c) * B))
            exact_emit.deposit(e, exact, base, e.load(term_buffer(cx), at))
            scf.YieldOp([])


def retry_block(cx: Lowering) -> None:
    """A biased block that lost a bit, again from its term buffer through TwoSum chains from (0, 0), which also
    find each component's largest term: M for the next blocks. If those lose a bit too, every term is
    deposited."""
    e = cx.e
    comps = list(_components(cx))
    zero = e.splat(0.0, _lanes(cx))
    init = [zero] * (3 * len(comps)) + [_bits(cx, zero)]
    loop = scf.ForOp(e.c(0), cx.block_groups, e.c(1), init)
    with ir.InsertionPoint(loop.body):
        st = list(loop.inner_iter_args)
        g = e.mul_i(loop.induction_variable, e.c(cx.pair_w))
        for n, (acc, c, _) in enumerate(comps):
            xv = e.vload(term_buffer(cx), e.add_i(g, e.c((acc.term_at + c) * B)), cx.pair_w, e.f)
            s1, e1 = e.two_sum(st[3 * n], xv)
            s2, e2 = e.two_sum(st[3 * n + 1], e1)
            st[3 * n], st[3 * n + 1] = s1, s2
            st[3 * n + 2] = e.op("arith.maximumf", st[3 * n + 2], e.abs(xv))
            st[-1] = e.op("arith.ori", st[-1], _bits(cx, e2))
        scf.YieldOp(st)
    res = list(loop.results)
    redo = nonzero(cx, res[-1])
    for n, (_, _, at) in enumerate(comps):
        for v in res[3 * n:3 * n + 2]:
            redo = e.op("arith.ori", redo, e.cmpf(_UNE, e.op("arith.subf", v, v), zero))
        top = create("vector.reduction", [res[3 * n + 2]], [e.f],
                     {"kind": ir.Attribute.parse("#vector.kind<maximumf>")}).result
        e.vstore(e.bcast(next_bias(cx, top), _lanes(cx)), chunk_pairs(cx), e.c(at + 2 * cx.pair_w))
    branch = scf.IfOp(any_of(cx, redo), [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        deposit_terms(cx)
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        merge_pairs(cx, [(acc, c, at, res[3 * n], res[3 * n + 1]) for n, (acc, c, at) in enumerate(comps)])
        scf.YieldOp([])


def next_bias(cx: Lowering, top: ir.Value) -> ir.Value:
    """M = 1.5 * 2**p for a block whose largest term is `top` (float64): p = its exponent + HEADROOM, within
    P_RANGE (a NaN or inf top gives the highest p: such a block retries anyway)."""
    e = cx.e
    i64 = e.i64
    ex = e.op("arith.andi", e.op("arith.shrui", e.op("arith.bitcast", top, t=i64), e.c(52, i64)), e.c(0x7FF, i64))
    p = e.op("arith.addi", ex, e.c(HEADROOM - 1023, i64))
    p = e.op("arith.minsi", e.op("arith.maxsi", p, e.c(P_RANGE[0], i64)), e.c(P_RANGE[1], i64))
    bits = e.op("arith.ori", e.op("arith.shli", e.op("arith.addi", p, e.c(1023, i64)), e.c(52, i64)),
                e.c(1 << 51, i64))
    return e.op("arith.bitcast", bits, t=e.f64)


def merge_pairs(cx: Lowering, pairs: list) -> None:
    """A block's exact pairs (h, l) per component into the chunk's pairs (H, L): (H, a) = TwoSum(H, h), then a
    and l into L by two TwoSums. When those two errors are zero (their bits ORed; an overflow makes them NaN),
    H + L gained exactly h + l and the new pairs are kept; otherwise the chunk's pairs stay as they were and
    the block's pairs are deposited instead."""
    e = cx.e
    buf = chunk_pairs(cx)
    new, bad = [], None
    for _, _, at, h, lo in pairs:
        h1, a = e.two_sum(e.vload(buf, e.c(at), cx.pair_w, e.f), h)
        l1, b = e.two_sum(e.vload(buf, e.c(at + cx.pair_w), cx.pair_w, e.f), a)
        l2, d = e.two_sum(l1, lo)
        for err in (b, d):
            bad = _bits(cx, err) if bad is None else e.op("arith.ori", bad, _bits(cx, err))
        new.append((at, h1, l2))
    branch = scf.IfOp(any_of(cx, nonzero(cx, bad)), [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        exact = cx.bufs[("#exact", "exact")]
        for acc, c, _, h, lo in pairs:
            base = _acc_base(cx, acc, c)
            for v in (h, lo):
                for j in range(cx.pair_w):
                    exact_emit.deposit(e, exact, base, vector.extract(v, [], [j]))
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        for at, h1, l2 in new:
            e.vstore(h1, buf, e.c(at))
            e.vstore(l2, buf, e.c(at + cx.pair_w))
        scf.YieldOp([])


# ---- rerunning a block -------------------------------------------------------------------------------------

def can_recompute(cx: Lowering, body: ir.Block) -> bool:
    """Whether a full block's terms may be recomputed by running the body again rather than kept in a term
    buffer: the body writes nothing (no store, no scatter) and every other reduction keeps its state in the
    loop's values (which a rerun discards), none in memory (kept totals, folds, wide states, deposits)."""
    if biased(cx) or any(r.kept or r.kind == "fold" for r in cx.lay.reductions) or cx.runs:
        return False  # (biased chains retry a block from its term buffer)
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
    """A block's lanes in groups one by one, each lane's ordered terms deposited into the chunk's accumulators
    (reduce_full with no chain); what the rerun does to the loop state is dropped, so other reductions count
    each lane once."""
    e = cx.e
    each = scf.ForOp(e.c(0), e.mul_i(cx.block_groups, e.c(cx.pair_w)), e.c(1), [])
    with ir.InsertionPoint(each.body):
        anchor = scf.YieldOp([])
    with ir.InsertionPoint(anchor), body.owner.location:
        cx.lane = e.add_i(cx.block_start, each.induction_variable)
    cx.accs, cx.j = list(state), each.induction_variable
    rewrite_ops(cx, clone_body(cx, body, anchor))


