"""map-lanes-gpu, tree form: workgroups take spans of lanes, threads take every WORKGROUP-th lane of their
group's span, and the group's partials meet in a tree in workgroup (shared) memory.

Used for the "tree" and "slots" forms of `hawk.abi.layout.gpu_form` (stages without scatters and without
policy="ordered"); the others keep the chunk-per-thread form of lower_gpu.py, where an ordered sum deposits its
terms into exact accumulators (hawk/exact.py) as a host chunk does. In "slots" form a thread owns a kept slot of
the stage's reductions that keep lane axes and runs that slot's lanes in lane order (see slots_driver). In "tree"
form group g of G runs lanes [max(base, g*C), min(end, g*C+C)) with C a multiple of GROUP_ALIGN (meta = [C,
base, G, L, extents..., end], as in the chunk form), so neighbouring threads read neighbouring lanes.

Every-lane reductions keep per-thread state exactly as a host chunk does (float64 partials; Neumaier pairs for
"compensated"; an exact lane count for means). The WORKGROUP states then meet in a fixed pairwise tree in shared
memory (compensated pairs combined with their corrections), and thread 0 writes the group's partials to
#scratch[g * width ...]: the host finish then combines the G group partials in group order, as it combines host
chunks ("two passes", no float atomics needed on any target).

Subgroups: for a target with a known subgroup width (`subgroup`: 32 for an NVIDIA warp, 64 or 32 for an AMD
wavefront; on spirv, the size deployed with `subgroup=`) the per-thread states first combine in registers with
`gpu.shuffle xor`, a butterfly (float64 and integer shuffles lower to NVVM, ROCDL and SPIR-V), and only one
state per subgroup goes through shared memory. gpu.subgroup_reduce is not used: MLIR 22 lowers it for floats on
neither NVVM nor ROCDL. SPIR-V gets the shared-memory tree by default: MLIR lowers gpu.shuffle to SPIR-V only at
the one subgroup size of the target environment, and a Vulkan device's size is known only at run time
(lavapipe's is 8); `shuffle down` does not lower to SPIR-V with 64-bit indices.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

import hawk.passes.lower  # noqa: F401  (registers the rules)
from hawk.abi.layout import WORKGROUP, kept_run
from hawk.ir.access import kernel_func
from hawk.ir.build import create
from hawk.passes.host_emit import _EQ
from hawk.passes.lower import folds, state
from hawk.passes.lower.chunk_loops import lane_guard, lower_body
from hawk.passes.lower.context import lanes_point
from hawk.passes.lower_gpu import gpu_context, gpu_lanes_func, gpu_return

_ULT = 6


class TreeLowering:
    """The driver of the tree and slots forms: a lowering context of the "gpu" target (hawk/passes/lower/), the
    group's shared memory, and the strided or per-slot lane loops; the per-thread states meet in a tree."""

    def __init__(self, module, layout, ftype, itypes, subgroup: int = 0, wide: bool = False):
        bad = [r.cell for r in layout.reductions if r.kind in ("sum", "mean") and r.policy == "ordered"]
        if bad or layout.sinks:  # ordered sums deposit into exact accumulators, in the chunk form only
            raise ValueError(f"kernel '{layout.name}': the tree forms take neither sinks nor ordered sums "
                             f"({sorted(set(bad)) or sorted(layout.sinks)}): hawk.abi.layout.gpu_form gives such a "
                             "stage the chunk form")
        if subgroup and WORKGROUP % subgroup:
            raise ValueError(f"a subgroup of {subgroup} threads does not divide a workgroup of {WORKGROUP}")
        self.cx = cx = gpu_context(module, layout, ftype, itypes, wide=wide)
        self.e, self.lay, self.subgroup = cx.e, layout, subgroup
        # Reads, writes and kept-axis sums of wide payloads take component loops (`wide`); sums over every lane
        # keep per-thread registers: a tree form's shared memory (SHARED_BUDGET) holds their states only up to
        # a few dozen components.
        cx.wide_sums = False

    def run(self) -> None:
        cx = self.cx
        kfunc = kernel_func(cx.module)
        folds.collect_folds(cx, kfunc)
        with lanes_point(cx.module, self.lay.name), kfunc.location:
            lanes = self.lanes_func()
        self.build_lanes(lanes, kfunc)
        kfunc.operation.erase()
        folds.drop_combiners(cx)

    def lanes_func(self):
        f = gpu_lanes_func(self.cx)
        e = self.e
        # per-thread float64 states; with shuffles, one state per subgroup
        red = self.lay.width * (WORKGROUP // self.subgroup if self.subgroup else WORKGROUP)
        space = ir.Attribute.parse("#gpu.address_space<workgroup>")
        self.shared_types = {"red": ir.MemRefType.get([red], e.f64, memory_space=space)} if red else {}
        f.operation.attributes["workgroup_attributions"] = ir.IntegerAttr.get(e.i64, len(self.shared_types))
        return f

    def build_lanes(self, lanes, kfunc):
        cx = self.cx
        entry = lanes.add_entry_block()
        with kfunc.location:
            self.shared = {name: entry.add_argument(t, kfunc.location) for name, t in self.shared_types.items()}
        cx.bufs = cx.args(lanes)
        cx.begin(entry)  # component buffers of wide payloads
        body = kfunc.regions[0].blocks[0]
        with ir.InsertionPoint(entry), kfunc.location:
            self.read_meta()
            self.lanes_body(body)
            gpu_return(cx, lanes)

    def read_meta(self):
        cx, e = self.cx, self.e
        cx.read_meta()  # extents, strides and L as on the host
        meta = cx.bufs[("#meta", "meta")]
        span = e.to_index(e.load(meta, e.c(0)))
        base = e.to_index(e.load(meta, e.c(1)))
        end = e.to_index(e.load(meta, e.c(4 + len(cx.axes))))
        dim = ir.Attribute.parse("#gpu<dim x>")
        self.tid = create("gpu.thread_id", [], [e.index], {"dimension": dim}).result
        cx.chunk = create("gpu.block_id", [], [e.index], {"dimension": dim}).result  # the group's scratch slot
        cx.copy = e.c(0)  # a kept cell's one copy: each of its slots has one thread
        if any(r.kept for r in self.lay.reductions):  # "slots": threads pick their lanes by kept slot
            cx.hi = end
            cx.lo = e.op("arith.minui", base, end)
            return
        start = e.mul_i(cx.chunk, span)
        cx.hi = e.op("arith.minui", e.add_i(start, span), end)
        cx.lo = e.op("arith.minui", e.op("arith.maxui", start, base), cx.hi)

    # ---- the lanes ------------------------------------------------------------------------------------------
    def lanes_body(self, body: ir.Block):
        chunk0, _ = state.plan_state(self.cx, body)
        self.cx.nested, self.cx.j = None, None
        if any(r.kept for r in self.lay.reductions):
            final = self.slots_driver(body, chunk0)
        else:
            final = self.strided_driver(body, chunk0)
        self.group_tree(final[:self.cx.nchunk_red])

    def strided_driver(self, body: ir.Block, chunk0: list[ir.Value]) -> list[ir.Value]:
        e = self.e
        loop = scf.ForOp(e.add_i(self.cx.lo, self.tid), self.cx.hi, e.c(WORKGROUP), chunk0)
        with ir.InsertionPoint(loop.body):
            anchor = scf.YieldOp(list(loop.inner_iter_args))
        lower_body(self.cx, body, anchor, loop, loop.induction_variable, loop.inner_iter_args)
        return list(loop.results)

    def slots_driver(self, body: ir.Block, chunk0: list[ir.Value]) -> list[ir.Value]:
        """Thread g*WORKGROUP + t owns kept slot s and runs its lanes in lane order: s*S ... s*S + S-1 when the
        leading axes are kept (S lanes per slot), s, s+K, s+2K ... when the trailing ones are (K slots), else the
        reduced axes' coordinates counted row-major with the kept ones fixed. It alone updates its slot, so the
        slot sees the host's sequence of adds (every policy: compensated pairs and means as on the host)."""
        e = self.e
        side, kept = kept_run(self.lay)
        axes = self.lay.sig.lane_axes()
        slot = e.add_i(e.mul_i(self.cx.chunk, e.c(WORKGROUP)), self.tid)
        if side == "leading":
            span = 1
            for a in axes[len(kept):]:
                span *= a.extent
            start = e.mul_i(slot, e.c(span))  # a slot past the last starts past hi: no lanes
            lo = e.op("arith.maxui", start, self.cx.lo)
            hi = e.op("arith.minui", e.add_i(start, e.c(span)), self.cx.hi)
            self.cx.kept_slot, self.cx.kept_count = slot, e.op("arith.divui", self.cx.L, e.c(span))  # before the loop
            loop = scf.ForOp(lo, e.op("arith.maxui", lo, hi), e.c(1), chunk0)
            with ir.InsertionPoint(loop.body):
                anchor = scf.YieldOp(list(loop.inner_iter_args))
            lower_body(self.cx, body, anchor, loop, loop.induction_variable, loop.inner_iter_args)
        elif side == "any":
            loop, anchor, guard, lane, cur = self.any_slot_loop(slot, kept, chunk0)
            lower_body(self.cx, body, anchor, guard, lane, cur)
        else:
            k = 1
            for a in axes[len(axes) - len(kept):]:
                k *= a.extent
            rlo = e.op("arith.divui", self.cx.lo, e.c(k))
            rhi = e.op("arith.divui", e.add_i(self.cx.hi, e.c(k - 1)), e.c(k))
            self.cx.kept_slot, self.cx.kept_count = slot, e.c(k)
            loop = scf.ForOp(rlo, e.select(e.cmpi(_ULT, slot, e.c(k)), rhi, rlo), e.c(1), chunk0)
            with ir.InsertionPoint(loop.body):
                lane = e.add_i(e.mul_i(loop.induction_variable, e.c(k)), slot)
                cur = list(loop.inner_iter_args)
                guard, anchor = lane_guard(self.cx, lane, self.cx.lo, self.cx.hi, cur)
                scf.YieldOp(list(guard.results))
            if len(axes) == 2:  # rows and columns: both coordinates without a division
                self.cx.known_coords = {axes[0].label: loop.induction_variable, axes[1].label: slot}
            lower_body(self.cx, body, anchor, guard, lane, cur)
        self.cx.kept_slot, self.cx.known_coords = None, {}
        return list(loop.results)

    def any_slot_loop(self, slot, kept, chunk0):
        """The loop over one kept slot's lanes when its axes are neither leading nor trailing: r counts the
        reduced coordinates row-major (lane order, the kept coordinates fixed); every coordinate is known."""
        e = self.e
        axes = self.lay.sig.lane_axes()
        kpos = [i for i, a in enumerate(axes) if a.label in kept]
        rpos = [i for i in range(len(axes)) if i not in kpos]
        coords, rest, slots = {}, slot, e.c(1)
        for i in reversed(kpos):
            coords[i] = e.op("arith.remui", rest, self.cx.ext[i])
            rest = e.op("arith.divui", rest, self.cx.ext[i])
            slots = e.mul_i(slots, self.cx.ext[i])
        count = e.c(1)
        for i in rpos:
            count = e.mul_i(count, self.cx.ext[i])
        self.cx.kept_slot, self.cx.kept_count = slot, slots
        loop = scf.ForOp(e.c(0), e.select(e.cmpi(_ULT, slot, slots), count, e.c(0)), e.c(1), chunk0)
        with ir.InsertionPoint(loop.body):
            rest = loop.induction_variable
            for i in reversed(rpos):
                coords[i] = e.op("arith.remui", rest, self.cx.ext[i])
                rest = e.op("arith.divui", rest, self.cx.ext[i])
            lane = e.c(0)
            for i in range(len(axes)):
                lane = e.add_i(lane, e.mul_i(coords[i], self.cx.stride[i]))
            cur = list(loop.inner_iter_args)
            guard, anchor = lane_guard(self.cx, lane, self.cx.lo, self.cx.hi, cur)
            scf.YieldOp(list(guard.results))
        self.cx.known_coords = {axes[i].label: coords[i] for i in range(len(axes))}
        return loop, anchor, guard, lane, cur

    # ---- the group's partials -------------------------------------------------------------------------------
    def barrier(self):
        create("gpu.barrier", [], [], {})

    def group_tree(self, state: list[ir.Value]) -> None:
        """The WORKGROUP threads' chunk states as one; thread 0 writes the group's partials to #scratch. With a
        subgroup width, each subgroup first combines in registers (a shuffle-xor butterfly), then thread 0
        combines the subgroups' states in order; else the states meet pairwise in shared memory."""
        if not state:
            return
        e = self.e
        vals = [e.op("arith.sitofp", v, t=e.f64) if v.type == e.i64 else e.widen(v, e.f64) for v in state]
        if self.subgroup:
            self.subgroup_tree(vals)
            return
        red = self.shared["red"]
        G = WORKGROUP
        for k, v in enumerate(vals):
            e.store(v, red, e.add_i(e.c(k * G), self.tid))
        half = G // 2
        while half:
            self.barrier()
            step = scf.IfOp(e.cmpi(_ULT, self.tid, e.c(half)), [], has_else=False)
            with ir.InsertionPoint(step.then_block):
                mine = [e.add_i(e.c(k * G), self.tid) for k in range(len(vals))]
                other = [e.add_i(m, e.c(half)) for m in mine]
                a = [e.load(red, m) for m in mine]
                b = [e.load(red, o) for o in other]
                for k, v in enumerate(self.combine(a, b)):
                    e.store(v, red, mine[k])
                scf.YieldOp([])
            half //= 2
        self.write_group([lambda k=k: e.load(red, e.c(k * G)) for k in range(len(vals))])

    def subgroup_tree(self, vals: list[ir.Value]) -> None:
        e = self.e
        S, i32 = self.subgroup, ir.IntegerType.get_signless(32)
        xor = ir.Attribute.parse("#gpu<shuffle_mode xor>")
        off = S // 2
        while off:
            got = [create("gpu.shuffle", [v, e.c(off, i32), e.c(S, i32)], [v.type, e.i1], {"mode": xor}).results[0]
                   for v in vals]
            vals = self.combine(vals, got)  # a butterfly: lane 0 ends with the subgroup's state (as every lane)
            off //= 2
        groups = WORKGROUP // S
        if groups == 1:
            self.write_group([lambda v=v: v for v in vals])
            return
        red = self.shared["red"]
        lead = scf.IfOp(e.cmpi(_EQ, e.op("arith.remui", self.tid, e.c(S)), e.c(0)), [], has_else=False)
        with ir.InsertionPoint(lead.then_block):
            sg = e.op("arith.divui", self.tid, e.c(S))
            for k, v in enumerate(vals):
                e.store(v, red, e.add_i(e.c(k * groups), sg))
            scf.YieldOp([])
        self.barrier()
        first = scf.IfOp(e.cmpi(_EQ, self.tid, e.c(0)), [], has_else=False)
        with ir.InsertionPoint(first.then_block):
            acc = [e.load(red, e.c(k * groups)) for k in range(len(vals))]
            for g in range(1, groups):
                acc = self.combine(acc, [e.load(red, e.c(k * groups + g)) for k in range(len(vals))])
            self.store_scratch(acc)
            scf.YieldOp([])

    def write_group(self, loads) -> None:
        """Thread 0 writes the group's partials (each from `loads[k]()`, evaluated inside its branch)."""
        e = self.e
        last = scf.IfOp(e.cmpi(_EQ, self.tid, e.c(0)), [], has_else=False)
        with ir.InsertionPoint(last.then_block):
            self.store_scratch([f() for f in loads])
            scf.YieldOp([])

    def store_scratch(self, vals: list[ir.Value]) -> None:
        e = self.e
        scratch = self.cx.bufs[("#scratch", "scratch")]
        base = e.mul_i(self.cx.chunk, e.c(max(self.lay.width, 1)))
        for k, v in enumerate(vals):
            e.store(v, scratch, e.add_i(base, e.c(k)))

    def combine(self, a: list[ir.Value], b: list[ir.Value]) -> list[ir.Value]:
        """Two threads' chunk states as one, slot by slot, as the host finish combines chunks."""
        e = self.e
        out = list(a)
        for acc in self.cx.full:
            at, n = acc.slot, acc.n  # the state slot (as the scratch slot: no wide sums on GPUs)
            if acc.policy == "compensated":
                for c in range(n):
                    ns, nc = e.neumaier(a[at + c], a[at + n + c], b[at + c])
                    out[at + c], out[at + n + c] = ns, e.add(nc, b[at + n + c])
                at += 2 * n
            elif acc.policy == "fast":
                for c in range(n):
                    out[at + c] = e.add(a[at + c], b[at + c])
                at += n
            elif acc.policy in ("max", "min"):
                for c in range(n):
                    out[at + c] = e.extremum(acc.policy, a[at + c], b[at + c])
                at += n
            if acc.r.kind == "mean":
                out[at] = e.add(a[at], b[at])
        return out

