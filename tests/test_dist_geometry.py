"""The lane moves of a sharded run over whole scan blocks (eagle/distributed/geometry.py `realigned`,
eagle/distributed/run.py `Move`), in plain NumPy with the shards simulated in one process: for shard sizes from
empty to several blocks, each shard's extended plane holds, at lane g - o_s, exactly the global lane g for every
lane it runs, the runs cover every lane once and start on block boundaries, and settling hands each shard back
exactly its own lanes of a per-lane output, wherever they ran. No kernel is compiled."""

import numpy as np
import pytest

from eagle.distributed.geometry import realigned
from eagle.distributed.run import Move

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
