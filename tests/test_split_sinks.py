"""A stage that scatters into a sink too large for private copies and also reduces (or stores a cell, or reads a
cut cell beside a reduction) is split in two by split-stages (hawk/passes/split_sinks.py, issue 10's "no
single-thread cliffs"): the stage without those scatters runs in chunks, then the scatters alone run in slot
ranges. Before, the whole stage ran as one chunk (one GPU thread).

$HAWK_COPY_SLOTS=1024 makes the 3000-slot sinks below "too large" (tests/test_slot_ranges.py does the same).
Every run is checked at threads 1..4 with both stages really split (`plan.last_chunks`), bitwise across thread
counts, and against references that do not depend on the split: math.fsum (ordered sums), np.add.at in lane
order (plain adds: one chunk's bits), one chunk's Neumaier steps (compensated sinks), the last writer (stores).
"""

import math

import numpy as np
import pytest
from conftest import (
    bt_neumaier_scatter,
    bt_same_bits,
    bt_sink_keys,
    bt_spirv_missing,
    bt_split_runs,
    bt_target_missing,
)

import eagle
import hawk
from eagle.errors import InputError
from hawk import Index, Mutable, Scalar
from hawk.abi.layout import COPY_SLOTS_ENV

SLOTS = 3000
N = 20_000
MIN_CHUNK = 1024
THREADS = (1, 2, 3, 4)


@pytest.fixture(autouse=True)
def small_copy_limit(monkeypatch):
    monkeypatch.setenv(COPY_SLOTS_ENV, "1024")


@hawk.kernel
def ss_sum(key: Index, x: Scalar, acc: Mutable["slot":3000]) -> Scalar:
    hawk.scatter(acc)[key] += x  # (auto: compensated)
    return hawk.sum(x * 2.0, policy="ordered")


@hawk.kernel
def ss_store_max(key: Index, x: Scalar, buf: Mutable["slot":3000], small: Mutable["bin":8], top: Mutable[Scalar]):
    hawk.scatter(buf)[key] = x * 3.0  # a store: the last lane wins
    hawk.scatter(small, policy="ordered")[key % 8] += x  # (small: stays in the first stage)
    top = hawk.max(x)  # noqa: F841


@hawk.kernel
def ss_staged(key: Index, x: Scalar, acc: Mutable["slot":3000], var: Mutable[Scalar]):
    mu = hawk.mean(x, policy="ordered")
    d = x - mu
    var = hawk.sum(d * d, policy="ordered")  # noqa: F841
    hawk.scatter(acc, policy="plain")[key] += d  # (reads the mean, a cut cell, in the split-off stage)


def _keys(rng, n=N, slots=SLOTS):
    return bt_sink_keys(rng, n, slots)


def _runs(kernel, sinks, stages, **planes):
    """The kernel's outputs at threads 1..4, the same bits at every count; each run's first stage in several
    chunks and its split-off stage in one part per thread (conftest.bt_split_runs)."""
    return bt_split_runs(kernel, sinks, stages, THREADS, MIN_CHUNK, **planes)


def test_a_sum_beside_a_large_compensated_sink():
    rng = np.random.default_rng(91_001)
    key = _keys(rng)
    x = rng.normal(size=N) * 10.0 ** rng.integers(-6, 7, size=N)
    prior = rng.normal(size=SLOTS)
    out = _runs(ss_sum, ("acc",), 2, key=key, x=x, acc=prior)
    assert float(out["result"][0]) == math.fsum((x * 2.0).tolist())  # ordered: the exact sum, rounded once
    bt_same_bits(out["acc"], bt_neumaier_scatter(prior, key, x, np.float64), "one chunk's Neumaier steps")


def test_stores_a_small_sink_and_a_max_beside_a_large_stored_sink():
    rng = np.random.default_rng(91_002)
    key = _keys(rng)
    x = rng.normal(size=N)
    prior, small = rng.normal(size=SLOTS), rng.normal(size=8)
    out = _runs(ss_store_max, ("buf", "small"), 2, key=key, x=x, buf=prior, small=small)
    want = prior.copy()
    for k, v in zip(key.tolist(), (x * 3.0).tolist(), strict=True):
        if k >= 0:
            want[k] = v  # the last lane wins
    bt_same_bits(out["buf"], want, "last writer")
    assert float(out["top"][0]) == x.max()
    k8 = key % 8  # (a key of -1 is 7 here: the small sink takes it)
    want_small = [math.fsum([float(small[s]), *x[k8 == s].tolist()]) for s in range(8)]
    assert out["small"].tolist() == want_small  # ordered: the exact sum, rounded once


def test_the_split_off_stage_reads_a_cut_cell():
    rng = np.random.default_rng(91_003)
    key = _keys(rng)
    x = rng.normal(size=N) + 5.0
    prior = rng.normal(size=SLOTS)
    out = _runs(ss_staged, ("acc",), 3, key=key, x=x, acc=prior)
    mu = math.fsum(x.tolist()) / N  # ordered mean: the exact sum rounded once, then one division
    d = x - mu
    want = prior.copy()
    np.add.at(want, key[key >= 0], d[key >= 0])  # plain adds in lane order: one chunk's bits
    bt_same_bits(out["acc"], want, "np.add.at of x - mean")
    assert float(out["var"][0]) == math.fsum((d * d).tolist())


def test_the_stages_and_their_layouts(monkeypatch):
    spec = ss_sum.spec_for("float64", {})
    names = [st.name for st in ss_sum.stages(spec)]
    assert names == ["ss_sum", "ss_sum_2"]
    first, second = (ss_sum.layout(spec, stage=k) for k in (0, 1))
    assert "acc" not in first.sinks and first.parallel_span() is not None
    assert second.slot_ranges() and list(second.sinks) == ["acc"] and not second.reductions
    assert ss_sum.default_spec() == spec and ss_sum.stage_count == 2  # (under the same copy limit)
    monkeypatch.delenv(COPY_SLOTS_ENV)  # copies up to PAIR_SLOTS: one stage, as before
    assert ss_sum.default_spec() != spec and ss_sum.stage_count == 1
    assert [st.name for st in ss_sum.stages(ss_sum.default_spec())] == ["ss_sum"]


@hawk.kernel
def ss_bad_large(key: Index, x: Scalar, buf: Mutable["slot":3000], y: Mutable[Scalar]) -> Scalar:
    hawk.scatter(buf, policy="plain")[key - 1] += x  # (a computed key: checked as the lanes run)
    y = x * 2.0  # noqa: F841  (written by the first stage)
    return hawk.sum(x)


def test_a_bad_key_of_the_large_sink_changes_nothing():
    # refused in the split-off stage, after the first stage ran: every passed array is as it was
    rng = np.random.default_rng(91_004)
    key = _keys(rng) + 1
    key[12_345] = SLOTS + 8
    x = rng.normal(size=N)
    prior, y = rng.normal(size=SLOTS), rng.normal(size=N)
    given = {"buf": prior.copy(), "y": y.copy()}
    plan = eagle.deploy(ss_bad_large, threads=4, min_chunk=MIN_CHUNK)
    with pytest.raises(InputError, match=f"sink 'buf' of kernel 'ss_bad_large'.*first bad key: {SLOTS + 7}"):
        plan.run(key=key, x=x, **given)
    bt_same_bits(given["buf"], prior, "the large sink")
    bt_same_bits(given["y"], y, "the lane output, written by the first stage")
    key[12_345] = 0  # (-1: nothing)
    out = plan.run(key=key, x=x, **given)
    assert plan.last_chunks[0] > 1 and plan.last_chunks[1] == 4
    bt_same_bits(out["y"], x * 2.0, "the lane output")


@hawk.kernel
def ss_bad_small(key: Index, k2: Index, x: Scalar, acc: Mutable["slot":3000], small: Mutable["bin":8]) -> Scalar:
    hawk.scatter(acc, policy="plain")[key] += x
    hawk.scatter(small, policy="plain")[k2 - 1] += x  # (a computed key: checked as the lanes run)
    return hawk.sum(x)


def test_a_bad_key_of_the_first_stage_changes_nothing():
    rng = np.random.default_rng(91_006)
    key = _keys(rng)
    k2 = rng.integers(1, 9, size=N).astype(np.int32)
    k2[777] = 9
    x = rng.normal(size=N)
    acc, small = rng.normal(size=SLOTS), rng.normal(size=8)
    given = {"acc": acc.copy(), "small": small.copy()}
    with pytest.raises(InputError, match="sink 'small' of kernel 'ss_bad_small'.*first bad key: 8"):
        eagle.deploy(ss_bad_small, threads=4, min_chunk=MIN_CHUNK).run(key=key, k2=k2, x=x, **given)
    bt_same_bits(given["acc"], acc, "the large sink")
    bt_same_bits(given["small"], small, "the small sink")


def test_spirv_gives_the_hosts_bits():
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    rng = np.random.default_rng(91_005)
    key = _keys(rng)
    x = rng.normal(size=N) + 5.0
    prior = rng.normal(size=SLOTS)
    want = eagle.deploy(ss_staged, threads=4, min_chunk=MIN_CHUNK).run(key=key, x=x, acc=prior.copy())
    gpu = eagle.deploy(ss_staged, target="spirv")
    got = gpu.run(key=key, x=x, acc=prior.copy())
    assert len(gpu.last_chunks) == 3 and gpu.last_chunks[-1] > 1, gpu.last_chunks  # a thread per slot range
    bt_same_bits({k: np.asarray(v) for k, v in got.items()}, {k: np.asarray(v) for k, v in want.items()},
                 "spirv against host")


@hawk.kernel
def ss_reads_own(key: Index, x: Scalar, acc: Mutable["slot":3000], y: Mutable[Scalar]) -> Scalar:
    hawk.scatter(acc, policy="plain")[key] += y * x  # reads y as it was passed (the lane's own, before it assigns)
    y = y + x  # noqa: F841
    return hawk.sum(x, policy="ordered")


def test_scatters_that_read_a_plane_the_rest_writes_run_first():
    # the large sink's scatters read y before the stage writes it: their stage runs first (in slot ranges), the
    # rest after it (in chunks); before, the whole stage ran as one chunk
    spec = ss_reads_own.spec_for("float64", {})
    first, second = (ss_reads_own.layout(spec, stage=k) for k in (0, 1))
    assert first.slot_ranges() and list(first.sinks) == ["acc"] and not first.reductions
    assert "acc" not in second.sinks and second.reductions and second.parallel_span() is not None
    rng = np.random.default_rng(91_007)
    key = _keys(rng)
    x, y, prior = rng.normal(size=N), rng.normal(size=N), rng.normal(size=SLOTS)
    for passed in (True, False):  # (an omitted y starts at zero, for both stages)
        y0 = y if passed else np.zeros(N)
        got = []
        for threads in THREADS:
            plan = eagle.deploy(ss_reads_own, threads=threads, min_chunk=MIN_CHUNK)
            out = plan.run(key=key, x=x, acc=prior.copy(), **({"y": y.copy()} if passed else {}))
            chunks = plan.last_chunks
            assert len(chunks) == 2 and chunks[0] == threads and (threads == 1 or chunks[1] > 1), chunks
            got.append({k: np.asarray(v) for k, v in out.items()})
        want = prior.copy()
        np.add.at(want, key[key >= 0], (y0 * x)[key >= 0])  # plain adds in lane order: one chunk's bits
        for out in got:
            bt_same_bits(out["acc"], want, "np.add.at of y * x, y as passed")
            bt_same_bits(out["y"], y0 + x, "the lane output")
            assert float(out["result"][0]) == math.fsum(x.tolist())
