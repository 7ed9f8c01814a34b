"""The native stage executor (eagle/native) and Plan.run's reuse of prepared stages (eagle/native/reuse.py).

What is checked:

* the native path is really taken (`plan.last_executor`, `Prepared.executor`, the count of native launches) and
  the pool grows to the threads asked for;
* it gives the very bits of the Python thread pool, with the same chunks, for every sum policy, max, plain and
  ordered scatters, kept axes and a two-stage kernel, at 1..4 threads with small chunks (the split asserted through
  `plan.last_chunks`), through Plan.run and bound launches; ordered sums keep their bits across thread counts;
* refusals: keys out of range (checked before the launch, or found by the compiled code) raise and leave every
  array the caller passed as it was, on a first run and on a run that reuses prepared stages;
* reuse: a later run's results never overwrite an earlier run's, changed Params and inputs are seen, an input that
  is the very array of a lane-local output is updated in place, runs from several threads at once agree;
* the fallback: when the executor cannot be built, runs take the Python pool and the reason is logged once at
  debug level; the executor builds into the disk cache (sealed) and is loaded back from there; a forked child
  process runs native launches too.
"""

import logging
import math
import os
import shutil
import threading
import time
import warnings

import numpy as np
import pytest

import eagle
import eagle.native as native
import hawk
from eagle.errors import InputError
from hawk import Grid, Index, Mutable, Param, Scalar
from hawk.abi import cache

N = 50_001  # no multiple of any chunk size: a short last chunk


@hawk.kernel
def ne_sums(x: Scalar, o: Mutable[Scalar], c: Mutable[Scalar], p: Mutable[Scalar]):
    o = hawk.sum(x, policy="ordered")
    c = hawk.sum(x, policy="compensated")
    p = hawk.sum(x)


@hawk.kernel
def ne_max(x: Scalar) -> Scalar:
    return hawk.max(x)


@hawk.kernel
def ne_scatter(key: Index, x: Scalar, ap: Mutable["slot":64], ao: Mutable["slot":64]):
    hawk.scatter(ap, policy="plain")[key] += x
    hawk.scatter(ao, policy="ordered")[key] += x * x


@hawk.kernel
def ne_kept(lane: Grid["row", "col":50], x: Scalar, rows: Mutable[Scalar], cols: Mutable[Scalar]):
    rows = hawk.sum(x, over="col", policy="ordered")
    cols = hawk.sum(x, over="row")


@hawk.kernel
def ne_centre(x: Scalar, total: Mutable[Scalar], z: Mutable[Scalar]):
    total = hawk.sum(x, policy="ordered")
    z = x - hawk.mean(x)


@hawk.kernel
def ne_bad(key: Index, x: Scalar, y: Mutable[Scalar], acc: Mutable["slot":8]):
    y = x + 1.0
    hawk.scatter(acc, policy="plain")[key + 5] += x


@hawk.kernel
def ne_map(x: Scalar, s: Param, y: Mutable[Scalar]):
    y = x * s


def _data(n=N, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * np.exp(rng.uniform(-20, 20, n))  # wide exponents: rounding shows
    return x, rng.integers(0, 64, n)


def _planes(kernel, n=N, seed=0):
    x, key = _data(n, seed)
    if kernel is ne_scatter:
        return {"key": key, "x": x}
    if kernel is ne_kept:
        return {"x": x[: (n // 50) * 50].reshape(-1, 50)}
    return {"x": x}


def _np(out):
    return {k: np.asarray(v).copy() for k, v in out.items()} if isinstance(out, dict) else np.asarray(out).copy()


def _same_bits(a, b, what):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), what
        for k in a:
            _same_bits(a[k], b[k], f"{what} {k}")
        return
    assert a.dtype == b.dtype and a.shape == b.shape, what
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), f"{what}: bits differ"


def _run_python(monkeypatch, plan, **planes):
    with monkeypatch.context() as m:
        m.setattr(native, "library", lambda: None)
        return plan.run(**planes)


@pytest.fixture(autouse=True)
def _needs_native():
    if native.library() is None:
        if shutil.which("cc") or shutil.which("gcc"):
            pytest.fail(f"a C compiler is here but the native executor did not load: {native.unavailable_reason()}")
        pytest.skip(f"no native executor: {native.unavailable_reason()}")


# ================================================================================ the native path, bit for bit
@pytest.mark.parametrize("kernel", [ne_sums, ne_max, ne_scatter, ne_kept, ne_centre], ids=lambda k: k.name)
def test_native_runs_give_the_python_pools_bits_at_every_thread_count(monkeypatch, kernel):
    planes = _planes(kernel)
    ordered = None
    for threads in (1, 2, 3, 4):
        nat = eagle.deploy(kernel, threads=threads, min_chunk=1024)
        before = native.FIRES[0]
        got = _np(nat.run(**planes))
        assert nat.last_executor == ("native",) * kernel.stage_count, nat.last_executor
        assert native.FIRES[0] - before == kernel.stage_count
        assert threads == 1 or min(nat.last_chunks) > 1, nat.last_chunks  # a real split
        py = eagle.deploy(kernel, threads=threads, min_chunk=1024)
        want = _np(_run_python(monkeypatch, py, **planes))
        assert py.last_executor == ("python",) * kernel.stage_count
        assert py.last_chunks == nat.last_chunks
        _same_bits(got, want, f"{kernel.name} threads={threads}")
        again = _np(nat.run(**planes))  # a second run reuses the prepared stages: the same bits
        _same_bits(again, got, f"{kernel.name} threads={threads} (reused)")
        if kernel is ne_scatter:
            o = got["ao"]
        elif kernel is ne_kept:
            o = got["rows"]
        elif kernel is ne_max:
            o = got
        else:
            o = got["o"] if kernel is ne_sums else got["total"]
        ordered = o if ordered is None else ordered
        _same_bits(o, ordered, f"{kernel.name}: ordered bits at threads={threads}")
    assert native.pool_size() >= 3  # grown to the most threads asked for, less the calling thread


def test_the_default_chunk_is_small_with_the_native_executor(monkeypatch):
    from eagle.settings import MIN_CHUNK

    monkeypatch.delenv("EAGLE_MIN_CHUNK", raising=False)
    plan = eagle.deploy(ne_sums, threads=2)
    assert plan.min_chunk == MIN_CHUNK == 1 << 14
    plan.run(x=_data(100_000)[0])
    assert plan.last_chunks == (2,)  # 1e5 lanes: both cores, as a fixed function of the lanes and settings;
    # one chunk per thread while more would hold fewer than OVERSPLIT_LANES lanes each
    plan.run(x=_data(1_000_000)[0])
    assert plan.last_chunks == (8,)  # 1e6 lanes: OVERSPLIT chunks per thread
    plan.run(x=_data(300_000)[0])
    assert plan.last_chunks == (4,)  # 3e5: as many as keep OVERSPLIT_LANES each, a multiple of the threads
    chosen = eagle.deploy(ne_sums, threads=2, min_chunk=MIN_CHUNK)  # a size the caller chose is taken as it is
    chosen.run(x=_data(100_000)[0])
    assert chosen.last_chunks == (6,)


@hawk.kernel
def ne_columns(g: Grid["row", "col":1000], x: Scalar) -> Scalar:
    return hawk.sum(x, over="row", policy="ordered")


def test_kept_cells_copies_lengthen_the_default_chunk(monkeypatch):
    # a column sum keeps a private copy of its 1000 slots per chunk (a pair each): by default a chunk then runs
    # at least CELL_LANES lanes per copy value (16 x 2000 here), more chunks than threads only while each holds
    # OVERSPLIT_LANES lanes, and those in a multiple of the thread count; a chunk size the caller chose is taken
    # as it is. The sums are exact whatever the chunking.
    from eagle.launch import CELL_LANES, OVERSPLIT_LANES

    assert (CELL_LANES, OVERSPLIT_LANES) == (16, 1 << 16)
    monkeypatch.delenv("EAGLE_MIN_CHUNK", raising=False)
    rng = np.random.default_rng(5)
    for rows, want in ((25, 1), (100, 2), (1000, 8)):
        x = rng.normal(size=(rows, 1000))
        exact = [math.fsum(x[:, j]) for j in range(1000)]
        default = eagle.deploy(ne_columns, threads=2)
        assert np.array_equal(np.asarray(default.run(x=x)), exact)
        assert default.last_chunks == (want,), (rows, default.last_chunks)
        chosen = eagle.deploy(ne_columns, threads=2, min_chunk=1 << 14)
        assert np.array_equal(np.asarray(chosen.run(x=x)), exact)
        assert chosen.last_chunks == (min(8, rows * 1000 // (1 << 14)),), (rows, chosen.last_chunks)


def test_results_match_numpy(monkeypatch):
    x, key = _data()
    out = eagle.deploy(ne_sums, threads=2, min_chunk=1024).run(x=x)
    exact = float(np.sum(x.astype(np.longdouble)))
    assert np.asarray(eagle.deploy(ne_max, threads=2, min_chunk=1024).run(x=x))[0] == x.max()
    assert abs(np.asarray(out["c"])[0] - exact) <= 2 * np.finfo(float).eps * np.abs(x).sum()
    sc = eagle.deploy(ne_scatter, threads=2, min_chunk=1024).run(key=key, x=x)
    want = np.zeros(64)
    np.add.at(want, key, x)
    np.testing.assert_allclose(np.asarray(sc["ap"]), want, rtol=1e-9, atol=1e-9 * np.abs(x).max())
    z = eagle.deploy(ne_centre, threads=2, min_chunk=1024).run(x=x)["z"]
    np.testing.assert_allclose(np.asarray(z), x - np.mean(x), rtol=1e-12, atol=1e-12 * np.abs(x).max())


def test_bound_launches_run_natively_and_agree_with_the_python_pool(monkeypatch):
    planes = _planes(ne_centre)
    for threads in (2, 3):
        bound = eagle.deploy(ne_centre, threads=threads, min_chunk=1024).bind(**planes)
        assert [st.executor for st in bound.stages] == ["native", "native"]
        assert min(bound.chunks) > 1, bound.chunks
        first = _np(bound.launch())
        second = _np(bound.launch())  # cells start fresh at every launch
        with monkeypatch.context() as m:
            m.setattr(native, "library", lambda: None)
            pyb = eagle.deploy(ne_centre, threads=threads, min_chunk=1024).bind(**planes)
        assert [st.executor for st in pyb.stages] == ["python", "python"]
        _same_bits(first, _np(pyb.launch()), f"bound threads={threads}")
        _same_bits(second, first, f"bound relaunch threads={threads}")


def test_a_passed_sink_accumulates_across_native_launches():
    x, key = _data(4096)
    ap, ao = np.zeros(64), np.zeros(64)
    bound = eagle.deploy(ne_scatter, threads=2, min_chunk=256).bind(key=key, x=x, ap=ap, ao=ao)
    for _ in range(3):
        bound.launch()
    want = np.zeros(64)
    np.add.at(want, key, x)
    np.testing.assert_allclose(ap, 3 * want, rtol=1e-9, atol=1e-6 * np.abs(x).max())


@pytest.mark.parametrize("threads", [2, 3, 4])
def test_every_chunk_runs_once_in_every_launch(threads):
    # each thread walks its own range of chunks forwards in one launch and backwards in the next, and takes what
    # is left of the others' ranges from their other end: over launches of both parities, with more chunks than
    # threads (uneven ranges), a chunk run twice or not at all would show in the counts
    n = 40_000
    key = np.arange(n, dtype=np.int64) % 64
    ap, ao = np.zeros(64), np.zeros(64)
    plan = eagle.deploy(ne_scatter, threads=threads, min_chunk=3000)
    bound = plan.bind(key=key, x=np.ones(n), ap=ap, ao=ao)
    assert bound.chunks[0] > threads, bound.chunks
    launches = 7
    for _ in range(launches):
        bound.launch()
    want = launches * np.bincount(key, minlength=64).astype(np.float64)
    np.testing.assert_array_equal(ap, want)
    np.testing.assert_array_equal(ao, want)


# ================================================================================ refusals lose nothing
def test_a_bad_index_key_is_refused_on_a_reused_run_and_the_sinks_are_untouched():
    x, key = _data(8192)
    plan = eagle.deploy(ne_scatter, threads=2, min_chunk=1024)
    ap, ao = np.full(64, 7.0), np.full(64, 9.0)
    plan.run(key=key, x=x, ap=ap.copy(), ao=ao.copy())
    plan.run(key=key, x=x, ap=ap.copy(), ao=ao.copy())
    assert plan._runs.hits >= 1
    bad = key.copy()
    bad[4000] = 64
    with pytest.raises(InputError, match=r"plane 'key' of kernel 'ne_scatter': holds key 64, outside sink"):
        plan.run(key=bad, x=x, ap=ap, ao=ao)
    assert (ap == 7.0).all() and (ao == 9.0).all()


@pytest.mark.parametrize("threads", [1, 2])
def test_a_key_found_bad_by_the_compiled_code_leaves_the_callers_arrays(threads):
    x, _ = _data(8192)
    key = np.zeros(8192, dtype=np.int64)
    plan = eagle.deploy(ne_bad, threads=threads, min_chunk=1024)
    y, acc = np.full(8192, 3.0), np.full(8, 5.0)
    plan.run(key=key, x=x, y=y.copy(), acc=acc.copy())  # key + 5 < 8: fine, and prepared for reuse
    for attempt in range(2):  # the second refusal goes through a freshly prepared run again
        bad = key.copy()
        bad[6000 + attempt] = 3  # 3 + 5 = 8: outside the 8 slots, found as the code runs
        with pytest.raises(InputError, match=r"sink 'acc' of kernel 'ne_bad': 1 lane\(s\) scattered to a key "
                                             r"outside it \(first bad key: 8\)"):
            plan.run(key=bad, x=x, y=y, acc=acc)
        assert (y == 3.0).all() and (acc == 5.0).all()
    out = plan.run(key=key, x=x, y=y, acc=acc)
    np.testing.assert_array_equal(y, x + 1.0)
    assert np.asarray(out["acc"]) is acc


# ================================================================================ reuse of prepared runs
def test_a_later_run_never_overwrites_an_earlier_runs_results():
    plan = eagle.deploy(ne_map)
    x1, x2 = np.arange(5.0), np.arange(5.0) + 100
    r1 = plan.run(x=x1, s=2.0)
    r2 = plan.run(x=x2, s=3.0)
    r3 = plan.run(x=x1, s=np.float64(-1.0))
    assert plan._runs.hits == 1  # np.float64 is another key than float: prepared afresh
    np.testing.assert_array_equal(np.asarray(r1), x1 * 2.0)
    np.testing.assert_array_equal(np.asarray(r2), x2 * 3.0)
    np.testing.assert_array_equal(np.asarray(r3), -x1)
    assert plan.last_executor == ("native",)
    c1 = eagle.deploy(ne_centre).run(x=x1)
    c2 = eagle.deploy(ne_centre).run(x=x2)
    assert np.asarray(c1["total"])[0] == 10.0 and np.asarray(c2["total"])[0] == 510.0


def test_a_reused_run_updates_a_lane_local_input_in_place_and_copies_an_overlapping_one():
    plan = eagle.deploy(ne_map)
    a, y = np.arange(6.0), np.zeros(6)
    plan.run(x=a.copy(), s=2.0, y=y)
    plan.run(x=a.copy(), s=2.0, y=y)
    b = a.copy()
    out = plan.run(x=b, s=3.0, y=b)  # the same key: each lane reads its own value before writing it
    np.testing.assert_array_equal(b, a * 3.0)
    assert np.asarray(out) is b


def test_runs_from_several_threads_at_once_agree():
    plan = eagle.deploy(ne_centre, threads=2, min_chunk=512)
    inputs = [_data(6000, seed)[0] for seed in range(4)]
    want = [_np(plan.run(x=x)) for x in inputs]
    errors = []

    def work(k):
        try:
            for _ in range(15):
                _same_bits(_np(plan.run(x=inputs[k])), want[k], f"thread {k}")
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            errors.append(exc)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]


# ================================================================================ the fallback and the build
def test_without_the_native_executor_runs_take_the_python_pool(monkeypatch, caplog):
    def no_cc():
        raise RuntimeError("no C compiler (test)")

    monkeypatch.setattr(native, "_STATE", {})
    monkeypatch.setattr(native, "_load_or_build", no_cc)
    with caplog.at_level(logging.DEBUG, logger="eagle.native"):
        assert native.library() is None
        assert native.library() is None
    assert native.unavailable_reason() == "no C compiler (test)"
    said = [r for r in caplog.records if r.name == "eagle.native"]
    assert len(said) == 1 and "no C compiler (test)" in said[0].getMessage()
    monkeypatch.delenv("EAGLE_MIN_CHUNK", raising=False)
    assert eagle.deploy(ne_centre).min_chunk == 1 << 19  # the Python pool's handoffs want larger chunks
    x, _ = _data(20_000)
    plan = eagle.deploy(ne_centre, threads=2, min_chunk=1024)
    before = native.FIRES[0]
    out = plan.run(x=x)
    assert plan.last_executor == ("python", "python") and native.FIRES[0] == before
    np.testing.assert_allclose(np.asarray(out["z"]), x - x.mean(), rtol=1e-12, atol=1e-12 * np.abs(x).max())


def test_the_setting_turns_the_native_executor_off(monkeypatch):
    monkeypatch.setattr(native, "_STATE", {})
    monkeypatch.setenv("EAGLE_NATIVE", "0")
    assert native.library() is None and "EAGLE_NATIVE" in native.unavailable_reason()


def test_the_executor_builds_into_the_disk_cache_and_loads_back(monkeypatch, tmp_path):
    monkeypatch.setenv("HAWK_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(native, "_STATE", {})
    lib = native.library()
    assert lib is not None, native.unavailable_reason()
    entries = sorted(p.name for p in tmp_path.iterdir() if p.name != cache.LOCKS)  # (hawk.abi.cache.building's)
    assert len(entries) == 2 and entries[1] == entries[0] + ".sha256", entries
    monkeypatch.setattr(native, "_STATE", {})
    again = native.library()
    assert again is not None and again._name == str(tmp_path / entries[0])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_runs_native_launches():
    x, _ = _data(20_000)
    plan = eagle.deploy(ne_centre, threads=2, min_chunk=1024)
    want = _np(plan.run(x=x))
    with warnings.catch_warnings():  # (Python warns when another test of this process has imported JAX, whose
        warnings.simplefilter("ignore", RuntimeWarning)  # threads the child does not use: what is tested is ours)
        pid = os.fork()
    if pid == 0:  # the child: its pool starts empty and grows again
        code = 1
        try:
            got = _np(plan.run(x=x))
            code = 0 if all(np.array_equal(got[k], want[k]) for k in want) and native.pool_size() >= 1 else 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child did not finish its native launch within 60 s")


def test_a_kept_run_holds_none_of_its_arrays():
    import gc
    import weakref

    plan = eagle.deploy(ne_centre)
    x = np.arange(1000.0)
    out = plan.run(x=x)
    held = [weakref.ref(x), weakref.ref(np.asarray(out["z"]))]
    del x, out
    gc.collect()
    assert all(r() is None for r in held)
    again = plan.run(x=np.arange(1000.0) + 1)  # and the kept entry still runs
    assert plan._runs.hits == 1 and np.asarray(again["total"])[0] == 500500.0
