"""Arithmetic that matches NumPy: float // and %, integer division by zero and INT64_MIN // -1 (no signal, NumPy's
results), and every function hawk.math lists, each checked against NumPy on awkward inputs (NaN, inf, -0.0,
subnormals, huge and tiny values). See docs/semantics.md, "Arithmetic that matches NumPy"."""

from __future__ import annotations

import fractions
import importlib.util
import math
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from conftest import bt_run, bt_run_on, bt_same_bits

import hawk
import hawk.math as m
from hawk import Index, Mutable, Scalar, Vector

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 0.5, 2.5, -2.5, 3.0, -7.0, 1e-310, -5e-324, 2.2250738585072014e-308,
           1e-300, 1e300, -1e300, 1.7976931348623157e308, 9007199254740993.0, 1e16, -3.7e15, 0.7, 1 / 3,
           np.inf, -np.inf, np.nan]


def _pairs(dtype, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of the special values, then random pairs with exponents spread over the whole range and signs."""
    s = np.array(SPECIAL, dtype=np.float64)
    x, y = np.meshgrid(s, s)
    rng = np.random.default_rng(seed)
    n = 3000
    top = 300 if np.dtype(dtype) == np.float64 else 37
    rx = rng.choice([-1.0, 1.0], n) * rng.uniform(1, 10, n) * 10.0 ** rng.integers(-top, top, n)
    ry = rng.choice([-1.0, 1.0], n) * rng.uniform(1, 10, n) * 10.0 ** rng.integers(-top, top, n)
    near = rng.integers(-50, 50, n) * 0.1  # small quotients, where rounding of x / y decides floor's side
    with np.errstate(over="ignore"):
        xs = np.concatenate([x.ravel(), rx, near]).astype(dtype)
        ys = np.concatenate([y.ravel(), ry, np.full(n, 0.1)]).astype(dtype)
    return xs, ys


@hawk.kernel
def sn_float_divmod(x: Scalar, y: Scalar, q: Mutable[Scalar], r: Mutable[Scalar], q7: Mutable[Scalar],
                    r7: Mutable[Scalar]):
    q = x // y
    r = x % y
    q7 = x // 0.1
    r7 = x % -0.7


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_floor_divide_and_remainder_are_numpys_bit_for_bit(target, dtype):
    x, y = _pairs(dtype, 4100)
    out = bt_run_on(target, sn_float_divmod, x=x, y=y)
    c = np.dtype(dtype).type
    with np.errstate(all="ignore"):
        want = {"q": np.floor_divide(x, y), "r": np.remainder(x, y), "q7": np.floor_divide(x, c(0.1)),
                "r7": np.remainder(x, c(-0.7))}
    bt_same_bits(out, want, f"float {np.dtype(dtype).name} // and % on {target}")


def test_the_classic_float_floor_division_example():
    @hawk.kernel
    def sn_tenth(x: Scalar, q: Mutable[Scalar], r: Mutable[Scalar], c: Mutable[Scalar]):
        q = x // 0.1
        r = x % 0.1
        c = 1.0 // 0.1 + 0.0 * x  # folded at compile time, with the same rule

    out = bt_run(sn_tenth, x=np.array([1.0, -1.0]))
    np.testing.assert_array_equal(out["q"], [9.0, -10.0])
    np.testing.assert_array_equal(out["r"], np.remainder([1.0, -1.0], 0.1))
    np.testing.assert_array_equal(out["c"], [9.0, 9.0])


# ------------------------------------------------------------------ integer division: no signal, NumPy's results

@hawk.kernel
def sn_int_and_math(i: Index, j: Index, x: Scalar, y: Scalar, q: Mutable[Scalar], r: Mutable[Scalar],
                    f: Mutable[Scalar]):
    # module level, so that tests/test_gpu_compile.py also builds it for nvvm and rocdl (ptxas, ld.lld)
    q = i // j + i // 0
    r = i % j + i % -1
    f = m.sign(x) + m.copysign(x, y) + m.hypot(x, y) + m.min(x, y) + m.max(x, y) + m.sign(i) + m.abs(i - 3)


def test_integer_and_new_math_ops_on_ordinary_values(target):
    rng = np.random.default_rng(4101)
    i, j = rng.integers(-50, 50, 64), rng.integers(-5, 5, 64)
    x, y = rng.normal(size=64), rng.normal(size=64)
    out = bt_run_on(target, sn_int_and_math, i=i, j=j, x=x, y=y)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out["q"], np.floor_divide(i, j) + 0.0)
        np.testing.assert_array_equal(out["r"], np.remainder(i, j) + 0.0)
    want = np.sign(x) + np.copysign(x, y) + np.hypot(x, y) + np.minimum(x, y) + np.maximum(x, y) + np.sign(i) \
        + np.abs(i - 3)
    np.testing.assert_allclose(out["f"], want, rtol=1e-15, atol=1e-15)


_INT_SCRIPT = """
import numpy as np
import eagle, hawk
from hawk import Index, Mutable, Scalar, Vector


@hawk.kernel
def sn_int_divmod(i: Index, j: Index, q: Mutable[Scalar], r: Mutable[Scalar], q0: Mutable[Scalar],
                  r0: Mutable[Scalar], qm: Mutable[Scalar], rm: Mutable[Scalar]):
    q = i // j
    r = i % j
    q0 = i // 0
    r0 = i % 0
    qm = i // -1
    rm = i % -1


lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
edge = np.array([lo, hi, lo + 1, -7, 7, 0, 1, -1, 3, -3, 2**40 + 3, -(2**40) - 5], dtype=np.int64)
i, j = (a.ravel() for a in np.meshgrid(edge, edge))
rng = np.random.default_rng(5)
i = np.concatenate([i, rng.integers(-1000, 1000, 500), rng.integers(lo, hi, 500)]).astype(np.int64)
j = np.concatenate([j, rng.integers(-9, 9, 500), rng.integers(-(2**20), 2**20, 500)]).astype(np.int64)
out = eagle.deploy(sn_int_divmod, target="TARGET").run(i=i, j=j)
with np.errstate(all="ignore"):
    want = {"q": np.floor_divide(i, j), "r": np.remainder(i, j), "q0": np.floor_divide(i, 0),
            "r0": np.remainder(i, 0), "qm": np.floor_divide(i, -1), "rm": np.remainder(i, -1)}
for name, w in want.items():
    got = np.asarray(out[name])
    bad = np.flatnonzero(got != w.astype(np.float64))
    assert bad.size == 0, (name, i[bad[:3]], j[bad[:3]], got[bad[:3]], w[bad[:3]])
print("integer division ok")
"""


def test_integer_division_by_zero_and_overflow_give_numpys_results_without_a_signal(target, tmp_path):
    # in a subprocess: a SIGFPE would kill the interpreter, and the test must see it as a failure, not die
    script = tmp_path / "int_divmod.py"
    script.write_text(_INT_SCRIPT.replace("TARGET", target))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"exit {r.returncode} (negative: killed by that signal)\n{r.stdout}\n{r.stderr[-3000:]}"
    assert "integer division ok" in r.stdout


# ------------------------------------------------------------------ every hawk.math function against NumPy

def _fma(x, y, z):
    out = np.empty_like(x)
    for k, (a, b, c) in enumerate(zip(x, y, z, strict=True)):
        if all(math.isfinite(v) for v in (a, b, c)):  # rounded once, from the exact value
            product = fractions.Fraction(a) * fractions.Fraction(b)
            exact = product + fractions.Fraction(c)
            if exact == 0:  # IEEE's signed zeros: -0 only for (-0) + (-0)
                out[k] = a * b + c if product == 0 else 0.0
                continue
            try:
                out[k] = float(exact)
            except OverflowError:
                out[k] = math.inf if exact > 0 else -math.inf
        elif math.isfinite(a) and math.isfinite(b) and math.isinf(c):  # the product never overflows inside fma
            out[k] = c
        else:
            out[k] = a * b + c
    return out


def _index(x, n):
    f = np.floor(np.where(np.isnan(x), 0.0, x))
    return np.clip(f, 0, n - 1).astype(np.int64)  # an integer: no -0.0


def _int(x):
    """NumPy's float -> int64 (NaN and values beyond int64 give INT64_MIN), back to float: no -0.0."""
    return np.trunc(x).astype(np.int64).astype(np.float64)


def _both_positive(x, y):
    return (x > 0) & (y > 0)


# name -> (kernel expression in x, y, z; NumPy reference; exact: same bits (else within a few ulps))
CASES = {
    "vec": ("m.vec(x, y).components[1]", lambda x, y, z: y, True),
    "mat": ("m.mat(m.vec(x, y), m.vec(z, x)).rows[1].components[0]", lambda x, y, z: z, True),
    "index": ("m.index(x, 7)", lambda x, y, z: _index(x, 7), True),
    "land": ("m.where(m.land(x > 0.0, y > 0.0), x, y)", lambda x, y, z: np.where(_both_positive(x, y), x, y),
             True),
    "lor": ("m.where(m.lor(x > 0.0, y > 0.0), x, y)", lambda x, y, z: np.where((x > 0) | (y > 0), x, y),
            True),
    "lnot": ("m.where(m.lnot(x > 0.0), x, y)", lambda x, y, z: np.where(~(x > 0), x, y), True),
    "where": ("m.where(x < y, x, z)", lambda x, y, z: np.where(x < y, x, z), True),
    "select": ("m.select(x < y, z, y)", lambda x, y, z: np.where(x < y, z, y), True),
    "min": ("m.min(x, y)", lambda x, y, z: np.minimum(x, y), True),
    "max": ("m.max(x, y, z)", lambda x, y, z: np.maximum(np.maximum(x, y), z), True),
    "abs": ("m.abs(x)", lambda x, y, z: np.abs(x), True),
    "sqrt": ("m.sqrt(x)", lambda x, y, z: np.sqrt(x), True),
    "exp": ("m.exp(x)", lambda x, y, z: np.exp(x), False),
    "exp2": ("m.exp2(x)", lambda x, y, z: np.exp2(x), False),
    "log": ("m.log(x)", lambda x, y, z: np.log(x), False),
    "log2": ("m.log2(x)", lambda x, y, z: np.log2(x), False),
    "log10": ("m.log10(x)", lambda x, y, z: np.log10(x), False),
    "log1p": ("m.log1p(x)", lambda x, y, z: np.log1p(x), False),
    "expm1": ("m.expm1(x)", lambda x, y, z: np.expm1(x), False),
    "sin": ("m.sin(x)", lambda x, y, z: np.sin(x), False),
    "cos": ("m.cos(x)", lambda x, y, z: np.cos(x), False),
    "tan": ("m.tan(x)", lambda x, y, z: np.tan(x), False),
    "asin": ("m.asin(x)", lambda x, y, z: np.arcsin(x), False),
    "acos": ("m.acos(x)", lambda x, y, z: np.arccos(x), False),
    "atan": ("m.atan(x)", lambda x, y, z: np.arctan(x), False),
    "atan2": ("m.atan2(x, y)", lambda x, y, z: np.arctan2(x, y), False),
    "sinh": ("m.sinh(x)", lambda x, y, z: np.sinh(x), False),
    "cosh": ("m.cosh(x)", lambda x, y, z: np.cosh(x), False),
    "tanh": ("m.tanh(x)", lambda x, y, z: np.tanh(x), False),
    "erf": ("m.erf(x)", lambda x, y, z: np.vectorize(math.erf)(x), False),
    "floor": ("m.floor(x)", lambda x, y, z: np.floor(x), True),
    "ceil": ("m.ceil(x)", lambda x, y, z: np.ceil(x), True),
    "round": ("m.round(x)", lambda x, y, z: np.round(x), True),
    "trunc": ("m.trunc(x)", lambda x, y, z: np.trunc(x), True),
    "clamp": ("m.clamp(x, y, z)", lambda x, y, z: np.minimum(np.maximum(x, y), z), True),
    "pow": ("m.pow(x, y)", lambda x, y, z: np.power(x, y), False),
    "fma": ("m.fma(x, y, z)", lambda x, y, z: _fma(x, y, z), True),
    "sign": ("m.sign(x)", lambda x, y, z: np.sign(x), True),
    "isnan": ("m.where(m.isnan(x), 1.0, 0.0)", lambda x, y, z: np.isnan(x) * 1.0, True),
    "isinf": ("m.where(m.isinf(x), 1.0, 0.0)", lambda x, y, z: np.isinf(x) * 1.0, True),
    "isfinite": ("m.where(m.isfinite(x), 1.0, 0.0)", lambda x, y, z: np.isfinite(x) * 1.0, True),
    "dot": ("m.dot(m.vec(x, y), m.vec(z, x))", lambda x, y, z: (0.0 + x * z) + y * x, True),
    "norm": ("m.norm(m.vec(x, y))", lambda x, y, z: np.sqrt((0.0 + x * x) + y * y), True),
    "rsqrt": ("m.rsqrt(x)", lambda x, y, z: 1.0 / np.sqrt(x), True),
    "hypot": ("m.hypot(x, y)", lambda x, y, z: np.hypot(x, y), False),
    "copysign": ("m.copysign(x, y)", lambda x, y, z: np.copysign(x, y), True),
    "to_float": ("m.to_float(m.to_int(x)) + m.to_float(x)", lambda x, y, z: _int(x) + x, True),
    "to_int": ("m.to_int(x) * 1.0", lambda x, y, z: _int(x), True),
    "add": ("m.add(x, y)", lambda x, y, z: x + y, True),
    "mul": ("m.mul(x, y)", lambda x, y, z: x * y, True),
}


def _listed() -> list[str]:
    return [n for n in m.__all__ if callable(getattr(m, n))]


def test_every_listed_hawk_math_function_has_a_case():
    assert sorted(CASES) == sorted(_listed())


# m.index's bounds around its conversions: the largest converted through 32 bits (values.NARROW_INDEX), the
# smallest converted through 64, and one past 32 bits (a conversion through i32 there would be wrong)
INDEX_BOUNDS = {
    "index_narrow_top": ("m.index(x * 1e7, 16777216)", lambda x, y, z: _index(x * 1e7, 16777216), True),
    "index_wide": ("m.index(x * 1e7, 16777217)", lambda x, y, z: _index(x * 1e7, 16777217), True),
    "index_past_i32": ("m.index(x * 1e10, 17179869184)", lambda x, y, z: _index(x * 1e10, 2**34), True),
}


def _kernel_for(name: str, expr: str, tmp_path):
    """A kernel `out = <expr>` in a module of its own (hawk reads a kernel's source from its file)."""
    path = tmp_path / f"sn_math_{name}.py"
    path.write_text(textwrap.dedent(f"""
        import hawk
        import hawk.math as m
        from hawk import Mutable, Scalar


        @hawk.kernel
        def sn_{name}(x: Scalar, y: Scalar, z: Scalar, out: Mutable[Scalar]):
            out = {expr}
    """))
    spec = importlib.util.spec_from_file_location(f"sn_math_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, f"sn_{name}")


@pytest.mark.parametrize("name", sorted(CASES) + sorted(INDEX_BOUNDS))
def test_hawk_math_function_matches_numpy_on_the_host(name, tmp_path):
    expr, ref, exact = CASES[name] if name in CASES else INDEX_BOUNDS[name]
    s = np.array(SPECIAL, dtype=np.float64)
    x, y, z = (a.ravel() for a in np.meshgrid(s, s[::-1], np.roll(s, 3)))  # every triple: NaN, inf, -0.0 each way
    k = _kernel_for(name, expr, tmp_path)
    got = np.asarray(bt_run(k, x=x, y=y, z=z))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = np.asarray(ref(x, y, z), dtype=np.float64)
    if exact:
        bt_same_bits(got, want, f"hawk.math.{name}")
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"hawk.math.{name}: NaN places")
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)],
                                  err_msg=f"hawk.math.{name}: infinities")
    np.testing.assert_allclose(got[fin], want[fin], rtol=4e-16, atol=1e-300, err_msg=f"hawk.math.{name}")
    zero = fin & (want == 0.0)
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]),
                                  err_msg=f"hawk.math.{name}: signs of zeros")


@hawk.kernel
def sn_vector_math(v: Vector[3], w: Vector[3], a: Mutable[Vector[3]], b: Mutable[Vector[3]], c: Mutable[Vector[3]]):
    a = v // w + v % w
    b = m.sign(v) + m.copysign(v, w) + m.hypot(v, w) + m.floor(v) + m.exp(w)
    c = m.min(v, w) + m.max(v, 0.5) + m.abs(v) + m.to_float(m.to_int(v))


def test_the_same_rules_on_vector_values(target):
    # math on vector values: the host's libm calls on each component, spirv's scalarised code
    rng = np.random.default_rng(4102)
    v, w = rng.normal(size=(3, 50)) * 10, rng.normal(size=(3, 50))
    v[0, 0], w[1, 1], v[2, 2] = np.nan, 0.0, -0.0
    out = bt_run_on(target, sn_vector_math, v=v, w=w)
    with np.errstate(all="ignore"):
        want = {"a": np.floor_divide(v, w) + np.remainder(v, w),
                "b": np.sign(v) + np.copysign(v, w) + np.hypot(v, w) + np.floor(v) + np.exp(w),
                "c": np.minimum(v, w) + np.maximum(v, 0.5) + np.abs(v) + np.trunc(v).astype(np.int64)}
    bt_same_bits(out["a"], want["a"], "vector // and %")
    bt_same_bits(out["c"], want["c"], "vector min, max, abs, to_int")
    np.testing.assert_allclose(out["b"], want["b"], rtol=1e-14, atol=1e-13, equal_nan=True)  # a sum of five
