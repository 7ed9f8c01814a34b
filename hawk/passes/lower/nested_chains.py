"""Chains for ordered kept totals under the nested driver (the host): a row of at least MIN_LANES lanes adds its
groups of NEST_CHAINS terms into NEST_CHAINS float64 chains side by side, by one Fast2Sum each (float64) or one
add (float32), where the slot's (high, low) pairs take two TwoSums (docs/ordered.md).

- A chain starts at (M, 0), M = 1.5 * 2**p, like the full sums' biased chains (ordered_chains): while each of its
  terms is zero or of magnitude in [2**(p-LOW_RANGE), 2**(p-HEADROOM)], and it takes at most NEST_BLOCK of them,
  `high - M` and `low` are exactly the sum of its terms.
- A block (up to NEST_BLOCK groups of the row) steps the chains with no branch: each group stores its terms in
  a term buffer and widens the block's range of |term| (an integer max and min on the terms' bits). At the
  block's end, when that range lies inside the chains' (an inf or NaN lies above every ceiling), the chains
  go into the pairs by the pairs' own step (reduce_kept.pairs_take, with its spills; a row of one block takes
  them as its pairs); else the chains are dropped and the buffered terms take the pairs' step instead, group
  by group, as if there had been no chains. Nothing is run twice, so any body can take this path.
- p follows the data: each block sets the next one's from its largest term (the chunk's first guess is
  P_START). A wrong guess costs speed (a block stepped twice), never bits.
float32 kernels' chains are windowed instead, as the full sums' are: one float64 sum per chain from 0 (the term
widened, exactly), one plain add per group, exact while every term is zero or has a float32 exponent from
E - F32_WINDOW to E (2**E the window's top, set like M from the block before), the range kept on the float32
terms' own bits; their groups are WIDE_GROUP lanes (two vectors of float64 chains, one of the range: 10 vector ops
for 16 terms, where groups of 8 widened before the range took 7 for 8).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf, vector

from hawk.abi.layout import ORDERED_BLOCK
from hawk.ir.build import create
from hawk.passes import sae_emit
from hawk.passes.host_emit import like, size
from hawk.passes.lower import flag_chains, ordered_chains, reduce_kept
from hawk.passes.lower.context import Lowering
from hawk.passes.lower.ordered_chains import BIAS_STEP, F32_START, F32_WINDOW, HEADROOM, LOW_RANGE, P_START, pow2

NEST_BLOCK = 128  # groups a chain takes before it goes into the pairs (LOW_RANGE's bound on the low's adds)
MIN_LANES = 64  # slots of fewer lanes keep the pairs alone: a block's end costs about 60 cycles, which rows of
# 16 lanes did not win back (1000000 x 16 float64 row sums: 1.9 ms with pairs, 3.1 ms with chains; 64 lanes:
# 1.23 and 1.01 ms; 1000: 0.9 and 0.46 ms)
ROW_STEP = BIAS_STEP + 2  # p = (exponent of the previous row's largest term) + ROW_STEP: the next row may reach 8x it
F64_P = (-975, 968)  # the range's floor normal; its ceiling below scatters.pair_limit (2**960)
WINDOW_STEP = 3  # float32: E = (exponent of the previous block's largest term) + WINDOW_STEP
F32_E = (-126, 62)  # float32 window tops: terms below a float32 kernel's pair_limit (2**64)
_EQ, _SGT, _SGE, _ULT, _UGT = 0, 4, 5, 6, 8  # arith.cmpi
_MAG = (1 << 63) - 1
WIDE_GROUP = 16  # lanes of a float32 group of copies (group_width)


def group_width(cx: Lowering, kept: list, chained: list) -> int:
    """Lanes of a group of copies under the nested driver (cx.nest_w): WIDE_GROUP for float32 chains when every
    reduction of the stage is such a chained total of at most two components (a compensated total's chains and a
    sum over every lane's take NEST_CHAINS copies; more components would spill registers), else NEST_CHAINS."""
    if cx.flagged:  # (chains checked by the inexact flag: four vectors of them, flag_chains)
        return flag_chains.chains(cx)
    if (chained and windowed(cx) and len(chained) <= 2 and not cx.full
            and all(r in kept and reduce_kept.nested_pairs(r) for r in cx.lay.reductions)):
        return WIDE_GROUP
    return reduce_kept.NEST_CHAINS


def _block_lanes(cx: Lowering) -> int:
    """Lanes of a block of groups (each chain takes NEST_BLOCK terms; chains checked by the inexact flag, whose
    groups are four times wider, take ORDERED_BLOCK lanes a block, as the full sums' do)."""
    return ORDERED_BLOCK if cx.flagged else NEST_BLOCK * cx.nest_w


def _stride(cx: Lowering) -> int:
    """Values of a component's part of the term buffer: a block's lanes, and room for the zeros that a block's
    last short group (NEST_CHAINS lanes of a wider group: chunk_loops._group_loop) stores after its terms."""
    return _block_lanes(cx) + cx.nest_w - reduce_kept.NEST_CHAINS


def comps(kept: list) -> list[tuple]:
    """The (reduction, component) pairs whose terms take chains: each component of an ordered kept total."""
    return [(r, c) for r in kept if reduce_kept.nested_pairs(r) for c in range(size(r.payload))]


def windowed(cx: Lowering) -> bool:
    """Whether the chains are windowed (a float32 kernel) rather than biased (float64)."""
    return cx.e.f != cx.e.f64


def first_guesses(cx: Lowering, pairs: list[tuple]) -> list[ir.Value]:
    """The chunk's first guess per component: M = 1.5 * 2**P_START (biased), 2**F32_START (windowed)."""
    e = cx.e
    return [pow2(cx, e.c(F32_START, e.i64)) if windowed(cx) else pow2(cx, e.c(P_START, e.i64), half=True)
            for _ in pairs]


def _next_guess(cx: Lowering, guess: ir.Value, top: ir.Value) -> ir.Value:
    """The next block's guess from this block's largest |term| (per chain; its bits are ordered as integers):
    M = 1.5 * 2**(its exponent + ROW_STEP) within F64_P, or a window top 2**(its exponent + WINDOW_STEP)
    within F32_E; a block of zeros, or one with an inf or NaN, keeps `guess`."""
    top = create("vector.reduction", [top], [cx.e.i64],
                 {"kind": ir.Attribute.parse("#vector.kind<maxsi>")}).result  # (|term| bits: an inf or NaN above all)
    return guess_after(cx, guess, top)


def guess_after(cx: Lowering, guess: ir.Value, top: ir.Value, lowest: int | None = None,
                step: int | None = None) -> ir.Value:
    """_next_guess from a block's largest |term| as one i64 (its bits), or per slot from a vector of them
    beside a vector of guesses (column_tiles); column_chains calls it per slot, with a guess of at least
    `lowest` (p or E) and its own `step`."""
    e = cx.e
    t = top.type
    ex = e.op("arith.shrui", top, e.ci(52, t))
    (lo, hi), own = (F32_E, WINDOW_STEP) if windowed(cx) else (F64_P, ROW_STEP)
    lo, step = lo if lowest is None else lowest, own if step is None else step
    p = e.op("arith.addi", ex, e.ci(step - 1023, t))
    p = e.op("arith.minsi", e.op("arith.maxsi", p, e.ci(lo, t)), e.ci(hi, t))
    keep = e.op("arith.ori", e.cmpi(_EQ, top, e.ci(0, t)), e.cmpi(_SGE, ex, e.ci(0x7FF, t)))
    return e.select(keep, guess, pow2(cx, p, half=not windowed(cx)))


def chain_range(cx: Lowering, guess: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The bits (i64, as the range's are) of the |term| range (floor, ceiling; both allowed) that keeps a
    block's chains exact (column_chains' slots' too). Biased, from M = 1.5 * 2**p: 2**(p-LOW_RANGE) to
    2**(p-HEADROOM). Windowed, from 2**E: float32 exponents E - F32_WINDOW to E (the floor at least float32's
    smallest normal): such terms are multiples of 2**(E-45) below 2**(E+1), so a chain's 128 partial sums are
    multiples of it below 2**53 times it, float64 values all. A vector of guesses gives the ranges per entry
    (column_tiles' slots)."""
    e = cx.e
    t = like(guess.type, e.i64)
    two_p = e.op("arith.andi", e.op("arith.bitcast", guess, t=t), e.ci(~((1 << 52) - 1), t))
    if windowed(cx):
        floor = e.op("arith.maxsi", e.op("arith.subi", two_p, e.ci(F32_WINDOW << 52, t)),
                     e.ci((1023 - 126) << 52, t))
        return floor, e.op("arith.subi", e.op("arith.addi", two_p, e.ci(1 << 52, t)), e.ci(1, t))
    return tuple(e.op("arith.subi", two_p, e.ci(d << 52, t)) for d in (LOW_RANGE, HEADROOM))


def chained_groups(cx: Lowering, body: ir.Block, start: ir.Value, stop: ir.Value, inits: list[ir.Value],
                   pairs: list[tuple], guesses: list[ir.Value], group_loop,
                   span: int) -> tuple[list[ir.Value], list[ir.Value]]:
    """The slot's whole groups [start, stop) (of a slot of `span` lanes) in blocks of NEST_BLOCK groups, each
    block's groups run by `group_loop(cx, body, lo, hi, state)` with each component's chains and range after the
    slot state (cx.nested_chain says where; reduce_kept.nested_group_step calls chain_step), then the chains, or
    the block's buffered terms, into the pairs. Returns the slot state and the guesses for the next rows."""
    e = cx.e
    vec = ir.VectorType.get([reduce_kept.NEST_CHAINS], e.f64)
    wide = ir.VectorType.get([cx.nest_w], e.f64)
    n = len(inits)
    blk = _block_lanes(cx)
    if flag_chains.loud(cx):  # (the row's start: what the rows before rounded raised the flag)
        flag_chains.restore(cx)
    blocks = scf.ForOp(start, stop, e.c(blk), inits + guesses)
    with ir.InsertionPoint(blocks.body):
        b = blocks.induction_variable
        state, guess = list(blocks.inner_iter_args)[:n], list(blocks.inner_iter_args)[n:]
        end = e.op("arith.minui", e.add_i(b, e.c(blk)), stop)
        cx.nested_chain = {}
        chains = []
        for k, ((r, c), g) in enumerate(zip(pairs, guess, strict=True)):
            cx.nested_chain[(r.cell, c)] = (n + 4 * k, k, b)
            if windowed(cx):  # (the second vector is unused: the windowed chains have no low)
                chains += [e.splat(0.0, wide), e.splat(0.0, vec)]
                chains += [e.ci(x, _bits32(cx)) for x in ordered_chains.RANGE_INIT]
            elif flag_chains.loud(cx):  # (float64 terms on the block's grid: flag_chains.grid_step)
                cx.grids[(r.cell, c)] = flag_chains.grid(cx, g, wide)
                chains += [e.splat(0.0, wide)] * 2 + [_splat(cx, x) for x in ordered_chains.RANGE_INIT]
            else:
                v = wide if cx.flagged else vec
                chains += [e.bcast(g, v), e.splat(0.0, v)] + [_splat(cx, x) for x in ordered_chains.RANGE_INIT]
        res = group_loop(cx, body, b, end, state + chains)
        ends = _flagged_end if cx.flagged else _range_end
        out, nxt = ends(cx, res, n, pairs, guess, b, end, span)
        cx.nested_chain = None
        scf.YieldOp(out + nxt)
    res = list(blocks.results)
    return res[:n], res[n:]


def _range_end(cx: Lowering, res: list[ir.Value], n: int, pairs: list[tuple], guess: list[ir.Value], b: ir.Value,
               end: ir.Value, span: int) -> tuple[list[ir.Value], list[ir.Value]]:
    """A block's end under the range check: when every chain's range lies inside its guess's, the chains go into
    the pairs (a row of one block takes them as its pairs), else the block's buffered terms do; the next guesses
    come from the block's largest term. Returns (the slot state, the next guesses)."""
    e = cx.e
    vec = ir.VectorType.get([reduce_kept.NEST_CHAINS], e.f64)
    blk = _block_lanes(cx)
    out, bad, nxt = res[:n], None, []
    for k, g in enumerate(guess):
        hi, lo, top, bottom = res[n + 4 * k:n + 4 * k + 4]
        if windowed(cx):
            flag, top = _out_of_window(cx, g, top, bottom)
        else:
            floor, ceiling = chain_range(cx, g)
            flag = _any8(cx, e.op("arith.ori", e.cmpi(_SGT, top, e.bcast(ceiling, _bits(cx))),
                                  ordered_chains.bottom_below(e, bottom, e.bcast(floor, _bits(cx)))))
        bad = flag if bad is None else e.op("arith.ori", bad, flag)
        nxt.append(_next_guess(cx, g, top))
    branch = scf.IfOp(bad, [v.type for v in out], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        scf.YieldOp(_terms_into_pairs(cx, out, pairs, b, end))
    with ir.InsertionPoint(branch.else_block):
        cx.accs = list(out)
        for k, ((r, c), g) in enumerate(zip(pairs, guess, strict=True)):
            hi, lo = res[n + 4 * k:n + 4 * k + 2]
            # (biased: exact, the high stayed in M's binade; windowed: the sums, in halves of NEST_CHAINS)
            sums = _halves(cx, hi) if windowed(cx) else (e.op("arith.subf", hi, e.bcast(g, vec)), lo)
            if span <= blk:  # (a row's only block: its pairs still hold nothing, and any exact pair will do)
                at = cx.nested[r.cell] + 2 * c
                cx.accs[at:at + 2] = sums if len(sums) == 2 else (sums[0], e.splat(0.0, vec))
                continue
            for v in sums:
                reduce_kept.pairs_take(cx, r, c, v)
        scf.YieldOp(cx.accs)
    return list(branch.results), nxt


def _flagged_end(cx: Lowering, res: list[ir.Value], n: int, pairs: list[tuple], guess: list[ir.Value], b: ir.Value,
                 end: ir.Value, span: int) -> tuple[list[ir.Value], list[ir.Value]]:
    """A block's end when the inexact flag checks its chains (flag_chains): each component's chain sums (biased:
    the highs less M, and the lows; windowed: the sums) are added from cx.nest_w chains into NEST_CHAINS by plain
    adds, and when the flag stayed clear and they are finite they go into the pairs (by silent TwoSums; a row of
    one block takes them as its pairs) and the guesses stay; else the block's buffered terms go into the pairs,
    the next guesses come from their largest |term|, and the flag is cleared. Returns (the slot state, the next
    guesses)."""
    e = cx.e
    vec = ir.VectorType.get([reduce_kept.NEST_CHAINS], e.f64)
    wide = ir.VectorType.get([cx.nest_w], e.f64)
    single = span <= _block_lanes(cx)  # (a row's only block: its sums go into pair 0 alone, reduce_kept.lone_pair)
    fold = sae_emit.total if single else sae_emit.fold
    sums = []
    grid = flag_chains.loud(cx) and not windowed(cx)
    for k, ((r, c), g) in enumerate(zip(pairs, guess, strict=True)):
        hi, lo = res[n + 4 * k:n + 4 * k + 2]
        if grid:  # (the integers times the grid)
            hi = flag_chains.grid_high(cx, hi, (r.cell, c))
        else:
            hi = hi if windowed(cx) else e.op("arith.subf", hi, e.bcast(g, wide))
        sums.append((fold(e, hi),) if windowed(cx) else (fold(e, hi), fold(e, lo)))
    out = res[:n]
    checked = [s[-1] for s in sums] if grid else None  # (a grid's lows are NaN whenever its highs are not finite)
    branch = scf.IfOp(flag_chains.lost(cx, [v for s in sums for v in s], None, checked),
                      [v.type for v in out + guess], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        state = _terms_into_pairs(cx, out, pairs, b, end)
        tops = _buffer_tops(cx, len(pairs), b, end)
        flag_chains.clear(cx)
        scf.YieldOp(state + [_next_guess(cx, g, t) for g, t in zip(guess, tops, strict=True)])
    with ir.InsertionPoint(branch.else_block):
        cx.accs = list(out)
        for (r, c), s in zip(pairs, sums, strict=True):
            if single:  # (its pairs still hold nothing: pair 0 takes the row's sums, the others stay zeros)
                at = cx.nested[r.cell] + 2 * c
                zero = e.splat(0.0, vec)
                cx.accs[at:at + 2] = [vector.insert(v, zero, [], [0]) for v in s] + [zero] * (2 - len(s))
                continue
            for v in s:
                reduce_kept.pairs_take(cx, r, c, v)
        if flag_chains.loud(cx) and not single:  # (the pairs' TwoSums round, raising the flag)
            flag_chains.restore(cx)
        scf.YieldOp(cx.accs + guess)
    res = list(branch.results)
    return res[:n], res[n:]


def _buffer_tops(cx: Lowering, m: int, b: ir.Value, end: ir.Value) -> list[ir.Value]:
    """Per chained component, the largest |term| of the block's buffered terms as float64 bits (a vector of
    NEST_CHAINS i64: an inf or NaN above every finite one), which _next_guess reads."""
    e = cx.e
    zero = _splat(cx, 0)
    loop = scf.ForOp(e.c(0), e.op("arith.subi", end, b), e.c(reduce_kept.NEST_CHAINS), [zero] * m)
    with ir.InsertionPoint(loop.body):
        tops = []
        for k, top in enumerate(loop.inner_iter_args):
            xv = e.widen(e.vload(term_buffer(cx, m), e.add_i(loop.induction_variable, e.c(k * _stride(cx))),
                                 reduce_kept.NEST_CHAINS, e.f), e.f64)
            tops.append(e.op("arith.maxsi", top, e.op("arith.bitcast", e.abs(xv), t=_bits(cx))))
        scf.YieldOp(tops)
    return list(loop.results)


def _terms_into_pairs(cx: Lowering, state: list[ir.Value], pairs: list[tuple], b: ir.Value,
                      end: ir.Value) -> list[ir.Value]:
    """A failed block's buffered terms into the pairs, group by group (reduce_kept.pairs_take: what the groups
    would have done with no chains)."""
    e = cx.e
    loop = scf.ForOp(e.c(0), e.op("arith.subi", end, b), e.c(reduce_kept.NEST_CHAINS), state)
    with ir.InsertionPoint(loop.body):
        cx.accs = list(loop.inner_iter_args)
        for k, (r, c) in enumerate(pairs):
            xv = e.widen(e.vload(term_buffer(cx, len(pairs)), e.add_i(loop.induction_variable,
                                                                         e.c(k * _stride(cx))),
                                 reduce_kept.NEST_CHAINS, e.f), e.f64)
            reduce_kept.pairs_take(cx, r, c, xv)
        scf.YieldOp(cx.accs)
    return list(loop.results)


def term_buffer(cx: Lowering, m: int | None = None) -> ir.Value:
    """A block's terms per chained component (NEST_BLOCK groups of cx.nest_w each, component-major), in the
    kernel's type."""
    return cx.temp((len(cx.nested_chain) if m is None else m) * _stride(cx), cx.e.f, tag="nested-chain-terms")


def chain_step(cx: Lowering, r, c: int, xv: ir.Value) -> None:
    """A group's terms (one per chain, in the kernel's type) of component c of `r`: into the term buffer (in that
    type), into the chains by one Fast2Sum (windowed: one add of the widened terms), and into the chains'
    range: the largest |term| and the smallest non-zero one less one, on their bits as integers (float64:
    ordered_chains.range_step64; float32: unsigned max and min of the float32 bits, a zero's |x| - 1 wrapping to
    all ones, as the full sums' range_step; an inf or NaN lies above every ceiling, and no fast-math max is left
    to make a NaN poison a branch). No branch: the block's end holds the range against the chains'
    (chained_groups)."""
    e = cx.e
    s = cx.accs
    i, k, b = cx.nested_chain[(r.cell, c)]
    wide = e.widen(xv, e.f64)
    e.vstore(xv, term_buffer(cx), e.add_i(e.op("arith.subi", cx.nested_group_at, b), e.c(k * _stride(cx))))
    hi, lo = s[i], s[i + 1]
    if flag_chains.loud(cx) and not windowed(cx):  # (float64 terms on the block's grid)
        s[i], s[i + 1] = flag_chains.grid_step(cx, hi, lo, wide, *cx.grids[(r.cell, c)])
        return
    t = sae_emit.add(e, hi, wide) if cx.flagged and not windowed(cx) else e.add(hi, wide)  # (silent: flag_chains)
    if windowed(cx):  # (one plain add: exact inside the window)
        s[i] = t
        if not cx.flagged:  # (the flag checks the chains: no range)
            s[i + 2], s[i + 3] = range_step32(cx, s[i + 2], s[i + 3], xv)
        return
    s[i], s[i + 1] = t, e.add(lo, e.op("arith.subf", xv, e.op("arith.subf", t, hi)))
    if cx.flagged:
        return
    bits = e.op("arith.bitcast", xv, t=_bits(cx))
    s[i + 2], s[i + 3] = ordered_chains.range_step64(e, s[i + 2], s[i + 3], bits, _splat(cx, _MAG))


def _splat(cx: Lowering, v: int) -> ir.Value:
    return cx.e.ci(v, _bits(cx))


def _any8(cx: Lowering, flags: ir.Value) -> ir.Value:
    """any_of over NEST_CHAINS flags, its halves ORed first (what x86 tests with one movmsk: a reduction of
    eight i1 across two registers was packed to 16-bit lanes first)."""
    e = cx.e
    half = reduce_kept.NEST_CHAINS // 2
    both = e.op("arith.ori", e.shuffle(flags, flags, list(range(half))),
                e.shuffle(flags, flags, list(range(half, 2 * half))))
    return e.any_of(both)


def _out_of_window(cx: Lowering, guess: ir.Value, top: ir.Value, bottom: ir.Value) -> tuple[ir.Value, ir.Value]:
    """A windowed block's end: whether any chain's range (chain_step's float32 bits) leaves the window under
    `guess` = 2**E (window_out), and the block's largest |term| as the float64 bits _next_guess reads."""
    e = cx.e
    i32 = ir.IntegerType.get_signless(32)
    most = create("vector.reduction", [top], [i32], {"kind": ir.Attribute.parse("#vector.kind<maxui>")}).result
    return e.any_of(window_out(cx, guess, top, bottom)), e.bcast(wide_bits(cx, most), _bits(cx))


def window_out(cx: Lowering, guess: ir.Value, top: ir.Value, bottom: ir.Value) -> ir.Value:
    """Per entry of a float32 range (range_step32's `top` and `bottom`, i32 vectors), whether it holds a non-zero
    term outside the window under `guess` = 2**E (float64: one for all, or a vector of one per entry, as column
    tiles keep): float32 exponents E - F32_WINDOW to E, the floor at least float32's smallest normal (chain_range,
    on float32 bits)."""
    e = cx.e
    t = top.type
    wide = like(guess.type, e.i64)
    ex = e.op("arith.subi", e.op("arith.shrui", e.op("arith.bitcast", guess, t=wide), e.ci(52, wide)),
              e.ci(1023 - 127, wide))  # (E's float32 biased exponent)
    ceiling = e.op("arith.ori", e.op("arith.shli", ex, e.ci(23, wide)), e.ci((1 << 23) - 1, wide))
    floor = e.op("arith.maxsi", e.op("arith.shli", e.op("arith.subi", ex, e.ci(F32_WINDOW, wide)), e.ci(23, wide)),
                 e.ci(1 << 23, wide))
    narrow = like(guess.type, ir.IntegerType.get_signless(32))
    ceiling, floor = (e.bcast(e.op("arith.trunci", v, t=narrow), t) for v in (ceiling, floor))
    return e.op("arith.ori", e.cmpi(_UGT, top, ceiling), e.cmpi(_ULT, bottom, e.op("arith.subi", floor, e.ci(1, t))))


def range_step32(cx: Lowering, top: ir.Value, bottom: ir.Value, xv: ir.Value) -> tuple[ir.Value, ir.Value]:
    """float32 terms into a range per entry (i32 vectors: the largest |x| bits, and the smallest non-zero |x| bits
    less one, unsigned, a zero's wrapping to all ones), as the full sums' ordered_chains.range_step: an inf or
    NaN lies above every ceiling. ordered_chains.RANGE_INIT gives its first values."""
    e = cx.e
    t = like(xv.type, ir.IntegerType.get_signless(32))
    ax = e.op("arith.andi", e.op("arith.bitcast", xv, t=t), e.ci((1 << 31) - 1, t))
    return e.op("arith.maxui", top, ax), e.op("arith.minui", bottom, e.op("arith.subi", ax, e.ci(1, t)))


def wide_bits(cx: Lowering, top: ir.Value) -> ir.Value:
    """A float32 range's top bits (i32, or a vector of them) as the bits of the same values in float64 (i64),
    which guess_after reads."""
    e = cx.e
    f = e.op("arith.bitcast", top, t=like(top.type, e.f))
    return e.op("arith.bitcast", e.op("arith.extf", f, t=like(top.type, e.f64)), t=like(top.type, e.i64))


def _halves(cx: Lowering, v: ir.Value) -> tuple[ir.Value, ...]:
    """A windowed block's chain sums (cx.nest_w float64) as vectors of NEST_CHAINS, the pairs' width."""
    w = reduce_kept.NEST_CHAINS
    return tuple(cx.e.shuffle(v, v, list(range(h, h + w))) for h in range(0, cx.nest_w, w))


def _bits32(cx: Lowering) -> ir.Type:
    return ir.VectorType.get([cx.nest_w], ir.IntegerType.get_signless(32))


def _bits(cx: Lowering) -> ir.Type:
    return ir.VectorType.get([reduce_kept.NEST_CHAINS], cx.e.i64)
