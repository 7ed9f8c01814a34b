"""The host's transcendental functions (hawk/targets/host_math.py, the `expand-math` pass): straight-line code that
LLVM vectorizes instead of libm calls.

Checked here: the error in ulps of the correctly rounded value (mpmath at 160 bits) over wide ranges, sine and
cosine of huge arguments included; IEEE's special values (NaN, infinities, overflow, underflow to subnormals and
zero, -0.0) exactly; float32 through float64 rounded once; the same bits at every thread count and chunking; the
same bits as the spirv target for the functions both compute with one algorithm; the 2/pi table against mpmath;
and, where the CPU has AVX2, a packed lane loop with no libm call left in it.
"""

from __future__ import annotations

import re

import mpmath
import numpy as np
from conftest import bt_run, bt_run_on, bt_same_bits, bt_spirv_missing, bt_target_missing
from test_vectorise import _lanes_asm, _vector_body, needs_avx2

import eagle
import hawk
import hawk.math as m
from hawk import Mutable, Param, Scalar
from hawk.targets import host_math


@hawk.kernel
def all_math(x: Scalar, e: Mutable[Scalar], e2: Mutable[Scalar], lg: Mutable[Scalar], l2: Mutable[Scalar],
             l10: Mutable[Scalar], em1: Mutable[Scalar], th: Mutable[Scalar], s: Mutable[Scalar],
             c: Mutable[Scalar], t: Mutable[Scalar]):
    e = m.exp(x)
    e2 = m.exp2(x)
    lg = m.log(x)
    l2 = m.log2(x)
    l10 = m.log10(x)
    em1 = m.expm1(x)
    th = m.tanh(x)
    s = m.sin(x)
    c = m.cos(x)
    t = m.tan(x)


@hawk.kernel
def shared_math(x: Scalar, e: Mutable[Scalar], e2: Mutable[Scalar], lg: Mutable[Scalar], l2: Mutable[Scalar],
                l10: Mutable[Scalar], s: Mutable[Scalar], c: Mutable[Scalar], t: Mutable[Scalar]):
    e = m.exp(x)
    e2 = m.exp2(x)
    lg = m.log(x)
    l2 = m.log2(x)
    l10 = m.log10(x)
    s = m.sin(x)
    c = m.cos(x)
    t = m.tan(x)


@hawk.kernel
def elementwise(x: Scalar, w: Scalar, a: Param) -> Scalar:
    return m.sin(x) * w + a * m.exp(-x * x) + m.tanh(w * x)


mpmath.mp.prec = 160
REFERENCE = {"e": mpmath.exp, "e2": lambda v: mpmath.power(2, v), "lg": mpmath.log, "l2": lambda v: mpmath.log(v, 2),
             "l10": mpmath.log10, "em1": mpmath.expm1, "th": mpmath.tanh, "s": mpmath.sin, "c": mpmath.cos,
             "t": mpmath.tan}
NUMPY = {"e": np.exp, "e2": np.exp2, "lg": np.log, "l2": np.log2, "l10": np.log10, "em1": np.expm1, "th": np.tanh,
         "s": np.sin, "c": np.cos, "t": np.tan}
# the promise of docs/semantics.md, in ulps of the correctly rounded float64 value
BOUND = {"e": 1.0, "e2": 1.5, "lg": 1.0, "l2": 2.0, "l10": 2.0, "em1": 1.0, "th": 2.5, "s": 1.0, "c": 1.0,
         "t": 2.5}
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-310, 2.2250738585072014e-308, 1e-300,
                     1e-17, 1.0, -1.0, 0.5, 22.0, -22.0, 709.78, 709.79, -708.4, -740.0, -745.13, -745.14, 1023.5,
                     1024.0, -1074.0, -1075.0, 1647099.0, -1647100.0, 1e22, 2.0 ** 1023, 1.7976931348623157e308,
                     6381956970095103.0 * 2.0 ** 797])


def _inputs(n: int) -> np.ndarray:
    rng = np.random.default_rng(12)
    return np.concatenate([rng.uniform(-750, 750, n), rng.uniform(-3, 3, n), rng.uniform(-1e-3, 1e-3, n),
                           np.exp(rng.uniform(-745, 709, n)), -np.exp(rng.uniform(-745, 709, n)),
                           rng.uniform(-4e6, 4e6, n), SPECIALS])


def _ulps(got: np.ndarray, x: np.ndarray, name: str, dtype) -> float:
    """The largest error in ulps of the exact value over the finite results; every other result (NaN, infinity,
    zero, their signs) must be what IEEE (and NumPy, for these) gives exactly."""
    fi = np.finfo(dtype)
    worst = 0.0
    for g, v in zip(got.tolist(), x.tolist(), strict=True):
        with np.errstate(all="ignore"):
            want_np = NUMPY[name](np.array([v], dtype=dtype))[0]
        exact = None
        if np.isfinite(v) and not (name in ("lg", "l2", "l10") and v <= 0):
            exact = REFERENCE[name](mpmath.mpf(v))
        rounded = float(exact) if exact is not None and abs(exact) < 1.8e308 else None
        with np.errstate(over="ignore"):
            rounded = dtype(rounded) if rounded is not None else None
        if exact is None or rounded is None or not np.isfinite(rounded) or rounded == 0:
            # special: what IEEE says (NumPy's value here is exact: NaN, +-inf, a signed zero, +-1)
            want = want_np if exact is None or rounded is None or not np.isfinite(rounded) else rounded
            if exact is not None and exact == 0:  # an odd function's zero keeps the argument's sign; log(1) is +0
                want = dtype(v) if v == 0 else dtype(0.0)
            assert (np.isnan(g) and np.isnan(want)) or (g == want and np.signbit(g) == np.signbit(want)), \
                (name, v, g, want)
            continue
        a = abs(float(exact))
        ulp = 2.0 ** (max(np.frexp(a)[1] - 1, fi.minexp) - fi.nmant)
        worst = max(worst, float(abs(mpmath.mpf(float(g)) - exact)) / ulp)
    return worst


def test_float64_within_the_promised_ulps():
    x = _inputs(300)
    out = bt_run(all_math, x=x)
    for name, bound in BOUND.items():
        assert _ulps(out[name], x, name, np.float64) <= bound, name


def test_float32_rounded_once_from_float64():
    """float32 lanes run the float64 code and round once: within 1 ulp of the correctly rounded float32."""
    with np.errstate(over="ignore"):
        x = np.unique(_inputs(100).astype(np.float32))
    out = bt_run(all_math, x=x)
    for name in BOUND:
        assert out[name].dtype == np.float32
        assert _ulps(out[name], x, name, np.float32) <= 1.0, name


def test_same_bits_at_every_thread_count_and_chunking():
    x = _inputs(2000)
    one = eagle.deploy(all_math, threads=1).run(x=x)
    many = eagle.deploy(all_math, threads=2, min_chunk=37).run(x=x)
    bt_same_bits({k: np.asarray(v) for k, v in many.items()}, {k: np.asarray(v) for k, v in one.items()})


def test_same_bits_as_spirv_where_the_algorithm_is_shared():
    """exp, exp2, log, log2, log10, sin, cos and tan share hawk/targets/spirv_math.py's code (sine and cosine up to
    2^19 pi, where spirv's reduction stops)."""
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    x = _inputs(300)
    x = x[~(np.abs(x) > 1.6e6)]
    bt_same_bits(bt_run(shared_math, x=x), bt_run_on("spirv", shared_math, x=x))


def test_two_over_pi_table():
    with mpmath.workprec(1400):
        bits = int(mpmath.floor(2 / mpmath.pi * mpmath.mpf(2) ** (64 * len(host_math.TWO_OVER_PI))))
    words = [(bits >> (64 * (len(host_math.TWO_OVER_PI) - 1 - k))) & ((1 << 64) - 1)
             for k in range(len(host_math.TWO_OVER_PI))]
    assert list(host_math.TWO_OVER_PI) == words


@needs_avx2
def test_math_loop_is_packed_without_libm_calls():
    asm = _lanes_asm(elementwise, "elementwise")
    body = _vector_body(asm)
    assert re.search(r"vmulpd\s+.*%[yz]mm", body), body
    assert not re.search(r"call\w*\s+(sin|cos|exp|tanh)(@PLT)?\b", asm), asm
