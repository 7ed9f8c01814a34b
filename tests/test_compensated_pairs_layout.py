"""Where a compensated sink keeps its (sum, correction) pairs (hawk.abi.layout.SIDE_BY_SIDE,
Layout.pairs_side_by_side): a sink of more than 2,048 values keeps each slot's pair side by side in its companion
and in each chunk's copy (a term added at a random key then touches one cache line), a smaller one its sums, then
its corrections. Every reader of the pairs (the lanes' Neumaier steps, the lanes in groups of four, the compiled
finish, the executor's parallel fold, the Python pool's fold, the companion's fold by slot ranges) must read
them as they were written: each run here has the bits of a model that knows no layout (per chunk, Neumaier steps
over the chunk's terms in lane order; the chunks' pairs folded in chunk order; prior + sum + correction rounded
once), on one chunk and on several, through every fold path."""

import math

import numpy as np
import pytest
from conftest import bt_executor, bt_same_bits, bt_sink_keys

import eagle
import hawk
from hawk import Index, Mutable, Scalar, Vector
from hawk.abi.layout import PRIVATE_SLOTS, SIDE_BY_SIDE


@hawk.kernel
def pl_halves(key: Index, x: Scalar, acc: Mutable["slot":2048]):  # noqa: F821
    hawk.scatter(acc)[key] += x


@hawk.kernel
def pl_padded(key: Index, x: Scalar, acc: Mutable["slot":3000]):  # noqa: F821
    hawk.scatter(acc)[key] += x


@hawk.kernel
def pl_vector(key: Index, v: Vector[2], acc: Mutable["slot":1500]):  # noqa: F821
    hawk.scatter(acc, policy="compensated")[key] += v


@hawk.kernel
def pl_folded(key: Index, x: Scalar, acc: Mutable["slot":70_000]):  # noqa: F821
    hawk.scatter(acc, policy="compensated")[key] += x


CASES = [(pl_halves, 2048, 1, False), (pl_padded, 3000, 1, True), (pl_vector, 1500, 2, True),
         (pl_folded, 70_000, 1, True)]  # (kernel, slots, components, pairs side by side)


def _neumaier(s: float, c: float, x: float) -> tuple[float, float]:
    """host_emit.neumaier: a non-finite sum keeps no rounding error."""
    t = s + x
    if abs(t) < math.inf:
        c += (s - t) + x if abs(s) >= abs(x) else (x - t) + s
    return t, c


def _model(prior: np.ndarray, key: np.ndarray, x: np.ndarray, chunks: int, align: int) -> np.ndarray:
    """The sink after a run in `chunks` chunks of lanes (eagle.launch.Launcher.chunk_bounds: ceil(n / chunks)
    lanes rounded up to a multiple of `align`, the last the rest): per chunk, each slot's Neumaier pair over its
    terms in lane order from (-0.0, -0.0); the companion from (-0.0, -0.0) takes the chunks' pairs in chunk order
    (a Neumaier step on the sums, the copy's correction added after); then (prior + sum) + correction, the
    correction left out when zero, rounded once. x: (lanes,) or (components, lanes); prior (components x slots)
    flat."""
    xs = np.asarray(x, dtype=np.float64).reshape(-1, key.size)
    slots = prior.size // xs.shape[0]
    n = key.size
    step = math.ceil(math.ceil(n / chunks) / align) * align
    S, C = [-0.0] * prior.size, [-0.0] * prior.size
    for lo in range(0, n, step):
        s, c = [-0.0] * prior.size, [-0.0] * prior.size
        for i in range(lo, min(lo + step, n)):
            k = int(key[i])
            if k < 0:
                continue
            for comp in range(xs.shape[0]):
                at = comp * slots + k
                s[at], c[at] = _neumaier(s[at], c[at], float(xs[comp, i]))
        for at in range(prior.size):
            t, lost = _neumaier(S[at], 0.0, s[at])
            C[at] = (C[at] + lost if abs(t) < math.inf else C[at]) + c[at]
            S[at] = t
    out = np.empty(prior.size, dtype=np.float64)
    for at in range(prior.size):
        total = float(prior[at]) + S[at]
        out[at] = total if C[at] == 0.0 else total + C[at]
    return out.astype(prior.dtype)


def _planes(rng, slots: int, comps: int, n: int, dtype) -> dict:
    key = bt_sink_keys(rng, n, slots)
    x = (rng.normal(size=(comps, n)) * 10.0 ** rng.integers(-6, 7, size=(comps, n))).astype(dtype)
    x[0, :2], key[:2] = [1e300 if dtype == np.float64 else 1e38, -np.inf], [3, 4]  # (a huge term and an inf)
    prior = rng.normal(size=comps * slots).astype(dtype)  # (no zeros: a zero's sign is tested elsewhere)
    planes = {"key": key, ("v" if comps > 1 else "x"): x if comps > 1 else x[0]}
    return planes, prior


def _align(plan, planes: dict, prior: np.ndarray) -> int:
    """The plan's chunk boundaries' multiple (eagle.launch.Launcher.aligned)."""
    acc = prior.reshape(2, -1) if "v" in planes else prior
    return max(1, plan.bind(**planes, acc=acc.copy()).stages[0].launcher.aligned(None))


@pytest.mark.parametrize("kernel, slots, comps, side", CASES, ids=[c[0].name for c in CASES])
def test_which_sinks_keep_their_pairs_side_by_side(kernel, slots, comps, side):
    lay = eagle.deploy(kernel).bind(**_planes(np.random.default_rng(1), slots, comps, 64, np.float64)[0]).stages[0] \
        .launcher.lay
    assert lay.sink_values("acc") == slots * comps and lay.pairs_side_by_side("acc") == side
    assert side == (slots * comps > SIDE_BY_SIDE)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel, slots, comps, side", CASES, ids=[c[0].name for c in CASES])
def test_one_chunk_and_several_give_the_models_bits(kernel, slots, comps, side, dtype):
    rng = np.random.default_rng(7_012 + slots)
    n = 3 * slots // 2 + 7 if slots <= PRIVATE_SLOTS else 9 * slots + 7  # (a chunk of a sink past PRIVATE_SLOTS
    # takes at least eagle.launch.COPY_LANES lanes a value of its copies: a compensated one holds two a slot)
    planes, prior = _planes(rng, slots, comps, n, dtype)
    shape = (comps, slots) if comps > 1 else (slots,)
    for lanes, threads, split in ((1000, 1, False), (n, 3, True)):  # one chunk, then several
        part = {k: v[..., :lanes] for k, v in planes.items()}
        plan = eagle.deploy(kernel, threads=threads, min_chunk=256)
        got = np.asarray(plan.run(**part, acc=prior.reshape(shape).copy())).reshape(-1)
        (chunks,) = plan.last_chunks
        assert (chunks > 1) == split, plan.last_chunks  # (three threads really split the lanes)
        x, align = part.get("v", part.get("x")), _align(plan, part, prior)
        bt_same_bits(got, _model(prior, part["key"], x, chunks, align),
                     f"{kernel.name} {dtype.__name__} {chunks} chunk(s)")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_fold_path_reads_side_by_side_pairs(monkeypatch, fold_reports, dtype):
    """A sink past PRIVATE_SLOTS: its copies folded by the executor on every thread (kind 2), by the compiled
    finish (no parallel fold) and by the Python pool (EAGLE_NATIVE=0), bound launches too: the model's bits."""
    import eagle.native
    import eagle.native.folds

    assert 70_000 > PRIVATE_SLOTS
    rng = np.random.default_rng(70_008)
    planes, prior = _planes(rng, 70_000, 1, 630_007, dtype)
    want = {}
    for native, parallel in (("1", True), ("1", False), ("0", True)):
        bt_executor(monkeypatch, native, parallel)
        acc = prior.copy()
        bound = eagle.deploy(pl_folded, threads=2, min_chunk=4096).bind(**planes, acc=acc)
        chunks = bound.stages[0].nchunks
        assert chunks > 1, chunks  # (two threads really split the lanes)
        if chunks not in want:
            want[chunks] = _model(prior, planes["key"], planes["x"], chunks, bound.stages[0].launcher.aligned(None))
        for launch in range(2):  # (the second from copies the first's fold refilled)
            before = len(fold_reports)
            bound.launch()
            bt_same_bits(acc, want[chunks], f"native={native} parallel={parallel} launch {launch}: {chunks} chunks")
            acc[:] = prior
            if native == "1":  # (the executor's fold of kind 2 ran, or the compiled finish folded)
                (folds,) = fold_reports[before:]
                assert [f["kind"] for f in folds] == ([2] if parallel else []), folds
