"""Scatter-adds keyed by a Sorted[Index] plane: each run of equal keys is summed in registers (the lane loop's
iter_args: `Run`) and added into its slot once, when the key changes and at the chunk's end."""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import scf

from hawk.ir.access import scatter_keys, scatter_mode, sink_name, stored_value
from hawk.ir.dialect import is_hawk
from hawk.passes.analysis import key_source, payload_of
from hawk.passes.host_emit import _EQ, _SGE, _SLT
from hawk.passes.lower import planes, scatters, slot_ranges
from hawk.passes.lower.context import Lowering

_NE = 1  # arith.cmpi "ne"


@dataclass
class Run:
    """A scatter whose keys come sorted: each run of equal keys is added into its slot once."""

    sink: str
    policy: str
    n: int
    slot: int  # [key] [run sums (k)] [run corrections (k) if compensated] [lanes]
    wide: bool = False  # a wide payload: the run's sums (and corrections) are one vector each (k = 1)

    @property
    def k(self) -> int:
        return 1 if self.wide else self.n

    @property
    def regs(self) -> int:
        """The run's float registers: its sums, and a compensated run's corrections."""
        return self.k * (2 if self.policy == "compensated" else 1)

    @property
    def width(self) -> int:
        return 2 + self.regs  # (the key, the registers, the run's lane count: a bad key's lanes are reported)


def is_sorted_scatter(cx: Lowering, op) -> bool:
    """A += scatter keyed by a Sorted[Index] plane: runs of equal keys are summed in registers (not into an
    ordered sink: each of its terms goes into the slot's exact accumulator as it is)."""
    if not is_hawk(op, "scatter") or scatter_mode(op) != "add" or len(scatter_keys(op)) != 1:
        return False
    if cx.lay.sink_policy.get(sink_name(op)) == "ordered":
        return False
    src = key_source(scatter_keys(op)[0])
    spec = cx.lay.sig.get(src) if src else None
    return spec is not None and spec.kind == "index" and spec.sorted


def sorted_step(cx: Lowering, run: Run, op) -> None:
    e = cx.e
    s = cx.accs
    key, v = scatter_keys(op)[0], stored_value(op)
    state = s[run.slot:run.slot + run.width]
    same = e.cmpi(_EQ, state[0], key)
    differs = e.op("arith.xori", same, e.c(1, e.i1))
    branch = scf.IfOp(differs, [], has_else=False)
    with ir.InsertionPoint(branch.then_block):
        flush_run(cx, run, state)
        scf.YieldOp([])
    xs = [e.flat(v)] if run.wide else e.elems(v, payload_of(v.type))
    s[run.slot] = key
    for c in range(run.k):
        if run.policy == "compensated":
            x = e.widen(xs[c], e.f64)
            ns, nc = e.neumaier(state[1 + c], state[1 + run.k + c], x)
            s[run.slot + 1 + c] = e.select(same, ns, x)
            s[run.slot + 1 + run.k + c] = e.select(same, nc, e.splat(0.0, x.type) if run.wide else e.cf(0.0, e.f64))
        else:
            s[run.slot + 1 + c] = e.select(same, e.add(state[1 + c], xs[c]), xs[c])
    s[run.slot + run.width - 1] = e.select(same, e.op("arith.addi", state[-1], e.c(1, e.i64)), e.c(1, e.i64))


def flush_run(cx: Lowering, run: Run, state: list[ir.Value]) -> None:
    """Add a finished run of equal keys into its slot (nothing before the first run, or for key -1). A key
    outside the sink is reported, never written: the binder checks the keys before a run, but a bound launch
    reads its Index plane again at every launch, and the caller may have changed it since."""
    e = cx.e
    sink = run.sink
    extent = cx.lay.sig.get(sink).axes[0].extent
    n = e.c(extent)
    started = e.op("arith.andi", e.cmpi(_SGE, state[0], e.c(0, e.i64)),
                   e.cmpi(_SLT, state[0], e.c(extent, e.i64)))
    scatters.report_bad_key(cx, sink, state[0], e.op("arith.andi", e.op("arith.xori", started, e.c(1, e.i1)),
                                             e.cmpi(_NE, state[0], e.c(-1, e.i64))), lanes=state[-1])
    if slot_ranges.active(cx):  # a slot-range stage: only this chunk's slots (slot_ranges.py)
        started = e.op("arith.andi", started, slot_ranges.mine(cx, extent, e.to_index(state[0])))
    branch = scf.IfOp(started, [], has_else=False)
    with ir.InsertionPoint(branch.then_block):
        idx = e.to_index(state[0])
        comp = run.policy == "compensated"
        if run.wide:  # the run's sums in a loop over components (corrections parked in a second buffer)
            carry = cx.temp(run.n, e.f64, tag="carry") if comp else None
            if comp:
                e.vstore(state[2], carry, e.c(0))
            parts = ((c, x, e.load(carry, c) if comp else None) for c, x in planes.components(cx, state[1], (run.n,)))
        else:
            parts = ((e.c(c), state[1 + c], state[1 + run.n + c] if comp else None) for c in range(run.n))
        for c, x, extra in parts:
            at = e.add_i(e.mul_i(c, n), idx) if run.n > 1 else idx
            if comp:
                scatters.comp_add(cx, sink, at, x, carry=extra)
            else:
                cx.apply("add-into", run.policy, sink, at, x, "sink")
        scf.YieldOp([])
