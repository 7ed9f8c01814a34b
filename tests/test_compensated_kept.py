"""Compensated sums that keep axes. Other than the leading ones (a column sum, a middle axis), they run on every
thread: each chunk keeps a (sum, correction) pair per kept slot, Neumaier-stepped per lane (branch-free in the
column shape), and the finish adds the chunks' pairs in chunk order into the companion, as a compensated sink's
copies are folded; they ran as one chunk before (a single-thread cliff). Keeping the leading ones (row sums), a
slot's lanes go to eight Neumaier chains in registers, a group of eight lanes at a time (the nested shape),
combined at the slot's end; they ran lane by lane through the companion in memory before (20x an auto row sum).
The contract is the compensated bound, k <= 1 against math.fsum, on data a plain sum in lane order fails
(absorbed terms, cancelling pairs), with the runs really split."""

import numpy as np
import pytest
from conftest import bt_sum_ulps
from test_policies import _absorbing, _cancelling, _wide_cancelling

import eagle
import hawk
from hawk import Grid, Scalar, Vector


@hawk.kernel
def ck_cols(g: Grid["r", "c":6], x: Scalar) -> Scalar:
    return hawk.sum(x, over="r", policy="compensated")


@hawk.kernel
def ck_cols_mean(g: Grid["r", "c":6], x: Scalar, s: hawk.Mutable[Scalar], mu: hawk.Mutable[Scalar]):
    s = hawk.sum(x, over="r", policy="compensated", where=x != 0.25)
    mu = hawk.mean(x, over="r", policy="compensated", where=x != 0.25)


@hawk.kernel
def ck_middle(g: Grid["a", "b":5, "c":3], x: Scalar) -> Scalar:  # (keeps a middle axis: the flat loop)
    return hawk.sum(x, over=("a", "c"), policy="compensated")


@hawk.kernel
def ck_vec(g: Grid["r", "c":4], v: Vector[2]) -> Vector[2]:
    return hawk.sum(v, over="r", policy="compensated")


def _columns(rows, cols, dtype, rng):
    """Column j: absorbed terms (1.0, then 0.49 eps each), cancelling pairs, wide cancelling terms, in turn."""
    makers = [lambda n: _absorbing(n, dtype), lambda n: _cancelling(n, dtype, rng),
              lambda n: _wide_cancelling(n, dtype, rng)]
    return np.stack([makers[j % 3](rows) for j in range(cols)], axis=1).astype(dtype)


def _runs(kernel, threads, **planes):
    for t in threads:
        plan = eagle.deploy(kernel, threads=t, min_chunk=256)
        out = plan.run(**{k: v.copy() for k, v in planes.items()})
        if t > 1:
            assert max(plan.last_chunks) > 1, f"{kernel.name} threads={t}: ran {plan.last_chunks} chunk(s)"
        yield t, ({k: np.asarray(v) for k, v in out.items()} if isinstance(out, dict) else np.asarray(out))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_column_sums_within_the_bound_on_every_thread(dtype):
    x = _columns(6000, 6, dtype, np.random.default_rng(81))
    assert bt_sum_ulps(float(np.cumsum(x[:, 0])[-1]), x[:, 0]) > 100  # (a plain sum in lane order fails)
    for t, got in _runs(ck_cols, [1, 2, 3], x=x):
        assert got.dtype == dtype and got.shape == (6,)
        for j in range(6):
            assert bt_sum_ulps(got[j], x[:, j]) <= 1.0, f"column {j}, threads={t}"


def test_masked_sums_and_means_with_their_counts():
    x = _columns(5000, 6, np.float64, np.random.default_rng(82))
    x[::7, 2] = 0.25  # masked out
    x[:, 4] = 0.25  # every lane of column 4 masked out: sum 0, mean NaN
    keep = x != 0.25
    for t, out in _runs(ck_cols_mean, [1, 3], x=x):
        for j in range(6):
            terms = x[keep[:, j], j]
            assert bt_sum_ulps(out["s"][j], terms) <= 1.0, f"sum {j}, threads={t}"
            if not terms.size:
                assert out["s"][j] == 0.0 and np.isnan(out["mu"][j])
                continue
            assert bt_sum_ulps(out["mu"][j] * terms.size, terms) <= 2.0, f"mean {j}, threads={t}"


def test_a_middle_axis_kept():
    rng = np.random.default_rng(83)
    x = np.stack([_cancelling(2000 * 3, np.float64, rng).reshape(2000, 3) for _ in range(5)], axis=1)
    x[:, 1, :] = _absorbing(6000, np.float64).reshape(2000, 3)
    for t, got in _runs(ck_middle, [1, 2, 3], x=x):
        for b in range(5):
            assert bt_sum_ulps(got[b], x[:, b, :]) <= 1.0, f"slot {b}, threads={t}"


def test_vector_payloads():
    rng = np.random.default_rng(84)
    v = np.stack([_columns(4000, 4, np.float64, rng), _columns(4000, 4, np.float64, rng)[:, ::-1]])
    for t, got in _runs(ck_vec, [1, 3], v=v):
        for c in range(2):
            for j in range(4):
                assert bt_sum_ulps(got[c, j], v[c, :, j]) <= 1.0, f"component {c}, column {j}, threads={t}"


@hawk.kernel
def ck_rows(g: Grid["r", "c":37], x: Scalar) -> Scalar:  # (four groups of eight and five lanes alone)
    return hawk.sum(x, over="c", policy="compensated")


@hawk.kernel
def ck_rows_mean(g: Grid["r", "c":21], x: Scalar, s: hawk.Mutable[Scalar], mu: hawk.Mutable[Scalar],
                 quick: hawk.Mutable[Scalar]):
    s = hawk.sum(x, over="c", policy="compensated", where=x != 0.25)
    mu = hawk.mean(x, over="c", policy="compensated", where=x != 0.25)
    quick = hawk.sum(x, over="c")  # (an "auto" total in the same slot loop)


@hawk.kernel
def ck_rows_vec(g: Grid["r", "c":12], v: Vector[2]) -> Vector[2]:
    return hawk.sum(v, over="c", policy="compensated")


def _rows(rows, cols, dtype, rng):
    """Row i: absorbed terms, cancelling pairs or wide cancelling terms, in turn (_columns' families)."""
    return np.ascontiguousarray(_columns(cols, rows, dtype, rng).T)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_sums_within_the_bound_on_every_thread(dtype):
    x = _rows(3000, 37, dtype, np.random.default_rng(85))
    assert bt_sum_ulps(float(np.cumsum(x[0])[-1]), x[0]) > 10  # (a plain sum in lane order fails)
    for t, got in _runs(ck_rows, [1, 2, 3], x=x):
        assert got.dtype == dtype and got.shape == (3000,)
        for i in range(3000):
            assert bt_sum_ulps(got[i], x[i]) <= 1.0, f"row {i}, threads={t}"


def test_row_sums_masked_means_and_an_auto_sum_beside_them():
    x = _rows(3000, 21, np.float64, np.random.default_rng(86))
    x[5, ::3] = 0.25
    x[6] = 0.25  # every lane masked out: sum 0, mean NaN
    keep = x != 0.25
    for t, out in _runs(ck_rows_mean, [1, 3], x=x):
        np.testing.assert_allclose(out["quick"][::3], x[::3].sum(axis=1), rtol=1e-12)  # (absorbed terms' rows)
        for i in range(3000):
            terms = x[i, keep[i]]
            assert bt_sum_ulps(out["s"][i], terms) <= 1.0, f"sum {i}, threads={t}"
            if not terms.size:
                assert out["s"][i] == 0.0 and np.isnan(out["mu"][i])
                continue
            assert bt_sum_ulps(out["mu"][i] * terms.size, terms) <= 2.0, f"mean {i}, threads={t}"


def test_row_sums_of_vectors_and_specials():
    rng = np.random.default_rng(87)
    v = np.stack([_rows(3000, 12, np.float64, rng), _rows(3000, 12, np.float64, rng)[::-1]])
    v[0, 7, 3] = np.inf
    v[1, 8, [1, 9]] = [np.inf, -np.inf]
    for t, got in _runs(ck_rows_vec, [1, 3], v=v):
        assert np.isposinf(got[0, 7]) and np.isnan(got[1, 8])
        for c in range(2):
            for i in range(3000):
                if (c, i) not in ((0, 7), (1, 8)):
                    assert bt_sum_ulps(got[c, i], v[c, i]) <= 1.0, f"component {c}, row {i}, threads={t}"
