"""Large sinks fed by a scan's or a block reduction's values (issue 10, "no single-thread cliffs"): a stage whose
scatters into a sink too large for private copies take a forward or reverse `hawk.scan`'s values (read from the
offsets an earlier stage's finish left; a keyed scan's too, its running values in a row of each chunk's own) or a
block reduction's (`hawk.sum(x, over="c")` read in the same body) runs in slot ranges
(hawk.abi.layout.wants_slot_ranges): every chunk runs every lane, recomputing the scan's running values block by
block and the block totals tile by tile as one chunk would, and applies only its own slots. When the stage does
more (an ordered total), split_sinks splits those scatters off into such a stage. Before, every one of these
stages ran as one chunk (one GPU thread).

$HAWK_COPY_SLOTS=1024 makes the 3000-slot sinks "too large" (as in tests/test_split_sinks.py). Each run is
checked at threads 1..4 with the slot-range stage really in one part per thread (`plan.last_chunks`), the same
bits at every count, and against references that do not depend on the split: the scan's block contract
(docs/semantics.md "Scans") computed here in Python, one chunk's Neumaier steps for compensated sinks, the last
writer for stores, lane-order adds for plain sinks, math.fsum for ordered sums.
"""

import math

import numpy as np
import pytest
from conftest import (
    bt_gpu_builds,
    bt_neumaier_scatter,
    bt_same_bits,
    bt_sink_keys,
    bt_spirv_missing,
    bt_split_runs,
    bt_target_missing,
)

import eagle
import hawk
import hawk.math as m
from eagle.errors import InputError
from hawk import Grid, Index, Mutable, Scalar
from hawk.abi.layout import COPY_SLOTS_ENV, SCAN_BLOCK

SLOTS = 3000
N = 20_000
ROW = 64  # (Grid kernels: ROWS rows of ROW lanes, whole ordered blocks of lanes per chunk)
ROWS = 320
MIN_CHUNK = 1024
THREADS = (1, 2, 3, 4)


@pytest.fixture(autouse=True)
def small_copy_limit(monkeypatch):
    monkeypatch.setenv(COPY_SLOTS_ENV, "1024")


@hawk.kernel
def sc_running(key: Index, x: Scalar, acc: Mutable["slot":3000]):
    c = hawk.scan(x)
    hawk.scatter(acc)[key] += c  # (auto: compensated)


@hawk.kernel
def sc_reverse_store(key: Index, x: Scalar, buf: Mutable["slot":3000]):
    after = hawk.scan(x, reverse=True, exclusive=True)
    hawk.scatter(buf)[key] = after * 2.0  # a store: the last lane wins


@hawk.kernel
def sc_segments(key: Index, x: Scalar, flag: Index, buf: Mutable["slot":3000], acc: Mutable["slot":3000],
                tot: Mutable[Scalar]):
    c = hawk.scan(x * 2.0, reset=flag == 1)
    hawk.scatter(buf)[key] = c - x  # (large and stored: the split-off stage)
    hawk.scatter(acc, policy="ordered")[key] += c  # (ordered, only added: shared exact accumulators, stays)
    tot = hawk.sum(c, policy="ordered")  # noqa: F841


@hawk.kernel
def sc_keyed(key: Index, d: Index, x: Scalar, acc: Mutable["slot":3000]):
    c = hawk.scan(x, by=d, keys=16)  # (each key's running total; key -1: the identity)
    hawk.scatter(acc)[key] += c  # (auto: compensated)


@hawk.kernel
def sc_keyed_dest(key: Index, d: Index, x: Scalar, buf: Mutable["slot":3000], tot: Mutable[Scalar]):
    dest = hawk.scan(1, by=d, keys=16, order="key", exclusive=True)  # (a stable counting sort's destination)
    hawk.scatter(buf)[m.where(key >= 0, dest % 3000, -1)] = x
    tot = hawk.sum(x * float(dest), policy="ordered")  # noqa: F841


@hawk.kernel
def sc_rows(lane: Grid["r", "c":64], key: Index, x: Scalar, acc: Mutable["slot":3000]):
    s = hawk.sum(x, over="c", policy="ordered")
    top = hawk.max(x, over="c")
    hawk.scatter(acc, policy="plain")[key] += x * s - top


@hawk.kernel
def sc_rows_total(lane: Grid["r", "c":64], key: Index, x: Scalar, acc: Mutable["slot":3000], tot: Mutable[Scalar]):
    s = hawk.sum(x, over="c", policy="compensated")
    hawk.scatter(acc)[key] += x - s  # (auto: compensated)
    tot = hawk.sum(x * s, policy="ordered")  # noqa: F841


def _keys(rng, n=N):
    return bt_sink_keys(rng, n, SLOTS)


def _blocked_scan(x, flags=None) -> np.ndarray:
    """The scan's block contract, one lane at a time: each SCAN_BLOCK block runs from its offset (the in-order
    fold of the earlier blocks' totals, -0.0 first); a flagged lane starts afresh; a block's total starts from
    -0.0 and restarts at a flag, and a block with a flag hands on its total alone."""
    out = np.empty(x.size)
    off = -0.0
    for b0 in range(0, x.size, SCAN_BLOCK):
        run, tot, flagged = off, -0.0, False
        for i in range(b0, min(b0 + SCAN_BLOCK, x.size)):
            v = float(x[i])
            if flags is not None and flags[i]:
                run, tot, flagged = v, v, True
            else:
                run, tot = run + v, tot + v
            out[i] = run
        off = tot if flagged else off + tot
    return out


def _keyed_scan(x, d, keys: int) -> np.ndarray:
    """A keyed scan's block contract (order="lane", inclusive), one lane at a time: each key's running value starts
    a SCAN_BLOCK block from its offset (the in-order fold of that key's earlier block totals, -0.0 first); a lane
    with key -1 gets the identity, -0.0."""
    out = np.empty(x.size)
    off = [-0.0] * keys
    for b0 in range(0, x.size, SCAN_BLOCK):
        run, tot = list(off), [-0.0] * keys
        for i in range(b0, min(b0 + SCAN_BLOCK, x.size)):
            k = int(d[i])
            if k < 0:
                out[i] = -0.0
                continue
            run[k], tot[k] = run[k] + float(x[i]), tot[k] + float(x[i])
            out[i] = run[k]
        off = [o + t for o, t in zip(off, tot, strict=True)]
    return out


def _last_writer(prior, key, values) -> np.ndarray:
    want = prior.copy()
    for k, v in zip(key.tolist(), values.tolist(), strict=True):
        if k >= 0:
            want[k] = v
    return want


def _runs(kernel, sinks, stages, **planes):
    return bt_split_runs(kernel, sinks, stages, THREADS, MIN_CHUNK, **planes)


def _last_layout(kernel):
    spec = kernel.spec_for("float64", {})
    return kernel.layout(spec, stage=kernel.stage_count - 1)


def test_a_forward_scan_feeds_a_large_compensated_sink():
    lay = _last_layout(sc_running)
    assert lay.slot_ranges() and [b.role for b in lay.buffers if b.name == "cut0"] == ["scanoff"]
    rng = np.random.default_rng(92_001)
    key = _keys(rng)
    x = rng.normal(size=N) * 10.0 ** rng.integers(-4, 5, size=N)
    prior = rng.normal(size=SLOTS)
    out = _runs(sc_running, ("acc",), 2, key=key, x=x, acc=prior)
    bt_same_bits(out["acc"], bt_neumaier_scatter(prior, key, _blocked_scan(x), np.float64),
                 "one chunk's Neumaier steps over the blocked scan")


def test_a_reverse_exclusive_scan_feeds_a_large_stored_sink():
    rng = np.random.default_rng(92_002)
    key = _keys(rng)
    x = rng.normal(size=N)
    prior = rng.normal(size=SLOTS)
    out = _runs(sc_reverse_store, ("buf",), 2, key=key, x=x, buf=prior)
    after = np.concatenate([np.cumsum(x[::-1])[::-1][1:], [-0.0]])  # (one fold from the last lane down)
    bt_same_bits(out["buf"], _last_writer(prior, key, after * 2.0), "the last writer of the reverse scan")


def test_a_segmented_scan_beside_an_ordered_total_splits_off_its_large_sink():
    # scan totals, then the rest (the ordered sink and total, in chunks), then the stored sink (slot ranges)
    lay = _last_layout(sc_segments)
    assert lay.slot_ranges() and list(lay.sinks) == ["buf"] and not lay.reductions
    rng = np.random.default_rng(92_003)
    key = _keys(rng)
    x = rng.normal(size=N)
    flag = (rng.uniform(size=N) < 0.001).astype(np.int32)
    flag[[5, SCAN_BLOCK - 1, 2 * SCAN_BLOCK]] = 1
    buf, acc = rng.normal(size=SLOTS), rng.normal(size=SLOTS)
    out = _runs(sc_segments, ("buf", "acc"), 3, key=key, x=x, flag=flag, buf=buf, acc=acc)
    c = _blocked_scan(x * 2.0, flag == 1)
    bt_same_bits(out["buf"], _last_writer(buf, key, c - x), "the last writer of the segmented scan")
    assert float(out["tot"][0]) == math.fsum(c.tolist())  # ordered: the exact sum, rounded once
    live = key >= 0
    for s in (0, 17, SLOTS - 1):
        assert out["acc"][s] == math.fsum([float(acc[s]), *c[live & (key == s)].tolist()])


def test_a_keyed_scan_feeds_a_large_compensated_sink():
    lay = _last_layout(sc_keyed)
    assert lay.slot_ranges() and lay.keyed  # (its running values in a row of each chunk's own)
    rng = np.random.default_rng(92_008)
    key = _keys(rng)
    d = rng.integers(-1, 16, size=N).astype(np.int32)
    x = rng.normal(size=N) * 10.0 ** rng.integers(-4, 5, size=N)
    prior = rng.normal(size=SLOTS)
    out = _runs(sc_keyed, ("acc",), 2, key=key, d=d, x=x, acc=prior)
    bt_same_bits(out["acc"], bt_neumaier_scatter(prior, key, _keyed_scan(x, d, 16), np.float64),
                 "one chunk's Neumaier steps over the keyed scan")


def test_a_keyed_destination_beside_an_ordered_total_splits_off_its_large_sink():
    rng = np.random.default_rng(92_009)
    key = _keys(rng)
    d = rng.integers(-1, 16, size=N).astype(np.int32)
    x = rng.normal(size=N)
    buf = rng.normal(size=SLOTS)
    out = _runs(sc_keyed_dest, ("buf",), 3, key=key, d=d, x=x, buf=buf)
    live = d >= 0  # lanes before this one in (digit, lane) order; key -1: the identity, 0
    order = np.argsort(np.where(live, d, 99), kind="stable")
    dest = np.zeros(N, dtype=np.int64)
    dest[order[:live.sum()]] = np.arange(live.sum())
    bt_same_bits(out["buf"], _last_writer(buf, np.where(key >= 0, dest % SLOTS, -1), x), "the last writer")
    assert float(out["tot"][0]) == math.fsum((x * dest).tolist())


def test_block_reductions_feed_a_large_sink_in_slot_ranges():
    # the block totals stay in the stage (no split): one stage, in slot ranges
    assert sc_rows.stage_count == 1 and _last_layout(sc_rows).slot_ranges()
    rng = np.random.default_rng(92_004)
    key = _keys(rng, ROWS * ROW).reshape(ROWS, ROW)
    x = rng.normal(size=(ROWS, ROW))
    prior = rng.normal(size=SLOTS)
    out = _runs(sc_rows, ("acc",), 1, key=key, x=x, acc=prior)
    s = np.array([math.fsum(row) for row in x.tolist()])  # ordered: each row's exact sum, rounded once
    terms = x * s[:, None] - x.max(axis=1)[:, None]
    want = prior.copy()
    for k, v in zip(key.ravel().tolist(), terms.ravel().tolist(), strict=True):
        if k >= 0:
            want[k] += v  # plain adds in lane order: one chunk's bits
    bt_same_bits(out["acc"], want, "lane-order adds of x * row sum - row max")


def test_block_reductions_beside_an_ordered_total_split_off_the_large_sink():
    lay = _last_layout(sc_rows_total)
    assert sc_rows_total.stage_count == 2 and lay.slot_ranges() and not lay.reductions
    rng = np.random.default_rng(92_005)
    key = _keys(rng, ROWS * ROW).reshape(ROWS, ROW)
    x = rng.normal(size=(ROWS, ROW)) * 10.0 ** rng.integers(-3, 4, size=(ROWS, ROW))
    prior = rng.normal(size=SLOTS)
    out = _runs(sc_rows_total, ("acc",), 2, key=key, x=x, acc=prior)
    rows = np.repeat(np.arange(ROWS, dtype=np.int32), ROW)
    s = bt_neumaier_scatter(np.zeros(ROWS), rows, x.ravel(), np.float64)  # each row's Neumaier steps
    assert float(out["tot"][0]) == math.fsum((x * s[:, None]).ravel().tolist())
    want = bt_neumaier_scatter(prior, key.ravel(), (x - s[:, None]).ravel(), np.float64)
    bt_same_bits(out["acc"], want, "one chunk's Neumaier steps of x - row sum")


def test_spirv_gives_the_hosts_bits():
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    rng = np.random.default_rng(92_006)
    key = _keys(rng)
    x = rng.normal(size=N)
    flag = (rng.uniform(size=N) < 0.001).astype(np.int32)
    buf, acc = rng.normal(size=SLOTS), rng.normal(size=SLOTS)
    grid = dict(key=_keys(rng, ROWS * ROW).reshape(ROWS, ROW), x=rng.normal(size=(ROWS, ROW)), acc=acc)
    d = rng.integers(-1, 16, size=N).astype(np.int32)
    for kernel, planes in ((sc_segments, dict(key=key, x=x, flag=flag, buf=buf, acc=acc)), (sc_rows, grid),
                           (sc_keyed, dict(key=key, d=d, x=x, acc=acc))):
        want = eagle.deploy(kernel, threads=4, min_chunk=MIN_CHUNK).run(**{k: np.copy(v) for k, v in planes.items()})
        gpu = eagle.deploy(kernel, target="spirv")
        got = gpu.run(**{k: np.copy(v) for k, v in planes.items()})
        assert gpu.last_chunks[-1] > 1, (kernel.name, gpu.last_chunks)  # a thread per slot range
        got, want = (r if isinstance(r, dict) else {"acc": r} for r in (got, want))
        bt_same_bits({k: np.asarray(v) for k, v in got.items()}, {k: np.asarray(v) for k, v in want.items()},
                     f"{kernel.name}: spirv against host")


@pytest.mark.parametrize("gpu", ["nvvm", "rocdl"])
def test_the_stages_build_for_the_other_gpu_targets(gpu):
    """Without the GPU's runtime each kernel compiles (PTX / AMD code objects), then raises RuntimeMissing; with
    one, the results are the host's."""
    rng = np.random.default_rng(92_007)
    key = _keys(rng)
    x = rng.normal(size=N)
    grid = dict(key=_keys(rng, ROWS * ROW).reshape(ROWS, ROW), x=rng.normal(size=(ROWS, ROW)))
    d = rng.integers(-1, 16, size=N).astype(np.int32)
    for kernel, planes in ((sc_reverse_store, dict(key=key, x=x)), (sc_rows, grid),
                           (sc_keyed, dict(key=key, d=d, x=x))):
        bt_gpu_builds(gpu, kernel, planes)


@hawk.kernel
def sc_bad(key: Index, x: Scalar, acc: Mutable["slot":3000]):
    hawk.scatter(acc)[key - 1] += hawk.scan(x)  # (a computed key: checked as the lanes run)


def test_a_bad_key_in_the_scan_fed_stage_changes_nothing():
    # refused by the slot-range stage, after the scan's first stage ran: the caller's sink is as it was
    rng = np.random.default_rng(92_010)
    key = _keys(rng) + 1
    key[12_345] = SLOTS + 5
    x = rng.normal(size=N)
    prior = rng.normal(size=SLOTS)
    acc = prior.copy()
    plan = eagle.deploy(sc_bad, threads=4, min_chunk=MIN_CHUNK)
    with pytest.raises(InputError, match=f"sink 'acc' of kernel 'sc_bad'.*first bad key: {SLOTS + 4}"):
        plan.run(key=key, x=x, acc=acc)
    assert _last_layout(sc_bad).slot_ranges()
    bt_same_bits(acc, prior, "the caller's sink after a refused run")
    key[12_345] = 0  # (-1: nothing)
    plan.run(key=key, x=x, acc=acc)
    assert plan.last_chunks[-1] == 4, plan.last_chunks
