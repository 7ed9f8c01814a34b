"""The machine's streaming read bandwidth, measured with every thread: the ceiling a sum over a large array can reach.

NumPy's `np.add.reduce` runs on one thread, so it cannot stand for the machine. The probe XORs 64-bit words: each
thread folds its own contiguous chunk into one word (integer XOR vectorises exactly, with no floating-point
reassociation to allow) and writes it to its own slot, so nothing is shared between threads and almost no work is
done per byte. With Numba installed the chunks run in a `prange` loop (`parallel=True`); without it, in a pool of
Python threads over `np.bitwise_xor.reduce` (NumPy releases the GIL inside the loop). The method is reported.
The result is checked against a single-threaded XOR of the whole array, so a probe that skips data fails.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from benchmarks.timing import measure


def _numba_probe():
    import numba

    @numba.njit(parallel=True, cache=True)
    def xor_chunks(words, out, nt):
        step = (words.size + nt - 1) // nt
        for t in numba.prange(nt):
            chunk = words[t * step:min(words.size, (t + 1) * step)]  # a contiguous view: the loop vectorises
            acc = np.uint64(0)
            for i in range(chunk.size):
                acc ^= chunk[i]
            out[t] = acc
        return out

    nt = numba.get_num_threads()
    out = np.zeros(nt, dtype=np.uint64)
    return (lambda words: xor_chunks(words, out, nt)), f"numba prange XOR of 64-bit words, {nt} threads"


def _numpy_probe(threads: int):
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="bw")
    out = np.zeros(threads, dtype=np.uint64)

    def xor_chunks(words):
        step = -(-words.size // threads)

        def one(t):
            out[t] = np.bitwise_xor.reduce(words[t * step:(t + 1) * step])

        list(pool.map(one, range(threads)))
        return out

    return xor_chunks, f"NumPy bitwise_xor.reduce in {threads} Python threads (Numba absent)"


def read_bandwidth(n_bytes: int, repeats: int = 9, min_time: float = 0.02, seed: int = 2024) -> dict:
    """GB/s of a streaming read of `n_bytes` (rounded to whole 64-bit words) with every core: the median and the
    fastest of `repeats` samples, the method used and the bytes read."""
    words = np.random.default_rng(seed).integers(0, 2**63, max(1, n_bytes // 8), dtype=np.uint64)
    want = np.bitwise_xor.reduce(words)
    threads = os.cpu_count() or 1
    try:
        probe, method = _numba_probe()
    except ImportError:
        probe, method = _numpy_probe(threads)

    def check(out):
        got = np.bitwise_xor.reduce(np.asarray(out))
        if got != want:
            raise AssertionError(f"read bandwidth probe ({method}): XOR of the chunks {got:#x} != {want:#x}: "
                                 "the probe did not read every word")

    t = measure(lambda: probe(words), repeats, min_time, check)
    return {"method": method, "bytes": int(words.nbytes), "threads": threads,
            "median_gbs": words.nbytes / t.median_s / 1e9, "best_gbs": words.nbytes / t.min_s / 1e9,
            "median_s": t.median_s}
