"""`@hawk.func`: user helper functions that kernel bodies (and other funcs) call on lane values.

A func is read like a kernel (its AST, file and first line) but has no plane types: it is typed by the values
each call passes, and the front end inlines a fresh copy of its body at every call site (`inline.FuncsMixin`).
This module holds what needs no MLIR: the `Func` object, its part of a kernel's cache key, and the rewrite of
early returns into if/else so that every path ends in exactly one `return`.
"""

from __future__ import annotations

import ast
import inspect
import sys
from dataclasses import dataclass

from hawk.errors import KernelError
from hawk.frontend.source import Source, read_def

_NUMBERS = (bool, int, float)


@dataclass(frozen=True)
class Params:
    """A func's parameters: names in order (positional or keyword), keyword-only names, and default values."""

    positional: tuple[str, ...]
    keyword_only: tuple[str, ...]
    defaults: dict[str, object]

    @property
    def names(self) -> tuple[str, ...]:
        return self.positional + self.keyword_only

    def describe(self) -> str:
        parts = [n if n not in self.defaults else f"{n}={self.defaults[n]!r}" for n in self.positional]
        if self.keyword_only:
            parts.append("*")
            parts += [n if n not in self.defaults else f"{n}={self.defaults[n]!r}" for n in self.keyword_only]
        return ", ".join(parts)


class Func:
    """A helper function of lane values (see `hawk.func`). Calling it from plain Python is refused: the plain
    function is `f.__wrapped__`."""

    _hawk_func = True

    def __init__(self, fn):
        if not inspect.isfunction(fn) or fn.__name__ == "<lambda>":
            raise TypeError("@hawk.func decorates a plain Python function (def name(...): ...), not "
                            f"{'a lambda' if inspect.isfunction(fn) else repr(fn)}")
        self.fn = self.__wrapped__ = fn
        self.__name__ = self.name = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__module__ = fn.__module__
        self.__doc__ = fn.__doc__
        self.text, fdef, file, first = read_def(fn, "@hawk.func", func=self.name)
        self.source = Source(fn, fdef, file, first, self.name)
        self.params = self._read_params(fdef)
        self.body = _normalize(_without_docstring(fdef.body))

    def _where(self, node: ast.AST) -> dict:
        return {"file": self.source.file, "line": self.source.first_line + getattr(node, "lineno", 1) - 1}

    def _read_params(self, fdef: ast.FunctionDef) -> Params:
        a = fdef.args
        if isinstance(fdef, ast.AsyncFunctionDef):
            raise KernelError(f"func '{self.name}' is async: write a plain def", **self._where(fdef))
        if a.vararg is not None or a.kwarg is not None:
            star = a.vararg or a.kwarg
            raise KernelError(f"func '{self.name}' takes *{star.arg} or **{star.arg}: a func's parameters are "
                              "named one by one (give each its own name)", **self._where(star))
        positional = tuple(p.arg for p in (*a.posonlyargs, *a.args))
        keyword_only = tuple(p.arg for p in a.kwonlyargs)
        defaults: dict[str, object] = {}
        for name, value in zip(positional[len(positional) - len(self.fn.__defaults__ or ()):],
                               self.fn.__defaults__ or (), strict=True):
            defaults[name] = value
        defaults.update(self.fn.__kwdefaults__ or {})
        nodes = {p.arg: p for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
        for name, value in defaults.items():
            if not _is_number(value):
                raise KernelError(f"func '{self.name}': the default of '{name}' is {value!r}; a default must be a "
                                  "Python number or bool (lane values come in as arguments)",
                                  **self._where(nodes[name]))
        return Params(positional, keyword_only, defaults)

    def __call__(self, *args, **kwargs):
        caller = sys._getframe(1)
        raise TypeError(f"{caller.f_code.co_filename}:{caller.f_lineno}: func '{self.name}' works on lane values "
                        "and runs only where a @hawk.kernel body (or another @hawk.func) calls it; to run the plain "
                        f"Python function on numbers, call {self.name}.__wrapped__(...)")

    def __repr__(self) -> str:
        return f"<hawk.func {self.name}({self.params.describe()})>"

    # ---- the cache key -------------------------------------------------------------------------------------
    def cache_key(self) -> str:
        """What decides the code a call to this func inlines: its source and where it sits, its defaults, and
        every Python value its body reads from outside (other funcs by their own keys, recursively; a cycle of
        funcs, which the front end refuses, is keyed by name where it closes)."""
        if self in _KEYING:
            return f"func-cycle:{self.__module__}.{self.__qualname__}"
        from hawk.frontend.refs import captured_key, captured_parts  # the walk that keys a kernel's values too

        def refuse(path: str, why: str, line: int) -> KernelError:
            return KernelError(f"func '{self.name}': '{path}' is {why}, which a func cannot use as a constant: pass "
                               "the value in as an argument (a kernel takes arrays as planes)",
                               file=self.source.file, line=line)

        _KEYING.append(self)
        try:
            parts = [f"func:{self.__module__}.{self.__qualname__}", self.text, self.source.file,
                     str(self.source.first_line),
                     ",".join(f"{n}={captured_key(v)}" for n, v in sorted(self.params.defaults.items())),
                     *captured_parts(self.fn, self.source.tree, self.source.first_line, refuse)]
            return "{" + "\n".join(parts) + "}"
        finally:
            _KEYING.pop()


_KEYING: list[Func] = []  # funcs whose key is being computed (guards a cycle of funcs calling each other)


def func(fn) -> Func:
    """Decorator: a helper function that kernel bodies and other funcs call on lane values.

    It is typed by the arguments of each call and inlined there (one func serves floats, integers and vectors);
    it sees only its arguments and Python constants, never planes, and may not reduce, scatter or read other
    lanes. Calling it from plain Python is refused; `f.__wrapped__` is the plain function.
    """
    return Func(fn)


def _is_number(v) -> bool:
    if isinstance(v, _NUMBERS):
        return True
    return type(v).__module__ == "numpy" and getattr(v, "shape", None) == () and hasattr(v, "item")


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


# ---- early returns --------------------------------------------------------------------------------------
def always_returns(stmts: list[ast.stmt]) -> bool:
    """Whether every path through `stmts` ends in a return."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and always_returns(last.body) and always_returns(last.orelse)


def _may_return(s: ast.stmt) -> bool:
    return any(isinstance(n, ast.Return) for n in ast.walk(s))


def _normalize(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """The same code with the statements after an if that returns on some paths moved into the paths that fall
    through, so that every return ends its path: `if c: return a` then `return b` becomes if/else. (Returns
    inside a for loop stay where they are; the front end refuses them.)"""
    out: list[ast.stmt] = []
    for k, s in enumerate(stmts):
        if isinstance(s, ast.If) and _may_return(s):
            rest = stmts[k + 1:]
            body = s.body if always_returns(s.body) else s.body + rest
            orelse = s.orelse if always_returns(s.orelse) else s.orelse + rest
            out.append(ast.copy_location(ast.If(test=s.test, body=_normalize(body), orelse=_normalize(orelse)), s))
            return out
        out.append(s)
    return out


def returns_in_loops(stmts: list[ast.stmt]) -> ast.Return | None:
    """The first return that sits inside a for (or while) loop, if any."""
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, (ast.For, ast.While)):
                for r in ast.walk(n):
                    if isinstance(r, ast.Return):
                        return r
    return None
