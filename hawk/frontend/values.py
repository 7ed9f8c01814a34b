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
NARROW_INDEX = 1 << 24  # m.index bounds up to this convert through i32 (n - 1 is exact in float32 and fits 32 bits)


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


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def const(x, what: str | None = None) -> HVal:
    """A compile-time number; an integer must fit int64, the type kernel integers have (`what` names it)."""
    if isinstance(x, bool):
        return HVal(x, "b")
    if isinstance(x, int):
        if not INT64_MIN <= x <= INT64_MAX:
            raise SemanticError(f"the integer constant {what or _short(x)} is outside the int64 range (-2**63 to "
                                "2**63 - 1) that kernel integers have: write it as a float (e.g. 1e30) if a float "
                                "is meant, or keep integers smaller")
        return HVal(x, "i")
    if isinstance(x, float):
        return HVal(x, "f")
    raise SemanticError(f"{x!r} is not a number a kernel can use")


def _short(x: int) -> str:
    """An integer as written, or its size when it is too long to read."""
    s = str(x)
    return s if len(s) <= 24 else f"{s[:6]}... ({len(s.lstrip('-'))} digits)"


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
            if isinstance(v.value, float) and not -2.0 ** 63 <= v.value < 2.0 ** 63:
                raise SemanticError(f"the constant {v.value!r} has no int64 value (int64 holds -2**63 to 2**63 - 1)")
            return const(int(v.value))
        t = self.type_of("i", v.shape)
        if v.kind != "f":
            return self.wrap(create("arith.extui", [v.value], [t]).result, "i", v.shape)
        # NaN and values beyond int64 become INT64_MIN, as NumPy's astype gives on x86 (fptosi alone is undefined)
        r = self.op("arith.fptosi", [v.value], t)
        limit = self.constant(2.0 ** 63, "f", v.shape)
        bad = self.op("arith.ori", [self.cmp("une", v.value, v.value, v.shape),
                                    self.op("arith.cmpf", [self.op("math.absf", [v.value], v.value.type), limit],
                                            self.type_of("b", v.shape),
                                            {"predicate": ir.IntegerAttr.get(self.i64, 3)})],  # oge
                      self.type_of("b", v.shape))
        return self.wrap(self.op("arith.select", [bad, self.constant(INT64_MIN, "i", v.shape), r], t), "i", v.shape)

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
    def constant(self, x, kind: str, shape: tuple[int, ...]) -> ir.Value:
        """The MLIR constant `x` of `kind`, broadcast to `shape`."""
        v = HVal(x, kind)
        return self.mlir(self.broadcast(v, shape) if shape else v)

    def op(self, name: str, operands: list, rtype: ir.Type, attrs: dict | None = None) -> ir.Value:
        return create(name, list(operands), [rtype], attrs or {}).result

    def cmp(self, pred: str, x: ir.Value, y: ir.Value, shape: tuple[int, ...]) -> ir.Value:
        """arith.cmpf/cmpi by predicate name (float: oeq ogt olt une; integer: eq ne slt)."""
        codes = {"oeq": 1, "ogt": 2, "olt": 4, "une": 13, "eq": 0, "ne": 1, "slt": 2}
        name = "arith.cmpi" if pred in ("eq", "ne", "slt") else "arith.cmpf"
        return self.op(name, [x, y], self.type_of("b", shape),
                       {"predicate": ir.IntegerAttr.get(self.i64, codes[pred])})

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
            if op in ("//", "%"):
                return self.wrap(self.float_divmod(x, y, shape)[0 if op == "//" else 1], "f", shape)
            name = {"+": "arith.addf", "-": "arith.subf", "*": "arith.mulf", "/": "arith.divf"}.get(op)
            if name is None:
                raise SemanticError(f"operator {op} takes integers (or truth values), not floats: convert with "
                                    "int(...) first")
            return self.wrap(self.op(name, [x, y], t), "f", shape)
        if op in ("//", "%"):
            return self.wrap(self.int_divmod(x, y, b, shape)[0 if op == "//" else 1], "i", shape)
        names = {"+": "arith.addi", "-": "arith.subi", "*": "arith.muli", "&": "arith.andi", "|": "arith.ori",
                 "^": "arith.xori"}
        if op not in names:
            raise SemanticError(f"operator {op} is not defined for these values")
        return self.wrap(self.op(names[op], [x, y], t), "i", shape)

    def copysign(self, x: ir.Value, y: ir.Value, shape) -> ir.Value:
        """|x| with the sign bit of y, in bit operations (exact, NaN's sign too, on every target; the host's
        math-to-libm conversion refuses math.copysign)."""
        width = 64 if isinstance(self.ftype, ir.F64Type) else 32
        ie = ir.IntegerType.get_signless(width)
        it = ir.VectorType.get(list(shape), ie) if shape else ie
        sign = 1 << (width - 1)
        bx, by = (self.op("arith.bitcast", [v], it) for v in (x, y))
        mag = self.op("arith.andi", [bx, self._iconst(it, ie, sign - 1, shape)], it)
        sgn = self.op("arith.andi", [by, self._iconst(it, ie, -sign, shape)], it)
        return self.op("arith.bitcast", [self.op("arith.ori", [mag, sgn], it)], x.type)

    def _iconst(self, t: ir.Type, elem: ir.Type, value: int, shape) -> ir.Value:
        attr = ir.IntegerAttr.get(elem, value)
        if shape:
            attr = ir.DenseElementsAttr.get_splat(t, attr)
        return self.op("arith.constant", [], t, {"value": attr})

    def float_divmod(self, x: ir.Value, y: ir.Value, shape) -> tuple[ir.Value, ir.Value]:
        """NumPy's floor_divide and remainder of floats, step for step (npy_divmod): mod = fmod(x, y), the
        quotient (x - mod) / y moved down by one where mod and y differ in sign (mod moves up by y), then rounded
        to the nearest integer below with NumPy's half correction; zeros signed as NumPy signs them. A zero divisor
        gives x / y and fmod(x, 0) = NaN. Exact fmod (arith.remf) is libm's fmod on the host, libdevice's and
        ocml's on nvvm and rocdl, and eagle's own integer code on spirv."""
        t = x.type
        zero, one, half = (self.constant(c, "f", shape) for c in (0.0, 1.0, 0.5))
        mod = self.op("arith.remf", [x, y], t)
        div = self.op("arith.divf", [self.op("arith.subf", [x, mod], t), y], t)
        mod_nonzero = self.cmp("une", mod, zero, shape)  # true for NaN, as C's `if (mod)`
        flip = self.op("arith.xori", [self.cmp("olt", y, zero, shape), self.cmp("olt", mod, zero, shape)],
                       self.type_of("b", shape))
        adjust = self.op("arith.andi", [mod_nonzero, flip], flip.type)
        div = self.op("arith.select", [adjust, self.op("arith.subf", [div, one], t), div], t)
        fixed = self.op("arith.select", [adjust, self.op("arith.addf", [mod, y], t), mod], t)
        fixed = self.op("arith.select", [mod_nonzero, fixed, self.copysign(zero, y, shape)], t)
        floor = self.op("math.floor", [div], t)
        up = self.cmp("ogt", self.op("arith.subf", [div, floor], t), half, shape)
        floor = self.op("arith.select", [up, self.op("arith.addf", [floor, one], t), floor], t)
        ratio = self.op("arith.divf", [x, y], t)
        quotient = self.op("arith.select", [self.cmp("une", div, zero, shape), floor,
                                            self.copysign(zero, ratio, shape)], t)
        by_zero = self.cmp("oeq", y, zero, shape)
        return (self.op("arith.select", [by_zero, ratio, quotient], t),
                self.op("arith.select", [by_zero, mod, fixed], t))

    def int_divmod(self, x: ir.Value, y: ir.Value, b: HVal, shape) -> tuple[ir.Value, ir.Value]:
        """NumPy's floor_divide and remainder of int64s, which never trap: x // 0 and x % 0 are 0, and
        INT64_MIN // -1 wraps to INT64_MIN (INT64_MIN % -1 is 0). The division runs on a safe divisor (1 where
        the divisor is 0 or where INT64_MIN meets -1) and a select puts NumPy's 0 back; a constant divisor other
        than 0 and -1 needs neither; a positive one takes the cheaper forms of `_divmod_by_positive`."""
        t = x.type
        if b.is_const and b.value > 0:
            return self._divmod_by_positive(x, int(b.value), t, shape)
        if b.is_const and b.value not in (0, -1):
            q = self.op("arith.floordivsi", [x, y], t)
            return q, self.op("arith.subi", [x, self.op("arith.muli", [q, y], t)], t)
        zero, one, minus_one, lowest = (self.constant(c, "i", shape) for c in (0, 1, -1, INT64_MIN))
        by_zero = self.cmp("eq", y, zero, shape)
        overflow = self.op("arith.andi", [self.cmp("eq", x, lowest, shape), self.cmp("eq", y, minus_one, shape)],
                           by_zero.type)
        safe = self.op("arith.select", [self.op("arith.ori", [by_zero, overflow], by_zero.type), one, y], t)
        q = self.op("arith.floordivsi", [x, safe], t)
        r = self.op("arith.subi", [x, self.op("arith.muli", [q, safe], t)], t)
        return self.op("arith.select", [by_zero, zero, q], t), r

    def _divmod_by_positive(self, x: ir.Value, d: int, t: ir.Type, shape) -> tuple[ir.Value, ir.Value]:
        """Floor x // d and x % d for a constant d > 0, the same bits as floordivsi's expansion but cheaper (long
        lane loops spend their time there): a power of two is an arithmetic shift (floor) and a mask; another d
        divides ~x = -x - 1 >= 0 where x < 0 (x elsewhere) unsigned, which LLVM turns into a multiply-high and a
        shift with no sign fix, and ~ of that quotient is the floor: -(-x - 1) // d - 1. The remainder
        x - q * d is exact in wrapping arithmetic (it lies in [0, d)). Nothing traps or overflows."""
        if d == 1:
            return x, self.constant(0, "i", shape)
        if d & (d - 1) == 0:
            q = self.op("arith.shrsi", [x, self.constant(d.bit_length() - 1, "i", shape)], t)
            return q, self.op("arith.andi", [x, self.constant(d - 1, "i", shape)], t)
        c = self.constant(d, "i", shape)
        sign = self.op("arith.shrsi", [x, self.constant(63, "i", shape)], t)  # -1 where x < 0, else 0
        q = self.op("arith.xori", [self.op("arith.divui", [self.op("arith.xori", [x, sign], t), c], t), sign], t)
        return q, self.op("arith.subi", [x, self.op("arith.muli", [q, c], t)], t)

    def _fold(self, op: str, a: HVal, b: HVal) -> HVal:
        """A constant expression, computed now with Python's rules (which match NumPy's for //, % and ** of
        floats); a result beyond int64 or the float range is refused, never a raw Python exception."""
        x, y = a.value, b.value
        text = f"{x!r} {op} {y!r}"
        if op == "**" and isinstance(x, int) and isinstance(y, int) and abs(x) > 1 and y > 64:
            raise SemanticError(f"the integer constant {text} is outside the int64 range (-2**63 to 2**63 - 1) "
                                "that kernel integers have: write it as a float (e.g. 1e30) if a float is meant, "
                                "or keep integers smaller")
        if op in ("&", "|", "^") and not (isinstance(x, int) and isinstance(y, int)):
            raise SemanticError(f"operator {op} takes integers (or truth values), not {text}")
        try:
            r = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y, "/": lambda: x / y,
                 "//": lambda: x // y, "%": lambda: x % y, "**": lambda: x ** y,
                 "&": lambda: x & y, "|": lambda: x | y, "^": lambda: x ^ y}[op]()
        except ZeroDivisionError as exc:
            raise SemanticError(f"constant division by zero in {text}: a kernel refuses it rather than give "
                                "inf/NaN (or 0 for integers) at run time") from exc
        except OverflowError as exc:
            raise SemanticError(f"the constant {text} is beyond the float range (about -1.8e308 to 1.8e308): "
                                "use a smaller constant") from exc
        if isinstance(r, complex):  # a negative float to a fractional power: NumPy's float power gives NaN
            r = float("nan")
        long = isinstance(r, int) and len(str(r)) > 24
        return const(r if not isinstance(r, bool) else int(r), what=text if long else f"{text} = {r}")

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
        if a.kind in ("i", "b"):  # as np.abs of int64: INT64_MIN stays itself (math.absi has no host lowering)
            a = self.to_int(a)
            if a.is_const:
                return const(abs(a.value)) if a.value != INT64_MIN else a
            x = self.mlir(a)
            zero = self.constant(0, "i", a.shape)
            neg = self.op("arith.subi", [zero, x], x.type)
            return self.wrap(self.op("arith.select", [self.cmp("slt", x, zero, a.shape), neg, x], x.type), "i",
                             a.shape)
        return self.unary_math("absf", a)

    def minmax(self, which: str, a: HVal, b: HVal) -> HVal:
        a, b = self.unify(a, b)
        if a.is_const and b.is_const:
            return const(min(a.value, b.value) if which == "min" else max(a.value, b.value))
        x, y = self.mlir(a), self.mlir(b)
        if a.kind == "f":  # np.minimum's own rule: a where a < b or a is NaN, else b (so NaN wins, and of two
            # zeros the second)
            first = self.cmp("olt" if which == "min" else "ogt", x, y, a.shape)
            first = self.op("arith.ori", [first, self.cmp("une", x, x, a.shape)], first.type)
            return self.wrap(self.op("arith.select", [first, x, y], x.type), "f", a.shape)
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
        if n.is_const and isinstance(n.value, int) and n.value <= NARROW_INDEX:
            # a bound that fits 32 bits converts through i32: on x86 a vector of them is one instruction
            # (vcvttpd2dq / vcvttps2dq), where a 64-bit conversion takes one scalar instruction per lane
            narrow = self.op("arith.fptosi", [hi], ir.IntegerType.get_signless(32))
            return self.wrap(self.op("arith.extsi", [narrow], self.i64), "i")
        return self.wrap(self.op("arith.fptosi", [hi], self.i64), "i")  # in range already: no guard needed

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
            raise SemanticError("this value is a scalar, with no axes of its own to fold: m.dot, m.norm and "
                                ".sum(axis=...) take a vector or a matrix (build one with m.vec / m.mat)")
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
