"""The state of one lowering and the table of per-op rules.

A lowering (hawk/passes/lower_host.py, lower_gpu.py, lower_gpu_tree.py; the finish: finish.py) is a driver: it
makes a `Lowering` context, builds the functions and loops of its form, and lowers each hawk op by the rule
registered for the op and its target. Rules are plain functions `rule(cx, op) -> value | None` in the modules of
this package, one module per responsibility; a target registers its own variant only where its code really
differs (a "gpu" rule), else the shared one ("any") serves. Steps that several rules share and that differ per
target (adding into a sink's slot) are registered the same way under a step name and called with
`cx.apply(name, ...)`.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import memref, scf

from hawk.abi.layout import Layout
from hawk.ir.dialect import is_hawk
from hawk.passes.host_emit import Emit

TARGETS = ("host", "gpu")
LINE = 64  # bytes: host local buffers of at least this many start on a cache line (local_buffer)
HEAP_BYTES = 1 << 16  # the host's lanes function keeps at most this many bytes of local buffers on its stack (the
# rest on the heap: a thread's stack may be small, and the column shape's rows of many slots keep several buffers)
RULES: dict[tuple[str, str], Callable] = {}


def rule(name: str, target: str = "any") -> Callable[[Callable], Callable]:
    """Register `fn(cx, op_or_args...)` as the lowering of hawk op (or shared step) `name` for `target`
    ("any": every target without a variant of its own)."""
    if target != "any" and target not in TARGETS:
        raise ValueError(f"unknown lowering target {target!r}; known: {TARGETS}")

    def register(fn: Callable) -> Callable:
        if (name, target) in RULES:
            raise ValueError(f"two lowering rules for {name} on target {target!r}")
        RULES[(name, target)] = fn
        return fn

    return register


def rule_for(name: str, target: str) -> Callable:
    """The rule for `name` on `target`: the target's own variant, else the shared one."""
    fn = RULES.get((name, target)) or RULES.get((name, "any"))
    if fn is None:
        raise RuntimeError(f"internal error: no lowering rule for {name} on target {target!r}")
    return fn


class Lowering:
    """What the rules of one lowering share: the module, the stage's Layout, the emitter, the buffers of the
    function being built, and the loop state a driver sets (this lane, the accumulators, the chunk or thread).
    Target facts are fields, not subclasses: `target` picks rule variants, `exact_pairs` whether ordered sums
    keep two-float pairs (host), `wide_ok`/`wide_sums` whether wide payloads take component loops, `private`
    whether per-thread buffers live in GPU private memory, `atomic` the sinks added into by float atomics."""

    def __init__(self, module: ir.Module | None, layout: Layout, ftype: ir.Type, itypes: dict[str, ir.Type],
                 target: str = "host", *, exact_pairs: bool = True, wide: bool = True, private: bool = False,
                 atomic: frozenset[str] | set[str] = frozenset()):
        self.module, self.lay, self.e, self.itypes = module, layout, Emit(ftype), itypes
        self.axes = [a.label for a in layout.sig.lane_axes()]
        self.target = target
        self.exact_pairs = exact_pairs  # ordered sums over every lane keep two-float chains in full blocks
        self.wide_ok = self.wide_sums = wide  # wide payloads: component loops; sums: state in memory
        self.private = private
        self.atomic = set(atomic)
        # the function being built
        self.bufs: dict[tuple[str, str], ir.Value] = {}
        self.entry: ir.Block | None = None  # its entry block, where per-function buffers are allocated
        self.temps: dict = {}
        self.heap: list[ir.Value] | None = None  # local buffers on the heap (begin(heap=True), free_heap)
        self.stack_bytes = 0  # ... and the bytes of those on the stack
        self.top_values: dict = {}  # values made once before the loop that needs them, by key (at_top)
        # meta: lanes [lo, hi) of this chunk (or thread), its index, its private copy, lanes, extents, strides
        self.lo = self.hi = self.chunk = self.copy = self.L = None
        self.ext: list[ir.Value] = []
        self.stride: list[ir.Value] = []
        self.nthreads: ir.Value | None = None  # GPU chunk form: threads that run a chunk
        # the loop state a driver sets around each copy of the body
        self.lane: ir.Value | None = None
        self.accs: list[ir.Value] = []
        self.j: int | ir.Value | None = None  # chain of a straight-line copy (an int), or none
        self.known_coords: dict[str, ir.Value] = {}  # coordinates the loops already hold
        self.interior: dict[str, int] = {}  # axis -> margin: lanes at least this far from both edges
        self.bad_keys: tuple | None = None  # (buffer, at): bad keys counted in this (count, first key) pair
        # instead of the chunk's (sorted_streams: the streams' keys, counted again in lane order when it is not 0)
        self.kept_slot = self.kept_count = None  # a driver that knows a lane's kept slot (and the count)
        # (S, row0): the loop being lowered runs lanes of [row0, row0 + S) only, row0 a multiple of S (a row of
        # the column or nested shape, a slot's fold): a block total over spans S divides is one load per row
        self.lane_row: tuple[int, ir.Value] | None = None
        self.form = "flat"  # the loop shape of a chunk (chunk_form.py), read from hawk.chunk_form by the driver
        self.nested: dict[str, int] | None = None  # nested driver: kept totals' slots among the accumulators
        self.nested_slot: tuple | None = None  # nested driver: (the kept slot, kept slots per component)
        self.nest_wraps = False  # nested driver: a middle block of kept axes (chunk_form.nest_wraps)
        self.nested_group: dict | None = None  # nested driver, a group of copies: ordered terms for after it
        self.nested_group_at: ir.Value | None = None  # nested driver, a group of copies: its first lane
        self.nest_w = 8  # nested driver: lanes of a group of copies (nested_chains.group_width)
        self.nested_chain: dict | None = None  # nested driver, a block of groups: where each ordered component's
        # chains lie among the accumulators, and their range (nested_chains)
        self.column_late: dict = {}  # column driver: (cell, component) -> its highs, lows, and a row's late
        # values (reduce_kept.column_start)
        self.column_chains: dict = {}  # column driver: (cell, component) -> its chains' buffers (column_chains)
        self.column_tile: dict | None = None  # column driver, a tile's copies: (cell, component) -> their terms
        self.tile_j: int | None = None  # which copy of the tile is being lowered (column_tiles)
        self.tile_w = 0  # slots of a column tile (column_tiles.width)
        self.column_step: bool | None = None  # column driver, a row with chains: the late values' OR is
        self.column_any = -1  # accumulator column_any (column_chains.row_begin)
        # planned by state.plan_state and the folds
        self.full: list = []  # state.Acc per every-lane reduction
        self.runs: list = []  # sorted_runs.Run per sorted scatter
        self.scratch_at: list[int] = []  # where each chunk-state slot lands in #scratch
        self.nchunk_red = 0  # chunk-state slots of reductions (the runs' and flags' follow)
        self.n_terms = 0  # components of ordered sums kept in two-float chains (host)
        self.term_range: int | None = None  # first chain slot of the terms' ranges (state.plan_state)
        self.sae = False  # the code runs on x86-64 with AVX-512F (Spec.sae; lower_host sets it)
        self.fma_pipes = False  # ... on a CPU whose FMAs have pipes of their own (Spec.fma_pipes; lower_host)
        self.mxcsr = False  # ... on x86-64 with AVX and FMA: the inexact flag, terms on a grid (Spec.mxcsr; lower_host)
        self.flagged = False  # the ordered chains check the inexact flag, not a range (flag_chains.eligible)
        self.grids: dict = {}  # a block's (2**-g, 2**g) per (chain, component): flag_chains.grid
        self.stream: ir.Value | None = None  # host: whether this launch streams its per-lane outputs (stream.py)
        self.pending: dict = {}  # blocked driver: a group's terms per (chain, component), one per copy
        self.block_start: ir.Value | None = None  # blocked driver: the block's first lane
        self.folds: dict = {}
        self.scans: dict = {}  # scan cell -> (operator, value type) of the block totals this stage writes (scan.py)
        self.n_scans = 0  # chunk-state slots of scans' running values (the last of the chunk state)
        self.scan_blocked = False  # scan.scan_driver starts and ends each block's scans around its lane loop
        self.scan_tails: dict[int, int] = {}  # scan_driver: segmented totals folded after the loop (slot -> last)
        self.n_flags = 0
        self.reductions = self.full_iter = None  # rewrite_ops: the reductions in op order

    def begin(self, entry: ir.Block, heap: bool = False) -> None:
        """Start building a function whose entry block is `entry`: the per-function buffers and values made
        before its loops (temps, top_values) belong to the last one and are dropped. `heap`: local buffers past
        HEAP_BYTES of stack go to the heap (the caller frees them: free_heap, before the function returns)."""
        self.entry, self.temps, self.top_values = entry, {}, {}
        self.heap, self.stack_bytes = ([] if heap else None), 0

    def free_heap(self) -> None:
        """Free the heap buffers local_buffer made (at the insertion point: just before the return)."""
        for buf in self.heap or ():
            memref.DeallocOp(buf)
        self.heap = None

    def apply(self, name: str, *args) -> ir.Value | None:
        """Run the rule (or shared step) `name` for this lowering's target."""
        return rule_for(name, self.target)(self, *args)

    # ---- arguments ---------------------------------------------------------------------------------
    def arg_types(self) -> list[ir.Type]:
        dyn = ir.ShapedType.get_dynamic_size()
        elem = {"f": self.e.f, "f32": ir.F32Type.get(), "f64": self.e.f64, "i8": ir.IntegerType.get_signless(8),
                "i16": ir.IntegerType.get_signless(16), "i32": ir.IntegerType.get_signless(32), "i64": self.e.i64}
        return [ir.MemRefType.get([dyn], elem[b.dtype]) for b in self.lay.buffers]

    def args(self, f) -> dict[tuple[str, str], ir.Value]:
        block = f.regions[0].blocks[0]
        return {(b.name, b.role): block.arguments[k] for k, b in enumerate(self.lay.buffers)}

    def buf(self, name: str, roles=("in", "index", "param", "table", "out", "cell", "sink")) -> ir.Value:
        for r in roles:
            if (name, r) in self.bufs:
                return self.bufs[(name, r)]
        raise KeyError(name)

    def read_meta(self) -> None:
        """lo, hi, chunk and L from #meta = [lo, hi, chunk, L, extents...]; the lane axes' strides."""
        e = self.e
        meta = self.bufs[("#meta", "meta")]
        vals = [e.to_index(e.load(meta, e.c(k))) for k in range(4 + len(self.axes))]
        self.lo, self.hi, self.chunk, self.L = vals[:4]
        self.copy = self.chunk  # which private copy of a sink or kept cell this chunk adds into
        self.ext = vals[4:]
        self.stride = [None] * len(self.axes)
        s = e.c(1)
        for k in reversed(range(len(self.axes))):
            self.stride[k] = s
            s = e.mul_i(s, self.ext[k])

    def buffer_bytes(self, roles: tuple[str, ...]) -> ir.Value | None:
        """The bytes of this launch's buffers of the layout roles `roles` (their sizes, at run time); None when
        the stage has none (stream.flag: per-lane outputs; chain_passes.cached: per-lane inputs)."""
        e, total = self.e, None
        for b in self.lay.buffers:
            if b.role in roles:
                buf = self.bufs[(b.name, b.role)]
                size = e.mul_i(e.dim(buf), e.c(max(1, ir.MemRefType(buf.type).element_type.width // 8)))
                total = size if total is None else e.add_i(total, size)
        return total

    def at_top(self, key, make: Callable):
        """make() emitted once per function before the loop that needs it (memoized under `key`), or here when
        the insertion point is in the entry block itself (made for this use only)."""
        if key in self.top_values:
            return self.top_values[key]
        block, top = ir.InsertionPoint.current.block, None
        while block != self.entry:  # (the entry block's op that holds the insertion point: the lane loop)
            top = block.owner
            block = top.operation.block
        if top is None:
            return make()
        with ir.InsertionPoint(top):
            self.top_values[key] = make()
        return self.top_values[key]

    # ---- buffers of the function -----------------------------------------------------------------------
    def local_buffer(self, n: int, elem: ir.Type) -> ir.Value:
        """A buffer of n values allocated once at the top of the function (GPU: per thread, in private memory,
        address space 5 on AMD GPUs, where allocas must live). On the host's lanes function, once its buffers
        would take more than HEAP_BYTES of the stack, on the heap instead (freed by free_heap). Host buffers of a
        vector or more start on a cache line: a 64-byte vector store that straddles two lines costs two (the row
        chains' term buffer, written a group at a time, took 30% of a row sum's time at 8 bytes' alignment)."""
        space = ir.Attribute.parse("#gpu.address_space<private>") if self.private else None
        t = ir.MemRefType.get([n], elem, memory_space=space)
        size = n * max(1, getattr(elem, "width", 64) // 8)
        align = {"alignment": LINE} if self.target == "host" and size >= LINE else {}
        with ir.InsertionPoint.at_block_begin(self.entry):
            if self.heap is not None and self.stack_bytes + size > HEAP_BYTES:
                buf = memref.AllocOp(t, [], [], **align).result
                self.heap.append(buf)
                return buf
            self.stack_bytes += size
            return memref.AllocaOp(t, [], [], **align).result

    def temp(self, n: int, elem: ir.Type, tag: str = "") -> ir.Value:
        """A buffer of n components shared by every wide read and write of that size and type (and tag): each
        fills it and empties it before the next one starts."""
        key = (n, str(elem), tag)
        if key not in self.temps:
            self.temps[key] = self.local_buffer(n, elem)
        return self.temps[key]

    def is_wide(self, shape) -> bool:
        """A payload that takes loops over components (host_emit.WIDE_PAYLOAD) where this lowering allows."""
        return self.wide_ok and self.e.wide(shape)


def lanes_point(module: ir.Module, name: str) -> ir.InsertionPoint:
    """Where a driver puts the stage's lanes function (or gpu.module): before `@<name>_finish` when build-finish
    has made it (the lanes first, as the runtime's readers and the tests expect), else at the module's end."""
    for op in module.body.operations:
        attrs = op.operation.attributes
        if op.operation.name == "func.func" and ir.StringAttr(attrs["sym_name"]).value == f"{name}_finish":
            return ir.InsertionPoint(op)
    return ir.InsertionPoint(module.body)


# ---- copying and rewriting the body -------------------------------------------------------------------

def clone_body(cx: Lowering, body: ir.Block, anchor) -> list:
    """Copy the kernel body's ops before `anchor` (values remapped); the copies' top-level ops."""
    ops = [op for op in body.operations if op.operation.name != "func.return"]
    return clone_ops(ops, ir.InsertionPoint(anchor), {})


def lower_copy(cx: Lowering, body: ir.Block, anchor, lane: ir.Value, accs) -> None:
    """A copy of the kernel body before `anchor` (a placeholder yield), lowered for `lane` with the accumulators
    `accs`; the anchor's block then ends with a yield of the updated accumulators (chunk_loops.lower_body's work
    for a body that is copied again elsewhere)."""
    copies = clone_body(cx, body, anchor)
    cx.lane, cx.accs, cx.j = lane, list(accs), None
    rewrite_ops(cx, copies)
    with ir.InsertionPoint(anchor):
        scf.YieldOp(cx.accs)
    anchor.operation.erase()


def clone_ops(ops, ip, mapping: dict) -> list:
    """Copy `ops` at `ip`, each use of a value in `mapping` (and of an earlier op's result) replaced by its
    copy; `mapping` gains the copies' results. The copies' top-level ops."""
    out = []
    for op in ops:
        new = op.clone(ip=ip)
        nested = []

        def visit(o, nested=nested):
            nested.append(o)
            return ir.WalkResult.ADVANCE

        new.operation.walk(visit)
        for o in nested:
            for v in list(o.operands):
                if v in mapping:
                    o.operation.replace_uses_of_with(v, mapping[v])
        for old_r, new_r in zip(op.results, new.results, strict=True):
            mapping[old_r] = new_r
        out.append(new)
    return out


def rewrite(cx: Lowering, region_op) -> None:
    rewrite_ops(cx, [region_op])


def rewrite_ops(cx: Lowering, roots: list) -> None:
    """Lower every hawk op in (and under) `roots` by its rule, with the current lane, chain and accumulators.
    A rule returns the op's value (its uses take it) or None; the op goes either way."""
    ops = []

    def visit(op):
        if is_hawk(op):
            ops.append(op)
        return ir.WalkResult.ADVANCE

    for root in roots:
        root.operation.walk(visit)
    cells = [op for op in ops if is_hawk(op, "cell")]
    ops = [op for op in ops if not is_hawk(op, "cell")]
    for op in cells:  # a cell only names where a reduction lands; the lowered reduction writes it
        op.operation.erase()
    cx.reductions, cx.full_iter = iter(cx.lay.reductions), iter(cx.full)  # hawk.reduce ops come in this order
    for op in ops:
        with ir.InsertionPoint(op), op.location:
            new = rule_for(op.operation.name, cx.target)(cx, op)
            if new is not None:
                op.results[0].replace_all_uses_with(new)
            op.operation.erase()
