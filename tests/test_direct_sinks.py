"""A passed plain or compensated sink with private copies is written in place by a launch that can refuse only in
its lanes (eagle/launch.py Launcher.direct_sinks): the lanes write only the chunks' copies, so a bad key is known
before the fold and the finish write the sink, and a refused launch points them at a scratch array instead
(executor.c `diverts`; the Python pool the same). Before, every launch copied each passed sink into a scratch
copy and back (1.6 ms for 8 MB). Checked: results and in-place writes; a refusal leaves the sink's bits as they
were (Plan.run, its reused stages, bound launches; native executor and Python pool; a small sink and a large one
whose copies the executor folds); the sinks that must stay staged stay staged (a later stage can refuse, the
finish can refuse, the sink is stored into).
"""

import numpy as np
import pytest

import eagle
import eagle.native
import hawk
from eagle.errors import InputError
from hawk import Index, Mutable, Scalar


@hawk.kernel
def ds_small(key: Index, x: Scalar, acc: Mutable["slot":64]):  # noqa: F821
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def ds_large(key: Index, x: Scalar, acc: Mutable["slot":70_000]):  # noqa: F821
    hawk.scatter(acc)[key] += x  # ("auto": compensated; over PRIVATE_SLOTS: the executor folds its copies)
    # (800,000 lanes: enough for several chunks of its copies, two values a slot)


@hawk.kernel
def ds_two(key: Index, x: Scalar, acc: Mutable["slot":64], acc2: Mutable["slot":64]):  # noqa: F821
    hawk.scatter(acc, policy="plain")[key] += x
    c = x - hawk.mean(x)
    hawk.scatter(acc2, policy="plain")[key] += c  # (a second stage, which can refuse after the first wrote acc)


@hawk.func
def ds_half_then_add(a, b):
    return a * 0.5 + b


@hawk.kernel
def ds_fold(key: Index, x: Scalar, acc: Mutable["slot":64]) -> Scalar:  # noqa: F821
    hawk.scatter(acc, policy="plain")[key] += x
    return hawk.reduce(ds_half_then_add, x, where=x > 1e9)  # (an empty slice: the finish refuses)


@hawk.kernel
def ds_stored(key: Index, x: Scalar, acc: Mutable["slot":64]):  # noqa: F821
    hawk.scatter(acc)[key] = x


N = 800_000


@pytest.fixture(params=["1", "0"], ids=["native", "python"])
def executor(request, monkeypatch):
    monkeypatch.setenv("EAGLE_NATIVE", request.param)
    monkeypatch.setattr(eagle.native, "_STATE", {})
    if request.param == "1" and eagle.native.library() is None:
        pytest.skip(f"no native executor here: {eagle.native.unavailable_reason()}")
    return request.param


def _data(slots: int, seed: int):
    rng = np.random.default_rng([69_020, seed])
    return (rng.integers(0, slots, N).astype(np.int32), rng.standard_normal(N),
            rng.standard_normal(slots))


def _recipe(plan, **planes) -> list[tuple[str, str]]:
    """How each stage of a run of these planes takes the caller's arrays: "given" (in place) or "staged"."""
    b = plan.binder.bind(planes)
    stages, _ = plan.stages(b, 0, b.lanes)
    return [(how[0], how[1]) for st in stages for how in st.recipe if how[0] in ("given", "staged")]


def _same(got, want, what):
    if np.asarray(got).tobytes() != np.asarray(want).tobytes():  # (no pytest diff of large byte strings)
        raise AssertionError(f"{what}: the bits differ")


@pytest.mark.parametrize("kernel, slots", [(ds_small, 64), (ds_large, 70_000)])
def test_written_in_place_and_left_alone_when_refused(executor, kernel, slots):
    plan = eagle.deploy(kernel, threads=2, min_chunk=4096)
    for seed in range(3):  # (runs 2 and 3 reuse the prepared stage)
        key, x, prior = _data(slots, seed)
        acc = prior.copy()
        got = plan.run(key=key, x=x, acc=acc)
        assert np.shares_memory(np.asarray(got), acc) and max(plan.last_chunks) > 1
        want = prior.copy()
        np.add.at(want, key, x)
        np.testing.assert_allclose(acc, want, rtol=0, atol=1e-9)
        bad = key.copy()
        bad[N // 2] = slots + 3
        before = acc.copy()
        with pytest.raises(InputError):  # (Plan.run checks keys from a plane before it launches)
            plan.run(key=bad, x=x, acc=acc)
        _same(acc, before, f"{kernel.name}: a refused Plan.run")
    assert _recipe(plan, key=key, x=x, acc=acc) == [("given", "acc")]


@pytest.mark.parametrize("kernel, slots", [(ds_small, 64), (ds_large, 70_000)])
def test_a_bound_launch_refused_in_its_lanes_leaves_the_sink(executor, kernel, slots):
    """Keys spoiled after binding are found by the lanes: the fold and finish then write the scratch array."""
    key, x, prior = _data(slots, 5)
    acc = prior.copy()
    bound = eagle.deploy(kernel, threads=2, min_chunk=4096).bind(key=key, x=x, acc=acc)
    bound.launch()
    want = prior.copy()
    np.add.at(want, key, x)
    np.testing.assert_allclose(acc, want, rtol=0, atol=1e-9)
    before = acc.copy()
    key[[7, N - 9]] = slots + 1
    with pytest.raises(InputError):
        bound.launch()
    _same(acc, before, f"{kernel.name}: a refused bound launch")
    key[[7, N - 9]] = 0
    acc[:] = prior
    bound.launch()  # (and the launch after it starts from clean copies)
    want = prior.copy()
    np.add.at(want, key, x)
    np.testing.assert_allclose(acc, want, rtol=0, atol=1e-9)


def test_sinks_that_stay_staged(executor):
    """A sink of a stage before another, of a stage whose finish can refuse, or stored into: staged
    (a scratch copy written, then copied back); and each refusal leaves every passed sink as it was."""
    key, x, prior = _data(64, 9)
    plan = eagle.deploy(ds_two, threads=2, min_chunk=4096)
    acc, acc2 = prior.copy(), prior.copy()
    plan.run(key=key, x=x, acc=acc, acc2=acc2)
    # (acc2: in the run's last stage; acc: in a stage before one that can refuse)
    assert _recipe(plan, key=key, x=x, acc=acc, acc2=acc2) == [("staged", "acc"), ("given", "acc2")]
    bound = plan.bind(key=key, x=x, acc=acc, acc2=acc2)
    before = acc.copy(), acc2.copy()
    key[N // 3] = 99
    with pytest.raises(InputError):
        bound.launch()
    _same(acc, before[0], "ds_two acc")
    _same(acc2, before[1], "ds_two acc2")
    key[N // 3] = 0
    plan = eagle.deploy(ds_fold, threads=2, min_chunk=4096)
    acc = prior.copy()
    with pytest.raises(InputError, match="hawk.reduce"):
        plan.run(key=key, x=x, acc=acc)
    _same(acc, prior, "ds_fold: the finish refused")
    plan = eagle.deploy(ds_stored, threads=2, min_chunk=4096)
    acc = prior.copy()
    plan.run(key=key, x=x, acc=acc)
    assert _recipe(plan, key=key, x=x, acc=acc) == [("staged", "acc")]
