"""hawk.run on the host reuses a loaded artifact's prepared runs by shape, as Plan.run does (eagle/native/reuse.py):
a second run of the same shape rebinds the kept stages (the cache's hit count says so) and gives the same results,
internal cells still not handed back, cells passed in place still filled, refusals still raised with every passed
array left as it was, and a refused run does not spoil the next."""

import numpy as np
import pytest

import eagle
import hawk
from eagle.errors import InputError
from hawk import Grid, Index, Mutable, Scalar


@hawk.kernel
def ar_share(x: Scalar, z: Mutable[Scalar]):  # (two stages: the total is an internal cell)
    z = x / hawk.sum(x, policy="ordered")


@hawk.kernel
def ar_bins(key: Index, x: Scalar, hist: Mutable["bin":4], total: Mutable[Scalar]):  # noqa: F821
    hawk.scatter(hist, policy="ordered")[key] += x
    total = hawk.sum(x, policy="ordered")


@hawk.kernel
def ar_cols(g: Grid["r", "c":70000], x: Scalar) -> Scalar:  # noqa: F821 (70000 slots: past PRIVATE_SLOTS)
    return hawk.max(x, over="r")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("reuse")
    hawk.artifact.build_bundle([ar_share, ar_bins, ar_cols], d, dtypes=("float64",))
    return d


def test_wide_kept_cells_split_and_one_chunk_runs_keep_earlier_results(built):
    # a host build gives the 70000-slot cell a copy per chunk (Spec.cell_slots, as a host plan does): 36 rows
    # run in 2 chunks; 6 rows in one, whose copy is the cell itself, rebound to each reused run's fresh cell
    loaded = hawk.load(built, "ar_cols", threads=2)
    rng = np.random.default_rng(9)
    tall = rng.normal(size=(36, 70000))
    assert np.array_equal(np.asarray(hawk.run(loaded, x=tall)), tall.max(axis=0)) and loaded.last_chunks == (2,)
    xs = [rng.normal(size=(6, 70000)) for _ in range(3)]
    outs = [hawk.run(loaded, x=x) for x in xs]
    assert loaded.last_chunks == (1,) and loaded._host_runs.hits >= 2
    for x, out in zip(xs, outs, strict=True):
        assert np.array_equal(np.asarray(out), x.max(axis=0))


def _bits(a) -> bytes:
    return np.ascontiguousarray(np.asarray(a)).tobytes()


def test_a_second_run_of_a_shape_reuses_the_first(built):
    loaded = hawk.load(built, "ar_share")
    x = np.random.default_rng(1).uniform(1.0, 2.0, 3000)
    first = hawk.run(loaded, x=x)
    chunks, loaded.last_chunks = loaded.last_chunks, ()
    assert loaded._host_runs.hits == 0 and len(chunks) == 2
    again = hawk.run(loaded, x=x)
    assert loaded._host_runs.hits == 1 and loaded.last_chunks == chunks  # (the kept run's facts land here too)
    assert isinstance(again, eagle.Array)  # (the internal cell is not handed back on the kept path either)
    assert _bits(again) == _bits(first) == _bits(eagle.deploy(ar_share).run(x=x))
    y = np.random.default_rng(2).uniform(1.0, 2.0, 3000)
    np.testing.assert_allclose(np.asarray(hawk.run(loaded, x=y)), y / y.sum(), rtol=1e-13)
    assert loaded._host_runs.hits == 2
    z = np.random.default_rng(3).uniform(1.0, 2.0, 1234)  # (another shape: prepared afresh, then kept too)
    np.testing.assert_allclose(np.asarray(hawk.run(loaded, x=z)), z / z.sum(), rtol=1e-13)
    assert loaded._host_runs.hits == 2 and len(loaded._host_runs.entries) == 2


def test_cells_passed_in_place_and_refusals(built):
    loaded = hawk.load(built, "ar_bins")
    rng = np.random.default_rng(4)
    x, key = rng.normal(size=500), rng.integers(0, 4, 500).astype(np.int32)
    for _ in range(2):  # (the first run prepares, the second reuses)
        hist, total = np.zeros(4), np.zeros(1)
        hawk.run(loaded, key=key, x=x, hist=hist, total=total)
        np.testing.assert_allclose(hist, np.bincount(key, weights=x, minlength=4), rtol=1e-13)
        np.testing.assert_allclose(total, [x.sum()], rtol=1e-13)
    assert loaded._host_runs.hits == 1
    bad = key.copy()
    bad[77] = 9
    hist, total = np.full(4, 3.0), np.full(1, 5.0)
    with pytest.raises(InputError, match="hist"):
        hawk.run(loaded, key=bad, x=x, hist=hist, total=total)
    assert (hist == 3.0).all() and (total == 5.0).all()  # (a refused run leaves the arrays as they were)
    hist = np.zeros(4)
    hawk.run(loaded, key=key, x=x, hist=hist, total=np.zeros(1))  # (and does not spoil the next run)
    np.testing.assert_allclose(hist, np.bincount(key, weights=x, minlength=4), rtol=1e-13)
    with pytest.raises(InputError, match="float32"):
        hawk.run(loaded, key=key, x=x.astype(np.float32), hist=np.zeros(4, np.float32), total=np.zeros(1, np.float32))
