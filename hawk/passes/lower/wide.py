"""Sums over every lane of wide payloads (more than host_emit.WIDE_PAYLOAD components) on the host.

A narrow payload keeps one register per component (and per chain) among the lane loop's iter_args and is updated
by straight-line code per component. For a wide one that is n registers per chain, and LLVM (SLP vectorizer,
register allocation) and MLIR's canonicalizer grow superlinearly with n. Here instead the running state of a
wide sum lives in a buffer of the lanes function (`Acc.mem`: [chunk state] [chain state]) and every step is a
loop over components. The steps and their order per component are exactly the narrow ones, so results are the
same bits. Only a mean's lane count stays an iter_arg. (Ordered sums keep exact accumulators in memory whatever
the payload: hawk/passes/exact_emit.py.)

The context gives the emitter, the buffers, the chain index `cx.j` and `cx.full`; `planes.components` parks a
lane's value for the loops."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.abi.layout import ORDERED_CHAINS
from hawk.passes import exact_emit
from hawk.passes.lower import ordered_chains, planes, scatters
from hawk.passes.lower.context import Lowering

PAIR_PAYLOAD = 64  # the widest payload an ordered sum keeps as (high, low) vectors (wider: a deposit per term)
_UNE = 13  # arith.cmpf "une"


def plan_wide(cx: Lowering, acc) -> int:
    """Give a wide sum its state buffer and start its chunk state; the partials it writes to #scratch."""
    e = cx.e
    n, W = acc.n, ORDERED_CHAINS
    comp = acc.policy == "compensated"
    chunk_len = n * (2 if comp else 1)
    chain_len = W * 2 * n if comp else 0
    acc.mem = cx.local_buffer(chunk_len + chain_len, e.f64)  # chunk partials are float64
    acc.chain_at = chunk_len
    identity = {"sum": 0.0, "mean": 0.0, "max": float("-inf"), "min": float("inf")}[acc.r.kind]
    if chunk_len:
        fill(cx, acc.mem, 0, n, identity)
        if comp:
            fill(cx, acc.mem, n, n, 0.0)
    return chunk_len


def fill(cx: Lowering, buf: ir.Value, start: int, count: int, value: float) -> None:
    e = cx.e
    t = ir.MemRefType(buf.type).element_type
    loop = scf.ForOp(e.c(start), e.c(start + count), e.c(1), [])
    with ir.InsertionPoint(loop.body):
        e.store(e.cf(value, t), buf, loop.induction_variable)
        scf.YieldOp([])


def wide_block_start(cx: Lowering) -> None:
    """Every block's compensated chains start afresh (0.0), as narrow ones do."""
    for acc in cx.full:
        if acc.wide and acc.policy == "compensated":
            fill(cx, acc.mem, acc.chain_at, acc.n * ORDERED_CHAINS * 2, 0.0)


def reduce_wide(cx: Lowering, acc, v: ir.Value, mask: ir.Value | None) -> None:
    """One lane's terms into a wide sum's state, a loop over components: the narrow reduce_full's step for
    each component (chain j of a compensated sum in a block; the chunk state otherwise)."""
    e = cx.e
    n, mem = acc.n, acc.mem
    j = cx.j

    def keep(new, old):  # a masked lane adds nothing
        return new if mask is None else e.select(mask, new, old)

    for c, x in planes.components(cx, v, acc.r.payload):
        if acc.policy == "compensated":
            x = e.widen(x, e.f64)
            if isinstance(j, int):  # a straight-line copy of the body: its own chain
                ks = e.add_i(e.c(acc.chain_at + j * 2 * n), c)
            else:
                ks = c
            kc = e.add_i(ks, e.c(n))
            s, cc = e.load(mem, ks), e.load(mem, kc)
            ns, nc = e.neumaier(s, cc, x)
            e.store(keep(ns, s), mem, ks)
            e.store(keep(nc, cc), mem, kc)
        elif acc.policy == "fast":
            x = e.widen(x, e.f64)
            if mask is not None:
                x = e.select(mask, x, e.cf(0.0, e.f64))
            e.store(e.fast_add(e.load(mem, c), x), mem, c)
        else:
            x = e.widen(x, e.f64)
            old = e.load(mem, c)
            e.store(keep(e.extremum(acc.policy, old, x), old), mem, c)


def _each(cx: Lowering, n: int):
    """A loop over n components: yields its index once, inside the loop."""
    e = cx.e
    loop = scf.ForOp(e.c(0), e.c(n), e.c(1), [])
    with ir.InsertionPoint(loop.body):
        yield loop.induction_variable
        scf.YieldOp([])


def wide_merge_chains(cx: Lowering, acc) -> None:
    """A block's compensated chains into the chunk state, chain by chain (Neumaier), per component."""
    e = cx.e
    n, mem = acc.n, acc.mem
    for c in _each(cx, n):
        s, cc = e.load(mem, c), e.load(mem, e.add_i(c, e.c(n)))
        for w in range(ORDERED_CHAINS):
            ks = e.add_i(e.c(acc.chain_at + w * 2 * n), c)
            s, nc = e.neumaier(s, cc, e.load(mem, ks))
            cc = e.add(nc, e.load(mem, e.add_i(ks, e.c(n))))
        e.store(s, mem, c)
        e.store(cc, mem, e.add_i(c, e.c(n)))


def wide_chunk_partials(cx: Lowering, scratch: ir.Value, base: ir.Value) -> None:
    """The chunk state of wide sums into #scratch, where the finish reads narrow ones' partials."""
    e = cx.e
    for acc in cx.full:
        if not acc.wide or not acc.chain_at:
            continue
        for c in _each(cx, acc.chain_at):
            e.store(e.load(acc.mem, c), scratch, e.add_i(base, e.c(acc.chunk), c))


def finish_wide(cx: Lowering, acc, width: ir.Value) -> None:
    """The finish of a wide sum, max or min over every lane: for each component (a loop), its chunk partials
    combined in chunk order exactly as finish.py does for a narrow one (the same steps, one component at a
    time rather than n at once), then divided by the count for a mean and stored into the cell."""
    e = cx.e
    r, n = acc.r, acc.n
    scratch = cx.bufs[("#scratch", "scratch")]
    comp, count = acc.policy == "compensated", r.kind == "mean"
    stored = n * (2 if comp else 1)
    outer = scf.ForOp(e.c(0), e.c(n), e.c(1), [])
    with ir.InsertionPoint(outer.body):
        c = outer.induction_variable
        inits = [e.identity(r.kind, e.f64)] + [e.cf(0.0, e.f64)] * (comp + count)
        loop = scf.ForOp(e.c(0), cx.chunk, e.c(1), inits)
        with ir.InsertionPoint(loop.body):
            base = e.add_i(e.mul_i(loop.induction_variable, width), e.c(acc.chunk))
            cur = list(loop.inner_iter_args)
            part = e.load(scratch, e.add_i(base, c))
            if comp:
                ns, nc = e.neumaier(cur[0], cur[1], part)
                out = [ns, e.add(nc, e.load(scratch, e.add_i(base, e.c(n), c)))]
            elif acc.policy == "fast":
                out = [e.add(cur[0], part)]
            else:
                out = [e.extremum(acc.policy, cur[0], part)]
            if count:
                out.append(e.add(cur[-1], e.load(scratch, e.add_i(base, e.c(stored)))))
            scf.YieldOp(out)
        res = list(loop.results)
        val = e.narrow(e.add(res[0], res[1]) if comp else res[0], e.f)
        if count:
            val = e.op("arith.divf", val, e.narrow(res[-1], e.f))
        e.store(val, cx.bufs[(r.cell, "cell")], c)
        scf.YieldOp([])


# ---- ordered sums of wide payloads (the host) ----------------------------------------------------------------

def plan_ordered_wide(cx: Lowering, acc) -> None:
    """An ordered wide sum's chunk state: (high, low) float64 vectors of its n components in `mem`, zero."""
    acc.wide_pairs = True
    acc.mem = cx.local_buffer(2 * acc.n, cx.e.f64)
    fill(cx, acc.mem, 0, 2 * acc.n, 0.0)


def reduce_ordered_wide(cx: Lowering, acc, v: ir.Value, mask: ir.Value | None) -> None:
    """One lane's components into the chunk's (high, low) vectors by two vector TwoSums (every component side by
    side); a component at or above 2**(emax - 64) of the kernel's type (an inf, a NaN) skips the pair and goes
    to the chunk's exact accumulator for it as it is, and so does a non-zero second error, in one rare branch:
    the pairs plus what they spilled stay the exact sum of the terms (as sorted_pairs' runs)."""
    e = cx.e
    n = acc.n
    vec = ir.VectorType.get([n], e.f64)
    x = e.widen(e.flat(v), e.f64)
    zero = e.splat(0.0, vec)
    if mask is not None:
        x = e.select(mask, x, zero)
    pairs = (e.vload(acc.mem, e.c(0), n, e.f64), e.vload(acc.mem, e.c(n), n, e.f64))
    hi, lo, rare, late = scatters.pair_step(cx, *pairs, x)
    e.vstore(hi, acc.mem, e.c(0))
    e.vstore(lo, acc.mem, e.c(n))
    anyone = e.any_of(rare)
    branch = scf.IfOp(anyone, [], has_else=False)
    with ir.InsertionPoint(branch.then_block):
        parked = cx.temp(n, e.f64, tag="wide-late")
        e.vstore(e.select(rare, late, zero), parked, e.c(0))  # (a rare component's late value is never zero)
        exact = cx.bufs[("#exact", "exact")]
        for c in _each(cx, n):
            y = e.load(parked, c)
            one = scf.IfOp(e.cmpf(_UNE, y, e.cf(0.0, e.f64)), [], has_else=False)
            with ir.InsertionPoint(one.then_block):
                exact_emit.deposit_as(e, exact, ordered_chains.exact_slot(cx, acc, c), y, e.f)
                scf.YieldOp([])
        scf.YieldOp([])


def deposit_ordered_wide(cx: Lowering) -> None:
    """At the chunk's end: every ordered wide sum's (high, low) values into the chunk's exact accumulators."""
    e = cx.e
    exact = cx.bufs.get(("#exact", "exact"))
    for acc in cx.full:
        if not acc.wide_pairs:
            continue
        for c in _each(cx, acc.n):
            at = ordered_chains.exact_slot(cx, acc, c)
            for half in (0, acc.n):
                exact_emit.deposit_as(e, exact, at, e.load(acc.mem, e.add_i(c, e.c(half))), e.f)
