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
