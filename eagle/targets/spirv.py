"""The SPIR-V target's launch side: what this machine's Vulkan device offers. Compiling is hawk/targets/spirv.py's,
launching eagle/targets/vulkan_runtime.py's."""

from __future__ import annotations

from hawk.abi.layout import WORKGROUP
from hawk.abi.targets import SPIRV_SUBGROUPS as SUBGROUPS


def device_subgroup() -> int:
    """The subgroup size of this machine's Vulkan device when it shuffles in compute shaders and divides a
    workgroup, else 0 (also without Vulkan)."""
    try:
        from eagle.targets.vulkan_runtime import VulkanRuntime

        rt = VulkanRuntime.shared()
    except Exception:  # no loader, no device: no shuffles
        return 0
    size = rt.subgroup_size
    return size if rt.subgroup_shuffles and size in SUBGROUPS and WORKGROUP % size == 0 else 0
