"""Rules for reductions over every lane (hawk.reduce without kept axes), per policy: "fast" sums and max/min in
the chunk state (max/min with NaN/zero flags on the host: host_emit.fast_extremum), "compensated" Neumaier
pairs per chain, "ordered" terms into exact accumulators (hawk/passes/exact_emit.py), on the host through
checked two-float chains over full blocks (ordered_chains.py).
Wide payloads: wide.py. The hawk.reduce rule picks the reduction's form: a fold (folds.py), a kept-axis total
(reduce_kept.py) or this.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import vector

from hawk.abi.layout import ORDERED_CHAINS
from hawk.ir.access import reduce_mask, reduce_value
from hawk.ir.build import create
from hawk.passes import exact_emit
from hawk.passes.lower import folds, ordered_chains, planes, reduce_kept, wide
from hawk.passes.lower.context import Lowering, rule
from hawk.passes.lower.state import Acc

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
    """One lane into a max/min with flags: the packed max and the sum of NaNs and zeros. A masked-out lane offers
    the identity (-inf for max, +inf for min), which changes neither (and is neither NaN nor zero): selecting
    the lane's value, not the new state, keeps the loop a plain max/min reduction that LLVM vectorizes (a
    select of the state ran lane by lane, 18x slower)."""
    e, s = cx.e, cx.accs
    k, nk = acc.slot + c, acc.flags + c
    if mask is not None:
        x = e.select(mask, x, e.identity(acc.policy, x.type))
    s[k] = e.fast_extremum(acc.policy, s[k], x)
    special = e.cmpf(_UEQ, x, e.cf(0.0))  # NaN, +0.0 or -0.0
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
        ordered_chains.ordered_chain_step(cx, acc, v, mask)
    elif acc.wide_pairs:  # the chunk's (high, low) vectors of a wide payload (wide.py)
        wide.reduce_ordered_wide(cx, acc, v, mask)
    elif acc.policy == "ordered":  # each component into this chunk's exact accumulator for it
        exact = cx.bufs[("#exact", "exact")]
        for c, x in planes.components(cx, v, r.payload):
            exact_emit.deposit(e, exact, ordered_chains.exact_slot(cx, acc, c), x, mask)
    elif acc.policy == "compensated":
        for c, x in enumerate(xs):
            if isinstance(cx.j, int) and cx.target == "host":  # a full block's copy j: into the group's vector
                if mask is not None:  # (-0.0 adds nothing, even to a -0.0 sum)
                    x = e.select(mask, x, e.cf(-0.0, x.type))
                cx.pending.setdefault((acc.chain, c), [None] * cx.pair_w)[cx.j] = x
                continue
            x = e.widen(x, e.f64)
            if isinstance(cx.j, int):  # (GPU) a full block's copy j: its own chain, one value each
                ks = ordered_chains.nchunk_red_total(cx) + acc.chain + cx.j * 2 * acc.n + c
                kc = ks + acc.n
                ns, nc = _chain_add(cx, s[ks], s[kc], x)
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


def _chain_add(cx: Lowering, total: ir.Value, cor: ir.Value, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """A block's compensated chain (or a vector of them) takes x (float64). Float64 terms by Knuth's TwoSum: the
    same exact error as a Neumaier step's without its comparisons (7 adds, no masks); an overflowing sum leaves a
    NaN error, the chain's sum then stays inf or NaN, and the finish takes such a sum alone
    (finish.compensated_value). Float32 terms (widened) by a plain add: a chain takes 32 of each block's terms
    (128 on GPUs) for as many blocks as it runs (carried_chains), whose adds err by at most (m - 1) x 2**-53 of the
    sum of |terms| for m terms, far inside float32's bound (docs/ordered.md)."""
    e = cx.e
    if isinstance(e.f, ir.F32Type):
        return e.add(total, x), cor
    total, err = fma_two_sum(cx, total, x) if cx.fma_pipes else e.two_sum(total, x)
    return total, e.add(cor, err)


def fma_two_sum(cx: Lowering, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Knuth's TwoSum of float64 vectors with three of its five subtractions as fma(y, -1, x) = x - y (one
    rounding: the same bits, infs and NaNs alike), on a CPU whose FMAs have pipes of their own beside two adders
    (Spec.fma_pipes, AMD Zen): the step's seven adds then take four add slots and three FMA slots instead of
    seven add slots (an AMD EPYC, Zen 3: a compensated float64 sum of 1e5 lanes 17.7 -> 14.5 us). The ordered
    chains' Fast2Sum gained nothing this way: its range's integer ops fill the FMA pipes already."""
    e = cx.e
    s = e.add(a, b)
    bb = fma_minus(cx, s, a)
    return s, e.add(e.op("arith.subf", a, fma_minus(cx, s, bb)), fma_minus(cx, b, bb))


def fma_minus(cx: Lowering, x: ir.Value, y: ir.Value) -> ir.Value:
    """x - y as fma(y, -1, x) (float64, a scalar or vector): one rounding, the subtraction's bits; the -1 comes
    through an empty inline asm made before the lane loop (cx.at_top), so that LLVM cannot fold it back."""
    e = cx.e

    def minus_one() -> ir.Value:
        m = create("llvm.inline_asm", [e.cf(-1.0, e.f64)], [e.f64], {
            "asm_string": ir.StringAttr.get(""), "constraints": ir.StringAttr.get("=x,0")}).result
        return create("vector.broadcast", [m], [x.type]).result if isinstance(x.type, ir.VectorType) else m

    return create("llvm.intr.fma", [y, cx.at_top(("minus one", str(x.type)), minus_one), x], [x.type]).result


def compensated_chains_step(cx: Lowering, chains: list[int] | None = None) -> None:
    """A full block's group into its compensated chains (host): per component, the pair_w copies' terms
    (cx.pending) as one vector into the chains' (sums, corrections) vectors (_chain_add). Vectors, not one
    value per chain: 32 chains as scalars were packed badly by LLVM's SLP vectorizer. `chains`: only those
    copies' terms, into vectors of that many chains (chain_passes)."""
    if cx.target != "host":  # (GPU chains took their terms one by one: reduce_full)
        return
    e, s = cx.e, cx.accs
    base = ordered_chains.nchunk_red_total(cx)
    for acc in cx.full:
        if acc.policy != "compensated" or acc.wide:
            continue
        for c in range(acc.n):
            terms = cx.pending.pop((acc.chain, c))
            terms = terms if chains is None else [terms[j] for j in chains]
            xv = create("vector.from_elements", terms, [ir.VectorType.get([len(terms)], terms[0].type)]).result
            k = base + acc.chain + 2 * c
            s[k], s[k + 1] = _chain_add(cx, s[k], s[k + 1], e.widen(xv, e.f64))


def carried_chains(cx: Lowering) -> bool:
    """Whether a host stage's compensated chains run on over the chunk's full blocks, into its Neumaier pair
    once at the chunk's end (chunk_loops.blocked_driver), instead of once a block: when no ordered or wide sum
    shares the blocks (ordered chains are checked and restarted every block; wide ones keep their own). The
    bound holds at any length: a float32 chain is a float64 sum of its terms, off by at most (m - 1) * 2**-53 of
    their sum of |terms| for m terms (2**26 terms, a chunk of 2**31 lanes: 2**-27, a 16th of float32's eps); a
    float64 chain is Knuth's TwoSum with its errors added plainly (Ogita, Rump and Oishi's Sum2 per chain: off
    by eps |sum| + (m eps)**2 of the sum of |terms|). The merge at a block's end cost as much as a third of a
    float32 block's time."""
    return cx.target == "host" and any(a.policy == "compensated" for a in cx.full) and \
        not cx.n_terms and not any(a.wide or a.policy == "ordered" for a in cx.full)


def merge_chains(cx: Lowering, acc: Acc, res: list[ir.Value], nchunk: int) -> None:
    """A full block's compensated chains of `acc` (in the block loop's results `res`, after the `nchunk`
    chunk-state values) into the chunk's Neumaier pair. Host: vectors of cx.pair_w sums and corrections, folded
    by halves to ORDERED_CHAINS first, chain j with chain j + half by Knuth's TwoSum (its error into the
    corrections, which add plainly: the same second-order term a Neumaier step leaves); then each of the eight
    by a Neumaier step, in chain order. GPU: ORDERED_CHAINS chains of one value each, in chain order."""
    e, n = cx.e, acc.n
    for c in range(n):
        if cx.target != "host":
            for w in range(ORDERED_CHAINS):
                ks = nchunk + acc.chain + w * 2 * n + c
                ns, nc = e.neumaier(res[acc.slot + c], res[acc.slot + n + c], res[ks])
                res[acc.slot + c], res[acc.slot + n + c] = ns, e.add(nc, res[ks + n])
            continue
        k = nchunk + acc.chain + 2 * c
        sums, cors = halve_chains(e, res[k], res[k + 1], ORDERED_CHAINS)
        for j in range(ir.VectorType(sums.type).shape[0]):
            s, cor = vector.extract(sums, [], [j]), vector.extract(cors, [], [j])
            ns, nc = e.neumaier(res[acc.slot + c], res[acc.slot + n + c], s)
            res[acc.slot + c], res[acc.slot + n + c] = ns, e.add(nc, cor)


def halve_chains(e, sums: ir.Value, cors: ir.Value | None, width: int) -> tuple[ir.Value, ir.Value | None]:
    """Vectors of chain sums (and their corrections) folded by halves down to `width` entries, chain j with chain
    j + half: compensated ones by Knuth's TwoSum, its error added into the corrections with theirs; plain ones
    (`cors` None) by adds. (merge_chains; sorted_groups' partial sums.)"""
    w = ir.VectorType(sums.type).shape[0]
    while w > width:
        w //= 2
        lo, hi = list(range(w)), list(range(w, 2 * w))
        if cors is None:
            sums = e.add(e.shuffle(sums, sums, lo), e.shuffle(sums, sums, hi))
            continue
        sums, err = e.two_sum(e.shuffle(sums, sums, lo), e.shuffle(sums, sums, hi))
        cors = e.add(e.add(e.shuffle(cors, cors, lo), e.shuffle(cors, cors, hi)), err)
    return sums, cors
