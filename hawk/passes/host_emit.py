"""Op-building helpers for the host lowering, and the summation steps each policy uses.

`fast_add` carries reassoc/contract so LLVM may vectorize; every other step is strict IEEE, which is what makes
compensated sums tight and ordered sums reproducible.
"""

from __future__ import annotations

import platform

from mlir import ir
from mlir.dialects import memref, vector

from hawk.ir.build import create

_FAST = "#arith.fastmath<reassoc,contract>"
_NNAN_NSZ = "#arith.fastmath<nnan,nsz>"
_SGE, _SLT, _EQ = 5, 2, 0
_OGT, _OEQ = 2, 1
# x86 has no float conditional move: LLVM lowers a float select on an integer condition to a branch (see blend).
X86 = platform.machine().lower() in ("x86_64", "amd64")

# Payloads with more components than this are "wide": the host lowering moves them between memory and one vector
# value with loops over components (through a small per-function buffer) and keeps the running state of their
# sums in a buffer updated by loops over components (hawk/passes/lower/wide.py), instead of one scalar op (and one
# loop-carried register) per component. Straight-line code per component makes LLVM's SLP vectorizer and
# MLIR's canonicalizer superlinear: a Vector[256] kernel took 20-40 s to compile, a Vector[1024] one minutes,
# and an ordered or compensated sum of a Vector[16] already 2-5 s.
WIDE_PAYLOAD = 8


def like(shape_of: ir.Type, elem: ir.Type) -> ir.Type:
    """`elem`, or a vector of `elem` shaped like `shape_of` when that is a vector type."""
    if isinstance(shape_of, ir.VectorType):
        return ir.VectorType.get(ir.VectorType(shape_of).shape, elem)
    return elem


def size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class Emit:
    """Small op builders bound to one float type (created under an insertion point and location)."""

    def __init__(self, ftype: ir.Type):
        self.f = ftype
        self.f64 = ir.F64Type.get()
        self.index = ir.IndexType.get()
        self.i64 = ir.IntegerType.get_signless(64)
        self.i1 = ir.IntegerType.get_signless(1)
        self.silent = False  # float64 TwoSums raise no flag (sae_emit: a stage whose chains read the inexact flag)

    # ---- constants and plumbing ----------------------------------------------------------------------
    def c(self, v: int, t=None) -> ir.Value:
        t = t or self.index
        return create("arith.constant", [], [t], {"value": ir.IntegerAttr.get(t, v)}).result

    def ci(self, v: int, t: ir.Type) -> ir.Value:
        """An integer constant of type t: a scalar, or every entry of an integer vector type."""
        if not isinstance(t, ir.VectorType):
            return self.c(v, t)
        attr = ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(ir.VectorType(t).element_type, v))
        return create("arith.constant", [], [t], {"value": attr}).result

    def cf(self, v: float, t=None) -> ir.Value:
        """A float constant of type t (the kernel's float type by default): a scalar, or every entry of a float
        vector type."""
        t = t or self.f
        if isinstance(t, ir.VectorType):
            return self.splat(v, t)
        return create("arith.constant", [], [t], {"value": ir.FloatAttr.get(t, v)}).result

    def op(self, name: str, *args, t=None, attrs=None) -> ir.Value:
        return create(name, list(args), [t or args[0].type], attrs).result

    def cmpi(self, pred: int, a: ir.Value, b: ir.Value) -> ir.Value:
        pred_attr = ir.IntegerAttr.get(self.i64, pred)
        return self.op("arith.cmpi", a, b, t=like(a.type, self.i1), attrs={"predicate": pred_attr})

    def cmpf(self, pred: int, a: ir.Value, b: ir.Value) -> ir.Value:
        pred_attr = ir.IntegerAttr.get(self.i64, pred)
        return self.op("arith.cmpf", a, b, t=like(a.type, self.i1), attrs={"predicate": pred_attr})

    def to_index(self, v: ir.Value) -> ir.Value:
        return v if v.type == self.index else self.op("arith.index_cast", v, t=self.index)

    def to_i64(self, v: ir.Value) -> ir.Value:
        return v if v.type == self.i64 else self.op("arith.index_cast", v, t=self.i64)

    def widen(self, v: ir.Value, t: ir.Type) -> ir.Value:
        t = like(v.type, t)
        return v if v.type == t else self.op("arith.extf", v, t=t)

    def narrow(self, v: ir.Value, t: ir.Type) -> ir.Value:
        t = like(v.type, t)
        return v if v.type == t else self.op("arith.truncf", v, t=t)

    def load(self, buf: ir.Value, i: ir.Value) -> ir.Value:
        return memref.load(buf, [i])

    def store(self, v: ir.Value, buf: ir.Value, i: ir.Value):
        memref.store(v, buf, [i])

    def dim(self, buf: ir.Value) -> ir.Value:
        return create("memref.dim", [buf, self.c(0)], [self.index]).result

    def address(self, buf: ir.Value) -> ir.Value:
        """Where a buffer's data starts, as an index (to see whether two buffers are one)."""
        return create("memref.extract_aligned_pointer_as_index", [buf], [self.index]).result

    def add_i(self, *vals) -> ir.Value:
        r = vals[0]
        for v in vals[1:]:
            r = self.op("arith.addi", r, v)
        return r

    def mul_i(self, a, b) -> ir.Value:
        return self.op("arith.muli", a, b)

    def clamp(self, i: ir.Value, n: ir.Value) -> ir.Value:
        """Clamp an index into [0, n - 1] so that an out-of-range read never leaves the buffer."""
        i = self.op("arith.maxsi", i, self.c(0))
        return self.op("arith.minsi", i, self.op("arith.subi", n, self.c(1)))

    def select(self, c, a, b) -> ir.Value:
        return self.op("arith.select", c, a, b, t=a.type)

    def blend(self, c, a, b) -> ir.Value:
        """select(c, a, b) without a branch, for a float carried from lane to lane under a flag that changes
        where the data says (a segmented scan's reset at a run boundary). On x86 LLVM lowers a scalar float
        select on an integer condition to a branch, mispredicted at every unpredictable flag: a third of a
        reduce_by_key's time. Here the flag becomes a float (2.0 or 0.0, from its bits) behind
        `llvm.arithmetic.fence`, which no fold looks through, and the select's condition a float compare, which
        x86 lowers to a compare and a blend. The same value in every case (elsewhere: a plain select)."""
        t = a.type
        if not X86 or not isinstance(t, (ir.F64Type, ir.F32Type)):
            return self.select(c, a, b)
        width = 64 if isinstance(t, ir.F64Type) else 32
        it = ir.IntegerType.get_signless(width)
        two = 1 << (width - 2)  # the bits of 2.0: the exponent field's top bit
        bits = self.select(c, self.c(two, it), self.c(0, it))
        flag = create("llvm.call_intrinsic", [self.op("arith.bitcast", bits, t=t)], [t],
                      {"intrin": ir.StringAttr.get("llvm.arithmetic.fence"),
                       "op_bundle_sizes": ir.DenseI32ArrayAttr.get([]),
                       "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 0])}).result
        return self.select(self.cmpf(_OGT, flag, self.cf(1.0, t)), a, b)

    # ---- payload values --------------------------------------------------------------------------
    def elems(self, v: ir.Value, shape) -> list[ir.Value]:
        """The entries of a vector/matrix value in row-major order (a scalar is its own entry)."""
        if not shape:
            return [v]
        out = []
        for k in range(size(shape)):
            pos, r = [], k
            for d in reversed(shape):
                pos.append(r % d)
                r //= d
            out.append(vector.extract(v, [], list(reversed(pos))))
        return out

    def wide(self, shape) -> bool:
        return size(shape) > WIDE_PAYLOAD if shape else False

    def flat(self, v: ir.Value) -> ir.Value:
        """A vector value as a 1-D vector (row-major), for loads and stores of whole payloads."""
        t = ir.VectorType(v.type)
        if t.rank == 1:
            return v
        return create("vector.shape_cast", [v], [ir.VectorType.get([size(t.shape)], t.element_type)]).result

    def shaped(self, v: ir.Value, shape) -> ir.Value:
        if len(shape) == 1:
            return v
        return create("vector.shape_cast", [v], [ir.VectorType.get(list(shape), ir.VectorType(v.type).element_type)]
                      ).result

    def splat(self, value: float, like: ir.Type) -> ir.Value:
        """A constant vector of `like`'s type with every entry `value` (a float vector)."""
        t = ir.VectorType(like)
        attr = ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(t.element_type, value))
        return create("arith.constant", [], [t], {"value": attr}).result

    def bcast(self, v: ir.Value, like_type: ir.Type) -> ir.Value:
        """A scalar spread over a vector of `like_type` (unchanged when `like_type` is a scalar type)."""
        if not isinstance(like_type, ir.VectorType):
            return v
        return create("vector.broadcast", [v], [like_type]).result

    def shuffle(self, a: ir.Value, b: ir.Value, mask: list[int]) -> ir.Value:
        """Entries of the vectors a and b (b's numbered after a's) picked by `mask`, as a vector of len(mask)."""
        out = ir.VectorType.get([len(mask)], ir.VectorType(a.type).element_type)
        return create("vector.shuffle", [a, b], [out], {"mask": ir.DenseI64ArrayAttr.get(mask)}).result

    def any_of(self, flags: ir.Value) -> ir.Value:
        """Whether any entry of a vector of i1 is set."""
        return create("vector.reduction", [flags], [self.i1], {"kind": ir.Attribute.parse("#vector.kind<or>")}).result

    def all_of(self, flags: ir.Value) -> ir.Value:
        """Whether every entry of a vector of i1 is set."""
        return create("vector.reduction", [flags], [self.i1], {"kind": ir.Attribute.parse("#vector.kind<and>")}).result

    def vload(self, buf: ir.Value, at: ir.Value, n: int, elem: ir.Type) -> ir.Value:
        return create("vector.load", [buf, at], [ir.VectorType.get([n], elem)]).result

    def vstore(self, v: ir.Value, buf: ir.Value, at: ir.Value):
        create("vector.store", [v, buf, at], [])

    def pack(self, vals: list[ir.Value], shape) -> ir.Value:
        if not shape:
            return vals[0]
        return create("vector.from_elements", vals, [ir.VectorType.get(list(shape), vals[0].type)]).result

    # ---- summation steps ---------------------------------------------------------------------------
    def identity(self, kind: str, t=None) -> ir.Value:
        return self.cf({"sum": 0.0, "mean": 0.0, "max": float("-inf"), "min": float("inf")}[kind], t)

    def fast_add(self, a, b) -> ir.Value:
        return self.op("arith.addf", a, b, attrs={"fastmath": ir.Attribute.parse(_FAST)})

    def fast_sub(self, a, b) -> ir.Value:
        return self.op("arith.subf", a, b, attrs={"fastmath": ir.Attribute.parse(_FAST)})

    def add(self, a, b) -> ir.Value:
        return self.op("arith.addf", a, b)

    def extremum(self, kind: str, a, b) -> ir.Value:
        return self.op("arith.maximumf" if kind == "max" else "arith.minimumf", a, b)

    def fast_extremum(self, kind: str, a, b) -> ir.Value:
        """max/min as one packed instruction once vectorized: NaNs and the sign of a zero result are left open
        (nnan, nsz), so the caller must track both apart and restore them (lower_host's extremum flags): the value
        is exact otherwise, since max/min return one of their operands."""
        name = "arith.maxnumf" if kind == "max" else "arith.minnumf"
        return self.op(name, a, b, attrs={"fastmath": ir.Attribute.parse(_NNAN_NSZ)})

    def combine_kind(self, kind: str, a, b) -> ir.Value:
        return self.add(a, b) if kind in ("sum", "mean") else self.extremum(kind, a, b)

    def neumaier(self, s: ir.Value, c: ir.Value, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """One compensated step: s + x rounded, and the rounding error folded into c (Neumaier's variant)."""
        t = self.add(s, x)
        big = self.cmpf(3, self.abs(s), self.abs(x))  # oge: |s| >= |x|
        lost_x = self.add(self.op("arith.subf", s, t), x)
        lost_s = self.add(self.op("arith.subf", x, t), s)
        # An infinite or NaN t has no rounding error to keep (inf - inf would turn c into NaN): c stays as it was,
        # so the finish's t + c is t, as IEEE addition of the terms gives.
        inf = self.cf(float("inf"), t.type)
        finite = self.cmpf(4, self.abs(t), inf)  # olt: false for inf and NaN
        return t, self.select(finite, self.add(c, self.select(big, lost_x, lost_s)), c)

    def two_sum(self, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(s, err) with s = fl(a + b) and s + err = a + b exactly (Knuth's TwoSum; strict IEEE, any order of
        magnitudes; not exact when a sum overflows). Silent (sae_emit) when self.silent and a is float64."""
        elem = ir.VectorType(a.type).element_type if isinstance(a.type, ir.VectorType) else a.type
        if self.silent and elem == self.f64:
            from hawk.passes import sae_emit  # (x86 intrinsics: only where a stage asks)

            return sae_emit.two_sum(self, a, b)
        s = self.add(a, b)
        bb = self.op("arith.subf", s, a)
        err = self.add(self.op("arith.subf", a, self.op("arith.subf", s, bb)), self.op("arith.subf", b, bb))
        return s, err

    def merge_pairs(self, his: ir.Value, los: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(high, low) float64 pairs, side by side in two vectors of a power-of-two width, added into one pair by
        halves: each half's pairs take the other half's highs, then its lows, by two TwoSums side by side, so the
        latency is a few such rounds, not a chain as long as the vectors. Returns (hi, lo, ok) as scalars: ok (i1)
        when every step was exact (no low's TwoSum lost anything, no sum overflowed), so that hi + lo is exactly
        the sum of every value of both vectors."""
        ok = None
        while ir.VectorType(his.type).shape[0] > 1:
            m = ir.VectorType(his.type).shape[0] // 2
            low, high = list(range(m)), list(range(m, 2 * m))
            h, lo_ = self.shuffle(his, his, low), self.shuffle(los, los, low)
            for x in (self.shuffle(his, his, high), self.shuffle(los, los, high)):
                h, e1 = self.two_sum(h, x)
                lo_, e2 = self.two_sum(lo_, e1)
                fine = self.cmpf(_OEQ, e2, self.cf(0.0, e2.type))  # (false for NaN: an inf or NaN sum)
                every = self.all_of(fine)
                ok = every if ok is None else self.op("arith.andi", ok, every)
            his, los = h, lo_
        return vector.extract(his, [], [0]), vector.extract(los, [], [0]), ok

    def abs(self, v: ir.Value) -> ir.Value:
        """|v|; on a vector as max(v, -v) (the same comparisons, NaN included): the LLVM pipeline sends math.absf
        to libm one element at a time."""
        if not isinstance(v.type, ir.VectorType):
            return self.op("math.absf", v)
        return self.op("arith.maximumf", v, self.op("arith.negf", v))

    def tree(self, vals: list[ir.Value]) -> ir.Value:
        """Pairwise sum, level by level ((v0+v1)+(v2+v3))...; an odd last value moves up unchanged."""
        while len(vals) > 1:
            nxt = [self.add(vals[k], vals[k + 1]) for k in range(0, len(vals) - 1, 2)]
            if len(vals) % 2:
                nxt.append(vals[-1])
            vals = nxt
        return vals[0]
