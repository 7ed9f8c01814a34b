"""A kept slot of an ordered row sum whose every lane one host chunk ran, with no term spilled, is handed to the
finish as one parked (high, low) pair (reduce_kept.park) that the finish rounds alone; every other slot (cut
between chunks, a term spilled, a float32 tie the pair cannot settle) goes through its exact accumulator. Either
way a slot is its exact sum rounded once, with the same bits on any split. These cases aim at the seams: rows
cut by chunks and by lane ranges, spills in whole rows, slots shorter than a group of eight, pairs summing to
zero, a float32 tie, and a bound plan launched again (the finish must leave no pair parked behind)."""

import numpy as np
import pytest
from conftest import bt_ordered_sum
from exact_families import same_bits, split_runs

import eagle
import hawk
from hawk import Grid, Scalar


@hawk.kernel
def xp_rows4(g: Grid["r", "c":4], x: Scalar) -> Scalar:
    return hawk.sum(x, over="c", policy="ordered")


@hawk.kernel
def xp_rows3_mean(g: Grid["r", "c":3], x: Scalar) -> Scalar:
    return hawk.mean(x, over="c", policy="ordered", where=x > -1.0)


@hawk.kernel
def xp_rows19(g: Grid["r", "c":19], x: Scalar) -> Scalar:  # (two groups of eight and three lanes alone)
    return hawk.sum(x, over="c", policy="ordered")


@hawk.kernel
def xp_fixed_rows(g: Grid["r":300, "c":19], x: Scalar) -> Scalar:  # (fixed kept extent: a copy per chunk, no parking)
    return hawk.sum(x, over="c", policy="ordered")


def _want(x, dtype, mask=None):
    return np.array([bt_ordered_sum(x[i], dtype, None if mask is None else mask[i]) for i in range(x.shape[0])],
                    dtype=dtype)


def _seams(rows, cols, dtype, rng):
    """Standard normal rows, and rows that test the finish's two paths: zeros, -0.0, a cancelling pair (a
    parked (0, 0)), an inf, a NaN, a term past the pairs' limit, a second error that decides the rounding."""
    x = rng.standard_normal((rows, cols)).astype(dtype)
    big = 1e300 if dtype == np.float64 else 1e30
    x[1] = 0.0
    x[2] = -0.0
    x[3, :2] = [1.5, -1.5]
    x[3, 2:] = 0.0
    x[5, 0] = np.inf
    x[6, -1] = np.nan
    x[7, :2] = [big, -big]
    x[8] = 0.0
    x[8, :3] = [2.0 ** 60, 128.0, 2.0 ** -60]  # (2**60 + 256 only with the last term's second error)
    return x


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel", [xp_rows4, xp_rows19], ids=["c4", "c19"])
def test_rows_whole_and_cut_on_any_split(kernel, dtype):
    cols = {"xp_rows4": 4, "xp_rows19": 19}[kernel.name]
    x = _seams({4: 2003, 19: 203}[cols], cols, dtype, np.random.default_rng(71))
    want = _want(x, dtype)
    assert want[1] == 0.0 and want[2] == 0.0 and not np.signbit(want[2]) and np.isposinf(want[5])
    for threads, out in split_runs(kernel, "host", threads=[1, 2, 3], min_chunk=64, x=x):
        same_bits(out, want, dtype, f"{kernel.name}, threads={threads}")


def test_a_short_masked_mean_on_any_split():
    x = _seams(1501, 3, np.float64, np.random.default_rng(72))
    x[10] = -2.0  # every lane masked out: a mean of no lanes is NaN
    mask = x > -1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        want = _want(x, np.float64, mask) / mask.sum(axis=1)
    assert np.isnan(want[10])
    want = np.where(np.isnan(want), np.nan, want)  # (the canonical quiet NaN, not x86's 0 / 0: finish.canonical_nans)
    for threads, out in split_runs(xp_rows3_mean, "host", threads=[1, 3], min_chunk=32, x=x):
        same_bits(out, want, np.float64, f"mean, threads={threads}")


def test_a_float32_tie_that_the_parked_pair_cannot_settle():
    """1 + 2**-24 is halfway between two float32 values; 2**-60 breaks the tie upwards. The row's float64 pair
    holds all three exactly, but rounding it to float32 is not sure: the finish takes the slot's exact path."""
    x = np.zeros((400, 19), dtype=np.float32)
    x[1::4, :3] = [1.0, 2.0 ** -24, 2.0 ** -60]
    x[2::4, :2] = [1.0, 2.0 ** -24]  # the tie alone: to even, 1.0
    x[3::4, [0, 9, 18]] = [1.0, 2.0 ** -24, -(2.0 ** -60)]  # broken downwards (and the terms in three pairs)
    want = np.tile(np.array([0.0, np.nextafter(np.float32(1), np.float32(2)), 1.0, 1.0], dtype=np.float32), 100)
    same_bits(_want(x, np.float32), want, np.float32, "reference")
    for threads, out in split_runs(xp_rows19, "host", threads=[1, 3], min_chunk=64, x=x):
        same_bits(out, want, np.float32, f"float32 tie, threads={threads}")


@pytest.mark.parametrize("base, count", [(0, 40), (2, 40), (4, 37), (3, 1), (5, 2)])
def test_rows_cut_by_a_lane_range(base, count):
    """run(base=, count=): a slot the range cuts sums the lanes inside it; a slot outside it is +0.0."""
    x = np.random.default_rng(73).standard_normal((12, 4))
    lanes = np.arange(x.size).reshape(x.shape)
    inside = (lanes >= base) & (lanes < base + count)
    want = _want(x, np.float64, inside)
    got = np.asarray(eagle.deploy(xp_rows4, threads=1).run(base=base, count=count, x=x.copy()))
    same_bits(got[:12], want, np.float64, f"lanes {base}..{base + count}")


def test_a_bound_plan_leaves_no_pair_parked():
    """A launch that parks every slot, then one whose rows spill or are cut: each must give its own sums."""
    rng = np.random.default_rng(74)
    plan = eagle.deploy(xp_rows19, threads=2, min_chunk=64)
    x = rng.standard_normal((120, 19))
    bound = plan.bind(x=x)
    for step in range(4):
        if step % 2:
            x[:] = _seams(120, 19, np.float64, rng)
        else:
            x[:] = rng.standard_normal(x.shape)
        got = np.asarray(bound.launch())
        same_bits(got, _want(x, np.float64), np.float64, f"launch {step}")
        assert max(bound.chunks) > 1


def test_an_artifact_parks_as_a_plan_does(tmp_path):
    """A built artifact (its layout lists the "parked" buffer) run by hawk.run, split: the plan's bits."""
    x = _seams(203, 19, np.float64, np.random.default_rng(75))
    hawk.artifact.build(xp_rows19, str(tmp_path), targets=("host",), dtypes=("float64",))
    loaded = hawk.load(str(tmp_path), "xp_rows19", threads=3, min_chunk=64)
    got = np.asarray(hawk.run(loaded, x=x.copy()))
    assert max(loaded.last_chunks) > 1
    same_bits(got, _want(x, np.float64), np.float64, "artifact")


def test_rows_of_a_fixed_extent_keep_their_pairs_per_chunk():
    """A kept axis of fixed extent gives the cell a (high, low) pair per slot and chunk (and no parked buffer):
    the row ends add into those (this kernel failed to compile while the row end always offered to park)."""
    x = _seams(300, 19, np.float64, np.random.default_rng(76))
    for threads, out in split_runs(xp_fixed_rows, "host", threads=[1, 2, 3], min_chunk=64, x=x):
        same_bits(out, _want(x, np.float64), np.float64, f"fixed rows, threads={threads}")


def test_a_sidecar_whose_parked_buffer_has_no_accumulators_is_refused(tmp_path):
    """The artifact format's check of the new role, by its message: parked pairs belong to a cell with exact
    accumulators before them."""
    import json

    from hawk.abi.artifact.format import content_hash
    from hawk.artifact import ArtifactError

    hawk.artifact.build(xp_rows19, str(tmp_path), targets=("host",), dtypes=("float64",))
    p = tmp_path / "xp_rows19.json"
    sc = json.loads(p.read_text())
    for b in sc["builds"]:
        parked = [x for x in b["layout"]["buffers"] if x["role"] == "parked"]
        assert len(parked) == 1
        parked[0]["name"] = "ghost"
    sc["content_hash"] = content_hash(sc)
    p.write_text(json.dumps(sc))
    with pytest.raises(ArtifactError, match="holds parked pairs of 'ghost', which has no exact accumulators"):
        hawk.load(str(tmp_path), "xp_rows19")
