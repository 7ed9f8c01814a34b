"""The chunk state a lane loop carries in its iter_args: every-lane reductions' partials (`Acc`: values,
corrections, counts, max/min flags), the chains of blocked sums, and the registers of sorted runs; and where
each lands in #scratch. Shared by the host and the GPU drivers (a GPU thread or workgroup keeps a chunk's state).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from hawk.abi.layout import COMPENSATED_CHAINS, ORDERED_CHAINS, Reduction, chunk_slots
from hawk.ir.access import sink_name, stored_value
from hawk.ir.build import create
from hawk.passes.analysis import payload_of
from hawk.passes.host_emit import size
from hawk.passes.lower import ordered_chains, scan, sorted_runs, wide
from hawk.passes.lower.context import Lowering
from hawk.passes.lower.finish import finish_accs
from hawk.passes.lower.sorted_runs import Run


@dataclass
class Acc:
    """Where one every-lane reduction keeps its running state among the loop's iter_args."""

    r: Reduction
    policy: str  # fast | compensated | ordered | max | min
    n: int  # components
    chunk: int  # where its chunk partials start in #scratch: [values (n)] [corrections (n) if compensated] [count]
    slot: int  # its first chunk-state slot among the iter_args (the same layout; a wide one: only its count)
    wide: bool = False  # a wide payload: its chunk and chain state live in `mem` (hawk/passes/lower/wide.py)
    chain: int = -1  # compensated: first chain-state slot (state.plan_state: vectors on the host, values on GPUs)
    exact_at: int = 0  # ordered: where its accumulators (one per component) start in a chunk's #exact words
    pairs: bool = False  # ordered, host: full blocks keep two-float chains (ordered_chain_step), exact or redone
    wide_pairs: bool = False  # ordered, host, a wide payload: the chunk's (high, low) vectors in `mem` (wide.py)
    term_at: int = 0  # pairs: where its components' terms start in the block's term buffer (x ORDERED_BLOCK)
    mem: ir.Value | None = None  # wide: [chunk state (values, corrections)] [chain state (CHAINS x ...)]
    chain_at: int = 0  # wide: where the chain state starts in `mem`
    flags: int = -1  # max/min, host: its sums of NaN and zero lanes (n, float64) among the iter_args


def plan_state(cx: Lowering, body: ir.Block) -> tuple[list[ir.Value], list[ir.Value]]:
    """Initial chunk state and chain state, and the slots each reduction and sorted scatter uses."""
    e = cx.e
    chunk, chain = [], []
    cx.full: list[Acc] = []
    cx.scratch_at: list[int] = []  # where each chunk-state slot's value (or vector's first entry) is stored
    cx.n_terms = 0  # components of ordered sums kept in pairs: their terms' block buffer
    # where each reduction's partials sit in #scratch and its accumulators in #exact: the finish's reading of the
    # layout (its own pass builds the finish from the layout alone), so the lanes write where it reads
    accs = finish_accs(cx)
    for acc in accs:
        acc.wide = acc.policy != "ordered" and cx.wide_sums and cx.is_wide(acc.r.payload)
    # compensated chains per block: COMPENSATED_CHAINS, or ORDERED_CHAINS on GPUs and beside a wide payload
    cx.comp_chains = ORDERED_CHAINS if cx.target != "host" or any(a.wide for a in accs) else COMPENSATED_CHAINS
    for acc in accs:
        r, n, pol, off = acc.r, acc.n, acc.policy, acc.chunk
        acc.slot = len(chunk)
        if acc.wide:
            used = wide.plan_wide(cx, acc)  # its state in memory; only its count below is an iter_arg
        elif pol == "ordered":  # exact accumulators in #exact; only a mean's count is an iter_arg
            used = 0
            if cx.exact_pairs and not cx.is_wide(r.payload):
                acc.pairs, acc.chain, acc.term_at = True, len(chain), cx.n_terms
                lanes = ir.VectorType.get([ORDERED_CHAINS], e.f)  # the chains side by side
                chain += [e.splat(0.0, lanes)] * (2 * n)  # (high, low) per component
                cx.n_terms += n
            elif cx.exact_pairs and n <= wide.PAIR_PAYLOAD:
                wide.plan_ordered_wide(cx, acc)
        else:
            t = e.f64  # chunk partials are float64 (ordered chains stay in the kernel's type)
            if cx.exact_pairs and pol in ("max", "min") and not acc.wide:
                t = e.f  # (widened when stored: a max is one of its operands, so exact; plan_extremum_flags)
            chunk += [e.identity(r.kind, t)] * n
            if pol == "compensated":
                chunk += [e.cf(0.0, t)] * n
                acc.chain = len(chain)  # merged at each block's or the chunk's end (reduce_full.merge_chains)
                if cx.target == "host":  # per component, the chains' (sums, corrections) vectors
                    chain += [e.splat(0.0, ir.VectorType.get([cx.comp_chains], t))] * (2 * n)
                else:  # per chain, sums (n) and corrections (n): spirv takes no vector loop values
                    chain += [e.cf(0.0, t)] * (ORDERED_CHAINS * 2 * n)
            used = len(chunk) - acc.slot
            cx.scratch_at += range(off, off + used)
        if r.kind == "mean":
            chunk.append(e.c(0, e.i64))  # lanes counted exactly as an integer
            cx.scratch_at.append(off + used)
            used += 1
        if used != chunk_slots(r):
            raise RuntimeError(f"internal error: kernel '{cx.lay.name}': the lanes write {used} chunk partials for "
                               f"'{r.cell}', the layout gives it {chunk_slots(r)}")
        cx.full.append(acc)
    cx.term_range = None
    if cx.n_terms:  # per component kept in pairs and per chain, this block's largest |term| and smallest |term| - 1
        cx.term_range = len(chain)  # (as bits; ordered_chains.range_step), tested once at the block's end
        bits = ir.IntegerType.get_signless(e.f.width)
        flags = ir.VectorType.get([ORDERED_CHAINS], bits)
        for v in ordered_chains.RANGE_INIT * cx.n_terms:
            init = ir.DenseElementsAttr.get_splat(flags, ir.IntegerAttr.get(bits, v))
            chain.append(create("arith.constant", [], [flags], {"value": init}).result)
    cx.nchunk_red = len(chunk)
    cx.runs: list[Run] = []
    for op in body.operations:
        if sorted_runs.is_sorted_scatter(cx, op):
            pol = cx.lay.sink_policy[sink_name(op)]
            shape = payload_of(stored_value(op).type)
            n = size(shape)
            sink = sink_name(op)
            # copies of the body keep the mark, so every copy's scatter finds its run (ops are not compared:
            # a moved op is erased once lowered, a cloned one is another op)
            op.attributes["hawk.run"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(cx.runs))
            run = Run(sink, pol, n, len(chunk), cx.wide_sums and cx.is_wide(shape))
            cx.runs.append(run)
            t = e.f64 if pol == "compensated" else e.f

            def init(v: float, t, run=run):
                return e.splat(v, ir.VectorType.get([run.n], t)) if run.wide else e.cf(v, t)

            k = run.k
            chunk += [e.c(-1, e.i64)] + [init(-0.0, t)] * k + ([init(0.0, t)] * k if pol == "compensated" else []) \
                + [e.c(0, e.i64)]
    cx.n_flags = plan_extremum_flags(cx, chunk)
    scan.plan_scans(cx, body, chunk)  # running values of scans (hawk/passes/lower/scan.py), last
    cx.recompute = False  # full blocks rerun the body instead of keeping a term buffer (chunk_loops.lanes_body)
    return chunk, chain


def plan_extremum_flags(cx: Lowering, chunk: list[ir.Value]) -> int:
    """State that lets a max/min over every lane run as a plain packed max (host_emit.fast_extremum): per
    component, a flag that starts at -0.0 and takes the lanes that are NaN or zero: max adds them (and -0.0 for
    every other lane), min subtracts them (and +0.0). In any order of the adds it ends NaN when a NaN was met
    (x86 keeps a NaN operand's bits), else +0.0 exactly when a zero of the winning sign was met (+0.0 for max,
    -0.0 for min). All in the kernel's type. Host only: GPU lowerings keep arith.maximumf in float64."""
    if not cx.exact_pairs:
        return 0
    e, before = cx.e, len(chunk)
    for acc in cx.full:
        if acc.policy in ("max", "min") and not acc.wide:
            acc.flags = len(chunk)
            chunk += [e.cf(-0.0)] * acc.n
    return len(chunk) - before
