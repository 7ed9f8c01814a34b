"""map-lanes-gpu: the kernel func as a gpu.module kernel in the form the gpu-form pass wrote (`hawk.gpu_form`);
here the chunk form, the host's chunk loops as a GPU kernel, one chunk of lanes per thread.

For the stages `hawk.abi.layout.gpu_form` gives "chunks" (scatters, reductions keeping different axes, every stage
with an ordered sum); "tree" and "slots" take the tree forms of lower_gpu_tree.py, "blocks" block.py's.

Every thread runs exactly the code a host chunk runs (the same loop shapes, hawk/passes/lower/chunk_loops.py,
and the same rules, with the "gpu" variant where one is registered), on lanes [chunk * C, chunk * C + C) with
chunk = its global id; it writes its partials where a host chunk would. It deposits the terms of ordered sums
over every lane into its own exact accumulators (#exact), and every term of an ordered sink or kept cell into
the slot's one accumulator that all threads share, with 64-bit integer atomics (hawk/exact.py; no two-float
pairs as host chunks keep them: `exact_pairs=False`). The finish stays a host function: the runtime copies
partials back and finishes on the host (`@<k>_finish`, made by build-finish{target=gpu} before this pass runs;
the gpu.module goes before it), so the chunk-order combines, the companions and the rounding of the
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
from mlir.dialects import gpu, scf

import hawk.passes.lower  # noqa: F401  (registers the rules)
from hawk.abi.layout import gpu_form
from hawk.ir.access import kernel_func
from hawk.ir.build import create
from hawk.passes import chunk_form
from hawk.passes.gpu_wide import WideBuffers
from hawk.passes.lower import chunk_loops, folds
from hawk.passes.lower.context import Lowering, lanes_point

GPU_MODULE_SUFFIX = "_gpu"


def gpu_context(module, layout, ftype, itypes, atomics: bool = False, wide: bool = False) -> Lowering:
    """The lowering context of a GPU kernel: "gpu" rules, per-thread buffers in private memory, every ordered
    term deposited (no two-float chains), wide payloads through component loops only where the target asks
    (nvvm and rocdl; spirv: lavapipe counts every loop's trips against its per-invocation budget)."""
    return Lowering(module, layout, ftype, itypes, "gpu", exact_pairs=False, wide=wide, private=True,
                    atomic=set(layout.atomic_sinks()) if atomics else set())


def gpu_lanes_func(cx: Lowering) -> gpu.GPUFuncOp:
    """The gpu.module with the kernel's gpu.func (its arguments: the layout's buffers)."""
    cx.module.operation.attributes["gpu.container_module"] = ir.UnitAttr.get()
    mod = gpu.GPUModuleOp(f"{cx.lay.name}{GPU_MODULE_SUFFIX}")
    mod.regions[0].blocks.append()
    with ir.InsertionPoint(mod.regions[0].blocks[0]):
        return gpu.GPUFuncOp(ir.TypeAttr.get(ir.FunctionType.get(cx.arg_types(), [])),
                             sym_name=f"{cx.lay.name}_lanes", kernel=True)


def gpu_return(cx: Lowering, kernel) -> None:
    gpu.ReturnOp([])
    if cx.wide_ok:  # wide vector values into per-thread buffers, their ops into component loops
        WideBuffers(cx.local_buffer).run(kernel)


def read_thread_meta(cx: Lowering) -> None:
    """Extents, strides and L as on the host; lo, hi and chunk from the thread's global id. In a slot-range
    stage split into P > 1 ranges (#parts) every thread runs every lane, [base, end), applying its own slots
    (hawk/passes/lower/slot_ranges.py)."""
    e = cx.e
    cx.read_meta()
    meta = cx.bufs[("#meta", "meta")]
    span = e.to_index(e.load(meta, e.c(0)))
    base = e.to_index(e.load(meta, e.c(1)))
    cx.nthreads = e.to_index(e.load(meta, e.c(2)))
    end = e.to_index(e.load(meta, e.c(4 + len(cx.axes))))
    dim = ir.Attribute.parse("#gpu<dim x>")
    tid = create("gpu.thread_id", [], [e.index], {"dimension": dim}).result
    bid = create("gpu.block_id", [], [e.index], {"dimension": dim}).result
    bdim = create("gpu.block_dim", [], [e.index], {"dimension": dim}).result
    cx.chunk = cx.copy = e.add_i(e.mul_i(bid, bdim), tid)
    start = e.mul_i(cx.chunk, span)
    hi = e.op("arith.minui", e.add_i(start, span), end)
    lo = e.op("arith.minui", e.op("arith.maxui", start, base), hi)
    if ("#parts", "parts") in cx.bufs:
        ranges = e.cmpi(8, e.load(cx.bufs[("#parts", "parts")], e.c(0)), e.c(1, e.i64))  # ugt: P > 1
        lo, hi = e.select(ranges, e.op("arith.minui", base, end), lo), e.select(ranges, end, hi)
    cx.lo, cx.hi = lo, hi


def lower_gpu_chunks(module: ir.Module, layout, ftype: ir.Type, itypes: dict[str, ir.Type], atomics: bool = False,
                     wide: bool = False) -> None:
    cx = gpu_context(module, layout, ftype, itypes, atomics, wide)
    kfunc = kernel_func(module)
    cx.form = chunk_form.read(kfunc, layout, cx.exact_pairs, cx.wide_ok, "map-lanes-gpu")
    folds.collect_folds(cx, kfunc)
    with lanes_point(module, layout.name), kfunc.location:
        lanes = gpu_lanes_func(cx)
    entry = lanes.add_entry_block()
    cx.bufs = cx.args(lanes)
    cx.begin(entry)
    with ir.InsertionPoint(entry), kfunc.location:
        read_thread_meta(cx)
        live = scf.IfOp(cx.e.cmpi(6, cx.chunk, cx.nthreads), [], has_else=False)  # ult: past the last chunk, nothing
        with ir.InsertionPoint(live.then_block):
            chunk_loops.lanes_body(cx, kfunc.regions[0].blocks[0])
            scf.YieldOp([])
        gpu_return(cx, lanes)
    kfunc.operation.erase()
    folds.drop_combiners(cx)


FORM = "hawk.gpu_form"  # the kernel func's attribute written by gpu-form: one of FORMS
FORMS = ("tree", "slots", "chunks", "blocks")


def write_form(func, layout, ftype: ir.Type) -> str:
    """gpu-form: record on the kernel func the form `gpu_form` picks for its Layout (the runtime asks it too)."""
    form = gpu_form(layout, 8 if isinstance(ftype, ir.F64Type) else 4)
    func.operation.attributes[FORM] = ir.StringAttr.get(form)
    return form


def read_form(func, what: str) -> str:
    attrs = func.operation.attributes
    if FORM not in attrs:
        name = ir.StringAttr(attrs["sym_name"]).value
        raise ValueError(f"{what}: kernel func '{name}' has no {FORM} attribute: run gpu-form first")
    form = ir.StringAttr(attrs[FORM]).value
    if form not in FORMS:
        raise ValueError(f"{what}: {FORM} = {form!r} is not a GPU form; write one of {', '.join(FORMS)}")
    return form


def lower_gpu(module: ir.Module, layout, ftype: ir.Type, itypes: dict[str, ir.Type], form: str, subgroup: int = 0,
              atomics: bool = False, wide: bool | str = False) -> None:
    """The kernel func in `form`: "tree" and "slots" in lower_gpu_tree, "blocks" in block.py, else chunks.
    `wide`: wide payloads through component loops (per-thread buffers) rather than one op per component: True
    in every form, "tree" in the tree form only (spirv: a thread there runs few lanes), False nowhere."""
    from hawk.passes.lower_gpu_tree import TreeLowering

    if form == "blocks":  # block reductions in workgroups (hawk/passes/lower/block.py)
        from hawk.passes.lower.block import lower_gpu_blocks

        lower_gpu_blocks(module, layout, ftype, itypes, wide is True)
    elif form == "chunks":
        lower_gpu_chunks(module, layout, ftype, itypes, atomics, wide is True)
    else:
        TreeLowering(module, layout, ftype, itypes, subgroup, wide is True or (wide == "tree" and form == "tree")).run()
