"""The MLIR side of a kernel: build its hawk IR for a specialisation, split it into stages, analyse each stage's
layout, and lower a stage for the host or a GPU. Imported only when something must be compiled, so that a
kernel found in the disk cache (and a loaded artifact) runs without MLIR."""

from __future__ import annotations

import contextlib
import threading

from mlir import ir

from hawk.abi.layout import Layout, Spec
from hawk.abi.signature import Signature
from hawk.frontend.visitor import KernelBuilder, Source
from hawk.ir.access import enclosing_func, kernel_axes, policy, reduce_kind, reduce_over, set_policy
from hawk.ir.dialect import is_hawk, new_context
from hawk.passes.analysis import written_names
from hawk.passes.base import kernel_funcs
from hawk.passes.pipeline import HOST, Pipeline, gpu_pipeline
from hawk.passes.plan import annotate, module_layout, set_stage, spec_types
from hawk.passes.stages import split_stages

_front = threading.local()


@contextlib.contextmanager
def front_end():
    """One context for the front-end steps of one kernel (build_hawk, split, stage_layout) run inside it, instead
    of a context each (making one is about 4 ms, a third of a small kernel's whole build)."""
    if getattr(_front, "ctx", None) is not None:
        yield
        return
    with new_context() as ctx, ir.Location.unknown():
        _front.ctx = ctx
        try:
            yield
        finally:
            _front.ctx = None


def _context():
    """The front end's context when one is open on this thread (front_end), else a new one."""
    ctx = getattr(_front, "ctx", None)
    return contextlib.nullcontext() if ctx is not None else new_context()


def build_hawk(source: Source, sig: Signature, name: str, spec: Spec) -> tuple[str, dict[str, str], list[str]]:
    """The checked hawk module of one specialisation, each output's mode ('lane' or 'cell'), and the outputs whose
    initial contents the body reads (before assigning them)."""
    with _context(), ir.Location.unknown():
        ftype, itypes = spec_types(spec)
        builder = KernelBuilder(source, sig, ftype, itypes)
        module = builder.build()
        try:
            module.operation.verify()
        except ir.MLIRError as exc:  # a front-end bug, not a user error
            raise RuntimeError(f"internal error: hawk IR of kernel '{name}' does not verify: {exc}") from exc
        annotate(module, sig, builder.outputs, spec)  # the printed IR carries its facts: hawk-opt can compile it
        Pipeline(("verify-hawk",)).run(module)  # (after annotate: block reductions need the Grid's extents)
        if spec.auto_sum == "ordered":
            _auto_sums_ordered(module)
        return str(module), builder.outputs, sorted(builder.out_reads)


def split(text: str, name: str, sig: Signature, outputs: dict[str, str]) -> list[tuple]:
    """The stages of a hawk module: (name, text, cells_in, cells_out, owns) each."""
    with _context(), ir.Location.unknown():
        reserved = frozenset(p.name for p in sig.planes) | {"result"}
        parts = split_stages(text, name, reserved)
        names = {p.name for p in sig.planes if p.kind in ("output", "sink")} | set(outputs)
        written = [written_names(ir.Module.parse(p.text)) & names for p in parts]
        unwritten = names - set().union(*written)
        out = []
        for k, (p, w) in enumerate(zip(parts, written, strict=True)):
            owns = frozenset(w | (unwritten if k == len(parts) - 1 else set()))
            text = p.text
            if len(parts) > 1:  # each stage's text carries its own facts, so hawk-opt can compile it alone
                module = ir.Module.parse(text)
                (func,) = kernel_funcs(module)
                set_stage(func, p.cells_in, p.cells_out, owns)
                text = str(module)
            out.append((p.name, text, p.cells_in, p.cells_out, owns))
        return out


def _stage_module(sig: Signature, outputs: dict[str, str], spec: Spec, st, multi: bool) -> ir.Module:
    """A stage's hawk module with the facts plan-buffers reads written onto its kernel func (hawk/passes/plan.py)."""
    module = ir.Module.parse(st.text)
    annotate(module, sig, outputs, spec, (st.cells_in, st.cells_out, st.owns) if multi else None)
    return module


def stage_layout(sig: Signature, outputs: dict[str, str], spec: Spec, st, multi: bool) -> Layout:
    """A stage's Layout without lowering it: plan-buffers, read back from the attribute it writes."""
    with _context(), ir.Location.unknown():
        module = _stage_module(sig, outputs, spec, st, multi)
        Pipeline(("plan-buffers",)).run(module)
        return module_layout(module)


def lower_stage(sig, outputs, spec: Spec, st, multi: bool, dump=None, stop_after=None) -> tuple[str, Layout]:
    """A stage through the host pipeline: LLVM-dialect text and the layout read off the lowered module."""
    with new_context() as ctx, ir.Location.unknown():
        ctx.allow_unregistered_dialects = False
        module = _stage_module(sig, outputs, spec, st, multi)
        Pipeline(HOST).run(module, dump=dump, stop_after=stop_after)
        return str(module), None if stop_after else module_layout(module)


def lower_stage_gpu(sig, outputs, spec: Spec, st, multi: bool, subgroup: int = 0,
                    atomics: bool = False, wide: bool | str = False) -> tuple[str, str, Layout]:
    """A stage for a GPU target: its gpu.module text, its host finish (LLVM dialect) and its layout. `subgroup`:
    the target's shuffle width (0: none); `atomics`: whether it has float atomic adds; `wide`: where wide
    payloads take component loops through per-thread buffers (the target's `wide_loops`: True, "tree", False)."""
    with new_context(), ir.Location.unknown():
        module = _stage_module(sig, outputs, spec, st, multi)
        Pipeline(gpu_pipeline(subgroup, atomics, wide)).run(module)
        gpu_ops = [op for op in module.body.operations if op.operation.name == "gpu.module"]
        gpu_text = "module attributes {gpu.container_module} {\n" + "\n".join(str(op) for op in gpu_ops) + "\n}\n"
        for op in gpu_ops:
            op.operation.erase()
        return gpu_text, str(module), module_layout(module)


def _auto_sums_ordered(module: ir.Module) -> None:
    """Make every policy="auto" sum over all lanes an ordered one (artifact builds)."""

    def visit(op):
        if is_hawk(op, "reduce") and policy(op) == "auto" and reduce_kind(op) in ("sum", "mean") \
                and not _keeps_axes(op):
            set_policy(op, "ordered")
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)


def _keeps_axes(op) -> bool:
    return bool(set(kernel_axes(enclosing_func(op))) - set(reduce_over(op)))
