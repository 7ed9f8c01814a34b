"""The registered passes: each a small class with its name, a one-line summary and typed options.

The work itself lives in the modules named by each pass (verify.py, stages.py, plan.py, ...; the lowering's
passes are in lower_units.py); a pass class reads what it needs from the IR (the kernel func's facts and
`hawk.layout`, see plan.py) and its options, never from Python objects handed beside the module.
"""

from __future__ import annotations

import dataclasses

from mlir import ir

from hawk.passes.analysis import written_names
from hawk.passes.base import ModulePass, UpstreamPass, kernel_funcs, register
from hawk.passes.plan import outputs_of, set_stage, signature_of
from hawk.passes.scalarize import scalarize_payloads
from hawk.passes.speculate import speculate_ifs
from hawk.passes.verify import verify_hawk

# math-to-libm before vector-to-llvm: it splits math on vector values into element calls with vector ops
LLVM_PIPELINE = ("builtin.module(func.func(lower-vector-multi-reduction),convert-vector-to-scf,"
                 "convert-scf-to-cf,convert-math-to-libm,convert-vector-to-llvm,convert-math-to-llvm,"
                 "expand-strided-metadata,finalize-memref-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,"
                 "convert-func-to-llvm,convert-ub-to-llvm,reconcile-unrealized-casts)")


@register
@dataclasses.dataclass
class VerifyHawk(ModulePass):
    name = "verify-hawk"
    summary = "refuse reductions and scatters where they may not sit (KernelError at the op's line)"

    def apply(self, module: ir.Module) -> None:
        verify_hawk(module)


@register
@dataclasses.dataclass
class SplitStages(ModulePass):
    name = "split-stages"
    summary = ("a kernel func that reads a reduced value becomes one func per stage, each with its hawk.stage "
               "facts (cells in, cells out, outputs owned); scatters into sinks too large for copies, beside "
               "reductions, get a stage of their own")

    def apply(self, module: ir.Module) -> None:
        from hawk.passes.stages import split_stages

        for func in kernel_funcs(module):
            sig, outputs = signature_of(func), outputs_of(func)
            name = ir.StringAttr(func.attributes["sym_name"]).value
            reserved = frozenset(p.name for p in sig.planes) | {"result"}
            parts = split_stages(f"module {{\n{func}\n}}", name, reserved)
            if len(parts) == 1:
                if "hawk.block_reduce" in parts[0].text:  # block reductions read in place: the func rewritten
                    holder = ir.Module.parse(parts[0].text)  # (alive until its func has moved)
                    (one,) = kernel_funcs(holder)
                    with ir.InsertionPoint(func):
                        ir.InsertionPoint.current.insert(one.operation.detach_from_parent())
                    func.operation.erase()
                continue
            names = {p.name for p in sig.planes if p.kind in ("output", "sink")} | set(outputs)
            staged = [ir.Module.parse(p.text) for p in parts]
            written = [written_names(m) & names for m in staged]
            unwritten = names - set().union(*written)
            with ir.InsertionPoint(func):
                for k, (p, m, w) in enumerate(zip(parts, staged, written, strict=True)):
                    (stage_func,) = kernel_funcs(m)
                    owns = w | (unwritten if k == len(parts) - 1 else set())
                    set_stage(stage_func, p.cells_in, p.cells_out, owns)
                    ir.InsertionPoint.current.insert(stage_func.operation.detach_from_parent())
            func.operation.erase()


@register
@dataclasses.dataclass
class SpeculateIfs(ModulePass):
    name = "speculate-ifs"
    summary = "pure if/else branches -> both evaluated and an arith.select"

    def apply(self, module: ir.Module) -> None:
        speculate_ifs(module)


@register
@dataclasses.dataclass
class ScalarizePayloads(ModulePass):
    name = "scalarize-payloads"
    summary = ("vector and matrix arithmetic inside the host's lane loops -> one scalar op per component, so the "
               "loop vectorizer widens the body across lanes (hawk/passes/scalarize.py)")

    def apply(self, module: ir.Module) -> None:
        scalarize_payloads(module)


@register
@dataclasses.dataclass
class ExpandMath(ModulePass):
    name = "expand-math"
    summary = ("the host's exp, exp2, log, log2, log10, expm1, tanh, sin, cos, tan on float scalars -> branch-free "
               "arith code the loop vectorizer can widen (hawk/targets/host_math.py), instead of libm calls")

    def apply(self, module: ir.Module) -> None:
        from hawk.targets.host_math import expand_math

        expand_math(module)


@register
@dataclasses.dataclass
class Canonicalize(UpstreamPass):
    name = "canonicalize"
    summary = "upstream clean-up: canonicalize, then cse"
    pipeline = "builtin.module(canonicalize,cse)"


@register
@dataclasses.dataclass
class LowerToLLVM(UpstreamPass):
    name = "lower-to-llvm"
    summary = "upstream dialects -> the LLVM dialect (the host's code)"
    pipeline = LLVM_PIPELINE


@register
@dataclasses.dataclass
class LowerFinishToLLVM(ModulePass):
    name = "lower-finish-to-llvm"
    summary = "everything outside the gpu.module (the host finish) -> the LLVM dialect; the gpu.module stays"

    def apply(self, module: ir.Module) -> None:
        from mlir import passmanager

        gpu = [op.operation.detach_from_parent() for op in list(module.body.operations)
               if op.operation.name == "gpu.module"]
        passmanager.PassManager.parse(LLVM_PIPELINE).run(module.operation)
        ip = ir.InsertionPoint(module.body)
        for op in gpu:
            ip.insert(op)
