"""The host's shortcut for ordered sums over every lane: blocks of ORDERED_BLOCK lanes add their terms, a
group of ORDERED_CHAINS lanes at a time (cx.block_groups groups: fewer in a block cut short by the chunk's end),
into two-float chains (side by side in one vector) whose every step is checked to be exact, so a block hands the
chunk a few floats instead of a deposit per term (docs/ordered.md).

- float64, biased chains: a chain's pair starts at (M, 0) with M = 1.5 * 2**p, p predicted from the largest
  term of an earlier block (its exponent + BIAS_STEP). While every term's magnitude lies in
  [2**(p-LOW_RANGE), 2**(p-HEADROOM)] (or is zero), the high stays in M's binade, each step's Fast2Sum is exact
  (Sterbenz), and every error it hands the low is a multiple of 2**(p-99) below 2**(p-53), so the low's plain
  adds are exact too: four flops a group. Each group also widens the block's range of |term| bits (an integer
  max and min per component and chain), which the block's end holds against that range: a block with a term
  outside it retries (below).
- float32, windowed chains: each chain is one float64 sum, a plain add per term, exact while every term is zero
  or its exponent lies in a window of F32_WINDOW + 1 binades under 2**(E+1) (E predicted like p): such terms
  are multiples of 2**(E-45), and 128 of them stay below 2**53 times that.
- The retry (both types): the block's terms again (from its term buffer, or by rerunning its groups' copies
  when the body writes nothing) through Knuth TwoSum chains from (0, 0) in the kernel's type, the second
  TwoSum's error checked zero; it also finds the block's largest term, which sets the next blocks' p or E.
- The group's terms come from copies of the body side by side (packed into one vector), or, when the body
  writes or reads neighbours, from the term buffer that a plain loop of the body filled first (chunk_loops.py):
  the SLP vectorizer leaves such copies scalar, the loop vectorizer does not.
- A block whose retry lost a bit too deposits its terms one by one (from the term buffer, or by rerunning a
  body that writes nothing: rerun.py).
- On x86-64 with AVX-512F (cx.flagged), the CPU's inexact flag proves the steps exact instead of the range, the
  Fast2Sum's rounding add silent (flag_chains.py): FLAG_CHAINS chains, no range state, the block's sums folded
  into one vector before the flag is read (flush_pairs). On x86-64 with AVX and FMA but not AVX-512F the flag
  proves them too, float64 terms cut on the block's grid (a rounding that raises no flag, then plain adds:
  flag_chains.grid_step) instead of a Fast2Sum, and MXCSR is written back clear after each block's merge
  (flag_chains.restore).
- Every exact block's sums go into the chunk's own float64 (high, low) vector pairs by more checked TwoSums
  (`merge_pairs`); those are deposited once, at the chunk's end (float32: each value as three float32
  parts).
Each route adds exactly the block's terms to the chunk's accumulators, so the speed depends on the data and
the result never does.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.abi.layout import ORDERED_BLOCK, ORDERED_CHAINS
from hawk.ir.build import create
from hawk.passes import exact_emit, sae_emit
from hawk.passes.host_emit import like
from hawk.passes.lower import flag_chains, rerun
from hawk.passes.lower.context import Lowering

_UNE = 13  # arith.cmpf "une" (unordered or not equal)
_ULT, _UGT = 6, 8  # arith.cmpi unsigned "<", ">"
B = ORDERED_BLOCK
HEADROOM = 9  # terms up to 2**(p-HEADROOM): 128 of them keep a high within M +- 2**(p-2)
BIAS_STEP = HEADROOM + 1  # p = (exponent of a block's largest term) + BIAS_STEP: that term, below 2**(exponent + 1),
# is within the next blocks' ceiling 2**(p-HEADROOM) (with HEADROOM alone, a largest term above its binade's power
# of two, nearly every one, failed the ceiling it had set, and every block retried)
LOW_RANGE = 47  # terms from 2**(p-47): multiples of 2**(p-99), so 128 errors (each <= 2**(p-53)) add exactly in the low
P_RANGE = (-978, 1022)  # p keeps M and 2**(p-HEADROOM) normal
F32_WINDOW = 22  # float32 terms with exponents E-22 .. E: multiples of 2**(E-45), 128 of them below 2**(E+8)
F32_HEADROOM = 1  # E = (exponent of the largest term) + F32_HEADROOM
F32_START = 3  # a chunk's first guess of E (terms from about 2e-6 to 16 pass)
_MANT = (1 << 52) - 1
_SMALLEST_NORMAL = 1 << 52  # the bits of 2**-1022: the range's floor when 2**(p-LOW_RANGE) is below it
P_START = 16  # a chunk's first guess


def biased(cx: Lowering) -> bool:
    """Whether the chains are biased (float64)."""
    return isinstance(cx.e.f, ir.F64Type)


def pair_width(cx: Lowering) -> int:
    """Chains per block (cx.pair_w): with a compensated sum, its chain count (state.plan_state: cx.comp_chains);
    else ORDERED_CHAINS beside a wide sum (whose chains' grouping is fixed) or for float64, and twice as many
    float32 ones (a full 512-bit vector of chains; the body then runs in groups of that many copies); chains
    checked by the inexact flag take four vectors (flag_chains.FLAG_CHAINS)."""
    if cx.flagged:
        return flag_chains.chains(cx)
    if any(a.policy == "compensated" for a in cx.full):
        return cx.comp_chains
    if biased(cx) or any(a.wide for a in cx.full):
        return ORDERED_CHAINS
    return 2 * ORDERED_CHAINS


def widen_chain0(cx: Lowering, chain0: list[ir.Value]) -> list[ir.Value]:
    """The chain state's first values with cx.pair_w lanes for the pairs and the flags (plan_state makes them
    ORDERED_CHAINS wide, in the kernel's type); a float32 chain's first slot is its float64 sum (the second is
    unused)."""
    if not cx.n_terms or (biased(cx) and cx.pair_w == ORDERED_CHAINS):
        return chain0
    out = list(chain0)
    zero = cx.e.splat(0.0, _lanes(cx))
    for acc in cx.full:
        for c in range(acc.n) if acc.pairs else ():
            out[acc.chain + 2 * c] = zero if biased(cx) else cx.e.splat(0.0, _wide(cx))
            out[acc.chain + 2 * c + 1] = zero
    for t in range(cx.n_terms):
        top, bottom = RANGE_INIT
        out[cx.term_range + 2 * t] = _splat_bits(cx, top)
        out[cx.term_range + 2 * t + 1] = _splat_bits(cx, bottom)
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


def nonzero(cx: Lowering, flags: ir.Value) -> ir.Value:
    """Per lane, whether ORed bits (of errors, of exponent differences) show a loss: read as a float, the OR is
    zero (or -0.0: sign bits only) when nothing was lost, non-zero or NaN otherwise."""
    e = cx.e
    t = _wide(cx) if ir.VectorType(flags.type).element_type == e.i64 else _lanes(cx)
    return e.cmpf(_UNE, e.op("arith.bitcast", flags, t=t), e.splat(0.0, t))


def term_buffer(cx: Lowering) -> ir.Value:
    """The current block's terms of the ordered sums kept in pairs (component-major, ORDERED_BLOCK each)."""
    return cx.temp(cx.n_terms * B, cx.e.f, tag="terms")


def chunk_pairs(cx: Lowering) -> ir.Value:
    """Per component of an ordered sum kept in pairs (`acc.term_at + c`), all float64: the chunk's (high, low)
    vectors (2 * cx.pair_w words; float32 kernels too: a float32 block's chain sums have up to 53 bits), then the
    next blocks' bias M (float64) or window top 2**E (float32) splat over cx.pair_w words."""
    return cx.temp(cx.n_terms * 3 * cx.pair_w, cx.e.f64, tag="chunk pairs")


def _wide(cx: Lowering) -> ir.Type:
    """cx.pair_w float64 values: a chunk's pairs, a float32 block's chain sums."""
    return ir.VectorType.get([cx.pair_w], cx.e.f64)


def _guess(cx: Lowering, at: int) -> ir.Value:
    """The current M or 2**E of the component at `at` in chunk_pairs, in the kernel's type (exact)."""
    e = cx.e
    g = e.vload(chunk_pairs(cx), e.c(at + 2 * cx.pair_w), cx.pair_w, e.f64)
    return g if biased(cx) else e.op("arith.truncf", g, t=_lanes(cx))


def _components(cx: Lowering):
    for acc in cx.full:
        for c in range(acc.n) if acc.pairs else ():
            yield acc, c, 3 * cx.pair_w * (acc.term_at + c)


def exact_slot(cx: Lowering, acc, c: int | ir.Value) -> ir.Value:
    """Where this chunk's exact accumulator for component c of an ordered whole sum starts in #exact (the
    chunk's words, then the sum's accumulators from acc.exact_at, one per component: finish.finish_accs)."""
    e = cx.e
    w = exact_emit.words_of(e.f)
    base = e.add_i(e.mul_i(cx.chunk, e.c(cx.lay.exact_width(exact_emit.fmt(e.f)))), e.c(acc.exact_at))
    return e.add_i(base, e.c(c * w) if isinstance(c, int) else e.mul_i(c, e.c(w)))


def start_chunk_pairs(cx: Lowering) -> None:
    """Zero the chunk's pairs and set its first guess of M (before its first block)."""
    e = cx.e
    zero = e.splat(0.0, _wide(cx))
    for _, _, at in _components(cx):
        e.vstore(zero, chunk_pairs(cx), e.c(at))
        e.vstore(zero, chunk_pairs(cx), e.c(at + cx.pair_w))
        first = 1.5 * 2.0 ** P_START if biased(cx) else 2.0 ** F32_START
        e.vstore(e.splat(first, _wide(cx)), chunk_pairs(cx), e.c(at + 2 * cx.pair_w))


def deposit_chunk_pairs(cx: Lowering) -> None:
    """Deposit the chunk's pairs into its exact accumulators (after its last block): first added into one pair
    by checked TwoSums (Emit.merge_pairs), whose two values go in when it holds them exactly (float32: within
    f32_parts' range), else all 2 x cx.pair_w values (a deposit is some forty scalar steps: docs/ordered.md)."""
    e = cx.e
    exact = cx.bufs[("#exact", "exact")]
    for acc, c, at in _components(cx):
        base = exact_slot(cx, acc, c)
        vals = [e.vload(chunk_pairs(cx), e.c(at + k * cx.pair_w), cx.pair_w, e.f64) for k in (0, 1)]
        hi, lo, ok = e.merge_pairs(*vals)
        if not biased(cx):
            past = e.op("arith.ori", exact_emit.past_f32(e, hi), exact_emit.past_f32(e, lo))
            ok = e.op("arith.andi", ok, e.op("arith.xori", past, e.c(1, e.i1)))
        branch = scf.IfOp(ok, [], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            for v in (hi, lo):
                exact_emit.deposit_as(e, exact, base, v, e.f)
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            _deposit_wide(cx, exact, base, vals)
            scf.YieldOp([])


def _deposit_wide(cx: Lowering, exact: ir.Value, base: ir.Value, vals: list[ir.Value]) -> None:
    """Every entry of these float64 vectors into the accumulator at `base`: as it is (float64), or as its three
    float32 parts (float32: sums of float32 terms within float32's range, so the parts are exact). Parked in a
    small buffer and deposited in a loop: one copy of the deposit's code per call (unrolled, the copies of every
    component, lane and call made a float32 vector sum's library take a minute to compile)."""
    e = cx.e
    w = ir.VectorType(vals[0].type).shape[0]
    n = len(vals) * w
    parked = cx.temp(n, e.f64, tag="chain-deposit")
    for i, v in enumerate(vals):
        e.vstore(v, parked, e.c(i * w))
    each = scf.ForOp(e.c(0), e.c(n), e.c(1), [])
    with ir.InsertionPoint(each.body):
        exact_emit.deposit_as(e, exact, base, e.load(parked, each.induction_variable), e.f)
        scf.YieldOp([])


def chain_inits(cx: Lowering, inits: list[ir.Value], nchunk: int) -> list[ir.Value]:
    """A full block's first chain state: biased chains start at (M, 0); chains on a grid (flag_chains.grid_step)
    at (0, 0), with the block's grid set from M (cx.grids)."""
    if not (cx.n_terms and biased(cx)):
        return inits
    e = cx.e
    out = list(inits)
    for acc, c, at in _components(cx):
        m = _guess(cx, at)
        if flag_chains.loud(cx):  # (on a grid: no bias)
            cx.grids[(acc.chain, c)] = flag_chains.grid(cx, m)
            m = e.splat(0.0, _lanes(cx))
        k = nchunk + acc.chain + 2 * c
        out[k], out[k + 1] = m, e.splat(0.0, _lanes(cx))
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
    body (cx.recompute). Each component's terms also widen its block's range (range_step), which flush_pairs
    holds against the range that makes every step exact."""
    e = cx.e
    s = cx.accs
    for acc in cx.full:
        for c in range(acc.n) if acc.pairs else ():
            xv = cx.pending[(acc.chain, c)]
            if isinstance(xv, list):  # (else a vector loaded from the term buffer: buffered_chains_step)
                xv = create("vector.from_elements", xv, [_lanes(cx)]).result
                if not cx.recompute:
                    e.vstore(xv, term_buffer(cx), e.add_i(cx.group_at, e.c((acc.term_at + c) * B)))
            k = nchunk_red_total(cx) + acc.chain + 2 * c
            if biased(cx):
                if flag_chains.loud(cx):
                    s[k], s[k + 1] = flag_chains.grid_step(cx, s[k], s[k + 1], xv, *cx.grids[(acc.chain, c)])
                else:
                    s[k], s[k + 1] = _biased_step(cx, s[k], s[k + 1], xv)
            else:
                s[k] = _windowed_step(cx, s[k], xv)
            r = nchunk_red_total(cx) + cx.term_range + 2 * (acc.term_at + c)
            if not cx.flagged:
                s[r], s[r + 1] = range_step(cx, s[r], s[r + 1], xv)


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
    """(high, low) += x by one Fast2Sum and a plain add into the low, exact while x is zero or its magnitude
    lies in [2**(p-LOW_RANGE), 2**(p-HEADROOM)] for M = 1.5 * 2**p (which flush_pairs checks): then the high
    stays in M's binade (s - hi is exact by Sterbenz, x - (s - hi) is the add's rounding error), and each error
    is a multiple of 2**(p-99) of magnitude <= 2**(p-53), so a chain's 128 of them keep the low's partial sums
    exact multiples of 2**(p-99) below 2**(p-46)."""
    e = cx.e
    s = sae_emit.add(e, hi, x) if cx.flagged else e.add(hi, x)  # (flagged: rounds without raising the flag)
    return s, e.add(lo, e.op("arith.subf", x, e.op("arith.subf", s, hi)))


def _windowed_step(cx: Lowering, total: ir.Value, x: ir.Value) -> ir.Value:
    """A float32 group's terms into its chains' float64 sums by one plain add, exact while each term is zero or
    has an exponent from E - F32_WINDOW to E (2**E the window's top; floored at the smallest normal; flush_pairs
    checks it): then every term is a multiple of 2**(E-45) below 2**(E+1), so a chain's 128 partial sums are
    multiples of 2**(E-45) below 2**53 times that, all float64 values."""
    return cx.e.add(total, cx.e.op("arith.extf", x, t=_wide(cx)))


RANGE_INIT = (0, -1)  # a block's range before its first term (range_step), as integers: top 0, and bottom all
# ones (unsigned, the largest value range_step's bottom min takes: what a zero term maps to)


def range_step(cx: Lowering, top: ir.Value, bottom: ir.Value, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """A group's terms into a component's range in this block, per chain: the largest |x| and the smallest
    non-zero |x| less one, on the bits as integers, so that a zero never lowers the bottom and an inf or NaN lies
    above every finite top. 32 bits: unsigned max/min (native on x86), a zero's |x| - 1 wrapping to all ones.
    64 bits: range_step64. Two integer max/min a group: the range is checked once, at the block's end
    (_out_of_range), instead of testing each term."""
    e = cx.e
    low_bits = _splat_bits(cx, (1 << (e.f.width - 1)) - 1)
    if e.f.width == 64:
        return range_step64(e, top, bottom, _bits(cx, x), low_bits)
    ax = e.op("arith.andi", _bits(cx, x), low_bits)
    return e.op("arith.maxui", top, ax), e.op("arith.minui", bottom, e.op("arith.subi", ax, _splat_bits(cx, 1)))


def range_step64(e, top: ir.Value, bottom: ir.Value, bits: ir.Value, mag: ir.Value) -> tuple[ir.Value, ir.Value]:
    """range_step for float64 terms (their `bits` as i64 vectors; `mag` the splat of 2**63 - 1): the top an
    unsigned max of |x|'s bits, the bottom an unsigned min of |x| - 1 (a zero wraps to all ones: it never lowers
    the bottom), both taken on the 32-bit halves of each word (AVX2 has no 64-bit max or min: each cost a compare
    and a blend; a 32-bit one is one instruction there as on AVX-512). Half by half, the top is at least every
    term's |x| bits and the bottom at most every |x| - 1, both as 64-bit words, and both keep the largest and
    smallest terms' high halves (sign, exponent, leading mantissa bits): so a block with a term outside the range
    is always caught (a block whose largest or smallest term sits exactly on the range's edge may retry for
    nothing), and the next guess, read from the top's exponent, is the largest term's. bottom_below reads it."""
    ax = e.op("arith.andi", bits, mag)
    less = e.op("arith.subi", ax, e.ci(1, ax.type))
    if not isinstance(ax.type, ir.VectorType):
        return e.op("arith.maxui", top, ax), e.op("arith.minui", bottom, less)
    n = ir.VectorType(ax.type).shape[0]
    halves = ir.VectorType.get([2 * n], ir.IntegerType.get_signless(32))

    def on_halves(name: str, a: ir.Value, b: ir.Value) -> ir.Value:
        split = [create("vector.bitcast", [v], [halves]).result for v in (a, b)]
        return create("vector.bitcast", [e.op(name, *split)], [ax.type]).result

    return on_halves("arith.maxui", top, ax), on_halves("arith.minui", bottom, less)


def bottom_below(e, bottom: ir.Value, floor: ir.Value) -> ir.Value:
    """Per chain, whether range_step64's `bottom` shows a non-zero term below `floor` (bits of a positive float,
    both i64 vectors): the bottom is at most every term's |x| - 1 (all ones for zeros alone), held unsigned
    against floor - 1."""
    return e.cmpi(_ULT, bottom, e.op("arith.subi", floor, e.ci(1, floor.type)))


def _out_of_range(cx: Lowering, top: ir.Value, bottom: ir.Value, guess: ir.Value) -> ir.Value:
    """Per chain, whether a component's block held a non-zero term outside the range that keeps its steps
    exact (range_step's `top` and `bottom`; `guess` is M for biased chains, 2**E for windowed ones): above
    2**(p-HEADROOM) or below 2**(p-LOW_RANGE) (biased), outside E's window (windowed); either floor is raised to
    the smallest normal."""
    e = cx.e
    tb = _bits(cx, guess)
    if biased(cx):
        two_p = e.op("arith.andi", tb, _splat_bits(cx, ~_MANT))
        ceiling = e.op("arith.subi", two_p, _splat_bits(cx, HEADROOM << 52))
        floor, normal = e.op("arith.subi", two_p, _splat_bits(cx, LOW_RANGE << 52)), _SMALLEST_NORMAL
    else:
        ceiling = e.op("arith.ori", tb, _splat_bits(cx, (1 << 23) - 1))  # the largest float of E's binade
        floor, normal = e.op("arith.subi", tb, _splat_bits(cx, F32_WINDOW << 23)), 1 << 23
    floor = e.op("arith.maxui", floor, _splat_bits(cx, normal))
    if e.f.width == 64:
        below = bottom_below(e, bottom, floor)
    else:
        below = e.cmpi(_ULT, bottom, e.op("arith.subi", floor, _splat_bits(cx, 1)))
    return e.op("arith.ori", e.cmpi(_UGT, top, ceiling), below)


def _splat_bits(cx: Lowering, v: int) -> ir.Value:
    t = _bits_t(cx)
    w = cx.e.f.width
    v = v - (1 << w) if v >= 1 << (w - 1) else v  # (signless: the same bits as a signed value)
    return create("arith.constant", [], [t], {"value": ir.DenseElementsAttr.get_splat(
        t, ir.IntegerAttr.get(ir.IntegerType.get_signless(w), v))}).result


# ---- a block's end -----------------------------------------------------------------------------------------

def flush_pairs(cx: Lowering, res: list[ir.Value], nchunk: int, body: ir.Block) -> None:
    """The end of a full block: add its chains' sums into the chunk's pairs (biased: the high less the bias,
    exact in the binade, and the low; windowed: the float64 sums), or, when the chains lost a bit (or a float32
    block's sum is beyond float32's range), retry the block (retry_block). Either way the chunk gains exactly
    the block's terms."""
    if cx.term_range is None:
        return
    e = cx.e
    redo = None
    parts = []
    for acc, c, at in _components(cx):
        k = nchunk + acc.chain + 2 * c
        r = nchunk + cx.term_range + 2 * (acc.term_at + c)
        if not cx.flagged:
            out = _out_of_range(cx, res[r], res[r + 1], _guess(cx, at))
            redo = out if redo is None else e.op("arith.ori", redo, out)
        if biased(cx):
            if flag_chains.loud(cx):  # (the integers times the grid)
                high = flag_chains.grid_high(cx, res[k], (acc.chain, c))
            else:
                high = e.op("arith.subf", res[k], _guess(cx, at))
            parts.append((acc, c, at, [high, res[k + 1]]))
            continue
        if not cx.flagged:  # (flagged: flag_chains.lost holds the folded sums, which go on, against 2**127)
            past = exact_emit.past_f32(e, res[k])
            redo = past if redo is None else e.op("arith.ori", redo, past)
        parts.append((acc, c, at, [res[k]]))
    if cx.flagged:  # (the parts' vectors added into one, then the flag read once they are computed)
        parts = [(acc, c, at, [flag_chains.fold(cx, v) for v in vals]) for acc, c, at, vals in parts]
        grid = flag_chains.loud(cx) and biased(cx)  # (a grid's lows are NaN whenever its highs are not finite)
        lost = flag_chains.lost(cx, [v for *_, vals in parts for v in vals], redo,
                                [v for *_, vals in parts for v in (vals[1:] if grid else vals)])
    else:
        lost = e.any_of(redo)
    branch = scf.IfOp(lost, [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        retry_block(cx, body, res)
        if cx.flagged:  # (the retry rounds on purpose)
            flag_chains.clear(cx)
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        merge_pairs(cx, parts)
        if flag_chains.loud(cx):  # (its TwoSums round, raising the flag)
            flag_chains.restore(cx)
        scf.YieldOp([])


def deposit_terms(cx: Lowering) -> None:
    """Every term of the block's groups (cx.block_groups of them), from the term buffer, into the chunk's exact
    accumulators."""
    e = cx.e
    exact = cx.bufs[("#exact", "exact")]
    for acc, c, _ in _components(cx):
        base = exact_slot(cx, acc, c)
        each = scf.ForOp(e.c(0), e.mul_i(cx.block_groups, e.c(cx.pair_w)), e.c(1), [])
        with ir.InsertionPoint(each.body):
            at = e.add_i(each.induction_variable, e.c((acc.term_at + c) * B))
            exact_emit.deposit(e, exact, base, e.load(term_buffer(cx), at))
            scf.YieldOp([])


def retry_block(cx: Lowering, body: ir.Block, state: list[ir.Value]) -> None:
    """A block whose chains lost a bit, again through TwoSum chains from (0, 0) in float64 (a float32 block's terms
    widened, exactly: its pairs then hold about 106 bits, where float32 pairs held 48 and a block of terms
    spread over more than its window, squares of normal data say, lost a bit in most blocks and was deposited
    term by term), which also find each component's largest term: M (float64) or E (float32) for the next
    blocks. The terms come from the term buffer, or (cx.recompute) from the body run again, a group of pair_w
    copies at a time as in the block's own loop (what those copies do to other reductions is dropped). If the
    chains lose a bit too (or a float32 block's pair reaches 2**127: its float32 parts would not be exact), every
    term is deposited."""
    e = cx.e
    comps = list(_components(cx))
    zero = e.splat(0.0, _wide(cx))
    init = [zero] * (3 * len(comps)) + [e.op("arith.bitcast", zero, t=_wide_bits(cx))]
    loop = scf.ForOp(e.c(0), cx.block_groups, e.c(1), init)
    with ir.InsertionPoint(loop.body):
        anchor = scf.YieldOp([])
    g = loop.induction_variable
    if cx.recompute:
        rerun.rerun_group(cx, body, state, g, anchor)
    with ir.InsertionPoint(anchor):
        st = list(loop.inner_iter_args)
        at = e.mul_i(g, e.c(cx.pair_w))
        for n, (acc, c, _) in enumerate(comps):
            if cx.recompute:
                xv = create("vector.from_elements", cx.pending[(acc.chain, c)], [_lanes(cx)]).result
            else:
                xv = e.vload(term_buffer(cx), e.add_i(at, e.c((acc.term_at + c) * B)), cx.pair_w, e.f)
            xv = _widen(cx, xv)
            s1, e1 = e.two_sum(st[3 * n], xv)
            s2, e2 = e.two_sum(st[3 * n + 1], e1)
            st[3 * n], st[3 * n + 1] = s1, s2
            st[3 * n + 2] = e.op("arith.maximumf", st[3 * n + 2], e.abs(xv))
            st[-1] = e.op("arith.ori", st[-1], e.op("arith.bitcast", e2, t=_wide_bits(cx)))
        scf.YieldOp(st)
    anchor.operation.erase()
    cx.pending = {}
    res = list(loop.results)
    redo = nonzero(cx, res[-1])
    for n, (_, _, at) in enumerate(comps):
        for v in res[3 * n:3 * n + 2]:
            lost = e.cmpf(_UNE, e.op("arith.subf", v, v), zero) if biased(cx) else exact_emit.past_f32(e, v)
            redo = e.op("arith.ori", redo, lost)
        top = create("vector.reduction", [res[3 * n + 2]], [e.f64],
                     {"kind": ir.Attribute.parse("#vector.kind<maximumf>")}).result
        if biased(cx):
            guess = next_bias(cx, top)
        else:  # (top is a float32 term, widened: exact both ways)
            guess = e.op("arith.extf", next_window(cx, e.op("arith.truncf", top, t=e.f)), t=e.f64)
        e.vstore(e.bcast(guess, _wide(cx)), chunk_pairs(cx), e.c(at + 2 * cx.pair_w))
    branch = scf.IfOp(cx.e.any_of(redo), [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        if cx.recompute:
            rerun.redo_block(cx, body, state)
        else:
            deposit_terms(cx)
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        merge_pairs(cx, [(acc, c, at, res[3 * n:3 * n + 2]) for n, (acc, c, at) in enumerate(comps)])
        scf.YieldOp([])


def next_bias(cx: Lowering, top: ir.Value) -> ir.Value:
    """M = 1.5 * 2**p for a block whose largest term is `top` (float64): p = its exponent + BIAS_STEP, within
    P_RANGE (a NaN or inf top gives the highest p: such a block retries anyway)."""
    e = cx.e
    i64 = e.i64
    ex = e.op("arith.andi", e.op("arith.shrui", e.op("arith.bitcast", top, t=i64), e.c(52, i64)), e.c(0x7FF, i64))
    p = e.op("arith.addi", ex, e.c(BIAS_STEP - 1023, i64))
    p = e.op("arith.minsi", e.op("arith.maxsi", p, e.c(P_RANGE[0], i64)), e.c(P_RANGE[1], i64))
    return pow2(cx, p, half=True)


def pow2(cx: Lowering, ex: ir.Value, half: bool = False) -> ir.Value:
    """2**ex (1.5 * 2**ex with `half`: a bias M) as float64, ex an i64 exponent of a normal float64 (or a vector
    of them: a vector of float64)."""
    e = cx.e
    t = ex.type
    bits = e.op("arith.shli", e.op("arith.addi", ex, e.ci(1023, t)), e.ci(52, t))
    return e.op("arith.bitcast", e.op("arith.ori", bits, e.ci(1 << 51, t)) if half else bits, t=like(t, e.f64))


def next_window(cx: Lowering, top: ir.Value) -> ir.Value:
    """2**E for a float32 block whose largest term is `top`: E = its exponent + F32_HEADROOM, within the normal
    exponents (a NaN or inf top gives the highest E: such a block retries anyway)."""
    e = cx.e
    i32 = ir.IntegerType.get_signless(32)
    ex = e.op("arith.shrui", e.op("arith.bitcast", top, t=i32), e.c(23, i32))  # (top >= 0: no sign bit)
    ex = e.op("arith.minsi", e.op("arith.maxsi", e.op("arith.addi", ex, e.c(F32_HEADROOM, i32)), e.c(1, i32)),
              e.c(254, i32))
    return e.op("arith.bitcast", e.op("arith.shli", ex, e.c(23, i32)), t=e.f)


def merge_pairs(cx: Lowering, blocks: list) -> None:
    """A block's exact parts per component (acc, c, at, [p0, p1, ...]: float64 vectors whose exact sum is the
    block's) into the chunk's pairs (H, L): (H, a) = TwoSum(H, p0), then a and each further part into L by
    TwoSums. When those errors are zero (an overflow makes them NaN) and, for float32, the new H and L stay
    within float32's range (so that they can be deposited as float32 parts), H + L gained exactly the parts and
    the new pairs are kept; otherwise the chunk's pairs stay as they were and the parts are deposited instead.
    Parts narrower than the pairs (sae_emit.fold) go into the pairs' first entries. (A flagged stage's TwoSums
    are silent: Emit.silent.)"""
    e = cx.e
    buf = chunk_pairs(cx)
    new, bad = [], []
    w = ir.VectorType(blocks[0][3][0].type).shape[0]
    zero = e.splat(0.0, ir.VectorType.get([w], e.f64))
    for _, _, at, parts in blocks:
        h1, a = e.two_sum(e.vload(buf, e.c(at), w, e.f64), parts[0])
        low = e.vload(buf, e.c(at + cx.pair_w), w, e.f64)
        for part in [a] + parts[1:]:
            low, err = e.two_sum(low, part)
            bad.append(e.cmpf(_UNE, err, zero))
        if not biased(cx):
            bad += [exact_emit.past_f32(e, h1), exact_emit.past_f32(e, low)]
        new.append((at, h1, low))
    lost = bad[0]
    for b in bad[1:]:
        lost = e.op("arith.ori", lost, b)
    branch = scf.IfOp(cx.e.any_of(lost), [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        exact = cx.bufs[("#exact", "exact")]
        for acc, c, _, parts in blocks:
            _deposit_wide(cx, exact, exact_slot(cx, acc, c), parts)
        if cx.flagged:  # (float32 parts round on purpose)
            flag_chains.clear(cx)
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        for at, h1, low in new:
            e.vstore(h1, buf, e.c(at))
            e.vstore(low, buf, e.c(at + cx.pair_w))
        scf.YieldOp([])


def _widen(cx: Lowering, v: ir.Value) -> ir.Value:
    return v if biased(cx) else cx.e.op("arith.extf", v, t=_wide(cx))


def _wide_bits(cx: Lowering) -> ir.Type:
    return ir.VectorType.get([cx.pair_w], cx.e.i64)
