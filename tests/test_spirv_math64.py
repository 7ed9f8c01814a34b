"""float64 expm1, log1p, sinh, cosh, tanh, erf and pow on the spirv target (hawk/targets/spirv_math64.py, on the
target's own exp and log; pow through a double-double logarithm): within 2 ulps of the correctly rounded value
(erf 1, tanh and pow 3), measured against mpmath at 120 bits, with zeros (and their signs), infinities and NaNs
exactly IEEE's, and pow's subnormal results within one subnormal step. Before, float64 calls of these (and erf at
any width) were refused on spirv.
"""

import mpmath
import numpy as np
from conftest import bt_run_on, bt_spirv_missing, bt_target_missing, bt_ulps

import hawk
import hawk.math as m
from hawk import Mutable, Scalar

SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 5e-324, 1e-310, 1e-300, -1e-300,
                     1e-40, 1e-7, -1e-7, 0.3465, -0.3466, 20.0, -20.0, 22.0, -22.0, 22.5, 88.7, -104.0, 709.78,
                     709.79, 710.47, 710.48, -710.47, -708.5, -740.0, -745.2, 1 - 2.0 ** -53, -1 + 2.0 ** -53])
BOUND = {"em1": 2.0, "l1p": 2.0, "sh": 2.0, "ch": 2.0, "th": 3.0, "er": 1.0}


@hawk.kernel
def v_math64(x: Scalar, em1: Mutable[Scalar], l1p: Mutable[Scalar], sh: Mutable[Scalar], ch: Mutable[Scalar],
             th: Mutable[Scalar], er: Mutable[Scalar]):
    er = m.erf(x)
    em1 = m.expm1(x)
    l1p = m.log1p(x)
    sh = m.sinh(x)
    ch = m.cosh(x)
    th = m.tanh(x)


def _exact(name: str, v: float) -> float:
    """The correctly rounded value (mpmath at 120 bits), with IEEE's special cases."""
    if np.isnan(v) or (name == "l1p" and v < -1.0):
        return np.nan
    if v == 0.0:
        return 1.0 if name == "ch" else v  # (the sign of a zero argument is kept)
    if np.isinf(v) and name == "er":
        return float(np.sign(v))
    if name == "l1p" and v == -1.0:
        return -np.inf
    with mpmath.workprec(120):
        f = {"em1": mpmath.expm1, "l1p": mpmath.log1p, "sh": mpmath.sinh, "ch": mpmath.cosh, "th": mpmath.tanh,
             "er": mpmath.erf}[name]
        return float(f(mpmath.mpf(float(v))))


def test_float64_expm1_log1p_sinh_cosh_tanh_within_a_fewbt_ulps():
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    rng = np.random.default_rng(64)
    mag = np.exp(rng.uniform(-80, 6.6, 1500))
    x = np.concatenate([rng.uniform(-3, 3, 1500), mag, -mag, rng.normal(size=300) * 1e-6,
                        1 - np.exp(rng.uniform(-40, -1, 300)), -(1 - np.exp(rng.uniform(-40, -1, 300))), SPECIALS])
    dev = bt_run_on("spirv", v_math64, x=x)
    for name, bound in BOUND.items():
        want = np.array([_exact(name, v) for v in x.tolist()])
        err = bt_ulps(np.asarray(dev[name], dtype=np.float64), want)
        worst = int(np.argmax(err))
        assert err[worst] <= bound, (name, x[worst], dev[name][worst], want[worst], err[worst])


@hawk.kernel
def v_pow64(x: Scalar, y: Scalar) -> Scalar:
    return x ** y


def test_float64_pow_within_three_ulps_and_ieee_at_the_edges():
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    rng = np.random.default_rng(65)
    x = np.concatenate([np.exp(rng.uniform(-700, 700, 800)), rng.uniform(0, 3, 600), 1 + rng.normal(size=200) * 1e-9,
                        -rng.uniform(0, 3, 200)])
    y = np.concatenate([rng.uniform(-1, 1, 800), rng.uniform(-300, 300, 600), rng.normal(size=200) * 1e10,
                        np.round(rng.uniform(-20, 20, 200))])  # (negative bases: integer powers)
    edge = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, 3.0, -3.0, 1e-310, 1e308, 2.5]
    ex, ey = np.meshgrid(edge, edge)
    x, y = np.concatenate([x, ex.ravel()]), np.concatenate([y, ey.ravel()])
    got = np.asarray(bt_run_on("spirv", v_pow64, x=x, y=y), dtype=np.float64)
    with np.errstate(all="ignore"):
        ieee = np.power(x, y)  # (NumPy's pow: IEEE's special cases)
    tiny = 2.2250738585072014e-308
    normal = np.isfinite(x) & np.isfinite(y) & (x != 0) & (y != 0) & np.isfinite(ieee) & (np.abs(ieee) >= tiny)
    with mpmath.workprec(150):
        want = np.array([float(mpmath.power(mpmath.mpf(a), mpmath.mpf(b))) if ok else w
                         for a, b, ok, w in zip(x.tolist(), y.tolist(), normal.tolist(), ieee.tolist(), strict=True)])
    err = bt_ulps(got[normal], want[normal])
    assert err.max() <= 3.0, (x[normal][err.argmax()], y[normal][err.argmax()], err.max())
    sub = ~normal & np.isfinite(ieee) & (ieee != 0)
    assert np.all(np.abs(got[sub] - ieee[sub]) <= 5e-324), (x[sub], y[sub], got[sub], ieee[sub])
    rest = ~normal & ~sub
    same = ((got[rest] == ieee[rest]) & (np.signbit(got[rest]) == np.signbit(ieee[rest]))) | \
        (np.isnan(got[rest]) & np.isnan(ieee[rest]))
    assert same.all(), list(zip(x[rest][~same], y[rest][~same], got[rest][~same], ieee[rest][~same], strict=True))


@hawk.kernel
def v_erf32(x: Scalar) -> Scalar:
    return m.erf(x)


def test_float32_erf_is_correctly_rounded_here():
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    rng = np.random.default_rng(66)
    x = np.concatenate([rng.uniform(-6.5, 6.5, 3000), np.exp(rng.uniform(-80, 1.5, 1000)), SPECIALS]).astype(np.float32)
    dev = np.asarray(bt_run_on("spirv", v_erf32, x=x))
    want = np.array([_exact("er", v) for v in x.astype(np.float64).tolist()]).astype(np.float32)
    err = bt_ulps(dev.astype(np.float64), want.astype(np.float64))  # (in float64 ulps: 0 means the same float32)
    assert err.max() == 0.0, (x[err.argmax()], dev[err.argmax()], want[err.argmax()])
