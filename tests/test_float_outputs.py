"""Float output planes of their own dtype (docs/semantics.md, "Float types of a run").

A run computes in its float inputs' dtype (float64 when any is: tests/test_mixed_floats.py); a per-lane float
output (stored per lane or by key) takes the dtype of the array passed for it, and each store converts into it:
float64 -> float32 rounds once to nearest even (the bits of NumPy's astype, NaN, inf, -0.0, subnormals and
overflow included), float32 -> float64 is exact. Sinks and totals add up in the run's dtype and must have it. The
code is compiled per dtype combination (every dtype is in the binder's cache key). Checked on the host and on
spirv (lavapipe).
"""

import numpy as np
import pytest
from conftest import bt_same_bits

import eagle
import hawk
from eagle.errors import InputError
from hawk import Index, Mutable, Param, Scalar, Vector
from hawk.errors import KernelError


@hawk.kernel
def fo_scaled(x: Scalar, out: Mutable[Scalar]):
    out = x * 1.5


@hawk.kernel
def fo_vec(v: Vector[3], out: Mutable[Vector[3]]):
    out = v


@hawk.kernel
def fo_fill(value: Param, a: Mutable[Scalar], b: Mutable[Scalar]):
    a = value
    b = value


@hawk.kernel
def fo_read_back(x: Scalar, y: Mutable[Scalar], w: Mutable[Scalar]):
    y = x
    w = y  # what y holds: rounded when y is float32


@hawk.kernel
def fo_accumulate(x: Scalar, y: Mutable[Scalar]):
    y = y + x  # reads y's value before the launch


@hawk.kernel
def fo_sum(x: Scalar, y: Mutable[Scalar], t: Mutable[Scalar]):
    y = x
    t = hawk.sum(x, policy="ordered")


@hawk.kernel
def fo_centred(x: Scalar, y: Mutable[Scalar]):
    y = x - hawk.mean(x)  # two stages: the store is in the second


@hawk.kernel
def fo_permute(x: Scalar, k: Index, out: Mutable[Scalar]):
    hawk.scatter(out)[k] = x


@hawk.kernel
def fo_hist(x: Scalar, k: Index, bins: Mutable["bin":4]):
    hawk.scatter(bins)[k] += x


@hawk.kernel
def fo_two(x: Scalar, z: Scalar, out: Mutable[Scalar]):
    out = x + z


def hard_doubles() -> np.ndarray:
    """float64 values whose float32 rounding is delicate: ties (even and odd), just past ties, the float32
    subnormal range and its underflow to zero, the edge of overflow, infinities, signed zeros and NaN."""
    f32 = np.finfo(np.float32)
    ulp1 = 2.0 ** -23
    tie_even, tie_odd = 1 + ulp1 / 2, 1 + 3 * ulp1 / 2
    edge = float(f32.max) + 2.0 ** 103  # float32's max plus half an ulp: a tie, rounded to even (inf)
    rng = np.random.default_rng(7)
    special = [tie_even, tie_odd, -tie_even, np.nextafter(tie_even, 2), np.nextafter(tie_odd, 0), 1e-40, -1e-40,
               2.0 ** -149, 2.0 ** -150, np.nextafter(2.0 ** -150, 1), 3 * 2.0 ** -151, 1e-50, float(f32.max),
               edge, np.nextafter(edge, 0), 1e39, -1e39, np.inf, -np.inf, 0.0, -0.0, np.nan, 0.1, 1 / 3]
    noise = rng.standard_normal(300) * 10.0 ** rng.integers(-40, 39, 300)
    return np.concatenate([special, noise])


def test_a_float64_run_rounds_once_into_a_float32_output(target):
    x = hard_doubles()
    plan = eagle.deploy(fo_scaled, target=target)
    out = np.zeros(x.size, np.float32)
    plan.run(x=x / 1.5, out=out)
    with np.errstate(over="ignore"):
        want = (x / 1.5 * 1.5).astype(np.float32)
    bt_same_bits(out, want, f"float64 -> float32 on {target}")  # (-0.0 and 0.0 differ; any NaN matches a NaN)
    if target == "host":  # NaN's bits too (the quiet NaN NumPy gives)
        assert out.tobytes() == want.tobytes()
    assert np.isnan(out).sum() == 1 and np.isinf(out).sum() == np.isinf(want).sum() >= 5


def test_every_special_value_has_astype_bits(target):
    x = hard_doubles()
    out = np.zeros((3, x.size), np.float32)
    v = np.stack([x, -x, x[::-1]])
    eagle.deploy(fo_vec, target=target).run(v=v, out=out)  # a vector payload: the store converts each component
    with np.errstate(over="ignore"):
        bt_same_bits(out, v.astype(np.float32), f"Vector[3] float64 -> float32 on {target}")


def test_a_float32_run_widens_exactly_into_a_float64_output(target):
    x = np.random.default_rng(1).standard_normal(2000).astype(np.float32)
    out = np.zeros(2000)
    eagle.deploy(fo_scaled, target=target).run(x=x, out=out)
    bt_same_bits(out, (x * np.float32(1.5)).astype(np.float64), "computed in float32, widened")


def test_each_dtype_combination_compiles_its_own_code():
    plan = eagle.deploy(fo_scaled)
    x64 = np.linspace(-3, 3, 257)
    x32 = x64.astype(np.float32)
    runs = [(x64, np.float32), (x32, np.float64), (x64, np.float64), (x32, np.float32), (x64, np.float32)]
    for x, odt in runs:
        out = np.zeros(x.size, odt)
        plan.run(x=x, out=out)
        bt_same_bits(out, (x * x.dtype.type(1.5)).astype(odt), f"{x.dtype} run into {np.dtype(odt)}")
    specs = set(plan.binder._specs.values())
    assert {(s.float_dtype, s.float_outputs) for s in specs} == {
        ("float64", (("out", "float32"),)), ("float32", (("out", "float64"),)), ("float64", ()), ("float32", ())}
    got = plan.run(x=x32)  # an omitted output takes the run's dtype
    assert np.asarray(got).dtype == np.float32


def test_without_float_inputs_the_run_takes_the_widest_output():
    a, b = np.zeros(5, np.float32), np.zeros(5)
    eagle.deploy(fo_fill).run(value=0.1, a=a, b=b)
    assert a.tobytes() == np.full(5, 0.1, np.float32).tobytes() and b.tolist() == [0.1] * 5


def test_reading_an_output_back_gives_what_it_holds(target):
    x = np.random.default_rng(2).standard_normal(1000)
    y, w = np.zeros(1000, np.float32), np.zeros(1000)
    eagle.deploy(fo_read_back, target=target).run(x=x, y=y, w=w)
    bt_same_bits(y, x.astype(np.float32), "y")
    bt_same_bits(w, x.astype(np.float32).astype(np.float64), "w reads y as stored (rounded)")
    y0 = np.random.default_rng(3).standard_normal(1000).astype(np.float32)
    y = y0.copy()
    eagle.deploy(fo_accumulate, target=target).run(x=x, y=y)  # a narrower output read in: widened exactly
    bt_same_bits(y, (y0.astype(np.float64) + x).astype(np.float32), "y + x in float64, rounded once")


def test_a_read_that_would_round_is_refused():
    with pytest.raises(KernelError, match=r"output 'y' is read in the body.*float64.*float32"):
        eagle.deploy(fo_accumulate).run(x=np.ones(4, np.float32), y=np.zeros(4))


def test_sums_keep_the_inputs_dtype():
    x = np.random.default_rng(4).standard_normal(5000).astype(np.float32)
    y = np.zeros(5000)
    got = eagle.deploy(fo_sum).run(x=x, y=y)
    t = np.asarray(got["t"])
    assert t.dtype == np.float32 and t[0] == np.float32(np.sum(x.astype(np.float64)))  # the ordered float32 sum
    bt_same_bits(y, x.astype(np.float64), "y")
    with pytest.raises(InputError, match=r"plane 't' of kernel 'fo_sum'.*total.*float32.*float64"):
        eagle.deploy(fo_sum).run(x=x, y=y, t=np.zeros(1))


def test_a_split_kernel_converts_in_its_later_stage(target):
    x = np.random.default_rng(5).uniform(-1e3, 1e3, 3000)
    plan = eagle.deploy(fo_centred, target=target)
    wide = np.asarray(plan.run(x=x))
    out = np.zeros(3000, np.float32)
    plan.run(x=x, y=out)
    bt_same_bits(out, wide.astype(np.float32), "the same float64 values, rounded once")


def test_a_store_by_key_converts(target):
    rng = np.random.default_rng(6)
    x = rng.standard_normal(800)
    k = rng.permutation(1000)[:800].astype(np.int64)
    out = np.full(1000, 7, np.float32)
    eagle.deploy(fo_permute, target=target).run(x=x, k=k, out=out)
    want = np.full(1000, 7, np.float32)
    want[k] = x.astype(np.float32)
    bt_same_bits(out, want, "scatter into a float32 plane")


def test_sinks_share_the_run_dtype_and_float_inputs_promote():
    x = np.ones(8)
    k = np.zeros(8, np.int64)
    with pytest.raises(InputError, match=r"plane 'bins' of kernel 'fo_hist'.*sink.*float64.*float32"):
        eagle.deploy(fo_hist).run(x=x, k=k, bins=np.zeros(4, np.float32))
    z = np.full(8, 0.1, np.float32)  # beside a float64 input: widened (exactly), the run is float64
    got = np.asarray(eagle.deploy(fo_two).run(x=x, z=z))
    bt_same_bits(got, x + z.astype(np.float64), "float64 + float32 in float64")  # (tests/test_mixed_floats.py)


def test_a_refused_store_by_key_leaves_the_float32_output_as_it_was(target):
    x = np.linspace(-1.0, 1.0, 800)
    k = np.arange(800, dtype=np.int64)
    k[400] = 5000  # past the output's end: the run is refused
    out = np.full(1000, 7, np.float32)
    before = (x.copy(), k.copy(), out.copy())
    with pytest.raises(InputError, match=r"kernel 'fo_permute'.*5000"):
        eagle.deploy(fo_permute, target=target).run(x=x, k=k, out=out)
    for got, want in zip((x, k, out), before, strict=True):
        bt_same_bits(got, want, "a refused run's arrays")
