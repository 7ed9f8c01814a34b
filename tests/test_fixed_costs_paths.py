"""The short paths of a reused host run and a bound launch (issue 12) do what the full paths do.

A reused Plan.run of one stage that checks no keys and takes its planes as they are rebinds that stage to the
planes directly (eagle.native.reuse.Entry.alone); a bound launch of one native stage with nothing to save or
commit is its foreign call (eagle.doors.BoundLaunch); an array's address is read from the array object
(eagle.native.address). Each is checked here against what the full path gives: results, fresh result arrays,
refusals that leave the cache and the caller's arrays as they were, the counters tests read. Speed itself is
measured by benchmarks/fixed_costs.py, never asserted here.
"""

import threading

import numpy as np
import pytest

import eagle
import eagle.native
import eagle.stage
import hawk
from benchmarks import kernels as K
from eagle.errors import InputError
from hawk import Index, Mutable, Scalar


@hawk.kernel
def fp_bad(key: Index, x: Scalar, y: Mutable[Scalar], acc: Mutable["slot":8]):
    y = x + 1.0
    hawk.scatter(acc, policy="plain")[key + 5] += x


NATIVE = eagle.native.library() is not None


def _want(kernel, x: np.ndarray) -> np.ndarray:
    return {"tiny_map": x + 1.0, "tiny_sum": np.array([x.sum()]), "max_all": np.array([x.max()])}[kernel.name]


@pytest.mark.parametrize("kernel", [K.tiny_map, K.tiny_sum, K.max_all], ids=lambda k: k.name)
def test_reused_runs_of_one_stage_take_the_short_path_and_hand_back_fresh_results(kernel):
    plan = eagle.deploy(kernel)
    rng = np.random.default_rng(12)
    xs = [rng.standard_normal(64) for _ in range(4)]
    fires = eagle.native.FIRES[0]
    got = [plan.run(x=x) for x in xs]
    assert plan._runs.hits == 3 and next(iter(plan._runs.entries.values())).alone is not None
    for x, r in zip(xs, got, strict=True):  # every run's own arrays: a later run wrote none of an earlier one's
        np.testing.assert_allclose(np.asarray(r), _want(kernel, x), rtol=1e-12)
    assert len({id(np.asarray(r)) for r in got}) == len(got)
    assert plan.last_chunks == (1,) and plan.last_executor == ("native" if NATIVE else "python",)
    assert eagle.native.FIRES[0] - fires == (len(xs) if NATIVE else 0)
    template, stages, facts, steps = next(iter(plan._runs.entries.values()))  # (an entry unpacks as before)
    assert template.arrays == {} and template.given == {} and facts == (plan.last_chunks, plan.last_executor)
    assert all(stages[0].buffers[k] is eagle.stage._GONE for k, _ in stages[0].per_run)  # it keeps no run's array
    assert steps[0][2] == "as is"


def test_cells_beyond_the_template_size_start_at_their_identity_too(monkeypatch):
    monkeypatch.setattr(eagle.stage, "_SMALL_CELL", 0)  # every cell: np.empty and fill, as before the templates
    plan = eagle.deploy(K.max_all)
    for j in range(3):
        x = np.linspace(-5.0, -1.0, 16) - j
        assert float(np.asarray(plan.run(x=x))[0]) == x.max()
    assert plan._runs.hits == 2


def test_a_converted_plane_takes_the_full_reuse_path():
    plan = eagle.deploy(K.tiny_map)
    big = np.arange(32.0)
    for j in range(3):
        x = (big + j)[::2]  # strided: converted at every run, so not the short path
        np.testing.assert_array_equal(np.asarray(plan.run(x=x)), x + 1.0)
    entry = next(iter(plan._runs.entries.values()))
    assert entry.alone is None and plan._runs.hits == 2


def test_a_refusal_found_as_the_short_path_runs_leaves_no_entry_and_the_next_run_prepares_afresh():
    x = np.arange(64.0)
    key = np.zeros(64, dtype=np.int64)
    plan = eagle.deploy(fp_bad)
    plan.run(key=key, x=x)
    first = plan.run(key=key, x=x)
    entry = next(iter(plan._runs.entries.values()))
    assert plan._runs.hits == 1 and entry.alone is not None and (entry.fires is not None) == NATIVE
    bad = key.copy()
    bad[40] = 3  # 3 + 5 = 8: outside the 8 slots, found by the compiled code
    with pytest.raises(InputError, match=r"sink 'acc' of kernel 'fp_bad': 1 lane\(s\) scattered to a key "
                                         r"outside it \(first bad key: 8\)"):
        plan.run(key=bad, x=x)
    assert not plan._runs.entries  # a run that raised did not put its entry back
    hits = plan._runs.hits
    again = plan.run(key=key, x=x)
    assert plan._runs.hits == hits and len(plan._runs.entries) == 1  # prepared afresh, and kept
    for r in (first, again):
        np.testing.assert_array_equal(np.asarray(r["y"]), x + 1.0)
        assert float(np.asarray(r["acc"])[5]) == x.sum()


def test_a_bound_launch_is_its_foreign_call_and_still_refuses_a_bad_key():
    x = np.arange(64.0)
    key = np.zeros(64, dtype=np.int64)
    bound = eagle.deploy(fp_bad).bind(key=key, x=x)
    assert (bound._direct is not None) == NATIVE
    fires = eagle.native.FIRES[0]
    for _ in range(3):  # the sink starts fresh at every launch
        out = bound.launch()
        assert float(np.asarray(out["acc"])[5]) == x.sum()
    assert eagle.native.FIRES[0] - fires == (3 if NATIVE else 0)
    bound.inputs["key"][40] = 3
    with pytest.raises(InputError, match=r"sink 'acc' of kernel 'fp_bad': 1 lane\(s\) scattered to a key outside"):
        bound.launch()
    bound.inputs["key"][40] = 0
    bound.inputs["x"][:] = 2.0  # bound inputs changed in place are seen by the next launch
    out = bound.launch()
    np.testing.assert_array_equal(np.asarray(out["y"]), np.full(64, 3.0))


@pytest.mark.parametrize("threads", [1, 2])
def test_a_bound_launch_into_a_passed_sink_is_its_foreign_call_and_a_refusal_leaves_the_sink(threads):
    """A passed sink is written through a scratch copy; a bound launch of one stage has its native launch copy
    that back itself (executor.c, copy_back) only when nothing was refused."""
    rng = np.random.default_rng(5)
    n = 20_000
    key = rng.integers(0, 3, n).astype(np.int64)
    x = rng.standard_normal(n)
    acc = rng.standard_normal(8)
    want = acc.copy()
    plan = eagle.deploy(fp_bad, threads=threads, min_chunk=1024)
    bound = plan.bind(key=key, x=x, acc=acc)
    assert (bound._direct is not None) == NATIVE
    fires = eagle.native.FIRES[0]
    for _ in range(2):  # the caller's sink accumulates, launch after launch
        out = bound.launch()
        np.add.at(want, key + 5, x)
        assert np.asarray(out["acc"]) is acc
        np.testing.assert_allclose(acc, want, rtol=1e-12, atol=1e-12)
    assert eagle.native.FIRES[0] - fires == (2 if NATIVE else 0)
    assert (max(bound.chunks) > 1) == (threads > 1)  # (the two-thread case really split)
    before = acc.copy()
    bound.inputs["key"][n // 2] = 3  # 3 + 5 = 8: found by the compiled code, after other lanes added theirs
    with pytest.raises(InputError, match=r"sink 'acc' of kernel 'fp_bad': 1 lane\(s\) scattered to a key outside"):
        bound.launch()
    assert acc.tobytes() == before.tobytes()
    bound.inputs["key"][n // 2] = 0
    bound.launch()
    np.add.at(want, key + 5, x)
    np.testing.assert_allclose(acc, want, rtol=1e-12, atol=1e-12)


def test_a_bound_launch_calls_stageargs_fire_as_patched(monkeypatch):
    if not NATIVE:
        pytest.skip(f"no native executor here: {eagle.native.unavailable_reason()}")
    seen = []
    fire = eagle.native.StageArgs.fire

    def counting(self):
        seen.append(self)
        return fire(self)

    monkeypatch.setattr(eagle.native.StageArgs, "fire", counting)
    x = np.ones(4)
    bound = eagle.deploy(K.tiny_map).bind(x=x)
    bound.launch()
    bound.launch()
    assert len(seen) == 2 and seen[0] is bound.stages[0].args


def test_runs_from_several_threads_on_the_short_path_each_get_their_own_results():
    plan = eagle.deploy(K.tiny_map)
    plan.run(x=np.zeros(128))
    bad: list = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(200):
            x = rng.standard_normal(128)
            if not np.array_equal(np.asarray(plan.run(x=x)), x + 1.0):
                bad.append(seed)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


@pytest.mark.parametrize("how", ["flat", "view", "empty", "read-only", "int32", "2-d"])
def test_an_address_read_from_the_array_object_is_the_arrays_data_pointer(how):
    base = np.arange(24.0)
    a = {"flat": base, "view": base[5:], "empty": np.empty(0), "read-only": base[3:].copy(),
         "int32": np.arange(7, dtype=np.int32), "2-d": base.reshape(4, 6)[1:]}[how]
    if how == "read-only":
        a.flags.writeable = False
    assert eagle.native.address(a) == a.ctypes.data
    assert eagle.native.address(a, _at=None) == a.ctypes.data  # (where the array object is not read)
