"""IEEE's rules for a float zero the compiler folded into a constant (hawk/targets/spirv_zeros.py): on the spirv
target lavapipe folded `x / 0.0` and `x * 0.0` to 0 at shader compile time, where the host (and IEEE, and NumPy)
give +-inf or NaN; found by the front-end fuzzer on spirv (case 13:68: `x / m.index(0.5, 15)`). Every result is
checked bit for bit (signed zeros included; NaN meets NaN) against NumPy on each target.
"""

import numpy as np
import pytest
from conftest import bt_same_bits, bt_spirv_missing, bt_target_missing

import eagle
import hawk
import hawk.math as m
from hawk import Index, Scalar

X = np.array([1.5, -2.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -3e38])


@hawk.kernel
def zf_div(x: Scalar) -> Scalar:
    return x / m.to_float(m.index(0.5, 15))  # (m.index(0.5, 15) is 0: the divisor folds to the constant 0.0)


@hawk.kernel
def zf_mul(x: Scalar) -> Scalar:
    return x * m.to_float(m.index(0.5, 15)) + 1.0


@hawk.kernel
def zf_over(x: Scalar) -> Scalar:
    return m.to_float(m.index(0.5, 15)) / x


@hawk.kernel
def zf_minus(x: Scalar) -> Scalar:
    return m.to_float(m.index(0.5, 15)) - x


@hawk.kernel
def zf_neg(x: Scalar) -> Scalar:
    return x * -m.to_float(m.index(0.5, 15))


CASES = [(zf_div, lambda x: x / 0.0), (zf_mul, lambda x: x * 0.0 + 1.0), (zf_over, lambda x: 0.0 / x),
         (zf_minus, lambda x: 0.0 - x), (zf_neg, lambda x: x * -0.0)]


@pytest.mark.parametrize("target", ["host", "spirv"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_folded_zero_follows_ieee(target, dtype):
    if target == "spirv":
        why = bt_target_missing("spirv")
        if why:
            bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    x = X.astype(dtype)
    for kernel, ref in CASES:
        with np.errstate(all="ignore"):
            want = ref(x).astype(dtype)
        got = np.asarray(eagle.deploy(kernel, target=target).run(x=x))
        bt_same_bits(got, want, f"{kernel.name} on {target} ({np.dtype(dtype).name})")


@hawk.kernel
def zf_expr(x: Scalar, k: Index) -> Scalar:
    return x / m.to_float((k - k) % 3)  # (a zero only folding proves: MLIR's canonicaliser, then the driver)


@pytest.mark.parametrize("target", ["host", "spirv"])
def test_a_zero_that_folding_proves_follows_ieee(target):
    if target == "spirv":
        why = bt_target_missing("spirv")
        if why:
            bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    k = np.arange(X.size, dtype=np.int64)
    with np.errstate(all="ignore"):
        want = X / 0.0
    bt_same_bits(np.asarray(eagle.deploy(zf_expr, target=target).run(x=X, k=k)), want, f"zf_expr on {target}")
