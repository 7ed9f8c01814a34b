"""hawk: a lane-oriented kernel language compiled through MLIR.

A kernel is a Python function whose parameters are typed planes; its body is one lane's code. Cross-lane work is
explicit: `hawk.sum/mean/max/min` reduce over lanes, `hawk.scan` gives running totals, `hawk.scatter(sink)[key]
+= v` adds by key, and `u.at(i)` reads another lane's input. `@hawk.func` helpers are called from kernel bodies on
lane values and inlined there. `eagle.deploy(kernel).run(...)` compiles and runs a kernel.
"""

from __future__ import annotations

import sys

from hawk import math  # noqa: F401  (hawk.math is part of the public surface; no MLIR is imported here)
from hawk.errors import KernelError, RetiredImportError
from hawk.types import Grid, Index, Matrix, Mutable, Param, Scalar, Sorted, Table, Vector

__version__ = "0.1.0"


def _marker(space: str, name: str, doc: str):
    def fn(*args, **kwargs):
        raise RuntimeError(f"hawk.{name} works across the lanes of a kernel and can only be used inside a "
                           "@hawk.kernel body")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    fn._hawk_builtin = (space, name)
    return fn


sum = _marker("reduce", "sum", "hawk.sum(x, where=mask, over=axes, policy=...): add x over the lanes.")
mean = _marker("reduce", "mean", "hawk.mean(x, where=mask, over=axes): the mean of x over the lanes.")
max = _marker("reduce", "max", "hawk.max(x, where=mask, over=axes): the largest x over the lanes.")
min = _marker("reduce", "min", "hawk.min(x, where=mask, over=axes): the smallest x over the lanes.")
reduce = _marker("reduce", "reduce", "hawk.reduce(op, x, where=mask, over=axes, identity=v): fold x over the "
                 "lanes with op (a @hawk.func of two values, or m.add, m.mul, m.min, m.max, m.land, m.lor) in a "
                 "fixed order (docs/semantics.md).")
scan = _marker("scan", "scan", "hawk.scan(x, exclusive=False, op=m.add, reset=flag, reverse=False, by=key): the "
               "running total of x over the lanes in lane order (op m.add, m.mul, m.min, m.max, or a @hawk.func of "
               "two values folded lane by lane as itertools.accumulate does, identity= for its exclusive form; "
               "reset= starts a new run at a lane where it is true), with the same bits on every thread count and "
               "target (docs/semantics.md, \"Scans\").")
scatter = _marker("scatter", "scatter", "hawk.scatter(sink, policy=...)[key] += v (or = v): add/store by key.")


def kernel(fn):
    """Decorator: make a lane kernel of a Python function whose parameters are annotated with plane types.

    The body is read and checked now (errors point at its file and line); it is compiled per dtype when run.
    """
    from hawk.compiler import Kernel

    caller = sys._getframe(1)  # where the kernel is defined: string annotations may name its local variables
    scope = dict(caller.f_locals) if caller.f_locals is not caller.f_globals else None
    return Kernel(fn, scope)


def __getattr__(name: str):
    if name in ("Func", "func"):  # @hawk.func (the front end's), imported on first use: hawk.abi needs no front end
        from hawk.frontend import funcs

        globals()[name] = getattr(funcs, name)
        return globals()[name]
    if name == "Kernel":
        from hawk.compiler import Kernel

        return Kernel
    if name in ("load", "run"):  # published artifacts: the runtime's (eagle.artifact), forwarded when first used
        from eagle import artifact

        return getattr(artifact, name)
    if name == "artifact":
        import importlib

        return importlib.import_module("hawk.artifact")
    from hawk.frontend import retired as _retired

    if name in _retired.MODULE_NAMES:
        frame = sys._getframe(1)
        where = {"file": frame.f_code.co_filename, "line": frame.f_lineno}
        if _importing(frame):  # `from hawk import Accum`: Python would swallow an AttributeError here
            raise RetiredImportError(_retired.MODULE_NAMES[name], name=name, **where)
        raise KernelError(_retired.MODULE_NAMES[name], **where)
    raise AttributeError(f"module 'hawk' has no attribute '{name}'")


def _importing(frame) -> bool:
    """Whether `frame` is running a `from hawk import <name>` statement (its current instruction)."""
    import dis

    code = frame.f_code.co_code
    return 0 <= frame.f_lasti < len(code) and code[frame.f_lasti] == dis.opmap.get("IMPORT_FROM", -1)


# `from hawk import *` brings the plane types and the decorators; the reductions stay spelled hawk.sum(...) so
# that they never shadow Python's own sum/min/max.
__all__ = ["Func", "Grid", "Index", "Kernel", "KernelError", "Matrix", "Mutable", "Param", "Scalar", "Sorted",
           "Table", "Vector", "func", "kernel"]
