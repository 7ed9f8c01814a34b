"""The executor's fold of a large sink's per-chunk copies sets each value it reads back to the copies' fill
(-0.0), so the next launch skips their reset (eagle/native/executor.c fold_range, eagle_reset.clean): 10**7 lanes
into 10**6 slots spent a fifth of its time resetting two 8 MB copies. A launch must still start from clean
copies whatever came before: launches after launches with other keys and terms (bound and through Plan.run's
reused stages), after a refused launch, after the arrays behind a bound plan changed, and with the compiled
finish folding (no executor fold), and a run of one chunk (whose one copy the executor folds too, with the
compiled finish's bits). Each result is compared bit for bit with a fresh plan's (which resets its copies as it
allocates them), and the clean flags are read to show the reset really was skipped.
"""

import numpy as np
import pytest
from conftest import bt_spoiled_key_refused

import eagle
import eagle.native
import hawk
from hawk import Index, Mutable, Scalar

SLOTS = 70_000  # over hawk.abi.layout.PRIVATE_SLOTS: the executor folds the copies (eagle/native/folds.py)
N = 800_000
SMALL = 4096  # min_chunk: several chunks


@hawk.kernel
def fr_plain(key: Index, x: Scalar, acc: Mutable["slot":70_000]):  # noqa: F821
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def fr_comp(key: Index, x: Scalar, acc: Mutable["slot":70_000]):  # noqa: F821
    hawk.scatter(acc)[key] += x


KERNELS = {"plain": fr_plain, "compensated": fr_comp}


@pytest.fixture
def native():
    if eagle.native.library() is None:
        pytest.skip(f"no native executor here: {eagle.native.unavailable_reason()}")


def _data(seed: int, dtype):
    rng = np.random.default_rng([69_010, seed])
    key = rng.integers(-1, SLOTS, N).astype(np.int32)
    x = (rng.standard_normal(N) * 10.0 ** rng.integers(-8, 9, N)).astype(dtype)
    prior = np.where(rng.uniform(size=SLOTS) < 0.5, -0.0, rng.standard_normal(SLOTS)).astype(dtype)
    return key, x, prior


def _fresh(kernel, key, x, prior):
    plan = eagle.deploy(kernel, threads=2, min_chunk=SMALL)
    return np.asarray(plan.run(key=key, x=x, acc=prior.copy())).copy(), plan


def _same(got, want, what):
    g, w = np.asarray(got), np.asarray(want)
    if g.tobytes() != w.tobytes():  # (not an assert on the bytes: pytest would diff 560 KB of them)
        raise AssertionError(f"{what}: {int((g.view(np.uint8) != w.view(np.uint8)).sum())} bytes differ")


def _args(plan):
    """The native StageArgs of the plan's one stage (its latest reused run)."""
    entry = next(iter(plan._runs.entries.values()))
    return entry.stages[0].args


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("policy", ["plain", "compensated"])
def test_reused_runs_start_from_clean_copies(native, policy, dtype):
    kernel = KERNELS[policy]
    plan = eagle.deploy(kernel, threads=2, min_chunk=SMALL)
    for seed in range(4):  # (runs 2 on reuse the prepared stage: its copies were refilled by the fold)
        key, x, prior = _data(seed, dtype)
        got = np.asarray(plan.run(key=key, x=x, acc=prior.copy()))
        assert max(plan.last_chunks) > 1
        want, _ = _fresh(kernel, key, x, prior)
        _same(got, want, f"{policy} {dtype.__name__} run {seed}")
    args = _args(plan)
    assert args.clean() and all(f["refilled"] for f in args.fold_report()), args.fold_report()


@pytest.mark.parametrize("policy", ["plain", "compensated"])
def test_bound_launches_after_other_data_and_a_refusal(native, policy):
    kernel = KERNELS[policy]
    key, x, prior = _data(10, np.float64)
    acc = prior.copy()
    bound = eagle.deploy(kernel, threads=2, min_chunk=SMALL).bind(key=key, x=x, acc=acc)
    for seed in (11, 12):
        k2, x2, p2 = _data(seed, np.float64)
        key[:], x[:], acc[:] = k2, x2, p2
        bound.launch()
        _same(acc, _fresh(kernel, k2, x2, p2)[0], f"{policy} bound, data {seed}")
    bt_spoiled_key_refused(bound, key, acc, N // 3, SLOTS + 4)
    k3, x3, p3 = _data(13, np.float64)
    key[:], x[:], acc[:] = k3, x3, p3
    bound.launch()
    _same(acc, _fresh(kernel, k3, x3, p3)[0], f"{policy} bound, after the refusal")


def test_a_rebound_copy_buffer_is_reset(native):
    """The clean mark names the buffer's address: a copies buffer put in its place is reset before the lanes."""
    key, x, prior = _data(20, np.float64)
    plan = eagle.deploy(fr_plain, threads=2, min_chunk=SMALL)
    plan.run(key=key, x=x, acc=prior.copy())
    plan.run(key=key, x=x, acc=prior.copy())
    args = _args(plan)
    (k,) = args.clean()
    garbage = np.full(args.keep[k].size, 7.0)
    args.set_buffer(k, garbage)
    got = np.asarray(plan.run(key=key, x=x, acc=prior.copy()))
    _same(got, _fresh(fr_plain, key, x, prior)[0], "after the copies' buffer changed")


def test_no_refill_without_the_executors_fold(native, monkeypatch):
    """With the compiled finish folding (folds.PARALLEL_FINISH off) no copy is marked clean, and runs stay right."""
    import eagle.native.folds

    monkeypatch.setattr(eagle.native.folds, "PARALLEL_FINISH", False)
    plan = eagle.deploy(fr_plain, threads=2, min_chunk=SMALL)
    for seed in (30, 31):
        key, x, prior = _data(seed, np.float64)
        got = np.asarray(plan.run(key=key, x=x, acc=prior.copy()))
        monkeypatch.setattr(eagle.native.folds, "PARALLEL_FINISH", True)
        _same(got, _fresh(fr_plain, key, x, prior)[0], f"compiled finish, data {seed}")
        monkeypatch.setattr(eagle.native.folds, "PARALLEL_FINISH", False)
    assert not _args(plan).clean()


@pytest.mark.parametrize("policy", ["plain", "compensated"])
def test_one_chunks_copy_is_folded_and_refilled_too(native, policy, fold_reports, monkeypatch):
    """A run of few lanes into a large sink is one chunk: the executor folds its one copy as well (the compiled
    finish's steps: the same bits as the finish alone), refilling it, so the next launch skips the copy's reset."""
    import eagle.native.folds

    kernel = KERNELS[policy]
    plan = eagle.deploy(kernel, threads=2, min_chunk=SMALL)
    for seed in (40, 41, 42):
        key, x, prior = _data(seed, np.float64)
        key, x = key[:5000], x[:5000]
        got = np.asarray(plan.run(key=key, x=x, acc=prior.copy()))
        assert plan.last_chunks == (1,)
        want = prior.copy()
        np.add.at(want, key[key >= 0], x[key >= 0])
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
        _same(got, _fresh(kernel, key, x, prior)[0], f"{policy} one chunk, data {seed}")
        monkeypatch.setattr(eagle.native.folds, "PARALLEL_FINISH", False)
        _same(got, _fresh(kernel, key, x, prior)[0], f"{policy} one chunk against the compiled finish, {seed}")
        monkeypatch.setattr(eagle.native.folds, "PARALLEL_FINISH", True)
    assert fold_reports[-3] and all(f["refilled"] for f in fold_reports[-3]), fold_reports[-3]  # (plan.run's)
    assert _args(plan).clean()
