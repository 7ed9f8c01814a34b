"""Loaded artifacts lose nothing: hawk.run prepares every stage before the first launch and hands results to the
caller's arrays only once every stage has run, so a multi-stage artifact refused in a later stage (a key plane
holding a bad key, a wrong-shaped sink, a key computed out of range as the compiled code runs) leaves every array
the caller passed as it was, bit for bit, on the host and on spirv (lavapipe here); a good run still writes the
caller's arrays in place; a sink that both stages scatter into gets both stages' terms (passed or not). Also:
hawk.load's min_chunk= splits small runs into chunks (`loaded.last_chunks`), the split never changes an ordered
result, and base= / count= take whole numbers only.
"""

import numpy as np
import pytest
from conftest import BT_TARGETS, bt_ordered_sum, bt_same_bits, bt_target_missing

import eagle
import hawk
import hawk.artifact
from hawk import Index, Mutable, Scalar

# ============================================================================================ kernels


@hawk.kernel
def as_split(key: Index, x: Scalar, y: Mutable[Scalar], total: Mutable[Scalar], acc: Mutable["slot":8]):
    total = hawk.sum(x, policy="ordered")  # stage 1 writes y and total; stage 2 scatters by the key plane
    y = x * 2.0
    hawk.scatter(acc)[key] += x / total


@hawk.kernel
def as_computed(key: Index, x: Scalar, y: Mutable[Scalar], total: Mutable[Scalar], acc: Mutable["slot":8]):
    total = hawk.sum(x, policy="ordered")  # stage 2's key is computed: checked only as the compiled code runs
    y = x * 2.0
    hawk.scatter(acc, policy="ordered")[key + 5] += x / total


@hawk.kernel
def as_computed_plain(key: Index, x: Scalar, y: Mutable[Scalar], total: Mutable[Scalar], acc: Mutable["slot":8]):
    total = hawk.sum(x, policy="ordered")
    y = x * 2.0
    hawk.scatter(acc, policy="plain")[key + 5] += x / total


@hawk.kernel
def as_share(x: Scalar, z: Mutable[Scalar]):
    z = x / hawk.sum(x, policy="ordered")


@hawk.kernel
def as_twice(key: Index, x: Scalar, acc: Mutable["slot":4]):
    hawk.scatter(acc)[key] += x  # stage 1
    hawk.scatter(acc)[key] += x / hawk.sum(x, policy="ordered")  # stage 2: the same sink


@hawk.kernel
def as_scale(x: Scalar, y: Mutable[Scalar]):
    y = x * 3.0  # one stage: base= and count= apply


KERNELS = [as_split, as_computed, as_computed_plain, as_share, as_twice, as_scale]


# ============================================================================================ helpers


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One artifact directory holding every kernel above for the host and, where it runs here, spirv."""
    d = tmp_path_factory.mktemp("safety_artifacts")
    targets = tuple(t for t in BT_TARGETS if bt_target_missing(t) is None)
    hawk.artifact.build_bundle(KERNELS, d, targets=targets, dtypes=("float64",))
    return d


def _planes(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"key": rng.integers(0, 8, size=n).astype(np.int32), "x": rng.uniform(0.5, 2.0, n),
            "y": rng.normal(size=n), "total": np.array([7.25]), "acc": rng.normal(size=8)}


def _snapshot(planes: dict) -> dict:
    return {k: v.copy() for k, v in planes.items() if isinstance(v, np.ndarray)}


def _unchanged(planes: dict, snap: dict, what: str) -> None:
    for k, v in snap.items():
        bt_same_bits(planes[k], v, f"{what}: plane '{k}'")


def _load(built, kernel, target, **kw):
    loaded = hawk.load(built, kernel.name, target=target, **kw)
    assert loaded.stage_count == 2, loaded  # every case here is about a later stage
    return loaded


# ============================================================================================ nothing lost


def test_a_bad_key_for_the_second_stage_leaves_every_array(built, target):
    planes = _planes(5000, 1)
    planes["key"][4321] = 8  # only stage 2 reads the key plane: stage 1 would have written y and total
    snap = _snapshot(planes)
    loaded = _load(built, as_split, target)
    with pytest.raises(eagle.InputError, match="'key'.*holds key 8"):
        hawk.run(loaded, **planes)
    _unchanged(planes, snap, f"late bad key on {target}")


def test_a_wrong_shaped_sink_in_the_second_stage_leaves_every_array(built, target):
    planes = _planes(5000, 2)
    planes["acc"] = np.zeros(7)
    snap = _snapshot(planes)
    with pytest.raises(eagle.InputError, match="'acc'.*must be shaped"):
        hawk.run(_load(built, as_split, target), **planes)
    _unchanged(planes, snap, f"wrong-shaped sink on {target}")


@pytest.mark.parametrize("kernel", [as_computed, as_computed_plain])
def test_a_key_computed_out_of_range_in_the_second_stage_leaves_every_array(built, target, kernel):
    planes = _planes(20_000, 3)
    snap = _snapshot(planes)
    loaded = _load(built, kernel, target, threads=2, min_chunk=1024)
    with pytest.raises(eagle.InputError, match=f"sink 'acc' of kernel '{kernel.name}'.*scattered to a key outside"):
        hawk.run(loaded, **planes)
    _unchanged(planes, snap, f"{kernel.name} on {target}")
    # the same loaded kernel runs again once the keys are good: the refusal left nothing half-done behind
    planes["key"] %= 3
    out = hawk.run(loaded, **planes)
    assert np.asarray(out["acc"]) is planes["acc"]
    assert target != "host" or max(loaded.last_chunks) > 1, loaded.last_chunks


def test_a_refused_run_then_a_good_one_on_the_same_arrays(built, target):
    planes = _planes(20_000, 4)
    planes["key"] %= 3
    loaded = _load(built, as_computed, target, threads=2, min_chunk=1024)
    hawk.run(loaded, **planes)
    once = _snapshot(planes)
    planes["key"][12_345] = 3  # key + 5 = 8: one past the sink
    planes["x"][:10] += 1.0  # stage 1 would write new y and total before stage 2 finds the key
    snap = _snapshot(planes)
    with pytest.raises(eagle.InputError, match="first bad key: 8"):
        hawk.run(loaded, **planes)
    _unchanged(planes, snap, f"second run on {target}")
    planes["key"][12_345] = 0
    hawk.run(loaded, **planes)  # the sink the caller passed keeps accumulating, in place
    step = np.bincount(planes["key"] + 5, weights=planes["x"] / bt_ordered_sum(planes["x"]), minlength=8)
    np.testing.assert_allclose(planes["acc"], once["acc"] + step, rtol=1e-12)


@pytest.mark.parametrize("kernel", [as_split, as_computed, as_computed_plain])
def test_a_good_run_writes_the_callers_arrays_in_place(built, target, kernel):
    planes = _planes(20_000, 5)
    planes["key"] %= 3  # key + 5 stays inside the sink
    prior = planes["acc"].copy()
    out = hawk.run(_load(built, kernel, target, threads=2, min_chunk=1024), **planes)
    for name in ("y", "acc"):
        assert np.asarray(out[name]) is planes[name], name
    np.testing.assert_array_equal(planes["y"], planes["x"] * 2.0)
    total = bt_ordered_sum(planes["x"])
    assert planes["total"][0] == total
    shift = 0 if kernel is as_split else 5
    want = prior + np.bincount(planes["key"] + shift, weights=planes["x"] / total, minlength=8)
    np.testing.assert_allclose(planes["acc"], want, rtol=1e-12)


def test_a_sink_that_both_stages_scatter_into_gets_both(built, target):
    # both stages write scratch copies: the second must add to the first's, not start again from the caller's
    rng = np.random.default_rng(7)
    key, x = rng.integers(0, 4, size=20_000).astype(np.int32), rng.uniform(0.5, 2.0, 20_000)
    prior = rng.normal(size=4)
    want = prior + np.bincount(key, weights=x + x / bt_ordered_sum(x), minlength=4)
    acc = prior.copy()
    out = hawk.run(_load(built, as_twice, target, threads=2, min_chunk=1024), key=key, x=x, acc=acc)
    assert np.asarray(out) is acc
    np.testing.assert_allclose(acc, want, rtol=1e-12)
    acc = prior.copy()
    eagle.deploy(as_twice, target=target, threads=2, min_chunk=1024).run(key=key, x=x, acc=acc)
    np.testing.assert_allclose(acc, want, rtol=1e-12)
    fresh = hawk.run(_load(built, as_twice, target, threads=2, min_chunk=1024), key=key, x=x)  # a sink not passed
    np.testing.assert_allclose(np.asarray(fresh), want - prior, rtol=1e-12)
    fresh = eagle.deploy(as_twice, target=target).bind(key=key, x=x)
    for _ in range(2):  # every launch starts the sink afresh
        np.testing.assert_allclose(np.asarray(fresh.launch()), want - prior, rtol=1e-12)
    bad = key.copy()
    bad[9_999] = 4
    acc = prior.copy()
    with pytest.raises(eagle.InputError, match="'key'.*holds key 4"):
        hawk.run(_load(built, as_twice, target), key=bad, x=x, acc=acc)
    bt_same_bits(acc, prior, "a refused run of as_twice")


# ============================================================================================ chunks


def test_min_chunk_splits_an_artifact_run_and_keeps_its_ordered_bits(built):
    x = np.random.default_rng(6).uniform(1.0, 2.0, 50_001)
    want = x / bt_ordered_sum(x)
    one = np.asarray(hawk.run(hawk.load(built, "as_share", threads=1), x=x))
    bt_same_bits(one, want, "as_share threads=1 vs NumPy over the ordered total")
    for threads in (2, 3):
        loaded = hawk.load(built, "as_share", threads=threads, min_chunk=1024)
        got = np.asarray(hawk.run(loaded, x=x))
        bt_same_bits(got, one, f"as_share threads={threads} chunks={loaded.last_chunks}")
        assert len(loaded.last_chunks) == 2 and min(loaded.last_chunks) > 1, loaded.last_chunks


@pytest.mark.parametrize("value", [0, -3, "8", 2.5, True])
def test_a_bad_min_chunk_is_refused_naming_the_kernel_and_setting(built, value):
    with pytest.raises(ValueError, match=r"^hawk.load\(as_share\): min_chunk= must be a whole number of lanes"):
        hawk.load(built, "as_share", min_chunk=value)


@pytest.mark.parametrize("arg, value", [("base", 1.5), ("count", "2"), ("base", True), ("count", 2.0)])
def test_base_and_count_take_whole_numbers(built, arg, value):
    y = np.full(10, -1.0)
    with pytest.raises(eagle.InputError, match=rf"kernel 'as_scale': {arg}= takes a whole number of lanes"):
        hawk.run(hawk.load(built, "as_scale"), x=np.ones(10), y=y, **{arg: value})
    np.testing.assert_array_equal(y, -1.0)
    hawk.run(hawk.load(built, "as_scale"), x=np.arange(10.0), y=y, base=np.int64(2), count=np.int32(3))
    np.testing.assert_array_equal(y, [-1, -1, 6, 9, 12, -1, -1, -1, -1, -1])
