"""eagle: where and how hawk kernels run. `eagle.deploy(kernel).run(**planes)` compiles, launches and hands
back `eagle.Array` results (a dict by name when a kernel has several outputs)."""

from eagle.array import Array
from eagle.errors import InputError, RuntimeMissing
from eagle.plan import Plan, deploy

__all__ = ["Array", "InputError", "Plan", "RuntimeMissing", "deploy"]
