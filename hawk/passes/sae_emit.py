"""float64 adds and subtracts that round without raising any floating-point flag (x86-64 with AVX-512F).

AVX-512's arithmetic intrinsics take a rounding operand; "to nearest, suppress all exceptions" ({rn-sae})
rounds as a plain add does but leaves MXCSR's sticky flags alone. The ordered chains that the inexact flag
proves exact (hawk/passes/lower/flag_chains.py) round this way wherever they mean to (their Fast2Sum's first
add, every TwoSum: Emit.two_sum when Emit.silent is set), so the flag is raised only by the steps that must
not round. Values of any float64 shape: scalars and vectors narrower than 8 are widened to 8 lanes and back.
"""

from __future__ import annotations

from mlir import ir

from hawk.ir.build import create

_SAE = 8  # the rounding operand: _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC


def _pieces(e, v: ir.Value) -> list[ir.Value]:
    """v (a float64 vector of 8k entries) as k vectors of 8."""
    n = ir.VectorType(v.type).shape[0]
    return [v] if n == 8 else [e.shuffle(v, v, list(range(k, k + 8))) for k in range(0, n, 8)]


def _joined(e, parts: list[ir.Value]) -> ir.Value:
    while len(parts) > 1:
        n = ir.VectorType(parts[0].type).shape[0]
        parts = [e.shuffle(a, b, list(range(2 * n))) for a, b in zip(parts[::2], parts[1::2], strict=True)]
    return parts[0]


def _eight(e, op, a: ir.Value, b: ir.Value) -> ir.Value:
    """op on float64 values of any shape, through vectors of 8."""
    t = a.type
    if not isinstance(t, ir.VectorType):  # a scalar: in lane 0 of a vector of 8
        v8 = ir.VectorType.get([8], t)
        wide = [create("vector.broadcast", [x], [v8]).result for x in (a, b)]
        return create("vector.extract", [op(*wide)], [t], {"static_position": ir.DenseI64ArrayAttr.get([0]),
                                                           "dynamic_position": []}).result
    n = ir.VectorType(t).shape[0]
    if n % 8 == 0:
        return _joined(e, [op(x, y) for x, y in zip(_pieces(e, a), _pieces(e, b), strict=True)])
    pad = list(range(n)) + [0] * (8 - n)  # (narrower: its lanes repeated to fill 8, then cut back)
    r = op(e.shuffle(a, a, pad), e.shuffle(b, b, pad))
    return e.shuffle(r, r, list(range(n)))


def _silent(e, name: str, a: ir.Value, b: ir.Value) -> ir.Value:
    rounding = e.c(_SAE, ir.IntegerType.get_signless(32))
    piece = ir.VectorType.get([8], e.f64)

    def op(x: ir.Value, y: ir.Value) -> ir.Value:
        return create("llvm.call_intrinsic", [x, y, rounding], [piece],
                      {"intrin": ir.StringAttr.get(f"llvm.x86.avx512.{name}.pd.512"),
                       "op_bundle_sizes": ir.DenseI32ArrayAttr.get([]),
                       "operandSegmentSizes": ir.DenseI32ArrayAttr.get([3, 0])}).result

    return _eight(e, op, a, b)


def add(e, a: ir.Value, b: ir.Value) -> ir.Value:
    """fl(a + b), raising no flag."""
    return _silent(e, "add", a, b)


def sub(e, a: ir.Value, b: ir.Value) -> ir.Value:
    """fl(a - b), raising no flag."""
    return _silent(e, "sub", a, b)


def two_sum(e, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Knuth's TwoSum (Emit.two_sum's steps) with every step silent: the same values, the flags as they were."""
    s = add(e, a, b)
    bb = sub(e, s, a)
    return s, add(e, sub(e, a, sub(e, s, bb)), sub(e, b, bb))


def total(e, v: ir.Value) -> ir.Value:
    """A float64 vector of 8k entries added into one scalar (fold, then halves) by plain adds, flagged like
    fold's."""
    v = fold(e, v)
    for n in (4, 2, 1):
        v = e.add(e.shuffle(v, v, list(range(n))), e.shuffle(v, v, list(range(n, 2 * n))))
    return create("vector.extract", [v], [e.f64], {"static_position": ir.DenseI64ArrayAttr.get([0]),
                                                  "dynamic_position": []}).result


def fold(e, v: ir.Value) -> ir.Value:
    """A float64 vector of 8k entries added into 8 (entry j + 8i into j) by plain adds, which raise the inexact
    flag when they round (flag_chains: a block's 32 chain sums become 8 before they go into the chunk's
    pairs, so that the merge runs on one vector)."""
    parts = _pieces(e, v)
    while len(parts) > 1:
        parts = [e.add(a, b) for a, b in zip(parts[::2], parts[1::2], strict=True)]
    return parts[0]
