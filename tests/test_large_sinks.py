"""Sinks that used to run as one chunk (one GPU thread): scatters into sinks over hawk.abi.layout.PRIVATE_SLOTS slots
(plain, auto, compensated; added or stored into) and sinks both stored and added into.

Each chunk of lanes writes a private copy of the sink and the finish combines the copies in chunk order. Such a
stage's chunks are a fixed function of its lanes and sizes (Layout.fixed_chunks; on the host each chunk runs at
least two lanes per value its copies hold, hence the lane counts here), so its results have the same bits at
every thread count; the tests check that the runs really split (`plan.last_chunks`), the results against NumPy
(within the sum contract's bound, or exactly where the rule is exact) and the bits across thread counts.
"""

import math

import numpy as np
import pytest
from conftest import bt_executor, bt_same_bits

import eagle
import hawk
from hawk import Index, Mutable, Scalar, Vector
from hawk.abi.layout import PAIR_SLOTS, PRIVATE_SLOTS, private_sink_slots

SMALL_CHUNK = 4096  # min_chunk for the tests: runs of ~1e5 lanes split into many chunks
BIG = 70_000  # just over PRIVATE_SLOTS
HUGE = 300_000


@hawk.kernel
def ls_auto(key: Index, x: Scalar, acc: Mutable["slot":70_000]):
    hawk.scatter(acc)[key] += x


@hawk.kernel
def ls_comp_huge(key: Index, x: Scalar, acc: Mutable["slot":300_000]):
    hawk.scatter(acc, policy="compensated")[key] += x


@hawk.kernel
def ls_plain(key: Index, x: Scalar, acc: Mutable["slot":70_000]):
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def ls_plain_huge(key: Index, x: Scalar, acc: Mutable["slot":300_000]):
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def ls_auto_vec(key: Index, v: Vector[2], acc: Mutable["slot":70_000]):
    hawk.scatter(acc)[key] += v


@hawk.kernel
def ls_store_huge(key: Index, x: Scalar, buf: Mutable["slot":300_000]):
    hawk.scatter(buf)[key] = x


@hawk.kernel
def ls_mixed(key: Index, other: Index, x: Scalar, buf: Mutable["slot":70_000]):
    hawk.scatter(buf)[key] = x
    hawk.scatter(buf, policy="plain")[other] += x * 0.5


def _plan(kernel, target: str, threads: int):
    return eagle.deploy(kernel, target=target, threads=threads, min_chunk=SMALL_CHUNK)


def _runs(kernel, target: str, **planes) -> np.ndarray:
    """The kernel's result at threads 1 and 2: every run split into several chunks (GPU: threads), the same bits
    at both thread counts, and the passed sink (if any) written in place. Returns the result."""
    got, chunks = [], []
    for threads in (1, 2):
        given = {k: (np.array(v, copy=True) if k in ("acc", "buf") else v) for k, v in planes.items()}
        plan = _plan(kernel, target, threads)
        out = np.asarray(plan.run(**given))
        assert min(plan.last_chunks) > 1, f"{kernel.name} threads={threads}: ran {plan.last_chunks} chunk(s)"
        for k in ("acc", "buf"):
            if k in given:
                np.testing.assert_array_equal(given[k], out)
        got.append(out)
        chunks.append(plan.last_chunks)
    assert chunks[0] == chunks[1], f"{kernel.name}: the chunks depend on the thread count: {chunks}"
    bt_same_bits(got[1], got[0], f"{kernel.name}: threads 2 against threads 1")
    return got[0]


def _keys(rng, n: int, slots: int, minus: float = 0.05) -> np.ndarray:
    """Random keys into `slots` slots, about a `minus` share of them -1 (no slot)."""
    key = rng.integers(0, slots, size=n)
    key[rng.uniform(size=n) < minus] = -1
    return key.astype(np.int32)


def _per_slot(prior: np.ndarray, key: np.ndarray, x: np.ndarray):
    """Per slot of a 1-D sink: the exact sum of its prior content and its lanes' terms (math.fsum), the sum of their
    magnitudes, and how many terms it got (key -1 adds nothing)."""
    keep = key >= 0
    k, t = key[keep], np.asarray(x, dtype=np.float64)[keep]
    order = np.argsort(k, kind="stable")
    k, t = k[order], t[order]
    cuts = np.searchsorted(k, np.arange(prior.size + 1))
    exact = np.array(prior, dtype=np.float64)
    mag = np.abs(exact)
    count = np.diff(cuts)
    for s in np.flatnonzero(count):
        terms = [float(prior[s]), *t[cuts[s]:cuts[s + 1]].tolist()]
        exact[s] = math.fsum(terms)
        mag[s] = math.fsum(abs(v) for v in terms)
    return exact, mag, count


def _check_sum(got, prior, key, x, bound_terms: bool, dtype) -> None:
    """Each slot within the contract: |got - exact| <= k * eps * sum|terms| with k = 1 (compensated), or the number
    of terms (plain); a slot no lane added into keeps its prior content, bit for bit."""
    exact, mag, count = _per_slot(prior, key, x)
    eps = float(np.finfo(dtype).eps)
    k = (count + 1.0) if bound_terms else 1.0
    err = np.abs(np.asarray(got, dtype=np.float64) - exact)
    worst = np.max(err - k * eps * mag)
    assert worst <= 0.0, f"a slot is off the contract's bound by {worst}"
    untouched = count == 0
    bt_same_bits(np.asarray(got)[untouched], np.asarray(prior, dtype=dtype)[untouched], "untouched slots")


def test_which_sinks_get_copies():
    assert private_sink_slots(BIG, "compensated", False, True) == BIG
    assert private_sink_slots(BIG, "plain", True, True) == BIG  # stored and added: marks and copies
    assert private_sink_slots(BIG, "compensated", True, True) == 0  # refused by the compiler anyway
    assert private_sink_slots(BIG, "ordered", False, True) == 0  # ordered sinks keep pairs (hawk/passes/analysis)
    assert private_sink_slots(PAIR_SLOTS + 1, "plain", False, True) == 0
    assert BIG > PRIVATE_SLOTS


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_auto_scatter_into_a_large_sink(target, dtype):
    rng = np.random.default_rng(71_000)
    n = 600_000
    key = _keys(rng, n, BIG)
    x = rng.normal(size=n).astype(dtype) * np.where(rng.uniform(size=n) < 0.1, 1e8, 1.0).astype(dtype)
    prior = rng.normal(size=BIG).astype(dtype)
    got = _runs(ls_auto, target, key=key, x=x, acc=prior)
    assert got.dtype == dtype and got.shape == (BIG,)
    _check_sum(got, prior, key, x, False, dtype)


def test_compensated_scatter_into_a_huge_sink(target):
    rng = np.random.default_rng(71_001)
    n = 2_500_000
    key = _keys(rng, n, HUGE // 50)  # many terms a slot, where compensation matters
    key = np.where(key >= 0, key * 50 + 7, -1).astype(np.int32)
    x = rng.normal(size=n) * 10.0 ** rng.integers(-6, 7, size=n)
    got = _runs(ls_comp_huge, target, key=key, x=x)
    _check_sum(got, np.zeros(HUGE), key, x, False, np.float64)


@pytest.mark.parametrize("kernel,slots,n", [(ls_plain, BIG, 300_000), (ls_plain_huge, HUGE, 1_200_000)])
def test_plain_scatter_into_large_sinks(target, kernel, slots, n):
    rng = np.random.default_rng(71_002 + slots)
    key = _keys(rng, n, slots)
    x = rng.normal(size=n)
    prior = rng.normal(size=slots)
    got = _runs(kernel, target, key=key, x=x, acc=prior)
    _check_sum(got, prior, key, x, True, np.float64)
    want = prior.copy()  # and numpy's np.add.at, within the plain bound
    np.add.at(want, key[key >= 0], x[key >= 0])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_vector_payload_into_a_large_sink(target):
    rng = np.random.default_rng(71_003)
    n = 1_200_000
    key = _keys(rng, n, BIG)
    v = rng.normal(size=(2, n))
    prior = rng.normal(size=(2, BIG))
    got = _runs(ls_auto_vec, target, key=key, v=v, acc=prior)
    assert got.shape == (2, BIG)
    for c in range(2):
        _check_sum(got[c], prior[c], key, v[c], False, np.float64)


def _last_writer(prior, key, values):
    """Each slot keeps the value of the last lane (in lane order) that stored into it; key -1 stores nothing."""
    out = np.array(prior, copy=True)
    keep = key >= 0
    out[key[keep]] = values[keep]  # NumPy assigns repeated indices in order: the last one stays
    return out


def test_store_into_a_huge_sink_keeps_the_last_lane(target):
    rng = np.random.default_rng(71_004)
    n = 2_500_000
    key = _keys(rng, n, HUGE)
    x = rng.normal(size=n)
    prior = np.linspace(-1.0, 1.0, HUGE)
    got = _runs(ls_store_huge, target, key=key, x=x, buf=prior)
    np.testing.assert_array_equal(got, _last_writer(prior, key, x))


def _mixed_reference(prior, key, other, x):
    """Lane by lane, in statement order: store x at key, then add x / 2 at other."""
    out = np.array(prior, copy=True)
    for k, o, v in zip(key.tolist(), other.tolist(), x.tolist(), strict=True):
        if k >= 0:
            out[k] = v
        if o >= 0:
            out[o] += v * 0.5
    return out


def test_stored_and_added_sink_in_lane_order(target):
    rng = np.random.default_rng(71_005)
    n = 600_000
    # whole multiples of 1/4 below 2**20: every sum of them is exact, so the reference is exact whatever the order
    x = rng.integers(-4000, 4000, size=n) / 4.0
    key = _keys(rng, n, BIG, minus=0.3)
    other = _keys(rng, n, BIG, minus=0.2)
    other[: n // 2] = key[: n // 2]  # half the lanes add into the slot they just stored
    prior = rng.integers(-100, 100, size=BIG) / 2.0
    prior[:10] = -0.0  # slots nobody touches keep their content, -0.0 included
    key[np.isin(key, np.arange(10))] = 10
    other[np.isin(other, np.arange(10))] = 11
    got = _runs(ls_mixed, target, key=key, other=other, x=x, buf=prior)
    want = _mixed_reference(prior, key, other, x)
    np.testing.assert_array_equal(got, want)
    bt_same_bits(got[:10], prior[:10], "untouched slots")


def test_artifacts_run_large_sinks_with_the_same_bits(tmp_path):
    # the layout's fields for these sinks (private copies, "mixed") travel in the artifact's sidecar
    hawk.artifact.build_bundle([ls_auto, ls_mixed], tmp_path, targets=("host",), dtypes=("float64",))
    rng = np.random.default_rng(71_006)
    n = 600_000
    key, other = _keys(rng, n, BIG), _keys(rng, n, BIG)
    x = rng.integers(-4000, 4000, size=n) / 4.0
    for kernel, planes in ((ls_auto, dict(key=key, x=rng.normal(size=n))), (ls_mixed, dict(key=key, other=other, x=x))):
        plan = _plan(kernel, "host", 1)
        want = np.asarray(plan.run(**planes))
        assert min(plan.last_chunks) > 1, plan.last_chunks
        got = np.asarray(hawk.run(hawk.load(tmp_path, kernel.name), **planes))
        bt_same_bits(got, want, f"{kernel.name}: artifact against plan")


def test_a_gpu_with_float_atomics_keeps_no_copies_of_a_large_plain_sink():
    # nvvm and rocdl add into a large plain sink with float atomics (hawk/passes/lower_gpu.py): their launch gives
    # it no copies (so the grid stays wide) and the host finish, which counts the copies it is given, leaves the
    # sink as the device wrote it. Checked here with the host finish on buffers made as such a launch makes them.
    from eagle.launch import PackedArgs
    from eagle.targets.device import plan_grid

    lay = ls_plain_huge.layout(ls_plain_huge.default_spec(), 0)
    assert lay.atomic_sinks() == ["acc"] and lay.private == {"acc": HUGE} and lay.fixed_chunks()
    assert plan_grid(lay, 10**7, 8, (10**7,), atomics=True).chunks > 1000  # no copies: as wide as a sum's grid
    assert plan_grid(lay, 10**7, 8, (10**7,)).chunks < 100  # spirv: one copy per thread, within COPY_LIMIT
    plan = eagle.deploy(ls_plain_huge)
    n = 1000
    b = plan.binder.bind(dict(key=np.zeros(n, dtype=np.int32), x=np.ones(n)))
    lib, launcher = plan.prepare(b.spec, 0)
    bufs = launcher.buffers(b, 64, {}, no_copies=frozenset({"acc"}))[0]
    assert bufs[lay.buffer_index("acc", "priv")].size == 0
    sink = bufs[lay.buffer_index("acc", "sink")]
    sink[:] = np.random.default_rng(71_007).normal(size=sink.size)  # what the device's atomic adds left
    want = sink.copy()
    bufs[launcher.meta_k][:4] = (0, n, 64, n)  # 64 threads ran
    lib.finish(PackedArgs(bufs).ptrs)
    bt_same_bits(sink, want, "the sink after the finish")


@pytest.mark.parametrize("native", ["1", "0"])
@pytest.mark.parametrize("kernel,dtype,n", [(ls_comp_huge, np.float64, 2_500_000), (ls_auto, np.float32, 600_000),
                                            (ls_plain, np.float64, 300_000), (ls_plain, np.float32, 300_000)])
def test_the_parallel_finish_gives_the_compiled_finishs_bits(monkeypatch, native, kernel, dtype, n):
    # the executor (and the Python pool) folds a large sink's copies by ranges of slots on every thread, with the
    # compiled finish's own steps; the bits must be those of the finish folding them alone
    import eagle.native.folds

    monkeypatch.setenv("EAGLE_NATIVE", native)
    monkeypatch.setattr(eagle.native, "_STATE", {})
    rng = np.random.default_rng(71_008)
    slots = kernel.signature.get("acc").axes[0].extent
    key = _keys(rng, n, slots)
    x = (rng.normal(size=n) * 10.0 ** rng.integers(-8, 9, size=n)).astype(dtype)
    x[:3] = [np.inf, -np.inf, np.nan]  # non-finite sums keep no correction, in either fold
    key[:3] = [5, 5, 6]
    got = {}
    for parallel in (True, False):
        monkeypatch.setattr(eagle.native.folds, "PARALLEL_FINISH", parallel)
        plan = _plan(kernel, "host", 2)
        prior = rng.normal(size=slots).astype(dtype) if parallel else got["prior"]
        got["prior"] = prior
        got[parallel] = np.asarray(plan.run(key=key, x=x, acc=prior.copy()))
        assert min(plan.last_chunks) > 1
    bt_same_bits(got[True], got[False], f"{kernel.name} {np.dtype(dtype).name}: parallel finish")


@pytest.mark.parametrize("kernel", [ls_plain, ls_auto, ls_mixed], ids=lambda k: k.name)
def test_the_python_pool_splits_a_large_sink_as_the_executor_does(monkeypatch, kernel):
    """A stage of fixed chunks (a large sink's copies, a stored-and-added sink) splits by the native executor's
    default chunk length where the caller chose none, also on the Python pool (whose default wants 32x longer
    chunks): the same chunks, so the same bits, with and without the executor. (700,000 lanes into 70,000 slots
    ran as one chunk on the pool where the executor ran two to four, and a plain sink's bits differed.)"""
    import eagle.native

    if eagle.native.library() is None:
        pytest.skip(f"no native executor here: {eagle.native.unavailable_reason()}")
    rng = np.random.default_rng(71_070)
    n = 700_000
    planes = {"key": _keys(rng, n, BIG), "x": rng.standard_normal(n)}
    if kernel is ls_mixed:
        planes["other"] = _keys(rng, n, BIG)
    sink = "buf" if kernel is ls_mixed else "acc"
    prior = rng.standard_normal(BIG)
    got, chunks = [], []
    for native in ("1", "0"):
        bt_executor(monkeypatch, native)
        plan = eagle.deploy(kernel, threads=2)
        got.append(np.asarray(plan.run(**planes, **{sink: prior.copy()})).copy())
        chunks.append(plan.last_chunks)
    assert chunks[0] == chunks[1] and min(chunks[0]) > 1, chunks
    bt_same_bits(got[1], got[0], f"{kernel.name}: the Python pool against the executor")
