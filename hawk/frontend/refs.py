"""What a name in a kernel body can stand for besides a lane value: a plane, the grid, a sink..."""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass

from hawk.abi.signature import PlaneSpec


@dataclass(frozen=True)
class PlaneRef:
    """An input plane (per-lane Scalar/Vector/Matrix or Index): reads as this lane's value."""

    spec: PlaneSpec


@dataclass(frozen=True)
class OutRef:
    """A Mutable payload output: a per-lane plane or a cell, decided by what the body assigns."""

    spec: PlaneSpec


@dataclass(frozen=True)
class SinkRef:
    """A Mutable sink with named axes: only hawk.scatter(sink)[key] writes it."""

    spec: PlaneSpec


@dataclass(frozen=True)
class TableRef:
    spec: PlaneSpec


@dataclass(frozen=True)
class GridRef:
    spec: PlaneSpec


@dataclass(frozen=True)
class ParamRef:
    spec: PlaneSpec


@dataclass(frozen=True)
class AxisView:
    """`mm.rows`, `mm.columns` or `v.components`: waits for a subscript."""

    base: object
    axis: str


@dataclass(frozen=True)
class Method:
    """A bound method of a ref or value (`u.at`, `v.sum`, `y.add`...), resolved when called."""

    base: object
    name: str
    base_src: str


@dataclass(frozen=True)
class Scatter:
    """`hawk.scatter(sink, policy=...)`, waiting for `[key] += v` or `[key] = v`."""

    sink: SinkRef
    policy: str


@dataclass(frozen=True)
class Undefined:
    """A name that is not defined here, with the reason to tell the user."""

    why: str


# ---- captured Python values --------------------------------------------------------------------------------
class Unkeyable(ValueError):
    """A captured value the front end would turn into code but whose value cannot be written into a cache key."""


def captured_key(v: object) -> str:
    """A text that differs whenever the code a kernel body compiles from `v` may differ: numbers by type and exact
    value (float.hex, NumPy scalars by dtype and bytes), strings and tuples by content, modules by name, a
    @hawk.func by its source and the values it reads, and other callables by what they are. Raises Unkeyable
    for a NumPy array of more than one value (which no kernel body can use as a constant)."""
    if type(v).__module__ == "numpy" and hasattr(v, "dtype") and hasattr(v, "tobytes"):
        size, shape = getattr(v, "size", 1), getattr(v, "shape", ())
        if size != 1:
            raise Unkeyable(f"a NumPy array of shape {tuple(shape)}")
        if v.dtype.kind == "O":
            return f"numpy-object:{captured_key(v.item())}"
        return f"numpy.{type(v).__name__}:{v.dtype.str}:{tuple(shape)}:{v.tobytes().hex()}"
    if isinstance(v, bool):
        return f"bool:{bool(v)}"
    if isinstance(v, int):
        return f"int:{type(v).__qualname__}:{int(v)}"
    if isinstance(v, float):
        return f"float:{type(v).__qualname__}:{float(v).hex()}"
    if isinstance(v, str):
        return f"str:{str(v)!r}"
    if isinstance(v, tuple):
        return "tuple(" + ",".join(captured_key(x) for x in v) + ")"
    if v is None:
        return "None"
    if isinstance(v, types.ModuleType):
        return f"module:{v.__name__}"
    if getattr(type(v), "_hawk_func", False):  # a @hawk.func: by its source and what it reads (funcs.Func)
        return v.cache_key()
    if callable(v):
        what = getattr(v, "__qualname__", None) or getattr(v, "__name__", None)
        return (f"callable:{type(v).__module__}.{type(v).__qualname__}:{getattr(v, '__module__', None)}.{what}:"
                f"{getattr(v, '_hawk_builtin', None)!r}")
    return f"object:{type(v).__module__}.{type(v).__qualname__}"  # the front end refuses these when it meets them


ABSENT = object()


def captured_values(fn, fdef: ast.FunctionDef, first: int) -> dict[str, tuple[object, int]]:
    """Each name (and module attribute chain) the body of a kernel or func reads from outside -> (value, source
    line).
    A name Python resolves locally (parameters, assigned names) is not a captured value."""
    code = fn.__code__
    outer: set[str] = set(code.co_freevars)
    stack = [code]
    while stack:  # names of nested code objects too (comprehensions)
        c = stack.pop()
        outer |= set(c.co_names)
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    outer -= set(code.co_varnames) | set(code.co_cellvars)
    closure = {}
    for n, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
        try:
            closure[n] = cell.cell_contents
        except ValueError:
            pass
    found: dict[str, tuple[object, int]] = {}
    for node in (x for stmt in fdef.body for x in ast.walk(stmt)):
        chain: list[str] = []
        base = node
        while isinstance(base, ast.Attribute):
            chain.insert(0, base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in outer or not isinstance(base.ctx, ast.Load):
            continue
        v = closure.get(base.id, fn.__globals__.get(base.id, ABSENT))
        path = base.id
        for attr in chain:  # through modules only: an attribute of anything else is not a Python value read
            if not isinstance(v, types.ModuleType):
                break
            v, path = getattr(v, attr, ABSENT), f"{path}.{attr}"
        found.setdefault(path, (v, first + node.lineno - 1))
    return found


def captured_parts(fn, fdef: ast.FunctionDef, first: int, refuse) -> list[str]:
    """`path=key` for every value `captured_values` finds, in a fixed order: what a cache key adds for them. A
    value that cannot be keyed raises `refuse(path, why, line)` (an error that names the kernel or func)."""
    parts = []
    for path, (v, line) in sorted(captured_values(fn, fdef, first).items()):
        try:
            parts.append(f"{path}=" + ("<absent>" if v is ABSENT else captured_key(v)))
        except Unkeyable as exc:
            raise refuse(path, str(exc), line) from None
    return parts
