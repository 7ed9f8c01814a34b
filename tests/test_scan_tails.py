"""The scan driver's shortcuts keep the scan contract's bits: a segmented total folded after the block's lane loop
from its last flagged lane (a value that is a pure function of the lane), the chain kept where it is not, and a
block's interior lowered without the clamps of neighbour reads. Checked bit for bit against a Python model of the
blocks (docs/semantics.md, "Scans") at several thread counts, with segments spanning several blocks."""

import numpy as np
import pytest

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar
from hawk.abi.layout import SCAN_BLOCK


@hawk.kernel
def pure_segments(x: Scalar, flag: Scalar, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = hawk.scan(x * 2.0 - 1.0, reset=flag > 0.5)  # a pure value: the totals take the tail form
    z = hawk.scan(x, reset=flag > 0.5, op=m.max)


@hawk.kernel
def chained_segments(x: Scalar, flag: Scalar, y: Mutable[Scalar]):
    y = hawk.scan(hawk.scan(x) * 0.5, reset=flag > 0.5)  # a value read from another scan: the chain stays


@hawk.kernel
def neighbours(lane: Grid["i"], x: Scalar, nlanes: Param, d: Mutable[Scalar], c: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    d = hawk.scan(x - x.at(m.max(i - 1, 0)) + m.where(i == 0, 0.5, 0.0))
    c = hawk.scan(m.where((i == last) | (x != x.at(m.min(i + 1, last))), 1, 0))


@hawk.kernel
def next_differs(lane: Grid["i"], x: Scalar, nlanes: Param, c: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    c = hawk.scan(m.where((i == last) | (x != x.at(m.min(i + 1, last))), 1, 0))  # the only read: ahead


def _blocks(x: np.ndarray, flags: np.ndarray, op) -> np.ndarray:
    """The contract: each block folded from the identity (a flagged lane starts afresh), offsets chained on the
    host (a block with a flag restarts them), then each block's lanes from its offset."""
    ident = -0.0 if op is np.add else -np.inf
    n = x.size
    off, offs = ident, []
    for b in range(0, n, SCAN_BLOCK):
        offs.append(off)
        t, f = ident, False
        for i in range(b, min(b + SCAN_BLOCK, n)):
            t = x[i] if flags[i] else op(t, x[i])
            f = f or bool(flags[i])
        off = t if f else op(off, t)
    out = np.empty_like(x)
    for k, b in enumerate(range(0, n, SCAN_BLOCK)):
        run = offs[k]
        for i in range(b, min(b + SCAN_BLOCK, n)):
            run = x[i] if flags[i] else op(run, x[i])
            out[i] = run
    return out


def _flags(n: int) -> np.ndarray:
    """Segments of every kind: short ones, one inside a block, ones crossing one and two block boundaries, a
    block with no flag at all, and a first block whose lanes before its first flag run from the offset."""
    f = np.zeros(n, bool)
    for at in (5, 9, 10, 700, 3 * SCAN_BLOCK + 1, 3 * SCAN_BLOCK + 2, 4 * SCAN_BLOCK - 1, 4 * SCAN_BLOCK):
        if at < n:
            f[at] = True
    return f


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_tail_totals_give_the_chains_bits(threads):
    rng = np.random.default_rng(14)
    n = 5 * SCAN_BLOCK + 123
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
    x[[17, 4 * SCAN_BLOCK + 3]] = np.nan
    flags = _flags(n)
    out = eagle.deploy(pure_segments, threads=threads, min_chunk=SCAN_BLOCK).run(x=x, flag=flags.astype(float))
    assert np.asarray(out["y"]).tobytes() == _blocks(x * 2.0 - 1.0, flags, np.add).tobytes()
    want = _blocks(x, flags, lambda a, b: a if np.isnan(a) or a > b else b)  # np.maximum's rule, hawk's order
    assert np.asarray(out["z"]).tobytes() == want.tobytes()


@pytest.mark.parametrize("threads", [1, 3])
def test_a_value_read_from_a_scan_keeps_the_chain(threads):
    rng = np.random.default_rng(15)
    n = 4 * SCAN_BLOCK + 9
    x = rng.standard_normal(n)
    flags = _flags(n)
    got = np.asarray(eagle.deploy(chained_segments, threads=threads, min_chunk=SCAN_BLOCK)
                     .run(x=x, flag=flags.astype(float)))
    inner = _blocks(x, np.zeros(n, bool), np.add) * 0.5
    assert got.tobytes() == _blocks(inner, flags, np.add).tobytes()


def _lanes_loops(kernel, stage: int) -> int:
    text = kernel.mlir(after="lower-host-lanes", stage=stage)
    return text[:text.index("_finish(")].count("scf.for")  # the lanes function (the finish follows it)


def test_the_tail_form_is_taken_only_for_a_pure_value():
    pure, chained = _lanes_loops(pure_segments, 0), _lanes_loops(chained_segments, 1)
    assert pure == 2 + 2  # blocks, lanes, and each total's tail
    assert chained == 2  # blocks, lanes: the totals' running value stays in the lanes' loop


@pytest.mark.parametrize("n", [1, 2, 3, SCAN_BLOCK - 1, SCAN_BLOCK + 1, 2 * SCAN_BLOCK + 5])
@pytest.mark.parametrize("threads", [1, 2])
def test_neighbour_reads_without_clamps_inside_a_block(n, threads):
    rng = np.random.default_rng(n)
    x = np.round(rng.standard_normal(n), 1)
    x[n // 2:n // 2 + 3] = x[n // 2]  # some equal neighbours
    out = eagle.deploy(neighbours, threads=threads, min_chunk=SCAN_BLOCK).run(x=x, nlanes=float(n))
    prev = np.concatenate([x[:1], x[:-1]])
    d = (x - prev) + np.where(np.arange(n) == 0, 0.5, 0.0)
    ends = np.append(x[:-1] != x[1:], True)
    assert np.asarray(out["d"]).tobytes() == _blocks(d, np.zeros(n, bool), np.add).tobytes()
    assert np.array_equal(np.asarray(out["c"]), np.cumsum(ends))
    alone = eagle.deploy(next_differs, threads=threads, min_chunk=SCAN_BLOCK).run(x=x, nlanes=float(n))
    assert np.array_equal(np.asarray(alone), np.cumsum(ends))
