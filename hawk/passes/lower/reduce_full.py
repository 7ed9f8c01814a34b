"""Rules for reductions over every lane (hawk.reduce without kept axes), per policy: "fast" sums and max/min in
the chunk state (max/min with NaN/zero flags on the host: host_emit.fast_extremum), "compensated" Neumaier
pairs per chain, "ordered" terms into exact accumulators (hawk/passes/exact_emit.py), on the host through
checked two-float chains over full blocks (ordered_chains.py).
Wide payloads: wide.py. The hawk.reduce rule picks the reduction's form: a fold (folds.py), a kept-axis total
(reduce_kept.py) or this.
"""

from __future__ import annotations

from mlir import ir

from hawk.ir.access import reduce_mask, reduce_value
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
            x = e.widen(x, e.f64)
            if isinstance(cx.j, int):  # a straight-line copy: its own chain
                ks = ordered_chains.nchunk_red_total(cx) + acc.chain + cx.j * 2 * acc.n + c
                kc = ks + acc.n
            else:
                ks, kc = acc.slot + c, acc.slot + acc.n + c
            if isinstance(cx.j, int) and isinstance(e.f, ir.F32Type):
                # float32 terms in a float64 chain of at most 128 (it restarts each block): its plain adds err by
                # at most 127 x 2**-53 of the sum of |terms|, far inside float32's bound (docs/ordered.md)
                s[ks] = keep(e.add(s[ks], x), s[ks])
                continue
            if isinstance(cx.j, int):
                # a block's chain: Knuth's TwoSum, the same exact error as the Neumaier step's without its
                # comparisons (7 adds, no masks). An overflowing sum leaves a NaN error: the chain's sum then
                # stays inf or NaN, and the finish takes such a sum alone (finish.compensated_value)
                ns, err = e.two_sum(s[ks], x)
                nc = e.add(s[kc], err)
            else:
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
