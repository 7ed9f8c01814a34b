"""Targets' code generation: each turns a stage's lowered IR into a binary (launching it is eagle/targets/).

"host" is the LLVM CPU target (hawk/targets/host.py: a shared library). The GPU targets compile a stage's
gpu.module: "nvvm" (PTX), "rocdl" (AMD code objects) and "spirv" (Vulkan SPIR-V). hawk/targets/build.py builds a
kernel's stages with them (what a Kernel's `build_library` / `device_binary` and the artifact builder call).
"""

from __future__ import annotations

from hawk.abi.targets import GPU_TARGETS, TARGETS, unknown_target

__all__ = ["GPU_TARGETS", "TARGETS", "gpu_target"]


def gpu_target(name: str, **options):
    """The GPU target object for `name` with its options (chip=..., ...): compile(gpu_module) -> bytes, check,
    and what the runtime needs to know of its binaries (suffix, subgroup, float_atomics, options)."""
    if name == "nvvm":
        from hawk.targets.nvvm import NvvmTarget

        return _made(name, NvvmTarget, options)
    if name == "rocdl":
        from hawk.targets.rocdl import RocdlTarget

        return _made(name, RocdlTarget, options)
    if name == "spirv":
        from hawk.targets.spirv import SpirvTarget

        return _made(name, SpirvTarget, options)
    raise unknown_target(name)


def _made(name: str, cls, options: dict):
    """`cls(**options)`, refusing an option the target does not take in one line that lists the ones it does
    (instead of Python's "__init__() got an unexpected keyword argument")."""
    import inspect

    params = inspect.signature(cls).parameters
    if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(options) - set(params))
        if unknown:
            raise ValueError(f"the {name} target takes the options {sorted(params)}, got {unknown}")
    return cls(**options)
