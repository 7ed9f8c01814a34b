"""The lane moves of a sharded run over whole scan blocks (eagle/distributed/geometry.py `realigned`,
eagle/distributed/run.py `Move`), in plain NumPy with the shards simulated in one process: for shard sizes from
empty to several blocks, each shard's extended plane holds, at lane g - o_s, exactly the global lane g for every
lane it runs, the runs cover every lane once and start on block boundaries, and settling hands each shard back
exactly its own lanes of a per-lane output, wherever they ran. No kernel is compiled."""

import numpy as np
import pytest

from eagle.distributed.geometry import realigned, window
from eagle.distributed.run import SLACK, Move

UNIT = 64  # (a small block: the moves depend on the unit only through these tables)


class _Gather:
    """A gather over simulated shards: every shard's contribution first, then each shard reads the concatenation."""

    def __init__(self, parts: list[np.ndarray]):
        self.all = np.concatenate(parts)

    def __call__(self, a):
        return self.all


def _moves(sizes: list[int]):
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
    tails, heads = realigned(starts, UNIT)
    L = starts[-1]
    A = [min(-(-o // UNIT) * UNIT, L) for o in starts]
    return starts, tails, heads, A


@pytest.mark.parametrize("sizes", [[37, 4963 // 40, 200, 1], [64, 64, 64], [0, 10, 0, 300, 5], [1] * 9,
                                   [130, 3, 3, 3, 250], [500]])
def test_extend_and_settle_move_exactly_the_straddling_lanes(sizes):
    starts, tails, heads, A = _moves(sizes)
    L = starts[-1]
    whole = np.arange(L, dtype=np.float64) + 0.5
    own = [whole[starts[s]:starts[s + 1]] for s in range(len(sizes))]
    pad = [np.concatenate([a[:UNIT], np.zeros(UNIT - a[:UNIT].size)]) for a in own]
    ran = []
    for s, a in enumerate(own):  # each shard's plane, extended: lane g of its run at g - o_s
        ext = Move(np, _Gather(pad), lambda t, s=s: t[s], UNIT).extend(a, tails)
        assert A[s] % UNIT == 0 or A[s] == L
        assert np.array_equal(ext[A[s] - starts[s]:A[s + 1] - starts[s]], whole[A[s]:A[s + 1]])
        out = np.full(a.size + UNIT, -1.0)  # what the shard's lanes write: only the lanes it runs
        out[A[s] - starts[s]:A[s + 1] - starts[s]] = whole[A[s]:A[s + 1]] * 2
        ran.append(out)
    assert sum(A[s + 1] - A[s] for s in range(len(sizes))) == L  # every lane run once
    back = [np.concatenate([o[a.size:a.size + UNIT], np.zeros(UNIT - o[a.size:a.size + UNIT].size)])
            for o, a in zip(ran, own, strict=True)]
    for s, (o, a) in enumerate(zip(ran, own, strict=True)):
        got = Move(np, _Gather(back), lambda t, s=s: t[s], UNIT).settle(o, a.size, heads)
        assert np.array_equal(got, a * 2), (s, got, a * 2)


def _each_shard(shards: int, call) -> list:
    """`call(gather, s)` on every simulated shard, its one gather answered with every shard's contribution (a first
    pass records them)."""
    sent: list = [None] * shards

    def record(s):
        def gather(a):
            sent[s] = np.array(a)
            return np.zeros((shards * a.shape[0], *a.shape[1:]), dtype=a.dtype)
        return gather

    for s in range(shards):
        call(record(s), s)
    every = np.concatenate(sent)
    return [call(lambda a: every, s) for s in range(shards)]


@pytest.mark.parametrize("sizes", [[37, 124, 200, 1], [0, 10, 0, 300, 5], [1] * 9, [3, 3, 250], [500]])
@pytest.mark.parametrize("before,after", [(0, 64), (4, 70), (12, 3)])
def test_window_surrounds_a_shard_with_the_lanes_it_reads(sizes, before, after):
    """A plane read with .at by shards that run whole blocks: each shard's plane holds `before` lanes before its
    own, its own, `after` after (zeros past the run's edges), per component of a Vector plane, wherever those
    lanes are held (several shards away when shards are smaller than the window)."""
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
    L, p = starts[-1], 2
    table = window(starts, before, after)
    whole = np.arange(p * L, dtype=np.float64).reshape(p, L) + 0.5
    got = _each_shard(len(sizes), lambda gather, s: Move(np, gather, lambda t: t[s], UNIT).surround(
        whole[:, starts[s]:starts[s + 1]].reshape(-1), before, after, table, p))
    for s, g in enumerate(got):
        lanes = np.arange(starts[s] - before, starts[s + 1] + after)
        want = np.where((lanes >= 0) & (lanes < L), whole[:, np.clip(lanes, 0, max(L - 1, 0))], 0.0) if L else \
            np.zeros((p, lanes.size))
        want = np.concatenate([want, np.zeros((p, SLACK))], axis=1)
        assert np.array_equal(g.reshape(p, -1), want), (s, g.reshape(p, -1), want)


def test_vector_planes_extend_and_settle_per_component():
    """A Vector plane of a shard that runs whole blocks: each component extended by the lanes the shard runs past
    its own (each component as long as the others), and a Vector output settled back, component by component."""
    sizes, p = [37, 100, 3, 200], 3
    starts, tails, heads, A = _moves(sizes)
    L = starts[-1]
    whole = np.arange(p * L, dtype=np.float64).reshape(p, L) + 0.5
    own = [whole[:, starts[s]:starts[s + 1]] for s in range(len(sizes))]
    ext = _each_shard(len(sizes), lambda gather, s: Move(np, gather, lambda t: t[s], UNIT).extend(
        own[s].reshape(-1), tails, p))
    ran = []
    for s, e in enumerate(ext):
        e = e.reshape(p, -1)
        n = sizes[s]
        assert e.shape[1] == n + UNIT + SLACK
        assert np.array_equal(e[:, A[s] - starts[s]:A[s + 1] - starts[s]], whole[:, A[s]:A[s + 1]])
        out = np.full((p, n + UNIT), -1.0)
        out[:, A[s] - starts[s]:A[s + 1] - starts[s]] = whole[:, A[s]:A[s + 1]] * 2
        ran.append(out.reshape(-1))
    back = _each_shard(len(sizes), lambda gather, s: Move(np, gather, lambda t: t[s], UNIT).settle(
        ran[s], sizes[s], heads, p))
    for s, b in enumerate(back):
        assert np.array_equal(b.reshape(p, -1), own[s] * 2), s


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fold_of_ordered_pairs_keeps_the_exact_sum_or_says_so(dtype):
    """dist.c's fold of one shard's (high, low) pairs (eagle/distributed/sinks.py): a slot whose TwoSums all stayed
    exact holds the exact sum of its copies' pairs, every other slot is counted; plain copies add in chunk order."""
    from fractions import Fraction

    from eagle.distributed.sinks import Fold

    rng = np.random.default_rng(3)
    copies, slots = 5, 400
    pairs = np.zeros((copies, slots, 2))  # (float64 pairs for either sink type; kind 4: a float32 sink's)
    pairs[:, :200, 0] = rng.integers(-1000, 1000, size=(copies, 200)) * 0.25  # sums a pair holds exactly
    pairs[:, 200:, 0] = (rng.normal(size=(copies, 200)) * np.exp2(rng.integers(-8, 8, size=(copies, 200)))
                         ).astype(dtype)
    pairs[:, 200:, 1] = np.exp2(rng.integers(-190, -120, size=(copies, 200)))  # far below: errs
    one, bad = Fold(3 if dtype == np.float64 else 4, copies, slots, 2 * slots, True).run(pairs.reshape(-1))
    one = one.reshape(slots, 2)
    assert 0 < bad <= 200
    exact = 0
    for i in range(slots):
        want = sum((Fraction(float(v)) for v in pairs[:, i].reshape(-1)), Fraction(0))
        if Fraction(float(one[i, 0])) + Fraction(float(one[i, 1])) == want:
            exact += 1
        else:
            assert i >= 200, i
    assert exact >= slots - bad  # (a slot not counted holds the exact sum)
    if dtype == np.float32:  # a float32 sink's folded pair at 2**127 or more is counted (its float32 parts)
        big = np.zeros((copies, 1, 2))
        big[:, 0, 0] = 2.0 ** 126
        one, bad = Fold(4, copies, 1, 2, True).run(big.reshape(-1))
        assert bad == 1 and one[0] == 5 * 2.0 ** 126
        with pytest.raises(RuntimeError, match="takes 5 x 2 float64 values"):
            Fold(4, copies, 1, 2, True).run(big.reshape(-1).astype(np.float32))
    plain = rng.normal(size=(copies, slots)).astype(dtype)
    got, bad = Fold(0 if dtype == np.float64 else 1, copies, slots, slots, False).run(plain.reshape(-1))
    want = np.zeros(slots, dtype=dtype)
    for c in range(copies):
        want = want + plain[c]
    assert bad == 0 and got.tobytes() == want.tobytes()
