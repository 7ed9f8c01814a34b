"""The reverse: reverse-mode differentiation of hawk kernels as a transformation of their hawk IR.

The adjoint of a kernel is itself a hawk kernel (hawk/reverse/kernel.py), built by the reverse sweep
(hawk/reverse/sweep.py) from the derivative table (hawk/reverse/rules.py); eagle/reverse.py is the door.
"""

from hawk.reverse.kernel import IRKernel, adjoint, facts, needs_extents, reads_other_lanes, winners

__all__ = ["IRKernel", "adjoint", "facts", "needs_extents", "reads_other_lanes", "winners"]
