"""lower-gpu-lanes, chunk form: the host lowering's lane function as a GPU kernel, one chunk of lanes per thread.

For the stages `hawk.layout.gpu_form` gives "chunks" (scatters, reductions keeping different axes, every stage
with an ordered sum); the others take the tree forms of lower_gpu_tree.py.

Every thread runs exactly the code a host chunk runs (the same drivers), on lanes [chunk * C, chunk * C + C)
with chunk = its global id; it writes its partials where a host chunk would. It deposits the terms of ordered
sums over every lane into its own exact accumulators (#exact), and every term of an ordered sink or kept cell
into the slot's one accumulator that all threads share, with 64-bit integer atomics (hawk/exact.py; no
two-float pairs as host chunks keep them: `exact_pairs`). The finish stays a host function: the runtime copies
partials back and finishes on the host, so the chunk-order combines, the companions and the rounding of the
exact accumulators are the very same code as on the host, and ordered results are bitwise equal to the host's
(an exact sum does not depend on how the lanes were split).

meta for a GPU launch = [C (lanes per chunk), base, T (chunks), L, extents..., end]: thread t runs lanes
[max(base, t*C), min(end, t*C + C)), so chunks start on multiples of C counted from lane 0.

Wide payloads (host_emit.WIDE_PAYLOAD), where the target asks (`wide`): the host's component loops, with
per-thread buffers in private memory, and every op on a wide vector value a loop too (gpu_wide.py), so compile
time grows about linearly with the payload; per component otherwise. The finish takes the loops either way.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import gpu, memref, scf

from hawk.ir.build import create
from hawk.layout import gpu_form
from hawk.passes.gpu_wide import WideBuffers
from hawk.passes.lower_host import HostLowering

GPU_MODULE_SUFFIX = "_gpu"


class GpuLowering(HostLowering):
    # Wide payloads (host_emit.WIDE_PAYLOAD) take the host's component loops when the target asks for them
    # (`wide`: nvvm and rocdl, whose per-thread buffers live in private memory); else they stay per component
    # (spirv: lavapipe counts every component loop's trips against its per-invocation loop budget).
    wide_ok = wide_sums = False
    exact_pairs = False  # every thread deposits each ordered term (no two-float chains)

    def __init__(self, module, layout, ftype, itypes, atomics: bool = False, wide: bool = False):
        super().__init__(module, layout, ftype, itypes)
        self.atomic = set(layout.atomic_sinks()) if atomics else set()
        self.wide_ok = self.wide_sums = wide

    def local_buffer(self, n: int, elem: ir.Type) -> ir.Value:
        """A per-thread buffer: private memory (address space 5 on AMD GPUs, where allocas must live)."""
        space = ir.Attribute.parse("#gpu.address_space<private>")
        with ir.InsertionPoint.at_block_begin(self.entry):
            return memref.AllocaOp(ir.MemRefType.get([n], elem, memory_space=space), [], []).result

    def temp(self, n: int, elem: ir.Type, tag: str = "") -> ir.Value:
        """host_ops.temp's shared component buffer, in private memory."""
        key = (n, str(elem), tag)
        if key not in self.temps:
            self.temps[key] = self.local_buffer(n, elem)
        return self.temps[key]

    def build_finish(self, finish):
        """The finish runs on the host whatever the device variant: wide sums always take the host's component
        loops there. Their #scratch layout is that of per-component state, so one finish serves every variant
        of a stage (Kernel.gpu_finish) and the host's bits are kept."""
        for acc in self.full:
            acc.wide = self.e.wide(acc.r.payload)
        super().build_finish(finish)

    def add_into(self, policy: str, name: str, at, x, role: str):
        """A plain add into a large sink: one float atomic add where the target has them (the runtime then
        spreads the lanes over threads: `Layout.parallel_span(atomics=True)`). Ordered adds go to the host's
        exact accumulators (integer atomics where threads share one: every target has them)."""
        if name not in self.atomic or role != "sink" or policy != "plain":
            return super().add_into(policy, name, at, x, role)
        kind = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)  # arith::AtomicRMWKind::addf
        create("memref.atomic_rmw", [x, self.bufs[(name, "sink")], at], [x.type], {"kind": kind})

    def lanes_func(self):
        self.module.operation.attributes["gpu.container_module"] = ir.UnitAttr.get()
        mod = gpu.GPUModuleOp(f"{self.lay.name}{GPU_MODULE_SUFFIX}")
        mod.regions[0].blocks.append()
        with ir.InsertionPoint(mod.regions[0].blocks[0]):
            f = gpu.GPUFuncOp(ir.TypeAttr.get(ir.FunctionType.get(self.arg_types(), [])),
                              sym_name=f"{self.lay.name}_lanes", kernel=True)
        self._in_lanes = True
        self._kernel = f
        return f

    def lanes_return(self):
        gpu.ReturnOp([])
        self._in_lanes = False
        if self.wide_ok:  # wide vector values into per-thread buffers, their ops into component loops
            WideBuffers(self.local_buffer).run(self._kernel)

    def read_meta(self):
        if not getattr(self, "_in_lanes", False):
            return super().read_meta()
        e = self.e
        super().read_meta()  # extents, strides and L as on the host; lo, hi and chunk come from the thread id
        meta = self.bufs[("#meta", "meta")]
        span = e.to_index(e.load(meta, e.c(0)))
        base = e.to_index(e.load(meta, e.c(1)))
        self.nthreads = e.to_index(e.load(meta, e.c(2)))
        end = e.to_index(e.load(meta, e.c(4 + len(self.axes))))
        dim = ir.Attribute.parse("#gpu<dim x>")
        tid = create("gpu.thread_id", [], [e.index], {"dimension": dim}).result
        bid = create("gpu.block_id", [], [e.index], {"dimension": dim}).result
        bdim = create("gpu.block_dim", [], [e.index], {"dimension": dim}).result
        self.chunk = self.copy = e.add_i(e.mul_i(bid, bdim), tid)
        start = e.mul_i(self.chunk, span)
        self.hi = e.op("arith.minui", e.add_i(start, span), end)
        self.lo = e.op("arith.minui", e.op("arith.maxui", start, base), self.hi)

    def chunk_guard(self):
        e = self.e
        return scf.IfOp(e.cmpi(6, self.chunk, self.nthreads), [], has_else=False)  # ult


def lower_gpu(module: ir.Module, layout, ftype: ir.Type, itypes: dict[str, ir.Type], subgroup: int = 0,
              atomics: bool = False, wide: bool | str = False) -> None:
    """The form `gpu_form` picks (the runtime asks it too): "tree" and "slots" in lower_gpu_tree, else chunks.
    `wide`: wide payloads through component loops (per-thread buffers) rather than one op per component: True
    in every form, "tree" in the tree form only (spirv: a thread there runs few lanes), False nowhere."""
    from hawk.passes.lower_gpu_tree import TreeLowering

    form = gpu_form(layout, 8 if isinstance(ftype, ir.F64Type) else 4)
    if form == "chunks":
        GpuLowering(module, layout, ftype, itypes, atomics, wide is True).run()
    else:
        TreeLowering(module, layout, ftype, itypes, subgroup, wide is True or (wide == "tree" and form == "tree")).run()
