"""Targets' runtimes: each loads a binary hawk compiled (hawk/targets/) and launches it.

"host" loads a shared library (eagle/targets/host.py). The GPU targets share eagle/targets/device.py: "nvvm"
(CUDA), "rocdl" (HIP) and "spirv" (Vulkan; lavapipe runs it without a GPU).
"""

from __future__ import annotations

from hawk.abi.targets import GPU_TARGETS, TARGETS, unknown_target

__all__ = ["GPU_TARGETS", "TARGETS", "GpuTarget", "auto_target", "gpu_target", "runtime"]


def runtime(name: str):
    """The DeviceRuntime of the GPU target `name` (RuntimeMissing naming what this machine lacks). It imports the
    target's launch code, which needs NumPy and the vendor runtime, not the compiler."""
    if name == "nvvm":
        from eagle.targets.nvvm import CudaRuntime

        return CudaRuntime.shared()
    if name == "rocdl":
        from eagle.targets.rocdl import HipRuntime

        return HipRuntime.shared()
    if name == "spirv":
        from eagle.targets.vulkan_runtime import VulkanRuntime

        return VulkanRuntime.shared()
    raise unknown_target(name)


class GpuTarget:
    """The launch side of a GPU target (its options are the compiler's: hawk.targets.gpu_target checks them)."""

    def __init__(self, name: str, **options):
        if name not in GPU_TARGETS:
            raise unknown_target(name)
        self.name, self.options = name, options

    def runtime(self):
        return runtime(self.name)


def gpu_target(name: str, **options) -> GpuTarget:
    """The launch side of the GPU target `name`: `gpu_target(name).runtime()` is its DeviceRuntime."""
    return GpuTarget(name, **options)


def auto_target() -> str:
    """'auto': a GPU target whose runtime and device are present (NVIDIA, then AMD, then a Vulkan GPU), else the
    host. A CPU Vulkan device (Mesa's lavapipe) is never preferred to the host."""
    for name in ("nvvm", "rocdl"):
        try:
            runtime(name)
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
