"""chunk-form: the loop shape a chunk of lanes runs in, decided once and written on the kernel func as
`hawk.chunk_form`, where the chunk-loop lowering (host chunks, GPU threads of the "chunks" form) reads it.

  blocked  every-lane sums that keep chains (compensated; ordered on the host: two-float chains): blocks of
           ORDERED_BLOCK lanes, groups of lanes as straight-line copies feeding one chain each
  nested   every kept reduction keeps the same leading axes (sum "auto", max, min; "ordered" and "compensated"
           on the host, as two-float TwoSum pairs and Neumaier chains): a loop per kept slot over its
           contiguous lanes, the slot's totals in registers; on the host also a middle block of fixed kept
           axes (sum "auto", max, min; nest_wraps): a loop per run of lanes sharing a slot, into the chunk's copy
  column   every kept reduction keeps the same trailing axes (sum "auto", max, min; "ordered" on the host;
           "compensated" with a copy per chunk):
           rows of the reduced axes, the slot affine in the lane (the update loop vectorizes)
  rows     a grid without kept reductions: rows of the first axis, coordinates from the loops (no div/mod),
           neighbour reads without clamps in the interior
  scan     scans' running values: the flat loop cut in SCAN_BLOCK blocks
  flat     one loop over the chunk's lanes (within it: sorted ordered runs, two-pass scatters)

The decision depends only on the stage's Layout, its body and two target facts (whether ordered sums keep
two-float chains, whether wide payloads take component loops), so it is made here, not inside the lowering.
A form written by hand must fit the stage: the picked one, or "flat" (which every stage not needing "blocked"
can take: the other shapes are faster forms of it); the lowering refuses any other in one line.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir

from hawk.abi.layout import Layout, sum_policy
from hawk.passes.host_emit import WIDE_PAYLOAD, size

FORM = "hawk.chunk_form"
FORMS = ("flat", "blocked", "nested", "column", "rows", "scan")


def wide_test(wide: bool) -> Callable[[tuple], bool]:
    """Whether a payload takes component loops, for a lowering that allows them where `wide` says."""
    return lambda shape: wide and bool(shape) and size(shape) > WIDE_PAYLOAD


def _kept_axes(lay: Layout, is_wide, ordered: bool = False, copies: bool = False) -> tuple | None:
    """The axes every kept reduction keeps, when they all keep the same ones with a sum "auto" (or "ordered" and
    "compensated", when `ordered`: the host's register pairs and chains; or "compensated" into a copy per chunk,
    when `copies`), max or min over a payload of registers (and no fold): else None."""
    kept = [r for r in lay.reductions if r.kept]
    if not kept or len({r.kept for r in kept}) != 1 or any(r.kind == "fold" for r in lay.reductions):
        return None
    sums = ("auto", "ordered") if ordered else ("auto",)
    if any(r.kind in ("sum", "mean") and r.policy not in sums and
           not (r.policy == "compensated" and (r.cell in lay.private if copies else ordered)) for r in kept) or \
            any(is_wide(r.payload) for r in kept):
        return None
    return tuple(kept[0].kept)


def nest_span(lay: Layout, is_wide, pairs: bool = False) -> int | None:
    """Lanes per kept slot when the kept axes are the leading lane axes (their lanes are contiguous, so one
    register accumulator serves each slot): the nested shape; with `pairs` (the host), ordered and compensated
    sums too (TwoSum pairs or Neumaier chains in registers per slot: reduce_kept.reduce_nested)."""
    k, axes = _kept_axes(lay, is_wide, pairs), lay.sig.lane_axes()
    if k is None:
        return None
    labels = [a.label for a in axes]
    if list(k) != labels[:len(k)] and not nest_wraps(lay, is_wide, pairs):
        return None
    span = 1
    for a in axes[labels.index(k[-1]) + 1:]:
        if a.extent is None:
            return None
        span *= a.extent
    return span


def nest_wraps(lay: Layout, is_wide, pairs: bool = False) -> bool:
    """Whether the nested shape runs a middle block of kept axes (the host): kept axes that are contiguous but
    not the leading ones, with fixed extents, kept by sums (any policy), max or min into a copy per chunk. A
    run of `nest_span` lanes then shares one kept slot, the run's number modulo the kept slots: the run's total
    goes into this chunk's copy of that slot (a per-channel total of Grid["batch", "channel":C, "pixel":P]):
    plain, its Neumaier pair, or (ordered) its (high, low) pair, by the same steps as a leading slot's."""
    k, axes = _kept_axes(lay, is_wide, pairs), lay.sig.lane_axes()
    labels = [a.label for a in axes]
    if not pairs or k is None or list(k) == labels[:len(k)]:
        return False
    at = labels.index(k[0])
    return (list(k) == labels[at:at + len(k)] and at + len(k) < len(labels) and
            all(axes[i].extent is not None for i in range(at, len(labels))) and
            all(r.cell in lay.private for r in lay.reductions if r.kept))


COLUMN_LATE = 1 << 20  # at most this many slots x components of ordered kept totals in the column shape: each
# takes three float64 values of the lanes function's buffers (reduce_kept.column_start), its chains four or five
# more (column_chains.start), on the heap past context.HEAP_BYTES: up to 72 MiB a chunk, beside the 576 MiB of the
# shared accumulators of that many float64 slots. It was 2048 (all on the stack) until 2026-12-04 and 65,536
# until 2026-12-05: wider rows run flat, a division and a scalar pair step a lane, as one chunk (its pairs' copy
# outweighs its lanes): 16 rows of 200,000 float64 columns took 28 ms where the column shape takes 2


def column_span(lay: Layout, is_wide, pairs: bool = False) -> int | None:
    """Kept slots when the kept axes are the trailing lane axes (not all of them): lane = row * span + slot, so
    the slot is affine in the lane: the column shape; with `pairs` (the host), ordered sums too (a branch-free
    TwoSum pair step per slot: reduce_kept.reduce_column_pair), while their buffers fit COLUMN_LATE; compensated
    sums with a copy per chunk too (a branch-free Neumaier step per slot: reduce_kept.reduce_kept_branchless)."""
    k, axes = _kept_axes(lay, is_wide, pairs, copies=True), lay.sig.lane_axes()
    if k is None or len(k) == len(axes) or list(k) != [a.label for a in axes[len(axes) - len(k):]]:
        return None
    span = 1
    for a in axes[len(axes) - len(k):]:
        span *= a.extent
    ordered = [r for r in lay.reductions if r.kept and r.kind in ("sum", "mean") and r.policy == "ordered"]
    return span if span * sum(column_terms(r) for r in ordered) <= COLUMN_LATE else None


def column_terms(r) -> int:
    """Values per slot of a kept total in the column shape: its components, and a mean's count."""
    return size(r.payload) + (r.kind == "mean")


def needs_chains(lay: Layout, pairs: bool, is_wide) -> bool:
    """Whether an every-lane sum keeps chains: compensated, or ordered in two-float chains (`pairs`, the host)
    over a payload of registers."""
    for r in lay.reductions:
        if r.kept or r.kind not in ("sum", "mean"):
            continue
        pol = sum_policy(r.policy, False)
        if pol == "compensated" or (pol == "ordered" and pairs and not is_wide(r.payload)):
            return True
    return False


def pick(lay: Layout, body: ir.Block, pairs: bool, wide: bool) -> str:
    """The chunk form of a stage (the first that applies, in the order of the module docstring)."""
    from hawk.passes.lower.scan import has_scans

    is_wide = wide_test(wide)
    if needs_chains(lay, pairs, is_wide):
        return "blocked"
    if nest_span(lay, is_wide, pairs) is not None:
        return "nested"
    if column_span(lay, is_wide, pairs) is not None:
        return "column"
    if len(lay.sig.lane_axes()) > 1 and not any(r.kept for r in lay.reductions):
        return "rows"
    if has_scans(body):
        return "scan"
    return "flat"


def fitting(lay: Layout, body: ir.Block, pairs: bool, wide: bool) -> tuple[str, ...]:
    """The forms the lowering takes for this stage: the picked one, and "flat" unless chains are needed."""
    best = pick(lay, body, pairs, wide)
    return (best,) if best in ("blocked", "flat") else (best, "flat")


def write(func, lay: Layout, pairs: bool, wide: bool) -> str:
    form = pick(lay, func.regions[0].blocks[0], pairs, wide)
    func.operation.attributes[FORM] = ir.StringAttr.get(form)
    return form


def read(func, lay: Layout, pairs: bool, wide: bool, what: str) -> str:
    """The kernel func's chunk form, refused in one line when it is missing or does not fit the stage."""
    attrs = func.operation.attributes
    name = ir.StringAttr(attrs["sym_name"]).value
    if FORM not in attrs:
        raise ValueError(f"{what}: kernel func '{name}' has no {FORM} attribute: run chunk-form first")
    form = ir.StringAttr(attrs[FORM]).value
    ok = fitting(lay, func.regions[0].blocks[0], pairs, wide)
    if form not in ok:
        known = f"; forms are {', '.join(FORMS)}" if form not in FORMS else ""
        raise ValueError(f"{what}: kernel func '{name}': {FORM} = {form!r} does not fit this stage; write "
                         f"{' or '.join(repr(f) for f in ok)}{known}")
    return form
