"""eagle.algorithms.argsort / sort_by_key against np.argsort(kind="stable"): every key dtype the reference takes,
spreads from none to the full 64 bits, stability, the permutation's dtype, passes that follow the spread, the n
rules and TypeErrors; the same permutation for every host thread count and on spirv (lavapipe)."""

from __future__ import annotations

import numpy as np
import pytest
from algorithms_plans import assert_split, small_chunks  # noqa: F401 (small_chunks: an autouse fixture)

import eagle
from eagle.algorithms import argsort, sort_by_key, sorting

THREADS = (1, 2, 3)


def _keys(dtype, lo: int, hi: int, n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(lo, hi, n, dtype=dtype, endpoint=True)


CASES = [(np.int32, -2**31, 2**31 - 1), (np.int32, -50, 50), (np.int32, 10**6, 10**6 + 3),
         (np.uint32, 0, 2**32 - 1), (np.uint32, 2**32 - 300, 2**32 - 1), (np.int64, -2**63, 2**63 - 1),
         (np.int64, 2**40, 2**40 + 70_000), (np.uint64, 0, 2**64 - 1), (np.uint64, 2**63 - 5, 2**63 + 5)]


@pytest.mark.parametrize("dtype, lo, hi", CASES)
def test_argsort_is_numpys_stable_order(dtype, lo, hi):
    k = _keys(dtype, lo, hi, 6000)
    perm = argsort(k)
    assert isinstance(perm, eagle.Array) and perm.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(perm), np.argsort(k, kind="stable"))


def test_equal_keys_keep_their_order_and_extremes_sort():
    k = np.array([3, 1, 3, 1, 2**31 - 1, -2**31, 3, -2**31], np.int32)
    assert np.asarray(argsort(k)).tolist() == [5, 7, 1, 3, 0, 2, 6, 4]
    u = np.array([2**64 - 1, 0, 2**63, 2**63 - 1, 0], np.uint64)
    assert np.asarray(argsort(u)).tolist() == [1, 4, 3, 2, 0]


def test_all_equal_keys_take_no_pass_and_small_ids_take_two():
    assert sorting.passes_for(0) == 0 and sorting.passes_for(1) == 1 and sorting.passes_for(2**16 - 1) == 2
    assert sorting.passes_for(2**16) == 3 and sorting.passes_for(2**64 - 1) == 8
    k = np.full(5000, -7, np.int64)
    lo, hi = sorting.key_range(k, None, None)
    assert lo == hi == -7
    np.testing.assert_array_equal(np.asarray(argsort(k)), np.arange(5000))
    ids = _keys(np.int64, 2**50, 2**50 + 2**16 - 1, 3000, seed=1)
    lo, hi = sorting.key_range(ids, None, None)
    assert (lo, hi) == (int(ids.min()), int(ids.max())) and sorting.passes_for(hi - lo) == 2


def test_index_dtype_and_n():
    k = _keys(np.int32, 0, 100, 500, seed=2)
    p64 = argsort(k, index_dtype=np.int64)
    assert p64.dtype == np.int64 and np.asarray(p64).tolist() == np.argsort(k, kind="stable").tolist()
    assert argsort(k, index_dtype="int32").dtype == np.int32
    np.testing.assert_array_equal(np.asarray(argsort(k, 77)), np.argsort(k[:77], kind="stable"))
    empty = argsort(k, 0)
    assert empty.dtype == np.int32 and np.asarray(empty).size == 0
    with pytest.raises(TypeError, match="index_dtype="):
        argsort(k, index_dtype=np.int16)
    with pytest.raises(ValueError, match="n="):
        argsort(k, 501)
    with pytest.raises(ValueError, match="n="):
        sort_by_key(k, np.ones(10), 11)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.uint8, np.bool_])
def test_other_key_dtypes_are_a_type_error(dtype):
    with pytest.raises(TypeError, match="keys must be int32, uint32, int64 or uint64"):
        argsort(np.zeros(4, dtype))
    with pytest.raises(TypeError, match="sort_by_key: keys must be"):
        sort_by_key(np.zeros(4, dtype), np.zeros(4))


@pytest.mark.parametrize("vdtype", [np.float64, np.float32, np.int32, np.uint64, np.int8])
def test_sort_by_key_carries_values(vdtype):
    k = _keys(np.int64, -1000, 1000, 4000, seed=3)
    v = np.random.default_rng(4).integers(0, 100, 4000).astype(vdtype)
    sk, sv = sort_by_key(k, v)
    order = np.argsort(k, kind="stable")
    assert sk.dtype == np.int64 and sv.dtype == vdtype
    np.testing.assert_array_equal(np.asarray(sk), k[order])
    np.testing.assert_array_equal(np.asarray(sv), v[order])


def test_every_thread_count_gives_the_same_permutation():
    k = _keys(np.int32, -2**31, 2**31 - 1, 40_000, seed=5) // 4096  # many equal keys: stability matters
    want = np.argsort(k, kind="stable")
    for t in THREADS:
        np.testing.assert_array_equal(np.asarray(argsort(k, threads=t)), want)
    assert_split()


def test_every_target_gives_the_host_permutation(target):
    k = _keys(np.int64, -2**62, 2**62, 9000, seed=6) // 2**50
    v = np.random.default_rng(7).standard_normal(9000)
    want = np.argsort(k, kind="stable")
    np.testing.assert_array_equal(np.asarray(argsort(k, target=target)), want)
    u = _keys(np.uint32, 0, 2**32 - 1, 9000, seed=8)
    np.testing.assert_array_equal(np.asarray(argsort(u, target=target)), np.argsort(u, kind="stable"))
    sk, sv = sort_by_key(k, v, target=target)
    np.testing.assert_array_equal(np.asarray(sv), v[want])


@pytest.mark.slow
@pytest.mark.parametrize("gpu", ["nvvm", "rocdl"])
def test_the_sort_scan_and_run_kernels_build_for_the_other_gpu_targets(gpu):
    """Without the GPU's runtime each kernel compiles every stage (PTX / AMD code objects), then raises
    RuntimeMissing; with one, the results are the host's."""
    from eagle.algorithms import _kernels_int as KI
    from eagle.algorithms import _kernels_scan as KS
    from eagle.algorithms import _kernels_sort as KR

    k = np.array([5, 3, 3, 9, 1, 3], np.int32)
    x = np.array([0.5, 1.5, 1.5, -2.0, 3.0, 1.5])
    runs = [
        (KS.float_scan_exclusive, {"x": x}), (KS.int_scan_inclusive, {"k": k}),
        (KS.int_to_float_scan_exclusive, {"k": k, "unsigned": 0.0, "out": np.zeros(6)}),
        (KS.float_to_int_scan_inclusive, {"x": x}),
        (KS.int_unique, {"k": k}), (KS.float_keys_float_sum, {"x": x, "v": x, "flip": 0.0}),
        (KS.int_keys_int_max, {"k": k, "v": k, "flip": 0.0}),
        (KS.run_lengths, {"starts": np.array([0, 1, 3, 4, 5]), "nlanes": 6.0}),
        (KS.int_run_count, {"k": k, "runs": np.zeros(1, np.int64)}),
        (KR.key_range_narrow, {"k": k, "wrap": 0.0, "top": np.zeros(1), "bottom": np.zeros(1)}),
        (KR.radix_first, {"k": k, "wrap": 0.0, "flip": 0.0, "low_hi": 0.0, "low_lo": 1.0}),
        (KR.radix_last, {"u0": k, "at": k}),
        (KI.int_copy, {"k": k}), (KI.int_fill, {"high": 0.0, "low": 3.0, "out": np.zeros(4, np.int32)}),
    ]
    for kern, planes in runs:
        try:
            eagle.deploy(kern, target=gpu).run(**planes)
        except eagle.RuntimeMissing as exc:
            assert "compiled" in str(exc), (kern.name, str(exc))


def test_the_benchmark_script_runs_checked_workers(tmp_path):
    """benchmarks/algorithms.py cannot rot: a tiny run starts one checked worker per implementation and prints
    the ratio (speed itself is never asserted)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "algorithms.json"
    r = subprocess.run([sys.executable, "-m", "benchmarks.algorithms", "--cases", "argsort_ids16,reduce_by_key_f64",
                        "--sizes", "5000", "--rounds", "1", "--repeats", "1", "--min-time", "0", "--out", str(out)],
                       cwd=root, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "eagle/best peer" in r.stdout and not r.stderr.strip(), r.stderr[-2000:]
    got = json.loads(out.read_text())
    assert set(got) == {"argsort_ids16|5000", "reduce_by_key_f64|5000"}
    assert all("eagle" in v["median_s"] and v["rounds"] == 1 for v in got.values())
