"""float64 expm1, log1p, sinh, cosh and tanh for the SPIR-V target, built on spirv_math's exp and log (each
within 1 ulp), without branches (every side computed, one selected).

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
Measured against mpmath over the spirv tests' inputs (tests/test_spirv_math64.py): within 2 ulps (tanh 3), and
subnormal pow results within 1 ulp of the subnormal spacing. Every float op is exact-decorated (NoContraction),
which the error-free transformations here need.
"""

from __future__ import annotations

from hawk.targets.spirv_math import _B, EXP_HI, LN2_HI, LN2_LO, exp, log, pow_specials

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
    sub = b.fcmp("olt", x, 2.2250738585072014e-308)
    bits = b.bits(b.sel(sub, b.mul(x, 2.0 ** 54), x))
    hx = b.shr(bits, 32)
    k = b.isub(b.isub(b.shr(hx, 20), 1023), b.sel(sub, 54, 0))
    hx = b.iand(hx, 0x000FFFFF)
    i = b.iand(b.iadd(hx, 0x95F64), 0x100000)
    xn = b.real(b.ior(b.shl(b.ior(hx, b.ixor(i, 0x3FF00000)), 32), b.iand(bits, 0xFFFFFFFF)))
    dk = b.to_real(b.iadd(k, b.shr(i, 20)))
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


FUNCS = {"expm1": expm1, "log1p": log1p, "tanh": tanh, "sinh": sinh, "cosh": cosh, "powf": pow64}
