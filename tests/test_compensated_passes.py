"""Compensated chains in passes (hawk/passes/lower/chain_passes.py): on a CPU without AVX-512F a full block runs
its 32 chains as chain_passes.PASSES passes over its groups, each pass its own chains. Chain j must still take
lanes j, j + 32, ... in order, so the result is the one-pass algorithm's, bit for bit. A NumPy model of that
algorithm (32 chains of Knuth TwoSums with their errors added plainly, folded by halves to eight, the chunk's
Neumaier pair taking a partial block's lanes and then the eight chains) is the reference, on one chunk; on a CPU
with AVX-512F the default run (one pass) and a $HAWK_NO_SAE=1 run (passes) are held against each other too.
"""

import numpy as np
import pytest
from test_compensated_chains import cc_masked as ch_masked
from test_compensated_chains import cc_sum as ch_sum
from test_compensated_chains import cc_vector as ch_vector

import eagle
import hawk
from hawk import Mutable, Scalar
from hawk.abi import cache
from hawk.passes.lower import chain_passes

BLOCK, CHAINS = 1024, 32


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _neumaier(s, c, x):
    t = s + x
    lost = (s - t) + x if abs(s) >= abs(x) else (x - t) + s
    return t, (c + lost) if abs(t) < np.inf else c


def model(x: np.ndarray) -> float:
    """The host's compensated float64 sum of x on one chunk (reduce_full: compensated_chains_step, merge_chains;
    finish.compensated_value)."""
    x = np.asarray(x, np.float64)
    full = len(x) // CHAINS * CHAINS  # (every whole group of CHAINS lanes, the partial block's too)
    sums, cors = np.zeros(CHAINS), np.zeros(CHAINS)
    with np.errstate(all="ignore"):
        for g in range(0, full, CHAINS):
            sums, err = _two_sum(sums, x[g:g + CHAINS])
            cors = cors + err
        w = CHAINS
        while w > 8:
            h = w // 2
            s2, err = _two_sum(sums[:h], sums[h:w])
            cors, sums, w = (cors[:h] + cors[h:w]) + err, s2, h
        s, c = np.float64(-0.0), np.float64(0.0)
        for v in x[full:]:  # the last < CHAINS lanes, one by one, before the chains' merge at the chunk's end
            s, c = _neumaier(s, c, v)
        for j in range(8):
            s, c = _neumaier(s, c, sums[j])
            c = c + cors[j]
        return float(s + c) if abs(s) < np.inf else float(s)


def _data(rng, n: int, kind: int) -> np.ndarray:
    if kind == 0:  # a wide range
        return rng.standard_normal(n) * 10.0 ** rng.integers(-40, 40, n)
    if kind == 1:  # cancellation: pairs of huge terms that cancel, around ordinary ones
        big = rng.standard_normal(n // 2) * 1e16
        x = np.concatenate([big, -big + rng.standard_normal(n // 2), rng.standard_normal(n - 2 * (n // 2))])
        rng.shuffle(x)
        return x
    if kind == 2:
        return rng.standard_normal(n) * 10.0 ** rng.integers(-300, 300, n)  # the whole float64 range
    # ill-conditioned: terms up to 1e40 and their exact negatives around a few ordinary ones, so the sum is
    # ordinary and the corrections' plain adds round visibly: the result depends on which chain takes which lane
    # (swapping neighbouring lanes' chains changes it in most such sets; kinds 0-2 hardly ever)
    m = (n - 64) // 2
    a = rng.standard_normal(m) * 10.0 ** rng.integers(0, 40, m)
    x = np.concatenate([a, -a, rng.standard_normal(n - 2 * m)])
    rng.shuffle(x)
    return x


def _one_chunk(kernel, **planes):
    plan = eagle.deploy(kernel, threads=1)
    out = plan.run(**planes)
    assert plan.last_chunks == (1,), plan.last_chunks  # (the model is of one chunk)
    return out


@pytest.fixture(params=["default", "passes"])
def mode(request, monkeypatch):
    if request.param == "passes":
        monkeypatch.setenv("HAWK_NO_SAE", "1")  # (no AVX-512F: the passes on every x86-64 CPU)
    return request.param


@pytest.mark.parametrize("kind", [0, 1, 2, 3, 3])
def test_the_sum_is_the_one_pass_algorithm_s(mode, kind, request):
    rng = np.random.default_rng(4_900 + kind + 7 * request.node.callspec.indices["kind"])
    for n in (BLOCK, 3 * BLOCK + 517, 8 * BLOCK + 1):
        x = _data(rng, n, kind)
        got = float(np.asarray(_one_chunk(ch_sum, x=x))[0])
        assert got == model(x), (mode, kind, n)


def test_masked_lanes_and_a_mean(mode):
    rng = np.random.default_rng(4_910)
    n = 5 * BLOCK + 300
    x, keep = _data(rng, n, 3), rng.random(n)
    out = _one_chunk(ch_masked, x=x, keep=keep)
    terms = np.where(keep > 0.5, x, -0.0)  # (a masked lane adds -0.0 in a full block, nothing in a partial one)
    want = model(np.concatenate([terms[:5 * BLOCK], x[5 * BLOCK:][keep[5 * BLOCK:] > 0.5]]))
    assert float(out["tot"][0]) == want
    assert float(out["avg"][0]) == want / np.count_nonzero(keep > 0.5)


def test_each_vector_component_keeps_its_chains(mode):
    rng = np.random.default_rng(4_911)
    v = np.stack([_data(rng, 6 * BLOCK + 77, k) for k in (3, 1, 3)])
    got = np.asarray(_one_chunk(ch_vector, v=v)).reshape(-1)
    assert [float(g) for g in got] == [model(c) for c in v]


def test_the_passes_are_taken_without_avx512():
    # the IR of the default spec (no AVX-512F: Spec.sae false): PASSES loops over a full block's groups, each
    # carrying chain vectors of CHAINS // PASSES lanes (a sum and a correction)
    w = CHAINS // chain_passes.PASSES
    text = ch_sum.mlir(after="lower-host-lanes")
    lanes = next(f for f in text.split("func.func") if "_lanes(" in f)
    loops = [ln for ln in lanes.splitlines() if "scf.for" in ln and f"vector<{w}xf64>" in ln]
    assert len(loops) == chain_passes.PASSES, loops
    assert all(ln.count(f"vector<{w}xf64>") == 2 for ln in loops), loops
    # and beside them, for launches whose inputs pass chain_passes.CACHED_BYTES, the one-pass loop
    assert [ln for ln in lanes.splitlines() if "scf.for" in ln and ln.count("vector<32xf64>") == 2][1:], lanes


def test_a_launch_past_the_cache_takes_one_pass_within_the_bound():
    # 2.2e6 lanes (17.6 MB of float64, past CACHED_BYTES): the one-pass loop, held to the contract's k <= 1
    from conftest import bt_sum_ulps

    rng = np.random.default_rng(4_914)
    x = _data(rng, 2_200_000, 3)
    assert x.nbytes > chain_passes.CACHED_BYTES
    got = float(np.asarray(eagle.deploy(ch_sum).run(x=x))[0])
    assert bt_sum_ulps(got, x, eps=float(np.finfo(np.float64).eps)) <= 1.0


def test_passes_and_one_pass_agree_where_both_run(monkeypatch):
    if not cache.sae_host():
        pytest.skip("one pass runs only on an x86-64 CPU with AVX-512F; this one has none (the model is the "
                    "reference here)")
    rng = np.random.default_rng(4_912)
    x = _data(rng, 20 * BLOCK + 3, 2)
    one = np.asarray(eagle.deploy(ch_sum, threads=2, min_chunk=4 * BLOCK).run(x=x)).copy()
    monkeypatch.setenv("HAWK_NO_SAE", "1")
    plan = eagle.deploy(ch_sum, threads=2, min_chunk=4 * BLOCK)
    assert np.array_equal(np.asarray(plan.run(x=x)), one)
    assert max(plan.last_chunks) > 1, plan.last_chunks


@hawk.kernel
def ch_store(x: Scalar, y: Mutable[Scalar], tot: Mutable[Scalar]):
    y = x * 0.5
    tot = hawk.sum(x, policy="compensated")


def test_a_body_that_stores_keeps_every_lane_s_store(mode):
    # the copies of a body that writes run in PASSES passes: every lane's store is still made once
    rng = np.random.default_rng(4_913)
    x = _data(rng, 7 * BLOCK + 100, 3)
    out = _one_chunk(ch_store, x=x)
    assert np.array_equal(np.asarray(out["y"]), x * 0.5)
    assert float(out["tot"][0]) == model(x)
