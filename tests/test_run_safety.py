"""The run machinery is reliable: the chunk split never changes an ordered result, and a refused run loses nothing.

What is checked:

* chunks: ordered sums next to a kept-axis sum or an ordered scatter give the same bits (the exact sum rounded
  once, conftest.bt_ordered_sum) for every chunk size (`min_chunk=`) and thread count 1..4, on lane counts that
  are no multiple of any chunk size (a short last chunk); the run really splits (`plan.last_chunks`); the
  chunk setting (`min_chunk=`, $EAGLE_MIN_CHUNK) and `threads=` / $EAGLE_THREADS are validated with one line
  naming the setting; base= and count= take whole numbers only;
* nothing lost: a run refused for a late stage's bad key, a wrong-shaped sink in stage 2, or a key computed
  out of range (found as the compiled code runs) under each scatter policy leaves every array the caller
  passed as it was, bit for bit: through run, bind(...).launch(), simulate and until_done, on the host and on
  spirv; a correct run still writes the caller's arrays in place.
"""

import numpy as np
import pytest
from conftest import bt_ordered_sum, bt_same_bits

import eagle
import hawk
from hawk import Grid, Index, Mutable, Scalar

# ============================================================================================ kernels


@hawk.kernel
def rs_ord_keep(lane: Grid["row", "col":100], x: Scalar, total: Mutable[Scalar], rows: Mutable[Scalar]):
    total = hawk.sum(x, policy="ordered")
    rows = hawk.sum(x, over="col")


@hawk.kernel
def rs_ord_keep_ord(lane: Grid["row", "col":100], x: Scalar, total: Mutable[Scalar], rows: Mutable[Scalar]):
    total = hawk.sum(x, policy="ordered")
    rows = hawk.sum(x, over="col", policy="ordered")


@hawk.kernel
def rs_ord_scatter(key: Index, x: Scalar, total: Mutable[Scalar], acc: Mutable["slot":512]):
    total = hawk.sum(x, policy="ordered")
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def rs_split(key: Index, x: Scalar, y: Mutable[Scalar], total: Mutable[Scalar], acc: Mutable["slot":8]):
    total = hawk.sum(x, policy="ordered")  # stage 1 writes y and total; stage 2 scatters
    y = x * 2.0
    hawk.scatter(acc)[key] += x / total


@hawk.kernel
def rs_split_computed(key: Index, x: Scalar, y: Mutable[Scalar], total: Mutable[Scalar], acc: Mutable["slot":8]):
    total = hawk.sum(x, policy="ordered")
    y = x * 2.0
    hawk.scatter(acc, policy="ordered")[key + 5] += x / total


@hawk.kernel
def rs_bad_plain(key: Index, x: Scalar, y: Mutable[Scalar], total: Mutable[Scalar], acc: Mutable["slot":8]):
    total = hawk.sum(x, policy="ordered")
    y = x + 1.0
    hawk.scatter(acc, policy="plain")[key + 5] += x


@hawk.kernel
def rs_bad_comp(key: Index, x: Scalar, y: Mutable[Scalar], total: Mutable[Scalar], acc: Mutable["slot":8]):
    total = hawk.sum(x, policy="ordered")
    y = x + 1.0
    hawk.scatter(acc, policy="compensated")[key + 5] += x


@hawk.kernel
def rs_bad_ord(key: Index, x: Scalar, y: Mutable[Scalar], total: Mutable[Scalar], acc: Mutable["slot":8]):
    total = hawk.sum(x, policy="ordered")
    y = x + 1.0
    hawk.scatter(acc, policy="ordered")[key + 5] += x


@hawk.kernel
def rs_bad_auto(key: Index, x: Scalar, y: Mutable[Scalar], total: Mutable[Scalar], acc: Mutable["slot":8]):
    total = hawk.sum(x, policy="ordered")
    y = x + 1.0
    hawk.scatter(acc)[key + 5] += x


@hawk.kernel
def rs_bad_store(key: Index, x: Scalar, y: Mutable[Scalar], acc: Mutable["slot":8]):
    y = x + 1.0
    hawk.scatter(acc)[key + 5] = x


@hawk.kernel
def rs_step(x: Scalar, nxt: Mutable[Scalar], acc: Mutable["slot":8], top: Mutable[Scalar]):
    nxt = x + 1.0
    hawk.scatter(acc)[0] += x
    top = hawk.max(x)


@hawk.kernel
def rs_plain(x: Scalar, y: Mutable[Scalar]):
    y = x * 3.0


BAD = {"plain": rs_bad_plain, "compensated": rs_bad_comp, "ordered": rs_bad_ord, "auto": rs_bad_auto}


# ============================================================================================ helpers


def _snapshot(planes: dict) -> dict:
    return {k: v.copy() for k, v in planes.items() if isinstance(v, np.ndarray)}


def _unchanged(planes: dict, snap: dict, what: str) -> None:
    for k, v in snap.items():
        bt_same_bits(planes[k], v, f"{what}: plane '{k}'")


def _planes(n: int, seed: int, keys: int = 8) -> dict:
    rng = np.random.default_rng(seed)
    return {"key": rng.integers(0, keys, size=n).astype(np.int32), "x": rng.uniform(0.5, 2.0, n),
            "y": rng.normal(size=n), "total": np.array([7.25]), "acc": rng.normal(size=keys)}


# ============================================================================================ chunks


@pytest.mark.parametrize("rows", [1001, 2047])
@pytest.mark.parametrize("kernel", [rs_ord_keep, rs_ord_keep_ord])
def test_ordered_sum_beside_a_kept_sum_is_the_same_for_every_chunk_split(kernel, rows):
    x = np.random.default_rng(rows).normal(size=(rows, 100))
    assert x.size % 1024  # a short last chunk
    want = eagle.deploy(kernel, threads=1).run(x=x)
    assert np.asarray(want["total"])[0] == bt_ordered_sum(x.ravel())
    np.testing.assert_allclose(np.asarray(want["rows"]), x.sum(axis=1), rtol=1e-12, atol=1e-12)
    for min_chunk in (1024, 5000, 40_000):
        for threads in (1, 2, 3, 4):
            plan = eagle.deploy(kernel, threads=threads, min_chunk=min_chunk)
            got = plan.run(x=x)
            bt_same_bits({k: np.asarray(v) for k, v in got.items()}, {k: np.asarray(v) for k, v in want.items()},
                         f"{kernel.name} rows={rows} min_chunk={min_chunk} threads={threads}")
            assert threads == 1 or plan.last_chunks[0] > 1, plan.last_chunks


@pytest.mark.parametrize("n", [50_001, 123_457])
def test_ordered_sum_beside_an_ordered_scatter_is_the_same_for_every_chunk_split(n):
    rng = np.random.default_rng(n)
    x = rng.normal(size=n)
    key = rng.integers(0, 512, size=n).astype(np.int32)
    want = eagle.deploy(rs_ord_scatter, threads=1).run(x=x, key=key)
    want = {k: np.asarray(v) for k, v in want.items()}
    assert want["total"][0] == bt_ordered_sum(x)
    np.testing.assert_allclose(want["acc"], np.bincount(key, weights=x, minlength=512), rtol=1e-10, atol=1e-12)
    for min_chunk in (1024, 5000, 40_000):
        for threads in (1, 2, 3, 4):
            plan = eagle.deploy(rs_ord_scatter, threads=threads, min_chunk=min_chunk)
            got = {k: np.asarray(v) for k, v in plan.run(x=x, key=key).items()}
            bt_same_bits(got, want, f"n={n} min_chunk={min_chunk} threads={threads}")
            assert threads == 1 or n < 2 * min_chunk or plan.last_chunks[0] > 1, plan.last_chunks


@pytest.mark.parametrize("kernel", [rs_ord_keep_ord, rs_ord_scatter])
def test_gpu_forms_give_the_hosts_bits_on_a_partial_last_block(target, kernel):
    rng = np.random.default_rng(77)
    if kernel is rs_ord_scatter:
        planes = {"x": rng.normal(size=50_001), "key": rng.integers(0, 512, size=50_001).astype(np.int32)}
    else:
        planes = {"x": rng.normal(size=(1001, 100))}
    want = eagle.deploy(kernel, threads=1).run(**planes)
    for threads in (2, 3):
        plan = eagle.deploy(kernel, target=target, threads=threads, min_chunk=1024)
        got = plan.run(**planes)
        bt_same_bits({k: np.asarray(v) for k, v in got.items()}, {k: np.asarray(v) for k, v in want.items()},
                     f"{kernel.name} on {target} threads={threads} chunks={plan.last_chunks}")
        assert plan.last_chunks[0] > 1


def test_chunks_are_never_empty_and_tile_the_lanes():
    # the split that used to leave empty trailing chunks: 512 slots over 50001 lanes take segments of 8192 lanes
    plan = eagle.deploy(rs_ord_scatter, threads=2, min_chunk=1024)
    rng = np.random.default_rng(5)
    x, key = rng.normal(size=50_001), rng.integers(0, 512, size=50_001).astype(np.int32)
    b = plan.binder.bind({"x": x, "key": key})
    _, launcher = plan.prepare(b.spec, 0)
    bounds = launcher.chunk_bounds(b, 0, b.lanes)
    assert len(bounds) > 1 and bounds[0][0] == 0 and bounds[-1][1] == b.lanes
    assert all(lo < hi for lo, hi in bounds)
    assert all(a[1] == c[0] and a[1] % launcher.aligned(b) == 0 for a, c in zip(bounds[:-1], bounds[1:], strict=True))
    assert plan.bind(x=x, key=key).chunks == (len(bounds),)


def test_runs_below_the_default_chunk_are_one_chunk(monkeypatch):
    monkeypatch.delenv("EAGLE_MIN_CHUNK", raising=False)
    x = np.ones(10_000)  # below eagle.settings.MIN_CHUNK
    plan = eagle.deploy(rs_plain, threads=4)
    plan.run(x=x)
    assert plan.last_chunks == (1,)
    plan = eagle.deploy(rs_plain, threads=4, min_chunk=2048)
    plan.run(x=x)
    assert plan.last_chunks[0] > 1


def test_the_chunk_setting_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("EAGLE_MIN_CHUNK", "1024")
    plan = eagle.deploy(rs_plain, threads=2)
    np.testing.assert_array_equal(np.asarray(plan.run(x=np.arange(10_000.0))), np.arange(10_000.0) * 3.0)
    assert plan.last_chunks[0] > 1


@pytest.mark.parametrize("value", [0, -5, "2", 1.5, True])
def test_a_bad_min_chunk_is_refused_naming_the_setting(value):
    with pytest.raises(ValueError, match=r"^eagle.deploy\(rs_plain\): min_chunk= must be a whole number") as err:
        eagle.deploy(rs_plain, min_chunk=value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("value", ["abc", "0", "1.5"])
def test_a_bad_eagle_min_chunk_is_refused_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("EAGLE_MIN_CHUNK", value)
    with pytest.raises(ValueError, match=r"\$EAGLE_MIN_CHUNK must be a whole number of lanes >= 1") as err:
        eagle.deploy(rs_plain)
    assert repr(value) in str(err.value) or value == "0"


@pytest.mark.parametrize("value", ["2", 0, -1, 2.0, True])
def test_a_bad_thread_count_is_refused_naming_the_setting(value):
    with pytest.raises(ValueError, match=r"^eagle.deploy\(rs_plain\): threads= must be a whole number of threads"):
        eagle.deploy(rs_plain, threads=value)


@pytest.mark.parametrize("value", ["abc", "0", ""])
def test_a_bad_eagle_threads_is_refused_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("EAGLE_THREADS", value)
    if value == "":  # unset in effect: the CPU count
        assert eagle.deploy(rs_plain).threads >= 1
        return
    with pytest.raises(ValueError, match=r"\$EAGLE_THREADS must be a whole number of threads >= 1") as err:
        eagle.deploy(rs_plain)
    assert err.value.__suppress_context__ or err.value.__context__ is None  # no traceback from int()


def test_numpy_integers_are_whole_numbers():
    plan = eagle.deploy(rs_plain, threads=np.int64(2), min_chunk=np.int32(1024))
    assert (plan.threads, plan.min_chunk) == (2, 1024)
    y = plan.run(x=np.ones(10), base=np.int64(2), count=np.int32(3))
    np.testing.assert_array_equal(np.asarray(y), [0, 0, 3, 3, 3, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("arg, value", [("base", 1.5), ("count", "2"), ("base", True), ("count", 2.0)])
def test_base_and_count_take_whole_numbers(arg, value):
    plan = eagle.deploy(rs_plain)
    with pytest.raises(eagle.InputError, match=rf"kernel 'rs_plain': {arg}= takes a whole number of lanes"):
        plan.run(x=np.ones(10), **{arg: value})
    with pytest.raises(eagle.InputError, match=rf"kernel 'rs_plain': {arg}= takes a whole number of lanes"):
        plan.bind(x=np.ones(10), **{arg: value})


# ============================================================================================ nothing lost


def test_a_late_stage_bad_key_writes_nothing(target):
    planes = _planes(5000, 1)
    planes["key"][4321] = 8  # stage 2's key: stage 1 would write y and total
    snap = _snapshot(planes)
    with pytest.raises(eagle.InputError, match="'key'.*holds key 8"):
        eagle.deploy(rs_split, target=target).run(**planes)
    _unchanged(planes, snap, "late bad key")
    with pytest.raises(eagle.InputError, match="holds key 8"):
        eagle.deploy(rs_split, target=target).bind(**planes)
    _unchanged(planes, snap, "late bad key, bound")


def test_a_wrong_shaped_sink_in_stage_two_writes_nothing(target):
    planes = _planes(5000, 2)
    planes["acc"] = np.zeros(7)
    snap = _snapshot(planes)
    with pytest.raises(eagle.InputError, match="'acc'.*must be shaped"):
        eagle.deploy(rs_split, target=target).run(**planes)
    _unchanged(planes, snap, "wrong-shaped sink")


@pytest.mark.parametrize("policy", sorted(BAD))
def test_a_key_computed_out_of_range_writes_nothing(target, policy):
    planes = _planes(20_000, 3)
    snap = _snapshot(planes)
    plan = eagle.deploy(BAD[policy], target=target, threads=3, min_chunk=1024)
    with pytest.raises(eagle.InputError, match=f"sink 'acc' of kernel '{BAD[policy].name}'"):
        plan.run(**planes)
    _unchanged(planes, snap, policy)


def test_a_key_computed_out_of_range_in_stage_two_writes_nothing(target):
    planes = _planes(20_000, 4)
    snap = _snapshot(planes)
    with pytest.raises(eagle.InputError, match="scattered to a key outside it"):
        eagle.deploy(rs_split_computed, target=target, threads=2, min_chunk=1024).run(**planes)
    _unchanged(planes, snap, "stage 2")


def test_a_stored_sink_with_a_bad_computed_key_is_untouched(target):
    planes = {k: v for k, v in _planes(9000, 5).items() if k != "total"}
    snap = _snapshot(planes)
    with pytest.raises(eagle.InputError, match="scattered to a key outside it"):
        eagle.deploy(rs_bad_store, target=target, threads=2, min_chunk=1024).run(**planes)
    _unchanged(planes, snap, "store")


@pytest.mark.parametrize("policy", ["plain", "ordered"])
def test_a_correct_run_still_writes_in_place(target, policy):
    planes = _planes(20_000, 6)
    planes["key"] = planes["key"] % 3  # key + 5 stays inside the sink
    prior = planes["acc"].copy()
    out = eagle.deploy(BAD[policy], target=target, threads=2, min_chunk=1024).run(**planes)
    for name in ("y", "acc"):
        assert np.asarray(out[name]) is planes[name]
    np.testing.assert_array_equal(planes["y"], planes["x"] + 1.0)
    assert planes["total"][0] == bt_ordered_sum(planes["x"])
    want = prior + np.bincount(planes["key"] + 5, weights=planes["x"], minlength=8)
    np.testing.assert_allclose(planes["acc"], want, rtol=1e-12)


def test_a_bound_launch_that_refuses_leaves_the_arrays_and_the_next_one_works(target):
    planes = _planes(20_000, 7)
    planes["key"] = planes["key"] % 3
    bound = eagle.deploy(rs_bad_comp, target=target, threads=2, min_chunk=1024).bind(**planes)
    bound.launch()
    once = planes["acc"].copy()
    planes["key"][12_345] = 3  # key + 5 = 8: outside the sink, found as the compiled code runs
    snap = _snapshot(planes)
    with pytest.raises(eagle.InputError, match="first bad key: 8"):
        bound.launch()
    _unchanged(planes, snap, "bound launch")
    planes["key"][12_345] = 0
    res = bound.launch()  # the sink the caller passed keeps accumulating, in place
    assert np.asarray(res["acc"]) is planes["acc"]
    step = np.bincount(planes["key"] + 5, weights=planes["x"], minlength=8)
    np.testing.assert_allclose(planes["acc"], once + step, rtol=1e-12)


def test_a_split_bound_launch_that_refuses_leaves_the_arrays(target):
    planes = _planes(20_000, 8)
    bound = eagle.deploy(rs_split, target=target, threads=2, min_chunk=1024).bind(**planes)
    bound.launch()
    planes["key"][777] = -3  # checked only as stage 2 runs: stage 1 has written y and total by then
    snap = _snapshot(planes)
    with pytest.raises(eagle.InputError, match="first bad key: -3"):
        bound.launch()
    _unchanged(planes, snap, "split bound launch")


def test_simulate_and_until_done_that_refuse_leave_the_arrays(target):
    rng = np.random.default_rng(9)
    planes = {"x": rng.uniform(size=300), "nxt": rng.normal(size=300), "acc": rng.normal(size=8),
              "top": np.array([0.5])}
    snap = _snapshot(planes)
    plan = eagle.deploy(rs_step, target=target)
    with pytest.raises(eagle.InputError, match="max_steps=4"):
        plan.until_done(lambda r: False, carry={"nxt": "x"}, max_steps=4, **planes)
    _unchanged(planes, snap, "until_done")
    bad = {k: v for k, v in _planes(300, 10).items() if k != "total"}
    snap = _snapshot(bad)
    with pytest.raises(eagle.InputError, match="scattered to a key outside it"):
        eagle.deploy(rs_bad_store, target=target).simulate(3, **bad)
    _unchanged(bad, snap, "simulate")


def test_simulate_that_succeeds_writes_the_passed_arrays(target):
    rng = np.random.default_rng(11)
    x = rng.uniform(size=300)
    planes = {"x": x.copy(), "nxt": np.zeros(300), "acc": np.full(8, 2.0), "top": np.zeros(1)}
    out = eagle.deploy(rs_step, target=target).simulate(3, carry={"nxt": "x"}, **planes)
    np.testing.assert_array_equal(planes["x"], x)  # a carried input is never written
    assert np.asarray(out["nxt"]) is planes["nxt"] and np.asarray(out["acc"]) is planes["acc"]
    np.testing.assert_allclose(planes["nxt"], x + 3.0, rtol=1e-15)
    np.testing.assert_allclose(planes["acc"][0], 2.0 + 3 * x.sum() + 300 * 3.0, rtol=1e-12)
    assert planes["top"][0] == (x + 2.0).max()
    res, steps = eagle.deploy(rs_step, target=target).until_done("top", carry={"nxt": "x"}, x=np.zeros(4),
                                                               nxt=planes["nxt"][:4].copy())
    assert steps == 2 and np.asarray(res["top"])[0] == 1.0


def test_runs_with_nothing_to_check_at_run_time_write_in_place():
    x = np.arange(5000.0)
    y = np.full(5000, -1.0)
    bound = eagle.deploy(rs_plain, threads=2, min_chunk=1024).bind(x=x, y=y)
    assert not bound.stages[0].staged  # no scatter: the compiled code writes the caller's array itself
    assert np.asarray(bound.launch()) is y
    np.testing.assert_array_equal(y, x * 3.0)


def test_a_graph_stops_at_the_node_that_refuses():
    """A graph is a sequence of launches: the nodes before the one that refuses have run (a later node may read
    their writes, so they are not undone), the refusing node writes nothing, and the nodes after it do not run."""
    first = _planes(20_000, 5)
    bad = _planes(20_000, 6)
    sums = np.zeros(1)
    graph = (eagle.Graph()
             .add_node(eagle.deploy(rs_split).bind(**first), name="first")
             .add_node(eagle.deploy(rs_bad_plain, threads=3, min_chunk=1024).bind(**bad), name="bad")
             .add_node(eagle.reduce(first["x"], sums), name="after"))
    built = graph.build()
    snap_first, snap_bad = _snapshot(first), _snapshot(bad)
    with pytest.raises(eagle.InputError, match="sink 'acc' of kernel 'rs_bad_plain'"):
        built.launch()
    assert not np.array_equal(first["y"], snap_first["y"]), "the first node ran and wrote its output"
    _unchanged(bad, snap_bad, "the refusing node")
    assert sums[0] == 0.0, "the node after the refusal did not run"
