"""eagle.algorithms.unique / reduce_by_key against a Python walk over the runs of equal adjacent keys: int and
float keys (NaN, -0.0), sums / min / max in the values' dtype (integer wrap, uint64 order, float sums in the run's
order), the n rules and errors; the same results for every host thread count and on spirv (lavapipe)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from algorithms_plans import assert_split, small_chunks  # noqa: F401 (small_chunks: an autouse fixture)

import eagle
from eagle.algorithms import reduce_by_key, unique

THREADS = (1, 2, 3)


def _walk(keys, values=None, op: str = "sum"):
    """The reference by hand: each run's first key, its length, and its values folded left to right."""
    ukeys, counts, folds = [], [], []
    for i, k in enumerate(keys):
        v = None if values is None else values[i]
        if i == 0 or keys[i - 1] != k:
            ukeys.append(k)
            counts.append(1)
            folds.append(v)
        else:
            counts[-1] += 1
            if v is not None:
                a = folds[-1]
                folds[-1] = a + v if op == "sum" else (np.minimum(a, v) if op == "min" else np.maximum(a, v))
    return ukeys, counts, folds


def _grouped(n: int, seed: int, dtype=np.int64) -> np.ndarray:
    """Keys in runs of random lengths (1 to 30), some values recurring later (not sorted: only grouped)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 30, n)
    return np.repeat(rng.integers(-5, 5, n), lengths)[:n].astype(dtype)


def test_reference_example():
    u, c = unique(np.array([7, 7, 2, 2, 7], np.int32))
    assert np.asarray(u).tolist() == [7, 2, 7] and np.asarray(c).tolist() == [2, 2, 1]
    assert isinstance(u, eagle.Array) and u.dtype == np.int32 and c.dtype == np.int32


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint64, np.int8, np.float32, np.float64])
def test_unique_against_the_walk(dtype):
    k = _grouped(20_000, 1, dtype)
    u, c = unique(k)
    wu, wc, _ = _walk(k.tolist())
    assert u.dtype == dtype and np.asarray(u).tolist() == wu and np.asarray(c).tolist() == wc


def test_float_keys_nan_and_signed_zero():
    k = np.array([0.0, -0.0, np.nan, np.nan, 1.0, 1.0])
    u, c = unique(k)
    got = np.asarray(u)
    assert got[0] == 0.0 and math.copysign(1.0, got[0]) == 1.0  # the run keeps its first key
    assert np.isnan(got[1]) and np.isnan(got[2]) and got[3] == 1.0  # NaN != NaN: a run each
    assert np.asarray(c).tolist() == [2, 1, 1, 2]


@pytest.mark.parametrize("op", ["sum", "min", "max"])
@pytest.mark.parametrize("vdtype", [np.float64, np.float32])
def test_float_reductions_fold_each_run_in_order(op, vdtype):
    k = _grouped(3000, 2)
    v = (np.random.default_rng(3).standard_normal(k.size) * 1e4).astype(vdtype)
    u, r = reduce_by_key(k, v, op=op)
    wu, _, wf = _walk(k.tolist(), list(v), op)  # NumPy scalars: each add rounds in vdtype, as a sequential sum
    assert r.dtype == vdtype and np.asarray(u).tolist() == wu
    assert np.asarray(r).tobytes() == np.array(wf, vdtype).tobytes()  # runs inside one 4096 block: exactly


def test_min_max_propagate_nan():
    k = np.array([1, 1, 1, 2, 2])
    v = np.array([3.0, np.nan, 1.0, -0.0, 0.0])
    assert np.isnan(np.asarray(reduce_by_key(k, v, op="min")[1])[0])
    assert np.isnan(np.asarray(reduce_by_key(k, v, op="max")[1])[0])
    assert np.asarray(reduce_by_key(k, v)[1]).tolist()[1] == 0.0


@pytest.mark.parametrize("vdtype", [np.int32, np.int64, np.uint64, np.uint32, np.int8, np.uint16])
@pytest.mark.parametrize("op", ["sum", "min", "max"])
def test_integer_reductions_are_exact(vdtype, op):
    k = _grouped(5000, 4)
    info = np.iinfo(vdtype)
    v = np.random.default_rng(5).integers(info.min, info.max, k.size, dtype=vdtype, endpoint=True)
    u, r = reduce_by_key(k, v, op=op)
    with np.errstate(over="ignore"):  # integer sums wrap at the values' width, as NumPy scalars do
        _, _, wf = _walk(k.tolist(), list(v), op)
        want = np.array(wf, vdtype)
    assert r.dtype == vdtype and np.asarray(r).tolist() == want.tolist()


def test_mixed_float_widths_of_keys_and_values():
    k32 = np.array([0.5, 0.5, 0.25, 0.25, 0.25], np.float32)
    v64 = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    u, s = reduce_by_key(k32, v64)
    assert u.dtype == np.float32 and s.dtype == np.float64 and np.asarray(s).tolist() == [0.1 + 0.2, 0.3 + 0.4 + 0.5]
    u, s = reduce_by_key(k32.astype(np.float64) + 1e-12, v64.astype(np.float32), op="max")
    assert u.dtype == np.float64 and s.dtype == np.float32 and np.asarray(s).tolist() == [np.float32(0.2),
                                                                                           np.float32(0.5)]


def test_long_runs_across_blocks_and_threads():
    k = np.repeat(np.arange(7), 5000)  # runs of 5000 cross the 4096-lane blocks
    v = np.random.default_rng(6).standard_normal(k.size)
    got = {t: [np.asarray(a).tobytes() for a in reduce_by_key(k, v, threads=t)] for t in THREADS}
    assert len({tuple(g) for g in got.values()}) == 1
    assert_split()
    s = np.asarray(reduce_by_key(k, v)[1])
    np.testing.assert_allclose(s, v.reshape(7, 5000).sum(axis=1), rtol=1e-12, atol=1e-10)
    ints = (v * 1000).astype(np.int64)
    assert np.asarray(reduce_by_key(k, ints)[1]).tolist() == ints.reshape(7, 5000).sum(axis=1).tolist()
    assert np.asarray(unique(k, threads=2)[1]).tolist() == [5000] * 7


def _block_rule_sums(keys: np.ndarray, values: np.ndarray, block: int = 4096) -> list:
    """docs/algorithms.md's promise for float sums: a run's part in each block summed in order (from -0.0),
    the parts of the blocks before its last added in block order, then its lanes in the last block one by one."""
    sums = []
    for lo, hi in zip(*_run_bounds(keys), strict=True):
        total, i = None, lo
        while i < hi:
            end = min(hi, (i // block + 1) * block)
            if end == hi:  # the run's last block: its lanes onto the total so far
                for x in values[i:end]:
                    total = x if total is None else total + x
            else:
                part = -0.0
                for x in values[i:end]:
                    part = part + x
                total = part if total is None else total + part
            i = end
        sums.append(total)
    return sums


def _run_bounds(keys: np.ndarray) -> tuple[list, list]:
    starts = [0] + [i for i in range(1, keys.size) if keys[i] != keys[i - 1]]
    return starts, starts[1:] + [keys.size]


@pytest.mark.parametrize("threads", [1, 2])
def test_float_sums_keep_the_documented_block_rule(threads):
    lengths = [3, 9000, 4096, 1, 12300, 5, 4000, 200, 8193]  # runs inside one block and across one to three
    k = np.repeat(np.arange(len(lengths)) * 3 - 4, lengths)
    v = np.random.default_rng(14).standard_normal(k.size) * 10.0 ** np.random.default_rng(15).integers(-6, 6, k.size)
    want = np.array(_block_rule_sums(k, v)).tobytes()
    assert np.asarray(reduce_by_key(k, v, threads=threads)[1]).tobytes() == want
    assert np.asarray(reduce_by_key(k.astype(np.float64), v, threads=threads)[1]).tobytes() == want


def test_n_rules_and_errors():
    k, v = np.array([1, 1, 2, 3]), np.arange(4.0)
    u, s = reduce_by_key(k, v, 3)
    assert np.asarray(u).tolist() == [1, 2] and np.asarray(s).tolist() == [1.0, 2.0]
    u, c = unique(k, 0)
    assert np.asarray(u).size == 0 and c.dtype == np.int32 and u.dtype == k.dtype
    u, s = reduce_by_key(k, v.astype(np.float32), 0)
    assert np.asarray(s).size == 0 and s.dtype == np.float32
    with pytest.raises(ValueError, match="op='mean'"):
        reduce_by_key(k, v, op="mean")
    with pytest.raises(ValueError, match="n="):
        unique(k, 5)
    with pytest.raises(ValueError, match="values, which has 2 elements"):
        reduce_by_key(k, v[:2])


def test_every_target_gives_the_host_results(target):
    k = _grouped(9000, 7)
    v = np.random.default_rng(8).standard_normal(k.size)
    host = [unique(k), reduce_by_key(k, v), reduce_by_key(k, v, op="min"),
            reduce_by_key(k.astype(np.float32), (v * 100).astype(np.int32), op="max")]
    got = [unique(k, target=target), reduce_by_key(k, v, target=target),
           reduce_by_key(k, v, op="min", target=target),
           reduce_by_key(k.astype(np.float32), (v * 100).astype(np.int32), op="max", target=target)]
    for (gu, gr), (hu, hr) in zip(got, host, strict=True):
        assert np.asarray(gu).tobytes() == np.asarray(hu).tobytes()
        assert np.asarray(gr).tobytes() == np.asarray(hr).tobytes() and gr.dtype == hr.dtype


@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_a_float32_run_count_from_2_24_is_counted_again(dtype):
    """A float32 `runs` total of 2**24 or more may have rounded: the count then comes from a kernel storing it."""
    from eagle.algorithms import runs

    k = _grouped(3000, 5, dtype)
    plane = k if dtype == np.int64 else k.astype(np.float32)
    want = len(_walk(list(k))[0])
    assert runs._run_count(np.float32([want]), plane, None, None) == want
    assert runs._run_count(np.float32([2.0**24]), plane, None, None) == want
    assert runs._run_count(np.float64([2.0**24]), plane, None, None) == 2**24
