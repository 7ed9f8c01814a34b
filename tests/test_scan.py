"""hawk.scan: running totals over lanes against NumPy, with the bits contract of docs/semantics.md ("Scans"):
np.cumsum's bits up to SCAN_BLOCK lanes, the same bits at every thread count (forced small chunks) and on every
target, exact integer scans, min/max with np.minimum's NaN rule, segmented scans (reset=) against a Python loop."""

import numpy as np
import pytest
from conftest import bt_run, bt_run_on, bt_target_missing

import eagle
import hawk
import hawk.math as m
from hawk import Index, Mutable, Scalar
from hawk.abi.layout import SCAN_BLOCK


@hawk.kernel
def inclusive(x: Scalar, y: Mutable[Scalar]):
    y = hawk.scan(x)


@hawk.kernel
def exclusive(x: Scalar, y: Mutable[Scalar]):
    y = hawk.scan(x, exclusive=True)


@hawk.kernel
def running_min(x: Scalar, y: Mutable[Scalar]):
    y = hawk.scan(x, op=m.min)


@hawk.kernel
def running_max(x: Scalar, y: Mutable[Scalar]):
    y = hawk.scan(x, op=m.max)


@hawk.kernel
def running_prod(x: Scalar, y: Mutable[Scalar], z: Mutable[Scalar], r: Mutable[Scalar]):
    y = hawk.scan(x, op=m.mul)
    z = hawk.scan(x, op=m.mul, exclusive=True)
    r = hawk.scan(x, op=m.mul, reverse=True)


@hawk.kernel
def prod_segments(x: Scalar, start: Scalar, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = hawk.scan(x, op=m.mul, reset=start > 0.5)
    z = hawk.scan(x, op=m.mul, reset=start > 0.5, exclusive=True, reverse=True)


@hawk.kernel
def int_prod(k: Index, y: Mutable[Index]):
    y = hawk.scan(k * 1000003 + 1, op=m.mul)  # int64 arithmetic, wrapping


@hawk.kernel
def int_counts(k: Index, y: Mutable[Scalar]):
    c = hawk.scan(k * 1000003)  # int64 arithmetic, wrapping
    y = m.to_float(c % 1000)


@hawk.kernel
def segmented(x: Scalar, start: Scalar, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = hawk.scan(x, reset=start > 0.5)
    z = hawk.scan(x, reset=start > 0.5, exclusive=True)


@hawk.kernel
def positions(x: Scalar, out: Mutable[Scalar]):
    keep = x > 0.0
    out = m.to_float(hawk.scan(keep, exclusive=True))  # where each kept lane lands when compacted


@hawk.kernel
def centred(x: Scalar, y: Mutable[Scalar]):
    y = hawk.scan(x - hawk.mean(x))  # a scan of a value that needs a total first: three stages


def _ref_scan(x: np.ndarray, op, reset=None, excl=False, ident=0.0) -> np.ndarray:
    out = np.empty_like(x)
    run = None
    for i, v in enumerate(x):
        fresh = run is None or (reset is not None and reset[i])
        before = ident if fresh else run
        run = v if fresh else op(run, v)
        out[i] = before if excl else run
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 7, 1000, SCAN_BLOCK])
def test_inclusive_matches_cumsum_bitwise(n, dtype):
    x = np.random.default_rng(n).standard_normal(n).astype(dtype)
    y = bt_run(inclusive, x=x)
    assert y.dtype == dtype
    assert y.tobytes() == np.cumsum(x, dtype=dtype).tobytes()


def test_negative_zero_first_lane_keeps_its_sign():
    x = np.array([-0.0, -0.0, 1.0])
    assert bt_run(inclusive, x=x).tobytes() == np.cumsum(x).tobytes()


def test_large_run_follows_the_block_contract():
    """Beyond SCAN_BLOCK lanes: each block starts from the in-order fold of the earlier blocks' totals."""
    n = 3 * SCAN_BLOCK + 123
    x = np.random.default_rng(1).standard_normal(n)
    blocks = [x[i:i + SCAN_BLOCK] for i in range(0, n, SCAN_BLOCK)]
    want, off = [], -0.0
    for b in blocks:
        want.append(np.cumsum(np.concatenate([[off], b]))[1:])
        off = off + np.cumsum(b)[-1]
    want = np.concatenate(want)
    y = bt_run(inclusive, x=x)
    assert y.tobytes() == want.tobytes()
    assert np.allclose(y, np.cumsum(x), rtol=1e-9, atol=1e-9)


def test_exclusive_shifts_and_starts_from_the_identity():
    x = np.random.default_rng(2).standard_normal(2 * SCAN_BLOCK + 5)
    y = bt_run(exclusive, x=x)
    inc = bt_run(inclusive, x=x)
    assert y[0] == 0.0 and np.signbit(y[0])  # the identity of add is -0.0
    inner = np.arange(1, x.size) % SCAN_BLOCK != 0
    assert y[1:][inner].tobytes() == inc[:-1][inner].tobytes()
    off = -0.0  # a block's first lane holds its offset: the in-order fold of the earlier blocks' totals
    for b in range(1, 3):
        off = off + np.cumsum(x[(b - 1) * SCAN_BLOCK:b * SCAN_BLOCK])[-1]
        assert y[b * SCAN_BLOCK] == off


@pytest.mark.parametrize("kernel,ufunc", [(running_min, np.minimum), (running_max, np.maximum)])
def test_min_max_match_accumulate_with_nans_and_zeros(kernel, ufunc):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(3 * SCAN_BLOCK + 17)
    x[rng.integers(0, x.size, 40)] = 0.0
    x[rng.integers(0, x.size, 40)] = -0.0
    assert bt_run(kernel, x=x).tobytes() == ufunc.accumulate(x).tobytes()
    x[5000] = np.nan
    assert bt_run(kernel, x=x).tobytes() == ufunc.accumulate(x).tobytes()


def _near_one(n: int, seed: int) -> np.ndarray:
    """Factors whose running product stays finite and normal over a few thousand lanes."""
    return 1.0 + 0.01 * np.random.default_rng(seed).standard_normal(n)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 7, SCAN_BLOCK])
def test_running_product_matches_cumprod_bitwise(n, dtype):
    x = _near_one(n, n).astype(dtype)
    x[n // 2] = -0.0
    out = bt_run(running_prod, x=x)
    assert out["y"].dtype == dtype
    assert out["y"].tobytes() == np.cumprod(x, dtype=dtype).tobytes()
    assert out["z"].tobytes() == np.concatenate([[1.0], np.cumprod(x)[:-1]]).astype(dtype).tobytes()
    assert out["r"].tobytes() == np.cumprod(x[::-1], dtype=dtype)[::-1].tobytes()


def test_running_product_follows_the_block_contract():
    """Beyond SCAN_BLOCK lanes: each block's lanes multiply, in lane order, onto the in-order product of the
    earlier blocks' totals (each from 1.0); a reverse scan is one fold from the last lane down, at any size."""
    n = 3 * SCAN_BLOCK + 123
    x = _near_one(n, 1)
    x[5] = np.nan
    x[SCAN_BLOCK + 9], x[2 * SCAN_BLOCK + 1] = np.inf, 0.0
    want, off = [], 1.0
    with np.errstate(invalid="ignore"):  # (0 * inf)
        for i in range(0, n, SCAN_BLOCK):
            b = x[i:i + SCAN_BLOCK]
            want.append(np.cumprod(np.concatenate([[off], b]))[1:])
            off = off * np.cumprod(b)[-1]
        down = np.cumprod(x[::-1])[::-1]
    out = bt_run(running_prod, x=x)
    assert out["y"].tobytes() == np.concatenate(want).tobytes()
    assert out["r"].tobytes() == down.tobytes()
    x = _near_one(n, 2)
    np.testing.assert_allclose(bt_run(running_prod, x=x)["y"], np.cumprod(x), rtol=1e-12)


def test_running_product_segments_against_a_python_loop():
    x = _near_one(1000, 3)
    f = np.zeros(1000, bool)
    f[[0, 10, 500, 999]] = True
    out = bt_run(prod_segments, x=x, start=f.astype(np.float64))
    assert out["y"].tobytes() == _ref_scan(x, np.multiply, f, ident=1.0).tobytes()
    down = np.roll(f, -1)  # run down, the lane below a segment's first starts afresh
    down[-1] = False
    want = _ref_scan(x[::-1], np.multiply, down[::-1], excl=True, ident=1.0)[::-1]
    assert out["z"].tobytes() == want.tobytes()


def test_integer_running_product_wraps():
    k = np.random.default_rng(4).integers(-(2 ** 31), 2 ** 31 - 1, 2 * SCAN_BLOCK + 99)
    want = np.cumprod(k * 1000003 + 1)  # (NumPy's int64 wraps too)
    assert np.array_equal(bt_run(int_prod, k=k), want)
    if not bt_target_missing("spirv"):
        assert np.array_equal(bt_run_on("spirv", int_prod, k=k), want)


@pytest.mark.parametrize("kdt", [np.int32, np.int64])
def test_integer_scan_is_exact_and_wraps(kdt):
    rng = np.random.default_rng(4)
    k = rng.integers(-(2 ** 31), 2 ** 31 - 1, 2 * SCAN_BLOCK + 99).astype(kdt)
    with np.errstate(over="ignore"):
        want = (np.cumsum(k.astype(np.int64) * 1000003) % 1000).astype(np.float64)
    assert np.array_equal(bt_run(int_counts, k=k, y=np.zeros(k.size)), want)


def test_bool_scan_counts_kept_lanes():
    x = np.random.default_rng(5).standard_normal(SCAN_BLOCK + 300)
    want = np.concatenate([[0], np.cumsum(x > 0.0)[:-1]]).astype(np.float64)
    assert np.array_equal(bt_run(positions, x=x), want)


def test_segmented_against_a_python_loop():
    rng = np.random.default_rng(6)
    n = 2 * SCAN_BLOCK + 77
    x = rng.standard_normal(n)
    start = (rng.random(n) < 0.001).astype(np.float64)
    start[SCAN_BLOCK + 3] = 1.0
    out = bt_run(segmented, x=x, start=start)
    flags = start > 0.5
    # lanes before the first reset run from the blocks' offsets (the block contract); after it, lane by lane
    first = int(np.argmax(flags))
    inc = _ref_scan(x, np.add, flags, ident=-0.0)
    exc = _ref_scan(x, np.add, flags, excl=True, ident=-0.0)
    assert out["y"][first:].tobytes() == inc[first:].tobytes()
    assert out["z"][first:].tobytes() == exc[first:].tobytes()
    assert np.allclose(out["y"][:first], np.cumsum(x[:first]), rtol=1e-12, atol=1e-12)
    small = x[:1000]
    f = flags[:1000].copy()
    f[[10, 500]] = True
    out = bt_run(segmented, x=small, start=f.astype(np.float64))
    assert out["y"].tobytes() == _ref_scan(small, np.add, f, ident=-0.0).tobytes()
    assert out["z"].tobytes() == _ref_scan(small, np.add, f, excl=True, ident=-0.0).tobytes()


def test_scan_after_a_total():
    x = np.random.default_rng(7).standard_normal(5000)
    y = bt_run(centred, x=x)
    assert np.allclose(y, np.cumsum(x - x.mean()), atol=1e-9)


@pytest.mark.parametrize("kernel", [inclusive, segmented, int_counts, running_min, running_prod, prod_segments])
def test_same_bits_at_every_thread_count(kernel):
    rng = np.random.default_rng(8)
    n = 9 * SCAN_BLOCK + 5
    planes = {"x": 1.0 + 0.01 * rng.standard_normal(n), "start": (rng.random(n) < 0.0005).astype(np.float64),
              "k": rng.integers(0, 1 << 20, n).astype(np.int32), "y": np.zeros(n)}
    names = {p.name for p in kernel.signature.planes}
    planes = {k: v for k, v in planes.items() if k in names}
    results = []
    for t in (1, 2, 3, 4):
        plan = eagle.deploy(kernel, threads=t, min_chunk=SCAN_BLOCK)
        out = plan.run(**{k: v.copy() for k, v in planes.items()})
        if t > 1:
            assert max(plan.last_chunks) > 1, f"threads={t}: ran {plan.last_chunks} chunk(s)"
        out = out if isinstance(out, dict) else {"y": out}
        results.append({k: np.asarray(v).tobytes() for k, v in out.items()})
    assert all(r == results[0] for r in results[1:])


@pytest.mark.parametrize("kernel", [inclusive, exclusive, segmented, int_counts, running_max, running_prod,
                                    prod_segments])
def test_spirv_gives_the_hosts_bits(kernel):
    why = bt_target_missing("spirv")
    if why:
        pytest.skip(why)
    rng = np.random.default_rng(9)
    n = 5 * SCAN_BLOCK + 33
    planes = {"x": 1.0 + 0.01 * rng.standard_normal(n), "start": (rng.random(n) < 0.0005).astype(np.float64),
              "k": rng.integers(0, 1 << 20, n).astype(np.int32), "y": np.zeros(n)}
    names = {p.name for p in kernel.signature.planes}
    planes = {k: v for k, v in planes.items() if k in names}
    host = bt_run(kernel, **{k: v.copy() for k, v in planes.items()})
    dev = bt_run_on("spirv", kernel, **{k: v.copy() for k, v in planes.items()})
    host = host if isinstance(host, dict) else {"y": host}
    dev = dev if isinstance(dev, dict) else {"y": dev}
    for name in host:
        assert host[name].tobytes() == dev[name].tobytes(), name
    _spirv_val(kernel, "float64")


def _spirv_val(kernel, dtype: str) -> None:
    """spirv-val (Vulkan 1.2) accepts every stage's binary."""
    import shutil

    from hawk.targets.spirv import SpirvTarget

    if shutil.which("spirv-val") is None:
        pytest.skip("spirv-val is missing (apt-get install spirv-tools)")
    spec = kernel.spec_for(dtype, {})
    for k in range(len(kernel.stages(spec))):
        SpirvTarget().check(SpirvTarget().compile(kernel.lowered_gpu(spec, k).gpu_module))


def test_spirv_float32_gives_the_hosts_bits():
    why = bt_target_missing("spirv")
    if why:
        pytest.skip(why)
    x = np.random.default_rng(15).standard_normal(4 * SCAN_BLOCK + 3).astype(np.float32)
    dev = bt_run_on("spirv", inclusive, x=x)
    assert dev.dtype == np.float32
    assert dev.tobytes() == bt_run(inclusive, x=x).tobytes()
    assert dev[:SCAN_BLOCK].tobytes() == np.cumsum(x[:SCAN_BLOCK]).tobytes()
    _spirv_val(inclusive, "float32")


@hawk.kernel
def grid_scan(g: hawk.Grid["row", "col":50], x: Scalar, y: Mutable[Scalar]):
    y = hawk.scan(x)  # in the grid's flat (row-major) lane order


@hawk.kernel
def scan_beside_sums(x: Scalar, y: Mutable[Scalar], t: Mutable[Scalar], u: Mutable[Scalar]):
    s = hawk.scan(x, op=m.max)
    t = hawk.sum(s, policy="compensated")  # blocked chains in the stage that applies the scan
    u = hawk.sum(x, policy="compensated")  # ... and in the stage that writes its block totals
    y = s


@hawk.kernel
def scan_keys(x: Scalar, bins: Mutable["slot":64]):
    k = hawk.scan(x > 0.0, exclusive=True)  # a running count as a scatter key
    hawk.scatter(bins)[k % 64] += x


@pytest.mark.parametrize("threads", [1, 3])
def test_grid_scan_in_flat_order(threads):
    x = np.random.default_rng(10).standard_normal((301, 50))
    y = np.asarray(eagle.deploy(grid_scan, threads=threads, min_chunk=SCAN_BLOCK).run(x=x))
    flat = x.ravel()
    assert y.ravel()[:SCAN_BLOCK].tobytes() == np.cumsum(flat[:SCAN_BLOCK]).tobytes()
    assert np.allclose(y.ravel(), np.cumsum(flat), atol=1e-9)


def test_scan_beside_compensated_sums():
    x = np.random.default_rng(11).standard_normal(3 * SCAN_BLOCK + 1)
    out = bt_run(scan_beside_sums, x=x)
    run = np.maximum.accumulate(x)
    assert out["y"].tobytes() == run.tobytes()
    assert np.isclose(out["t"][0], run.sum(), rtol=1e-12) and np.isclose(out["u"][0], x.sum(), rtol=1e-12)


def test_scan_as_scatter_key():
    x = np.random.default_rng(12).standard_normal(2 * SCAN_BLOCK + 9)
    k = np.concatenate([[0], np.cumsum(x > 0.0)[:-1]]) % 64
    want = np.zeros(64)
    np.add.at(want, k, x)
    assert np.allclose(bt_run(scan_keys, x=x), want, atol=1e-12)


def _refusal(src_line: str, fn) -> hawk.KernelError:
    with pytest.raises(hawk.KernelError) as exc:
        hawk.kernel(fn)
    msg = str(exc.value)
    lines = [i for i, ln in enumerate(open(__file__).read().splitlines(), 1) if src_line in ln]
    assert f"{__file__.rsplit('/', 1)[-1]}:{lines[0]}:" in msg, msg
    return exc.value


def test_scan_under_if_is_refused_at_its_line():
    def k(x: Scalar, y: Mutable[Scalar]):
        y = x
        if x > 0.0:
            y = hawk.scan(x)  # @scan_in_if

    msg = str(_refusal("# @scan_in_if", k))
    assert "may not sit inside an if" in msg and "hoist" in msg and "'k'" in msg


def test_scan_in_for_is_refused_at_its_line():
    def k(x: Scalar, y: Mutable[Scalar]):
        y = x
        for _ in range(3):
            y = y + hawk.scan(x)  # @scan_in_for

    assert "inside a for loop" in str(_refusal("# @scan_in_for", k))


def test_scan_with_another_operator_is_refused():
    def k(x: Scalar, y: Mutable[Scalar]):
        y = hawk.scan(x, op=m.pow)  # @scan_pow

    msg = str(_refusal("# @scan_pow", k))
    assert "m.add" in msg and "m.min" in msg and "m.max" in msg and "m.mul" in msg


def test_scan_of_a_vector_and_bad_keywords_are_refused():
    def k(x: hawk.Vector[3], y: Mutable[Scalar]):
        y = hawk.scan(x)  # @scan_vec

    assert "one number per lane" in str(_refusal("# @scan_vec", k))

    def k2(x: Scalar, y: Mutable[Scalar]):
        y = hawk.scan(x, where=x > 0.0)  # @scan_where

    assert "not where=" in str(_refusal("# @scan_where", k2))

    def k3(x: Scalar, y: Mutable[Scalar]):
        y = hawk.scan(x, reset=x)  # @scan_reset_float

    assert "reset= takes one truth value" in str(_refusal("# @scan_reset_float", k3))


def test_scan_inside_a_func_is_refused():
    @hawk.func
    def running(v):
        return hawk.scan(v)  # @scan_in_func

    def k(x: Scalar, y: Mutable[Scalar]):
        y = running(x)

    assert "inside a func" in str(_refusal("# @scan_in_func", k))


@pytest.mark.parametrize("kernel", [segmented, prod_segments])
def test_bundle_artifact_gives_the_same_bits(tmp_path, kernel):
    import hawk.artifact

    hawk.artifact.build_bundle([kernel], tmp_path, targets=("host",))
    rng = np.random.default_rng(13)
    n = 3 * SCAN_BLOCK + 7
    planes = {"x": 1.0 + 0.01 * rng.standard_normal(n), "start": (rng.random(n) < 0.001).astype(np.float64)}
    got = hawk.run(hawk.load(tmp_path, kernel.name), **planes)
    want = bt_run(kernel, **planes)
    for name in ("y", "z"):
        assert np.asarray(got[name]).tobytes() == want[name].tobytes()


def test_no_lanes_and_one_lane():
    assert bt_run(inclusive, x=np.zeros(0)).shape == (0,)
    assert bt_run(exclusive, x=np.array([2.5])).tobytes() == np.array([-0.0]).tobytes()


def test_bound_launches_and_reruns_repeat_the_bits():
    rng = np.random.default_rng(14)
    n = 3 * SCAN_BLOCK + 5
    planes = {"x": rng.standard_normal(n), "start": (rng.random(n) < 0.001).astype(np.float64)}
    want = bt_run(segmented, **planes)
    bound = eagle.deploy(segmented, threads=2, min_chunk=SCAN_BLOCK).bind(**planes)
    plan = eagle.deploy(segmented, threads=2, min_chunk=SCAN_BLOCK)
    for _ in range(3):  # the block totals' buffer is rewritten, and turned into offsets again, every launch
        for out in (bound.launch(), plan.run(**planes)):
            assert all(np.asarray(out[k]).tobytes() == want[k].tobytes() for k in ("y", "z"))


@hawk.kernel
def cdf(x: Scalar, y: Mutable[Scalar]):
    c = hawk.scan(x * x)
    y = c / hawk.sum(x * x)  # the scan is applied in two later stages: under the sum, and for the division


@hawk.kernel
def scan_of_scan(k: Index, y: Mutable[Index]):
    y = hawk.scan(hawk.scan(k), exclusive=True)


def test_scan_read_in_two_later_stages():
    x = np.random.default_rng(16).standard_normal(2 * SCAN_BLOCK + 11)
    y = bt_run(cdf, x=x)
    c = bt_run(inclusive, x=x * x)
    assert np.allclose(y, c / np.sum(x * x), rtol=1e-12) and y[-1] == pytest.approx(1.0, rel=1e-12)


def test_scan_of_a_scan_is_exact_for_integers():
    k = np.random.default_rng(17).integers(-1000, 1000, 3 * SCAN_BLOCK + 2).astype(np.int64)
    once = np.cumsum(k)
    want = np.concatenate([[0], np.cumsum(once)[:-1]])
    got = np.asarray(eagle.deploy(scan_of_scan, threads=2, min_chunk=SCAN_BLOCK).run(k=k))
    assert got.dtype == np.int64 and np.array_equal(got, want)


@hawk.kernel
def ordered_sum_of_scan(x: Scalar, t: Mutable[Scalar]):
    t = hawk.sum(hawk.scan(x), policy="ordered")  # exact; a block whose chains lose a bit must not rerun the scan


def test_ordered_sum_of_a_scan_is_exact():
    import math

    rng = np.random.default_rng(0)
    n = 3 * SCAN_BLOCK + 5
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-20, 20, n)  # chains lose bits: blocks are redone
    t = bt_run(ordered_sum_of_scan, x=x)
    assert t[0] == math.fsum(bt_run(inclusive, x=x))
