"""Running passes: `Pipeline` runs registered passes (hawk/passes/units.py) in order over one module, verifies
the IR after each, and lets every intermediate be seen.

`Pipeline.run(module, dump=)` hands (pass name, IR text) to the callback after each pass, which is how
`Kernel.mlir(after=...)` and the IR tests see every stage; `$HAWK_DUMP_DIR` gets one file per pass (a pass
group, such as lower-host-lanes, is one pass there). The default pipeline of each target is here too
(`target_pipeline`, and `expanded` with its groups written out): what `hawk-opt --target` and the compiler run.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from mlir import ir

from hawk.passes import lower_units as _lower_units  # noqa: F401  (registers the lowering's passes)
from hawk.passes import plan as _plan  # noqa: F401  (registers plan-buffers)
from hawk.passes import units as _units  # noqa: F401  (registers the passes)
from hawk.passes.base import PASSES, ModulePass, PassError, PassGroup, kernel_funcs, parse_pipeline, pipeline_text
from hawk.passes.units import LLVM_PIPELINE

__all__ = ["GPU", "HOST", "LLVM_PIPELINE", "PASSES", "TARGETS", "PassError", "Pipeline", "expanded", "gpu_pipeline",
           "target_pipeline"]

HOST = ("verify-hawk", "plan-buffers", "lower-host-lanes", "speculate-ifs", "scalarize-payloads", "expand-math",
        "canonicalize", "lower-to-llvm")
GPU = ("verify-hawk", "plan-buffers", "lower-gpu-lanes", "canonicalize", "lower-finish-to-llvm")


def gpu_pipeline(subgroup: int = 0, atomics: bool = False, wide: bool | str = False) -> str:
    """The GPU pipeline for a target's options: the gpu.module (upstream dialects) beside the LLVM finish."""
    w = {True: "true", False: "false"}.get(wide, wide)
    opts = f"lower-gpu-lanes{{subgroup={subgroup} atomics={'true' if atomics else 'false'} wide={w}}}"
    return ",".join(opts if n == "lower-gpu-lanes" else n for n in GPU)


TARGETS = ("host", "nvvm", "rocdl", "spirv")


def target_pipeline(target: str) -> str:
    """A target's whole default pipeline: the GPU options are those of hawk.targets' target object by default."""
    if target == "host":
        return ",".join(HOST)
    from hawk.targets import gpu_target

    t = gpu_target(target)
    return gpu_pipeline(t.subgroup, t.float_atomics, t.wide_loops)


def _module_name(module: ir.Module) -> str:
    funcs = kernel_funcs(module) or [op for op in module.body.operations if "sym_name" in op.operation.attributes]
    return ir.StringAttr(funcs[0].operation.attributes["sym_name"]).value if funcs else "module"


class Pipeline:
    """Passes to run in order: a textual pipeline (`a,b{opt=v}`), or a sequence of pass texts or objects."""

    def __init__(self, passes: str | Sequence[str | ModulePass] = HOST):
        items = [passes] if isinstance(passes, str) else list(passes)
        self.passes: list[ModulePass] = []
        for p in items:
            self.passes += parse_pipeline(p) if isinstance(p, str) else [p]

    def __str__(self) -> str:
        return pipeline_text(self.passes)

    def run(self, module: ir.Module, dump: Callable[[str, str], None] | None = None,
            stop_after: str | None = None) -> ir.Module:
        dump_dir = os.environ.get("HAWK_DUMP_DIR")
        name = _module_name(module)
        for k, p in enumerate(self.passes):
            p.apply(module)
            if not module.operation.verify():  # a hawk pass must leave valid IR (raises with the reason)
                raise RuntimeError(f"internal error: pass {p.name} left invalid IR")
            if dump is not None:
                dump(p.name, str(module))
            if dump_dir:
                _dump(Path(dump_dir), f"{name}.{k + 1:02d}.{p.name}.mlir", str(module))
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


def expanded(pipeline: str) -> str:
    """A pipeline with each pass group written out as the passes it runs (`hawk-opt --list-passes`)."""
    out = []
    for p in parse_pipeline(pipeline):
        out += p.passes() if isinstance(p, PassGroup) else [p]
    return pipeline_text(out)


def known_passes() -> dict[str, str]:
    """Each registered pass with its one-line summary (and options), for `hawk-opt --list-passes`."""
    out = {}
    for name, cls in sorted(PASSES.items()):
        opts = " ".join(f"{f.name}={f.type if isinstance(f.type, str) else f.type.__name__}"
                        for f in dataclasses.fields(cls))
        out[name + (f"{{{opts}}}" if opts else "")] = cls.summary
    return out

