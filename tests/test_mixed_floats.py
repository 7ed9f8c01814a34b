"""Float inputs of two dtypes (docs/semantics.md, "Float types of a run"; docs/algorithms.md).

Plan.run promotes as NumPy, torch and JAX (x64) do: a run whose float inputs mix float32 and float64 computes in
float64, its float32 inputs widened exactly by one copy each on the host; per-lane outputs passed keep their own
dtype (rounded once), omitted ones come back float64, sinks and totals must be float64. So a mixed run has the
bits of the same run with every input converted to float64 first. A float32 device array is not converted (a
clear refusal); artifacts and the JAX/torch bridges keep one float dtype (refusals naming both planes; the torch
bridge's prepared fast path included); the Warp bridge runs through Plan.run and promotes.
eagle.algorithms follows the reference's rule (float64 if any input is float64, else float32), device arrays
widened on the device. Checked against NumPy and math.fsum, on the host (threads split) and on spirv.
"""

import math

import numpy as np
import pytest
from conftest import bt_same_bits

import eagle
import hawk
from eagle.binding import Binder
from eagle.errors import InputError
from hawk import Mutable, Scalar, Table

N = 3000


@hawk.kernel
def mf_mix(x: Scalar, z: Scalar, t: Table["c":4], out: Mutable[Scalar], total: Mutable[Scalar]):
    out = x * z + t.at(c=1)
    total = hawk.sum(x * z, policy="ordered")


@hawk.kernel
def mf_two(x: Scalar, z: Scalar) -> Scalar:
    return x + z


def _planes(rng):
    x = rng.standard_normal(N).astype(np.float32)
    z = rng.standard_normal(N) * 1e-3
    t = rng.standard_normal(4).astype(np.float32)
    return x, z, t


def _plan(kernel, target):
    return eagle.deploy(kernel, target=target, **({"threads": 2, "min_chunk": 256} if target == "host" else {}))


def test_mixed_inputs_run_in_float64_with_the_converted_bits(target):
    x, z, t = _planes(np.random.default_rng(1))
    plan = _plan(mf_mix, target)
    got = plan.run(x=x, z=z, t=t)
    want = plan.run(x=x.astype(np.float64), z=z, t=t.astype(np.float64))  # every input float64 first
    for name in ("out", "total"):
        assert np.asarray(got[name]).dtype == np.float64, name
        bt_same_bits(np.asarray(got[name]), np.asarray(want[name]), name)
    assert np.allclose(np.asarray(got["out"]), x.astype(np.float64) * z + float(t[1]), rtol=1e-15, atol=1e-300)
    terms = x.astype(np.float64) * z
    assert abs(float(np.asarray(got["total"])[0]) - math.fsum(terms)) <= 1e-12 * math.fsum(abs(terms))
    if target == "host":
        assert max(plan.last_chunks) > 1  # the threads really split the run
    out32 = np.zeros(N, np.float32)  # a per-lane output keeps its own dtype: the float64 value rounded once
    plan.run(x=x, z=z, t=t, out=out32)
    bt_same_bits(out32, np.asarray(want["out"]).astype(np.float32), "out passed as float32")
    assert x.dtype == np.float32 and t.dtype == np.float32  # the caller's inputs are not converted in place


def test_float32_alone_still_runs_in_float32_and_order_does_not_matter():
    x, z, _ = _planes(np.random.default_rng(2))
    z32 = z.astype(np.float32)
    plan = eagle.deploy(mf_two)
    r = np.asarray(plan.run(x=x, z=z32))
    assert r.dtype == np.float32 and r.tobytes() == (x + z32).tobytes()
    a, b = np.asarray(plan.run(x=x, z=z)), np.asarray(plan.run(x=z, z=x))
    assert a.dtype == b.dtype == np.float64
    bt_same_bits(a, x.astype(np.float64) + z, "float32 + float64")
    bt_same_bits(b, z + x.astype(np.float64), "float64 + float32")


def test_the_reverse_of_a_promoted_run_gives_float64_gradients():
    x, z, _ = _planes(np.random.default_rng(9))
    g = eagle.deploy(mf_two).reverse(np.full(N, 0.5), x=x, z=z)
    assert np.asarray(g["x"]).dtype == np.asarray(g["z"]).dtype == np.float64  # the run's float type
    assert np.asarray(g["x"]).tolist() == np.asarray(g["z"]).tolist() == [0.5] * N


def test_a_total_of_a_promoted_run_must_be_float64():
    x, z, t = _planes(np.random.default_rng(3))
    with pytest.raises(InputError, match=r"plane 'total' of kernel 'mf_mix'.*total.*float64.*got float32"):
        eagle.deploy(mf_mix).run(x=x, z=z, t=t, total=np.zeros(1, np.float32))


def test_a_bound_launch_converts_once_and_reads_the_copy():
    x, z, t = _planes(np.random.default_rng(4))
    bound = eagle.deploy(mf_two).bind(x=x, z=z)
    assert bound.inputs["x"].dtype == np.float64  # the float64 copy the launch reads (write into it to change x)
    bt_same_bits(np.asarray(bound.launch()), x.astype(np.float64) + z, "bound")


def test_doors_that_keep_one_float_dtype_refuse_clearly():
    x, z, _ = _planes(np.random.default_rng(5))
    artifact_binder = Binder(mf_two.name, mf_two.signature, mf_two.outputs)  # what an artifact checks with
    with pytest.raises(InputError, match=r"plane 'z' of kernel 'mf_two': is float64 but plane 'x' is float32: an "
                                         r"artifact, built per float dtype, runs every float plane in one dtype.*"
                                         r"astype\(np.float64\).*eagle.deploy\(...\).run, which promotes"):
        artifact_binder.bind({"x": x, "z": z})
    torch = pytest.importorskip("torch")
    import eagle.torch

    with pytest.raises(InputError, match=r"plane 'z' of kernel 'mf_two': is float64 but plane 'x' is float32: a "
                                         r"call through the JAX or torch bridge runs every float plane in one"):
        eagle.torch.wrap(mf_two)(x=torch.from_numpy(x), z=torch.from_numpy(z))  # (the prepared fast path)
    with pytest.raises(InputError, match=r"plane 'z' of kernel 'mf_two': is float64 but plane 'x' is float32"):
        eagle.torch.wrap(mf_two)(x=torch.from_numpy(x)[::2], z=torch.from_numpy(z)[::2])  # strided: Plan.run's path


def test_the_warp_bridge_promotes_like_plan_run():
    wp = pytest.importorskip("warp")
    import eagle.warp

    x, z, _ = _planes(np.random.default_rng(8))
    got = eagle.warp.wrap(mf_two)(x=wp.array(x, dtype=wp.float32, device="cpu"),
                                  z=wp.array(z, dtype=wp.float64, device="cpu"))
    bt_same_bits(got.numpy(), x.astype(np.float64) + z, "eagle.warp: float32 + float64 in float64")


# --- eagle.algorithms: the reference's rule, device arrays widened on the device -----------------------------------
def test_algorithms_follow_the_inputs_precision(target):
    from eagle.algorithms import dot, exclusive_scan, inclusive_scan, reduce_by_key

    rng = np.random.default_rng(6)
    a32, b64 = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N)
    d = dot(a32, b64, target=target)
    assert d == dot(a32.astype(np.float64), b64, target=target)  # float64 terms and sums: the same bits
    assert abs(d - math.fsum(a32.astype(np.float64) * b64)) < 1e-12 * N
    assert dot(b64, a32, target=target) == dot(b64, a32.astype(np.float64), target=target)
    keys = np.repeat(rng.standard_normal(N // 5).astype(np.float32), 5)
    u, s = reduce_by_key(keys, b64, target=target)
    assert u.dtype == np.float32 and np.asarray(u).tolist() == keys[::5].tolist()
    assert s.dtype == np.float64
    assert np.asarray(s).tolist() == [float(np.cumsum(r)[-1]) for r in b64.reshape(-1, 5)]  # sequential, float64
    for src, dt in ((a32, np.float64), (b64, np.float32)):  # np.cumsum(src, dtype=dst.dtype)'s bits
        out = np.empty(N, dt)
        assert inclusive_scan(src, out, target=target) == float(np.cumsum(src, dtype=dt)[-1])
        bt_same_bits(out, np.cumsum(src, dtype=dt), f"{src.dtype} into {np.dtype(dt)}")
        exclusive_scan(src, out, 1000, target=target)
        bt_same_bits(out[:1000], np.concatenate([[0.0], np.cumsum(src[:999], dtype=dt)]).astype(dt), "exclusive")


def test_algorithms_widen_device_arrays_on_the_device(vulkan_transfers):
    from eagle.algorithms import dot, inclusive_scan, reduce_by_key

    rng = np.random.default_rng(7)
    a32, b64 = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N)
    da, db = eagle.asarray(a32, device="spirv"), eagle.asarray(b64, device="spirv")
    keys = eagle.asarray(np.repeat(np.arange(N // 3, dtype=np.float32), 3), device="spirv")
    want = (dot(a32, b64, target="spirv"), np.cumsum(a32, dtype=np.float64), np.cumsum(b64, dtype=np.float32))
    assert dot(a32, db) == want[0]  # (a host array beside a device one: uploaded by the run, widened on the host)
    wide, narrow = eagle.asarray(np.empty(N), device="spirv"), eagle.asarray(np.empty(N, np.float32), device="spirv")
    vulkan_transfers.reset()
    assert dot(da, db) == want[0]
    inclusive_scan(da, wide, total=False)
    inclusive_scan(db, narrow, total=False)
    u, s = reduce_by_key(keys, db)
    assert vulkan_transfers.planes() == 0 and vulkan_transfers.counts[("down", "array")] == 0, vulkan_transfers
    bt_same_bits(wide.numpy(), want[1], "float32 scanned into float64 on the device")
    bt_same_bits(narrow.numpy(), want[2], "float64 scanned into float32 on the device")
    assert u.numpy().dtype == np.float32 and s.numpy().tolist() == [float(np.cumsum(r)[-1])
                                                                  for r in b64.reshape(-1, 3)]
