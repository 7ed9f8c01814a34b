"""The pass pipeline: small named passes run in order over one module, every intermediate can be dumped.

`Pipeline.run(module, job)` runs each pass; with `dump=` a callback receives (pass name, IR text) after each
pass, which is how `Kernel.mlir(after=...)`, the IR tests and `HAWK_DUMP_DIR` see every stage.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mlir import ir, passmanager

from hawk.passes.analysis import Layout
from hawk.passes.lower_gpu import lower_gpu
from hawk.passes.lower_host import lower_host
from hawk.passes.speculate import speculate_ifs
from hawk.passes.verify import verify_hawk

# math-to-libm before vector-to-llvm: it splits math on vector values into element calls with vector ops
LLVM_PIPELINE = ("builtin.module(func.func(lower-vector-multi-reduction),convert-vector-to-scf,"
                 "convert-scf-to-cf,convert-math-to-libm,convert-vector-to-llvm,convert-math-to-llvm,"
                 "expand-strided-metadata,finalize-memref-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,"
                 "convert-func-to-llvm,convert-ub-to-llvm,reconcile-unrealized-casts)")


@dataclass
class Job:
    """What the passes of one compile share: the kernel's layout and element types."""

    layout: Layout
    ftype: ir.Type
    itypes: dict[str, ir.Type]
    subgroup: int = 0  # GPU: threads that shuffle registers (a warp, a wavefront); 0: shared memory only
    atomics: bool = False  # GPU: float atomic adds into global memory (plain scatters into large sinks)
    wide: bool | str = False  # GPU: wide payloads through component loops (True, or "tree": that form only)


@dataclass(frozen=True)
class Pass:
    name: str
    fn: Callable[[ir.Module, Job], None]
    doc: str


def _upstream(pipeline: str) -> Callable[[ir.Module, Job], None]:
    def run(module: ir.Module, job: Job) -> None:
        passmanager.PassManager.parse(pipeline).run(module.operation)

    return run


PASSES: dict[str, Pass] = {p.name: p for p in (
    Pass("verify-hawk", lambda m, j: verify_hawk(m), "refuse reductions/scatters where they may not sit"),
    Pass("lower-host-lanes", lambda m, j: lower_host(m, j.layout, j.ftype, j.itypes),
         "hawk ops -> a chunked lane loop and a finish function (scf, memref, arith, vector)"),
    Pass("lower-gpu-lanes", lambda m, j: lower_gpu(m, j.layout, j.ftype, j.itypes, j.subgroup, j.atomics,
                                                    j.wide),
         "hawk ops -> a gpu.module kernel (tree, slots or chunk form) and a host finish function"),
    Pass("speculate-ifs", lambda m, j: speculate_ifs(m), "pure if/else branches -> both evaluated and a select"),
    Pass("canonicalize", _upstream("builtin.module(canonicalize,cse)"), "upstream clean-up"),
    Pass("lower-to-llvm", _upstream(LLVM_PIPELINE), "upstream dialects -> LLVM dialect"),
)}

HOST = ("verify-hawk", "lower-host-lanes", "speculate-ifs", "canonicalize", "lower-to-llvm")
GPU = ("verify-hawk", "lower-gpu-lanes", "canonicalize")  # then: the gpu.module per target, the finish per host


def _module_name(module: ir.Module, job: Job | None) -> str:
    if job is not None:
        return job.layout.name
    for op in module.body.operations:
        if "sym_name" in op.attributes:
            return ir.StringAttr(op.attributes["sym_name"]).value
    return "module"


class Pipeline:
    def __init__(self, names: tuple[str, ...] = HOST):
        unknown = [n for n in names if n not in PASSES]
        if unknown:
            raise ValueError(f"unknown passes {unknown}; known: {sorted(PASSES)}")
        self.passes = [PASSES[n] for n in names]

    def run(self, module: ir.Module, job: Job, dump: Callable[[str, str], None] | None = None,
            stop_after: str | None = None) -> ir.Module:
        dump_dir = os.environ.get("HAWK_DUMP_DIR")
        for k, p in enumerate(self.passes):
            p.fn(module, job)
            if not module.operation.verify():  # a hawk pass must leave valid IR (raises with the reason)
                raise RuntimeError(f"internal error: pass {p.name} left invalid IR")
            if dump is not None:
                dump(p.name, str(module))
            if dump_dir:
                _dump(Path(dump_dir), f"{_module_name(module, job)}.{k + 1:02d}.{p.name}.mlir", str(module))
            if p.name == stop_after:
                break
        return module


def _dump(d: Path, name: str, text: str) -> None:
    """Write one pass's IR into $HAWK_DUMP_DIR; a folder that cannot be made or written is refused in one line
    naming the setting (not an OSError from deep inside a compile)."""
    try:
        d.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text)
    except OSError as exc:
        raise ValueError(f"$HAWK_DUMP_DIR={str(d)!r} cannot hold the IR dumps ({exc.strerror or exc}): set it to "
                         "a writable folder, or unset it") from None
