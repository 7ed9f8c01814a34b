"""hawk.scatter: add (+=) and store (=) by key into a named-axis sink.

Every test that runs a kernel runs on each target of conftest.BT_TARGETS (the `target` fixture) with the same
expectations.
"""

import numpy as np
import pytest
from conftest import bt_close, bt_run_on, bt_sum_ulps

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Scalar, Sorted, Vector


@hawk.kernel
def s_hist16(x: Scalar, counts: Mutable["bin":16]):
    hawk.scatter(counts)[m.index(x * 16.0, 16)] += 1.0


@hawk.kernel
def s_by_key(key: Index, x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc)[key] += x


@hawk.kernel
def s_by_sorted_key(key: Sorted[Index], x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc)[key] += x


# ------------------------------------------------------------------ histograms


@pytest.mark.parametrize("n", [1, 13, 1000, 100_003])
def test_histogram_matches_numpy_exactly(target, n):
    u = np.random.default_rng(9200 + n).uniform(size=n)
    got = bt_run_on(target, s_hist16, x=u)
    assert got.shape == (16,) and got.dtype == np.float64
    want = np.histogram(u, bins=16, range=(0.0, 1.0))[0]
    np.testing.assert_array_equal(got, want.astype(np.float64))


def test_histogram_f32(target):
    u = np.random.default_rng(9201).uniform(size=20_000).astype(np.float32)
    got = bt_run_on(target, s_hist16, x=u)
    assert got.dtype == np.float32
    want = np.bincount(np.clip(np.floor(u * np.float32(16.0)), 0, 15).astype(int), minlength=16)
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_histogram_clamps_out_of_range_values_to_edges(target):
    @hawk.kernel
    def s_hist10(x: Scalar, counts: Mutable["bin":10]):
        hawk.scatter(counts)[m.index(x * 10.0, 10)] += 1.0

    x = np.random.default_rng(9202).uniform(-0.5, 1.5, size=5000)
    got = bt_run_on(target, s_hist10, x=x)
    want = np.bincount(np.clip(np.floor(x * 10.0), 0, 9).astype(int), minlength=10)
    np.testing.assert_array_equal(got, want.astype(np.float64))


def test_passed_sink_keeps_contents_and_is_written_in_place(target):
    u = np.random.default_rng(9203).uniform(size=3000)
    start = np.arange(16, dtype=np.float64) * 10.0
    sink = start.copy()
    got = bt_run_on(target, s_hist16, x=u, counts=sink)
    want = start + np.histogram(u, bins=16, range=(0.0, 1.0))[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(sink, want)  # modified in place


def test_omitted_sink_starts_at_zero_every_run(target):
    u = np.random.default_rng(9204).uniform(size=800)
    plan = eagle.deploy(s_hist16, target=target)
    first = np.asarray(plan.run(x=u)).copy()
    second = np.asarray(plan.run(x=u))
    want = np.histogram(u, bins=16, range=(0.0, 1.0))[0].astype(np.float64)
    np.testing.assert_array_equal(first, want)
    np.testing.assert_array_equal(second, want)


# ------------------------------------------------------------------ Index keys


@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n", [1, 7, 2500, 100_003])
def test_add_by_index_plane_matches_bincount(target, n, itype):
    rng = np.random.default_rng(9205 + n)
    key = rng.integers(0, 7, size=n).astype(itype)
    x = rng.normal(size=n)
    got = bt_run_on(target, s_by_key, key=key, x=x)
    assert got.shape == (7,)
    for s in range(7):
        terms = x[key == s]
        assert bt_sum_ulps(got[s], terms if terms.size else np.zeros(1)) <= 1e-12 / np.finfo(float).eps


def test_add_by_index_is_compensated_by_default(target):
    # policy="auto" on a scatter is the compensated form: within 1 eps * sum(|term|) of the exact sum
    rng = np.random.default_rng(9206)
    n = 100_003
    key = rng.integers(0, 7, size=n).astype(np.int32)
    x = rng.normal(1.0, 1.0, size=n) * 10.0 ** rng.integers(-6, 7, size=n)
    got = bt_run_on(target, s_by_key, key=key, x=x)
    for s in range(7):
        assert bt_sum_ulps(got[s], x[key == s]) <= 1.0


def test_add_by_index_f32(target):
    rng = np.random.default_rng(9207)
    key = rng.integers(0, 7, size=4000).astype(np.int32)
    x = rng.normal(size=4000).astype(np.float32)
    got = bt_run_on(target, s_by_key, key=key, x=x)
    assert got.dtype == np.float32
    for s in range(7):
        assert bt_sum_ulps(got[s], x[key == s]) <= 4.0 + 2.0 * np.sqrt(4000)


def test_add_with_constant_int_key(target):
    @hawk.kernel
    def s_const(x: Scalar, acc: Mutable["slot":4]):
        hawk.scatter(acc)[2] += x
        hawk.scatter(acc)[0] += 1.0

    x = np.random.default_rng(9208).normal(size=999)
    got = bt_run_on(target, s_const, x=x)
    assert got[0] == 999.0 and got[1] == 0.0 and got[3] == 0.0
    assert bt_sum_ulps(got[2], x) <= 1e-12 / np.finfo(float).eps


def test_store_by_index_permutation(target):
    @hawk.kernel
    def s_put(key: Index, x: Scalar, buf: Mutable["slot":9]):
        hawk.scatter(buf)[key] = x * 2.0

    perm = np.random.default_rng(9209).permutation(9).astype(np.int32)
    x = np.linspace(-4.0, 4.0, 9)
    got = bt_run_on(target, s_put, key=perm, x=x)
    want = np.zeros(9)
    want[perm] = x * 2.0
    np.testing.assert_array_equal(got, want)


def test_store_into_passed_sink_keeps_untouched_slots(target):
    @hawk.kernel
    def s_put_some(key: Index, x: Scalar, buf: Mutable["slot":10]):
        hawk.scatter(buf)[key] = x

    key = np.array([7, 1, 4], dtype=np.int64)
    x = np.array([0.5, -1.5, 2.5])
    buf = np.full(10, -9.0)
    got = bt_run_on(target, s_put_some, key=key, x=x, buf=buf)
    want = np.full(10, -9.0)
    want[key] = x
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(buf, want)


@hawk.kernel
def s_last(key: Index, x: Scalar, buf: Mutable["slot":50]):
    hawk.scatter(buf)[key] = x + 1.0


@hawk.kernel
def s_last_pair(key: Index, v: Vector[2], buf: Mutable["slot":50]):
    hawk.scatter(buf)[(key * 3) % 50] = v


def _last_writer(prior, keys, values):
    """Each slot keeps the value of the last lane (in lane order) that stored into it."""
    out = np.array(prior, copy=True)
    for i, k in enumerate(keys.tolist()):
        out[..., k] = values[..., i]
    return out


@pytest.mark.parametrize("n", [1, 999, 50_001])
def test_store_keeps_the_last_lanes_value_at_every_thread_count(target, n):
    # a store-only sink is stored into per chunk (a private copy and marks); the last chunk that stored a slot
    # gives it: the same as storing lane by lane, whatever the chunks
    rng = np.random.default_rng(9230 + n)
    key = rng.integers(0, 45, size=n).astype(np.int32)  # slots 45..49 are never stored: they keep the prior
    x = rng.normal(size=n)
    prior = np.linspace(-3.0, 3.0, 50)
    want = _last_writer(prior, key, x + 1.0)
    for threads in (1, 2, 3):
        buf = prior.copy()
        plan = eagle.deploy(s_last, target=target, threads=threads, min_chunk=1024)  # small chunks: a real split
        got = np.asarray(plan.run(key=key, x=x, buf=buf))
        assert threads == 1 or n < 2048 or max(plan.last_chunks) > 1, plan.last_chunks
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(buf, want)
    v = rng.normal(size=(2, n))
    got = bt_run_on(target, s_last_pair, key=key, v=v)
    np.testing.assert_array_equal(got, _last_writer(np.zeros((2, 50)), (key * 3) % 50, v))


def test_store_and_add_into_one_sink_in_lane_order(target):
    @hawk.kernel
    def s_mixed(key: Index, x: Scalar, buf: Mutable["slot":4]):
        hawk.scatter(buf)[key] = x
        hawk.scatter(buf, policy="plain")[key] += x * 0.5

    # lane by lane: store, then add; a later lane's store replaces what came before
    x = np.array([1.0, 2.0, 4.0, 8.0])
    key = np.array([0, 0, 1, 0], dtype=np.int32)
    buf = np.full(4, 100.0)
    np.testing.assert_array_equal(bt_run_on(target, s_mixed, key=key, x=x, buf=buf), [12.0, 6.0, 100.0, 100.0])


# ------------------------------------------------------------------ tuple keys into a 2-D sink


@hawk.kernel
def s_pairs(r: Index, c: Index, w: Scalar, tab: Mutable["ra":3, "ca":5]):
    hawk.scatter(tab)[r, c] += w


@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_tuple_key_into_2d_sink(target, itype):
    rng = np.random.default_rng(9210)
    n = 6000
    r = rng.integers(0, 3, size=n).astype(itype)
    c = rng.integers(0, 5, size=n).astype(itype)
    w = rng.uniform(size=n)
    got = bt_run_on(target, s_pairs, r=r, c=c, w=w)
    assert got.shape == (3, 5)
    want = np.zeros((3, 5))
    np.add.at(want, (r, c), w)
    bt_close(got, want, rtol=1e-12)


def test_tuple_key_with_constant_and_computed_coordinates(target):
    @hawk.kernel
    def s_mixed(x: Scalar, tab: Mutable["ra":2, "ca":4]):
        hawk.scatter(tab)[1, m.index(x * 4.0, 4)] += x
        hawk.scatter(tab)[0, 3] += 1.0

    x = np.random.default_rng(9211).uniform(size=700)
    got = bt_run_on(target, s_mixed, x=x)
    want = np.zeros((2, 4))
    np.add.at(want[1], np.clip(np.floor(x * 4.0), 0, 3).astype(int), x)
    want[0, 3] = 700.0
    bt_close(got, want, rtol=1e-12)


def test_tuple_key_store_passed_2d_sink(target):
    @hawk.kernel
    def s_place(r: Index, c: Index, w: Scalar, tab: Mutable["ra":3, "ca":5]):
        hawk.scatter(tab)[r, c] = w

    cells = np.random.default_rng(9212).permutation(15)[:8]
    r, c = (cells // 5).astype(np.int32), (cells % 5).astype(np.int32)
    w = np.arange(8.0) + 0.25
    tab = np.full((3, 5), 3.0)
    got = bt_run_on(target, s_place, r=r, c=c, w=w, tab=tab)
    want = np.full((3, 5), 3.0)
    want[r, c] = w
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(tab, want)


def test_scatter_by_grid_coordinate(target):
    @hawk.kernel
    def s_rowsum(lane: Grid["row", "col":7], x: Scalar, acc: Mutable["bucket":5]):
        hawk.scatter(acc)[lane.row] += x

    x = np.random.default_rng(9213).normal(size=(5, 7))
    got = bt_run_on(target, s_rowsum, x=x, row=5)
    bt_close(got, x.sum(axis=1), rtol=1e-12)


# ------------------------------------------------------------------ scatter in a for


def test_scatter_in_a_for_over_range(target):
    @hawk.kernel
    def s_spread(key: Index, x: Scalar, acc: Mutable["cell":9]):
        for k in range(3):
            hawk.scatter(acc)[(key + k) % 9] += x * (k + 1.0)

    rng = np.random.default_rng(9214)
    key = rng.integers(0, 9, size=1200).astype(np.int32)
    x = rng.normal(size=1200)
    got = bt_run_on(target, s_spread, key=key, x=x)
    want = np.zeros(9)
    for k in range(3):
        np.add.at(want, (key + k) % 9, x * (k + 1.0))
    bt_close(got, want, rtol=1e-12)


# ------------------------------------------------------------------ Sorted[Index]


@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n", [1, 50, 30_001])
def test_sorted_index_equals_unsorted(target, n, itype):
    rng = np.random.default_rng(9215 + n)
    key = np.sort(rng.integers(0, 7, size=n)).astype(itype)
    x = rng.normal(size=n)
    plain = bt_run_on(target, s_by_key, key=key, x=x)
    grouped = bt_run_on(target, s_by_sorted_key, key=key, x=x)
    bt_close(grouped, plain, rtol=1e-12)
    bt_close(grouped, np.bincount(key, x, minlength=7), rtol=1e-12)


def test_sorted_index_into_passed_sink(target):
    rng = np.random.default_rng(9216)
    key = np.sort(rng.integers(2, 6, size=400)).astype(np.int32)
    x = rng.uniform(size=400)
    sink = np.linspace(1.0, 7.0, 7)
    want = sink + np.bincount(key, x, minlength=7)
    got = bt_run_on(target, s_by_sorted_key, key=key, x=x, acc=sink)
    bt_close(got, want, rtol=1e-12)
    bt_close(sink, want, rtol=1e-12)


def test_check_sorted_accepts_grouped_keys(target, monkeypatch):
    monkeypatch.setenv("HAWK_CHECK_SORTED", "1")
    key = np.array([5, 5, 5, 2, 2, 6, 0, 0, 0, 0], dtype=np.int32)  # grouped, not ascending
    x = np.arange(10.0)
    got = bt_run_on(target, s_by_sorted_key, key=key, x=x)
    bt_close(got, np.bincount(key, x, minlength=7))


@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_check_sorted_refuses_ungrouped_keys(target, monkeypatch, itype):
    @hawk.kernel
    def s_grouped_sum(seg_keys: Sorted[Index], x: Scalar, out: Mutable["slot":4]):
        hawk.scatter(out)[seg_keys] += x

    monkeypatch.setenv("HAWK_CHECK_SORTED", "1")
    key = np.array([0, 0, 1, 1, 2, 0, 3, 3], dtype=itype)  # 0 comes back after 2
    x = np.ones(8)
    with pytest.raises(ValueError, match="seg_keys"):
        eagle.deploy(s_grouped_sum, target=target).run(seg_keys=key, x=x)
    # the same kernel accepts the keys once they are grouped
    got = bt_run_on(target, s_grouped_sum, seg_keys=np.sort(key), x=x)
    np.testing.assert_array_equal(got, np.bincount(np.sort(key), minlength=4).astype(float))


def test_check_sorted_error_is_an_input_error(target, monkeypatch):
    monkeypatch.setenv("HAWK_CHECK_SORTED", "1")
    key = np.array([1, 0, 1], dtype=np.int32)
    with pytest.raises(eagle.InputError) as info:
        eagle.deploy(s_by_sorted_key, target=target).run(key=key, x=np.ones(3))
    assert "key" in str(info.value)
    assert "s_by_sorted_key" in str(info.value)


def test_store_by_grid_coordinate_tuple_transposes(target):
    @hawk.kernel
    def s_transpose(lane: Grid["row", "col":4], x: Scalar, tr: Mutable["cc":4, "rr":3]):
        hawk.scatter(tr)[lane.col, lane.row] = x

    x = np.random.default_rng(9217).normal(size=(3, 4))
    got = bt_run_on(target, s_transpose, x=x, row=3)
    np.testing.assert_array_equal(got, x.T)


def test_passed_f32_sink_accumulates_in_place(target):
    key = np.random.default_rng(9218).integers(0, 7, size=900).astype(np.int32)
    x = np.random.default_rng(9219).uniform(size=900).astype(np.float32)
    sink = np.full(7, 0.5, dtype=np.float32)
    got = bt_run_on(target, s_by_key, key=key, x=x, acc=sink)
    assert got.dtype == np.float32
    want = 0.5 + np.bincount(key, x.astype(np.float64), minlength=7)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_array_equal(sink, got)
