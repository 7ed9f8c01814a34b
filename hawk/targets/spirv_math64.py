"""float64 expm1, log1p, sinh, cosh, tanh, pow and erf for the SPIR-V target, built on spirv_math's exp and log
(each within 1 ulp), without branches (every side computed, one selected). (erf, and pow_32 with the IEEE special
cases both pows share, also serve float32 calls.)

  expm1: Kahan's u = exp(x), (u - 1) x / log(u) (the quotient is taken at the u actually computed, which cancels
         exp's rounding); x where u == 1, u - 1 itself for x > 1 (no cancellation there, and (u - 1) x could
         overflow), -1 where u - 1 == -1, inf beyond exp's overflow threshold;
  log1p: Goldberg's u = 1 + x, log(u) x / (u - 1); x where u == 1, inf for inf;
  tanh:  fdlibm's split at |x| = 1: 1 - 2 / (expm1(2|x|) + 2) above, -t / (t + 2) with t = expm1(-2|x|) below
         (one expm1 either way), +-1 beyond 22, x below 2^-55;
  sinh, cosh: fdlibm's ranges: through expm1 below 22 (sinh: h (2t - t^2/(t+1)) below 1, h (t + t/(t+1)) above;
         cosh: 1 + t^2 / (2 (1 + t)) below ln2/2, (e + 1/e) / 2 above), then h exp(|x|) as (h w) w with
         w = exp(|x| / 2) so that results up to the largest double do not overflow on the way.
  pow:   |x|^y = exp(z) with z = y log|x| in double-double: log|x| = k ln2 + 2 atanh(s), s = f / (2 + f) kept
         as s_hi + s_lo (the division's remainder from an exact Dekker product), the series' tail with its s_lo
         term (about 2^-62 relative in all), y times it by Dekker's product, then exp(z_hi) (1 + z_lo); zeros,
         infinities and NaNs of x or y take the plain y log|x|, and pow_32's IEEE rules give signs and NaNs. A
         plain exp(y log x) would be off by up to |y log x| ulps (hundreds near the overflow threshold).
  erf:   fdlibm's s_erf.c ranges and rational approximations (below, by the constants).
Measured against mpmath over the spirv tests' inputs (tests/test_spirv_math64.py): within 2 ulps (erf 1; tanh and
pow 3), and subnormal pow results within 1 ulp of the subnormal spacing. Every float op is exact-decorated
(NoContraction), which the error-free transformations here need.
"""

from __future__ import annotations

from mlir import ir

from hawk.targets.spirv_math import _B, EXP_HI, LN2_HI, LN2_LO, exp, log, log_reduce

LN2_HALF = 0.34657359027997264  # ln(2) / 2
SINH_TINY, TANH_TINY = 2.0 ** -28, 2.0 ** -55
SPLIT = 22.0  # beyond it tanh is +-1 and sinh, cosh are h exp(|x|) to the last bit
HUGE = 711.0  # |x| past the overflow threshold of sinh and cosh (710.4758...): exp(|x| / 2)^2 overflows to inf


def expm1(b: _B, x):
    u = exp(b, x)
    um1 = b.sub(u, 1.0)
    kahan = b.div(b.mul(um1, x), log(b, u))
    r = b.sel(b.fcmp("ogt", x, 1.0), um1, kahan)
    r = b.sel(b.fcmp("oeq", um1, -1.0), -1.0, r)
    r = b.sel(b.fcmp("oeq", u, 1.0), x, r)
    return b.sel(b.fcmp("ogt", x, EXP_HI), float("inf"), r)


def log1p(b: _B, x):
    u = b.add(1.0, x)
    r = b.div(b.mul(log(b, u), x), b.sub(u, 1.0))
    r = b.sel(b.fcmp("oeq", u, 1.0), x, r)
    return b.sel(b.fcmp("oeq", x, float("inf")), float("inf"), r)


def tanh(b: _B, x):
    ax = b.absf(x)
    big = b.fcmp("oge", ax, 1.0)
    two = b.mul(2.0, b.op("arith.minimumf", [ax, b.c(SPLIT)], b.f))
    t = expm1(b, b.sel(big, two, b.neg(two)))
    z = b.sel(big, b.sub(1.0, b.div(2.0, b.add(t, 2.0))), b.div(b.neg(t), b.add(t, 2.0)))
    z = b.sel(b.fcmp("ogt", ax, SPLIT), 1.0, z)
    z = b.sel(b.fcmp("olt", ax, TANH_TINY), ax, z)
    return b.op("math.copysign", [z, x], b.f)


def _big(b: _B, h, ax):
    """h exp(|x|) for |x| >= SPLIT, as (h w) w with w = exp(|x| / 2) (inf past the overflow threshold)."""
    w = exp(b, b.mul(0.5, b.op("arith.minimumf", [ax, b.c(HUGE)], b.f)))
    return b.mul(b.mul(h, w), w)


def sinh(b: _B, x):
    ax = b.absf(x)
    h = b.op("math.copysign", [b.c(0.5), x], b.f)
    t = expm1(b, b.op("arith.minimumf", [ax, b.c(SPLIT)], b.f))
    t1 = b.add(t, 1.0)
    small = b.mul(h, b.sub(b.mul(2.0, t), b.div(b.mul(t, t), t1)))
    mid = b.mul(h, b.add(t, b.div(t, t1)))
    r = b.sel(b.fcmp("olt", ax, 1.0), small, b.sel(b.fcmp("olt", ax, SPLIT), mid, _big(b, h, ax)))
    return b.sel(b.fcmp("olt", ax, SINH_TINY), x, r)


def cosh(b: _B, x):
    ax = b.absf(x)
    t = expm1(b, b.op("arith.minimumf", [ax, b.c(1.0)], b.f))
    w = b.add(1.0, t)
    small = b.add(1.0, b.div(b.mul(t, t), b.add(w, w)))
    e = exp(b, b.op("arith.minimumf", [ax, b.c(SPLIT)], b.f))
    mid = b.add(b.mul(0.5, e), b.div(0.5, e))
    return b.sel(b.fcmp("olt", ax, LN2_HALF), small, b.sel(b.fcmp("olt", ax, SPLIT), mid, _big(b, b.c(0.5), ax)))


VELTKAMP = 134217729.0  # 2^27 + 1: splits a double into two 26-bit halves
ATANH_Q = tuple(2.0 / (2 * k + 3) for k in range(12))  # 2 atanh(s) = 2s + s^3 (2/3 + 2/5 s^2 + ...), |s| < 0.172
Y_CLAMP = 2.0 ** 900  # |y| beyond this makes |y log|x|| overflow exp wherever log|x| != 0 (x = 1: pow_specials)
Z_PLAIN = 1000.0  # |y log|x|| beyond exp's range: its plain value (a low part there could flip a 0 or inf's sign)


def _two_sum(b: _B, a, c):
    s = b.add(a, c)
    bb = b.sub(s, a)
    return s, b.add(b.sub(a, b.sub(s, bb)), b.sub(c, bb))


def _split(b: _B, a):
    c = b.mul(VELTKAMP, a)
    h = b.sub(c, b.sub(c, a))
    return h, b.sub(a, h)


def _two_prod(b: _B, a, c):
    p = b.mul(a, c)
    (ah, al), (ch, cl) = _split(b, a), _split(b, c)
    err = b.add(b.add(b.add(b.sub(b.mul(ah, ch), p), b.mul(ah, cl)), b.mul(al, ch)), b.mul(al, cl))
    return p, err


def _log_dd(b: _B, x):
    """log(x) = hi + lo for a positive finite x, relative error about 2^-62 (fdlibm's reduction, as in log)."""
    xn, k, _ = log_reduce(b, x)
    dk = b.to_real(k)
    f = b.sub(xn, 1.0)  # (exact: xn in [sqrt(2)/2, sqrt(2)))
    d, dl = _two_sum(b, xn, 1.0)
    s = b.div(f, d)
    p, e = _two_prod(b, s, d)
    sl = b.div(b.sub(b.sub(b.sub(f, p), e), b.mul(s, dl)), d)
    s2 = b.mul(s, s)
    tail = b.add(b.mul(b.mul(s, s2), b.poly(s2, list(ATANH_Q))), b.mul(b.mul(2.0, s2), sl))
    hi, e2 = _two_sum(b, b.mul(dk, LN2_HI), b.mul(2.0, s))
    lo = b.add(b.add(b.add(b.mul(dk, LN2_LO), b.mul(2.0, sl)), tail), e2)
    return _two_sum(b, hi, lo)


def pow_32(b: _B, x, y):
    """x^y for float32 x, y (in float64: |y log|x|| <= ~104 wherever the float32 result is finite, so exp(y log|x|)
    is good to ~1e-14), with IEEE pow's special cases."""
    return pow_specials(b, x, y, exp(b, b.mul(y, log(b, b.absf(x)))))


def pow_specials(b: _B, x, y, r):
    """pow(x, y) from r = |x|^y (NaN, 0 or inf where IEEE's pow of |x| is): the sign of a negative base to an odd
    integer power, NaN for a finite negative base to a non-integer power, and 1 for x = 1, y = 0 and (-1, +-inf)."""
    ax = b.absf(x)
    integer = b.fcmp("oeq", b.floor(y), y)
    half = b.mul(y, 0.5)
    odd = b.land(integer, b.op("arith.cmpf", [b.floor(half), half], b.b,
                                   {"predicate": ir.IntegerAttr.get(b.i, 6)}))  # one: floor(y/2) != y/2
    neg = b.fcmp("olt", x, 0.0)
    neg_zero = b.land(b.fcmp("oeq", x, 0.0), b.icmp("slt", b.bits(x), 0))
    negative_base = b.lor(neg, neg_zero)
    r = b.sel(b.land(negative_base, odd), b.neg(r), r)
    finite_neg = b.land(neg, b.fcmp("olt", ax, float("inf")))
    r = b.sel(b.land(finite_neg, b.op("arith.xori", [integer, b.op("arith.constant", [], b.b, {
        "value": ir.IntegerAttr.get(b.b, 1)})], b.b)), float("nan"), r)
    r = b.sel(b.land(b.fcmp("oeq", x, -1.0), b.fcmp("oeq", b.absf(y), float("inf"))), 1.0, r)
    r = b.sel(b.fcmp("oeq", x, 1.0), 1.0, r)
    return b.sel(b.fcmp("oeq", y, 0.0), 1.0, r)


def pow64(b: _B, x, y):
    ax = b.absf(x)
    hi, lo = _log_dd(b, b.sel(b.fcmp("ogt", ax, 0.0), ax, 1.0))
    yc = b.op("arith.maximumf", [b.op("arith.minimumf", [y, b.c(Y_CLAMP)], b.f), b.c(-Y_CLAMP)], b.f)
    p, pe = _two_prod(b, yc, hi)
    zl = b.add(pe, b.mul(yc, lo))
    inf = float("inf")
    plain = b.lor(b.lor(b.fcmp("oeq", ax, 0.0), b.fcmp("oeq", ax, inf)), b.fcmp("uno", x, y))
    plain = b.lor(b.lor(plain, b.fcmp("oeq", b.absf(y), inf)), b.fcmp("oge", b.absf(p), Z_PLAIN))
    zh = b.sel(plain, b.mul(y, log(b, ax)), p)
    zl = b.sel(plain, 0.0, zl)
    return pow_specials(b, x, y, b.mul(exp(b, zh), b.add(1.0, zl)))


# erf after fdlibm's s_erf.c: x + x P(x^2)/Q(x^2) below 0.84375, erx + P(s)/Q(s) with s = |x| - 1 below 1.25, then
# 1 - exp(-z^2 - 0.5625) exp((z - x)(z + x) + R(1/x^2)/S(1/x^2)) / x with z = x cut to its high 32 bits, +-1 from 6
ERX, EFX8 = 8.45062911510467529297e-01, 1.02703333676410069053e+00
ERF_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
          -5.77027029648944159157e-03, -2.37630166566501626084e-05)
ERF_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
          1.32494738004321644526e-04, -3.96022827877536812320e-06)
ERF_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
          3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
          -2.16637559486879084300e-03)
ERF_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
          1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
ERF_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
          -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
          -8.12874355063065934246e+01, -9.81432934416914548592e+00)
ERF_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
          6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
          6.57024977031928170135e+00, -6.04244152148580987438e-02)
ERF_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
          -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
          -4.83519191608651397019e+02)
ERF_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
          3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
          -2.24409524465858183362e+01)
ERF_RB_FROM = 2.8571434020996094  # (high word 0x4006DB6E: fdlibm's switch from the ra/sa to the rb/sb pair)


def erf(b: _B, x):
    ax = b.absf(x)
    z = b.mul(x, x)
    small = b.add(x, b.mul(x, b.div(b.poly(z, list(ERF_PP)), b.poly(z, list(ERF_QQ)))))
    tiny = b.mul(0.125, b.add(b.mul(8.0, x), b.mul(EFX8, x)))  # (no underflow on the way)
    small = b.sel(b.fcmp("olt", ax, 2.0 ** -28), tiny, small)
    s1 = b.sub(ax, 1.0)
    mid = b.add(ERX, b.div(b.poly(s1, list(ERF_PA)), b.poly(s1, list(ERF_QA))))
    xa = b.op("arith.maximumf", [b.op("arith.minimumf", [ax, b.c(6.0)], b.f), b.c(1.25)], b.f)
    s = b.div(1.0, b.mul(xa, xa))
    near = b.fcmp("olt", xa, ERF_RB_FROM)
    r_s = b.sel(near, b.div(b.poly(s, list(ERF_RA)), b.poly(s, list(ERF_SA))),
                b.div(b.poly(s, list(ERF_RB)), b.poly(s, list(ERF_SB))))
    zc = b.real(b.iand(b.bits(xa), -(1 << 32)))  # xa with its low 32 bits cleared: zc^2 is exact
    r = b.mul(exp(b, b.sub(b.neg(b.mul(zc, zc)), 0.5625)),
              exp(b, b.add(b.mul(b.sub(zc, xa), b.add(zc, xa)), r_s)))
    big = b.sub(1.0, b.div(r, xa))
    far = b.sel(b.fcmp("olt", ax, 1.25), mid, b.sel(b.fcmp("olt", ax, 6.0), big, 1.0))
    out = b.sel(b.fcmp("olt", ax, 0.84375), small, b.op("math.copysign", [far, x], b.f))
    return b.sel(b.fcmp("uno", x, x), b.add(x, x), out)


FUNCS = {"expm1": expm1, "log1p": log1p, "tanh": tanh, "sinh": sinh, "cosh": cosh, "powf": pow64, "erf": erf}
