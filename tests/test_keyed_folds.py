"""A run of few lanes into a large sink folds only the slots its keys name (eagle/native/executor.c keyed_fold,
Layout.fold_keys): a sink past PRIVATE_SLOTS has one private copy per chunk, which the executor folded slot by
slot into the sink (plain) or the companion (compensated, then the compiled finish rounded every slot), so 10**4
lanes into 10**6 slots read and wrote 24-40 MB at every launch. When every scatter into the sink adds at a key
straight from one Index plane and the run is one chunk of fewer lanes than a 16th of the slots, the executor
visits the run's keys instead: every other slot of the copy holds its fill (-0.0), whose add leaves a value's
bits as they are, so the sink gets the bits of the dense fold (a compensated slot: (prior + sum) + correction,
rounded once, as the companion would have given it; a compensated sink's one copy is finished so, straight into
the sink, by the dense fold too: `direct`, the companion left at its fill). Each result here is compared bit for
bit with the compiled finish's (the executor's fold off) and with the Python pool's, and the fold reports show
the keyed fold ran: plain and compensated, float64 and float32 sinks, int32 and int64 keys, repeated keys and
keys -1, `-0.0` in the prior, base=/count= runs, bound launches again and again with new keys, and a refused
launch (a key spoiled after binding) that leaves the sink as it was."""

import numpy as np
import pytest
from conftest import bt_executor, bt_spoiled_key_refused

import eagle
import eagle.native
import eagle.native.folds
import hawk
from hawk import Index, Mutable, Scalar
from hawk import math as m

SLOTS = 100_000  # past hawk.abi.layout.PRIVATE_SLOTS: one copy per chunk, folded by the executor
N = 4_000  # lanes: fewer than SLOTS / executor.c SPARSE_SHARE


@hawk.kernel
def kf_plain(key: Index, x: Scalar, acc: Mutable["slot":100_000]):  # noqa: F821
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def kf_auto(key: Index, x: Scalar, acc: Mutable["slot":100_000]):  # noqa: F821
    hawk.scatter(acc)[key] += x * 0.5


@hawk.kernel
def kf_two(key: Index, x: Scalar, acc: Mutable["slot":100_000]):  # noqa: F821
    for j in range(2):  # (scatters in a for, two of them at the same plane's key: still keyed)
        hawk.scatter(acc)[key] += x * (j + 1.0)
    hawk.scatter(acc)[key] += m.where(x > 0.0, x * x, 0.0)


@hawk.kernel
def kf_computed(key: Index, x: Scalar, acc: Mutable["slot":100_000]):  # noqa: F821
    hawk.scatter(acc)[key] += x
    hawk.scatter(acc)[key // 2] += x  # (a computed key: the slots are not the plane's values, the fold stays dense)


KERNELS = {"plain": kf_plain, "auto": kf_auto, "two": kf_two}


@pytest.fixture
def native():
    if eagle.native.library() is None:
        pytest.skip(f"no native executor here: {eagle.native.unavailable_reason()}")


def _data(seed: int, dtype, key_dtype=np.int32, n: int = N):
    rng = np.random.default_rng([70_020, seed])
    key = rng.integers(-1, SLOTS, n)
    key[: n // 8] = key[n // 8: n // 4]  # (repeated keys)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-8, 9, n)).astype(dtype)
    prior = np.where(rng.uniform(size=SLOTS) < 0.5, -0.0, rng.standard_normal(SLOTS)).astype(dtype)
    return key.astype(key_dtype), x, prior


def _same(got, want, what):
    g, w = np.asarray(got), np.asarray(want)
    if g.tobytes() != w.tobytes():  # (not an assert on the bytes: pytest would diff them)
        raise AssertionError(f"{what}: {int((g.view(np.uint8) != w.view(np.uint8)).sum())} bytes differ")


def _dense(monkeypatch, kernel, **planes):
    """The run with the executor's fold off (the compiled finish folds every slot) and on the Python pool."""
    got = []
    for native, parallel in (("1", False), ("0", True)):
        bt_executor(monkeypatch, native, parallel)
        given = {k: (v.copy() if k == "acc" else v) for k, v in planes.items()}
        got.append(np.asarray(eagle.deploy(kernel, threads=2).run(**given)).copy())
    bt_executor(monkeypatch, "1")
    _same(got[1], got[0], f"{kernel.name}: the Python pool against the compiled finish")
    return got[0]


def test_which_sinks_are_keyed():
    for kernel, keyed in ((kf_plain, True), (kf_auto, True), (kf_two, True), (kf_computed, False)):
        key, x, _ = _data(0, np.float64)
        lay = eagle.deploy(kernel).bind(key=key, x=x, acc=np.zeros(SLOTS)).stages[0].launcher.lay
        assert lay.fold_keys == ({"acc": "key"} if keyed else {}), (kernel.name, lay.fold_keys)


@pytest.mark.parametrize("key_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("policy", sorted(KERNELS))
def test_a_keyed_fold_gives_the_dense_folds_bits(native, fold_reports, monkeypatch, policy, dtype, key_dtype):
    kernel = KERNELS[policy]
    key, x, prior = _data(1, dtype, key_dtype)
    want = _dense(monkeypatch, kernel, key=key, x=x, acc=prior)
    plan = eagle.deploy(kernel, threads=2)
    before = len(fold_reports)
    got = np.asarray(plan.run(key=key, x=x, acc=prior.copy()))
    assert plan.last_chunks == (1,)
    (folds,) = fold_reports[before:]
    assert [(f["sparse"], f["direct"]) for f in folds] == [(True, policy != "plain")], folds  # (the keyed fold ran)
    _same(got, want, f"{policy} {dtype.__name__} keys {key_dtype.__name__}")
    untouched = np.setdiff1d(np.arange(SLOTS), key)
    _same(got[untouched], prior[untouched], "slots no key names keep their bits (-0.0 included)")


@pytest.mark.parametrize("policy", sorted(KERNELS))
def test_bound_launches_with_new_keys_and_a_refusal(native, fold_reports, monkeypatch, policy):
    kernel = KERNELS[policy]
    key, x, prior = _data(2, np.float64)
    acc = prior.copy()
    bound = eagle.deploy(kernel, threads=2).bind(key=key, x=x, acc=acc)
    for seed in (3, 4, 5):  # (each launch from copies the last one's keyed fold refilled: no reset)
        k2, x2, p2 = _data(seed, np.float64)
        key[:], x[:], acc[:] = k2, x2, p2
        bound.launch()
        assert fold_reports[-1][0]["sparse"], fold_reports[-1]
        _same(acc, _dense(monkeypatch, kernel, key=k2, x=x2, acc=p2), f"{policy} bound, data {seed}")
    bt_spoiled_key_refused(bound, key, acc, N // 3, SLOTS + 4)
    k3, x3, p3 = _data(6, np.float64)
    key[:], x[:], acc[:] = k3, x3, p3
    bound.launch()
    _same(acc, _dense(monkeypatch, kernel, key=k3, x=x3, acc=p3), f"{policy} bound, after the refusal")


def test_a_run_over_part_of_the_lanes(native, fold_reports, monkeypatch):
    """base=/count=: the keyed fold reads the keys of the run's lanes only (others name slots the run left)."""
    key, x, prior = _data(7, np.float64, n=3 * N)
    got = np.asarray(eagle.deploy(kf_auto, threads=2).run(key=key, x=x, acc=prior.copy(), base=N, count=N))
    assert fold_reports[-1][0]["sparse"], fold_reports[-1]
    monkeypatch.setattr(eagle.native.folds, "PARALLEL_FINISH", False)
    want = np.asarray(eagle.deploy(kf_auto, threads=2).run(key=key, x=x, acc=prior.copy(), base=N, count=N))
    _same(got, want, "base=/count=")
    outside = np.setdiff1d(np.arange(SLOTS), key[N:2 * N])
    _same(got[outside], prior[outside], "slots only other lanes' keys name")


def test_many_lanes_and_computed_keys_stay_dense(native, fold_reports, monkeypatch):
    key, x, prior = _data(8, np.float64, n=SLOTS // 4)  # (more lanes than a 16th of the slots)
    got = np.asarray(eagle.deploy(kf_auto, threads=2).run(key=key, x=x, acc=prior.copy()))
    assert [(f["sparse"], f["direct"]) for f in fold_reports[-1]] == [(False, True)], fold_reports[-1]
    _same(got, _dense(monkeypatch, kf_auto, key=key, x=x, acc=prior), "many lanes, one chunk: finished directly")
    key, x, prior = _data(9, np.float64)
    eagle.deploy(kf_computed, threads=2).run(key=key, x=x, acc=prior.copy())
    assert [f["sparse"] for f in fold_reports[-1]] == [False], fold_reports[-1]


def test_an_artifact_folds_by_keys_too(native, fold_reports, tmp_path):
    """The layout an artifact carries names the keys' plane (fold_keys), so hawk.run folds by keys as Plan.run."""
    hawk.artifact.build_bundle([kf_auto], str(tmp_path), targets=("host",), dtypes=("float64",))
    loaded = hawk.load(str(tmp_path), "kf_auto", threads=2)
    key, x, prior = _data(10, np.float64)
    got = np.asarray(hawk.run(loaded, key=key, x=x, acc=prior.copy()))
    assert [(f["sparse"], f["direct"]) for f in fold_reports[-1]] == [(True, True)], fold_reports[-1]
    _same(got, eagle.deploy(kf_auto, threads=2).run(key=key, x=x, acc=prior.copy()), "hawk.run against Plan.run")
