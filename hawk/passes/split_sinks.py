"""The last step of split-stages: a stage that scatters into a sink too large for private copies, and that does
anything a slot-range stage cannot (reduce, scan, store a cell or store by key, read an output plane), becomes
two stages: the stage without those scatters, then those scatters alone (or the other way round, below).

Why (issue 10, "no single-thread cliffs"): a sink of more than Spec.copy_slots slots (hawk.abi.layout.PAIR_SLOTS
by default) that is not an ordered sink only added into gets no copy per chunk, so chunks would write its slots
together: such a stage ran as one chunk on the host and as one GPU thread. A stage whose only effects are
scatters (and per-lane outputs it never reads) runs in slot ranges instead (hawk.abi.layout.wants_slot_ranges):
every chunk runs every lane and applies the slots of its own range. Split off, the large sinks' scatters make
such a stage, and the rest runs in chunks as any stage does. The second stage computes again the lane values
its scatters need (it reads their inputs a second time): the price of using every thread.

Nothing moves across another effect on the same sink: every scatter into a split-off sink moves, in lane order,
to the scatters' stage, which runs after the rest. Bad keys are reported per stage: a run refused in the second
stage names the first bad key of the split-off sinks (the first stage's sinks, checked first, would be named
before it). The scatters' stage keeps every value its scatters use. A forward or reverse scan's values (from the
offsets an earlier stage left) and block reductions are made again there as one chunk makes them (every chunk
runs every scan block and tile; a keyed scan's running values, in a buffer the chunks share in the chunked form,
go to a buffer of each chunk's own, at most hawk.frontend.scan_keyed.MAX_KEYS values). When they
read a plane the rest writes (a lane's own value of an output, read before the lane assigns it: the only read of
a written plane the language allows), the scatters' stage runs first instead, so it reads the values the whole
stage would have read.
"""

from __future__ import annotations

import math

from mlir import ir

from hawk.abi.layout import PAIR_SLOTS, slot_range_form, sum_policy
from hawk.ir.access import kernel_func, policy, scatter_mode, sink_name, stored_value
from hawk.ir.dialect import is_hawk
from hawk.ir.types import arg_names, drop_unused_args
from hawk.passes.analysis import planes_read, planes_stored


def _walk(func_op) -> list:
    found = []

    def visit(op):
        found.append(op)
        return ir.WalkResult.ADVANCE

    func_op.operation.walk(visit)
    return found


def _copy_limit(func_op) -> int:
    """The largest sink with private copies for this specialisation (hawk.passes.plan.copy_slots_of)."""
    from hawk.passes.plan import copy_slots_of

    try:
        return copy_slots_of(func_op)
    except (ValueError, KeyError):
        return PAIR_SLOTS


def lone_sinks(func_op) -> set[str]:
    """Sinks a stage writes that would leave it one chunk: more slots than get private copies, and not an
    ordered sink only added into (whose slots every chunk adds into through shared exact accumulators)."""
    from hawk.passes.analysis import payload_of
    from hawk.passes.plan import signature_of

    if "hawk.signature" not in func_op.operation.attributes:
        return set()
    sig, limit = signature_of(func_op), _copy_limit(func_op)
    slots: dict[str, int] = {}
    ordered_adds: dict[str, bool] = {}
    for op in _walk(func_op):
        if not is_hawk(op, "scatter"):
            continue
        sink = sink_name(op)
        spec = sig.get(sink)
        extent = math.prod(a.extent for a in spec.axes) if spec is not None else 0
        slots[sink] = max(slots.get(sink, 0), extent * math.prod(payload_of(stored_value(op).type)))
        adds = scatter_mode(op) == "add" and sum_policy(policy(op), True) == "ordered"
        ordered_adds[sink] = ordered_adds.get(sink, True) and adds
    return {s for s, n in slots.items() if n > limit and not ordered_adds[s]}


def _in_ranges_already(func_op) -> bool:
    """Whether the stage fits the slot-range form as it is (hawk.abi.layout.slot_range_form, read off the
    stage's own Layout, of the outputs and sinks it writes: the rule is stated once, there)."""
    from hawk.passes.analysis import reads_written_outputs, written_names
    from hawk.passes.plan import plan

    lay = plan(func_op, owns=written_names(func_op))
    return slot_range_form(lay, reads_written_outputs(func_op, lay))


def _effect(op) -> bool:
    """A side effect (split-stages' own list, hawk/passes/stages.py, and a scan's block totals)."""
    from hawk.passes.stages import _EFFECTS

    return is_hawk(op) and op.operation.name[5:] in (*_EFFECTS, "scan_totals")


def _prune(func_op) -> None:
    """Erase top-level ops with no effect inside them whose results nothing uses (last to first)."""
    block = func_op.regions[0].blocks[0]
    for op in reversed([o for o in block.operations if o.operation.name != "func.return"]):
        if any(list(r.uses) for r in op.results):
            continue
        if any(_effect(o) for o in _walk(op)):
            continue
        op.operation.erase()


def _part(text: str, keep) -> tuple[ir.Module, object]:
    """The stage's module with every effect op for which keep(op) is false erased, then pruned."""
    module = ir.Module.parse(text)
    func_op = kernel_func(module)
    for op in reversed(_walk(func_op)):
        if _effect(op) and not keep(op):
            op.operation.erase()
    _prune(func_op)
    drop_unused_args(func_op)
    return module, func_op


def split_lone_sinks(text: str) -> list[tuple[str, set[str], bool]] | None:
    """For a stage that needs it, its two parts in launch order, each as (module text, the names of its func's
    arguments, whether it is the rest of the stage, which writes the stage's cells); else None. The large sinks'
    scatters run second, or first when they read a plane the rest writes (each lane its own value, read before
    the lane writes it: `.at` reads of written planes are refused), so that they read what the stage read."""
    module = ir.Module.parse(text)  # (held: the func lives as long as its module)
    func_op = kernel_func(module)
    lone = lone_sinks(func_op)
    if not lone or _in_ranges_already(func_op):
        return None

    def moves(op) -> bool:
        return is_hawk(op, "scatter") and sink_name(op) in lone

    second, func2 = _part(text, moves)
    if not _in_ranges_already(func2):  # its scatters need a reduction's or a scan's value: the stage stays whole
        return None
    first, func1 = _part(text, lambda op: not moves(op))
    rest, sinks = (str(first), set(arg_names(func1)), True), (str(second), set(arg_names(func2)), False)
    return [sinks, rest] if planes_read(func2) & planes_stored(func1) else [rest, sinks]


def rename(text: str, name: str) -> str:
    """A stage's module with its kernel func called `name`."""
    module = ir.Module.parse(text)
    kernel_func(module).attributes["sym_name"] = ir.StringAttr.get(name)
    return str(module)
