"""eagle: where and how hawk kernels run. `eagle.deploy(kernel).run(**planes)` compiles, launches and hands
back `eagle.Array` results (a dict by name when a kernel has several outputs)."""

from eagle.array import Array, asarray
from eagle.errors import InputError, RuntimeMissing


def deploy(kernel, target: str = "host", threads: int | None = None, **options):
    """Build a plan that runs `kernel` on `target`: "host" (the CPU), "nvvm", "rocdl", "spirv", or "auto" (a GPU
    whose runtime and device are present, else the host). Options such as chip="sm_90" go to the target."""
    from eagle.plan import Plan

    return Plan(kernel, target, threads, **options)


def __getattr__(name: str):
    if name == "Plan":  # imported lazily: the compiler side needs MLIR, loading artifacts does not
        from eagle.plan import Plan

        return Plan
    if name in ("reduce", "Graph"):
        from eagle import graph

        return getattr(graph, name)
    raise AttributeError(f"module 'eagle' has no attribute '{name}'")

__all__ = ["Array", "InputError", "Plan", "RuntimeMissing", "asarray", "deploy"]
