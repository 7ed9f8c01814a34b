"""Adversarial data and bit-for-bit checks for the exact "ordered" tests (tests/test_exact_ordered.py).

Each family takes (n, dtype, rng) and returns n terms already in `dtype`. Most put a hard core among pairs v, -v
with exponents spread over the whole range: the pairs cancel exactly (the exact sum is the core's), yet every
naive order loses the core's low bits to them. The checks compare results bit for bit with conftest's exact
reference (and math.fsum for float64), and run a kernel at several thread counts with small chunks.
"""

import contextlib
import dataclasses
import math
import os

import numpy as np
from conftest import bt_ordered_sum

import eagle

SMALL = 1024  # min_chunk for the split runs: a run of a few thousand lanes takes several chunks
HOST_THREADS = (1, 2, 3, 4)
GPU_THREADS = (1, 4)  # off the host, threads only drive the host finish: two counts are enough

# ====================================================================================== adversarial families


def p_bits(dtype) -> int:
    """Significand bits, the hidden one included."""
    return np.finfo(dtype).nmant + 1


def tiny(dtype) -> float:
    """The smallest subnormal."""
    return 2.0 ** (np.finfo(dtype).minexp - np.finfo(dtype).nmant)


def pairs(m, dtype, rng):
    """m values with exponents spread over the dtype's range, then their negations: they add up to exactly 0."""
    d = 290.0 if dtype == np.float64 else 34.0
    v = (rng.uniform(1.0, 10.0, m) * 10.0 ** rng.uniform(-d, d, m)).astype(dtype)
    return np.concatenate([v, -v])


def pad(core, n, dtype, rng):
    """The core among cancelling pairs (and a zero when needed), n terms in all, shuffled."""
    core = np.asarray(core, dtype=dtype)
    fill = pairs((n - core.size) // 2, dtype, rng)
    zero = np.zeros(n - core.size - fill.size, dtype=dtype)
    return rng.permutation(np.concatenate([core, fill, zero])).astype(dtype)


def f_kahan(n, dtype, rng):
    """Kahan-style cancellation: 1, 1e100, 1, -1e100 (float32: 1e30) and pairs b, r - b with |b| up to 1e15."""
    big = 1e100 if dtype == np.float64 else 1e30
    q = n // 4
    b = rng.uniform(1.0, 2.0, q) * 10.0 ** rng.uniform(0.0, 15.0 if dtype == np.float64 else 7.0, q)
    b = (b * rng.choice([-1.0, 1.0], q)).astype(dtype)
    r = rng.uniform(-1e-3, 1e-3, q).astype(dtype)
    core = np.concatenate([[1.0, big, 1.0, -big], b, (r - b).astype(dtype)]).astype(dtype)
    return pad(core, n, dtype, rng)


def f_span(n, dtype, rng):
    """Random signs, decimal exponents uniform over 1e-300 .. 1e300 (float32: 1e-44 .. 1e37, subnormals too)."""
    lo, hi = (-300.0, 300.0) if dtype == np.float64 else (-44.0, 37.0)
    return (rng.choice([-1.0, 1.0], n) * rng.uniform(1.0, 10.0, n) * 10.0 ** rng.uniform(lo, hi, n)).astype(dtype)


def f_subnormal(n, dtype, rng):
    """Subnormals of both signs and a few small normals whose last bit lies above the subnormals' units."""
    p = p_bits(dtype)
    k = rng.integers(-(2 ** (p - 2)), 2 ** (p - 2), n - 8)
    normals = rng.uniform(1.0, 2.0, 8) * rng.choice([-1.0, 1.0], 8) * 2.0 ** (np.finfo(dtype).minexp + 20)
    return rng.permutation(np.concatenate([k * tiny(dtype), normals])).astype(dtype)


def f_zeros(n, dtype, rng):
    """+0.0 and -0.0 mixed, among cancelling pairs: the exact sum is zero, so the result is +0.0."""
    z = np.where(rng.random(n // 2) < 0.5, -0.0, 0.0)
    return pad(z, n, dtype, rng)


def f_negzeros(n, dtype, rng):
    """Only -0.0: the exact sum is zero, so the result is +0.0 (the old tree gave -0.0)."""
    return np.full(n, -0.0, dtype=dtype)


def f_equal(n, dtype, rng):
    """A long run of one value, 0.1 as the dtype holds it: n * fl(0.1) rounded once."""
    return np.full(n, dtype(0.1), dtype=dtype)


def f_overflow(n, dtype, rng):
    """M four times and -M three times (M = 1e308, float32: 3e38) plus three terms of 0.375 ulp(M): the naive
    partial sums overflow, the exact sum is M + 1.125 ulp(M), which rounds to M + ulp(M)."""
    m = dtype(1e308 if dtype == np.float64 else 3e38)
    u = np.spacing(m) * dtype(0.375)
    return pad([m] * 4 + [-m] * 3 + [u] * 3, n, dtype, rng)


def f_beyond(n, dtype, rng):
    """An exact sum past the largest finite value (of a random sign): inf of that sign."""
    top = np.finfo(dtype).max
    s = dtype(rng.choice([-1.0, 1.0]))
    return pad([s * top, s * top, -s * top * dtype(0.5)], n, dtype, rng)


def tie(dtype, rng, parity):
    """(a, pieces): a random value whose last significand bit is `parity` and pieces that add to exactly half an
    ulp of a, of a's sign; so a + pieces is a tie."""
    p = p_bits(dtype)
    e = int(rng.integers(-500, 500)) if dtype == np.float64 else int(rng.integers(-60, 60))
    sig = (1 << (p - 1)) | int(rng.integers(0, 1 << (p - 1)))
    sig = (sig & ~1) | parity
    sign = float(rng.choice([-1.0, 1.0]))
    a = sign * math.ldexp(sig, e - p + 1)
    h = sign * math.ldexp(1.0, e - p)
    return a, [h / 2, h / 4, h / 8, h / 8], e


def f_tie_even(n, dtype, rng):
    """An exact tie whose lower neighbour is even: rounds to it."""
    a, pieces, _ = tie(dtype, rng, 0)
    return pad([a, *pieces], n, dtype, rng)


def f_tie_odd(n, dtype, rng):
    """An exact tie whose lower neighbour is odd: rounds away, to the even one."""
    a, pieces, _ = tie(dtype, rng, 1)
    return pad([a, *pieces], n, dtype, rng)


def f_trap(n, dtype, rng):
    """A tie nudged by a term far below it: a + h + d with |d| under float64's half ulp of a. The correct result is
    the neighbour on d's side; float32 rounded through float64 sees the bare tie and rounds to even, which is the
    other neighbour (d > 0 with a even, or d < 0 with a odd)."""
    parity = int(rng.integers(0, 2))
    a, pieces, e = tie(dtype, rng, parity)
    d = math.copysign(math.ldexp(1.0, e - p_bits(dtype) - 40), a) * (1.0 if parity == 0 else -1.0)
    return pad([a, *pieces, d], n, dtype, rng)


def f_twofloat(n, dtype, rng):
    """Chains whose error-free pairs stay exact (the host's shortcut for full blocks of 1024 lanes: 8 chains of
    (high, low) TwoSums, docs/ordered.md): the first lane of every chain in every block holds 2**40 (float32:
    2**20), the others small multiples of 2**-30 (2**-10) whose sum `low` holds exactly; the result needs the
    low parts, rounded (dropping them, or rounding them twice, gives other bits)."""
    big, unit, most = (2.0**40, 2.0**-30, 1 << 20) if dtype == np.float64 else (2.0**20, 2.0**-10, 1 << 8)
    t = rng.integers(0, most, n) * unit
    t[(np.arange(n) % 1024) < 8] = big
    return t.astype(dtype)


FAMILIES = {f.__name__[2:]: f for f in (f_kahan, f_span, f_subnormal, f_zeros, f_negzeros, f_equal, f_overflow,
                                        f_beyond, f_tie_even, f_tie_odd, f_trap, f_twofloat)}


WIDE = ("normal", "lognormal", "decades", "ramp", "counts", "jump", "subnormals", "huge", "specials", "signed_zeros")


def wide_terms(kind: str, n: int, dtype, rng) -> np.ndarray:
    """n terms of a wide family (WIDE): spread, growth and special values rather than one adversarial core."""
    if kind == "normal":
        x = rng.standard_normal(n)
    elif kind == "lognormal":
        x = rng.lognormal(0.0, rng.uniform(0.5, 4.0), n) * rng.choice([-1.0, 1.0], n)
    elif kind == "decades":
        d = rng.uniform(1.0, 30.0)
        x = rng.standard_normal(n) * 10.0 ** rng.uniform(-d, d, n)
    elif kind == "ramp":
        x = np.arange(n, dtype=np.float64) * rng.uniform(0.1, 10.0)
    elif kind == "counts":
        x = rng.integers(-1000, 1000, n).astype(np.float64)
    elif kind == "jump":  # the terms grow (or shrink) by a power of two somewhere along the lanes
        x = rng.standard_normal(n)
        x[rng.integers(0, n):] *= 2.0 ** int(rng.integers(-100, 100))
    elif kind == "subnormals":
        lo = -1070 if dtype == np.float64 else -145
        x = rng.standard_normal(n) * 2.0 ** rng.integers(lo, lo + 60, n).astype(np.float64)
    elif kind == "huge":
        hi = 1023 if dtype == np.float64 else 127
        x = rng.standard_normal(n) * 2.0 ** float(rng.integers(hi - 100, hi))
    elif kind == "specials":
        x, k = rng.standard_normal(n), int(rng.integers(1, 4))
        x[rng.integers(0, n, k)] = rng.choice([np.inf, -np.inf, np.nan], k)
    else:  # zeros of both signs, a few terms among them
        x = np.where(rng.uniform(size=n) < 0.5, 0.0, -0.0) + (rng.uniform(size=n) < 0.01) * rng.standard_normal(n)
    with np.errstate(all="ignore"):
        return x.astype(dtype)


def draw_terms(n: int, dtype, rng) -> tuple[str, np.ndarray]:
    """A family drawn at random (an adversary of FAMILIES from 256 terms, whose cores need room, or a WIDE one)
    and n terms of it in `dtype`: (its name, the terms). For the fuzzers of exact sums and scatters."""
    dtype = np.dtype(dtype).type
    kind = str(rng.choice(list(FAMILIES) + list(WIDE) if n >= 256 else list(WIDE)))
    return kind, (FAMILIES[kind](n, dtype, rng) if kind in FAMILIES else wide_terms(kind, n, dtype, rng))


# ====================================================================================== checking


def raw_bits(a, dtype) -> bytes:
    """The bytes of a result in `dtype`: -0.0 and +0.0 differ, NaN payloads count."""
    return np.ascontiguousarray(np.asarray(a, dtype=dtype)).tobytes()


def same_bits(got, want, dtype, what):
    """`got` has `dtype` and the very bits of `want` (a NaN must be the same NaN); the message shows both in hex."""
    g = np.asarray(got)
    assert g.dtype == np.dtype(dtype), f"{what}: dtype {g.dtype}, expected {np.dtype(dtype)}"
    w = np.asarray(want, dtype=dtype).reshape(g.shape)
    if raw_bits(g, dtype) != raw_bits(w, dtype):
        bad = np.flatnonzero(g.ravel().view(f"u{g.itemsize}") != w.ravel().view(f"u{w.itemsize}"))
        raise AssertionError(f"{what}: bits differ at {bad.size} of {g.size} place(s), first {bad[:4].tolist()}: got "
                             f"{[float(v).hex() for v in g.ravel()[bad[:4]]]}, want "
                             f"{[float(v).hex() for v in w.ravel()[bad[:4]]]}")


def differs(name: str, got, want, dtype) -> str | None:
    """None when `got` has `dtype` and `want`'s bits (a zero's sign too; any NaN meets any NaN: the contract
    promises NaN, not its payload), else what differs, for a fuzzer's report."""
    g, w = np.asarray(got), np.asarray(want, dtype=dtype)
    if g.dtype != np.dtype(dtype) or g.size != w.size:
        return f"{name}: {g.dtype} of shape {g.shape}, expected {w.dtype} of shape {w.shape}"
    g, w = g.ravel(), w.ravel()
    gn, wn = np.isnan(g), np.isnan(w)
    width = f"u{g.itemsize}"
    bad = np.flatnonzero((gn != wn) | (np.where(gn, 0, g).view(width) != np.where(wn, 0, w).view(width)))
    if not bad.size:
        return None
    return (f"{name}: {bad.size} of {g.size} value(s) differ, first {bad[:3].tolist()}: got "
            f"{[float(v).hex() for v in g[bad[:3]]]}, want {[float(v).hex() for v in w[bad[:3]]]}")


@dataclasses.dataclass
class DrawnCase:
    """What the exact fuzzers (tests/fuzz_exact_sums.py, fuzz_exact_scatters.py) draw for every case: the body,
    the dtype, the lanes, the split (threads, min_chunk), the route ("grid": whatever the CPU allows; else
    $HAWK_NO_SAE=1), the data families and the planes to pass. A fuzzer's own fields follow, with defaults."""
    index: int
    body: str
    dtype: np.dtype
    lanes: int
    threads: int
    min_chunk: int
    route: str
    families: tuple[str, str]
    planes: dict
    tags: frozenset = frozenset()  # (known-class tags, as fuzz_kernels.raised reads them: none here)

    @property
    def setting(self) -> str:
        """The split, the route and the data, as words."""
        data = "/".join(self.families)
        return f"{self.threads} thread(s) min_chunk {self.min_chunk}, route {self.route}, data {data}"


def judge(out: dict, got, wants: dict, dtype, ran, flags: tuple[str, str]) -> dict:
    """A fuzzer's record for a run that went through: "fail" at the first output whose bits differ from `wants`
    (by output name; a lone array stands for the first), else "ok", saying whether the run split into chunks and
    whether its build allowed the flag routes (flags[0]) or not (flags[1]). `ran`: tests/exact_doors.Ran."""
    got = got if isinstance(got, dict) else {next(iter(wants)): got}
    for name, want in wants.items():
        why = differs(name, got[name], want, dtype)
        if why:
            return {**out, "status": "fail", "why": f"{why} (chunks {ran.chunks})"}
    split = "split" if ran.split else "one chunk"
    allowed = flags[0] if ran.flagged else flags[1]
    return {**out, "status": "ok", "why": f"exact ({split}; {allowed})"}


@contextlib.contextmanager
def no_sae(on: bool):
    """$HAWK_NO_SAE=1 inside the block when `on` (plans deployed there keep the range check and the grouped
    scatters: the flag routes are off), restored after."""
    old = os.environ.pop("HAWK_NO_SAE", None)
    if on:
        os.environ["HAWK_NO_SAE"] = "1"
    try:
        yield
    finally:
        os.environ.pop("HAWK_NO_SAE", None)
        if old is not None:
            os.environ["HAWK_NO_SAE"] = old


def fsum_or_none(terms):
    """math.fsum of float64 terms, or None where it cannot tell (non-finite terms, an intermediate overflow)."""
    t = np.asarray(terms, dtype=np.float64).ravel()
    if not np.isfinite(t).all():
        return None
    try:
        return math.fsum(t.tolist())
    except OverflowError:
        return None


def assert_exact(got, terms, dtype, what, mask=None):
    """`got` (one value) is the exact sum of `terms` (where `mask`) rounded once: bit for bit, also against
    math.fsum for float64."""
    want = bt_ordered_sum(terms, dtype, mask)
    same_bits(np.asarray(got).reshape(-1)[:1], [want], dtype, what)
    if dtype == np.float64:
        t = np.asarray(terms, dtype=dtype).ravel()
        f = fsum_or_none(t if mask is None else t[np.asarray(mask, dtype=bool).ravel()])
        if f is not None:
            same_bits(np.asarray(got).reshape(-1)[:1], [f + 0.0], dtype, f"{what} (math.fsum)")
    return want


def threads_for(target):
    """The thread counts a split test runs at on `target`."""
    return HOST_THREADS if target == "host" else GPU_THREADS


def split_runs(kernel, target, threads=None, min_chunk=SMALL, **planes):
    """Run `kernel` once per thread count with small chunks (sinks copied, so each run starts from the same
    content); a run with threads > 1 must really split. Yields (threads, outputs as ndarrays)."""
    for t in threads or threads_for(target):
        plan = eagle.deploy(kernel, target=target, threads=t, min_chunk=min_chunk)
        out = plan.run(**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in planes.items()})
        if t > 1:
            assert max(plan.last_chunks) > 1, f"{kernel.name} threads={t}: ran {plan.last_chunks} chunk(s)"
        yield t, ({k: np.asarray(v) for k, v in out.items()} if isinstance(out, dict) else np.asarray(out))


def chain_adversary(kind: str, dtype, p: int, t: int) -> np.ndarray:
    """128 terms for one chain whose last term has a low bit the chain keeps only because its range stops where
    it does (tests of the rows' and columns' chains; guess p, or window top exponent t for float32). float64
    (biased from 1.5 * 2**p): each term before rounds the high down by almost half an ulp, so the low grows to
    about 2**(p-46) and must keep a bit at 2**(p-101) ("floor": 127 such terms, then one two binades under the
    floor) or, once 40 terms of 2**(p-6) (three binades over the ceiling) took the high past 2**(p+1), where an
    ulp doubles, at 2**(p-99) ("ceiling"). float32 (windowed): 127 terms at the window's top (or three binades
    over it) take a chain's sum where the last term's low bit (two binades under the floor, or at it) is under
    half an ulp."""
    if dtype == np.float64:
        if kind == "floor":
            each = [2.0 ** (p - 10) + 2.0 ** (p - 53) - 2.0 ** (p - 62)] * 127 + [2.0 ** (p - 49) * (1 + 2.0 ** -52)]
        else:
            each = [2.0 ** (p - 6)] * 40 + [2.0 ** (p - 10) + 2.0 ** (p - 52) - 2.0 ** (p - 62)] * 87 + \
                [2.0 ** (p - 47) * (1 + 2.0 ** -52)]
    elif kind == "floor":
        each = [(2.0 - 2.0 ** -23) * 2.0 ** t] * 127 + [2.0 ** (t - 24) * (1 + 2.0 ** -23)]
    else:
        each = [1.5 * 2.0 ** (t + 3)] * 127 + [2.0 ** (t - 22) * (1 + 2.0 ** -23)]
    return np.array(each)


# ====================================================================================== hand-made cases


def hand_cases(dtype):
    """(terms, exact result) worked out by hand."""
    top = float(np.finfo(dtype).max)
    half_ulp_top = (top - float(np.nextafter(np.finfo(dtype).max, dtype(0)))) / 2
    p = p_bits(dtype)
    one_up = 1.0 + 2.0 ** (1 - p)  # the next value above 1
    big = 1e308 if dtype == np.float64 else 3e38
    big = float(dtype(big))
    return [
        ([big, big, -big], big),
        ([top, top, -top, -top, 1.0], 1.0),
        ([top, half_ulp_top], math.inf),  # a tie at the top rounds to even: past the largest finite value
        ([top, half_ulp_top, -half_ulp_top / 2**20], top),  # just below that tie
        ([-top, -top], -math.inf),
        ([math.inf, 1.0], math.inf),
        ([math.inf, math.inf, -top], math.inf),
        ([-math.inf, top, top], -math.inf),
        ([math.inf, -math.inf], math.nan),
        ([1.0, math.nan, math.inf], math.nan),
        ([-0.0, -0.0, -0.0], 0.0),
        ([], 0.0),
        ([1.5, -1.5], 0.0),
        ([tiny(dtype), -tiny(dtype)], 0.0),
        ([tiny(dtype), tiny(dtype)], 2 * tiny(dtype)),
        ([1.0, 2.0**-p], 1.0),  # a tie: 1 is even
        ([one_up, 2.0**-p], 1.0 + 2.0 ** (2 - p)),  # a tie: one_up is odd, so up
        ([1.0, 2.0 ** (-p - 1), 2.0 ** (-p - 1)], 1.0),  # a tie made of two terms
        ([1.0, 2.0**-p, 2.0 ** (-p - 40)], one_up),  # just above the tie
        ([one_up, 2.0**-p, -(2.0 ** (-p - 40))], one_up),  # just below the tie
        ([1.0, 2.0**-p, 2.0**-60], one_up),  # float32: through float64 this would be 1.0
        ([1.0, 3 * 2.0**-p, -(2.0**-60)], one_up),  # float32: through float64 this would be 1 + 2 ulp
    ]
