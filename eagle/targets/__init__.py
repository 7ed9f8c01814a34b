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

        return _made(name, NvvmTarget, options)
    if name == "rocdl":
        from eagle.targets.rocdl import RocdlTarget

        return _made(name, RocdlTarget, options)
    if name == "spirv":
        from eagle.targets.spirv import SpirvTarget

        return _made(name, SpirvTarget, options)
    raise ValueError(f"unknown target {name!r}; the targets are {list(TARGETS)} (or 'auto')")


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


def auto_target() -> str:
    """'auto': a GPU target whose runtime and device are present (NVIDIA, then AMD, then a Vulkan GPU), else the
    host. A CPU Vulkan device (Mesa's lavapipe) is never preferred to the host."""
    for name in ("nvvm", "rocdl"):
        try:
            gpu_target(name).runtime()
            return name
        except Exception:  # no runtime or no device: try the next
            continue
    try:
        from eagle.targets.vulkan_runtime import VulkanRuntime

        rt = VulkanRuntime.shared()
        if rt.device_type in (rt.vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, rt.vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU):
            return "spirv"
    except Exception:  # no Vulkan: the host it is
        pass
    return "host"
