"""Typed lane values and the rules that combine them (the semantic half of the front end).

An `HVal` is one lane's value: an MLIR value (or a Python number not yet materialised), its kind
('f' float, 'i' integer, 'b' boolean) and its payload shape (() scalar, (n,) vector, (r, c) matrix).
Every operation here creates upstream ops (arith, math, vector) at the current insertion point.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import arith, vector

from hawk.ir.build import create

CMP_F = {"==": 1, ">": 2, ">=": 3, "<": 4, "<=": 5}  # ordered predicates; != is une (13), true for NaN
CMP_I = {"==": 0, "!=": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}


class SemanticError(Exception):
    """A typing rule was broken; the visitor adds file, line and kernel."""


@dataclass
class HVal:
    value: object  # ir.Value, or a Python int/float/bool constant
    kind: str  # 'f', 'i' or 'b'
    shape: tuple[int, ...] = ()
    reduced: object = field(default=None)  # set on the result of hawk.sum & co

    @property
    def is_const(self) -> bool:
        return not isinstance(self.value, ir.Value)


def const(x) -> HVal:
    if isinstance(x, bool):
        return HVal(x, "b")
    if isinstance(x, int):
        return HVal(x, "i")
    if isinstance(x, float):
        return HVal(x, "f")
    raise SemanticError(f"{x!r} is not a number a kernel can use")


class Semantics:
    """Typing and op creation for one kernel specialisation (one float type)."""

    def __init__(self, ftype: ir.Type):
        self.ftype = ftype
        self.i64 = ir.IntegerType.get_signless(64)
        self.i1 = ir.IntegerType.get_signless(1)

    # ---- types -------------------------------------------------------------------------------
    def elem(self, kind: str) -> ir.Type:
        return {"f": self.ftype, "i": self.i64, "b": self.i1}[kind]

    def type_of(self, kind: str, shape: tuple[int, ...]) -> ir.Type:
        e = self.elem(kind)
        return ir.VectorType.get(list(shape), e) if shape else e

    def mlir(self, v: HVal) -> ir.Value:
        """The MLIR value of `v`, materialising a constant."""
        if not v.is_const:
            return v.value
        t = self.elem(v.kind)
        if v.kind == "f":
            return arith.constant(t, ir.FloatAttr.get(t, float(v.value)))
        return arith.constant(t, ir.IntegerAttr.get(t, int(v.value)))

    def wrap(self, value: ir.Value, kind: str, shape=()) -> HVal:
        return HVal(value, kind, tuple(shape))

    # ---- conversions -------------------------------------------------------------------------
    def to_float(self, v: HVal) -> HVal:
        if v.kind == "f":
            return v
        if v.is_const:
            return HVal(float(v.value), "f", v.shape)
        t = self.type_of("f", v.shape)
        name = "arith.sitofp" if v.kind == "i" else "arith.uitofp"
        return self.wrap(create(name, [v.value], [t]).result, "f", v.shape)

    def to_int(self, v: HVal) -> HVal:
        if v.kind == "i":
            return v
        if v.is_const:
            return HVal(int(v.value), "i", v.shape)
        t = self.type_of("i", v.shape)
        name = "arith.fptosi" if v.kind == "f" else "arith.extui"
        return self.wrap(create(name, [v.value], [t]).result, "i", v.shape)

    def to_kind(self, v: HVal, kind: str) -> HVal:
        if kind == "f":
            return self.to_float(v)
        if kind == "i":
            return self.to_int(v)
        if v.kind != "b":
            raise SemanticError("a condition must be a comparison or a logical value")
        return v

    def broadcast(self, v: HVal, shape: tuple[int, ...]) -> HVal:
        if v.shape == shape:
            return v
        if v.shape:
            raise SemanticError(f"values of shapes {v.shape} and {shape} cannot be combined")
        src = self.mlir(v)
        return self.wrap(vector.broadcast(self.type_of(v.kind, shape), src), v.kind, shape)

    def unify(self, a: HVal, b: HVal, kind: str | None = None) -> tuple[HVal, HVal]:
        """Bring two operands to one kind and shape (ints meet floats as floats)."""
        if kind is None:
            kind = "f" if "f" in (a.kind, b.kind) else "i"
        a, b = self.to_kind(a, kind), self.to_kind(b, kind)
        if a.shape != b.shape:
            if a.shape and b.shape:
                raise SemanticError(f"values of shapes {a.shape} and {b.shape} cannot be combined")
            shape = a.shape or b.shape
            a, b = self.broadcast(a, shape), self.broadcast(b, shape)
        return a, b

    # ---- arithmetic ----------------------------------------------------------------------------
    def binop(self, op: str, a: HVal, b: HVal) -> HVal:
        if a.is_const and b.is_const and not a.shape and not b.shape:
            return self._fold(op, a, b)
        if op == "/":
            a, b = self.unify(a, b, "f")
        elif op == "**":
            return self.power(a, b)
        else:
            a, b = self.unify(a, b)
        kind, shape = a.kind, a.shape
        x, y = self.mlir(a), self.mlir(b)
        t = x.type
        if kind == "f":
            if op == "//":
                q = create("arith.divf", [x, y], [t]).result
                return self.wrap(create("math.floor", [q], [t]).result, "f", shape)
            if op == "%":  # Python's modulo: x - floor(x / y) * y
                q = create("math.floor", [create("arith.divf", [x, y], [t]).result], [t]).result
                return self.wrap(create("arith.subf", [x, create("arith.mulf", [q, y], [t]).result], [t]).result,
                                 "f", shape)
            name = {"+": "arith.addf", "-": "arith.subf", "*": "arith.mulf", "/": "arith.divf"}[op]
            return self.wrap(create(name, [x, y], [t]).result, "f", shape)
        names = {"+": "arith.addi", "-": "arith.subi", "*": "arith.muli", "//": "arith.floordivsi",
                 "%": None, "&": "arith.andi", "|": "arith.ori", "^": "arith.xori"}
        if op == "%":  # Python's modulo for integers: x - floordiv(x, y) * y
            q = create("arith.floordivsi", [x, y], [t]).result
            r = create("arith.subi", [x, create("arith.muli", [q, y], [t]).result], [t]).result
            return self.wrap(r, "i", shape)
        if op not in names:
            raise SemanticError(f"operator {op} is not defined for these values")
        return self.wrap(create(names[op], [x, y], [t]).result, "i", shape)

    def _fold(self, op: str, a: HVal, b: HVal) -> HVal:
        x, y = a.value, b.value
        try:
            r = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y, "/": lambda: x / y,
                 "//": lambda: x // y, "%": lambda: x % y, "**": lambda: x ** y,
                 "&": lambda: x & y, "|": lambda: x | y, "^": lambda: x ^ y}[op]()
        except ZeroDivisionError as exc:
            raise SemanticError(f"constant division by zero in {x!r} {op} {y!r}") from exc
        return const(r if not isinstance(r, bool) else int(r))

    def power(self, a: HVal, b: HVal) -> HVal:
        if b.is_const and b.kind == "i" and 0 <= b.value <= 8:
            n = int(b.value)
            if n == 0:
                return self.broadcast(HVal(1 if a.kind == "i" else 1.0, a.kind if a.kind != "b" else "i"),
                                      a.shape) if a.shape else HVal(1 if a.kind == "i" else 1.0, a.kind)
            r = a
            for _ in range(n - 1):  # x*x*...: exactly what NumPy computes for small integer powers
                r = self.binop("*", r, a)
            return r
        a, b = self.unify(a, b, "f")
        return self.wrap(create("math.powf", [self.mlir(a), self.mlir(b)], [self.mlir(a).type]).result, "f",
                         a.shape)

    def neg(self, a: HVal) -> HVal:
        if a.is_const:
            return const(-a.value)
        if a.kind == "f":
            return self.wrap(create("arith.negf", [a.value], [a.value.type]).result, "f", a.shape)
        return self.binop("-", self.broadcast(HVal(0, "i"), a.shape) if a.shape else HVal(0, "i"),
                          self.to_int(a))

    def compare(self, op: str, a: HVal, b: HVal) -> HVal:
        if a.is_const and b.is_const:
            x, y = a.value, b.value
            return const({"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op])
        a, b = self.unify(a, b)
        rt = self.type_of("b", a.shape)
        if a.kind == "f":
            pred = 13 if op == "!=" else CMP_F[op]  # une: NaN != x is true, as in Python
            r = create("arith.cmpf", [self.mlir(a), self.mlir(b)], [rt],
                       {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), pred)}).result
        else:
            r = create("arith.cmpi", [self.mlir(a), self.mlir(b)], [rt],
                       {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), CMP_I[op])}).result
        return self.wrap(r, "b", a.shape)

    def logic(self, op: str, a: HVal, b: HVal) -> HVal:
        a, b = self.to_kind(a, "b"), self.to_kind(b, "b")
        if a.is_const and b.is_const:
            return const(bool(a.value and b.value) if op == "and" else bool(a.value or b.value))
        a, b = self.unify(a, b, "b")
        name = "arith.andi" if op == "and" else "arith.ori"
        return self.wrap(create(name, [self.mlir(a), self.mlir(b)], [self.mlir(a).type]).result, "b", a.shape)

    def lnot(self, a: HVal) -> HVal:
        a = self.to_kind(a, "b")
        if a.is_const:
            return const(not a.value)
        one = self.mlir(self.broadcast(HVal(True, "b"), a.shape) if a.shape else HVal(True, "b"))
        return self.wrap(create("arith.xori", [a.value, one], [a.value.type]).result, "b", a.shape)

    def select(self, c: HVal, a: HVal, b: HVal) -> HVal:
        c = self.to_kind(c, "b")
        a, b = self.unify(a, b, "f" if "f" in (a.kind, b.kind) else ("i" if "i" in (a.kind, b.kind) else "b"))
        if c.shape and c.shape != a.shape:
            a, b = self.broadcast(a, c.shape), self.broadcast(b, c.shape)
        cv = self.mlir(c)
        if c.shape != a.shape:
            cv = self.mlir(self.broadcast(c, a.shape))
        r = create("arith.select", [cv, self.mlir(a), self.mlir(b)], [self.mlir(a).type]).result
        return self.wrap(r, a.kind, a.shape)

    # ---- functions -----------------------------------------------------------------------------
    def unary_math(self, name: str, a: HVal) -> HVal:
        a = self.to_float(a)
        x = self.mlir(a)
        return self.wrap(create(f"math.{name}", [x], [x.type]).result, "f", a.shape)

    def abs(self, a: HVal) -> HVal:
        if a.kind == "i":
            x = self.mlir(a)
            return self.wrap(create("math.absi", [x], [x.type]).result, "i", a.shape)
        return self.unary_math("absf", a)

    def minmax(self, which: str, a: HVal, b: HVal) -> HVal:
        a, b = self.unify(a, b)
        if a.is_const and b.is_const:
            return const(min(a.value, b.value) if which == "min" else max(a.value, b.value))
        x, y = self.mlir(a), self.mlir(b)
        if a.kind == "f":
            name = "arith.minimumf" if which == "min" else "arith.maximumf"  # NaN-propagating, as np.minimum
        else:
            name = "arith.minsi" if which == "min" else "arith.maxsi"
        return self.wrap(create(name, [x, y], [x.type]).result, a.kind, a.shape)

    def binary_math(self, name: str, a: HVal, b: HVal) -> HVal:
        a, b = self.unify(a, b, "f")
        x, y = self.mlir(a), self.mlir(b)
        return self.wrap(create(f"math.{name}", [x, y], [x.type]).result, "f", a.shape)

    def index(self, x: HVal, n: HVal) -> HVal:
        """clamp(floor(x), 0, n - 1) as an integer; NaN maps to 0."""
        if x.shape:
            raise SemanticError("m.index takes one scalar value")
        if x.kind != "f":
            lo = self.minmax("max", self.to_int(x), HVal(0, "i"))
            return self.minmax("min", lo, self.binop("-", self.to_int(n), HVal(1, "i")))
        f = self.unary_math("floor", x)
        top = self.to_float(self.binop("-", self.to_int(n), HVal(1, "i")))
        v = self.mlir(f)
        lo = create("arith.maxnumf", [v, self.mlir(HVal(0.0, "f"))], [v.type]).result
        hi = create("arith.minnumf", [lo, self.mlir(top)], [v.type]).result
        return self.to_int(self.wrap(hi, "f"))

    def vec(self, items: list[HVal]) -> HVal:
        if not items:
            raise SemanticError("m.vec needs at least one component")
        if any(i.shape for i in items):
            raise SemanticError("m.vec takes scalars; nest vectors with m.mat")
        kind = "f" if any(i.kind == "f" for i in items) else "i"
        vals = [self.mlir(self.to_kind(i, kind)) for i in items]
        t = self.type_of(kind, (len(items),))
        return self.wrap(vector.from_elements(t, vals), kind, (len(items),))

    def mat(self, rows: list[HVal]) -> HVal:
        if not rows or any(len(r.shape) != 1 for r in rows) or len({r.shape for r in rows}) != 1:
            raise SemanticError("m.mat takes equal-length vectors, one per row")
        kind = "f" if any(r.kind == "f" for r in rows) else "i"
        elems = [self.component(self.to_kind(r, kind), (j,)) for r in rows for j in range(r.shape[0])]
        shape = (len(rows), rows[0].shape[0])
        t = self.type_of(kind, shape)
        return self.wrap(vector.from_elements(t, [self.mlir(e) for e in elems]), kind, shape)

    def component(self, v: HVal, pos: tuple[int, ...]) -> HVal:
        """An entry (or a row, for a matrix and one position) of a vector/matrix value."""
        if len(pos) > len(v.shape):
            raise SemanticError(f"a value of shape {v.shape} has no entry {pos}")
        for p, n in zip(pos, v.shape, strict=False):
            if not 0 <= p < n:
                raise SemanticError(f"position {p} is outside an axis of length {n}")
        shape = v.shape[len(pos):]
        r = vector.extract(self.mlir(v), [], list(pos))
        return self.wrap(r, v.kind, shape)

    def column(self, v: HVal, j: int) -> HVal:
        if len(v.shape) != 2:
            raise SemanticError(".columns[j] is for a matrix value")
        return self.vec([self.component(v, (i, j)) for i in range(v.shape[0])])

    def fold(self, v: HVal, axis: str | None) -> HVal:
        """Sum a value's own axes inside the lane: components, rows or columns (None: all)."""
        if not v.shape:
            raise SemanticError("rank-0")
        a = self.to_float(v) if v.kind == "b" else v
        x = self.mlir(a)
        names = {1: {"components": 0}, 2: {"rows": 0, "columns": 1}}[len(v.shape)]
        if axis is None:
            dims = list(range(len(v.shape)))
        elif axis in names:
            dims = [names[axis]]
        else:
            raise SemanticError(f"a value of shape {v.shape} has axes {sorted(names)}, not {axis!r}")
        shape = tuple(n for d, n in enumerate(v.shape) if d not in dims)
        acc = self.mlir(self.broadcast(HVal(0.0 if a.kind == "f" else 0, a.kind), shape) if shape
                        else HVal(0.0 if a.kind == "f" else 0, a.kind))
        kind = ir.Attribute.parse("#vector.kind<add>")
        r = vector.multi_reduction(kind, x, acc, dims)
        return self.wrap(r, a.kind, shape)
