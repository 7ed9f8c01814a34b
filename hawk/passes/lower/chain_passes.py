"""A full block's compensated float64 chains in passes, a few chains each (host, a CPU with 16 vector registers).

The host's compensated sums over every lane keep COMPENSATED_CHAINS (32) float64 chains per component, side by
side in vectors: a group's 32 terms take one TwoSum into the chains' sums and corrections
(reduce_full.compensated_chains_step). On AVX-512 those are four and four 512-bit registers. On a CPU with
sixteen 256-bit registers (AVX2) they are eight and eight, every register but the TwoSums' temporaries: the loop
spilled chains to the stack every group (an AMD EPYC, Zen 3: a compensated float64 sum of 1e5 lanes took
21.5 us where a plain one took 5.8).

Here a full block runs its groups PASSES times: pass h takes copies h*w .. h*w + w - 1 of the body in every group (w
= 32 / PASSES lanes), into chains h*w .. h*w + w - 1 (those entries of the chain vectors). Chain j still takes lanes
j, j + 32, j + 64, ... of the block in that order, so every chain, and every bit of the result, is what one pass
gives; the block's lanes are read PASSES times, after the first from the core's cache (a block is 8 KiB). Two passes
(16 chains, four and four registers) still spilled; four do not. A launch whose per-lane inputs pass CACHED_BYTES
streams from memory, where the one-pass loop kept the reads going better: it runs that. Only stages whose every
reduction is such a sum (or mean) and whose body scatters nothing take it: then nothing else in the loop depends on
the order of the lanes (a mean's lane count is an integer).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.abi.layout import COMPENSATED_CHAINS
from hawk.passes.lower import ordered_chains, planes, reduce_full
from hawk.passes.lower.context import Lowering, clone_body, rewrite_ops

PASSES = 4
CACHED_BYTES = 16 << 20  # launches whose per-lane inputs take at most this many bytes run the passes; larger ones
# stream from memory, where one pass kept the reads going better (an AMD EPYC, Zen 3, 32 MiB of L3, two threads:
# 1e7 float64 lanes, 80 MB, one pass 2.6 ms, passes 3.1-3.4 with each pass hinting its own lines; 1e6 lanes,
# 8 MB, one pass 237 us, passes 147)
_ULE = 7  # arith.cmpi


def wanted(cx: Lowering, carry: bool) -> bool:
    """Whether this stage's full blocks run their compensated chains in passes: host chains carried over the
    chunk (reduce_full.carried_chains), float64 terms (TwoSums: a float32 chain is one add, whose 32 chains fit
    in eight registers, and fewer would wait on the add's latency), a CPU without AVX-512F (cx.sae false: 16
    vector registers on x86-64), COMPENSATED_CHAINS chains, every reduction a compensated sum or mean, no sink,
    fold, scan or sorted run."""
    return (carry and isinstance(cx.e.f, ir.F64Type) and not cx.sae and cx.pair_w == COMPENSATED_CHAINS
            and not cx.lay.sinks and not cx.folds and not cx.n_scans and not cx.runs
            and all(a.policy == "compensated" and not a.wide for a in cx.full))


def cached(cx: Lowering) -> ir.Value:
    """Whether this launch's per-lane inputs (the buffers' sizes) fit in CACHED_BYTES (an i1, at run time)."""
    total = cx.buffer_bytes(("in", "index"))
    return cx.e.cmpi(_ULE, total if total is not None else cx.e.c(0), cx.e.c(CACHED_BYTES))


def either(cx: Lowering, cached: ir.Value, where: ir.Block, body: ir.Block, start: ir.Value, inits: list[ir.Value],
           nchunk: int) -> ir.Block:
    """In `where` (a full block's branch, ended here): the passes (`block`) when `cached` holds, else the block
    whose insertion point this returns, where the caller builds the one-pass loop and yields its state."""
    with ir.InsertionPoint(where):
        which = scf.IfOp(cached, [v.type for v in inits], has_else=True)
        with ir.InsertionPoint(which.then_block):
            scf.YieldOp(block(cx, body, start, inits, nchunk))
        scf.YieldOp(list(which.results))
    return which.else_block


def block(cx: Lowering, body: ir.Block, start: ir.Value, inits: list[ir.Value], nchunk: int) -> list[ir.Value]:
    """A full block from `start` (its groups: cx.block_groups) in PASSES passes over the groups, pass h the copies
    and chains [h * w, (h + 1) * w) for w = cx.pair_w // PASSES, from the state `inits` (the chunk's, then the
    chains' vectors): the state after the block."""
    e = cx.e
    W = cx.pair_w
    w = W // PASSES
    base = ordered_chains.nchunk_red_total(cx)
    keys = [base + acc.chain + 2 * c + t for acc in cx.full for c in range(acc.n) for t in (0, 1)]
    state = list(inits)
    for h in range(PASSES):
        own = list(range(h * w, (h + 1) * w))
        mine = [e.shuffle(v, v, own) if k in keys else v for k, v in enumerate(state)]
        loop = scf.ForOp(e.c(0), cx.block_groups, e.c(1), mine)
        with ir.InsertionPoint(loop.body):
            anchor = scf.YieldOp(list(loop.inner_iter_args))
        cx.accs, cx.pending = list(loop.inner_iter_args), {}
        with ir.InsertionPoint(anchor), body.owner.location:
            first = e.add_i(start, e.mul_i(loop.induction_variable, e.c(W)))  # the group's first lane
            # each pass hints its own lanes one block on (a line of float64s a group): hinting the whole group's
            # lines in the first pass alone left the memory idle through the others (1e7 lanes 4.1 -> 3.2 ms)
            planes.prefetch_ahead(cx, body, e.add_i(first, e.c(h * w)), w, raw=True)
        for jj in own:
            with ir.InsertionPoint(anchor), body.owner.location:
                cx.lane = e.add_i(first, e.c(jj))
            cx.j = jj
            rewrite_ops(cx, clone_body(cx, body, anchor))
        with ir.InsertionPoint(anchor), body.owner.location:
            reduce_full.compensated_chains_step(cx, own)
        anchor.operation.erase()
        with ir.InsertionPoint(loop.body):
            scf.YieldOp(cx.accs)
        res = list(loop.results)
        for k in keys:  # the pass's chains back into their places in the chain vectors
            res[k] = e.shuffle(state[k], res[k], [W + own.index(i) if i in own else i for i in range(W)])
        state = res
    cx.j = None
    return state
