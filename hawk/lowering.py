"""The MLIR side of a kernel: build its hawk IR for a specialisation, split it into stages, analyse each stage's
layout, and lower a stage for the host or a GPU. Imported only when something must be compiled, so that a
kernel found in the disk cache (and a loaded artifact) runs without MLIR."""

from __future__ import annotations

from mlir import ir, passmanager

from hawk.frontend.visitor import KernelBuilder, Source
from hawk.ir.dialect import attr_str, attr_strs, is_hawk, new_context
from hawk.layout import Layout, Spec
from hawk.passes.analysis import analyse, written_names
from hawk.passes.pipeline import GPU, HOST, LLVM_PIPELINE, Job, Pipeline
from hawk.passes.stages import split_stages
from hawk.signature import Signature

_FTYPES = {"float64": ir.F64Type, "float32": ir.F32Type}
_ITYPES = {"int32": 32, "int64": 64}


def types(spec: Spec):
    """The MLIR float type and each Index plane's integer type of a specialisation (in the current context)."""
    ftype = _FTYPES[spec.float_dtype].get()
    itypes = {n: ir.IntegerType.get_signless(_ITYPES[d]) for n, d in spec.index_dtypes}
    return ftype, itypes


def short_dtypes(spec: Spec) -> dict[str, str]:
    return {n: ("i32" if d == "int32" else "i64") for n, d in spec.index_dtypes}


def build_hawk(source: Source, sig: Signature, name: str, spec: Spec) -> tuple[str, dict[str, str]]:
    """The checked hawk module of one specialisation, and each output's mode ('lane' or 'cell')."""
    with new_context(), ir.Location.unknown():
        ftype, itypes = types(spec)
        builder = KernelBuilder(source, sig, ftype, itypes)
        module = builder.build()
        try:
            module.operation.verify()
        except ir.MLIRError as exc:  # a front-end bug, not a user error
            raise RuntimeError(f"internal error: hawk IR of kernel '{name}' does not verify: {exc}") from exc
        Pipeline(("verify-hawk",)).run(module, None)
        if spec.auto_sum == "ordered":
            _auto_sums_ordered(module)
        return str(module), builder.outputs


def split(text: str, name: str, sig: Signature, outputs: dict[str, str]) -> list[tuple]:
    """The stages of a hawk module: (name, text, cells_in, cells_out, owns) each."""
    with new_context(), ir.Location.unknown():
        reserved = frozenset(p.name for p in sig.planes) | {"result"}
        parts = split_stages(text, name, reserved)
        names = {p.name for p in sig.planes if p.kind in ("output", "sink")} | set(outputs)
        written = [written_names(ir.Module.parse(p.text)) & names for p in parts]
        unwritten = names - set().union(*written)
        return [(p.name, p.text, p.cells_in, p.cells_out,
                 frozenset(w | (unwritten if k == len(parts) - 1 else set())))
                for k, (p, w) in enumerate(zip(parts, written, strict=True))]


def _analyse(module, sig, outputs, spec, st, multi: bool) -> Layout:
    return analyse(module, sig, outputs, st.name, short_dtypes(spec), set(st.owns) if multi else None,
                   st.cells_out)


def stage_layout(sig: Signature, outputs: dict[str, str], spec: Spec, st, multi: bool) -> Layout:
    with new_context(), ir.Location.unknown():
        return _analyse(ir.Module.parse(st.text), sig, outputs, spec, st, multi)


def lower_stage(sig, outputs, spec: Spec, st, multi: bool, dump=None, stop_after=None) -> tuple[str, Layout]:
    """A stage through the host pipeline: LLVM-dialect text and its layout."""
    with new_context() as ctx, ir.Location.unknown():
        ctx.allow_unregistered_dialects = False
        module = ir.Module.parse(st.text)
        ftype, itypes = types(spec)
        layout = _analyse(module, sig, outputs, spec, st, multi)
        Pipeline(HOST).run(module, Job(layout, ftype, itypes), dump=dump, stop_after=stop_after)
        return str(module), layout


def lower_stage_gpu(sig, outputs, spec: Spec, st, multi: bool, subgroup: int = 0,
                    atomics: bool = False, wide: bool | str = False) -> tuple[str, str, Layout]:
    """A stage for a GPU target: its gpu.module text, its host finish (LLVM dialect) and its layout. `subgroup`:
    the target's shuffle width (0: none); `atomics`: whether it has float atomic adds; `wide`: where wide
    payloads take component loops through per-thread buffers (the target's `wide_loops`: True, "tree", False)."""
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(st.text)
        ftype, itypes = types(spec)
        layout = _analyse(module, sig, outputs, spec, st, multi)
        Pipeline(GPU).run(module, Job(layout, ftype, itypes, subgroup, atomics, wide))
        gpu_text = "module attributes {gpu.container_module} {\n" + "\n".join(
            str(op) for op in module.body.operations if op.operation.name == "gpu.module") + "\n}\n"
        for op in list(module.body.operations):
            if op.operation.name == "gpu.module":
                op.operation.erase()
        passmanager.PassManager.parse(LLVM_PIPELINE).run(module.operation)
        return gpu_text, str(module), layout


def _auto_sums_ordered(module: ir.Module) -> None:
    """Make every policy="auto" sum over all lanes an ordered one (artifact builds)."""

    def visit(op):
        if is_hawk(op, "reduce") and attr_str(op, "policy") == "auto" and attr_str(op, "kind") in ("sum", "mean") \
                and not _keeps_axes(op):
            op.attributes["policy"] = ir.StringAttr.get("ordered")
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)


def _keeps_axes(op) -> bool:
    over = set(attr_strs(op, "over"))
    func_op = op.operation.parent
    while func_op.name != "func.func":
        func_op = func_op.parent
    return False if "hawk.axes" not in func_op.attributes else bool(set(attr_strs(func_op, "hawk.axes")) - over)
