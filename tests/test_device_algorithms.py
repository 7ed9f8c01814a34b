"""eagle.algorithms on device arrays (spirv, lavapipe here): every function takes eagle.asarray(a, device="spirv")
inputs, runs on that device with the data in place, and hands array results back as device arrays; the bits equal
the host-array path on the same target, and the transfer counter shows that no lane plane crossed to the host
(only the partials the host finish reads, and one-value reads of totals). docs/algorithms.md, docs/devices.md.

Without a Vulkan device every test skips saying why."""

import math

import numpy as np
import pytest

import eagle
import eagle.algorithms as A
from eagle.array import DeviceArray

N = 5000  # two scan blocks


@pytest.fixture(scope="module", autouse=True)
def transfers(vulkan_transfers):
    return vulkan_transfers


def dev(a) -> DeviceArray:
    return eagle.asarray(a, device="spirv")


def same(got, want) -> None:
    """Device result `got` has `want`'s dtype, shape and bits."""
    assert isinstance(got, DeviceArray) and got.device == "spirv"
    w = np.asarray(want)
    g = got.numpy()
    assert g.dtype == w.dtype and g.shape == w.shape
    assert g.tobytes() == w.tobytes()


def no_lane_copies(t) -> None:
    """Nothing lane-sized crossed: no lane plane, no array copied down, one-value reads of totals (and a
    histogram's few counts up, as its device result)."""
    assert t.planes() == 0, t
    assert t.counts[("down", "array")] == 0, t
    assert t.bytes[("down", "value")] <= 64 and t.bytes[("up", "array")] <= 64, t


def test_scans_on_device_arrays(transfers):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(N).astype(np.float32)
    k = rng.integers(-1000, 1000, N).astype(np.int32)
    want_f, want_i = np.full(N + 3, 9, np.float32), np.zeros(N, np.int64)
    tf = A.exclusive_scan(x, want_f, target="spirv")
    ti = A.inclusive_scan(k, want_i, target="spirv")
    dx, dk, df, di = dev(x), dev(k), dev(np.full(N + 3, 9, np.float32)), dev(np.zeros(N, np.int64))
    inplace = dev(x)
    transfers.reset()
    assert A.exclusive_scan(dx, df) == tf  # the device picks the target; the total is a Python number
    assert A.inclusive_scan(dk, di) == ti == int(np.cumsum(k, dtype=np.int64)[-1])
    assert A.inclusive_scan(inplace, inplace, total=False) is None
    no_lane_copies(transfers)
    same(df, want_f)  # dst's last 3 values left alone
    same(di, want_i)
    host_inplace = x.copy()
    A.inclusive_scan(host_inplace, host_inplace, target="spirv")
    same(inplace, host_inplace)


def test_argsort_and_sort_by_key_on_device_arrays(transfers):
    rng = np.random.default_rng(6)
    keys = rng.integers(-3000, 3000, N).astype(np.int32)  # a 13-bit spread: two passes
    vals = rng.standard_normal(N)
    dk, dv = dev(keys), dev(vals)
    transfers.reset()
    perm = A.argsort(dk)
    sk, sv = A.sort_by_key(dk, dv, n=N - 7)
    no_lane_copies(transfers)
    same(perm, np.argsort(keys, kind="stable").astype(np.int32))
    same(perm, A.argsort(keys, target="spirv"))
    hk, hv = A.sort_by_key(keys, vals, n=N - 7, target="spirv")
    same(sk, hk)
    same(sv, hv)


def test_unique_and_reduce_by_key_on_device_arrays(transfers):
    rng = np.random.default_rng(7)
    keys = np.sort(rng.integers(0, 600, N)).astype(np.int32)
    vals = rng.standard_normal(N).astype(np.float32)
    dk, dv = dev(keys), dev(vals)
    transfers.reset()
    uk, counts = A.unique(dk)
    rk, rs = A.reduce_by_key(dk, dv)
    _, rmax = A.reduce_by_key(dk, dv, op="max")
    no_lane_copies(transfers)
    hk, hc = A.unique(keys, target="spirv")
    same(uk, hk)
    same(counts, hc)
    same(uk, np.unique(keys))  # int32 keys narrowed from the kernel's int64 plane on the device
    hrk, hrs = A.reduce_by_key(keys, vals, target="spirv")
    same(rk, hrk)
    same(rs, hrs)
    same(rmax, A.reduce_by_key(keys, vals, op="max", target="spirv")[1])
    fk, wide = np.round(vals * 3).astype(np.float32), rng.standard_normal(N)  # float32 keys widened on the device
    got = A.reduce_by_key(dev(fk), dev(wide))
    for g, w in zip(got, A.reduce_by_key(fk, wide, target="spirv"), strict=True):
        same(g, w)


def test_copy_fill_gather_on_device_arrays(transfers):
    rng = np.random.default_rng(8)
    x = rng.standard_normal(N)
    perm = rng.permutation(N)[:N // 2].astype(np.int64)
    ints = rng.integers(-9, 9, N).astype(np.int32)
    dx, dperm, dints = dev(x), dev(perm), dev(ints)
    dst, dst_off, filled = dev(np.zeros(N, np.float32)), dev(np.zeros(N + 10)), dev(np.zeros(N, np.int64))
    transfers.reset()
    A.copy(dx, dst)  # float64 -> float32: one rounding on the store
    A.copy_with_offset(dx, dst_off, 10)
    A.fill_value(filled, 3.75, n=N - 1)  # truncates to 3 in an integer dst
    g = A.gather(dx, dperm)
    gi = A.gather(dints, dperm)
    no_lane_copies(transfers)
    same(dst, x.astype(np.float32))
    same(dst_off, np.concatenate([np.zeros(10), x]))
    same(filled, np.r_[np.full(N - 1, 3, np.int64), 0])
    same(g, x[perm])
    same(gi, ints[perm])
    with pytest.raises(IndexError, match="position 5000"):
        A.gather(dx, dev(np.array([0, N], np.int64)))


def test_statistics_and_histogram_on_device_arrays(transfers):
    rng = np.random.default_rng(9)
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    dx, dy = dev(x), dev(y)
    transfers.reset()
    got = (A.var(dx), A.norm(dx), A.norm(dx, ord=1), A.dot(dx, dy), A.count_nonzero(dx), dx.sum(), dx.max())
    counts, edges = A.histogram(dx, bins=7, n=N - 1)
    no_lane_copies(transfers)
    want = (A.var(x, target="spirv"), A.norm(x, target="spirv"), A.norm(x, ord=1, target="spirv"),
            A.dot(x, y, target="spirv"), A.count_nonzero(x, target="spirv"), eagle.asarray(x).sum(target="spirv"),
            float(x.max()))
    assert [math.copysign(1, v) * abs(v) for v in got] == list(want)
    assert abs(got[3] - math.fsum(map(float, x.astype(np.float64) * y))) < 1e-3
    hc, he = A.histogram(x, bins=7, n=N - 1, target="spirv")
    same(counts, hc)
    assert np.array_equal(edges, he)


def test_device_arrays_refusals(transfers):
    d = dev(np.arange(10, dtype=np.float64))
    with pytest.raises(ValueError, match="on device 'spirv' but target='host'"):
        A.var(d, target="host")
    with pytest.raises(TypeError, match="float16 array on device 'spirv'.*a.numpy"):
        A.var(dev(np.ones(4, np.float16)))
    with pytest.raises(TypeError, match="uint16 array .* on device 'spirv'"):
        A.unique(dev(np.ones(4, np.uint16)))
