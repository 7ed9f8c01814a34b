"""8- and 16-bit integer output planes: `Mutable[Index]` with an int8 or int16 array (compiled per dtype, as int32
and int64 are). A store wraps to the width like a C cast (NumPy's astype of the int64 value); a float truncates
toward zero first; reading the output in the body gives its value sign-extended to int64. An unsigned array is
passed as its signed view (the same bits). Checked against NumPy on the host (several threads, small chunks, so
chunks meet inside a machine word) and on spirv (lavapipe: 8/16-bit stores become atomic read-modify-writes of a
32-bit word), at sizes that end inside a word.
"""

import numpy as np
import pytest

import eagle
import hawk
from eagle.errors import InputError
from hawk import Index, Mutable, Scalar


@hawk.kernel
def ni_trunc(x: Scalar, out: Mutable[Index]):
    out = x * 3.0


@hawk.kernel
def ni_bump(k: Index, out: Mutable[Index]):
    out = out + k  # the caller's values before the launch, sign-extended


@hawk.kernel
def ni_permute(v: Index, k: Index, out: Mutable[Index]):
    hawk.scatter(out)[k] = v


def _plan(kernel, target):
    return eagle.deploy(kernel, target=target, **({"threads": 2, "min_chunk": 8} if target == "host" else {}))


@pytest.mark.parametrize("dt", [np.int8, np.int16])
def test_stores_wrap_like_astype(target, dt):
    rng = np.random.default_rng(1)
    for n in (1, 3, 6, 1001):
        x = rng.uniform(-3e4, 3e4, n)
        out = np.full(n, 7, dt)
        _plan(ni_trunc, target).run(x=x, out=out)
        assert out.tolist() == np.trunc(x * 3.0).astype(np.int64).astype(dt).tolist(), n
    unsigned = np.full(5, 9, np.dtype(dt).str.replace("i", "u"))
    _plan(ni_trunc, target).run(x=np.array([100.0, -1.0, 0.5, 70000.0, -2.9]), out=unsigned.view(dt))
    want = np.array([300, -3, 1, 210000, -8]).astype(unsigned.dtype)  # (0.5*3 = 1.5 truncates to 1)
    assert unsigned.tolist() == want.tolist()


@pytest.mark.parametrize("dt", [np.int8, np.int16])
def test_reads_sign_extend_and_keyed_stores(target, dt):
    rng = np.random.default_rng(2)
    n = 777
    info = np.iinfo(dt)
    out0 = rng.integers(info.min, info.max, n, endpoint=True).astype(dt)
    k = rng.integers(-200, 200, n)
    out = out0.copy()
    _plan(ni_bump, target).run(k=k, out=out)
    assert out.tolist() == (out0.astype(np.int64) + k).astype(dt).tolist()
    keys = rng.permutation(n + 5)[:n]  # distinct positions (which of two stores to one position wins is unspecified)
    v = rng.integers(-2**40, 2**40, n)
    dst = np.full(n + 5, 3, dt)
    _plan(ni_permute, target).run(v=v, k=keys, out=dst)
    want = np.full(n + 5, 3, dt)
    want[keys] = v.astype(dt)
    assert dst.tolist() == want.tolist()


def test_dtypes_each_compile_and_keys_stay_wide():
    plan = eagle.deploy(ni_trunc)
    x = np.array([1.0, -50.0, 1e4])
    for dt in (np.int8, np.int16, np.int32, np.int64):
        out = np.zeros(3, dt)
        plan.run(x=x, out=out)
        assert out.tolist() == np.trunc(x * 3.0).astype(np.int64).astype(dt).tolist()
    assert {dict(s.index_dtypes)["out"] for s in plan.binder._specs.values()} == {"int8", "int16", "int32", "int64"}
    with pytest.raises(InputError, match=r"plane 'k' of kernel 'ni_bump'.*int32 or int64 keys, got int8"):
        eagle.deploy(ni_bump).run(k=np.zeros(3, np.int8), out=np.zeros(3, np.int8))
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'ni_trunc'.*int8, int16, int32 or int64.*uint8.*"
                                         r"a.view\(np.int8\)"):
        plan.run(x=x, out=np.zeros(3, np.uint8))
