"""Building one stage of a kernel for a target: the host's shared library, a GPU target's device binary.

The runtime (eagle) never imports this: it asks the kernel object (`kernel.build_library(...)`,
`kernel.device_binary(...)`, `kernel.target(...)`), whose methods forward here, and the artifact builder calls it
directly.
"""

from __future__ import annotations

from pathlib import Path

from hawk.abi.layout import Spec
from hawk.errors import KernelError
from hawk.targets import host


def host_library(kernel, spec: Spec, stage: int, path: Path, finish: bool = False, cpu: str | None = None,
                 description: tuple[str, bytes] | None = None) -> None:
    """The stage's shared library at `path`: its lane and finish functions, or (finish=True) a GPU stage's host
    finish only. `cpu`: the generic CPU of a portable build (None: this machine's). `description`: (symbol, bytes)
    exported as a constant C string (an artifact's binary says what it is)."""
    text = kernel.gpu_finish(spec, stage) if finish else kernel.lowered(spec, stage).llvm_ir
    if description is not None:
        text = host.with_description(text, *description)
    host.build(text, path, cpu, kernel.stages(spec)[stage].name)


def device_binary(kernel, spec: Spec, stage: int, target) -> bytes:
    """The stage compiled by the GPU `target` (hawk.targets.gpu_target); a target's refusal (KernelError) points
    at the user's line."""
    try:
        return target.compile(kernel.lowered_gpu(spec, stage, target.subgroup, target.float_atomics,
                                                 target.wide_loops).gpu_module)
    except KernelError as exc:
        raise kernel.located(exc) from None
