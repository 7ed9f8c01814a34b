"""The derivative table of the reverse: for each lane op the front end emits, how a cotangent of its result
becomes cotangents of its operands, written as new ops in the adjoint kernel (the same dialects as the forward).

A rule takes (emitter, op, g) where g is the cotangent of the op's (single) result and returns a list of
(operand position, contribution). Ops whose result is not a float (comparisons, integer arithmetic, casts to
integers) carry no cotangent; ops whose result is piecewise constant (floor, ceil, round, trunc) contribute
nothing. An op with a float result that is not in the table is refused by name (never a silent zero).
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import vector

from hawk.ir.build import create

_PRED = {"oeq": 1, "ogt": 2, "oge": 3, "olt": 4, "ole": 5, "une": 13}


def is_float(t: ir.Type) -> bool:
    """A float scalar or a vector of floats: the types that carry cotangents."""
    if isinstance(t, ir.VectorType):
        t = ir.VectorType(t).element_type
    return isinstance(t, (ir.F64Type, ir.F32Type))


class Emit:
    """Small builders for the adjoint's ops at the current insertion point."""

    def const(self, x: float, t: ir.Type) -> ir.Value:
        if isinstance(t, ir.VectorType):
            vt = ir.VectorType(t)
            attr = ir.DenseElementsAttr.get_splat(vt, ir.FloatAttr.get(vt.element_type, x))
        else:
            attr = ir.FloatAttr.get(t, x)
        return create("arith.constant", [], [t], {"value": attr}).result

    def iconst(self, x: int) -> ir.Value:
        i64 = ir.IntegerType.get_signless(64)
        return create("arith.constant", [], [i64], {"value": ir.IntegerAttr.get(i64, x)}).result

    def zero(self, t: ir.Type) -> ir.Value:
        return self.const(0.0, t)

    def op(self, name: str, *xs: ir.Value, t: ir.Type | None = None) -> ir.Value:
        return create(name, list(xs), [t or xs[0].type]).result

    def add(self, a, b):
        return self.op("arith.addf", a, b)

    def sub(self, a, b):
        return self.op("arith.subf", a, b)

    def mul(self, a, b):
        return self.op("arith.mulf", a, b)

    def div(self, a, b):
        return self.op("arith.divf", a, b)

    def neg(self, a):
        return self.op("arith.negf", a)

    def math(self, name: str, *xs):
        return self.op(f"math.{name}", *xs)

    def bool_type(self, t: ir.Type) -> ir.Type:
        i1 = ir.IntegerType.get_signless(1)
        return ir.VectorType.get(ir.VectorType(t).shape, i1) if isinstance(t, ir.VectorType) else i1

    def cmp(self, pred: str, a, b):
        i64 = ir.IntegerType.get_signless(64)
        return create("arith.cmpf", [a, b], [self.bool_type(a.type)],
                      {"predicate": ir.IntegerAttr.get(i64, _PRED[pred])}).result

    def icmp_eq(self, a, b):
        i64 = ir.IntegerType.get_signless(64)
        return create("arith.cmpi", [a, b], [self.bool_type(a.type)], {"predicate": ir.IntegerAttr.get(i64, 0)}).result

    def select(self, c, a, b):
        if isinstance(a.type, ir.VectorType) and not isinstance(c.type, ir.VectorType):
            c = vector.broadcast(self.bool_type(a.type), c)
        return create("arith.select", [c, a, b], [a.type]).result

    def where(self, c, a):
        """a where c holds, else zero."""
        return self.select(c, a, self.zero(a.type))

    def land(self, a, b):
        return self.op("arith.andi", a, b)

    def lnot(self, a):
        i1 = ir.IntegerType.get_signless(1)
        return self.op("arith.xori", a, create("arith.constant", [], [i1], {"value": ir.IntegerAttr.get(i1, 1)}).result)


def _sq(e: Emit, x):
    return e.mul(x, x)


def _ln(e: Emit, x, t):
    return e.const(x, t)


def _unary(f):
    """A rule for a one-operand function whose derivative f(e, x, r) is a factor of g."""
    return lambda e, op, g: [(0, e.mul(g, f(e, op.operands[0], op.results[0])))]


def _sqrt_1m(e, x):
    return e.math("sqrt", e.sub(e.const(1.0, x.type), _sq(e, x)))


def _abs(e, op, g):
    x = op.operands[0]
    z = e.zero(x.type)
    return [(0, e.select(e.cmp("olt", x, z), e.neg(g), e.select(e.cmp("ogt", x, z), g, z)))]


def _div(e, op, g):
    q = e.div(g, op.operands[1])
    return [(0, q), (1, e.neg(e.mul(q, op.results[0])))]


def _rem(e, op, g):  # fmod: x - y * trunc(x / y)
    x, y = op.operands
    return [(0, g), (1, e.neg(e.mul(g, e.math("trunc", e.div(x, y)))))]


def _pow(e, op, g):  # as jax: no contribution where the factor would be 0 * inf (b == 0; a == 0 for the exponent)
    a, b = op.operands
    r = op.results[0]
    one, z = e.const(1.0, a.type), e.zero(a.type)
    da = e.mul(g, e.mul(b, e.math("powf", a, e.sub(b, one))))
    db = e.mul(g, e.mul(r, e.math("log", a)))
    return [(0, e.select(e.cmp("oeq", b, z), z, da)), (1, e.select(e.cmp("oeq", a, z), z, db))]


def _atan2(e, op, g):  # atan2(y, x)
    y, x = op.operands
    d = e.add(_sq(e, x), _sq(e, y))
    return [(0, e.div(e.mul(g, x), d)), (1, e.neg(e.div(e.mul(g, y), d)))]


def _select(e, op, g):
    c = op.operands[0]
    if not is_float(op.operands[1].type):
        return []
    return [(1, e.where(c, g)), (2, e.select(c, e.zero(g.type), g))]


def _pick(pred: str):
    """maxnumf / minnumf (m.index's clamp): the operand that was picked gets the cotangent."""

    def rule(e, op, g):
        a, b = op.operands
        first = e.cmp(pred, a, b)
        first = e.op("arith.ori", first, e.cmp("une", b, b))
        return [(0, e.where(first, g)), (1, e.select(first, e.zero(g.type), g))]

    return rule


def _fma(e, op, g):
    a, b, _ = op.operands
    return [(0, e.mul(g, b)), (1, e.mul(g, a)), (2, g)]


def _erf(e, x, r):
    return e.mul(e.const(2.0 / math.sqrt(math.pi), x.type), e.math("exp", e.neg(_sq(e, x))))


# The derivative table: op name -> rule. Functions of hawk.math not listed by name here are built by the front
# end from these ops (min/max/clamp/where/sign/hypot/isnan... are selects and comparisons, dot/norm are vector
# folds, rsqrt is 1 / sqrt), so their derivatives follow.
RULES = {
    "arith.addf": lambda e, op, g: [(0, g), (1, g)],
    "arith.subf": lambda e, op, g: [(0, g), (1, e.neg(g))],
    "arith.mulf": lambda e, op, g: [(0, e.mul(g, op.operands[1])), (1, e.mul(g, op.operands[0]))],
    "arith.divf": _div,
    "arith.negf": lambda e, op, g: [(0, e.neg(g))],
    "arith.remf": _rem,
    "arith.select": _select,
    "arith.maxnumf": _pick("oge"),
    "arith.minnumf": _pick("ole"),
    "arith.maximumf": _pick("oge"),
    "arith.minimumf": _pick("ole"),
    "math.fma": _fma,
    "math.powf": _pow,
    "math.atan2": _atan2,
    "math.absf": _abs,
    "math.sqrt": lambda e, op, g: [(0, e.div(g, e.add(op.results[0], op.results[0])))],
    "math.exp": _unary(lambda e, x, r: r),
    "math.exp2": _unary(lambda e, x, r: e.mul(r, _ln(e, math.log(2.0), x.type))),
    "math.expm1": _unary(lambda e, x, r: e.add(r, e.const(1.0, x.type))),
    "math.log": lambda e, op, g: [(0, e.div(g, op.operands[0]))],
    "math.log2": lambda e, op, g: [(0, e.div(g, e.mul(op.operands[0], _ln(e, math.log(2.0), g.type))))],
    "math.log10": lambda e, op, g: [(0, e.div(g, e.mul(op.operands[0], _ln(e, math.log(10.0), g.type))))],
    "math.log1p": lambda e, op, g: [(0, e.div(g, e.add(op.operands[0], e.const(1.0, g.type))))],
    "math.sin": _unary(lambda e, x, r: e.math("cos", x)),
    "math.cos": _unary(lambda e, x, r: e.neg(e.math("sin", x))),
    "math.tan": _unary(lambda e, x, r: e.add(e.const(1.0, x.type), _sq(e, r))),
    "math.asin": lambda e, op, g: [(0, e.div(g, _sqrt_1m(e, op.operands[0])))],
    "math.acos": lambda e, op, g: [(0, e.neg(e.div(g, _sqrt_1m(e, op.operands[0]))))],
    "math.atan": lambda e, op, g: [(0, e.div(g, e.add(e.const(1.0, g.type), _sq(e, op.operands[0]))))],
    "math.sinh": _unary(lambda e, x, r: e.math("cosh", x)),
    "math.cosh": _unary(lambda e, x, r: e.math("sinh", x)),
    "math.tanh": _unary(lambda e, x, r: e.sub(e.const(1.0, x.type), _sq(e, r))),
    "math.erf": _unary(_erf),
    # piecewise constant: zero almost everywhere (as jax.grad)
    "math.floor": lambda e, op, g: [],
    "math.ceil": lambda e, op, g: [],
    "math.roundeven": lambda e, op, g: [],
    "math.round": lambda e, op, g: [],
    "math.trunc": lambda e, op, g: [],
}


# ---- vector payloads -----------------------------------------------------------------------------------------
def _static(op) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes["static_position"]))


def _extract(e, op, g):
    src = op.operands[0]
    return [(0, vector.insert(g, e.zero(src.type), [], _static(op)))]


def _insert(e, op, g):
    pos = _static(op)
    part = vector.extract(g, [], pos)
    rest = vector.insert(e.zero(op.operands[0].type), g, [], pos)
    return [(0, part), (1, rest)]


def _from_elements(e, op, g):
    shape = list(ir.VectorType(op.results[0].type).shape)
    out = []
    for k in range(len(op.operands)):
        pos, rem = [], k
        for n in reversed(shape):
            pos.insert(0, rem % n)
            rem //= n
        out.append((k, vector.extract(g, [], pos)))
    return out


def _fold_all(e, g, dims: list[int], acc_type: ir.Type):
    kind = ir.Attribute.parse("#vector.kind<add>")
    return vector.multi_reduction(kind, g, e.zero(acc_type), dims)


def _broadcast(e, op, g):
    src = op.operands[0]
    gshape = list(ir.VectorType(g.type).shape)
    if not isinstance(src.type, ir.VectorType):
        return [(0, _fold_all(e, g, list(range(len(gshape))), src.type))]
    sshape = list(ir.VectorType(src.type).shape)
    lead = len(gshape) - len(sshape)
    dims = list(range(lead)) + [lead + k for k, n in enumerate(sshape) if n == 1 and gshape[lead + k] != 1]
    if any(n == 1 for n in sshape):
        raise NotImplementedError("vector.broadcast of unit dimensions")
    return [(0, _fold_all(e, g, dims, src.type) if dims else g)]


def _multi_reduction(e, op, g):
    src = op.operands[0]
    kind = str(op.attributes["kind"])
    if "add" not in kind:
        raise NotImplementedError(f"vector.multi_reduction {kind}")
    dims = list(ir.DenseI64ArrayAttr(op.attributes["reduction_dims"]))
    st = ir.VectorType(src.type)
    shape = list(st.shape)
    if len(dims) == len(shape):
        spread = vector.broadcast(src.type, g)
    elif dims == [0]:
        spread = vector.broadcast(src.type, g)
    else:  # a matrix folded along its columns (dims == [1]): broadcast the row sums, then transpose
        tt = ir.VectorType.get([shape[1], shape[0]], st.element_type)
        spread = vector.transpose(src.type, vector.broadcast(tt, g), [1, 0])
    return [(0, spread), (1, g)]


RULES.update({
    "vector.extract": _extract,
    "vector.insert": _insert,
    "vector.from_elements": _from_elements,
    "vector.broadcast": _broadcast,
    "vector.multi_reduction": _multi_reduction,
})

# float-valued arith ops that read nothing differentiable (hawk ops are handled by the sweep itself)
LEAVES = ("arith.constant", "arith.sitofp", "arith.uitofp")


def _copysign(e, op, g):
    """m.copysign(x, y), built by the front end in bit operations: bitcast(ori(andi(bits x, magnitude),
    andi(bits y, sign))). The cotangent reaches x (given back as a value, not a position), times -1 where x and
    y differ in sign; y gets none (the result is piecewise constant in y)."""
    try:
        ori = op.operands[0].owner
        mag, sgn = ori.operands
        x = mag.owner.operands[0].owner.operands[0]
        y = sgn.owner.operands[0].owner.operands[0]
        assert ori.name == "arith.ori" and is_float(x.type) and is_float(y.type)
    except (AttributeError, AssertionError, IndexError):
        raise NotImplementedError("arith.bitcast to a float outside m.copysign") from None
    it = op.operands[0].type
    bx, by = (create("arith.bitcast", [v], [it]).result for v in (x, y))
    xr = e.op("arith.xori", bx, by)
    zero = create("arith.constant", [], [it], {"value": _izero(it)}).result
    i64 = ir.IntegerType.get_signless(64)
    neg = create("arith.cmpi", [xr, zero], [e.bool_type(it)], {"predicate": ir.IntegerAttr.get(i64, 2)}).result
    return [(x, e.select(neg, e.neg(g), g))]


def _izero(t: ir.Type) -> ir.Attribute:
    if isinstance(t, ir.VectorType):
        vt = ir.VectorType(t)
        return ir.DenseElementsAttr.get_splat(vt, ir.IntegerAttr.get(vt.element_type, 0))
    return ir.IntegerAttr.get(t, 0)


RULES["arith.bitcast"] = _copysign
