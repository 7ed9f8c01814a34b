"""split-stages: a kernel that reads a reduced value later in its body becomes a sequence of stages.

A total exists only once every lane has been added, so each read of one is a launch boundary. Every top-level
op gets a level: the highest level among the values it uses, where a reduction's result counts one level
above the reduction. Stage s keeps the side effects (stores, scatters, cells) and the reductions of level s,
recomputes the per-lane values they need, and reads earlier totals through `hawk.cut_read` of cells (the
kernel's own, or internal cells `cut0, cut1, ...`) that earlier stages write. Each stage func takes as block
arguments the planes, sinks and cells it uses, cut cells included (typed `!hawk.total`). Stage 0 keeps the
kernel's name; stage s is `<name>_<s+1>`.

A `hawk.scan` counts like a reduction: its result is one level above it. The stage of its level keeps it as
`hawk.scan_totals` (each SCAN_BLOCK's total into an internal cell, turned into the blocks' offsets by that
stage's finish), and every later stage that needs the scanned values recomputes them as `hawk.scan_apply`,
reading the offsets from that cell (hawk/passes/lower/scan.py).

Block reductions (docs/semantics.md "Block reductions"): a sum, mean, max or min of a scalar over the TRAILING
lane axes of a Grid whose extents are fixed and multiply to at most BLOCK_LANES (`block_span`) gives each kept
slot a contiguous span of at most BLOCK_LANES lanes, so a read of it needs no launch boundary: such a
reduction counts like a per-lane value (no level above its inputs), every stage that needs it recomputes it,
and it becomes `hawk.block_reduce` there (a cell it is also stored into keeps the `hawk.reduce`).
hawk/passes/lower/block.py lowers it inside the stage's launch.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from hawk.ir.access import (
    cell_name,
    enclosing_func,
    kernel_axes,
    kernel_func,
    reduce_kind,
    reduce_over,
    scan_mode,
    scan_op,
    scan_reset,
    scan_value,
)
from hawk.ir.build import create
from hawk.ir.dialect import is_hawk
from hawk.ir.types import add_arg, drop_unused_args, of_value
from hawk.passes.split_sinks import rename, split_lone_sinks


@dataclass(frozen=True)
class StageIR:
    name: str
    text: str  # a hawk module holding one single-stage kernel func
    cells_in: tuple[str, ...]
    cells_out: tuple[str, ...]


_EFFECTS = ("store", "scatter", "cell")
BLOCK_LANES = 1024  # the most lanes a kept slot of a block reduction may hold (a GPU workgroup's worth)


def block_span(op) -> int | None:
    """Lanes per kept slot when `op` is a block reduction, else None: a hawk.reduce of kind sum, mean, max or min
    of a scalar, over the trailing lane axes of its kernel (not all of them), whose extents are fixed and
    multiply to at most BLOCK_LANES, that some op other than a hawk.cell reads, and whose value does not come
    from a hawk.scan (a running total needs the lanes in order, chunk by chunk)."""
    if not is_hawk(op, "reduce") or reduce_kind(op) not in ("sum", "mean", "max", "min") or \
            isinstance(op.results[0].type, ir.VectorType):
        return None
    if not any(not is_hawk(u.owner, "cell") for u in op.results[0].uses):
        return None
    func_op = enclosing_func(op)
    if func_op is None or "hawk.signature" not in func_op.operation.attributes:
        return None
    from hawk.passes.plan import signature_of

    axes = signature_of(func_op).lane_axes()
    over = set(reduce_over(op))
    labels = [a.label for a in axes]
    if not over or len(over) >= len(labels) or over != set(labels[len(labels) - len(over):]):
        return None
    span = 1
    for a in axes[len(labels) - len(over):]:
        if a.extent is None:
            return None
        span *= a.extent
    if span > BLOCK_LANES or _from_scan(op):
        return None
    return span


def _from_scan(op) -> bool:
    """Whether a value op uses comes (through any chain of ops) from a hawk.scan."""
    seen, stack = set(), [op]
    while stack:
        o = stack.pop()
        for v in _used_values(o):
            owner = v.owner
            if isinstance(owner, ir.Block) or owner in seen:
                continue
            if is_hawk(owner, "scan"):
                return True
            seen.add(owner)
            stack.append(owner)
    return False


def _top_ops(func_op) -> list:
    return [op for op in func_op.regions[0].blocks[0].operations if op.operation.name != "func.return"]


def _used_values(op) -> list[ir.Value]:
    """Values op (or any op nested in it) uses that are defined outside it."""
    inner: set = set()
    used: list[ir.Value] = []

    def visit(o):
        for r in o.results:
            inner.add(r)
        for region in o.regions:
            for block in region.blocks:
                for a in block.arguments:
                    inner.add(a)
        used.extend(o.operands)
        return ir.WalkResult.ADVANCE

    op.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return [v for v in used if v not in inner]


def _effects(op) -> list:
    """The stores, scatters and cells `op` is or holds."""
    found = []

    def visit(o):
        if is_hawk(o) and o.operation.name[5:] in _EFFECTS:
            found.append(o)
        return ir.WalkResult.ADVANCE

    op.operation.walk(visit)
    return found


def _has_effect(op) -> bool:
    return bool(_effects(op))


def _analyse(func_op):
    """Levels of the top-level ops, the producer of each value, and the reductions in order."""
    ops = _top_ops(func_op)
    producer: dict = {}
    level: dict = {}
    reduces = []
    blocks = _blocks(ops)
    for k, op in enumerate(ops):
        lv = 0
        for v in _used_values(op):
            src = producer.get(v)
            if src is not None:  # a total is ready one level after its reduction; storing it is not a read
                later = _collective(ops[src]) and not is_hawk(op, "cell") and src not in blocks
                lv = max(lv, level[src] + (1 if later else 0))
        level[k] = lv
        for r in op.results:
            producer[r] = k
        if _collective(op) and k not in blocks:
            reduces.append(k)
    return ops, producer, level, reduces


def _blocks(ops) -> set[int]:
    """Top-level ops that are block reductions (read in their own stage: `block_span`)."""
    return {k for k, op in enumerate(ops) if block_span(op) is not None}


def _collective(op) -> bool:
    """A reduction or a scan: its result is ready one level after it."""
    return is_hawk(op, "reduce") or is_hawk(op, "scan")


def stage_count(module: ir.Module) -> int:
    func_op = kernel_func(module)
    ops, _, level, _ = _analyse(func_op)
    return 1 + max((level[k] for k, op in enumerate(ops) if _has_effect(op) or is_hawk(op, "reduce")), default=0)


def split_stages(text: str, name: str, reserved: frozenset[str] = frozenset()) -> list[StageIR]:
    """Split a hawk module (in the current context) into its stages; one stage gives the module back.

    Internal cells are named cut0, cut1, ... skipping the `reserved` names (the kernel's planes). A stage whose
    scatters into a sink too large for private copies would leave it one chunk is then split in two
    (hawk/passes/split_sinks.py); stages are named in order: `name`, `<name>_2`, ..."""
    stages = _split_levels(text, name, reserved)
    out: list[StageIR] = []
    for st in stages:
        parts = split_lone_sinks(st.text)
        if parts is None:
            out.append(st)
            continue
        for part, args, rest in parts:  # (the rest of the stage writes its cells; the scatters write none)
            out.append(StageIR(st.name, part, tuple(c for c in st.cells_in if c in args), st.cells_out if rest else ()))
    if len(out) == len(stages):
        return stages
    named = []
    for k, st in enumerate(out):
        new = name if k == 0 else f"{name}_{k + 1}"
        named.append(StageIR(new, st.text if new == st.name else rename(st.text, new), st.cells_in, st.cells_out))
    return named


def _split_levels(text: str, name: str, reserved: frozenset[str]) -> list[StageIR]:
    """The stages of a hawk module by levels (a read of a reduced value starts the next one)."""
    n = stage_count(ir.Module.parse(text))
    if n == 1:
        text = _drop_unread_scans(text)
        module = ir.Module.parse(text)
        ops = _top_ops(kernel_func(module))
        blocks = _blocks(ops)
        for k in sorted(blocks):
            _to_block(ops[k])
        return [StageIR(name, str(module) if blocks else text, (), ())]
    stages = []
    for s in range(n):
        module = ir.Module.parse(text)
        func_op = kernel_func(module)
        ops, producer, level, reduces = _analyse(func_op)
        blocks = _blocks(ops)
        cut = _cut_names(ops, reduces, reserved)
        later_use = {k for k in reduces if any(level[j] > level[k] and any(producer.get(v) == k
                                                                           for v in _used_values(ops[j]))
                                               for j in range(len(ops)))}
        keep = {k for k, op in enumerate(ops) if level[k] == s and (_has_effect(op) or k in later_use)}
        # pull in what kept ops use, except totals of earlier stages (read as cells instead)
        stack, reads = list(keep), set()
        while stack:
            k = stack.pop()
            for v in _used_values(ops[k]):
                src = producer.get(v)
                if src is None or src in keep:
                    continue
                if is_hawk(ops[src], "reduce") and level[src] < s and src not in blocks:
                    reads.add(src)
                    continue
                if is_hawk(ops[src], "scan") and level[src] < s:
                    reads.add(src)  # recomputed from the offsets an earlier stage left (hawk.scan_apply)
                keep.add(src)
                stack.append(src)
        cells_out = []
        entry = func_op.regions[0].blocks[0]
        with ir.InsertionPoint(entry.operations[0]), func_op.location:
            for k in sorted(reads):
                if is_hawk(ops[k], "scan"):
                    continue
                rt = ops[k].results[0].type
                cell = add_arg(func_op, cut[k], of_value("total", rt, _kept_axes(func_op, ops[k])))
                r = create("hawk.cut_read", [cell], [rt]).result
                ops[k].results[0].replace_all_uses_with(r)
        for k in sorted(keep):
            if k in later_use and level[k] == s:
                if is_hawk(ops[k], "scan"):
                    pass  # its block totals: hawk.scan_totals below
                elif not _user_cell(ops[k]):  # a total only later stages read: an internal cell
                    with ir.InsertionPoint(entry.operations[len(entry.operations) - 1]), ops[k].location:
                        v = ops[k].results[0]
                        cell = add_arg(func_op, cut[k], of_value("total", v.type, _kept_axes(func_op, ops[k])))
                        create("hawk.cell", [cell, v], [])
                cells_out.append(cut[k])
        for k in reversed(range(len(ops))):
            if k not in keep:
                ops[k].operation.erase()
            elif level[k] != s:  # (an earlier level's op, recomputed for its values: its stores and scatters
                _drop_effects(ops[k])  # are its own level's)
        scanned = {k for k in keep if is_hawk(ops[k], "scan")}
        for k in sorted(scanned):
            _split_scan(func_op, ops[k], cut[k], totals=level[k] == s)
        for k in sorted(keep & blocks):
            _to_block(ops[k])
        drop_unused_args(func_op)  # each stage takes the planes, sinks and cells it uses
        stage_name = name if s == 0 else f"{name}_{s + 1}"
        func_op.attributes["sym_name"] = ir.StringAttr.get(stage_name)
        cells_in = [cut[k] for k in sorted(reads) if k not in scanned] + \
            [cut[k] for k in sorted(reads) if k in scanned]  # (the order plan-buffers lists them in)
        stages.append(StageIR(stage_name, str(module), tuple(cells_in), tuple(cells_out)))
    return stages


def _drop_effects(op) -> None:
    """The stores, scatters and cells nested in `op` (a loop or a branch an earlier stage also runs, which a later
    one recomputes only for the values it yields): each side effect belongs to the stage of its op's level
    alone (a `for` that scattered and also summed into a value read after a total scattered twice)."""
    for o in _effects(op):
        o.operation.erase()


def _split_scan(func_op, op, cell_name_: str, totals: bool) -> None:
    """A hawk.scan as this stage needs it: its block totals into the internal cell (the stage of its level), or
    the scan itself started from the offsets in that cell (a later stage)."""
    v = scan_value(op)
    cell = add_arg(func_op, cell_name_, of_value("total", v.type, []))
    operands = [cell, v] + ([scan_reset(op)] if scan_reset(op) is not None else [])
    operands += list(op.operands)[1:] if "keys" in op.attributes else []  # a keyed scan's key (KEYSCAN)
    rev = {a: op.attributes[a] for a in ("reverse", "keys", "order", "combine", "identity")
           if a in op.attributes}  # (reverse=True; keyed; a func's combiner and identity)
    with ir.InsertionPoint(op), op.location:
        if totals:
            create("hawk.scan_totals", operands, [], {"op": scan_op(op)} | rev)
        else:
            new = create("hawk.scan_apply", operands, [v.type], {"op": scan_op(op), "mode": scan_mode(op)} | rev)
            op.results[0].replace_all_uses_with(new.result)
    op.operation.erase()


def _to_block(op) -> None:
    """A block reduction as this stage needs it: its reads take a hawk.block_reduce; a hawk.cell it is stored
    into keeps the hawk.reduce (a kept-axis reduction like any other), which goes when no cell remains."""
    old = op.results[0]
    reads = [u.owner for u in old.uses if not is_hawk(u.owner, "cell")]
    if not reads:
        return
    attrs = {n: op.operation.attributes[n] for n in ("kind", "over", "policy")}
    with ir.InsertionPoint(op), op.location:
        new = create("hawk.block_reduce", list(op.operands), [old.type], attrs).result
    for owner in reads:
        owner.operation.replace_uses_of_with(old, new)
    if not list(old.uses):
        op.operation.erase()


def _drop_unread_scans(text: str) -> str:
    """A kernel in one stage: scans nothing reads go (there is no stage to apply them)."""
    module = ir.Module.parse(text)
    ops = [op for op in _top_ops(kernel_func(module)) if is_hawk(op, "scan")]
    if not ops:
        return text
    for op in reversed(ops):
        if not list(op.results[0].uses):
            op.operation.erase()
    return str(module)


def _user_cell(reduce_op) -> str | None:
    """The output a reduction is stored to, if any (a later stage then reads that cell)."""
    for u in reduce_op.results[0].uses:
        if is_hawk(u.owner, "cell"):
            return cell_name(u.owner)
    return None


def _cut_names(ops, reduces, reserved: frozenset[str]) -> dict[int, str]:
    names, internal = {}, 0
    for k in reduces:
        user = None if is_hawk(ops[k], "scan") else _user_cell(ops[k])
        if user is None:
            while f"cut{internal}" in reserved:
                internal += 1
            user, internal = f"cut{internal}", internal + 1
        names[k] = user
    return names


def _kept_axes(func_op, reduce_op) -> list[str]:
    """The lane axes a reduction keeps, in grid order (empty for a total over every lane)."""
    over = set(reduce_over(reduce_op))
    return [a for a in kernel_axes(func_op) if a not in over]
