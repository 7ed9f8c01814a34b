"""Target names the compiler and the runtime share, with no MLIR in them.

hawk/targets/ compiles for each target, eagle/targets/ launches on it; both take their names from here.
"""

from __future__ import annotations

GPU_TARGETS = ("nvvm", "rocdl", "spirv")
TARGETS = ("host", *GPU_TARGETS)
SPIRV_SUBGROUPS = (0, 4, 8, 16, 32, 64, 128)  # subgroup sizes the spirv target compiles shuffles for (0: none)


def unknown_target(name: str) -> ValueError:
    """The refusal of a target name that is not one of TARGETS."""
    return ValueError(f"unknown target {name!r}; the targets are {list(TARGETS)} (or 'auto')")
