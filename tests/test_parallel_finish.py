"""The parallel finish of an ordered sink's (high, low) pairs (#13: the stencil gradient's cost).

An ordered sink up to PAIR_SLOTS slots keeps a pair per slot per chunk; when no term spilled into its exact
accumulators, the finish adds each slot's prior content and pairs by TwoSums and rounds once. The executor runs
that step by ranges of slots on every thread (eagle/native/folds.py, executor.c pairs_range) and leaves the sink
to the compiled finish when a term spilled (skip) or a slot's pair lost a bit (failed). The tests check that the
ranges really ran on several threads (StageArgs.fold_report, with the executor dealing its tasks out to every
thread it asks for: eagle.native.deal_tasks), and that the bits equal the compiled finish's alone
(folds.PARALLEL_FINISH off), a one-thread run's and math.fsum's (the exact sum rounded once).
"""

import math

import numpy as np
import pytest

import eagle
import eagle.native
import eagle.native.folds
import hawk
from eagle.reverse import Reverse, plan_source
from hawk import Grid, Index, Mutable, Param, Scalar

SLOTS = 40_000  # over folds.FOLD_SLOTS: the executor folds the pairs
N = 200_000
SMALL = 4096  # min_chunk: runs split into many chunks


@hawk.kernel
def pf_ordered(key: Index, x: Scalar, acc: Mutable["slot":40_000]):  # noqa: F821
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def pf_wide(key: Index, x: Scalar, acc: Mutable["slot":70_000]):  # noqa: F821  (4 ranges of the fold)
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def pf_stencil(g: Grid["r", "c":200], u: Scalar, k: Param) -> Scalar:  # noqa: F821
    lap = u.at(r=g.r + 1) + u.at(r=g.r - 1) + u.at(c=g.c + 1) + u.at(c=g.c - 1) - 4.0 * u
    return lap * lap * k / (1.0 + u * u)


@pytest.fixture
def reports(fold_reports):
    """Every native launch's fold report, in order (conftest.fold_reports)."""
    return fold_reports


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(np.int64 if a.dtype == np.float64 else np.int32)


def _data(case: str, dtype):
    rng = np.random.default_rng(13_013)
    key = rng.integers(0, SLOTS, size=N).astype(np.int32)
    x = rng.normal(size=N)
    prior = rng.normal(size=SLOTS)
    if case == "spill":  # magnitudes a pair cannot hold: terms go to the accumulators (the finish's exact path)
        x *= 10.0 ** rng.integers(-150, 150, size=N)
    elif case == "lost":  # each chunk's pair exact, but combined they are not: the finish's exact path for those
        key[np.isin(key, (5, 9, 11))] = 6  # slots, the fold's sums for the others
        key[[0, 1, 2, -1]] = 5, 9, 11, 5
        prior[5], x[0], x[-1] = 1.0, 2.0 ** -60, 2.0 ** -130  # three floats: more bits than a pair holds
        prior[9], x[1] = 1.7e308, 1.7e308  # overflows: +inf
        prior[11] = np.nan  # a passed NaN: the canonical NaN
    elif case == "tie":  # float32: slot 5's exact sum lies just past a float32 tie (the float64 pair's low decides,
        key[key == 5] = 6  # so the fold leaves it to the compiled finish's exact path: pairs_range_f32)
        key[[0, -1]] = 5, 5
        prior[5], x[0], x[-1] = 1.0, 2.0 ** -24, 2.0 ** -60
    return key, x.astype(dtype), prior.astype(dtype)


def _fsum(key, x, prior) -> np.ndarray:
    terms = [[p] for p in prior.tolist()]
    for k, v in zip(key.tolist(), x.tolist(), strict=True):
        terms[k].append(v)
    out = []
    for t in terms:
        try:
            out.append(math.fsum(t) + 0.0)
        except OverflowError:  # (positive terms here: the exact sum rounds to +inf)
            out.append(math.inf)
    return np.array(out)


def _run(key, x, prior, threads):
    plan = eagle.deploy(pf_ordered, target="host", threads=threads, min_chunk=SMALL)
    out = np.asarray(plan.run(key=key, x=x, acc=prior.copy())).copy()
    return out, plan.last_chunks


@pytest.mark.parametrize("native", ["1", "0"])
@pytest.mark.parametrize("case,dtype", [("plain", np.float64), ("plain", np.float32), ("spill", np.float64),
                                        ("lost", np.float64), ("tie", np.float32)])
def test_ordered_sink_folded_in_parallel_has_the_finishs_bits(monkeypatch, reports, native, case, dtype):
    monkeypatch.setenv("EAGLE_NATIVE", native)
    monkeypatch.setattr(eagle.native, "_STATE", {})
    key, x, prior = _data(case, dtype)
    got = {}
    for parallel in (True, False):
        monkeypatch.setattr(eagle.native.folds, "PARALLEL_FINISH", parallel)
        for threads in (1, 2):
            got[parallel, threads], chunks = _run(key, x, prior, threads)
            if threads == 2:
                assert min(chunks) > 1, f"threads=2 ran {chunks} chunk(s)"
    if native == "1" and case == "lost":  # the lost flags are all cleared again: a second launch, the same bits
        monkeypatch.setattr(eagle.native.folds, "PARALLEL_FINISH", True)
        plan = eagle.deploy(pf_ordered, target="host", threads=2, min_chunk=SMALL)
        for _ in range(2):
            again = np.asarray(plan.run(key=key, x=x, acc=prior.copy()))
            np.testing.assert_array_equal(_bits(again), _bits(got[True, 2]))
        assert reports[-1][0]["failed"]
    want = got[False, 1]
    if case == "lost":
        assert np.isposinf(want[9]) and _bits(want)[11] == 0x7FF8000000000000
    if case == "tie":
        assert want[5] == np.float32(1.0 + 2.0 ** -23)
    for k, v in got.items():
        np.testing.assert_array_equal(_bits(v), _bits(want), err_msg=f"{case} {np.dtype(dtype).name} {k}")
    if dtype == np.float64:  # the exact sum of each slot's terms, rounded once
        np.testing.assert_array_equal(_bits(want), _bits(_fsum(key, x, prior)))
    if native == "1":  # what the executor did in the parallel run at threads=2 (the 2nd launch)
        (fold,) = reports[1]
        assert fold["kind"] == (3 if dtype == np.float64 else 4) and fold["slots"] == SLOTS
        assert fold["skip"] == (case == "spill") and fold["failed"] == (case in ("lost", "tie"))
        if case != "spill":
            assert fold["parts"] > 1, fold
        assert reports[2:4] == [[], []], "PARALLEL_FINISH off: no fold"


@pytest.fixture
def dealt():
    """The executor deals each launch's tasks out to every thread it asks for (eagle.native.deal_tasks), so that
    which threads take part does not hang on the machine's load; the default setting again afterwards."""
    if eagle.native.library() is None:
        pytest.skip(f"no native executor here: {eagle.native.unavailable_reason()}")
    was = eagle.native.deal_tasks(True)
    assert was is False, "tasks are claimed as they come by default"
    yield
    eagle.native.deal_tasks(was)


@pytest.mark.parametrize("kernel,threads", [(pf_ordered, 2), (pf_wide, 4)])
def test_the_fold_runs_on_several_threads(reports, dealt, kernel, threads):
    slots = kernel.signature.get("acc").axes[0].extent
    key, x, prior = _data("plain", np.float64)
    if slots != SLOTS:  # keys over the wider sink's every slot
        key = np.random.default_rng(17).integers(0, slots, size=N).astype(np.int32)
        prior = np.random.default_rng(18).normal(size=slots)
    plan = eagle.deploy(kernel, target="host", threads=threads, min_chunk=SMALL)
    want = _bits(_fsum(key, x, prior))
    for _ in range(3):  # every launch: every thread asked for runs a range of the fold
        out = np.asarray(plan.run(key=key, x=x, acc=prior.copy()))
        (fold,) = reports[-1]
        assert fold["kind"] == 3 and not fold["skip"] and not fold["failed"], fold
        assert fold["parts"] >= threads and fold["threads"] == threads, fold
        np.testing.assert_array_equal(_bits(out), want)


def test_stencil_gradient_bits_with_the_parallel_finish(monkeypatch, reports):
    # the `.at` adjoint's ordered sink (one slot per lane): 300 x 200 lanes
    rng = np.random.default_rng(5)
    u, ct = rng.normal(size=(300, 200)), rng.normal(size=(300, 200))
    got = {}
    for parallel in (True, False):
        monkeypatch.setattr(eagle.native.folds, "PARALLEL_FINISH", parallel)
        for threads in (1, 2):
            plan = eagle.deploy(pf_stencil, target="host", threads=threads, min_chunk=SMALL)
            before = len(reports)
            scatter = Reverse(plan, {"u": u, "k": 0.7}, None, plan_source(plan, gather=False))  # not the gather form
            got[parallel, threads] = {k: np.asarray(v).copy() for k, v in scatter(ct).items()}
            folds = [f for r in reports[before:] for f in r]
            if parallel and threads == 2 and eagle.native.library() is not None:
                assert any(f["kind"] == 3 and f["parts"] > 1 and not f["skip"] and not f["failed"]
                           for f in folds), folds
            elif not parallel:
                assert folds == []
    want = got[False, 1]
    for k, g in got.items():
        for name in want:
            np.testing.assert_array_equal(_bits(g[name]), _bits(want[name]), err_msg=f"{k} {name}")
