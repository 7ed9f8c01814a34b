"""Reductions over every lane: hawk.sum / mean / max / min, where=, f32 and f64, many lengths.

Every test that runs a kernel runs on each target of conftest.BT_TARGETS (the `target` fixture) with the same
expectations. max and min are exact, so another target also gives the host's bits.
"""

import numpy as np
import pytest
from conftest import bt_run_on, bt_run_same_bits, bt_sum_k, bt_sum_ulps

import eagle
import hawk
import hawk.math as m
from hawk import Index, Mutable, Param, Scalar

LENGTHS = [1, 2, 7, 33, 1000, 4097, 100_003]
DTYPES = [np.float64, np.float32]


@hawk.kernel
def r_totals(x: Scalar, total: Mutable[Scalar], avg: Mutable[Scalar]):
    total = hawk.sum(x)
    avg = hawk.mean(x)


@hawk.kernel
def r_top(x: Scalar, top: Mutable[Scalar]):
    top = hawk.max(x)


@hawk.kernel
def r_bottom(x: Scalar) -> Scalar:
    return hawk.min(x)


def _data(n, dtype, seed):
    return np.random.default_rng(seed).normal(0.5, 2.0, size=n).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", LENGTHS)
def test_sum_and_mean_over_all_lanes(target, n, dtype):
    x = _data(n, dtype, 7100 + n)
    out = bt_run_on(target, r_totals, x=x)
    assert sorted(out) == ["avg", "total"]
    for name in ("avg", "total"):
        assert out[name].shape == (1,)
        assert out[name].dtype == dtype
    k = bt_sum_k(n, dtype)
    assert bt_sum_ulps(out["total"][0], x) <= k
    # mean = sum / n: the same bound, scaled by 1/n, plus the final rounding
    assert bt_sum_ulps(float(out["avg"][0]) * n, x) <= k + 2.0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", LENGTHS)
def test_max_and_min_are_exact(target, n, dtype):
    x = _data(n, dtype, 7200 + n)
    hi = bt_run_same_bits(target, r_top, x=x)
    lo = bt_run_same_bits(target, r_bottom, x=x)
    assert hi.shape == (1,) and lo.shape == (1,)
    assert hi.dtype == dtype and lo.dtype == dtype
    assert hi[0] == x.max()
    assert lo[0] == x.min()


def test_max_of_all_negative_and_min_of_all_positive(target):
    rng = np.random.default_rng(7301)
    neg = -rng.uniform(1.0, 5.0, size=513)
    pos = rng.uniform(3.0, 9.0, size=513)
    assert bt_run_same_bits(target, r_top, x=neg)[0] == neg.max()
    assert bt_run_same_bits(target, r_bottom, x=pos)[0] == pos.min()


def test_max_min_with_infinities(target):
    x = np.random.default_rng(7302).normal(size=257)
    x[5] = np.inf
    x[200] = -np.inf
    assert bt_run_same_bits(target, r_top, x=x)[0] == np.inf
    assert bt_run_same_bits(target, r_bottom, x=x)[0] == -np.inf


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("where", [0, 17, 999])
def test_max_and_min_propagate_nan(target, where, dtype):
    x = _data(1000, dtype, 7303)
    x[where] = np.nan
    assert np.isnan(bt_run_same_bits(target, r_top, x=x)[0])
    assert np.isnan(bt_run_same_bits(target, r_bottom, x=x)[0])


def test_sum_propagates_nan(target):
    x = _data(100, np.float64, 7304)
    x[42] = np.nan
    out = bt_run_on(target, r_totals, x=x)
    assert np.isnan(out["total"][0]) and np.isnan(out["avg"][0])


def test_sum_returned_is_one_element_array(target):
    @hawk.kernel
    def r_ret_sum(x: Scalar) -> Scalar:
        return hawk.sum(x)

    x = _data(321, np.float64, 7305)
    got = bt_run_on(target, r_ret_sum, x=x)
    assert got.shape == (1,)
    assert bt_sum_ulps(got[0], x) <= bt_sum_k(321, np.float64)


# ---------------------------------------------------------------- where=


@hawk.kernel
def r_masked(x: Scalar, cut: Param, part: Mutable[Scalar], part_mean: Mutable[Scalar]):
    part = hawk.sum(x, where=x > cut)
    part_mean = hawk.mean(x, where=x > cut)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 9, 1000, 100_003])
def test_sum_and_mean_where(target, n, dtype):
    x = _data(n, dtype, 7400 + n)
    cut = 0.25
    out = bt_run_on(target, r_masked, x=x, cut=cut)
    sel = x[x > dtype(cut)]
    if sel.size == 0:
        assert out["part"][0] == 0.0
        assert np.isnan(out["part_mean"][0])
        return
    k = bt_sum_k(sel.size, dtype)
    assert bt_sum_ulps(out["part"][0], sel) <= k
    assert bt_sum_ulps(float(out["part_mean"][0]) * sel.size, sel) <= k + 2.0


def test_where_with_no_lanes_sum_zero_mean_nan(target):
    x = np.random.default_rng(7401).uniform(-1.0, 1.0, size=77)
    out = bt_run_on(target, r_masked, x=x, cut=5.0)
    assert out["part"][0] == 0.0
    assert np.isnan(out["part_mean"][0])


def test_where_with_every_lane(target):
    x = np.random.default_rng(7402).uniform(1.0, 2.0, size=91)
    out = bt_run_on(target, r_masked, x=x, cut=0.0)
    assert bt_sum_ulps(out["part"][0], x) <= bt_sum_k(91, np.float64)
    assert bt_sum_ulps(float(out["part_mean"][0]) * 91, x) <= bt_sum_k(91, np.float64) + 2.0


def test_where_mask_from_another_plane(target):
    @hawk.kernel
    def r_by_group(x: Scalar, grp: Index, g2: Mutable[Scalar]):
        g2 = hawk.sum(x * x, where=grp == 2)

    rng = np.random.default_rng(7403)
    x = rng.normal(size=1500)
    grp = rng.integers(0, 4, size=1500).astype(np.int32)
    got = bt_run_on(target, r_by_group, x=x, grp=grp)
    terms = (x * x)[grp == 2]
    assert bt_sum_ulps(got[0], terms) <= bt_sum_k(terms.size, np.float64)


def test_where_with_combined_mask(target):
    @hawk.kernel
    def r_band(x: Scalar, y: Scalar, s: Mutable[Scalar]):
        s = hawk.sum(x - y, where=m.land(x > -0.5, m.lnot(y > 0.5)))

    rng = np.random.default_rng(7404)
    x, y = rng.normal(size=(2, 999))
    got = bt_run_on(target, r_band, x=x, y=y)
    terms = (x - y)[(x > -0.5) & ~(y > 0.5)]
    assert bt_sum_ulps(got[0], terms) <= bt_sum_k(terms.size, np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_max_and_min_where(target, dtype):
    @hawk.kernel
    def r_top_neg(x: Scalar, t: Mutable[Scalar]):
        t = hawk.max(x, where=x < 0.0)

    @hawk.kernel
    def r_low_pos(x: Scalar) -> Scalar:
        return hawk.min(x, where=x > 0.0)

    x = _data(2049, dtype, 7405)
    assert bt_run_same_bits(target, r_top_neg, x=x)[0] == x[x < 0].max()
    assert bt_run_same_bits(target, r_low_pos, x=x)[0] == x[x > 0].min()
    # no lane selected: the identities
    pos = np.abs(x) + dtype(1.0)
    assert bt_run_same_bits(target, r_top_neg, x=pos)[0] == -np.inf
    assert bt_run_same_bits(target, r_low_pos, x=-pos)[0] == np.inf


def test_mean_of_an_expression_with_param(target):
    @hawk.kernel
    def r_scaled(x: Scalar, y: Scalar, a: Param, mu: Mutable[Scalar], tot: Mutable[Scalar]):
        mu = hawk.mean(a * x + y)
        tot = hawk.sum(x * y)

    rng = np.random.default_rng(7406)
    x, y = rng.normal(size=(2, 4321))
    out = bt_run_on(target, r_scaled, x=x, y=y, a=1.5)
    assert sorted(out) == ["mu", "tot"]
    terms = 1.5 * x + y
    assert bt_sum_ulps(float(out["mu"][0]) * terms.size, terms) <= bt_sum_k(terms.size, np.float64) + 2.0
    assert bt_sum_ulps(out["tot"][0], x * y) <= bt_sum_k(4321, np.float64)


def test_reduction_next_to_per_lane_output(target):
    @hawk.kernel
    def r_both(x: Scalar, y: Mutable[Scalar], s: Mutable[Scalar]):
        y = x * 2.0 + 1.0
        s = hawk.sum(x)

    x = np.random.default_rng(7407).normal(size=333)
    out = bt_run_on(target, r_both, x=x)
    np.testing.assert_array_equal(out["y"], x * 2.0 + 1.0)
    assert out["s"].shape == (1,)
    assert bt_sum_ulps(out["s"][0], x) <= bt_sum_k(333, np.float64)


def test_sum_of_large_cancelling_values_f64(target):
    rng = np.random.default_rng(7408)
    x = np.concatenate([rng.normal(0, 1e6, size=50_001), rng.normal(0, 1e-3, size=50_001)])
    rng.shuffle(x)
    out = bt_run_on(target, r_totals, x=x)
    assert bt_sum_ulps(out["total"][0], x) <= bt_sum_k(x.size, np.float64)


def test_reduce_outputs_are_eagle_arrays(target):
    x = _data(50, np.float64, 7409)
    out = eagle.deploy(r_top, target=target).run(x=x)
    assert isinstance(out, eagle.Array)
    out2 = eagle.deploy(r_totals, target=target).run(x=x)
    assert all(isinstance(v, eagle.Array) for v in out2.values())


def test_run_with_no_lanes_gives_the_identities(target):
    x = np.empty(0)
    out = bt_run_on(target, r_totals, x=x)
    assert out["total"].shape == (1,) and out["total"][0] == 0.0
    assert np.isnan(out["avg"][0])
    assert bt_run_same_bits(target, r_top, x=x)[0] == -np.inf
    assert bt_run_same_bits(target, r_bottom, x=x)[0] == np.inf


def test_nan_in_an_unselected_lane_is_ignored(target):
    @hawk.kernel
    def r_top_sel(x: Scalar, keep: Index, t: Mutable[Scalar]):
        t = hawk.max(x, where=keep == 1)

    x = _data(300, np.float64, 7410)
    keep = np.ones(300, dtype=np.int32)
    x[11] = np.nan
    keep[11] = 0
    assert bt_run_same_bits(target, r_top_sel, x=x, keep=keep)[0] == np.delete(x, 11).max()
    keep[11] = 1
    assert np.isnan(bt_run_same_bits(target, r_top_sel, x=x, keep=keep)[0])


# ---------------------------------------------------------------- no read past the last lane

PAST_THE_END_CHILD = """
import ctypes, mmap, sys
import numpy as np
import eagle, hawk
from hawk import Scalar, Mutable

@hawk.kernel
def r_edge(x: Scalar, a: Mutable[Scalar], c: Mutable[Scalar], o: Mutable[Scalar], m: Mutable[Scalar]):
    a = hawk.sum(x)
    c = hawk.sum(x, policy="compensated")
    o = hawk.sum(x, policy="ordered")
    m = hawk.mean(x * 2.0, policy="compensated")

def guarded(n, dtype):
    # n elements that end exactly where a PROT_NONE page starts: a read past the last lane faults
    page = mmap.PAGESIZE
    nbytes = n * np.dtype(dtype).itemsize
    body = -(-nbytes // page) * page
    region = mmap.mmap(-1, body + page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(base + body, page, 0) == 0
    return np.frombuffer(region, dtype=dtype, count=n, offset=body - nbytes), region

for dtype in (np.float64, np.float32):
    for n in (1, 7, 1025, 4097, 100_003):
        x, keep = guarded(n, dtype)
        x[:] = np.random.default_rng(n).normal(size=n)
        print(dtype.__name__, n, flush=True)
        out = eagle.deploy(r_edge, target=TARGET).run(x=x)
        assert np.isclose(float(np.asarray(out["c"])[0]), float(x.astype(np.float64).sum()), rtol=1e-4, atol=1e-4)
        if TARGET == "host":  # in small chunks too (the last one ends at the last lane): the same ordered bits
            plan = eagle.deploy(r_edge, target=TARGET, threads=3, min_chunk=1024)
            split = plan.run(x=x)
            assert n < 4096 or plan.last_chunks[0] > 1, plan.last_chunks
            assert np.asarray(split["o"]).tobytes() == np.asarray(out["o"]).tobytes(), n
print("OK")
"""


def test_reductions_read_no_lane_past_the_last(target, tmp_path):
    """A reduction reads lanes 0 .. n-1 of its planes and nothing after them: planes that end right where a
    PROT_NONE page starts run. A child process, so that a fault fails this test only."""
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("needs mprotect through ctypes (Linux)")
    script = tmp_path / "edge.py"  # a file, so that hawk can read the kernel's source
    script.write_text(PAST_THE_END_CHILD.replace("TARGET", repr(target)))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    last = r.stdout.strip().splitlines()[-1:] or [""]
    assert r.returncode == 0 and last == ["OK"], (
        f"exit {r.returncode} (a negative exit is the signal) after {last[0]!r}: the run read past the planes' end"
        f"\n{r.stderr[-1500:]}")
