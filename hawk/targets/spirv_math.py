"""The transcendental functions of the SPIR-V target, written in arith ops and compiled into each kernel.

GLSL.std.450, the only math library a Vulkan shader has, works in 32 bits only and follows Vulkan's loose precision
rules (measured on lavapipe: tanh and sinh of x ~ 1e-8 wrong by 200%, log near 1 by 1e-3 relative, atan by 2e-5;
pow of a negative base is undefined). So eagle brings its own, after Sun's fdlibm (as kept in FreeBSD's msun),
reimplemented here without branches (both sides computed, one selected):
  exp:  x = k ln2 + r, |r| <= ln2/2 (ln2 in two parts so that k ln2_hi is exact), fdlibm's degree-5 rational
        correction, then 2^k in two exact steps (results in the subnormal range round once); exp2 via exp(r ln2)
        with x = k + r;
  log:  x = 2^k (1 + f), 1 + f in [sqrt(2)/2, sqrt(2)), log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f/(2+f);
        log2 and log10 multiply by the constant in two parts;
  sin, cos, tan: x = n pi/2 + (y0 + y1), pi/2 in three 33-bit parts (up to three rounds of Cody-Waite, exact for
        |x| <= 2^19 pi), the degree-13/14 kernels on [-pi/4, pi/4] with the tail y1; tan = sin/cos;
  atan: fdlibm's four breakpoints and 11-term odd polynomial; atan2 = atan(y/x) in its quadrant with IEEE's rules
        for zeros and infinities; asin x = atan2(x, sqrt((1-x)(1+x))), acos likewise.
float64 results are within 1 ulp of the correctly rounded value (2 for tan, log10, asin, acos), so they can differ
from the host's libm in the last bit: transcendentals are outside the bitwise promise of "ordered".
float32 calls (those and expm1, log1p, sinh, cosh, tanh with short series near 0, and pow with IEEE's special cases)
run the same code in float64 and round once: every float32 value sampled in the tests matched the correctly rounded
one. float32 division and sqrt also go through float64, which makes them correctly rounded on every driver (Vulkan
allows 2.5 ulps). This needs Float64 on the device (lavapipe, NVIDIA, AMD have it; the runtime names the feature
if missing).
sin/cos/tan of a finite |x| > 2^19 pi go through the host's Payne-Hanek reduction (hawk/targets/host_math.py,
192 bits of 2/pi and 64-bit integer products; its words picked by selects), in a branch that only lanes with
such an argument take: the host's bits for every argument.
"""

from __future__ import annotations

import functools

from mlir import ir

from hawk.ir.build import create

SUPPORTED = ("exp", "log", "sin", "cos")
TRIG_LIMIT = 1647099.3291652855  # 2^19 * pi: beyond this the three-part reduction is no longer exact

# fdlibm's constants (hex-exact in the original; these decimal forms round to the same doubles)
LN2_HI, LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10
INV_LN2 = 1.44269504088896338700e+00
EXP_P = (1.66666666666666019037e-01, -2.77777777770155933842e-03, 6.61375632143793436117e-05,
         -1.65339022054652515390e-06, 4.13813679705723846039e-08)
EXP_HI, EXP_LO = 7.09782712893383973096e+02, -7.45133219101941108420e+02
LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01, 2.222219843214978396e-01,
      1.818357216161805012e-01, 1.531383769920937332e-01, 1.479819860511658591e-01)
TWO54 = 1.80143985094819840000e+16
S = (-1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04,
     2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10)
C = (4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05,
     -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11)
INV_PIO2 = 6.36619772367581382433e-01
PIO2 = ((1.57079632673412561417e+00, 6.07710050650619224932e-11),
        (6.07710050630396597660e-11, 2.02226624879595063154e-21),
        (2.02226624871116645580e-21, 8.47842766036889956997e-32))


class _B:
    """A tiny builder of f64/i64 arith at the current insertion point."""

    def __init__(self):
        self.f = ir.F64Type.get()
        self.i = ir.IntegerType.get_signless(64)
        self.b = ir.IntegerType.get_signless(1)

    def op(self, name, operands, rtype, attrs=None):
        return create(name, operands, [rtype], attrs).result

    def c(self, v: float):
        return self.op("arith.constant", [], self.f, {"value": ir.FloatAttr.get(self.f, v)})

    def ci(self, v: int):
        return self.op("arith.constant", [], self.i, {"value": ir.IntegerAttr.get(self.i, v)})

    def _f(self, v):
        return self.c(v) if isinstance(v, float) else v

    def _i(self, v):
        return self.ci(v) if isinstance(v, int) else v

    def add(self, a, b):
        return self.op("arith.addf", [self._f(a), self._f(b)], self.f)

    def sub(self, a, b):
        return self.op("arith.subf", [self._f(a), self._f(b)], self.f)

    def mul(self, a, b):
        return self.op("arith.mulf", [self._f(a), self._f(b)], self.f)

    def div(self, a, b):
        return self.op("arith.divf", [self._f(a), self._f(b)], self.f)

    def neg(self, a):
        return self.op("arith.negf", [a], self.f)

    def absf(self, a):
        return self.op("math.absf", [a], self.f)

    def roundeven(self, a):
        return self.op("math.roundeven", [a], self.f)

    def floor(self, a):
        return self.op("math.floor", [a], self.f)

    def fcmp(self, pred: str, a, b):
        preds = {"oeq": 1, "ogt": 2, "oge": 3, "olt": 4, "ole": 5, "one": 6, "uno": 14}
        return self.op("arith.cmpf", [self._f(a), self._f(b)], self.b,
                       {"predicate": ir.IntegerAttr.get(self.i, preds[pred])})

    def icmp(self, pred: str, a, b):
        preds = {"eq": 0, "ne": 1, "slt": 2, "sle": 3, "sgt": 4, "sge": 5}
        return self.op("arith.cmpi", [self._i(a), self._i(b)], self.b,
                       {"predicate": ir.IntegerAttr.get(self.i, preds[pred])})

    def sel(self, cond, a, b):
        a, b = (self._f(a), self._f(b)) if not (isinstance(a, int) or isinstance(b, int)) else (self._i(a),
                                                                                            self._i(b))
        return self.op("arith.select", [cond, a, b], a.type)

    def bits(self, a):
        return self.op("arith.bitcast", [a], self.i)

    def real(self, a):
        return self.op("arith.bitcast", [a], self.f)

    def iadd(self, a, b):
        return self.op("arith.addi", [self._i(a), self._i(b)], self.i)

    def isub(self, a, b):
        return self.op("arith.subi", [self._i(a), self._i(b)], self.i)

    def iand(self, a, b):
        return self.op("arith.andi", [self._i(a), self._i(b)], self.i)

    def ior(self, a, b):
        return self.op("arith.ori", [self._i(a), self._i(b)], self.i)

    def ixor(self, a, b):
        return self.op("arith.xori", [self._i(a), self._i(b)], self.i)

    def shl(self, a, n):
        return self.op("arith.shli", [self._i(a), self._i(n)], self.i)

    def shr(self, a, n):  # arithmetic
        return self.op("arith.shrsi", [self._i(a), self._i(n)], self.i)

    def land(self, a, b):
        return self.op("arith.andi", [a, b], self.b)

    def lor(self, a, b):
        return self.op("arith.ori", [a, b], self.b)

    def to_int(self, a):
        return self.op("arith.fptosi", [a], self.i)

    def to_real(self, a):
        return self.op("arith.sitofp", [a], self.f)

    def poly(self, z, coeffs):
        """c0 + z (c1 + z (c2 + ...)) by Horner's rule."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.add(k, self.mul(z, acc))
        return acc


def exp(b: _B, x):
    nan = b.fcmp("uno", x, x)
    xc = b.sel(b.fcmp("ogt", x, 710.0), 710.0, b.sel(b.fcmp("olt", x, -746.0), -746.0, x))
    xc = b.sel(nan, 0.0, xc)
    k = b.floor(b.add(b.mul(xc, INV_LN2), 0.5))
    hi = b.sub(xc, b.mul(k, LN2_HI))
    lo = b.mul(k, LN2_LO)
    r = b.sub(hi, lo)
    t = b.mul(r, r)
    c = b.sub(r, b.mul(t, b.poly(t, EXP_P)))
    y = b.sub(1.0, b.sub(b.sub(lo, b.div(b.mul(r, c), b.sub(2.0, c))), hi))
    ki = b.to_int(k)
    k1 = b.shr(ki, 1)
    k2 = b.isub(ki, k1)
    s1 = b.real(b.shl(b.iadd(k1, 1023), 52))
    s2 = b.real(b.shl(b.iadd(k2, 1023), 52))
    out = b.mul(b.mul(y, s1), s2)
    out = b.sel(b.fcmp("ogt", x, EXP_HI), float("inf"), out)
    out = b.sel(b.fcmp("olt", x, EXP_LO), 0.0, out)
    return b.sel(nan, b.add(x, x), out)


def log_reduce(b: _B, x):
    """fdlibm's reduction for a positive x: (xn, k, hx) with x = 2^k xn, xn in [sqrt(2)/2, sqrt(2)) (a subnormal x
    scaled by 2^54 first), hx the fraction bits of x's high word (which log's rational form picks its split by)."""
    sub = b.land(b.fcmp("ogt", x, 0.0), b.fcmp("olt", x, 2.2250738585072014e-308))
    xs = b.sel(sub, b.mul(x, TWO54), x)
    bits = b.bits(xs)
    hx = b.shr(bits, 32)  # the high word (sign bit 0 for the x > 0 that matter)
    k = b.isub(b.isub(b.shr(hx, 20), 1023), b.sel(sub, 54, 0))
    hx = b.iand(hx, 0x000FFFFF)
    i = b.iand(b.iadd(hx, 0x95F64), 0x100000)
    high = b.ior(hx, b.ixor(i, 0x3FF00000))
    xn = b.real(b.ior(b.shl(high, 32), b.iand(bits, 0xFFFFFFFF)))
    return xn, b.iadd(k, b.shr(i, 20)), hx


def log(b: _B, x):
    xn, k, hx = log_reduce(b, x)
    f = b.sub(xn, 1.0)
    s = b.div(f, b.add(2.0, f))
    dk = b.to_real(k)
    z = b.mul(s, s)
    w = b.mul(z, z)
    t1 = b.mul(w, b.poly(w, [LG[1], LG[3], LG[5]]))
    t2 = b.mul(z, b.poly(w, [LG[0], LG[2], LG[4], LG[6]]))
    big = b.icmp("sgt", b.ior(b.isub(hx, 0x6147A), b.isub(0x6B851, hx)), 0)
    r = b.add(t2, t1)
    hfsq = b.mul(b.mul(0.5, f), f)
    k0 = b.icmp("eq", k, 0)
    a0 = b.sub(f, b.sub(hfsq, b.mul(s, b.add(hfsq, r))))
    a1 = b.sub(b.mul(dk, LN2_HI), b.sub(b.sub(hfsq, b.add(b.mul(s, b.add(hfsq, r)), b.mul(dk, LN2_LO))), f))
    b0 = b.sub(f, b.mul(s, b.sub(f, r)))
    b1 = b.sub(b.mul(dk, LN2_HI), b.sub(b.sub(b.mul(s, b.sub(f, r)), b.mul(dk, LN2_LO)), f))
    out = b.sel(big, b.sel(k0, a0, a1), b.sel(k0, b0, b1))
    out = b.sel(b.fcmp("oeq", x, float("inf")), x, out)
    out = b.sel(b.fcmp("oeq", x, 0.0), float("-inf"), out)
    out = b.sel(b.fcmp("olt", x, 0.0), float("nan"), out)
    return b.sel(b.fcmp("uno", x, x), b.add(x, x), out)


def _ksin(b: _B, x, y):
    z = b.mul(x, x)
    w = b.mul(z, z)
    r = b.add(b.poly(z, [S[1], S[2], S[3]]), b.mul(b.mul(z, w), b.poly(z, [S[4], S[5]])))
    v = b.mul(z, x)
    return b.sub(x, b.sub(b.sub(b.mul(z, b.sub(b.mul(0.5, y), b.mul(v, r))), y), b.mul(v, S[0])))


def _kcos(b: _B, x, y):
    z = b.mul(x, x)
    w = b.mul(z, z)
    r = b.add(b.mul(z, b.poly(z, [C[0], C[1], C[2]])), b.mul(b.mul(w, w), b.poly(z, [C[3], C[4], C[5]])))
    hz = b.mul(0.5, z)
    w = b.sub(1.0, hz)
    return b.add(w, b.add(b.sub(b.sub(1.0, w), hz), b.sub(b.mul(z, r), b.mul(x, y))))


def _exponent(b: _B, v):
    return b.iand(b.shr(b.bits(v), 52), 0x7FF)


def _reduce(b: _B, x):
    """(n mod 4, y0, y1, out_of_range) with x = n pi/2 + y0 + y1."""
    ax = b.absf(x)
    finite = b.fcmp("olt", ax, float("inf"))
    far = b.land(finite, b.fcmp("ogt", ax, TRIG_LIMIT))
    xr = b.sel(b.lor(far, b.fcmp("uno", x, x)), 0.0, b.sel(finite, x, 0.0))
    fn = b.roundeven(b.mul(xr, INV_PIO2))
    (p1, p1t), (p2, p2t), (p3, p3t) = PIO2
    r = b.sub(xr, b.mul(fn, p1))
    w = b.mul(fn, p1t)
    y0 = b.sub(r, w)
    j = _exponent(b, xr)
    # second round where the first cancelled more than 16 bits
    t = r
    w2 = b.mul(fn, p2)
    r2 = b.sub(t, w2)
    w2 = b.sub(b.mul(fn, p2t), b.sub(b.sub(t, r2), w2))
    y02 = b.sub(r2, w2)
    more = b.icmp("sgt", b.isub(j, _exponent(b, y0)), 16)
    r, w, y0 = b.sel(more, r2, r), b.sel(more, w2, w), b.sel(more, y02, y0)
    # third round where the second cancelled more than 49 bits
    t = r
    w3 = b.mul(fn, p3)
    r3 = b.sub(t, w3)
    w3 = b.sub(b.mul(fn, p3t), b.sub(b.sub(t, r3), w3))
    y03 = b.sub(r3, w3)
    most = b.land(more, b.icmp("sgt", b.isub(j, _exponent(b, y0)), 49))
    r, w, y0 = b.sel(most, r3, r), b.sel(most, w3, w), b.sel(most, y03, y0)
    y1 = b.sub(b.sub(r, y0), w)
    n = b.iand(b.to_int(fn), 3)
    return n, y0, y1, far


def sincos(b: _B, x, want: str):
    n, y0, y1, far = _reduce(b, x)
    s, c = _ksin(b, y0, y1), _kcos(b, y0, y1)
    if want == "sin":
        pick = [s, c, b.neg(s), b.neg(c)]
    else:
        pick = [c, b.neg(s), b.neg(c), s]
    out = b.sel(b.icmp("eq", n, 1), pick[1], pick[0])
    out = b.sel(b.icmp("eq", n, 2), pick[2], out)
    out = b.sel(b.icmp("eq", n, 3), pick[3], out)
    tiny = b.fcmp("olt", b.absf(x), 7.450580596923828e-09)  # 2^-27: sin x = x, cos x = 1 (and sin -0 = -0)
    out = b.sel(tiny, x if want == "sin" else b.c(1.0), out)
    bad = b.lor(b.fcmp("uno", x, x), b.fcmp("oeq", b.absf(x), float("inf")))
    return b.sel(bad, b.sub(x, x), out), far


ATAN_HI = (4.63647609000806093515e-01, 7.85398163397448278999e-01, 9.82793723247329054082e-01,
           1.57079632679489655800e+00)
ATAN_LO = (2.26987774529616870924e-17, 3.06161699786838301793e-17, 1.39033110312309984516e-17,
           6.12323399573676603587e-17)
AT = (3.33333333333329318027e-01, -1.99999999998764832476e-01, 1.42857142725034663711e-01,
      -1.11111104054623557880e-01, 9.09088713343650656196e-02, -7.69187620504482999495e-02,
      6.66107313738753120669e-02, -5.83357013379057348645e-02, 4.97687799461593236017e-02,
      -3.65315727442169155270e-02, 1.62858201153657823623e-02)
PI = 3.14159265358979311600e+00
PI_LO = 1.2246467991473531772e-16


def atan(b: _B, x):
    """fdlibm's atan: |x| split at 7/16, 11/16, 19/16, 39/16 around atan(1/2), atan(1), atan(3/2), pi/2."""
    ax = b.absf(x)
    t0 = b.div(b.sub(b.mul(2.0, ax), 1.0), b.add(2.0, ax))
    t1 = b.div(b.sub(ax, 1.0), b.add(ax, 1.0))
    t2 = b.div(b.sub(ax, 1.5), b.add(1.0, b.mul(1.5, ax)))
    t3 = b.div(-1.0, ax)
    lt = [b.fcmp("olt", ax, v) for v in (0.4375, 0.6875, 1.1875, 2.4375)]
    t = b.sel(lt[0], x, b.sel(lt[1], t0, b.sel(lt[2], t1, b.sel(lt[3], t2, t3))))
    hi = b.sel(lt[1], ATAN_HI[0], b.sel(lt[2], ATAN_HI[1], b.sel(lt[3], ATAN_HI[2], ATAN_HI[3])))
    lo = b.sel(lt[1], ATAN_LO[0], b.sel(lt[2], ATAN_LO[1], b.sel(lt[3], ATAN_LO[2], ATAN_LO[3])))
    z = b.mul(t, t)
    w = b.mul(z, z)
    s1 = b.mul(z, b.poly(w, [AT[0], AT[2], AT[4], AT[6], AT[8], AT[10]]))
    s2 = b.mul(w, b.poly(w, [AT[1], AT[3], AT[5], AT[7], AT[9]]))
    small = b.sub(t, b.mul(t, b.add(s1, s2)))
    big = b.sub(hi, b.sub(b.sub(b.mul(t, b.add(s1, s2)), lo), t))
    big = b.op("math.copysign", [big, x], b.f)
    out = b.sel(lt[0], small, big)
    out = b.sel(b.fcmp("olt", ax, 7.450580596923828e-09), x, out)  # 2^-27: atan x = x
    out = b.sel(b.fcmp("oeq", ax, float("inf")), b.op("math.copysign", [b.c(ATAN_HI[3]), x], b.f), out)
    return b.sel(b.fcmp("uno", x, x), b.add(x, x), out)


def atan2(b: _B, y, x):
    """atan(y/x) put in its quadrant, with IEEE atan2's rules for zeros and infinities."""
    ty = b.div(y, x)
    a = atan(b, ty)
    pi = b.op("math.copysign", [b.c(PI), y], b.f)
    pi_lo = b.op("math.copysign", [b.c(PI_LO), y], b.f)
    hpi = b.op("math.copysign", [b.c(ATAN_HI[3]), y], b.f)
    xneg = b.icmp("slt", b.bits(x), 0)
    r = b.sel(b.fcmp("olt", x, 0.0), b.add(pi, b.add(a, pi_lo)), a)
    r = b.sel(b.fcmp("oeq", x, 0.0), hpi, r)
    r = b.sel(b.fcmp("oeq", y, 0.0), b.sel(xneg, pi, y), r)
    yinf = b.fcmp("oeq", b.absf(y), float("inf"))
    xinf = b.fcmp("oeq", b.absf(x), float("inf"))
    quarter = b.sel(xneg, 2.356194490192345, 0.7853981633974483)
    r = b.sel(b.land(yinf, xinf), b.op("math.copysign", [quarter, y], b.f), r)
    r = b.sel(b.land(yinf, b.fcmp("olt", b.absf(x), float("inf"))), hpi, r)
    yfin = b.fcmp("olt", b.absf(y), float("inf"))
    r = b.sel(b.land(xinf, yfin), b.sel(xneg, pi, b.op("math.copysign", [b.c(0.0), y], b.f)), r)
    return b.sel(b.lor(b.fcmp("uno", x, x), b.fcmp("uno", y, y)), b.add(x, y), r)


def asin(b: _B, x):
    """asin x = atan2(x, sqrt((1 - x)(1 + x))) (1 - x exact near 1)."""
    return atan2(b, x, b.op("math.sqrt", [b.mul(b.sub(1.0, x), b.add(1.0, x))], b.f))


def acos(b: _B, x):
    return atan2(b, b.op("math.sqrt", [b.mul(b.sub(1.0, x), b.add(1.0, x))], b.f), x)


def exp2(b: _B, x):
    """2^x = 2^k e^(r ln 2) with k = round(x) and |r| <= 1/2 exact; r ln 2 in two parts."""
    k = b.roundeven(b.sel(b.fcmp("uno", x, x), 0.0, b.sel(b.fcmp("ogt", x, 1100.0), 1100.0,
                                                                b.sel(b.fcmp("olt", x, -1100.0), -1100.0, x))))
    r = b.sub(x, k)
    t = b.add(b.mul(r, LN2_HI), b.mul(r, LN2_LO))
    e = exp(b, t)
    ki = b.to_int(k)
    k1 = b.shr(ki, 1)
    k2 = b.isub(ki, k1)
    k1 = b.sel(b.icmp("slt", k1, -1000), -1000, b.sel(b.icmp("sgt", k1, 1000), 1000, k1))
    k2 = b.sel(b.icmp("slt", k2, -1000), -1000, b.sel(b.icmp("sgt", k2, 1000), 1000, k2))
    s1 = b.real(b.shl(b.iadd(k1, 1023), 52))
    s2 = b.real(b.shl(b.iadd(k2, 1023), 52))
    out = b.mul(b.mul(e, s1), s2)
    return b.sel(b.fcmp("uno", x, x), b.add(x, x), out)


def _series(b: _B, x, coeffs):
    """x (c0 + x^2 (c1 + x^2 (...)))"""
    return b.mul(x, b.poly(b.mul(x, x), coeffs))


def _small(b: _B, x, limit: float):
    return b.fcmp("olt", b.absf(x), limit)


# The float32 functions computed in float64 and rounded once (near-correctly-rounded floats on every device).
def expm1_32(b: _B, x):
    series = b.mul(x, b.poly(x, [1.0, 1 / 2, 1 / 6, 1 / 24, 1 / 120]))
    return b.sel(_small(b, x, 2.0 ** -7), series, b.sub(exp(b, x), 1.0))


def log1p_32(b: _B, x):
    series = b.mul(x, b.poly(x, [1.0, -1 / 2, 1 / 3, -1 / 4, 1 / 5]))
    return b.sel(_small(b, x, 2.0 ** -7), series, log(b, b.add(1.0, x)))


def sinh_32(b: _B, x):
    e = exp(b, x)
    big = b.mul(0.5, b.sub(e, b.div(1.0, e)))
    return b.sel(_small(b, x, 2.0 ** -5), _series(b, x, [1.0, 1 / 6, 1 / 120, 1 / 5040]), big)


def cosh_32(b: _B, x):
    e = exp(b, x)
    return b.mul(0.5, b.add(e, b.div(1.0, e)))


def tanh_32(b: _B, x):
    e = exp(b, b.mul(2.0, b.sel(b.fcmp("ogt", b.absf(x), 20.0), 0.0, x)))
    mid = b.div(b.sub(e, 1.0), b.add(e, 1.0))
    out = b.sel(_small(b, x, 2.0 ** -5), _series(b, x, [1.0, -1 / 3, 2 / 15, -17 / 315]), mid)
    one = b.op("math.copysign", [b.c(1.0), x], b.f)
    return b.sel(b.fcmp("ogt", b.absf(x), 20.0), one, out)


FMOD_STEP = 10  # bits of the exponent gap one i64 step of fmod takes (a remainder < 2^53, shifted, stays < 2^63)


def fmod(b: _B, x, y):
    """C's fmod(x, y) exactly (SPIR-V's OpFRem is only x - y trunc(x/y)): with x = mx 2^ex and y = my 2^ey (integer
    significands), the remainder is (mx 2^(ex-ey) mod my) 2^ey with x's sign. A gap of up to FMOD_STEP bits takes
    one i64 remainder; a larger one (|x/y| >= 2^10) takes one per FMOD_STEP bits, in straight code under an if (a
    loop would spend lavapipe's loop budget). NaN for an infinite or NaN x, a NaN or zero y; x when |x| < |y|."""
    from mlir.dialects import scf

    sign, mag = -(1 << 63), (1 << 63) - 1
    frac, hidden, inf_bits = (1 << 52) - 1, 1 << 52, 0x7FF0000000000000
    bx, by = b.bits(x), b.bits(y)
    ax, ay = b.iand(bx, mag), b.iand(by, mag)

    def split(a):  # a = m 2^(e - 1075), e >= 1 (subnormals: the hidden bit off, e = 1)
        e = b.shr(a, 52)
        normal = b.icmp("ne", e, 0)
        m = b.ior(b.iand(a, frac), b.sel(normal, b.ci(hidden), b.ci(0)))
        return m, b.sel(normal, e, b.ci(1))

    (mx, ex), (my, ey) = split(ax), split(ay)
    my = b.sel(b.icmp("eq", my, 0), b.ci(1), my)  # y = 0 gives NaN below; never divide by zero
    gap = b.op("arith.maxsi", [b.isub(ex, ey), b.ci(0)], b.i)

    def rem(v):
        return b.op("arith.remui", [v, my], b.i)

    far = b.icmp("sgt", gap, FMOD_STEP)
    branch = scf.IfOp(far, [b.i], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        r = rem(mx)
        for k in range((2046 + FMOD_STEP - 1) // FMOD_STEP):
            shift = b.op("arith.minsi", [b.op("arith.maxsi", [b.isub(gap, k * FMOD_STEP), b.ci(0)], b.i),
                                         b.ci(FMOD_STEP)], b.i)
            r = rem(b.shl(r, shift))
        scf.YieldOp([r])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([rem(b.shl(mx, gap))])
    r = branch.results[0]
    # r 2^(ey - 1075), exact: in one step where 2^(ey - 1075) is normal, else through 2^(ey - 947) and 2^-128
    e = b.isub(ey, 1075)
    low = b.icmp("slt", e, -1022)
    e1 = b.sel(low, b.iadd(e, 128), e)
    v = b.mul(b.to_real(r), b.real(b.shl(b.iadd(e1, 1023), 52)))
    v = b.sel(low, b.mul(v, 2.0 ** -128), v)
    v = b.real(b.ior(b.bits(v), b.iand(bx, sign)))
    v = b.sel(b.icmp("slt", ax, ay), x, v)
    bad = b.lor(b.lor(b.icmp("sge", ax, inf_bits), b.icmp("sgt", ay, inf_bits)), b.icmp("eq", ay, 0))
    return b.sel(bad, float("nan"), v)


F64_FUNCS = ("exp", "log", "sin", "cos", "tan", "exp2", "log2", "log10", "atan", "atan2", "asin", "acos")
F64_MORE = ("expm1", "log1p", "sinh", "cosh", "tanh", "powf", "erf")  # on exp and log (spirv_math64.py)
F32_FUNCS = (*F64_FUNCS, *F64_MORE)
INV_LN2_TAIL = 2.0355273740931033e-17  # 1/ln 2 - INV_LN2
INV_LN10, INV_LN10_TAIL = 0.4342944819032518, 1.098319650216765e-17


def _scaled_log(b: _B, x, hi: float, lo: float):
    """log(x) * (hi + lo), the constant's tail kept: within about 2 ulps."""
    v = log(b, x)
    return b.add(b.mul(v, hi), b.mul(v, lo))


def _far(b: _B, x, fn: str, far, near):
    """`near` where |x| <= TRIG_LIMIT, else sin, cos or tan of x through the host's Payne-Hanek reduction
    (hawk/targets/host_math.py: the same code, so far arguments give the host's bits), in a branch only lanes with
    such an argument take."""
    from mlir.dialects import scf

    from hawk.targets import host_math

    branch = scf.IfOp(far, [b.f], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        wide = _Wide()
        scf.YieldOp([host_math._trig(wide, x, fn, *host_math.reduce_far(wide, x))])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([near])
    return branch.results[0]


@functools.cache
def _wide_class():
    """host_math's _BI with the words of 2/pi picked by selects from constants (a shader has no constant table)."""
    from hawk.targets import host_math

    class Wide(host_math._BI):
        def word(self, j):
            words = (0, *host_math.TWO_OVER_PI)
            out = self.ci(_signed(words[-1]))
            for k in range(len(words) - 2, -1, -1):
                out = self.sel(self.icmp("eq", j, k), self.ci(_signed(words[k])), out)
            return out

    return Wide


def _signed(w: int) -> int:
    return w - (1 << 64) if w >= 1 << 63 else w


def _Wide():  # noqa: N802 (a class made on first use: host_math imports this module)
    return _wide_class()()


def _f64(b: _B, fn: str, args):
    x = args[0]
    if fn == "exp":
        return exp(b, x)
    if fn == "log":
        return log(b, x)
    if fn in ("sin", "cos", "tan"):
        if fn == "tan":
            s, far = sincos(b, x, "sin")
            c, _ = sincos(b, x, "cos")
            return _far(b, x, fn, far, b.div(s, c))
        out, far = sincos(b, x, fn)
        return _far(b, x, fn, far, out)
    if fn == "exp2":
        return exp2(b, x)
    if fn == "log2":
        return _scaled_log(b, x, INV_LN2, INV_LN2_TAIL)
    if fn == "log10":
        return _scaled_log(b, x, INV_LN10, INV_LN10_TAIL)
    if fn in ("atan", "asin", "acos"):
        return {"atan": atan, "asin": asin, "acos": acos}[fn](b, x)
    if fn == "atan2":
        return atan2(b, args[0], args[1])
    if fn in ("erf", "powf"):  # (float32 calls: spirv_math64's code in float64, rounded once by the caller)
        from hawk.targets import spirv_math64

        return spirv_math64.erf(b, x) if fn == "erf" else spirv_math64.pow_32(b, x, args[1])
    return {"expm1": expm1_32, "log1p": log1p_32, "sinh": sinh_32, "cosh": cosh_32, "tanh": tanh_32}[fn](b, x)


def lower_math(gpu_func, status) -> None:
    """Replace the math ops of `gpu_func` that the Vulkan path cannot compute well: the F64_FUNCS on float64 by the
    arith code above, the F32_FUNCS on float32 by the same code in float64 rounded once, trunc (which
    convert-math-to-spirv does not lower) by floor or ceil, and float32 division and square root by the float64 ones
    rounded once: Vulkan lets a driver be 2.5 ulps off for those, while a float64 quotient or root of float32
    values rounded to float32 is exactly the IEEE float32 result (53 >= 2 x 24 + 2), as on the host; arith.remf
    (OpFRem is inexact) by the exact `fmod` above. (`status`, eagle's status buffer, is not written here.)"""

    ops = []

    def visit(op):
        if op.name.startswith("math.") and len(op.results) == 1:
            t = op.results[0].type
            fn = op.name[5:]
            if (isinstance(t, ir.F64Type) and fn in F64_FUNCS + F64_MORE) or \
                    (isinstance(t, ir.F32Type) and fn in F32_FUNCS) \
                    or (fn == "trunc" and isinstance(t, (ir.F32Type, ir.F64Type))):
                ops.append(op.operation)
        return ir.WalkResult.ADVANCE

    def exact(op):  # float32 division and square root, exactly rounded through float64; fmod at both widths
        if op.name in ("arith.divf", "math.sqrt") and isinstance(op.results[0].type, ir.F32Type):
            ops.append(op.operation)
        if op.name == "arith.remf" and isinstance(op.results[0].type, (ir.F32Type, ir.F64Type)):
            ops.append(op.operation)
        return ir.WalkResult.ADVANCE

    gpu_func.operation.walk(visit)
    gpu_func.operation.walk(exact)
    for op in ops:
        if op.name == "arith.remf":  # exact in float64; a float32 remainder is exact there and rounds to itself
            t = op.results[0].type
            with ir.InsertionPoint(op), op.location:
                b = _B()
                wide = [a if isinstance(t, ir.F64Type) else b.op("arith.extf", [a], b.f) for a in op.operands]
                out = fmod(b, *wide)
                out = out if isinstance(t, ir.F64Type) else b.op("arith.truncf", [out], t)
            op.results[0].replace_all_uses_with(out)
            op.erase()
            continue
        if op.name in ("arith.divf", "math.sqrt"):
            with ir.InsertionPoint(op), op.location:
                b = _B()
                wide = [b.op("arith.extf", [a], b.f) for a in op.operands]
                out = b.op("arith.truncf", [b.op(op.name, wide, b.f)], op.results[0].type)
            op.results[0].replace_all_uses_with(out)
            op.erase()
            continue
        fn, t = op.name[5:], op.results[0].type
        with ir.InsertionPoint(op), op.location:
            b = _B()
            args = list(op.operands)

            if fn == "trunc":
                x = args[0]
                neg = b.op("arith.cmpf", [x, b.op("arith.constant", [], t, {"value": ir.FloatAttr.get(t, 0.0)})],
                           b.b, {"predicate": ir.IntegerAttr.get(b.i, 4)})
                out = b.op("arith.select", [neg, b.op("math.ceil", [x], t), b.op("math.floor", [x], t)], t)
            elif isinstance(t, ir.F64Type) and fn in F64_MORE:
                from hawk.targets.spirv_math64 import FUNCS

                out = FUNCS[fn](b, *args)
            elif isinstance(t, ir.F64Type):
                out = _f64(b, fn, args)
            else:
                wide = [b.op("arith.extf", [a], b.f) for a in args]
                out = b.op("arith.truncf", [_f64(b, fn, wide)], t)
        op.results[0].replace_all_uses_with(out)
        op.erase()
