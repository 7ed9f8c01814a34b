"""Calls of `@hawk.func` helpers in a kernel body: each call inlines a fresh copy of the func's body, typed by
the values that call passes, in a scope of its own (its parameters, its locals, its module's constants; never
the kernel's planes).

`FuncsMixin.inline` takes values already computed, so a later caller that is not a Python call (a custom
combiner of `hawk.reduce`) can inline a func of two values the same way.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from hawk.frontend import refs as R
from hawk.frontend.funcs import Func, always_returns, returns_in_loops
from hawk.frontend.values import HVal, const

RET = " return"  # the env slot of a func's return value (no Python name can clash with it)


@dataclass(frozen=True)
class Frame:
    """A func being inlined, and where it was called from (for error messages)."""

    func: Func
    site: str


class FuncsMixin:
    """Mixed into KernelBuilder; relies on its expr/value/read/block/error, `env`, `src` and `frames`."""

    def in_func(self) -> Func | None:
        """The func whose body is being read now, or None in the kernel's own body."""
        return self.frames[-1].func if self.frames else None

    def called_from(self) -> str:
        """The calls that led to the code being read, innermost first."""
        return ", from ".join(f.site for f in reversed(self.frames))

    def plane_spec(self, name: str):
        """The kernel plane a name stands for; none inside a func, which sees only its own names."""
        return None if self.frames else self.sig.get(name)

    def lane_local(self, what: str, instead: str) -> None:
        """Refuse a cross-lane operation inside a func."""
        f = self.in_func()
        if f is not None:
            raise self.error(f"{what} cannot be used inside a func: funcs are lane-local (they see only this "
                             f"lane's values, passed as arguments); {instead}")

    # ---- calls ------------------------------------------------------------------------------------------
    def func_call(self, f: Func, e: ast.Call) -> HVal:
        """`f(a, b, k=c)` in a kernel body or a func: the arguments are computed here, then `f` is inlined."""
        for a in e.args:
            if isinstance(a, ast.Starred):
                raise self.error(f"func '{f.name}' is called with *{ast.unparse(a.value)}: pass each argument "
                                 f"on its own ({f.name}({f.params.describe()}))", a)
        for kw in e.keywords:
            if kw.arg is None:
                raise self.error(f"func '{f.name}' is called with **{ast.unparse(kw.value)}: name each keyword "
                                 f"argument ({f.name}({f.params.describe()}))", kw.value)
        args = [self.func_arg(f, self.expr(a), a) for a in e.args]
        kwargs = {kw.arg: self.func_arg(f, self.expr(kw.value), kw.value) for kw in e.keywords}
        return self.inline(f, args, kwargs, e)

    def func_arg(self, f: Func, v, node: ast.expr) -> HVal:
        if isinstance(v, (R.PlaneRef, R.OutRef, R.ParamRef)):
            return self.read(v)
        if isinstance(v, HVal):
            return v
        raise self.error(f"func '{f.name}' takes lane values, and '{ast.unparse(node)}' is {self.describe(v)}: "
                         "compute the value in the caller and pass that (a func sees no planes)", node)

    def bind_args(self, f: Func, args: list[HVal], kwargs: dict[str, HVal], node: ast.AST) -> dict[str, HVal]:
        """The func's parameters bound as Python would bind them, with defaults; refusals name the func."""
        p = f.params
        how = f"call it as {f.name}({p.describe()})"
        if len(args) > len(p.positional):
            raise self.error(f"func '{f.name}' takes {len(p.positional)} positional argument"
                             f"{'s' if len(p.positional) != 1 else ''} but this call gives {len(args)}: {how}", node)
        bound = dict(zip(p.positional, args, strict=False))
        for k, v in kwargs.items():
            if k not in p.names:
                raise self.error(f"func '{f.name}' has no parameter '{k}': {how}", node)
            if k in bound:
                raise self.error(f"func '{f.name}' gets '{k}' twice (by position and by name): pass it once", node)
            bound[k] = v
        missing = [n for n in p.names if n not in bound and n not in p.defaults]
        if missing:
            raise self.error(f"func '{f.name}' needs a value for {', '.join(repr(n) for n in missing)}: {how}", node)
        for n in p.names:
            if n not in bound:
                d = p.defaults[n]
                bound[n] = const(d.item() if hasattr(d, "item") else d)
        return bound

    def inline(self, f: Func, args: list[HVal], kwargs: dict[str, HVal], node: ast.AST) -> HVal:
        """Read a fresh copy of `f`'s body here with its parameters bound; its return value."""
        chain = [fr.func for fr in self.frames]
        if f in chain:
            cycle = " -> ".join(g.name for g in [*chain[chain.index(f):], f])
            raise self.error(f"recursion is not supported ({cycle}): a func is inlined at each call, so it may not "
                             "call itself, directly or through other funcs; write the repetition as a for loop "
                             "over range(n)", node)
        bound = self.bind_args(f, args, kwargs, node)
        line = self.src.first_line + getattr(node, "lineno", 1) - 1
        site = f"{'func' if self.frames else 'kernel'} '{self.src.name}' at {self.src.file}:{line}"
        saved = (self.env, self.src, self.returned, self._node)
        self.frames.append(Frame(f, site))
        self.src, self.env, self.returned = f.source, dict(bound), False
        try:
            bad = returns_in_loops(f.body)
            if bad is not None:
                raise self.error("return inside a for loop is not supported in a func: assign the value to a "
                                 "variable in the loop and return it once after the loop", bad)
            if not always_returns(f.body):
                raise self.error("this func does not return a value on every path: end each path with "
                                 "return <value> (or assign a variable and return it once at the end)",
                                 f.source.tree)
            self.block(f.body, top=True)
            ret = self.env.get(RET)
            if not isinstance(ret, HVal):  # unreachable after always_returns, kept as a guard
                raise self.error("this func does not return a value on every path: end each path with "
                                 "return <value>", f.source.tree)
            return ret
        finally:
            self.frames.pop()
            self.env, self.src, self.returned, self._node = saved

    def func_return(self, s: ast.Return) -> None:
        """`return v` in a func: the value of the call (every path ends in one, see funcs._normalize)."""
        if s.value is None:
            raise self.error("a func returns a value: write return <value>", s)
        if isinstance(s.value, ast.Tuple):
            raise self.error(f"this returns {len(s.value.elts)} values; a func returns one value: "
                             "write one func per result", s.value)
        v = self.expr(s.value)
        if isinstance(v, (R.PlaneRef, R.OutRef, R.ParamRef)):
            v = self.read(v)
        if not isinstance(v, HVal):
            raise self.error(f"this returns {self.describe(v)}; a func returns one lane value", s.value)
        self.env[RET] = v
        self.returned = True
