"""Read a kernel's `Layout` (reductions, sinks, keys, buffer order) off its hawk module.

Lowering and runtime both use the Layout built here, so they cannot disagree on the buffers.
"""

from __future__ import annotations

import math

from mlir import ir

from hawk.abi.layout import (
    PAIR_SLOTS,
    PRIVATE_SLOTS,
    Buffer,
    Layout,
    Reduction,
    compensated,
    padded,
    private_sink_slots,
    sum_policy,
    wants_slot_ranges,
)
from hawk.abi.signature import Signature
from hawk.errors import KernelError
from hawk.ir.access import (
    cell_name,
    plane_name,
    plane_type,
    policy,
    reduce_kind,
    reduce_over,
    scan_cell,
    scan_in_finish,
    scan_keys,
    scan_value,
    scatter_keys,
    scatter_mode,
    sink_name,
    store_key,
    stored_value,
    written_name,
)
from hawk.ir.dialect import is_hawk


def payload_of(t: ir.Type) -> tuple[int, ...]:
    return tuple(ir.VectorType(t).shape) if isinstance(t, ir.VectorType) else ()


def analyse(module: ir.Module, sig: Signature, outputs: dict[str, str], name: str,
            itypes: dict[str, str], owns: set[str] | None = None, cells_out: tuple[str, ...] = (),
            copy_slots: int = PAIR_SLOTS, cell_slots: int = PRIVATE_SLOTS) -> Layout:
    """Read reductions, sinks and keys off the hawk func and fix the buffer order (`copy_slots`: the largest
    sink with private copies, Spec.copy_slots; `cell_slots`: the largest kept cell with them, Spec.cell_slots).

    For one stage of a split kernel, `owns` names the outputs and sinks this stage hands back (those it writes;
    the last stage also takes those no stage writes); it also reads (role 'cut') and writes internal cells.
    """
    reductions: list[Reduction] = []
    sinks: dict[str, tuple[int, ...]] = {}
    index_keys: dict[str, list[tuple[str, int]]] = {}
    fold_keys: dict[str, str | None] = {}  # sink -> the one Index plane every scatter into it adds at (None: other)
    sink_policy: dict[str, str] = {}
    counts: dict[str, bool] = {}  # sink -> every add into it is an "auto" whole-number float64 constant
    axes = [a.label for a in sig.lane_axes()]

    cuts_in: list[tuple[str, tuple[int, ...]]] = []
    stored: set[str] = set()  # sinks some scatter stores into with =
    added: set[str] = set()  # sinks some scatter adds into with +=

    scans: dict[str, tuple[str, str]] = {}  # internal cell of a scan -> (role, dtype): hawk/passes/lower/scan.py
    keyed: dict[str, int] = {}  # internal cell of a keyed scan -> its keys (hawk/passes/lower/scan_keyed.py)
    comps: dict[str, int] = {}  # internal cell of a func scan over Vector/Matrix values -> components per lane
    blocks: list[tuple[int, str, str]] = []  # (lanes per kept slot, kind, policy) per block reduction (block.py)
    extents = {a.label: a.extent for a in sig.lane_axes()}

    def visit(op):
        if is_hawk(op, "block_reduce"):
            blocks.append((_size(tuple(extents[a] for a in reduce_over(op))), reduce_kind(op), policy(op)))
        if is_hawk(op, "cut_read"):
            cuts_in.append((cell_name(op), payload_of(op.results[0].type)))
        if is_hawk(op, "scan_totals") or is_hawk(op, "scan_apply"):
            t = scan_value(op).type
            written = "rscan" if scan_in_finish(op) else "scan"  # (rscan: the lanes the finish folds, scan.py)
            scans[scan_cell(op)] = (written if is_hawk(op, "scan_totals") else "scanoff",
                                    "i64" if isinstance(t, ir.IntegerType) else "f")
            if scan_keys(op) is not None:  # a keyed scan: its buffer's size (hawk.abi.layout.keyed_values)
                keyed[scan_cell(op)] = scan_keys(op)
            if isinstance(t, ir.VectorType):  # a func scan over Vector/Matrix values (hawk.abi.layout.rscan_values)
                comps[scan_cell(op)] = math.prod(ir.VectorType(t).shape)
        if is_hawk(op, "reduce"):
            over = tuple(reduce_over(op))
            cells = [u.owner for u in op.results[0].uses if is_hawk(u.owner, "cell")]
            cell = cell_name(cells[0]) if cells else ""
            reductions.append(Reduction(reduce_kind(op), over, tuple(a for a in axes if a not in over),
                                        policy(op), payload_of(op.results[0].type), cell,
                                        len(op.operands) > 1))
        elif is_hawk(op, "store") and store_key(op) is not None:  # by key into an output plane
            src = key_source(store_key(op))
            if src is not None and (plane_name(op), 0) not in index_keys.get(src, []):
                index_keys.setdefault(src, []).append((plane_name(op), 0))
        elif is_hawk(op, "scatter"):
            sink = sink_name(op)
            sinks[sink] = payload_of(stored_value(op).type)
            had_add = sink in added  # a store's "plain" is no policy of its own: only adds must agree
            (stored if scatter_mode(op) == "set" else added).add(sink)
            pol = sum_policy(policy(op), True) if scatter_mode(op) == "add" else "plain"
            if scatter_mode(op) == "add":
                counts[sink] = counts.get(sink, True) and policy(op) == "auto" and \
                    _exact_count(stored_value(op))
            if had_add and sink_policy.get(sink, pol) != pol and scatter_mode(op) == "add":
                raise KernelError(f"sink '{sink}' gets scatters with policies {sink_policy[sink]!r} and {pol!r}: "
                                  "give every scatter into one sink the same policy=", kernel=name)
            if scatter_mode(op) == "add" or sink not in sink_policy:
                sink_policy[sink] = pol
            keys = scatter_keys(op)
            src0 = key_source(keys[0]) if len(keys) == 1 and scatter_mode(op) == "add" else None
            fold_keys[sink] = src0 if fold_keys.get(sink, src0) == src0 else None  # (None: some other key)
            for pos, k in enumerate(keys):
                src = key_source(k)
                if src is not None:
                    uses = index_keys.setdefault(src, [])
                    if (sink, pos) not in uses:
                        uses.append((sink, pos))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for sink, exact in counts.items():
        if exact:  # only whole-number float64 increments: they add exactly, compensation has nothing to keep
            sink_policy[sink] = "plain"
    for sink in sorted(stored & added):
        if sink_policy[sink] != "plain":  # its adds are kept apart from the slots (companions, per-segment copies)
            err = KernelError(f"sink '{sink}' is both stored into (=) and added into (+=): in lane order each lane's "
                              f"store replaces the slot, and only plain adds can follow that order; write "
                              f"hawk.scatter({sink}, policy=\"plain\")[...] += ... (its policy is "
                              f"{sink_policy[sink]!r}), or use two sinks", kernel=name)
            err.call = "scatter"  # the compiler points it at the kernel's first scatter
            raise err

    # an output plane this stage reads (the value passed in: a lane's own, read before a later stage assigns it)
    # but does not hand back still needs its buffer here: the run's array for it, shared with the stage that
    # writes it (eagle.launch: "#run:" buffers), so the read sees what the caller passed (zeros when omitted)
    read_here = planes_read(module, {p.name for p in sig.planes if p.kind == "output"})

    def mine(n: str) -> bool:
        return owns is None or n in owns or n in read_here

    lay = Layout(name, sig, {k: v for k, v in outputs.items() if mine(k)}, reductions, sinks, index_keys,
                 sink_policy)
    lay.cells_in = [c for c, _ in cuts_in] + [c for c, (role, _) in scans.items() if role == "scanoff"]
    lay.stored = sorted(stored)
    lay.mixed = sorted(stored & added)
    lay.cells_out = list(cells_out)
    lay.blocks = blocks
    lay.keyed = keyed
    lay.comps = comps
    lay.fold_keys = {k: p for k, p in fold_keys.items() if p is not None and k not in stored and not sinks[k]}
    bufs = lay.buffers
    for p in sig.planes:
        if p.kind == "lane":
            bufs.append(Buffer(p.name, "in", "f"))
        elif p.kind == "index":
            bufs.append(Buffer(p.name, "index", itypes[p.name]))
        elif p.kind == "param":
            bufs.append(Buffer(p.name, "param", "f"))
        elif p.kind == "table":
            bufs.append(Buffer(p.name, "table", "f"))
    for c, _ in cuts_in:
        bufs.append(Buffer(c, "cut", "f"))
    for c, (role, dtype) in scans.items():  # a scan's block offsets (read) or totals (written)
        bufs.append(Buffer(c, role, dtype))
    for p in sig.planes:
        if p.kind == "output" and mine(p.name):
            bufs.append(Buffer(p.name, "cell" if outputs.get(p.name) == "cell" else "out",
                               itypes.get(p.name, "f")))  # (a float output of its own dtype: f32, f64)
            if outputs.get(p.name, "").startswith("scatter"):  # written by key: its array's length (#err checks)
                bufs.append(Buffer(p.name, "len", "i64"))
    if "result" in lay.outputs:
        bufs.append(Buffer("result", "cell" if outputs["result"] == "cell" else "out", "f"))
    for c in lay.cells_out:
        if c not in lay.outputs and c not in scans:  # internal: only a later stage reads it
            bufs.append(Buffer(c, "cell", "f"))
    for r in reductions:
        exact = r.kept and r.kind in ("sum", "mean") and r.policy == "ordered"
        slots = _private_cell_slots(r, sig, cell_slots)
        if slots:  # each chunk adds into its own copy of the cell; the finish combines them in chunk order
            lay.private[r.cell] = slots
            if not exact:  # (compensated: (sum, correction) pairs in float64, as a compensated sink's copies)
                bufs.append(Buffer(r.cell, "priv", "f64" if compensated(r) else "f"))
        if r.kind == "mean" and r.kept:
            bufs.append(Buffer(r.cell, "count", "f"))
        if r.kind == "fold":  # per block of lanes or per kept slot: a flag and the value (hawk/passes/lower/folds.py)
            bufs.append(Buffer(r.cell, "fold", "f"))
        if exact:  # an exact accumulator per kept slot (and per count, for a mean): hawk/exact.py; and pairs
            bufs.append(Buffer(r.cell, "exact", "i64"))
            if slots:
                bufs.append(Buffer(r.cell, "pairs", "f64"))  # (float64 for float32 kernels too)
            else:  # one (high, low) per slot, left by the one host chunk that held all its lanes (reduce_kept.park)
                bufs.append(Buffer(r.cell, "parked", "f64"))
        elif r.kept and r.kind in ("sum", "mean") and sum_policy(r.policy, True) != "plain" and r.policy != "auto":
            bufs.append(Buffer(r.cell, "comp", _comp_dtype(sum_policy(r.policy, True))))
    for p in sig.planes:
        if p.kind == "sink" and mine(p.name):
            bufs.append(Buffer(p.name, "sink", "f"))
            slots = _size(sinks.get(p.name, ())) * _size(tuple(a.extent for a in p.axes))
            if sink_policy.get(p.name) == "ordered":
                # an exact accumulator per slot that every chunk shares (integer atomic adds), and per chunk a
                # (high, low) pair per slot (hawk.abi.layout.PAIR_SLOTS); a sink also stored into runs as one chunk
                bufs.append(Buffer(p.name, "exact", "i64"))
                if p.name in sinks and p.name not in stored and slots <= copy_slots:
                    lay.private[p.name] = slots
                    bufs.append(Buffer(p.name, "pairs", "f64"))
                continue
            if sink_policy.get(p.name, "plain") != "plain":
                bufs.append(Buffer(p.name, "comp", _comp_dtype(sink_policy[p.name])))
            if p.name in sinks and private_sink_slots(slots, sink_policy[p.name], p.name in stored,
                                                      p.name in added, copy_slots):  # (hawk/abi/layout.py)
                # each chunk of lanes adds into its own copy; the finish adds the
                # copies in order. A sink only stored into: each chunk stores into its own copy and marks the slots
                # it stored; the finish takes each slot from the last chunk that marked it (the last lane wins)
                lay.private[p.name] = slots
                bufs.append(Buffer(p.name, "priv", _comp_dtype(sink_policy[p.name])))
                if p.name in stored:
                    bufs.append(Buffer(p.name, "mark", "i64"))
    if wants_slot_ranges(lay, reads_written_outputs(module, lay)):  # a host launch splits each sink into
        # slot ranges (hawk/abi/layout.py);
        # its sinks keep no copies (each chunk applies its own slots of every sink in place)
        lay.private = {n: v for n, v in lay.private.items() if n not in sinks}
        bufs[:] = [b for b in bufs if not (b.name in sinks and b.role in ("priv", "mark", "pairs"))]
        bufs.append(Buffer("#parts", "parts", "i64"))
    bufs += [Buffer("#scratch", "scratch", "f64"), Buffer("#exact", "exact", "i64"), Buffer("#meta", "meta", "i64"),
             Buffer("#err", "err", "i64")]
    # a host plan's (its Spec.cell_slots) small sinks' copies lie Layout.stride apart; only where that pads
    # (other layouts read as they did), and not on GPUs, whose threads' copies bounce no cache lines
    lay.line_pad = cell_slots > PRIVATE_SLOTS and any(padded(v) != v for n, v in lay.private.items() if n in sinks)
    return lay


def reads_written_outputs(root, lay: Layout) -> bool:
    """Whether the body under `root` reads an output plane it also writes (a lane's own value, read before the
    lane assigns it); outputs only read are safe for the slot-range form (hawk.abi.layout.slot_range_form)."""
    return bool(planes_read(root, set(lay.outputs) & planes_stored(root)))


def planes_read(root, names: set[str] | None = None) -> set[str]:
    """The planes (of `names`, when given) read under `root` (a module or func), at a lane's own or another's."""
    found: set[str] = set()

    def visit(op):
        if (is_hawk(op, "load") or is_hawk(op, "at")) and (names is None or plane_name(op) in names):
            found.add(plane_name(op))
        return ir.WalkResult.ADVANCE

    if names is None or names:
        root.operation.walk(visit)
    return found


def planes_stored(root) -> set[str]:
    """The output planes stored into under `root` (a module or func), per lane or by key."""
    found: set[str] = set()

    def visit(op):
        if is_hawk(op, "store"):
            found.add(plane_name(op))
        return ir.WalkResult.ADVANCE

    root.operation.walk(visit)
    return found


def _private_cell_slots(r: Reduction, sig: Signature, limit: int) -> int:
    """Slots of a private copy for a reduction that keeps lane axes other than the leading ones (those already
    give chunks whole slots): a sum or mean, a max or a min whose kept extents are fixed and few; else 0.
    Ordered sums keep (high, low) pairs per chunk (any kept axes) beside one shared exact accumulator per slot;
    compensated ones a (sum, correction) pair per slot and chunk, which the finish adds in chunk order into the
    companion (kept extents that are not fixed: one chunk, each slot in lane order)."""
    axes = sig.lane_axes()
    exact = r.kind in ("sum", "mean") and r.policy == "ordered"
    if r.kind == "fold":  # a kept slot's lanes go to one chunk, in lane order (no copies)
        return 0
    if not r.kept:
        return 0
    labels = [a.label for a in axes]
    if list(r.kept) == labels[:len(r.kept)] and not exact:
        return 0
    extents = [axes[labels.index(k)].extent for k in r.kept]
    if any(x is None for x in extents):
        return 0
    slots = (_size(r.payload) + (r.kind == "mean")) * _size(tuple(extents))  # a mean's counts follow its values
    return slots if slots <= (PAIR_SLOTS if exact else limit) else 0


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _exact_count(v: ir.Value) -> bool:
    """A float64 constant that is a small whole number: sums of it stay exact up to 2**53."""
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant" or not isinstance(v.type, ir.F64Type):
        return False
    x = ir.FloatAttr(owner.attributes["value"]).value
    return float(x).is_integer() and abs(x) <= 2.0 ** 20


def _comp_dtype(policy: str) -> str:
    """A compensated companion holds (sum, correction) of the lanes' terms in float64, twice the slots."""
    return "f64" if policy == "compensated" else "f"


def written_names(module: ir.Module) -> set[str]:
    """Outputs, cells and sinks a hawk module writes."""
    out: set[str] = set()

    def visit(op):
        if is_hawk(op, "store") or is_hawk(op, "scatter") or is_hawk(op, "cell"):
            out.add(written_name(op))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return out


def key_source(v: ir.Value) -> str | None:
    """The Index plane a key comes straight from (through a sign extension), if any."""
    owner = v.owner
    if isinstance(owner, ir.Block):
        return None
    if owner.name == "arith.extsi":
        return key_source(owner.operands[0])
    if is_hawk(owner, "load") and plane_type(owner).kind == "plane":  # an Index plane (not an integer output)
        return plane_name(owner)
    return None
