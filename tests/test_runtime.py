"""eagle's runtime surface: eagle.Array, run()'s return value, kernel repr, repeat runs.

Every test that runs a kernel runs on each target of conftest.BT_TARGETS (the `target` fixture) with the same
expectations.
"""

import numpy as np
import pytest
from conftest import bt_close

import eagle
import hawk
from hawk import Grid, Index, Mutable, Scalar


@hawk.kernel
def rt_triple(x: Scalar) -> Scalar:
    return x * 3.0


@hawk.kernel
def rt_outputs(x: Scalar, zeta: Mutable[Scalar], alpha: Mutable[Scalar], mid: Mutable[Scalar]):
    zeta = x + 1.0
    alpha = x - 1.0
    mid = hawk.sum(x)


@pytest.mark.parametrize("dtype, name", [(np.float64, "float64"), (np.float32, "float32")])
def test_array_repr_names_shape_dtype_device(target, dtype, name):
    x = np.arange(11, dtype=dtype)
    out = eagle.deploy(rt_triple, target=target).run(x=x)
    assert isinstance(out, eagle.Array)
    text = repr(out)
    assert text.startswith("eagle.Array(")
    assert "shape=(11,)" in text
    assert f"dtype={name}" in text
    assert "device=cpu" in text


def test_array_repr_of_a_2d_result(target):
    @hawk.kernel
    def rt_grid(lane: Grid["r", "c":4], x: Scalar) -> Scalar:
        return x + 1.0

    out = eagle.deploy(rt_grid, target=target).run(x=np.zeros((3, 4)), r=3)
    assert "shape=(3, 4)" in repr(out)


def test_np_asarray_and_indexing(target):
    x = np.linspace(-1.0, 1.0, 9)
    out = eagle.deploy(rt_triple, target=target).run(x=x)
    arr = np.asarray(out)
    assert isinstance(arr, np.ndarray)
    assert arr.shape == (9,) and arr.dtype == np.float64
    np.testing.assert_array_equal(arr, x * 3.0)
    assert float(out[4]) == 0.0
    np.testing.assert_array_equal(np.asarray(out, dtype=np.float32), (x * 3.0).astype(np.float32))


def test_run_returns_dict_sorted_by_name(target):
    x = np.random.default_rng(9500).normal(size=25)
    out = eagle.deploy(rt_outputs, target=target).run(x=x)
    assert isinstance(out, dict)
    assert list(out) == ["alpha", "mid", "zeta"]
    assert all(isinstance(v, eagle.Array) for v in out.values())
    np.testing.assert_array_equal(np.asarray(out["zeta"]), x + 1.0)
    np.testing.assert_array_equal(np.asarray(out["alpha"]), x - 1.0)
    bt_close(np.asarray(out["mid"]), np.array([x.sum()]), rtol=1e-12)


def test_single_output_is_an_array_not_a_dict(target):
    @hawk.kernel
    def rt_only(x: Scalar, only: Mutable[Scalar]):
        only = x * x

    out = eagle.deploy(rt_only, target=target).run(x=np.arange(4.0))
    assert isinstance(out, eagle.Array)
    np.testing.assert_array_equal(np.asarray(out), np.arange(4.0) ** 2)


def test_kernel_repr_names_the_kernel():
    text = repr(rt_outputs)
    assert "rt_outputs" in text
    assert text.startswith("<Kernel")  # the contract shows `<Kernel stats slots=8>`


def test_kernel_repr_names_its_planes():
    @hawk.kernel
    def rt_named(speed: Scalar, bucket: Index, energy: Mutable[Scalar]):
        energy = speed * bucket

    text = repr(rt_named)
    assert "rt_named" in text
    for plane in ("speed", "bucket", "energy"):
        assert plane in text


def test_second_run_gives_the_same_results(target):
    rng = np.random.default_rng(9501)
    x = rng.normal(size=1001)
    plan = eagle.deploy(rt_outputs, target=target)
    first = {k: np.asarray(v).copy() for k, v in plan.run(x=x).items()}
    second = {k: np.asarray(v).copy() for k, v in plan.run(x=x).items()}
    again = {k: np.asarray(v).copy() for k, v in eagle.deploy(rt_outputs, target=target).run(x=x).items()}
    for k in first:
        np.testing.assert_array_equal(second[k], first[k])
        np.testing.assert_array_equal(again[k], first[k])


def test_results_do_not_alias_between_runs(target):
    plan = eagle.deploy(rt_triple, target=target)
    a = np.asarray(plan.run(x=np.ones(5))).copy()
    first = plan.run(x=np.ones(5))
    keep = np.asarray(first).copy()
    plan.run(x=np.full(5, 7.0))
    np.testing.assert_array_equal(np.asarray(first), keep)
    np.testing.assert_array_equal(a, np.full(5, 3.0))


def test_one_kernel_runs_at_both_dtypes(target):
    x64 = np.linspace(0.0, 1.0, 6)
    plan = eagle.deploy(rt_triple, target=target)
    r64 = np.asarray(plan.run(x=x64))
    r32 = np.asarray(plan.run(x=x64.astype(np.float32)))
    assert r64.dtype == np.float64 and r32.dtype == np.float32
    np.testing.assert_array_equal(r64, x64 * 3.0)
    np.testing.assert_array_equal(r32, x64.astype(np.float32) * np.float32(3.0))
    np.testing.assert_array_equal(np.asarray(plan.run(x=x64)), r64)


def test_kernel_defined_in_a_function_and_at_module_level_agree(target):
    @hawk.kernel
    def rt_triple_local(x: Scalar) -> Scalar:
        return x * 3.0

    x = np.random.default_rng(9502).normal(size=17)
    local = np.asarray(eagle.deploy(rt_triple_local, target=target).run(x=x))
    module = np.asarray(eagle.deploy(rt_triple, target=target).run(x=x))
    np.testing.assert_array_equal(local, module)


def test_lengths_change_between_runs(target):
    plan = eagle.deploy(rt_triple, target=target)
    for n in (1, 8, 1023, 5):
        x = np.random.default_rng(9503 + n).normal(size=n)
        np.testing.assert_array_equal(np.asarray(plan.run(x=x)), x * 3.0)


@hawk.kernel
def rt_weighted(x: Scalar, w: Scalar, k: Index, y: Mutable[Scalar]) -> Scalar:
    y = x * w + k
    return hawk.sum(x * w)


@pytest.mark.parametrize("kind", ["read-only", "broadcast", "empty"])
def test_inputs_of_every_memory_kind_are_read_and_left_alone(target, kind):
    # planes reach compiled code by address: read-only arrays, zero-stride views and empty arrays included
    n = 0 if kind == "empty" else 1000
    x = np.linspace(-1.0, 1.0, n)
    w = np.full(n, 0.5)
    k = np.arange(n, dtype=np.int32) % 7
    if kind == "read-only":
        for a in (x, w, k):
            a.flags.writeable = False
    if kind == "broadcast":
        w = np.broadcast_to(np.float64(0.5), (n,))
    before = [a.copy() for a in (x, w, k)]
    out = eagle.deploy(rt_weighted, target=target).run(x=x, w=w, k=k)
    np.testing.assert_array_equal(np.asarray(out["y"]), x * 0.5 + k)
    np.testing.assert_allclose(np.asarray(out["result"])[0], (x * 0.5).sum(), rtol=0, atol=1e-12)
    for a, b in zip((x, w, k), before, strict=True):
        np.testing.assert_array_equal(a, b)
