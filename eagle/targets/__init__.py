"""Targets: each turns lowered IR into a binary and launches it.

"host" is the LLVM CPU target (eagle/targets/host.py). The GPU targets share eagle/targets/device.py: "nvvm"
(PTX, CUDA), "rocdl" (AMD code objects, HIP) and "spirv" (Vulkan; runs on lavapipe without a GPU).
"""

from __future__ import annotations

GPU_TARGETS = ("nvvm", "rocdl", "spirv")
TARGETS = ("host", *GPU_TARGETS)


def gpu_target(name: str, **options):
    """The GPU target object for `name` with its options (chip=..., ...)."""
    if name == "nvvm":
        from eagle.targets.nvvm import NvvmTarget

        return NvvmTarget(**options)
    if name == "rocdl":
        from eagle.targets.rocdl import RocdlTarget

        return RocdlTarget(**options)
    if name == "spirv":
        from eagle.targets.spirv import SpirvTarget

        return SpirvTarget(**options)
    raise ValueError(f"unknown target {name!r}; the targets are {list(TARGETS)} (or 'auto')")


def auto_target() -> str:
    """'auto': a GPU target whose runtime and a device are present, else the host."""
    for name in ("nvvm", "rocdl", "spirv_gpu"):
        if name == "spirv_gpu":
            continue  # lavapipe is a CPU device: never pick it over the host
        try:
            gpu_target(name).runtime()
            return name
        except Exception:  # no runtime or no device: try the next
            continue
    return "host"
