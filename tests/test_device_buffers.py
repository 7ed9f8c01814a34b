"""Device-resident arrays on the spirv target (lavapipe here): eagle.asarray(a, device="spirv") keeps the data in a
Vulkan device buffer, a plan on spirv binds it where it lies, a bound plan copies no lane plane between launches,
and every copy between host and device is counted (eagle.targets.vulkan_runtime.transfers()). docs/devices.md.

Without a Vulkan device every test skips saying why (a failure under CI, as for tests/test_spirv.py)."""

import numpy as np
import pytest
from conftest import bt_target_missing

import eagle
import hawk
from eagle.array import DeviceArray
from eagle.errors import InputError
from hawk import Index, Mutable, Scalar

N = 5000


@hawk.kernel
def dm_center(x: Scalar, w: Scalar, total: Mutable[Scalar]) -> Scalar:
    s = hawk.sum(x * w, policy="ordered")
    total = s
    return x * w - s * 0.001


@hawk.kernel
def dm_by_key(key: Index, x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc, policy="ordered")[key] += x


@pytest.fixture(scope="module", autouse=True)
def transfers(vulkan_transfers):
    return vulkan_transfers


@pytest.fixture(scope="module")
def center():
    return eagle.deploy(dm_center, target="spirv")


def planes(seed: int = 3, dtype=np.float64) -> dict:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal(N).astype(dtype), "w": rng.uniform(0.5, 1.5, N).astype(dtype)}


def bits(a) -> bytes:
    return np.asarray(a).tobytes()


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_asarray_keeps_the_data_on_the_device_and_numpy_copies_it_back_counted(transfers, dtype):
    a = (np.arange(-7, 1000) * 3).astype(dtype).reshape(19, 53)
    transfers.reset()
    d = eagle.asarray(a, device="spirv")
    assert isinstance(d, DeviceArray) and d.device == "spirv" and d.__dlpack_device__() == (7, 0)
    assert (d.shape, d.dtype, d.ndim, d.size, len(d)) == (a.shape, a.dtype, 2, a.size, 19)
    assert transfers.counts == {("up", "array"): 1}
    back = d.numpy()
    assert back.tobytes() == a.tobytes() and back.shape == a.shape
    assert np.asarray(d).tobytes() == a.tobytes()
    assert transfers.counts == {("up", "array"): 1, ("down", "array"): 2}
    assert eagle.asarray(d, device="spirv") is d
    host = eagle.asarray(d)
    assert host.device == "cpu" and bits(host) == a.tobytes()
    with pytest.raises(BufferError, match="device 'spirv'"):
        d.__dlpack__()


def test_a_bound_two_stage_plan_on_device_arrays_copies_no_lane_plane_and_keeps_the_bits(center, transfers):
    p = planes()
    transfers.reset()
    want = center.run(**p)  # the host-array path on the same target: every lane plane travels
    assert len(center.last_chunks) == 2
    assert transfers.planes() >= 3  # x and w up, the result down: the counter sees lane planes
    dev = {k: eagle.asarray(v, device="spirv") for k, v in p.items()}
    transfers.reset()
    bound = center.bind(**dev)
    for i in range(4):
        got = bound.launch()
        assert transfers.planes() == 0, transfers
        assert isinstance(got["result"], DeviceArray) and got["result"].device == "spirv"
        assert not isinstance(got["total"], DeviceArray)  # a cell: finished on the host, a host Array
        assert bits(got["total"]) == bits(want["total"])
        if i == 0:
            first = dict(transfers.counts)
    # per-launch state: what a stage's bindings already hold is not copied again (its #meta, the total stage 1
    # hands stage 2: the same at every launch here); what the host finish and check read still comes down
    later = {k: n - first.get(k, 0) for k, n in transfers.counts.items()}
    assert later.get(("up", "meta"), 0) == 0 and later.get(("up", "cut"), 0) == 0, later
    assert later[("down", "err")] == 6 and later[("down", "cell")] == 3, later  # 3 launches, 2 stages
    assert bits(got["result"]) == bits(want["result"])
    host = eagle.deploy(dm_center).run(**p)
    assert bits(host["total"]) == bits(want["total"])  # ordered: the host's bits too
    np.testing.assert_allclose(np.asarray(got["result"]), np.asarray(host["result"]), rtol=1e-15, atol=1e-15)


def test_a_plain_run_on_device_arrays_returns_its_per_lane_output_on_the_device(center, transfers):
    p = planes(5, np.float32)
    want = center.run(**p)
    dx = eagle.asarray(p["x"], device="spirv")
    transfers.reset()
    got = center.run(x=dx, w=p["w"])  # a host plane beside a device one: copied in by each stage that reads it
    assert transfers.counts[("up", "in")] == 2 and transfers.counts[("down", "out")] == 0  # results stay there
    assert isinstance(got["result"], DeviceArray) and got["result"].dtype == np.float32
    assert bits(got["result"]) == bits(want["result"]) and bits(got["total"]) == bits(want["total"])
    again = center.run(x=got["result"], w=dx)  # a run's device output feeds the next run in place
    assert bits(again["result"]) == bits(center.run(x=np.asarray(want["result"]), w=p["x"])["result"])


def test_device_keys_are_checked_on_a_host_copy_and_a_refused_run_leaves_device_arrays_as_they_were(transfers):
    plan = eagle.deploy(dm_by_key, target="spirv")
    rng = np.random.default_rng(7)
    key, x = rng.integers(0, 7, N).astype(np.int32), rng.standard_normal(N)
    want = plan.run(key=key, x=x)
    dk, dx = eagle.asarray(key, device="spirv"), eagle.asarray(x, device="spirv")
    transfers.reset()
    got = plan.run(key=dk, x=dx)
    assert transfers.counts[("down", "index")] == 1 and transfers.counts[("up", "in")] == 0
    assert bits(got) == bits(want)
    bad = key.copy()
    bad[4321] = 7
    dbad = eagle.asarray(bad, device="spirv")
    with pytest.raises(InputError, match=r"plane 'key' of kernel 'dm_by_key': holds key 7"):
        plan.run(key=dbad, x=dx)
    assert bits(dbad) == bad.tobytes() and bits(dx) == x.tobytes()


def test_device_arrays_are_refused_by_plane_and_kernel_where_they_cannot_be_read(center):
    p = planes()
    dx = eagle.asarray(p["x"], device="spirv")
    host = eagle.deploy(dm_center)
    with pytest.raises(InputError, match=r"plane 'x' of kernel 'dm_center': is an eagle.Array on device 'spirv', "
                                         r"but this run reads host memory: deploy the kernel with target='spirv'"):
        host.run(x=dx, w=p["w"])
    with pytest.raises(InputError, match=r"plane 'total' of kernel 'dm_center': is device memory, but it is "
                                         r"an output plane"):
        center.run(x=dx, w=p["w"], total=eagle.asarray(np.zeros(1), device="spirv"))
    with pytest.raises(InputError, match=r"plane 'x' of kernel 'dm_center': is a float32 device array, but this "
                                         r"run computes in float64 .*promoted.*never converted"):
        center.run(x=eagle.asarray(p["x"].astype(np.float32), device="spirv"), w=p["w"])  # w float64: promoted
    assert bits(dx) == p["x"].tobytes()


class _CudaLike:
    """What torch, CuPy, Numba and Warp CUDA arrays show eagle: __cuda_array_interface__ (version 3)."""

    def __init__(self, shape, typestr, ptr=0xDEAD0000, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False), "version": 3,
                                         "strides": strides}


def test_cuda_arrays_are_read_by_their_interface_and_refused_by_a_plan_on_another_target(center):
    from eagle.targets.device_planes import foreign_cuda

    assert foreign_cuda(_CudaLike((3, 4), "<f4")) == (0xDEAD0000, (3, 4), np.dtype(np.float32), None)
    assert foreign_cuda(np.zeros(3)) is None
    with pytest.raises(InputError, match=r"plane 'x' of kernel 'dm_center': is a test_device_buffers._CudaLike in "
                                         r"CUDA memory on device 'nvvm', but this plan runs on 'spirv'"):
        center.run(x=_CudaLike((N,), "<f8"), w=np.zeros(N))
    with pytest.raises(InputError, match=r"plane 'x' of kernel 'dm_center': is a test_device_buffers._CudaLike on a "
                                         r"CUDA device, but this run reads host memory"):
        eagle.deploy(dm_center).run(x=_CudaLike((N,), "<f8"), w=np.zeros(N))


def test_asarray_names_what_a_machine_lacks_for_a_device_it_cannot_reach():
    if bt_target_missing("nvvm") is None:
        pytest.skip("this machine runs nvvm")
    with pytest.raises(eagle.RuntimeMissing, match="target 'nvvm'"):
        eagle.asarray(np.zeros(3), device="nvvm")
    with pytest.raises(ValueError, match=r"device='gpu' is not one eagle keeps arrays on"):
        eagle.asarray(np.zeros(3), device="gpu")


def test_a_copy_larger_than_the_staging_buffer_goes_in_pieces(monkeypatch, transfers):
    from eagle.targets import vulkan_memory

    monkeypatch.setattr(vulkan_memory, "STAGING", 96)  # bytes: 1001 float64 values take 84 pieces each way
    a = np.random.default_rng(11).standard_normal(1001)
    transfers.reset()
    d = eagle.asarray(a, device="spirv")
    assert d.numpy().tobytes() == a.tobytes()
    assert transfers.counts == {("up", "array"): 1, ("down", "array"): 1}  # one transfer each, however many pieces


def test_a_spirv_array_refuses_dlpack_and_names_the_way_out():
    d = eagle.asarray(np.arange(4.0), device="spirv")
    assert d.__dlpack_device__() == (7, 0)  # kDLVulkan: where the memory is
    with pytest.raises(BufferError, match=r"device 'spirv' does not export DLPack.*a\.numpy\(\)"):
        d.__dlpack__()
    assert np.from_dlpack(eagle.asarray(d.numpy())).tolist() == [0.0, 1.0, 2.0, 3.0]
