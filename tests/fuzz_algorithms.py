"""A seeded property fuzzer for `eagle.algorithms` and the `eagle.Array` reductions (tests/test_fuzz.py runs it).

The kernel fuzzers (tests/fuzz_kernels.py and the runners built on it) draw hawk kernels; this one draws calls of
the library built from hawk kernels, where the contract is docs/algorithms.md. Case `i` of seed `s` comes from
`np.random.default_rng([s, i])` alone: one function of the library (var, std, norm with ord 1 / 2 / inf, absmax,
count_nonzero, dot, histogram, the two scans, copy, copy_with_offset, fill_value, gather, argsort, sort_by_key,
unique, reduce_by_key with each op, `eagle.asarray(a).sum/min/max/mean`), with random dtypes (float16 to float64,
every integer width, bool), sizes (0, 1, small, around the scans' 4096-lane blocks, up to ~50,000), `n=`
prefixes, 2-d shapes, special values (NaN, +-inf, -0.0, subnormals, huge values whose naive sums overflow,
integer extremes, uint64 above 2**63, integers whose conversion to a float lands near a rounding tie) and grouped
keys with runs. Its reference is written here in NumPy and Python, following the documented rules to the bit:
ordered sums are the exact sum rounded once (computed with Python integers, then rounded by hand in the sum's
type), scans follow the fixed 4096-lane blocks of docs/semantics.md ("Scans"), integer sums are exact Python
ints wrapped as documented. A bad input (n past an array, an empty min/max, a bad op, ord, bins or range, a perm
entry outside values, a wrong key dtype) must raise the documented exception type and leave every array the
caller passed unchanged; a call that runs must not write its inputs (nor dst past n). Inputs of 1,024 values or
more are run again with threads=3 and small chunks ($EAGLE_MIN_CHUNK), and must give the same bits.

    python tests/fuzz_algorithms.py --seed 7 --start 0 --count 200 --dir /tmp/fa   # one JSON line per case
    python tests/fuzz_algorithms.py --seed 7 --start 12 --show                     # what case 12 calls
"""


from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable

import fuzz_kernels as fk
import numpy as np
from fuzz_algorithms_ref import (
    BOOL,
    F16,
    F32,
    F64,
    INTS,
    MIN_CHUNK,
    SPLIT_AT,
    Case,
    Refusal,
    _raw,
    materialize,
    reference,
)

# ---- drawing inputs -------------------------------------------------------------------------------------------


def _specials(dt: np.dtype, nonfinite: bool) -> list:
    fi = np.finfo(F32 if dt == F16 else dt) if dt != F16 else np.finfo(F16)
    sub = float(fi.smallest_subnormal)
    out = [0.0, -0.0, sub, -3 * sub, float(fi.tiny), -float(fi.tiny) * 1.5, float(fi.max), -float(fi.max),
           float(fi.max) / 2, float(fi.max) * 0.75, 1.0, -1.0, float(fi.eps)]
    if nonfinite:
        out += [math.nan, math.inf, -math.inf, math.nan]
    return out


def _traps(rng, dt: np.dtype, k: int) -> list[int]:
    """64-bit integers of few set bits: their conversion to float32/float64 often sits near a rounding tie."""
    out = []
    for _ in range(k):
        top = int(rng.choice([62, 63])) if dt == np.uint64 else 62
        v = 1 << top
        if rng.random() < 0.5:
            v += 1 << (top - 1)
        for _ in range(int(rng.integers(1, 4))):
            v += int(rng.choice([-1, 1])) << int(rng.integers(0, 42))
        v += int(rng.integers(-2, 3))
        if dt.kind == "i" and rng.random() < 0.5:
            v = -v
        info = np.iinfo(dt)
        out.append(min(max(v, int(info.min)), int(info.max)))
    return out


def floats(rng, dt: np.dtype, size: int, wild: bool, nonfinite: bool = True) -> np.ndarray:
    kind = int(rng.integers(6))
    if kind == 0:
        x = rng.normal(size=size) * 10.0 ** int(rng.integers(-3, 4))
    elif kind == 1:
        x = rng.integers(-5, 6, size).astype(np.float64)  # zeros, cancellations, ties of ranks
    elif kind == 2:
        x = rng.uniform(-1, 1, size) * 2.0 ** int(rng.integers(-40, 40))
    elif kind == 3:
        x = rng.standard_cauchy(size)
    elif kind == 4:  # huge values of both signs: naive running sums overflow, the exact sum is finite
        big = float(np.finfo(dt if dt != F16 else F16).max) / 2
        x = rng.choice([big, -big, 1.0, -0.5, 3.0], size)
    else:
        x = rng.normal(size=size) + 1e8  # large mean, small spread: where E[x^2] - E[x]^2 would cancel
    lim = float(np.finfo(dt).max)
    x = np.clip(x, -lim, lim).astype(dt)
    if wild and size:
        sp = _specials(dt, nonfinite and rng.random() < 0.5)
        k = int(rng.integers(1, min(size, 12) + 1))
        x[rng.integers(0, size, k)] = np.array(rng.choice(sp, k), dtype=np.float64).astype(dt)
    return x


def integers(rng, dt: np.dtype, size: int, wild: bool) -> np.ndarray:
    if dt == BOOL:
        return rng.random(size) < rng.random()
    info = np.iinfo(dt)
    kind = int(rng.integers(4))
    if kind == 0:
        x = rng.integers(int(info.min), int(info.max), size, dtype=dt, endpoint=True)
    elif kind == 1:
        x = np.clip(rng.integers(-6, 7, size), int(info.min), int(info.max)).astype(dt)
    elif kind == 2 and dt.itemsize == 8:
        x = np.array(_traps(rng, dt, size), dtype=dt) if size else np.zeros(0, dt)
    else:
        lo = max(int(info.min), -(1 << 20))
        x = rng.integers(lo, min(int(info.max), 1 << 20), size, endpoint=True).astype(dt)
    if wild and size:
        sp = [int(info.min), int(info.max), 0, int(info.max) - 1] + ([-1] if dt.kind == "i" else [1 << 63 if
                                                                                                    dt.itemsize == 8
                                                                                                    else 1])
        if dt.itemsize == 8:
            sp += _traps(rng, dt, 4)
        k = int(rng.integers(1, min(size, 10) + 1))
        x[rng.integers(0, size, k)] = np.array([sp[int(j)] for j in rng.integers(0, len(sp), k)], dtype=dt)
    return x


def values(rng, dt, size: int, wild: bool | None = None, nonfinite: bool = True) -> np.ndarray:
    dt = np.dtype(dt)
    wild = rng.random() < 0.5 if wild is None else wild
    return floats(rng, dt, size, wild, nonfinite) if dt.kind == "f" else integers(rng, dt, size, wild)


SIZES = [0, 1, 2, 3, 5, 17, 100, 1000, 4095, 4096, 4097, 8191, 8192, 8193, 12289]


def draw_size(rng) -> int:
    r = rng.random()
    if r < 0.55:
        return int(rng.choice(SIZES))
    if r < 0.85:
        return int(rng.integers(0, 3000))
    return int(rng.integers(3000, 50001))


def shaped(rng, a: np.ndarray) -> np.ndarray:
    """Sometimes a 2-d array of the same values (everything reads in flat row-major order)."""
    if a.size >= 4 and rng.random() < 0.2:
        for d in (2, 3, 4, 5, 7):
            if a.size % d == 0:
                return a.reshape(d, -1)
    return a


def draw_n(rng, size: int, limit: int | None = None) -> tuple[int | None, bool]:
    """(n, is it refused): None mostly, a prefix sometimes, and now and then past the array or negative."""
    limit = size if limit is None else limit
    r = rng.random()
    if r < 0.6:
        return None, False
    if r < 0.92:
        return int(rng.integers(0, limit + 1)), False
    return (limit + int(rng.integers(1, 4)) if rng.random() < 0.7 else -int(rng.integers(1, 3))), True


def grouped_keys(rng, dt: np.dtype, size: int) -> np.ndarray:
    """Keys with runs: sorted draws of few distinct values, or runs placed at random (groups repeat)."""
    distinct = int(rng.choice([1, 2, 5, 50, 1000]))
    if dt.kind == "f":
        pool = floats(rng, dt, distinct, rng.random() < 0.5)
        if rng.random() < 0.3:
            pool[: min(2, distinct)] = np.array([0.0, -0.0][: min(2, distinct)], dtype=dt)
    else:
        pool = integers(rng, dt, distinct, rng.random() < 0.5)
    if rng.random() < 0.4:
        k = np.sort(pool[rng.integers(0, distinct, size)], kind="stable")
    else:
        lens = rng.geometric(1.0 / float(rng.choice([1.5, 8, 300, 5000])), size + 1)
        ids = np.repeat(rng.integers(0, distinct, lens.size), lens)[:size]
        k = pool[ids]
    return np.ascontiguousarray(k.astype(dt))


# ---- drawing a case -------------------------------------------------------------------------------------------

FUNCS = [("sum", 3), ("min", 2), ("max", 2), ("mean", 1), ("var", 2), ("std", 1), ("norm", 3), ("absmax", 1),
         ("count_nonzero", 1), ("dot", 3), ("histogram", 3), ("exclusive_scan", 3), ("inclusive_scan", 3),
         ("copy", 2), ("copy_with_offset", 2), ("fill_value", 2), ("gather", 2), ("argsort", 2),
         ("sort_by_key", 2), ("unique", 2), ("reduce_by_key", 4)]


def pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def number(rng, floats_share: float = 0.5) -> np.dtype:
    """A dtype of NUMBERS, float32/float64 drawn `floats_share` of the time (float16 and bool now and then)."""
    r = rng.random()
    if r < floats_share:
        return pick(rng, [F32, F64, F64])
    if r < floats_share + 0.08:
        return pick(rng, [F16, BOOL])
    return pick(rng, INTS)


def case(seed: int, index: int) -> Case:
    """Case `index` of `seed`."""
    rng = np.random.default_rng([seed, index])
    names, weights = zip(*FUNCS, strict=True)
    fn = names[int(rng.choice(len(names), p=np.array(weights) / sum(weights)))]
    c = Case(seed, index, f"fa_{seed}_{index}", "", fn, {}, {})
    with np.errstate(all="ignore"):
        _DRAW[fn](rng, c)
    for name, a in c.arrays.items():
        if name not in c.written and rng.random() < 0.25:
            c.wrapped.add(name)
        r = rng.random()
        if c.same:
            continue
        if r < 0.06 and a.dtype.itemsize > 1:
            c.layout[name] = "swapped"
        elif r < 0.12:
            c.layout[name] = "strided"
        elif r < 0.16 and a.ndim == 2:
            c.layout[name] = "fortran"
        elif r < 0.19 and name in c.written:
            c.layout[name] = "readonly"
    desc = ", ".join(f"{k}={v.dtype}{list(v.shape)}" + (f" {c.layout[k]}" if k in c.layout else "")
                     for k, v in c.arrays.items())
    kws = ", ".join(f"{k}={v!r}" for k, v in c.kw.items())
    c.what = f"{fn}({desc}{', ' if kws else ''}{kws})" + (" in place" if c.same else "")
    return c


def _draw_reduction(rng, c: Case):
    dt = number(rng)
    c.arrays["a"] = shaped(rng, values(rng, dt, draw_size(rng)))


def _draw_stat(rng, c: Case):
    dt = number(rng)
    a = values(rng, dt, draw_size(rng))
    c.arrays["data"] = shaped(rng, a)
    n, _ = draw_n(rng, a.size)
    c.kw["n"] = n
    if c.fn == "norm":
        r = rng.random()
        c.kw["ord"] = pick(rng, [1, 2, math.inf, 2.0, 1.0]) if r < 0.9 else pick(rng, [3, 0, -1, "fro", -math.inf])


def _draw_dot(rng, c: Case):
    da, db = number(rng), number(rng)
    size = draw_size(rng)
    c.arrays["a"] = values(rng, da, size)
    c.arrays["b"] = values(rng, db, size if rng.random() < 0.85 else int(rng.integers(0, size + 3)))
    c.kw["n"], _ = draw_n(rng, size)


def _draw_histogram(rng, c: Case):
    dt = pick(rng, [F32, F64, F16, *INTS, BOOL])
    size = draw_size(rng)
    x = values(rng, dt, size, wild=False) if dt.kind != "f" else floats(rng, dt, size, False, False)
    r = rng.random()
    if dt.kind == "f" and size and r < 0.08:
        x[int(rng.integers(size))] = pick(rng, [np.nan, np.inf, -np.inf])  # a nonfinite detected range
    if dt.itemsize == 8 and dt.kind in "iu" and rng.random() < 0.7:
        x = rng.integers(-1000, 1000, size).astype(dt)  # (a range over all of int64 has no defined bins in float32)
    c.arrays["data"] = shaped(rng, x)
    c.kw["bins"] = pick(rng, [1, 2, 3, 10, 10, 64, 257]) if rng.random() < 0.93 else pick(rng, [0, -1, 2.5, True])
    c.kw["n"], _ = draw_n(rng, size)
    if rng.random() < 0.5:
        fin = x[np.isfinite(x)] if dt.kind == "f" else x
        lo, hi = (float(fin.min()), float(fin.max())) if fin.size else (0.0, 1.0)
        span = hi - lo if hi > lo else 1.0
        lo2 = lo + span * float(rng.uniform(-0.3, 0.3))
        hi2 = max(lo2, hi + span * float(rng.uniform(-0.3, 0.3)))
        if rng.random() < 0.1:
            lo2 = hi2  # equal ends: (lo, lo + 1)
        if rng.random() < 0.06:
            lo2, hi2 = pick(rng, [(1.0, 0.0), (math.nan, 1.0), (0.0, math.inf)])
        c.kw["range"] = (lo2, hi2)


def _dst_dtype(rng):
    r = rng.random()
    return pick(rng, [F32, F64]) if r < 0.5 else (pick(rng, INTS) if r < 0.95 else pick(rng, [F16, BOOL]))


def _draw_scan(rng, c: Case):
    d = _dst_dtype(rng)
    s = number(rng, 0.7 if d.kind == "f" else 0.3)
    size = draw_size(rng)
    if d.kind in "iu" and s.kind == "f":  # float -> int: defined only inside int64, so finite values of range
        x = np.trunc(rng.uniform(-1e6, 1e6, size) * rng.random()).astype(s) if s != F16 else \
            rng.integers(-2000, 2000, size).astype(s)
        if size and rng.random() < 0.5:
            x[: min(size, 3)] = np.array([-0.0, 2.5, -2.7][: min(size, 3)], dtype=s)
    else:
        x = values(rng, s, size)
    c.arrays["src"] = shaped(rng, x)
    if s == d and d.kind in "fiu" and d != F16 and rng.random() < 0.15:
        c.same = True
        c.arrays["dst"] = c.arrays.pop("src")
        c.written = {"dst"}
    else:
        extra = int(rng.integers(0, 4)) if rng.random() < 0.8 else -int(rng.integers(1, 3))
        c.arrays["dst"] = values(rng, d, max(size + extra, 0), wild=False)
        c.written = {"dst"}
    c.kw["n"], _ = draw_n(rng, size)
    if rng.random() < 0.15:
        c.kw["total"] = False


def _draw_copy(rng, c: Case):
    d = _dst_dtype(rng)
    s = number(rng, 0.6 if d.kind == "f" else 0.3)
    size = draw_size(rng)
    c.arrays["src"] = shaped(rng, values(rng, s, size))
    if c.fn == "copy_with_offset":
        off = int(rng.integers(0, 5)) if rng.random() < 0.93 else pick(rng, [-1, 2.0, True])
        c.kw["dst_offset"] = off
        extra = int(rng.integers(-2, 5)) + (off if isinstance(off, int) and off > 0 else 0)
    else:
        extra = int(rng.integers(0, 4)) if rng.random() < 0.85 else -int(rng.integers(1, 3))
    c.arrays["dst"] = values(rng, d, max(size + extra, 0), wild=False)
    c.written = {"dst"}
    c.kw["n"], _ = draw_n(rng, size)


def _draw_fill(rng, c: Case):
    d = _dst_dtype(rng)
    size = draw_size(rng)
    c.arrays["dst"] = shaped(rng, values(rng, d, size, wild=False))
    c.written = {"dst"}
    r = rng.random()
    if r < 0.35:
        v = int(pick(rng, [0, 1, -1, 300, 70000, -(1 << 63), (1 << 63) - 1, (1 << 64) - 1, 1 << 63, 2**31,
                           *_traps(rng, np.dtype(np.uint64), 2), *_traps(rng, np.dtype(np.int64), 2)]))
    elif r < 0.75:
        v = float(pick(rng, [2.7, -2.7, 0.1, 1 / 3, -0.0, 1e39, -1e-40, 2.0**-150, 3e9, 1e19, math.nan, math.inf,
                             -math.inf, 16777217.0, 2.0**63, -(2.0**63) - 4096]))
    elif r < 0.9:
        v = pick(rng, [np.float32(0.1), np.float16(-3.5), np.int8(-5), np.uint64((1 << 64) - 3), np.int64(-7)])
    else:
        v = pick(rng, [1 << 64, -(1 << 63) - 1, 2**70])  # outside int64 and uint64: refused
    c.kw["value"] = v
    c.kw["n"], _ = draw_n(rng, size)


def _draw_gather(rng, c: Case):
    vd = number(rng, 0.4)
    size = draw_size(rng)
    v = values(rng, vd, size)
    c.arrays["values"] = shaped(rng, v)
    m = int(rng.integers(0, 2 * size + 3)) if rng.random() < 0.7 else draw_size(rng)
    pd = pick(rng, [np.dtype(t) for t in (np.int32, np.int64, np.int64, np.uint32, np.uint64, np.int16, np.uint8)])
    hi = min(size, int(np.iinfo(pd).max) + 1)
    perm = rng.integers(0, max(hi, 1), m).astype(pd) if size else np.zeros(m, pd)
    info = np.iinfo(pd)
    bad = [v for v in (size, size + 5, -1) if int(info.min) <= v <= int(info.max)]
    if m and bad and (rng.random() < 0.1 or size == 0):
        perm[int(rng.integers(m))] = pick(rng, bad)  # outside values: an IndexError
    if rng.random() < 0.05:
        perm = perm.astype(np.float64)  # positions must be integers
    c.arrays["perm"] = perm
    c.kw["n"], _ = draw_n(rng, m, limit=m)


def _draw_sort(rng, c: Case):
    kd = pick(rng, [np.dtype(t) for t in (np.int32, np.uint32, np.int64, np.uint64)]) if rng.random() < 0.92 else \
        pick(rng, [F32, F64, np.dtype(np.int16), np.dtype(np.uint8), BOOL])
    size = draw_size(rng)
    r = rng.random()
    if r < 0.3:
        k = integers(rng, kd, size, True) if kd.kind != "f" else floats(rng, kd, size, False)
    elif r < 0.5 and kd.kind != "f" and kd != BOOL:
        k = np.clip(rng.integers(0, 1 << 16, size), 0, int(np.iinfo(kd).max)).astype(kd)  # ids below 2**16
    elif r < 0.6:
        k = np.full(size, pick(rng, [0, 1, 7]), kd)  # all equal: no passes
    else:
        k = grouped_keys(rng, kd, size)
        if rng.random() < 0.5 and size:
            k = k[rng.permutation(size)]
    c.arrays["keys"] = shaped(rng, k)
    if c.fn == "sort_by_key":
        c.arrays["values"] = values(rng, number(rng, 0.4), size if rng.random() < 0.9 else max(size - 2, 0))
    if rng.random() < 0.2:
        c.kw["index_dtype"] = pick(rng, [np.int32, np.int64])
    c.kw["n"], _ = draw_n(rng, size)


def _draw_runs(rng, c: Case):
    kd = number(rng, 0.4)
    size = draw_size(rng)
    k = grouped_keys(rng, kd, size)
    if kd.kind == "f" and size and rng.random() < 0.3:
        k[rng.integers(0, size, 3)] = np.nan  # NaN keys: each its own run
    c.arrays["keys"] = shaped(rng, k)
    if c.fn == "reduce_by_key":
        vd = number(rng, 0.6)
        c.arrays["values"] = values(rng, vd, size if rng.random() < 0.92 else max(size - 3, 0))
        c.kw["op"] = pick(rng, ["sum", "min", "max"]) if rng.random() < 0.96 else pick(rng, ["prod", "mean"])
    c.kw["n"], _ = draw_n(rng, size)


_DRAW: dict[str, Callable] = {
    "sum": _draw_reduction, "min": _draw_reduction, "max": _draw_reduction, "mean": _draw_reduction,
    "var": _draw_stat, "std": _draw_stat, "norm": _draw_stat, "absmax": _draw_stat, "count_nonzero": _draw_stat,
    "dot": _draw_dot, "histogram": _draw_histogram, "exclusive_scan": _draw_scan, "inclusive_scan": _draw_scan,
    "copy": _draw_copy, "copy_with_offset": _draw_copy, "fill_value": _draw_fill, "gather": _draw_gather,
    "argsort": _draw_sort, "sort_by_key": _draw_sort, "unique": _draw_runs, "reduce_by_key": _draw_runs,
}


# ---- the call, and its comparison -----------------------------------------------------------------------------


def invoke(c: Case, arrays: dict, threads: int, target: str):
    """Call the library as the case says (arrays: the caller's, fresh); the outcome in the reference's form."""
    import eagle
    import eagle.algorithms as alg

    def arg(name):
        a = arrays[name]
        return eagle.asarray(a) if name in c.wrapped else a

    kw = dict(c.kw)
    run = {"threads": threads, "target": target}
    fn = c.fn
    if fn in ("sum", "min", "max", "mean"):
        return getattr(eagle.asarray(arrays["a"]), fn)(**run)
    if fn in ("var", "std", "absmax", "count_nonzero"):
        return getattr(alg, fn)(arg("data"), n=kw["n"], **run)
    if fn == "norm":
        return alg.norm(arg("data"), ord=kw["ord"], n=kw["n"], **run)
    if fn == "dot":
        return alg.dot(arg("a"), arg("b"), n=kw["n"], **run)
    if fn == "histogram":
        counts, edges = alg.histogram(arg("data"), **kw, **run)
        return np.asarray(counts), edges
    if fn in ("exclusive_scan", "inclusive_scan"):
        dst = arrays["dst"]
        src = dst if c.same else arg("src")
        total = getattr(alg, fn)(src, dst, **kw, **run)
        return total, dst
    if fn in ("copy", "copy_with_offset"):
        getattr(alg, fn)(arg("src"), arrays["dst"], **kw, **run)
        return None, arrays["dst"]
    if fn == "fill_value":
        alg.fill_value(arrays["dst"], kw["value"], n=kw["n"], **run)
        return None, arrays["dst"]
    if fn == "gather":
        return np.asarray(alg.gather(arg("values"), arg("perm"), n=kw["n"], **run))
    if fn == "argsort":
        return np.asarray(alg.argsort(arg("keys"), **kw, **run))
    if fn == "sort_by_key":
        return tuple(np.asarray(r) for r in alg.sort_by_key(arg("keys"), arg("values"), **kw, **run))
    if fn == "unique":
        return tuple(np.asarray(r) for r in alg.unique(arg("keys"), **kw, **run))
    return tuple(np.asarray(r) for r in alg.reduce_by_key(arg("keys"), arg("values"), **kw, **run))


def _same_bits(a, b) -> bool:
    """Equal dtype, shape and bits; NaN meets any NaN (the docs promise NaN, canonical for ordered sums)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        nan = np.isnan(a)
        if not np.array_equal(nan, np.isnan(b)):
            return False
        w = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
        return np.array_equal(a[~nan].view(w), b[~nan].view(w))
    return np.array_equal(a, b)


def _scalar_same(got, want) -> bool:
    if type(got) is not type(want) and not (isinstance(want, float) and isinstance(got, float)):
        return False
    if isinstance(want, float):
        return (math.isnan(got) and math.isnan(want)) or (got == want and math.copysign(1, got) ==
                                                           math.copysign(1, want))
    return got == want


def differ(got, want) -> str | None:
    """None when the outcome matches the reference bit for bit (NaN meets NaN); else what differs."""
    if isinstance(want, tuple):
        if not isinstance(got, tuple) or len(got) != len(want):
            return f"got {type(got).__name__}, want a {len(want)}-tuple"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            why = differ(g, w)
            if why:
                return f"[{i}] {why}"
        return None
    if want is None or isinstance(want, (int, float)):
        if want is None:
            return None if got is None else f"got {got!r}, want None"
        return None if _scalar_same(got, want) else f"got {got!r} ({type(got).__name__}), want {want!r}"
    g, w = np.asarray(got), np.asarray(want)
    if _same_bits(g, w):
        return None
    if g.dtype != w.dtype or g.shape != w.shape:
        return f"got {g.dtype}{g.shape}, want {w.dtype}{w.shape}"
    gf, wf = g.reshape(-1), w.reshape(-1)
    bad = np.flatnonzero(~((gf == wf) | ((gf != gf) & (wf != wf))) | (np.signbit(gf) != np.signbit(wf))
                         if g.dtype.kind == "f" else gf != wf)
    return f"{bad.size} of {w.size} differ; first at {bad[:3].tolist()}: got {gf[bad[:3]].tolist()} want " \
           f"{wf[bad[:3]].tolist()}"


def _bits(x):
    if isinstance(x, tuple):
        return tuple(_bits(v) for v in x)
    if x is None or isinstance(x, (int, float)):
        return repr(x)
    a = np.asarray(x)
    return (str(a.dtype), a.shape, a.tobytes())


def check(c: Case, workdir: str, target: str = "host") -> dict:
    """Run case `c` (threads=1, and threads=3 in small chunks when big enough) against its reference."""
    out = fk.record(c)
    caller, before = materialize(c), {k: _raw(a) for k, a in materialize(c).items()}
    want = reference(c)
    if want is None:
        return {**out, "status": "skipped", "why": "no defined result (histogram offsets outside an integer)"}
    try:
        got = invoke(c, caller, 1, target)
    except Exception as exc:
        changed = [k for k in c.arrays if _raw(caller[k]) != before[k]]
        if changed:
            return {**out, "status": "fail", "why": f"refused ({type(exc).__name__}: {str(exc)[:200]}) but changed "
                                                    f"the caller's {changed}"}
        if isinstance(want, Refusal) and isinstance(exc, want.types) and re.search(want.match, str(exc)):
            return {**out, "status": "ok", "why": f"refused: {type(exc).__name__}"}
        return fk.raised(c, exc) if not isinstance(want, Refusal) else \
            {**out, "status": "fail", "why": f"raised {type(exc).__name__}: {str(exc)[:300]}; want "
                                             f"{[t.__name__ for t in want.types]} matching {want.match!r}"}
    if isinstance(want, Refusal):
        return {**out, "status": "fail", "why": f"ran; want {[t.__name__ for t in want.types]} ({want.match!r})"}
    changed = [k for k in c.arrays if k not in c.written and _raw(caller[k]) != before[k]]
    if changed:
        return {**out, "status": "fail", "why": f"the call changed its input(s) {changed}"}
    why = differ(got, want)
    if why:
        return {**out, "status": "fail", "why": why}
    if c.size() < SPLIT_AT:
        return {**out, "status": "ok", "why": "match"}
    from eagle.algorithms import _common

    old = os.environ.get("EAGLE_MIN_CHUNK")
    os.environ["EAGLE_MIN_CHUNK"] = MIN_CHUNK
    seen = {k: id(p.last_chunks) for k, p in _common._PLANS.items()}
    try:
        got3 = invoke(c, materialize(c), 3, target)
    except Exception as exc:
        return {**out, "status": "fail", "why": f"threads=3: {fk.raised(c, exc)['why']}"}
    finally:
        if old is None:
            del os.environ["EAGLE_MIN_CHUNK"]
        else:
            os.environ["EAGLE_MIN_CHUNK"] = old
    if _bits(got3) != _bits(got):
        return {**out, "status": "fail", "why": f"threads=3 differs from threads=1: {differ(got3, got)}"}
    chunks = [max(p.last_chunks) for k, p in _common._PLANS.items()  # the launches this call made on 3 threads
              if k[2] == 3 and p.last_chunks and seen.get(k) != id(p.last_chunks)]
    split = f"split into up to {max(chunks)} chunks" if chunks and max(chunks) > 1 else "not split"
    return {**out, "status": "ok", "why": f"match; threads=3 the same bits ({split})"}


def main(argv=None) -> int:
    return fk.run_drawn_cases(case, check, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
