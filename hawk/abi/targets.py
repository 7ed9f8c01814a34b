"""Target names the compiler and the runtime share, with no MLIR in them.

hawk/targets/ compiles for each target, eagle/targets/ launches on it; both take their names from here.
"""

from __future__ import annotations

GPU_TARGETS = ("nvvm", "rocdl", "spirv")
TARGETS = ("host", *GPU_TARGETS)
SPIRV_SUBGROUPS = (0, 4, 8, 16, 32, 64, 128)  # subgroup sizes the spirv target compiles shuffles for (0: none)
# word 0 of the spirv target's status buffer, set by the Vulkan runtime and only read by kernels: the canary loop's
# trips (hawk/targets/spirv_lower.py) and the run-time zero float(word 0 - CANARY_TRIPS) (hawk/targets/spirv_zeros.py)
CANARY_TRIPS = 2


def unknown_target(name: str) -> ValueError:
    """The refusal of a target name that is not one of TARGETS."""
    return ValueError(f"unknown target {name!r}; the targets are {list(TARGETS)} (or 'auto')")
