"""The reference of the algorithms fuzzer (tests/fuzz_algorithms.py): what a case is, exact arithmetic in Python
integers, and each function's documented result (docs/algorithms.md) or refusal, written in NumPy and Python to the
bit: ordered sums are the exact sum rounded once by hand in the sum's type, scans follow the fixed 4096-lane blocks
of docs/semantics.md ("Scans"), integer sums are exact Python ints wrapped as documented."""


from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Case", "Refusal", "exact_sum", "materialize", "reference", "round_exact"]

BLOCK = 4096  # the scans' fixed block (docs/semantics.md, "Scans")
SPLIT_AT = 1024  # inputs at least this long also run on 3 threads
MIN_CHUNK = "300"  # $EAGLE_MIN_CHUNK for those runs: many chunks, not aligned with the blocks
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
INTS = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)]
BOOL = np.dtype(bool)
NUMBERS = [F32, F64, F16, *INTS, BOOL]


# ---- what a case is -----------------------------------------------------------------------------------------


@dataclass
class Refusal:
    """The documented refusal a call must raise: exception type(s) and a message pattern."""

    types: tuple
    match: str = ""


@dataclass
class Case:
    seed: int
    index: int
    name: str
    what: str
    fn: str
    arrays: dict  # name -> np.ndarray, the caller's arrays
    kw: dict  # the call's other arguments
    wrapped: set = field(default_factory=set)  # arrays passed as eagle.Array
    written: set = field(default_factory=set)  # arrays the call writes (dst): only their first n values
    n_written: int = 0
    same: bool = False  # a scan in place: src is dst
    layout: dict = field(default_factory=dict)  # name -> "swapped", "strided", "fortran" or "readonly"
    tags: set = field(default_factory=set)

    def size(self) -> int:
        return max([a.size for a in self.arrays.values()] + [0])


def materialize(c: Case) -> dict:
    """The caller's arrays, fresh: the case's values in the layout it draws (the other byte order, a strided
    view, Fortran order, read-only)."""
    out = {}
    for k, a in c.arrays.items():
        lay = c.layout.get(k)
        if lay == "swapped":
            b = a.astype(a.dtype.newbyteorder("S"))
        elif lay == "strided":
            w = np.zeros(2 * a.size, a.dtype)
            w[::2] = a.reshape(-1)
            b = w[::2].reshape(a.shape)
        elif lay == "fortran":
            b = np.asfortranarray(a)
        else:
            b = a.copy()
            if lay == "readonly":
                b.flags.writeable = False
        out[k] = b
    return out


def _raw(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


# ---- exact arithmetic for the reference -------------------------------------------------------------------


def round_exact(num: int, exp: int, dtype) -> np.floating:
    """`num * 2**exp` (exact: Python ints) rounded once to nearest-even in float32/float64, overflow to inf."""
    dtype = np.dtype(dtype)
    prec, emin, emax = (53, -1074, 1024) if dtype == F64 else (24, -149, 128)
    if num == 0:
        return dtype.type(0.0)
    mag = abs(num)
    ulp = max(mag.bit_length() - 1 + exp - prec + 1, emin)
    sh = ulp - exp
    if sh > 0:
        q, r = divmod(mag, 1 << sh)
        half = 1 << (sh - 1)
        if r > half or (r == half and q & 1):
            q += 1
    else:
        q = mag << -sh
    val = math.inf if q.bit_length() - 1 + ulp >= emax else math.ldexp(q, ulp)
    return dtype.type(-val if num < 0 else val)


def exact_sum(terms: np.ndarray, dtype) -> np.floating:
    """An ordered sum's value (docs/ordered.md): the exact sum of the terms rounded once in `dtype`; NaN for a NaN
    term or +inf with -inf, an infinity for infinite terms of one sign, +0.0 for a zero sum."""
    dtype = np.dtype(dtype)
    t = np.asarray(terms, dtype=np.float64).reshape(-1)
    if np.isnan(t).any() or ((t == np.inf).any() and (t == -np.inf).any()):
        return dtype.type(np.nan)
    if np.isinf(t).any():
        return dtype.type(np.inf if (t == np.inf).any() else -np.inf)
    mant, ex = np.frexp(t)
    mi = (mant * 2.0**53).astype(np.int64)
    sh = ex.astype(np.int64) + (1074 - 53)
    total = 0
    for s in np.unique(sh).tolist():
        sel = mi[sh == s]
        part = int((sel >> 26).sum()) * (1 << 26) + int((sel & ((1 << 26) - 1)).sum())
        total += part << s if s >= 0 else part >> -s  # (a negative shift drops only zero bits: subnormals)
    return round_exact(total, -1074, dtype)


def int_values(a: np.ndarray) -> list[int]:
    """The integer values of an integer or bool array, exactly (uint64 as unsigned)."""
    return [int(v) for v in a.reshape(-1).tolist()]


def ints_to_float(a: np.ndarray, dtype) -> np.ndarray:
    """Integers converted to a float dtype with one rounding each (what the docs promise, uint64 included)."""
    dtype = np.dtype(dtype)
    a = a.reshape(-1)
    if a.dtype == BOOL:
        return a.astype(dtype)
    if a.dtype != np.uint64:
        return a.astype(np.int64).astype(dtype)  # (int64 -> float: the hardware conversion, rounded once)
    out = (a & np.uint64((1 << 63) - 1)).astype(np.int64).astype(dtype)
    for i in np.flatnonzero(a >= np.uint64(1 << 63)).tolist():
        out[i] = round_exact(int(a[i]), 0, dtype)
    return out


def to_run(a: np.ndarray, p) -> np.ndarray:
    """Values as a run in float type `p` reads them: floats widened or rounded as astype, integers rounded once."""
    if a.dtype.kind == "f":
        return a.reshape(-1).astype(F32 if a.dtype == F16 else a.dtype).astype(p)
    return ints_to_float(a, p)


def precision(*arrays: np.ndarray) -> np.dtype:
    """The run's float type: float64 when any input is float64, else float32 (integers alone too)."""
    return F64 if any(a.dtype == F64 for a in arrays) else F32


def wrap(v: int, dtype) -> int:
    """`v` modulo 2**bits, read in dtype's signedness."""
    dtype = np.dtype(dtype)
    bits = 8 * dtype.itemsize
    v %= 1 << bits
    return v - (1 << bits) if dtype.kind == "i" and v >= 1 << (bits - 1) else v


def hawk_int(x: float) -> int:
    """hawk's float -> int64 rule (docs/algorithms.md): toward zero; NaN, +-inf and values beyond int64 -2**63."""
    if not math.isfinite(x):
        return -(1 << 63)
    t = int(x)
    return t if -(1 << 63) <= t < 1 << 63 else -(1 << 63)


def store(src: np.ndarray, dst_dtype) -> np.ndarray:
    """src's values as a copy stores them into dst_dtype (docs/algorithms.md, "Copies, fills and gathers")."""
    d = np.dtype(dst_dtype)
    s = src.reshape(-1)
    if d.kind == "f":
        return to_run(s, d)
    if s.dtype.kind == "f":
        return np.array([wrap(hawk_int(v), d) for v in s.astype(np.float64).tolist()], dtype=d)
    return np.array([wrap(v, d) for v in int_values(s)], dtype=d) if s.size else np.zeros(0, d)


def blocked_scan(xs: np.ndarray, p, starts: np.ndarray | None = None, op: str = "sum",
                 offsets: list | None = None) -> np.ndarray:
    """The inclusive scan of docs/semantics.md ("Scans"): 4096-lane blocks, each folded lane by lane from the
    identity into its total; block b starts from the left fold of the earlier totals (with `starts`, the
    segmented pair rule) and folds its own lanes one by one. min/max: NaN stays, of equal zeros the later.
    `offsets`, when given, receives each block's starting value."""
    p = np.dtype(p)
    ident = {"sum": -0.0, "min": math.inf, "max": -math.inf}[op]
    py = p == F64  # Python floats are float64; float32 steps use NumPy scalars

    def fold(a, b):
        if op == "sum":
            return a + b
        if a != a or b != b:
            return a if a != a else b
        return b if (b <= a if op == "min" else b >= a) else a

    vals = xs.tolist() if py else list(xs)
    if starts is None:
        starts = np.zeros(len(vals), bool)
    flags = starts.tolist()
    out = np.empty(len(vals), p)
    off = p.type(ident) if not py else ident
    for b in range(0, len(vals), BLOCK):
        if offsets is not None:
            offsets.append(off)
        acc, t, met = off, (ident if py else p.type(ident)), False
        for j in range(b, min(b + BLOCK, len(vals))):
            x = vals[j]
            acc = x if flags[j] else fold(acc, x)
            t = x if flags[j] else fold(t, x)
            met = met or flags[j]
            out[j] = acc
        off = t if met else fold(off, t)
    return out


def run_ends(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start flags, start positions) of the runs of equal adjacent keys (`!=`: NaN alone, 0.0 == -0.0)."""
    k = keys.reshape(-1)
    st = np.ones(k.size, bool)
    if k.size > 1:
        with np.errstate(invalid="ignore"):
            st[1:] = k[1:] != k[:-1]
    return st, np.flatnonzero(st)


# ---- the reference ------------------------------------------------------------------------------------------


def _n_rule(n, *sizes) -> tuple[int, Refusal | None]:
    """The first n values (n=None: sizes[0]); a negative n or one past any array is a ValueError."""
    count = sizes[0] if n is None else n
    if count < 0 or any(count > s for s in sizes):
        return 0, Refusal((ValueError,), r"n=-?\d+ is outside|n past any array involved")
    return count, None


def _flatn(a: np.ndarray, n: int) -> np.ndarray:
    return a.reshape(-1)[:n]


def _f(v) -> float:
    return float(v)


def _dst_refusal(c: Case) -> Refusal | None:
    """What a dst the function writes in place must be (docs/algorithms.md): writable and C-contiguous
    (ValueError), float32/float64 or an integer type in the machine's byte order (TypeError)."""
    if "dst" not in c.written:
        return None
    d = materialize(c)["dst"]
    if not d.flags.c_contiguous or not d.flags.writeable:
        return Refusal((ValueError,), "writable C-contiguous")
    if d.dtype.kind not in "fiu" or d.dtype == F16:
        return Refusal((TypeError,), "dst is")
    if not d.dtype.isnative:
        return Refusal((TypeError,), "byte order")
    return None


def reference(c: Case):
    """What the call must return (values as `invoke` hands them back), or the Refusal it must raise."""
    A, kw, fn = c.arrays, c.kw, c.fn
    bad_dst = _dst_refusal(c)
    if bad_dst:
        return bad_dst
    if fn in ("sum", "min", "max", "mean"):
        a = A["a"].reshape(-1)
        if fn == "mean":
            return _f("nan") if a.size == 0 else _ref_sum(a) / a.size
        if fn == "sum":
            return 0.0 if a.size == 0 else _ref_sum(a)
        if a.size == 0:
            return Refusal((ValueError,), f"{fn} reduction requires a nonempty array")
        return _ref_extreme(a, fn)
    if fn == "norm" and not any(kw["ord"] == o for o in (1, 2, math.inf) if not isinstance(kw["ord"], str)):
        return Refusal((ValueError,), "Unsupported norm order")
    if fn in ("var", "std", "norm", "absmax", "count_nonzero"):
        n, bad = _n_rule(kw["n"], A["data"].size)
        if bad:
            return bad
        x = _flatn(A["data"], n)
        if fn == "count_nonzero":
            return int(np.count_nonzero(x != 0))
        if fn == "var" or fn == "std":
            if n == 0:
                return math.nan
            v = _ref_var(x)
            return v if fn == "var" else math.sqrt(v)
        if n == 0:
            return 0.0
        p = precision(x)
        xs = to_run(x, p)
        order = 3 if fn == "absmax" or kw["ord"] == math.inf else int(kw["ord"])
        if order == 3:
            return math.nan if np.isnan(xs).any() else float(np.abs(xs).max())
        if order == 1:
            return float(exact_sum(np.abs(xs), p))
        return math.sqrt(float(exact_sum(xs * xs, p)))
    if fn == "dot":
        n, bad = _n_rule(kw["n"] if kw["n"] is not None else A["a"].size, A["a"].size, A["b"].size)
        if bad:
            return bad
        if n == 0:
            return 0.0
        a, b = _flatn(A["a"], n), _flatn(A["b"], n)
        p = precision(a, b)
        return float(exact_sum(to_run(a, p) * to_run(b, p), p))
    return _REFS[fn](c)


def _ref_sum(a: np.ndarray) -> float:
    if a.dtype.kind == "f":
        p = F64 if a.dtype == F64 else F32
        return float(exact_sum(a.astype(p), p))
    return float(wrap(sum(int_values(a)), np.uint64 if a.dtype.kind == "u" else np.int64))


def _ref_extreme(a: np.ndarray, which: str) -> float:
    if a.dtype.kind != "f":
        vals = int_values(a)
        return float(min(vals) if which == "min" else max(vals))
    x = a.astype(np.float64)
    if np.isnan(x).any():
        return math.nan
    v = float(x.min() if which == "min" else x.max())
    if v == 0.0:
        z = x[x == 0]
        neg = np.signbit(z)
        v = (-0.0 if neg.any() else 0.0) if which == "min" else (0.0 if (~neg).any() else -0.0)
    return v


def _ref_var(x: np.ndarray) -> float:
    p = precision(x)
    xs = to_run(x, p)
    s = exact_sum(xs, p)
    mu = p.type(s) / p.type(xs.size)
    d = xs - mu
    return float(exact_sum(d * d, p)) / xs.size


def _ref_histogram(c: Case):
    kw, data = c.kw, c.arrays["data"]
    bins = kw["bins"]
    if isinstance(bins, bool) or not isinstance(bins, int):
        return Refusal((TypeError,), "bins=")
    if bins < 1:
        return Refusal((ValueError,), "bins=")
    n, bad = _n_rule(kw["n"], data.size)
    if bad:
        return bad
    x = _flatn(data, n)
    if "range" not in kw:
        if n == 0:
            return Refusal((ValueError,), "range cannot be detected")
        lo, hi = _ref_extreme(x, "min"), _ref_extreme(x, "max")
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return Refusal((ValueError,), "not finite")
    else:
        lo, hi = kw["range"]
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
            return Refusal((ValueError,), "finite ends")
    if lo == hi:
        hi = lo + 1.0
    edges = np.linspace(lo, hi, bins + 1)
    p = precision(x)
    P = p.type
    scale = P(1) / ((P(hi) - P(lo)) / P(bins))
    xs = to_run(x, p)
    off = (xs - P(lo)) * scale
    if not np.isfinite(off).all() or (np.abs(off.astype(np.float64)) >= 2.0**31).any():
        return None  # no defined bin (the draw keeps away from it; not judged)
    idx = np.clip(np.floor(off.astype(np.float64)), 0, bins - 1).astype(np.int64)
    return np.bincount(idx, minlength=bins).astype(np.int32), edges


def _ref_scan(c: Case):
    A, kw = c.arrays, c.kw
    src, dst = (A["dst"], A["dst"]) if c.same else (A["src"], A["dst"])
    n, bad = _n_rule(kw["n"], src.size, dst.size)
    if bad:
        return bad
    out = dst.reshape(-1).copy()
    x = _flatn(src, n)
    d = dst.dtype
    total = None
    if n == 0:
        total = 0 if d.kind in "iu" else 0.0
    elif d.kind == "f":
        xs = to_run(x, d)
        offs: list = []
        inc = blocked_scan(xs, d, offsets=offs)
        if c.fn == "inclusive_scan":
            out[:n] = inc
            total = float(inc[-1])
        else:
            exc = np.empty(n, d)
            exc[0] = 0.0
            for b in range(0, n, BLOCK):  # a block's first lane holds the offset: the fold of the block totals
                exc[b] = offs[b // BLOCK] if b else 0.0
                exc[b + 1:b + BLOCK] = inc[b:min(b + BLOCK, n) - 1]
            out[:n] = exc
            total = float(xs[0] if n == 1 else exc[-1] + xs[-1])
    else:
        xi = np.array([hawk_int(v) for v in x.astype(np.float64).tolist()], np.int64) if x.dtype.kind == "f" \
            else np.array([wrap(v, np.int64) for v in int_values(x)], np.int64)
        with np.errstate(over="ignore"):
            inc = np.cumsum(xi, dtype=np.int64)
        exc = np.concatenate([[0], inc[:-1]]).astype(np.int64)
        out[:n] = (inc if c.fn == "inclusive_scan" else exc).astype(d)
        total = wrap(int(inc[-1]), d)
    if kw.get("total", True) is False:
        total = None
    return total, out.reshape(dst.shape)


def _ref_copy(c: Case):
    A, kw = c.arrays, c.kw
    src, dst = A["src"], A["dst"]
    off = 0
    if c.fn == "copy_with_offset":
        off = kw["dst_offset"]
        if isinstance(off, bool) or not isinstance(off, int) or off < 0:
            return Refusal((ValueError,), "dst_offset=")
        n, bad = _n_rule(kw["n"], src.size)
        if bad:
            return bad
        if off + n > dst.size:
            return Refusal((ValueError,), "dst_offset=")
    else:
        n, bad = _n_rule(kw["n"], src.size, dst.size)
        if bad:
            return bad
    out = dst.reshape(-1).copy()
    out[off:off + n] = store(_flatn(src, n), dst.dtype)
    return None, out.reshape(dst.shape)


def _ref_fill(c: Case):
    dst, kw = c.arrays["dst"], c.kw
    v = kw["value"]
    n, bad = _n_rule(kw["n"], dst.size)
    if bad:
        return bad
    integer = isinstance(v, (int, np.integer))
    if integer and not -(1 << 63) <= int(v) < 1 << 64:
        return Refusal((ValueError,), "outside the int64 and uint64 ranges")
    out = dst.reshape(-1).copy()
    d = dst.dtype
    if d.kind == "f":
        val = round_exact(int(v), 0, d) if integer else np.array(float(v)).astype(d)
    else:
        val = wrap(int(v), d) if integer else wrap(hawk_int(float(v)), d)
    out[:n] = val
    return None, out.reshape(dst.shape)


def _ref_gather(c: Case):
    v, perm = c.arrays["values"], c.arrays["perm"]
    if perm.dtype.kind not in "iu":
        return Refusal((TypeError,), "perm must hold integer")
    n, bad = _n_rule(c.kw["n"], perm.size, v.size)
    if bad:
        return bad
    idx = [int(i) for i in _flatn(perm, n).tolist()]
    if idx and (min(idx) < 0 or max(idx) >= v.size):
        return Refusal((IndexError,), "outside values")
    return v.reshape(-1)[np.array(idx, np.int64)]


def _ref_sort(c: Case):
    A, kw = c.arrays, c.kw
    k = A["keys"]
    if k.dtype not in [np.dtype(t) for t in (np.int32, np.uint32, np.int64, np.uint64)]:
        return Refusal((TypeError,), "keys must be")
    sizes = (k.size, A["values"].size) if c.fn == "sort_by_key" else (k.size,)
    n, bad = _n_rule(kw["n"], *sizes)
    if bad:
        return bad
    perm = np.argsort(_flatn(k, n), kind="stable").astype(np.dtype(kw.get("index_dtype") or np.int32))
    if c.fn == "argsort":
        return perm
    return _flatn(k, n)[perm], _flatn(A["values"], n)[perm]


def _ref_runs(c: Case):
    A, kw = c.arrays, c.kw
    k = A["keys"]
    if c.fn == "reduce_by_key":
        if kw["op"] not in ("sum", "min", "max"):
            return Refusal((ValueError,), "op=")
        n, bad = _n_rule(kw["n"], k.size, A["values"].size)
    else:
        n, bad = _n_rule(kw["n"], k.size)
    if bad:
        return bad
    keys = _flatn(k, n)
    st, first = run_ends(keys)
    if c.fn == "unique":
        counts = np.diff(np.append(first, n)).astype(np.int32)
        return keys[first], counts
    v = _flatn(A["values"], n)
    op = kw["op"]
    if n == 0:
        return keys[first], v[:0]
    last = np.append(first[1:], n) - 1
    if v.dtype.kind == "f":
        p = F32 if v.dtype == F16 else v.dtype
        red = blocked_scan(v.astype(p), p, st, op)[last].astype(v.dtype)
    elif v.dtype == BOOL:
        if op == "min":  # (a run's minimum, in bool: all)
            red = np.logical_and.reduceat(v, first)
        else:
            red = np.logical_or.reduceat(v, first)
    else:
        iv = int_values(v)
        red = []
        for a, b in zip(first.tolist(), (last + 1).tolist(), strict=True):
            part = iv[a:b]
            red.append(wrap(sum(part), v.dtype) if op == "sum" else (min(part) if op == "min" else max(part)))
        red = np.array(red, dtype=v.dtype)
    return keys[first], red


_REFS = {"histogram": _ref_histogram, "exclusive_scan": _ref_scan, "inclusive_scan": _ref_scan, "copy": _ref_copy,
         "copy_with_offset": _ref_copy, "fill_value": _ref_fill, "gather": _ref_gather, "argsort": _ref_sort,
         "sort_by_key": _ref_sort, "unique": _ref_runs, "reduce_by_key": _ref_runs}
