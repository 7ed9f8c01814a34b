"""hawk.math: the functions a kernel body can call on lane values.

These are markers: the front end compiles each call into MLIR ops. Called outside a kernel they raise, since a
lane value only exists inside one.
"""

from __future__ import annotations

_NAMES = (
    "vec", "mat", "index", "land", "lor", "lnot", "where", "min", "max", "abs", "sqrt", "exp", "exp2", "log",
    "log2", "log10", "log1p", "expm1", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh",
    "tanh", "erf", "floor", "ceil", "round", "trunc", "clamp", "pow", "fma", "sign", "isnan", "isinf",
    "isfinite", "dot", "norm", "rsqrt", "hypot", "copysign", "to_float", "to_int", "select", "add", "mul",
)


def _marker(name: str):
    def fn(*args, **kwargs):
        raise RuntimeError(f"hawk.math.{name} works on lane values and can only be called inside a @hawk.kernel")

    fn.__name__ = name
    fn.__qualname__ = name
    fn._hawk_builtin = ("math", name)
    fn.__doc__ = f"hawk.math.{name}: compiled inside a kernel body."
    return fn


for _n in _NAMES:
    globals()[_n] = _marker(_n)

pi = 3.141592653589793
e = 2.718281828459045
inf = float("inf")
nan = float("nan")

__all__ = [*_NAMES, "pi", "e", "inf", "nan"]
