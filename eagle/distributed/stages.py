"""A stage split in two for sharded data: "lanes only" on every shard, "finish only" once the shards' partial
states are combined.

A host stage launch resets its partial state, runs its lane function over chunks of lanes (each chunk writing
partials of its own: #scratch and #exact accumulators per chunk, private copies and (high, low) pairs of sinks per
chunk, one shared exact accumulator per sink slot) and runs its finish, which combines the chunks in chunk order
and rounds. Over shards the same state is simply longer: shard s's chunk c becomes chunk s * C + c of one finish.
So a sharded stage runs

* `lanes_stage`: the stage's lanes over the shard's lanes in exactly C chunks (empty chunks pad a short shard),
  its finish skipped; results: the per-lane outputs and every partial-state buffer;
* a combine in the framework (eagle/distributed/jax_shard.py, torch_shard.py): per-chunk buffers gathered along
  the chunk axis (`GATHER`), shared exact accumulators added as int64 (`ISUM`: integer adds, exact and
  order-free), shared float buffers (a plain sink's adds) added (`FSUM`); in a stage that checks keys as it
  runs, the per-chunk #err triples gathered too (`ERR`) and looked at on every shard before the finish, so a
  key outside a sink on one shard refuses the call on all of them alike, before any finish (no shard is left
  waiting in a collective, and nothing of the caller's is written). A reduction keeping the leading axes (a row
  sum) has each kept slot on one shard: its state stays there (`LOCAL`), and its cell comes back as the shard's
  own rows; an output written by key (`KEYED`) comes in whole and goes out combined position by position
  (`keyed_result`), before the finish;
* `finish_stage`: the compiled finish alone over S * C chunks of that combined state: ordered sums are rounded
  once from the exact total of every shard's terms, so they are bitwise equal to the one-device run whatever the
  shard count or sizes; max/min and counts are exact; auto sums are the finish's own chunk-order combine.

Both halves are `eagle.stage.Prepared` stages whose other function is dist.c's no-op: the lanes half fired
through dist.c's plan (which places the shard in the whole run: eagle/distributed/geometry.py), the finish half
through the bridges' call plan (eagle/prepared.py, eagle/call_plan.c): one foreign call each, no Python inside
jit.
"""

from __future__ import annotations

import ctypes
import math
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from eagle import native
from eagle.bridge import refuse_keyed
from eagle.distributed.reach import Reach, reach
from eagle.distributed.rows import slots
from eagle.distributed.sinks import large_sinks
from eagle.errors import InputError
from eagle.launch import fold_refusal
from eagle.native import cbuild
from eagle.prepared import PreparedRun
from eagle.stage import IDENT, Prepared, cell_index
from hawk.abi.layout import (
    CELL_SLOTS,
    ORDERED_BLOCK,
    PAIR_SLOTS,
    PRIVATE_SLOTS,
    SCAN_BLOCK,
    fold_values,
    has_scan,
    keyed_values,
    rscan_values,
    scan_values,
)

GATHER, ISUM, FSUM, ERR, BITS, LOCAL, KEYED = "gather", "isum", "fsum", "err", "bits", "local", "keyed"
_SOURCE = Path(__file__).with_name("dist.c")
_LOCK = threading.Lock()
_LIB: list = []


class _DistPlan(ctypes.Structure):  # the head of dist.c's dist_plan; its mutex follows (eagle_dist_plan_size)
    _fields_ = [("fire", ctypes.c_void_p), ("stage", ctypes.c_void_p), ("nargs", ctypes.c_int64),
                ("nrets", ctypes.c_int64), ("first", ctypes.c_void_p), ("slots", ctypes.c_void_p),
                ("elem", ctypes.c_void_p), ("nmetas", ctypes.c_int64), ("meta_len", ctypes.c_int64),
                ("metas", ctypes.c_void_p)]


class _DistCheck(ctypes.Structure):  # dist.c's dist_check
    _fields_ = [("kernel", ctypes.c_char_p), ("messages", ctypes.c_void_p), ("nbuffers", ctypes.c_int64)]


def library() -> ctypes.CDLL:
    """dist.c built once with the system C compiler (against jaxlib's XLA FFI headers when jax is installed) into
    hawk's cache, sealed like every cache entry, and loaded."""
    with _LOCK:
        if _LIB:
            return _LIB[0]
        lib = cbuild.load(_SOURCE, "eagle-dist", cbuild.xla_flags(), "eagle/distributed/dist.c (eagle.distributed)")
        lib.eagle_dist_plan_size.restype = ctypes.c_int64
        lib.eagle_dist_plan_init.argtypes = [ctypes.c_void_p]
        lib.eagle_dist_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        lib.eagle_dist_run.restype = None
        lib.eagle_dist_fold_run.restype = ctypes.c_int64  # (slots whose pair erred: eagle.distributed.sinks.Fold)
        _LIB.append(lib)
        return lib


def check_plan(half: Half) -> int:
    """The address of a finish half's dist_check (dist.c), built once: the kernel's name and the printf formats of
    its sinks' refusals (eagle/prepared.py's), in which `eagle_dist_check` says what a combined #err holds."""
    if getattr(half, "_check", None) is None:
        st = half.call.stages[0]
        msgs = half.call._sink_messages(st)
        lay = st.launcher.lay
        for k, buf in enumerate(lay.buffers):
            if buf.role == "out" and buf.name in keyed_outs(lay):  # (Launcher.check_errors's words)
                text = (f"plane '{buf.name}' of kernel '{half.call.name}': %lld lane(s) stored by key to a position "
                        f"outside its array (first bad key: %lld); valid positions are 0..len-1, and -1 writes "
                        f"nothing").encode()
                msgs._keep.append(text)
                msgs[k] = text
            if buf.role in ("scan", "rscan") and buf.name in lay.keyed:  # (Launcher.check_errors's words)
                n = lay.keyed[buf.name]
                text = (f"kernel '{half.call.name}': %lld lane(s) gave a keyed hawk.scan(x, by=key, keys={n}) a key "
                        f"outside 0..{n - 1} (first bad key: %lld); a key of -1 leaves its lane out").encode()
                msgs._keep.append(text)
                msgs[k] = text
        name = half.call.name.encode()
        head = _DistCheck(name, ctypes.addressof(msgs), len(st.launcher.lay.buffers))
        half._check_keep = (msgs, name, head)
        half._check = ctypes.addressof(head)
    return half._check


def refusal(half: Half, err: np.ndarray) -> None:
    """Raise, on every rank alike, the refusal a combined #err holds, in Plan.run's words (eagle.torch)."""
    if err.any():
        half.call.stages[0].launcher.check_errors(err)


def skip_address() -> int:
    """The address of dist.c's no-op stage function."""
    return native.function_address(library().eagle_dist_skip)


# ---- what a kernel may do across shards -----------------------------------------------------------------------
def check_shardable(plan, spec, where: str, row: int = 0, keyed: bool = False) -> Reach:
    """How the kernel runs sharded (eagle/distributed/reach.py), refusing, by kernel and plane, what shards cannot
    compute from their own lanes and halos: `.at` reads that can reach any lane, reductions that keep lane axes
    without a copy per chunk (or the leading axes where shards run with whole-run lane numbers), stores with `= v`
    into sinks that keep no copy per chunk, block reductions whose slots a shard boundary could cut, and outputs
    written by key unless `keyed` (shard_map and torch groups take them: every shard stores into the whole array,
    `keyed_result` combines). A kernel with a hawk.scan (or a hawk.reduce fold over every lane) runs each shard
    over whole blocks (Reach.block: its planes, Vector ones and those read with halos included, extended by the
    lanes it runs past its own); a reverse scan's lane values go to every shard's finish. `row`: lanes per leading
    coordinate (a Grid's row; 0 for 1-D lanes)."""
    kernel = plan.kernel
    name = kernel.name
    if not keyed:
        refuse_keyed(plan, f"sharded runs over {where} under plain jax.jit")
    how = reach(kernel, spec, where)
    blocks = whole_blocks(kernel, spec)
    local = []
    for k in range(kernel.stage_count):
        lay = kernel.layout(spec, k)
        _check_blocks(kernel, lay, row)
        local += sorted(leading_cells(kernel, lay))
        for r in lay.reductions:
            if r.kept:
                _check_kept(kernel, lay, r)
        for s in lay.stored:  # each chunk's copy and marks: the finish takes the last chunk's store, and chunk
            # s x C + c of S x C is in lane order, so the last lane of the whole run wins, as on one device
            if s not in lay.private:
                raise InputError(f"kernel '{name}': sink '{s}' is stored into with `= v` (the last lane wins) but "
                                 f"keeps no copy per chunk here (over {PAIR_SLOTS} slots, or also added into with "
                                 f"a policy other than plain), so every shard would write its slots at once; "
                                 f"scatter with `+=` (or max/min), or run unsharded")
    if local and blocks:  # (with halos or coordinates alone, a shard runs its own rows at their whole-run
        # numbers: eagle/distributed/rows.py takes its slots out; with blocks it also runs lanes of other shards)
        raise InputError(f"kernel '{name}': '{local[0]}' keeps the leading lane axis, and the kernel scans or folds "
                         f"over every lane, so its shards run whole blocks of lanes, which cut rows between shards: "
                         f"a row's slot of '{local[0]}' would be added to on two shards; move that reduction into a "
                         f"kernel of its own, or run unsharded")
    if blocks:  # shards start on scan blocks (a fold's blocks), and on every stage's chunk alignment
        spans = [kernel.layout(spec, k).parallel_span() for k in range(kernel.stage_count)]
        unit = SCAN_BLOCK if blocks == "scans" else ORDERED_BLOCK
        how = replace(how, block=math.lcm(unit, *(math.lcm(s, ORDERED_BLOCK) for s in spans if s)))
    return how


def whole_blocks(kernel, spec) -> str | None:
    """Why `kernel`'s shards run whole blocks of lanes at whole-run lane numbers (Reach.block): "scans" (a
    hawk.scan folds fixed blocks counted from lane 0), "folds" (a hawk.reduce fold over every lane: its blocks
    likewise), or None."""
    lays = [kernel.layout(spec, k) for k in range(kernel.stage_count)]
    if any(has_scan(lay) for lay in lays):
        return "scans"
    if any(r.kind == "fold" and not r.kept for lay in lays for r in lay.reductions):
        return "folds"
    return None


def _check_kept(kernel, lay, r) -> None:
    """A reduction keeping lane axes runs sharded when each chunk accumulates its own copy of the cell (fixed kept
    extents, not the leading axis: a column sum, per-channel statistics): the copies are gathered along the chunk
    axis like a sink's and the finish combines S x C chunks as it combines C. One keeping a leading block of axes
    (a row sum) has every kept slot on one shard, which keeps its slots' state to itself (leading_cells)."""
    axes = kernel.signature.lane_axes()
    labels = [a.label for a in axes]
    lead = labels[0] if labels else "lane"
    if lead in r.kept:  # each kept slot on one shard: the shard's own slots (leading_cells; a fold's per-slot
        # flags and partials too: each slot's one plain fold in lane order runs whole on its shard)
        if list(r.kept) != labels[:len(r.kept)]:
            raise InputError(f"kernel '{kernel.name}': '{r.cell}' keeps lane axes {list(r.kept)}; with the "
                             f"leading axis '{lead}' a sharded run takes a leading block of axes ({labels}); "
                             f"keep a leading block, or run unsharded")
        bare = [what for over, what in kernel.folds_without_identity() if over and lead not in over] \
            if r.kind == "fold" else []
        if bare:
            raise InputError(f"kernel '{kernel.name}': {bare[0]} keeps lane axes {list(r.kept)} "
                             f"and has no identity=: an empty slot would be refused by the one shard holding it, "
                             f"alone, while the others go on; pass identity=<value> to run it sharded, or run "
                             f"unsharded")
        return
    if r.cell not in lay.private or r.kind == "fold":
        extents = {a.label: a.extent for a in axes}
        raise InputError(f"kernel '{kernel.name}': '{r.cell}' keeps lane axes {list(r.kept)} "
                         f"({' x '.join(str(extents.get(k)) for k in r.kept)} slots) without a copy per chunk "
                         f"(kept axes need fixed extents, at most {PRIVATE_SLOTS} values, {CELL_SLOTS} on the host; "
                         f"hawk.reduce folds "
                         f"keep none), so shards cannot combine it; scatter into a sink keyed by the kept "
                         f"coordinates instead")


def _check_blocks(kernel, lay, row: int) -> None:
    """A block reduction folds each kept slot's lanes within one launch: a shard must hold whole slots. Slots
    over trailing Grid axes do (shards split the leading axis); any other span is refused."""
    if not lay.blocks:
        return
    axes = kernel.signature.lane_axes()
    for span, kind, _ in lay.blocks:
        if not row or row % span:
            raise InputError(f"kernel '{kernel.name}': a block hawk.{kind} over {span} lanes per kept slot (read "
                             f"in the same stage) needs each slot's lanes on one shard, and shards split the "
                             f"leading lane axis '{axes[0].label if axes else 'lane'}' ({row} lanes a row); reduce "
                             f"over trailing axes only, or run unsharded")


# ---- the two halves ---------------------------------------------------------------------------------------------
def _checks(launcher) -> bool:
    """Whether a stage's lanes can refuse (its #err is gathered and looked at before the finish): a scatter that
    checks its keys as it runs, or a keyed scan's keys (Launcher.checks_at_run_time), or a store by key into an
    output, whose keys a sharded run cannot look at before the launch (the compiled code counts a bad one)."""
    return launcher.checks_at_run_time or bool(keyed_outs(launcher.lay))


def keyed_result(stored, before, me, pmax, psum, xp, bitcast):
    """An output written by key after every shard stored into its own copy of the whole array `before`: each
    position from the last shard (in shard order, as lanes run in lane order) whose copy's bits differ there, else
    as before (a store of the same bits changes nothing). With the framework's `pmax` / `psum` over the shards,
    this shard's index `me`, array module `xp` and `bitcast(a, dtype=None)` (floats to integers of their width,
    or back to `dtype`): the position's owner by a max, then its bits by an integer sum to which only the owner
    adds (exact; NaN payloads and -0.0 kept)."""
    floats = np.dtype(stored.dtype).kind == "f"
    new, old = (bitcast(stored), bitcast(before)) if floats else (stored, before)
    owner = pmax(xp.where(new != old, me, -1))
    got = psum(xp.where(owner == me, new, xp.zeros((), new.dtype)))
    return xp.where(owner >= 0, bitcast(got, stored.dtype) if floats else got, before)


def keyed_outs(lay) -> set[str]:
    """The output planes a stage writes by key (hawk.scatter(out)[k] = v): positions, not lanes."""
    return {n for n, how in lay.outputs.items() if how.startswith("scatter")}


def leading_cells(kernel, lay) -> set[str]:
    """Cells of reductions keeping the leading lane axes (a row sum): each kept slot's lanes lie on one shard,
    which holds its slots' whole state (`LOCAL`: never combined; a fold's flags and partials per slot too) and
    hands back its own slots' totals, as it does its own lanes of a per-lane output."""
    labels = [a.label for a in kernel.signature.lane_axes()]
    return {r.cell for r in lay.reductions if r.kept and r.kept[0] == labels[0]}


def _combine_kind(buf, lay, checks: bool, local: set[str] = frozenset()) -> str | None:
    """How a partial-state buffer of the lanes half is combined across shards (None: not state, or a
    placeholder: #scratch with no partials, #exact with no ordered sums over every lane, #err in a stage that
    cannot refuse: `checks` is its launcher's checks_at_run_time). `local`: leading_cells, whose cell, counts,
    companion, exact accumulators, parked pairs and fold partials stay on their shard."""
    if buf.name in local and buf.role in ("cell", "count", "comp", "exact", "parked", "fold"):
        return LOCAL
    if buf.role == "err":
        return ERR if checks else None
    if buf.role in ("scan", "rscan", "fold", "parked"):  # block totals (rscan: lane values and flags; fold: a
        # hawk.reduce's per-block partials; parked: a kept slot's pair) at global numbers, each written by the one
        return BITS  # shard that runs it: the finish then folds the whole run as one device
    if (buf.role == "scratch" and not lay.width) or (buf.name == "#exact" and not lay.exact_components):
        return None
    if buf.role in ("scratch", "pairs", "priv", "mark") or (buf.role == "exact" and buf.name == "#exact"):
        return GATHER
    if buf.role == "exact":
        return ISUM
    if buf.role in ("sink", "comp", "count"):
        return FSUM
    return None


@dataclass
class Half:
    """One half of a stage, fired through a call plan: operand and result buffer indices, and the results' names."""

    call: StageCall
    operands: list[int]
    results: list[int]
    kinds: list[str | None] = field(default_factory=list)  # lanes half: each result's combine (None: per-lane)
    names: list[str] = field(default_factory=list)  # lanes: each operand's plane or cut name; finish: the cuts
    picks: dict[str, tuple[int, int, tuple]] = field(default_factory=dict)  # name -> (result j, offset, shape)
    cells_out: dict[str, int] = field(default_factory=dict)  # finish half: cell for later stages -> result j
    roles: list[str] = field(default_factory=list)  # lanes half: each operand's, then each result's buffer role
    planes: list[str] = field(default_factory=list)  # ... and its plane name
    geo: np.ndarray | None = None  # lanes half: per shard, its geometry (eagle/distributed/geometry.py)
    elem: list[int] = field(default_factory=list)  # lanes half: bytes per element of each operand and result
    folds: dict = field(default_factory=dict)  # lanes half: result position -> a large sink's Fold (sinks.py)
    local: set = field(default_factory=set)  # finish half: results that are this shard's own slots (leading_cells)
    own: dict = field(default_factory=dict)  # lanes half: result position -> a row cell's Slots at whole-run
    # numbers (eagle/distributed/rows.py), from which the shard's own are taken


class StageCall(PreparedRun):
    """One prepared stage behind a call plan: operand and result i are stage buffers (PreparedRun's native plan,
    call_plan.c's handler and `run_native` as they are)."""

    def __init__(self, name: str, stage: Prepared, operands: list[int], results: list[int],
                 aliases: dict[int, int] | None = None):
        self.stages, self.name = [stage], name
        self.operands = list(operands)
        self.rets = [((stage.buffers[k].size,), stage.buffers[k].dtype) for k in results]
        self.places = [[(0, k)] for k in list(operands) + list(results)]
        self.aliases = aliases or {}
        self.picks = {}  # (PreparedRun's; a Half keeps its own)
        self._table = None
        self._address = None

    def _sink_messages(self, st):
        """PreparedRun's refusal formats, and a fold's over every lane (an empty slice, refused by the finish)."""
        msgs = super()._sink_messages(st)
        lay = st.launcher.lay
        for r in lay.reductions:
            if r.kind == "fold" and not r.kept:
                text = fold_refusal(self.name, r, 0, 0).replace("%", "%%").encode()
                msgs._keep.append(text)
                msgs[lay.buffer_index(r.cell, "fold")] = text
        return msgs


def _picks(stage: Prepared, wanted: set[str], results: list[int]) -> dict:
    """Where each named result of `stage` lies among the result buffers: (j, element offset, shape)."""
    out = {}
    for name, arr in stage.results.items():
        base, _, tail = name.rpartition("_")  # a vector cell's components: <cell>_<k>
        if name not in wanted and not (tail.isdigit() and base in wanted):
            continue
        a = np.asarray(arr)
        at = native.address(a)
        for j, k in enumerate(results):
            buf = stage.buffers[k]
            lo = native.address(buf) if buf.size else -1
            if lo <= at and at + a.nbytes <= lo + buf.nbytes:
                out[name] = (j, (at - lo) // a.itemsize, a.shape)
                break
    return out


def lanes_stage(plan, b, k: int, chunks: int, cuts: dict, total: int = 0, tail: int = 0, rows: int = 0) -> Half:
    """Stage k's lanes over one shard in exactly `chunks` chunks, finish skipped (each chunk's meta is filled per
    call: eagle/distributed/geometry.py). Operands: the input planes then the cut cells (and a scan's block
    offsets); results: per-lane outputs (kind None), then the partial state. `total`: the whole run's lanes (a
    scan's block totals are the whole run's blocks); `tail`: lanes a per-lane output holds past the shard's own
    (a shard realigned to scan blocks runs into the next shard's first lanes: Reach.block); `rows`: the whole
    run's rows when the shard runs at whole-run lane numbers (a row cell's state is then sized for every row, and
    `Half.own` says where the shard's own slots lie: eagle/distributed/rows.py), else 0."""
    lib, launcher = plan.prepare(b.spec, k)
    recipe: list = []
    bufs, res, copies, resets, _ = launcher.buffers(b, chunks, dict(cuts), staged=False, recipe=recipe)
    bufs[launcher.meta_k][:2] = (0, b.lanes)
    lay = launcher.lay
    _whole_run_scans(lay, bufs, total)
    resets = [(a, f) for a, f in resets if any(a is o for o in bufs)]  # (not those of buffers resized above)
    ops, outs, kinds, names = [], [], [], []
    local = leading_cells(plan.kernel, lay)
    keyed = keyed_outs(lay)
    for j, buf in enumerate(lay.buffers):
        kind = _combine_kind(buf, lay, _checks(launcher), local)
        if buf.role == "out" and buf.name in keyed:  # every position: its content in, stored into in place, then
            ops.append(j)  # the shards' stores combined (keyed_result)
            names.append(buf.name)
            outs.append(j)
            kinds.append(KEYED)
        elif buf.role in ("in", "index", "param", "table", "cut", "scanoff"):
            ops.append(j)
            names.append(buf.name)
            if buf.role == "scanoff" and buf.name in lay.keyed:  # written too: its second half, running values
                outs.append(j)
                kinds.append(None)
        elif buf.role == "out" or kind is not None:
            outs.append(j)
            kinds.append(kind)
            if kind == FSUM and bufs[j].dtype.kind == "f":  # a sink (or companion) the lanes add into: from
                resets.append((bufs[j], -0.0))  # -0.0, IEEE addition's identity (the prior is added at the finish)
            elif kind in (ISUM, FSUM, BITS) or buf.role == "out" or (kind == LOCAL and buf.role != "cell"):
                resets.append((bufs[j], 0))  # written by the lanes: starts at zero here (a cell: its identity)
    outputs = {bb.name for bb in lay.buffers if bb.role == "out"}
    picks = _picks(SimpleNamespace(results=res, buffers=bufs), outputs, outs)
    if tail:  # (a Vector output: `tail` more lanes per component, each component as long as the others)
        wide = [j for j in outs if lay.buffers[j].role == "out" and lay.buffers[j].name not in keyed]
        old = [bufs[j] for j in wide]
        pay = {p.name: math.prod(p.payload.shape) for p in plan.kernel.signature.planes if p.payload.shape}
        for j in wide:
            p = pay.get(lay.buffers[j].name, 1)
            bufs[j] = np.zeros(bufs[j].size + p * tail, dtype=bufs[j].dtype)
        resets = [(a, f) for a, f in resets if not any(a is o for o in old)] + [(bufs[j], 0) for j in wide]
    own = {}
    if rows and local:  # a row cell's state at whole-run slot numbers (eagle/distributed/rows.py)
        reds = {r.cell: r for r in lay.reductions}
        for i, j in enumerate(outs):
            buf = lay.buffers[j]
            if kinds[i] == LOCAL:
                own[i] = slots(reds[buf.name], buf.role, tuple(b.extents), rows, b.dtype)
                old = bufs[j]
                fill = IDENT[reds[buf.name].kind] if buf.role == "cell" else 0
                bufs[j] = np.full(own[i].size(rows), fill, dtype=old.dtype)
                resets = [(a, f) for a, f in resets if a is not old] + [(bufs[j], fill)]
    metas = [np.zeros(4 + len(b.extents), dtype=np.int64) for _ in range(chunks)]
    st = Prepared(launcher, lib, bufs, metas, chunks, res, copies, _unique(resets), (), recipe)
    st.args.stage.finish = skip_address()
    aliases = {ops.index(j): i for i, j in enumerate(outs) if j in ops}
    half = Half(StageCall(plan.kernel.name, st, ops, outs, aliases), ops, outs, kinds, names)
    half.picks, half.own = picks, own
    half.folds = large_sinks(lay, bufs, outs, half.kinds, chunks)  # (kinds relabelled: FOLD, XSUM)
    half.roles = ["keyed" if lay.buffers[j].role == "out" and lay.buffers[j].name in keyed else lay.buffers[j].role
                  for j in ops + outs]  # (a keyed output's positions: never shifted, settled or resized)
    half.planes = [lay.buffers[j].name for j in ops + outs]
    half.elem = [bufs[j].itemsize for j in ops + outs]  # (bytes per element: what dist.c shifts by)
    _let_go(st)
    return half


def finish_stage(plan, b, k: int, chunks: int, cuts: dict, total: int = 0) -> Half:
    """Stage k's finish alone over `chunks` chunks of combined state. Operands: the cut cells, then the state in
    the lanes half's order (each aliased to a result, since the finish combines in place); results: the aliased
    state, then the cells (user cells and cells for later stages; a scan's block offsets are its aliased
    totals, turned into offsets in place). `total`: the whole run's lanes."""
    lib, launcher = plan.prepare(b.spec, k)
    recipe: list = []
    bufs, res, copies, resets, _ = launcher.buffers(b, chunks, dict(cuts), staged=False, recipe=recipe)
    bufs[launcher.meta_k][:2] = (0, b.lanes)
    lay = launcher.lay
    _whole_run_scans(lay, bufs, total)
    cut_ops = [j for j, buf in enumerate(lay.buffers) if buf.role in ("cut", "scanoff")]
    local = leading_cells(plan.kernel, lay)
    state = [j for j, buf in enumerate(lay.buffers)
             if _combine_kind(buf, lay, _checks(launcher), local) is not None]
    cells = [j for j, buf in enumerate(lay.buffers) if buf.role == "cell" and j not in state]
    metas = [np.array([0, 0, c, b.lanes, *b.extents], dtype=np.int64) for c in range(chunks)] if chunks > 1 \
        else None
    err = launcher.err_k  # (the finish's own refusals, a fold's empty slice: into its own #err, zeroed per call)
    # the cells are the framework's fresh result buffers: each starts at its identity, since a kept cell's finish
    # combines the chunks' copies into it (cells over every lane are written whole)
    fresh = [(a, f) for a, f in resets if any(a is bufs[j] for j in cells)]
    st = Prepared(launcher, lib, bufs, metas, chunks, res, copies, fresh + [(bufs[err], 0)], (), recipe)
    st.args.stage.lanes = skip_address()
    st.args.stage.threads = 1
    ops = cut_ops + state
    results = state + cells
    aliases = {len(cut_ops) + i: i for i in range(len(state))}
    half = Half(StageCall(plan.kernel.name, st, ops, results, aliases), ops, results,
                names=[lay.buffers[j].name for j in cut_ops])
    if err in state:  # the lanes' gathered #err (looked at before: `refusal`) is an operand only so that the
        # finish waits on that look; the finish writes its own #err, whose words the call plan then reads
        half.call.places[ops.index(err)] = []
        half.call.places[len(ops) + results.index(err)] = []
    wanted = {bb.name for bb in lay.buffers if bb.role in ("cell", "sink")}
    half.picks = _picks(st, wanted, results)
    half.local = {n for n in half.picks if n in local or n.rpartition("_")[0] in local}
    half.cells_out = {c: results.index(cell_index(lay, c)) for c in lay.cells_out}
    _let_go(st)
    return half


def _whole_run_scans(lay, bufs: list, total: int) -> None:
    """A scan's block totals sized for the whole run's blocks, a reverse scan's two planes for the whole run's
    lanes, a fold's partials for the whole run's blocks (a shard writes those of the blocks and lanes it runs, at
    their global numbers; 0: the shard's own)."""
    if total:
        for r in lay.reductions:
            if r.kind == "fold" and not r.kept:
                k = lay.buffer_index(r.cell, "fold")
                bufs[k] = np.zeros(fold_values(r, total, 0), dtype=bufs[k].dtype)
        for j, buf in enumerate(lay.buffers):
            if buf.role == "scan":
                size = keyed_values(total, lay.keyed[buf.name]) if buf.name in lay.keyed else scan_values(total)
                bufs[j] = np.zeros(size, dtype=bufs[j].dtype)
            elif buf.role == "rscan":  # (values, then flags: the compiled code's second plane starts at L)
                bufs[j] = np.zeros(rscan_values(total, lay.comps.get(buf.name, 1)), dtype=bufs[j].dtype)


_SPARE = np.zeros(64)  # where a finish half's per-lane slots point: it never reads them


def _let_go(st: Prepared) -> None:
    """Drop the stand-ins and per-lane buffers a half was prepared with (each the size of a shard's lanes): a
    lanes half gets the framework's arrays patched in at every call, a finish half never touches lanes."""
    lanes_half = st.args.stage.finish == skip_address()
    for k, buf in enumerate(st.launcher.lay.buffers):
        if buf.role in ("in", "index", "table", "out"):
            st.buffers[k] = st.args.keep[k] = _SPARE
            if not lanes_half:  # (a lanes half's slots are patched before every launch; their sizes stay)
                st.args.vals[5 * k] = st.args.vals[5 * k + 1] = native.address(_SPARE)
    st.results = {}


def _unique(resets: list) -> list:
    seen, out = set(), []
    for a, fill in resets:
        if a.size and native.address(a) not in seen:
            seen.add(native.address(a))
            out.append((a, fill))
    return out
