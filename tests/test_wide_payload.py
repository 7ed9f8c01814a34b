"""Wide payloads (more than host_emit.WIDE_PAYLOAD components): Vector[1024] and Matrix[32, 32] kernels compile in
about a second (component loops and whole-vector sums instead of straight-line code per component) and give
NumPy's results; ordered sums keep the bits of the per-component (scalar) ordered sum, since each component still
sees the same additions in the same order."""

import functools
from types import SimpleNamespace

import numpy as np
import pytest

import eagle
import hawk
from hawk import Grid, Index, Matrix, Mutable, Scalar, Sorted, Vector

N = 1024
LANES = 300


def _rand(shape, seed):
    return np.random.default_rng(seed).normal(size=shape)


def _quarters(shape, seed):
    return np.random.default_rng(seed).integers(-64, 64, size=shape) * 0.25  # sums exact in any order


def _run(kernel, threads=1, split=True, **planes):
    """Run on the host; with several threads, assert the run really split into chunks (`split=False` for ordered
    scatters, whose chunks are whole segments: at these sizes one segment, so one chunk at any thread count)."""
    plan = eagle.deploy(kernel, threads=threads, min_chunk=64)
    out = plan.run(**planes)
    if threads > 1 and split:  # the chunked drivers and the finish's combine really ran
        assert max(plan.last_chunks) > 1, f"{kernel.name}: one chunk ({plan.last_chunks})"
    return {k: np.asarray(v) for k, v in out.items()} if isinstance(out, dict) else np.asarray(out)


@functools.cache
def kernels() -> SimpleNamespace:
    """The kernels, built on first use: defined inside a function so that tests/test_gpu_compile.py (which builds
    every module-level kernel of the suite for nvvm and rocdl) does not take them; GPU lowerings still run wide
    payloads per component (see hawk/passes/lower_gpu.py)."""

    @hawk.kernel
    def w_elementwise(a: Vector[1024], b: Vector[1024], s: Scalar, out: Mutable[Vector[1024]]):
        out = (a + b) * s - a / 2.0


    @hawk.kernel
    def w_in_lane(a: Vector[1024]) -> Scalar:
        return (a * 2.0).sum()


    @hawk.kernel
    def w_sum_auto(a: Vector[1024]) -> Vector[1024]:
        return hawk.sum(a * 2.0)


    @hawk.kernel
    def w_sum_comp(a: Vector[1024], x: Scalar) -> Vector[1024]:
        return hawk.sum(a, policy="compensated", where=x > 0.0)


    @hawk.kernel
    def w_sum_ordered(a: Vector[1024]) -> Vector[1024]:
        return hawk.sum(a, policy="ordered")


    @hawk.kernel
    def w_mean_ordered(a: Vector[64], x: Scalar) -> Vector[64]:
        return hawk.mean(a, policy="ordered", where=x > 0.0)


    @hawk.kernel
    def s_sum_ordered(x: Scalar) -> Scalar:
        return hawk.sum(x, policy="ordered")


    @hawk.kernel
    def s_sum_comp(x: Scalar, y: Scalar) -> Scalar:
        return hawk.sum(x, policy="compensated", where=y > 0.0)


    @hawk.kernel
    def w_max(a: Vector[64]) -> Vector[64]:
        return hawk.max(a)


    @hawk.kernel
    def w_centred(a: Vector[64], out: Mutable[Vector[64]]):
        out = a - hawk.mean(a)  # reads a total: two stages, the second reads a wide cut


    @hawk.kernel
    def w_matrix(mm: Matrix[32, 32], s: Scalar, out: Mutable[Matrix[32, 32]], down: Mutable[Vector[32]]):
        out = mm * s + 1.0
        down = mm.sum(axis="rows")


    @hawk.kernel
    def w_matrix_cell(mm: Matrix[32, 32]) -> Matrix[32, 32]:
        return hawk.sum(mm, policy="ordered")


    @hawk.kernel
    def w_scatter(key: Index, v: Vector[1024], acc: Mutable["slot":8]):
        hawk.scatter(acc, policy="plain")[key] += v


    @hawk.kernel
    def w_scatter_comp(key: Index, v: Vector[64], acc: Mutable["slot":8]):
        hawk.scatter(acc, policy="compensated")[key - 1] += v


    @hawk.kernel
    def w_scatter_ordered(key: Index, v: Vector[64], acc: Mutable["slot":8]):
        hawk.scatter(acc, policy="ordered")[key] += v


    @hawk.kernel
    def w_scatter_store(key: Index, v: Vector[64], buf: Mutable["slot":8]):
        hawk.scatter(buf)[key] = v


    @hawk.kernel
    def w_sorted_plain(key: Sorted[Index], v: Vector[64], acc: Mutable["slot":8]):
        hawk.scatter(acc, policy="plain")[key] += v


    @hawk.kernel
    def w_sorted_comp(key: Sorted[Index], v: Vector[64], acc: Mutable["slot":8]):
        hawk.scatter(acc, policy="compensated")[key] += v


    @hawk.kernel
    def w_sorted_ordered(key: Sorted[Index], v: Vector[64], acc: Mutable["slot":8]):
        hawk.scatter(acc, policy="ordered")[key] += v


    @hawk.kernel
    def w_kept(lane: Grid["row", "col":4], v: Vector[64]) -> Vector[64]:
        return hawk.sum(v, over="row", policy="compensated")


    @hawk.kernel
    def w_at(v: Vector[64], i: Index, out: Mutable[Vector[64]]):
        out = v.at(i) * 2.0

    @hawk.kernel
    def w_nine(a: Vector[9], total: Mutable[Vector[9]], twice: Mutable[Vector[9]]):
        total = hawk.sum(a, policy="ordered")  # just past WIDE_PAYLOAD: the wide path
        twice = a * 2.0 + 1.0

    return SimpleNamespace(**locals())  # every kernel above, by name


def test_elementwise_vector_1024_matches_numpy_bitwise():
    a, b = _rand((2, N, LANES), 1)
    s = _rand(LANES, 2)
    got = _run(kernels().w_elementwise, a=a, b=b, s=s)
    np.testing.assert_array_equal(got.reshape(N, LANES), (a + b) * s - a / 2.0)


def test_in_lane_sum_of_vector_1024():
    a = _rand((N, LANES), 3)
    np.testing.assert_allclose(_run(kernels().w_in_lane, a=a), (a * 2.0).sum(axis=0), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("threads", [1, 3])
def test_sums_of_vector_1024_into_a_cell(threads):
    a = _rand((N, 5000), 4)
    x = _rand(5000, 5)
    np.testing.assert_allclose(_run(kernels().w_sum_auto, threads, a=a), (a * 2.0).sum(axis=1), rtol=1e-11, atol=1e-11)
    want = np.array([float(np.sum(a[c][x > 0.0], dtype=np.float64)) for c in range(N)])
    np.testing.assert_allclose(_run(kernels().w_sum_comp, threads, a=a, x=x), want, rtol=1e-13, atol=1e-13)


def test_ordered_vector_sum_keeps_the_scalar_ordered_bits():
    a = _rand((N, 5000), 6) * 10.0 ** np.random.default_rng(7).integers(-6, 6, size=(N, 5000))
    got = {_run(kernels().w_sum_ordered, t, a=a).tobytes() for t in (1, 3)}
    assert len(got) == 1
    got = np.frombuffer(got.pop(), dtype=np.float64)
    for c in (0, 1, 17, 511, 1023):  # each component: the very tree of a scalar ordered sum
        assert got[c].tobytes() == _run(kernels().s_sum_ordered, x=np.ascontiguousarray(a[c])).tobytes(), c
    np.testing.assert_allclose(got, a.sum(axis=1), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("threads", [1, 3])
def test_compensated_vector_sum_keeps_the_scalar_bits(threads):
    # strict steps per component: each component of a wide sum is the scalar compensated sum of its terms
    a = _rand((N, 5000), 20) * 10.0 ** np.random.default_rng(21).integers(-8, 8, size=(N, 5000))
    x = _rand(5000, 22)
    got = _run(kernels().w_sum_comp, threads, a=a, x=x)
    for c in (0, 3, 700, 1023):
        want = _run(kernels().s_sum_comp, threads, x=np.ascontiguousarray(a[c]), y=x)
        assert got[c].tobytes() == want.tobytes(), c


def test_ordered_mean_and_max_of_wide_payloads():
    a = _rand((64, 3000), 8)
    x = _rand(3000, 9)
    got = _run(kernels().w_mean_ordered, 3, a=a, x=x)
    np.testing.assert_allclose(got, a[:, x > 0.0].mean(axis=1), rtol=1e-12)
    np.testing.assert_array_equal(_run(kernels().w_max, 3, a=a), a.max(axis=1))


def test_stage_reading_a_wide_total():
    a = _rand((64, 700), 10)
    got = _run(kernels().w_centred, a=a)
    np.testing.assert_allclose(got.reshape(64, 700), a - a.mean(axis=1, keepdims=True), rtol=1e-12, atol=1e-12)


def test_matrix_32_by_32():
    mm = _rand((32 * 32, LANES), 11)
    s = _rand(LANES, 12)
    out = _run(kernels().w_matrix, mm=mm, s=s)
    cube = mm.reshape(32, 32, LANES)
    np.testing.assert_array_equal(out["out"].reshape(32 * 32, LANES), mm * s + 1.0)
    np.testing.assert_allclose(out["down"].reshape(32, LANES), cube.sum(axis=0), rtol=1e-12, atol=1e-12)
    cell = _run(kernels().w_matrix_cell, mm=mm)
    assert cell.shape == (32, 32)
    np.testing.assert_allclose(cell, cube.sum(axis=2), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("threads", [1, 3])
def test_vector_scatters(threads):
    n = 4000
    rng = np.random.default_rng(13)
    key = rng.integers(0, 8, size=n).astype(np.int32)
    v = _quarters((N, n), 14)
    want = np.zeros((8, N))
    np.add.at(want, key, v.T)
    got = _run(kernels().w_scatter, threads, key=key, v=v)
    np.testing.assert_array_equal(got.reshape(N, 8), want.T)
    v64 = _quarters((64, n), 15)
    for kernel, keys in ((kernels().w_scatter_comp, key + 1), (kernels().w_scatter_ordered, key)):
        want = np.zeros((8, 64))
        np.add.at(want, key, v64.T)
        got = _run(kernel, threads, kernel is not kernels().w_scatter_ordered, key=keys.astype(np.int32), v=v64)
        np.testing.assert_array_equal(got.reshape(64, 8), want.T, err_msg=kernel.name)
    last = np.zeros((8, 64))
    for i in range(n):
        last[key[i]] = v64[:, i]
    got = _run(kernels().w_scatter_store, threads, key=key, v=v64)
    np.testing.assert_array_equal(got.reshape(64, 8), last.T)


@pytest.mark.parametrize("name", ["w_sorted_plain", "w_sorted_comp", "w_sorted_ordered"])
def test_sorted_vector_scatters(name):
    kernel = getattr(kernels(), name)
    n = 3000
    key = np.sort(np.random.default_rng(16).integers(-1, 8, size=n)).astype(np.int32)
    v = _quarters((64, n), 17)
    want = np.zeros((8, 64))
    np.add.at(want, key[key >= 0], v[:, key >= 0].T)
    for threads in (1, 3):
        got = _run(kernel, threads, name != "w_sorted_ordered", key=key, v=v)
        np.testing.assert_array_equal(got.reshape(64, 8), want.T)


def test_wide_sum_keeping_an_axis_and_wide_at_reads():
    rows = 50
    v = _rand((64, rows, 4), 18)
    got = _run(kernels().w_kept, v=v)
    assert got.shape == (64, 4)
    np.testing.assert_allclose(got, v.sum(axis=1), rtol=1e-13, atol=1e-13)
    v = v.reshape(64, rows * 4)
    i = np.random.default_rng(19).integers(0, 200, size=200).astype(np.int32)
    got = _run(kernels().w_at, v=v, i=i)
    np.testing.assert_array_equal(got.reshape(64, 200), v[:, i] * 2.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float32_and_the_smallest_wide_payload_keep_the_scalar_bits(dtype):
    k = kernels()
    a = (_rand((9, 4000), 23) * 10.0 ** np.random.default_rng(24).integers(-5, 5, size=(9, 4000))).astype(dtype)
    out = _run(k.w_nine, 3, a=a)  # a vector cell comes back per entry: total_0 ... total_8
    for c in range(9):
        want = _run(k.s_sum_ordered, 3, x=np.ascontiguousarray(a[c]))
        assert out[f"total_{c}"].dtype == dtype
        assert out[f"total_{c}"].tobytes() == want.tobytes(), c
    np.testing.assert_array_equal(out["twice"].reshape(9, 4000), a * dtype(2.0) + dtype(1.0))
    a = (_rand((N, 2100), 25) * 100.0).astype(dtype)
    got = _run(k.w_sum_ordered, 3, a=a)
    for c in (0, 5, 1023):
        assert got[c].tobytes() == _run(k.s_sum_ordered, 3, x=np.ascontiguousarray(a[c])).tobytes(), c
