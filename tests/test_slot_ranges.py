"""Sinks too large for private copies run in slot ranges on the host (issues 10 and 11: no single-thread cliff for
sinks of any size; hawk.abi.layout.wants_slot_ranges, hawk/passes/lower/slot_ranges.py).

A stage that only scatters into sinks (and writes per-lane outputs it never reads), with a sink over the copy
limit (PAIR_SLOTS, 2**25 slots), runs as one chunk per thread, each running every lane and applying only the
scatters into its own range of each sink's slots (chunk 0 also writes the lane outputs). Each slot then gets its
terms, stores and adds from one chunk in lane order: the bits of a single chunk under every policy, at every
thread count. $HAWK_COPY_SLOTS lowers the copy limit so that sinks of a few thousand slots take the same path
here (it is part of the specialisation, hence of every cache key).

Each run is checked at threads 1..4 (really split: `plan.last_chunks`), bitwise across the thread counts, and
against NumPy (np.add.at: plain adds in lane order, bit for bit), one chunk's Neumaier steps in lane order
(compensated, bit for bit, and within the contract's bound of math.fsum), math.fsum per slot (ordered, exactly)
or the last writer (stores); spirv (a thread per range, every thread running every lane) gives the host's bits.
"""

import math

import numpy as np
import pytest
from conftest import (
    bt_executor,
    bt_gpu_builds,
    bt_neumaier_scatter,
    bt_same_bits,
    bt_sink_keys,
    bt_spirv_missing,
    bt_target_missing,
)

import eagle
import hawk
from eagle.errors import InputError
from hawk import Index, Mutable, Scalar, Sorted, Vector
from hawk.abi.layout import COPY_SLOTS_ENV, PAIR_SLOTS, slot_range, wants_slot_ranges

COPY = 1024  # the copy limit these tests set: the 3000-slot sinks below are "too large" for copies
SLOTS = 3000
N = 20_000
MIN_CHUNK = 1024  # so that N lanes give every thread a part
THREADS = (1, 2, 3, 4)


@pytest.fixture(autouse=True)
def small_copy_limit(monkeypatch):
    monkeypatch.setenv(COPY_SLOTS_ENV, str(COPY))


@hawk.kernel
def sr_computed(key: Index, x: Scalar, acc: Mutable["slot":3000]):
    hawk.scatter(acc, policy="plain")[key - 1] += x  # a computed key: split_scatters' two-pass loop


@hawk.kernel
def sr_auto(key: Index, x: Scalar, acc: Mutable["slot":40_000]):  # (large enough for the executor's fold)
    hawk.scatter(acc)[key] += x


@hawk.kernel
def sr_multi(key: Index, r: Index, c: Index, v: Vector[2], x: Scalar, acc: Mutable["slot":3000],
             tab: Mutable["ra":5, "ca":6]):  # (a sink small enough for copies: in this stage it keeps none)
    hawk.scatter(acc, policy="compensated")[key] += v
    hawk.scatter(tab, policy="compensated")[r, c] += x


@hawk.kernel
def sr_sorted(key: Sorted[Index], x: Scalar, acc: Mutable["slot":3000]):
    hawk.scatter(acc, policy="compensated")[key] += x


@hawk.kernel
def sr_two(key: Index, other: Index, x: Scalar, acc: Mutable["slot":3000], exact: Mutable["slot":500]):
    hawk.scatter(acc, policy="plain")[key] += x
    hawk.scatter(exact, policy="ordered")[other] += x


@hawk.kernel
def sr_store(key: Index, x: Scalar, buf: Mutable["slot":3000]):
    hawk.scatter(buf)[key] = x


@hawk.kernel
def sr_mixed(key: Index, other: Index, x: Scalar, buf: Mutable["slot":3000]):
    hawk.scatter(buf)[key] = x
    hawk.scatter(buf, policy="plain")[other] += x * 0.5


@hawk.kernel
def sr_with_output(key: Index, x: Scalar, v: Vector[2], acc: Mutable["slot":3000], y: Mutable[Vector[2]],
                   z: Mutable[Scalar]):
    hawk.scatter(acc, policy="plain")[key] += x
    y = v * 2.0 - 1.0  # noqa: F841  (lane outputs: chunk 0 alone writes them)
    z = x * x  # noqa: F841


@hawk.kernel
def sr_reads_output(key: Index, x: Scalar, acc: Mutable["slot":3000], y: Mutable[Scalar]):
    hawk.scatter(acc, policy="plain")[key] += y  # (reads its output: split-stages runs the scatter first)
    y = x


def _threads(kernel, sinks: tuple[str, ...] = ("acc",), **planes) -> np.ndarray:
    """The kernel's result at threads 1..4: each run in one part per thread (every part a chunk), the passed sinks
    written in place, the same bits at every thread count. Returns the result (a dict for several sinks)."""
    got = []
    for threads in THREADS:
        given = {k: (np.array(v, copy=True) if k in sinks else v) for k, v in planes.items()}
        plan = eagle.deploy(kernel, threads=threads, min_chunk=MIN_CHUNK)
        out = plan.run(**given)
        assert plan.last_chunks == (threads,), f"{kernel.name} threads={threads}: ran {plan.last_chunks} chunk(s)"
        out = {k: np.asarray(v) for k, v in out.items()} if isinstance(out, dict) else np.asarray(out)
        for k in sinks:
            if k in given:
                np.testing.assert_array_equal(given[k], out[k] if isinstance(out, dict) else out)
        got.append(out)
    for threads, out in zip(THREADS[1:], got[1:], strict=True):
        bt_same_bits(out, got[0], f"{kernel.name}: threads {threads} against threads 1")
    return got[0]


def _fsum_bound(got, prior, key, x, dtype) -> None:
    """Each slot within the compensated bound: |got - exact| <= eps * sum|terms|; untouched slots keep their bits."""
    exact = np.array(prior, dtype=np.float64)
    mag = np.abs(exact)
    touched = np.zeros(prior.size, dtype=bool)
    for s in np.unique(key[key >= 0]):
        terms = [float(prior[s]), *np.asarray(x, dtype=np.float64)[key == s].tolist()]
        exact[s], mag[s], touched[s] = math.fsum(terms), math.fsum(abs(t) for t in terms), True
    err = np.abs(np.asarray(got, dtype=np.float64) - exact)
    assert np.max(err - float(np.finfo(dtype).eps) * mag) <= 0.0
    bt_same_bits(np.asarray(got)[~touched], np.asarray(prior, dtype=dtype)[~touched], "untouched slots")


def test_the_form_and_its_limit(monkeypatch):
    # the copy limit is part of the specialisation (and so of every cache key) and of the hawk IR's facts; the
    # default specialisation follows the limit in force (Kernel.stage_count describes it)
    spec = sr_computed.spec_for("float64", {})
    assert spec.copy_slots == COPY and spec == sr_computed.default_spec()
    assert "copies = 1024" in sr_computed.hawk_ir(spec)
    for kernel in (sr_computed, sr_auto, sr_multi, sr_sorted, sr_two, sr_store, sr_mixed, sr_with_output):
        lay = kernel.layout(kernel.spec_for("float64", {}))
        assert lay.slot_ranges() and wants_slot_ranges(lay) and not lay.private, kernel.name
    spec = sr_reads_output.spec_for("float64", {})  # it reads its output: the scatter's stage runs first, in
    first, rest = (sr_reads_output.layout(spec, k) for k in (0, 1))  # slot ranges, then y = x in chunks
    assert first.slot_ranges() and list(first.sinks) == ["acc"] and not rest.sinks and not rest.slot_ranges()
    with monkeypatch.context() as unset:
        unset.delenv(COPY_SLOTS_ENV)
        default = sr_computed.default_spec()
        assert default != spec and not sr_computed.layout(default).slot_ranges()  # copies up to PAIR_SLOTS
    for parts in (1, 2, 3, 4, 7):  # the ranges cover every slot once
        cuts = [slot_range(SLOTS, p, parts) for p in range(parts)]
        assert cuts[0][0] == 0 and cuts[-1][1] == SLOTS
        assert all(a[1] == b[0] for a, b in zip(cuts[:-1], cuts[1:], strict=True))
    assert slot_range(PAIR_SLOTS * 4, 3, 4) == (3 * PAIR_SLOTS, 4 * PAIR_SLOTS)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_plain_adds_in_lane_order(dtype):
    rng = np.random.default_rng(81_000)
    slot = bt_sink_keys(rng, N, SLOTS)
    key = (slot + 1).astype(np.int32)  # the kernel's key - 1 is the slot (0 - 1: no slot)
    x = (rng.normal(size=N) * 10.0 ** rng.integers(-5, 6, size=N)).astype(dtype)
    prior = rng.normal(size=SLOTS).astype(dtype)
    got = _threads(sr_computed, key=key, x=x, acc=prior)
    want = prior.copy()
    np.add.at(want, slot[slot >= 0], x[slot >= 0])  # one add at a time, in lane order: the bits of one chunk
    bt_same_bits(got, want, f"{np.dtype(dtype).name}: against np.add.at")


def test_runs_again_and_over_part_of_the_lanes():
    # a plan reuses its prepared stage (and its number of parts) for a run of the same shapes; base=/count= runs
    # a part of the lanes, still in one part per thread
    rng = np.random.default_rng(81_010)
    plan = eagle.deploy(sr_computed, threads=3, min_chunk=MIN_CHUNK)
    for trial in range(3):
        slot = bt_sink_keys(rng, N, SLOTS)
        x = rng.normal(size=N)
        prior = rng.normal(size=SLOTS)
        lo, hi = (0, N) if trial < 2 else (1234, N - 777)
        got = np.asarray(plan.run(base=lo, count=hi - lo, key=(slot + 1).astype(np.int32), x=x, acc=prior.copy()))
        assert plan.last_chunks == (3,)
        want = prior.copy()
        keep = slot[lo:hi] >= 0
        np.add.at(want, slot[lo:hi][keep], x[lo:hi][keep])
        bt_same_bits(got, want, f"run {trial}: lanes [{lo}, {hi})")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compensated_sums_are_one_chunks(dtype):
    rng = np.random.default_rng(81_001)
    slots = 40_000
    key = bt_sink_keys(rng, N, slots // 10)
    key = np.where(key >= 0, key * 10 + 3, -1).astype(np.int32)  # many terms a slot
    x = (rng.normal(size=N) * 10.0 ** rng.integers(-6, 7, size=N)).astype(dtype)
    prior = rng.normal(size=slots).astype(dtype)
    got = _threads(sr_auto, key=key, x=x, acc=prior)
    assert got.dtype == dtype
    _fsum_bound(got, prior, key, x, dtype)
    bt_same_bits(got, bt_neumaier_scatter(prior, key, x, dtype), "one chunk's Neumaier steps in lane order")


def test_vector_payload_two_key_axes_and_sortedbt_sink_keys():
    rng = np.random.default_rng(81_002)
    key = bt_sink_keys(rng, N, SLOTS)
    v = rng.normal(size=(2, N)) * 1e3
    r, c = rng.integers(0, 5, size=N).astype(np.int32), rng.integers(0, 6, size=N).astype(np.int32)
    r[:50] = -1
    x = rng.normal(size=N) * 10.0 ** rng.integers(-6, 7, size=N)
    got = _threads(sr_multi, sinks=("acc", "tab"), key=key, r=r, c=c, v=v, x=x)
    assert got["acc"].shape == (2, SLOTS) and got["tab"].shape == (5, 6)
    for k in range(2):
        _fsum_bound(got["acc"][k], np.zeros(SLOTS), key, v[k], np.float64)
        bt_same_bits(got["acc"][k], bt_neumaier_scatter(np.zeros(SLOTS), key, v[k], np.float64), f"component {k}")
    flat = np.where(r >= 0, r * 6 + c, -1)
    _fsum_bound(got["tab"].ravel(), np.zeros(30), flat, x, np.float64)
    bt_same_bits(got["tab"].ravel(), bt_neumaier_scatter(np.zeros(30), flat, x, np.float64), "two key axes")
    skey = np.sort(rng.integers(0, SLOTS, size=N)).astype(np.int32)  # runs of equal keys summed in registers
    _fsum_bound(_threads(sr_sorted, key=skey, x=x), np.zeros(SLOTS), skey, x, np.float64)


def _fsum_per_slot(prior, key, x) -> np.ndarray:
    out = np.array(prior, dtype=np.float64)
    for s in np.unique(key[key >= 0]):
        out[s] = math.fsum([float(prior[s]), *np.asarray(x, dtype=np.float64)[key == s].tolist()])
    return out


def test_a_plain_and_an_ordered_sink_in_one_stage():
    rng = np.random.default_rng(81_003)
    key, other = bt_sink_keys(rng, N, SLOTS), bt_sink_keys(rng, N, 500)
    x = rng.normal(size=N) * 10.0 ** rng.integers(-300, 300, size=N)  # the ordered sum is exact whatever the range
    x[:4] = [1e300, -1e300, 5e-324, -0.0]
    other[:4] = 7
    prior = rng.normal(size=500)
    got = _threads(sr_two, sinks=("acc", "exact"), key=key, other=other, x=x, exact=prior)
    bt_same_bits(got["exact"], _fsum_per_slot(prior, other, x), "ordered sink against math.fsum")
    want = np.zeros(SLOTS)
    np.add.at(want, key[key >= 0], x[key >= 0])
    bt_same_bits(got["acc"], want, "plain sink against np.add.at")


def test_lane_outputs_beside_a_large_sink():
    rng = np.random.default_rng(81_009)
    key = bt_sink_keys(rng, N, SLOTS)
    x, v = rng.normal(size=N), rng.normal(size=(2, N))
    y_given = np.full((2, N), np.nan)  # written in place: every lane by chunk 0
    got = _threads(sr_with_output, sinks=("y",), key=key, x=x, v=v, y=y_given)
    bt_same_bits(got["y"], v * 2.0 - 1.0, "y")
    bt_same_bits(got["z"], x * x, "z")
    want = np.zeros(SLOTS)
    np.add.at(want, key[key >= 0], x[key >= 0])
    bt_same_bits(got["acc"], want, "acc against np.add.at")


def _last_writer(prior, key, values):
    out = np.array(prior, copy=True)
    keep = key >= 0
    out[key[keep]] = values[keep]  # NumPy assigns repeated indices in order: the last one stays
    return out


def test_stores_and_stored_and_added_sinks_keep_lane_order():
    rng = np.random.default_rng(81_004)
    key = bt_sink_keys(rng, N, SLOTS, minus=0.3)
    x = rng.integers(-4000, 4000, size=N) / 4.0  # sums of these are exact in any order
    prior = np.linspace(-1.0, 1.0, SLOTS)
    prior[:10] = -0.0
    key[np.isin(key, np.arange(10))] = 10
    got = _threads(sr_store, sinks=("buf",), key=key, x=x, buf=prior)
    bt_same_bits(got, _last_writer(prior, key, x), "the last lane's store")
    other = bt_sink_keys(rng, N, SLOTS, minus=0.2)
    other[: N // 2] = key[: N // 2]  # half the lanes add into the slot they just stored
    other[np.isin(other, np.arange(10))] = 11
    got = _threads(sr_mixed, sinks=("buf",), key=key, other=other, x=x, buf=prior)
    want = np.array(prior, copy=True)
    for k, o, v in zip(key.tolist(), other.tolist(), x.tolist(), strict=True):
        if k >= 0:
            want[k] = v
        if o >= 0:
            want[o] += v * 0.5
    bt_same_bits(got, want, "stores and adds in lane order")
    bt_same_bits(got[:10], prior[:10], "untouched slots (-0.0 kept)")


def test_a_bad_key_is_reported_once_and_changes_nothing():
    # a computed key (the binder checks keys read straight from an Index plane before the run): every part runs
    # every lane, and part 0 alone reports, so the count and the first bad key are one chunk's
    rng = np.random.default_rng(81_005)
    key = bt_sink_keys(rng, N, SLOTS) + 1
    key[[100, 9000, 15000]] = [SLOTS + 6, -6, SLOTS + 1]  # slots 3005, -7, 3000: in three different parts' lanes
    x = rng.normal(size=N)
    prior = rng.normal(size=SLOTS)
    for threads in (1, 4):
        acc = prior.copy()
        plan = eagle.deploy(sr_computed, threads=threads, min_chunk=MIN_CHUNK)
        with pytest.raises(InputError, match=rf"'sr_computed': 3 lane\(s\) .*first bad key: {SLOTS + 5}\)"):
            plan.run(key=key, x=x, acc=acc)
        (launcher,) = (ready[1] for ready in plan._ready.values())  # (a refused run leaves plan.last_chunks)
        assert launcher.last_chunks == threads
        bt_same_bits(acc, prior, f"threads={threads}: the caller's sink after a refused run")


def test_artifacts_carry_the_form(tmp_path):
    hawk.artifact.build_bundle([sr_mixed], tmp_path, targets=("host",), dtypes=("float64",))
    rng = np.random.default_rng(81_006)
    key, other = bt_sink_keys(rng, N, SLOTS), bt_sink_keys(rng, N, SLOTS)
    planes = dict(key=key, other=other, x=rng.integers(-4000, 4000, size=N) / 4.0)
    plan = eagle.deploy(sr_mixed, threads=3, min_chunk=MIN_CHUNK)
    want = np.asarray(plan.run(**planes))
    assert plan.last_chunks == (3,)
    got = np.asarray(hawk.run(hawk.load(tmp_path, "sr_mixed"), **planes))
    bt_same_bits(got, want, "artifact against plan")


@pytest.mark.parametrize("kernel", [sr_two, sr_mixed, sr_with_output, sr_computed, sr_multi, sr_store])
def test_spirv_gives_the_hosts_bits(kernel):
    # a GPU runs these stages in slot ranges too, a thread per range (eagle.targets.device.plan_grid; spirv has
    # no float atomics): each slot's scatters in lane order from one thread, so the bits of every host split;
    # for an ordered sink, the exact sum rounded once
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    rng = np.random.default_rng(81_007)
    key, other = bt_sink_keys(rng, N, SLOTS), bt_sink_keys(rng, N, 500)
    x = rng.integers(-4000, 4000, size=N) / 4.0 if kernel is sr_mixed else rng.normal(size=N) * 1e3
    planes = dict(key=key, x=x)
    if kernel is sr_with_output:
        planes["v"] = rng.normal(size=(2, N))
    elif kernel is sr_multi:
        planes.update(v=rng.normal(size=(2, N)), r=rng.integers(0, 5, size=N).astype(np.int32),
                      c=rng.integers(0, 6, size=N).astype(np.int32))
    elif kernel in (sr_two, sr_mixed):
        planes["other"] = other
    elif kernel is sr_computed:
        planes["key"] = key + 1
    host = eagle.deploy(kernel, threads=4, min_chunk=MIN_CHUNK)
    want = host.run(**planes)
    assert host.last_chunks == (4,)
    gpu = eagle.deploy(kernel, target="spirv")
    got = gpu.run(**planes)
    from eagle.targets.vulkan_runtime import VulkanRuntime

    most = VulkanRuntime.shared().range_threads  # (lavapipe, a CPU device: one per core, at least 2)
    threads = min(most, 5 * 6) if kernel is sr_multi else most  # (no more threads than the smallest sink's slots)
    assert gpu.last_chunks == (threads,) and threads > 1, f"{kernel.name}: ran {gpu.last_chunks} thread(s)"
    if isinstance(want, dict):
        want, got = {k: np.asarray(v) for k, v in want.items()}, {k: np.asarray(v) for k, v in got.items()}
    bt_same_bits(np.asarray(got) if not isinstance(got, dict) else got,
                 np.asarray(want) if not isinstance(want, dict) else want, f"{kernel.name}: spirv against host")


@pytest.fixture
def reports(fold_reports):
    """Every native launch's fold report (eagle.native.StageArgs.fold_report), in order; tasks dealt out to every
    thread a launch asks for (so that all of them take part whatever the machine's load)."""
    import eagle.native

    lib = eagle.native.library()  # (kept: a test may point eagle.native elsewhere before this is undone)
    was = lib.eagle_set_dealt(1)
    yield fold_reports
    lib.eagle_set_dealt(was)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_compensated_companion_is_folded_on_every_thread(monkeypatch, reports, dtype):
    # the finish's step (slot = (prior + sum) + correction, rounded once) by ranges of slots on every thread
    # (executor.c companion_range, eagle/native/folds.py), then the compiled finish finds an empty sink: the
    # same bits as the compiled finish alone, and as the Python pool's launch
    import eagle.native
    import eagle.native.folds

    slots, n = 40_000, 60_000
    rng = np.random.default_rng(81_008)
    key = bt_sink_keys(rng, n, slots)
    x = (rng.normal(size=n) * 10.0 ** rng.integers(-8, 9, size=n)).astype(dtype)
    x[:3], key[:3] = [np.inf, -np.inf, np.nan], [5, 5, 6]  # non-finite sums keep no correction
    prior = rng.normal(size=slots).astype(dtype)
    want = bt_neumaier_scatter(prior, key, x, dtype)
    for native, parallel in (("1", True), ("1", False), ("0", True)):
        bt_executor(monkeypatch, native, parallel)
        plan = eagle.deploy(sr_auto, threads=4, min_chunk=MIN_CHUNK)
        before = len(reports)
        got = np.asarray(plan.run(key=key, x=x, acc=prior.copy()))
        assert plan.last_chunks == (4,)
        bt_same_bits(got, want, f"native={native} parallel finish={parallel}")
        if native == "1":
            (folds,) = reports[before:]
            if parallel:
                (fold,) = folds
                assert fold["kind"] == (5 if dtype == np.float64 else 6) and fold["slots"] == slots, fold
                assert fold["parts"] >= 2 and fold["threads"] >= 2, fold
            else:
                assert folds == []


def test_spirv_reports_a_computed_bad_key_once_and_changes_nothing():
    # every thread runs every lane, thread 0 alone reports: the count and the first bad key are the host's
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    rng = np.random.default_rng(81_008)
    key = bt_sink_keys(rng, N, SLOTS) + 1
    key[[100, 9000, 15000]] = [SLOTS + 6, -6, SLOTS + 1]
    x = rng.normal(size=N)
    prior = rng.normal(size=SLOTS)
    for target in ("host", "spirv"):
        acc = prior.copy()
        with pytest.raises(InputError, match=rf"'sr_computed': 3 lane\(s\) .*first bad key: {SLOTS + 5}\)"):
            eagle.deploy(sr_computed, target=target).run(key=key, x=x, acc=acc)
        bt_same_bits(acc, prior, f"{target}: the caller's sink after a refused run")


@pytest.mark.parametrize("gpu", ["nvvm", "rocdl"])
def test_the_form_builds_for_the_other_gpu_targets(gpu):
    """Without the GPU's runtime each kernel compiles (PTX / AMD code objects), then raises RuntimeMissing; with
    one, the results are the host's (sr_store: no float atomics for stores, so slot ranges on every GPU)."""
    rng = np.random.default_rng(81_009)
    key, other = bt_sink_keys(rng, N, SLOTS), bt_sink_keys(rng, N, SLOTS)
    for kernel, planes in ((sr_store, dict(key=key, x=rng.normal(size=N))),
                           (sr_mixed, dict(key=key, other=other, x=rng.integers(-4000, 4000, size=N) / 4.0))):
        bt_gpu_builds(gpu, kernel, planes)
