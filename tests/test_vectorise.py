"""Host loops that LLVM vectorizes (issue 12): max/min, masked sums, histograms through m.index and .at stencils.

Correctness only: results equal NumPy's (bitwise for max/min and whole-number histograms, within a bound for
sums) on data with NaNs, -0.0, empty masks and keys at the edges, on one chunk and on several. Where the CPU has
AVX2, the optimized assembly of a kernel's lane loop is checked for packed vector instructions. Speed is measured
elsewhere (benchmarks/), never here.
"""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Mutable, Param, Scalar, Vector

# ruff: noqa: UP037 (axis labels in annotations are strings, not forward references)

BINS = 256


@hawk.kernel
def vmax(x: Scalar) -> Scalar:
    return hawk.max(x)


@hawk.kernel
def vmin(x: Scalar) -> Scalar:
    return hawk.min(x)


@hawk.kernel
def vmax_where(x: Scalar, w: Scalar) -> Scalar:
    return hawk.max(x, where=w > 0.5)


@hawk.kernel
def vmin_where(x: Scalar, w: Scalar) -> Scalar:
    return hawk.min(x, where=w > 0.5)


@hawk.kernel
def vmax3(v: Vector[3]) -> Vector[3]:
    return hawk.max(v)


@hawk.kernel
def positive_sum(x: Scalar) -> Scalar:
    return hawk.sum(x, where=x > 0.0)


@hawk.kernel
def streamed(x: Scalar, w: Scalar, tot: Mutable[Scalar], avg: Mutable[Scalar], pos: Mutable[Scalar]):
    tot = hawk.sum(x * w)  # (loads and adds alone: whole groups of lanes with prefetch hints, then the rest)
    avg = hawk.mean(x)
    pos = hawk.sum(x, where=w > 0.5)


@hawk.kernel
def hist_auto(t: Scalar, counts: Mutable["bin":BINS]):
    hawk.scatter(counts)[m.index(t * 256.0, BINS)] += 1.0


@hawk.kernel
def hist_plain(t: Scalar, counts: Mutable["bin":BINS]):
    hawk.scatter(counts, policy="plain")[m.index(t * 256.0, BINS)] += 1.0


@hawk.kernel
def hist_weighted(t: Scalar, w: Scalar, counts: Mutable["bin":BINS]):
    hawk.scatter(counts, policy="plain")[m.index(t * 256.0, BINS)] += w


COLS = 40


@hawk.kernel
def diffuse(g: Grid["row", "col":COLS], u: Scalar, rate: Param, last_row: Param) -> Scalar:
    r = g.row
    c = g.col
    if m.land(m.land(r > 0, m.to_float(r) < last_row), m.land(c > 0, c < COLS - 1)):
        nxt = u + rate * (u.at(row=r - 1) + u.at(row=r + 1) + u.at(col=c - 1) + u.at(col=c + 1) - 4.0 * u)
    else:
        nxt = u
    return nxt


def _bits(a) -> bytes:
    return np.asarray(a, dtype=np.float64).tobytes()


def _run(kernel, chunks: bool, **planes):
    """One chunk, or small chunks over two threads (so the finish combines several chunk results)."""
    plan = eagle.deploy(kernel, threads=2, min_chunk=37) if chunks else eagle.deploy(kernel, threads=1)
    out = plan.run(**planes)
    return {k: np.asarray(v) for k, v in out.items()} if isinstance(out, dict) else np.asarray(out)


def _special_arrays(n: int, dtype) -> list[np.ndarray]:
    rng = np.random.default_rng(n)
    base = rng.standard_normal(n).astype(dtype)
    out = [base]
    for at in (0, 1, n // 2, n - 1):  # a NaN in the vector body, the epilogue and the first lane
        a = base.copy()
        a[at] = np.nan
        out.append(a)
    neg_nan = base.copy()
    neg_nan[n // 3] = -np.float64(np.nan)
    out.append(neg_nan)
    out.append(np.full(n, -0.0, dtype))  # every lane -0.0
    out.append(np.full(n, 0.0, dtype))
    mixed = -np.abs(base)  # zeros of both signs are the largest values
    mixed[n // 4], mixed[n // 2] = -0.0, 0.0
    out.append(mixed)
    mixed_min = np.abs(base)
    mixed_min[n // 5], mixed_min[n - 2] = 0.0, -0.0
    out.append(mixed_min)
    inf = base.copy()
    inf[3], inf[n - 3] = np.inf, -np.inf
    out.append(inf)
    return out


def _expect(kind: str, x: np.ndarray) -> float:
    """np.max / np.min, with the sign of a zero result as arith.maximumf / minimumf give it (NumPy's depends on
    the order of the lanes): +0.0 for max when a +0.0 is present, -0.0 for min when a -0.0 is."""
    if x.size == 0:
        return -math.inf if kind == "max" else math.inf
    r = (np.max if kind == "max" else np.min)(x)
    if r == 0:
        want = 0.0 if kind == "max" else -0.0
        r = want if np.any(np.signbit(x[x == 0]) == (kind == "min")) else -want
    return r


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("chunks", [False, True])
@pytest.mark.parametrize("n", [1, 7, 1000, 4099])
def test_max_min_bits(n, chunks, dtype):
    for x in _special_arrays(n, dtype) if n > 4 else [np.array([v] * n, dtype) for v in (1.5, -0.0, np.nan)]:
        for kind, k in (("max", vmax), ("min", vmin)):
            got = _run(k, chunks, x=x)
            want = np.asarray([_expect(kind, x)], dtype=dtype)
            assert got.dtype == dtype
            if np.any(np.isnan(x) & np.signbit(x)):  # NumPy's own NaN sign then depends on its code path
                assert np.isnan(got[0]), (kind, n, got)
                continue
            assert got.tobytes() == want.tobytes(), (kind, n, x[:8], got, want)


@pytest.mark.parametrize("chunks", [False, True])
def test_max_min_where(chunks):
    rng = np.random.default_rng(5)
    n = 2003
    x = rng.standard_normal(n)
    x[[10, 500, 1500]] = [np.nan, -0.0, 0.0]
    for w in (rng.random(n), np.zeros(n), np.ones(n)):
        keep = w > 0.5
        for kind, k in (("max", vmax_where), ("min", vmin_where)):
            got = _run(k, chunks, x=x, w=w)
            assert _bits(got) == _bits([_expect(kind, x[keep])]), (kind, keep.sum())
    # a NaN in a lane the mask drops does not reach the result
    w = np.ones(n)
    w[10] = 0.0
    assert _bits(_run(vmax_where, chunks, x=x, w=w)) == _bits([_expect("max", np.delete(x, 10))])


def test_max_vector_payload():
    rng = np.random.default_rng(9)
    v = rng.standard_normal((3, 3001))
    v[1, 77] = np.nan
    v[2] = -np.abs(v[2])
    v[2, 100] = 0.0
    got = _run(vmax3, True, v=v)
    assert _bits(got) == _bits([_expect("max", v[c]) for c in range(3)])


@pytest.mark.parametrize("chunks", [False, True])
def test_masked_sum(chunks):
    rng = np.random.default_rng(3)
    for x in (rng.standard_normal(100_003), -np.abs(rng.standard_normal(5000)), np.full(64, -0.0)):
        got = float(_run(positive_sum, chunks, x=x)[0])
        terms = x[x > 0.0]
        want = math.fsum(terms)
        # "auto": a fast sum in float64 partials: within n * eps * sum|terms|
        assert abs(got - want) <= terms.size * np.finfo(np.float64).eps * np.sum(np.abs(terms)) + 0.0
        if terms.size == 0:
            assert got == 0.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("min_chunk", [None, 37, 700])
def test_streamed_sums_over_whole_groups_and_the_rest(min_chunk, dtype):
    """Sums and means that only read run in whole groups of lanes (2 KiB of the narrowest plane: 256 float64
    lanes, 512 float32), then lane by lane: every lane counted once whether a chunk holds no group (37 lanes),
    a group and a rest (700), or many (one chunk), at lane counts around the group's edges."""
    rng = np.random.default_rng(8)
    plan = eagle.deploy(streamed, threads=1) if min_chunk is None else \
        eagle.deploy(streamed, threads=2, min_chunk=min_chunk)
    eps = np.finfo(dtype).eps
    for n in (1, 255, 256, 257, 511, 512, 513, 1025, 4099, 100_003):
        x, w = rng.standard_normal(n).astype(dtype), rng.random(n).astype(dtype)
        got = {k: float(np.asarray(v)[0]) for k, v in plan.run(x=x, w=w).items()}
        assert plan.last_chunks[0] > 1 or min_chunk is None or n < 4 * min_chunk  # (the chunks really split)
        for name, terms in (("tot", x.astype(np.float64) * w), ("avg", x), ("pos", x[w > 0.5])):
            terms = np.asarray(terms, dtype=np.float64)
            want = math.fsum(terms) / (n if name == "avg" else 1)
            bound = (n + 2) * eps * np.sum(np.abs(terms)) / (n if name == "avg" else 1)
            assert abs(got[name] - want) <= bound, (name, n, got[name], want)


def _hist(t: np.ndarray, w=None) -> np.ndarray:
    idx = np.clip(np.floor(t * t.dtype.type(256.0)), 0, BINS - 1).astype(np.int64)
    return np.bincount(idx, weights=w, minlength=BINS).astype(np.float64)


def _hist_data(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(n)
    t = rng.random(n)
    edges = t.copy()
    edges[: min(n, 8)] = [-1e300, -1.0, -0.0, 0.0, 1.0 - 2 ** -53, 1.0, 7.5, np.inf][: min(n, 8)]
    nan = t.copy()
    nan[n // 2] = np.nan  # floor(NaN) clamps to bin 0, as np.clip(NaN) ... is NaN: counted below by hand
    same = np.full(n, 0.5)  # every lane into one bin
    return [t, edges, same, nan]


@pytest.mark.parametrize("chunks", [False, True])
@pytest.mark.parametrize("kernel", [hist_auto, hist_plain])
@pytest.mark.parametrize("n", [1, 300, 100_000])
def test_histogram_counts_exact(kernel, n, chunks):
    for t in _hist_data(n):
        got = _run(kernel, chunks, t=t)
        finite = ~np.isnan(t)
        want = _hist(t[finite])
        want[0] += np.count_nonzero(~finite)  # m.index(NaN) is slot 0: clamp(floor(NaN)) as maxnum/minnum give it
        assert got.tobytes() == want.tobytes(), (n, np.flatnonzero(got != want)[:5])


def test_histogram_adds_onto_given_sink():
    t = np.random.default_rng(1).random(5000)
    given = np.arange(BINS, dtype=np.float64)
    out = eagle.deploy(hist_plain, threads=1).run(t=t, counts=given.copy())
    assert np.asarray(out).tobytes() == (given + _hist(t)).tobytes()


def test_histogram_weighted():
    rng = np.random.default_rng(2)
    t, w = rng.random(20_000), rng.standard_normal(20_000)
    got = _run(hist_weighted, False, t=t, w=w)
    want = _hist(t, np.abs(w))
    assert np.all(np.abs(got - _hist(t, w)) <= 20_000 * np.finfo(np.float64).eps * want)


@hawk.kernel
def hist_keys(t: Scalar, counts: Mutable["bin":BINS]):
    hawk.scatter(counts)[m.to_int(m.floor(t))] += 1.0


@pytest.mark.parametrize("chunks", [False, True])
def test_histogram_computed_keys_minus_one_and_outside(chunks):
    t = np.random.default_rng(4).random(3000) * BINS
    t[[5, 700, 2999]] = -1.0  # key -1: the lane adds nothing
    want = np.bincount(np.floor(t[t >= 0]).astype(np.int64), minlength=BINS).astype(np.float64)
    assert _run(hist_keys, chunks, t=t).tobytes() == want.tobytes()
    bad = t.copy()
    bad[[1000, 2000]] = [BINS + 3.0, -7.0]
    given = np.full(BINS, 2.0)
    with pytest.raises(eagle.InputError, match="counts"):
        eagle.deploy(hist_keys, threads=1).run(t=bad, counts=given)
    assert np.all(given == 2.0)  # a refused run leaves the caller's sink as it was


@pytest.mark.parametrize("chunks", [False, True])
@pytest.mark.parametrize("rows", [3, 4, 57])
def test_stencil(rows, chunks):
    rng = np.random.default_rng(rows)
    u = rng.standard_normal((rows, COLS))
    u[1, 1] = np.nan
    got = _run(diffuse, chunks, u=u, rate=0.1, last_row=float(rows - 1))
    o = u.copy()
    c = u[1:-1, 1:-1]
    o[1:-1, 1:-1] = c + 0.1 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * c)
    np.testing.assert_allclose(got, o, rtol=1e-15, atol=1e-15, equal_nan=True)


@hawk.kernel
def coordinate_tests(g: Grid["row", "col":COLS], u: Scalar) -> Scalar:
    c = g.col
    r = g.row
    s = u.at(col=c - 1) + u.at(col=c + 1) + u.at(row=r - 1)
    if c == 1:
        s = s + 100.0
    if c >= COLS - 2:
        s = s + 1000.0
    if r > 1:
        s = s + 10000.0
    if c != 0:
        s = s + 0.5
    if 0 < c:
        s = s + 0.25
    return s


@pytest.mark.parametrize("chunks", [False, True])
def test_interior_coordinate_tests(chunks):
    """Tests of the column against constants are decided once for the interior lanes only where every interior
    lane agrees: the others still vary lane by lane."""
    rows = 9
    u = np.random.default_rng(8).standard_normal((rows, COLS))
    col = np.arange(COLS)[None, :] + np.zeros((rows, 1), int)
    row = np.arange(rows)[:, None] + np.zeros((1, COLS), int)
    left = u[:, np.clip(np.arange(COLS) - 1, 0, COLS - 1)]
    right = u[:, np.clip(np.arange(COLS) + 1, 0, COLS - 1)]
    up = u[np.clip(np.arange(rows) - 1, 0, rows - 1), :]
    want = left + right + up
    want = want + np.where(col == 1, 100.0, 0.0)
    want = want + np.where(col >= COLS - 2, 1000.0, 0.0)
    want = want + np.where(row > 1, 10000.0, 0.0)
    want = want + np.where(col != 0, 0.5, 0.0)
    want = want + np.where(col > 0, 0.25, 0.0)
    assert _bits(_run(coordinate_tests, chunks, u=u)) == _bits(want)


# ---- the assembly of the lane loops --------------------------------------------------------------------------
def _has_avx2() -> bool:
    try:
        return " avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def _lanes_asm(kernel, name: str, dtype: str = "float64", stage: int = 0, cpu: str = "native") -> str:
    """The lane function's assembly as the host build makes it (opt -O3 and llc -O3 for this CPU, or for `cpu`);
    `name` is the function's (a later stage's: the kernel's name and `_<stage + 1>`)."""
    from mlir import ir
    from mlir.dialects import llvm

    from eagle import cache
    from hawk.ir.dialect import new_context
    from hawk.targets.host import _llvm_tool

    text = kernel.mlir(dtype, after="lower-to-llvm", stage=stage)
    with new_context(), ir.Location.unknown():
        ll = str(llvm.translate_module_to_llvmir(ir.Module.parse(text).operation))
    triple = f"{cache.machine()}-unknown-linux-gnu"
    opt = subprocess.run([_llvm_tool("opt"), "-O3", f"-mtriple={triple}", f"-mcpu={cpu}", "-S", "-"],
                         input=ll, capture_output=True, text=True, check=True).stdout
    asm = subprocess.run([_llvm_tool("llc"), "-O3", f"-mtriple={triple}", f"-mcpu={cpu}", "-"],
                         input=opt, capture_output=True, text=True, check=True).stdout
    start = asm.index(f"{name}_lanes:")
    return asm[start:asm.index(".Lfunc_end", start)]


def _vector_body(asm: str) -> str:
    """The instructions of the loop LLVM's vectorizer made: its `vector.body` blocks, up to its middle block."""
    at = asm.find("# %vector.body")
    assert at >= 0, "no vectorized loop in the lane function:\n" + asm[:3000]
    end = asm.find("%middle.block", at)
    return asm[at: end if end >= 0 else len(asm)]


needs_avx2 = pytest.mark.skipif(not _has_avx2(), reason="the packed-instruction checks look for AVX2 registers")


@needs_avx2
@pytest.mark.parametrize("kernel, op", [(vmax, "vmaxpd"), (vmin, "vminpd")])
def test_extremum_loop_is_packed(kernel, op):
    body = _vector_body(_lanes_asm(kernel, kernel.name))
    assert re.search(rf"{op}\s+%[yz]mm", body), body
    assert "vpmovq2m" not in body and "vblendm" not in body, body  # no per-element NaN/zero selects left


@needs_avx2
@pytest.mark.parametrize("kernel, op", [(vmax_where, "vmaxpd"), (vmin_where, "vminpd")])
def test_masked_extremum_loop_is_packed(kernel, op):
    """A masked-out lane offers the identity to the max (reduce_full.extremum_step): a select of the state
    instead kept the loop scalar (2.5 ms against 0.13 for 10**6 lanes)."""
    body = _vector_body(_lanes_asm(kernel, kernel.name))
    assert re.search(rf"{op}\s+%[yz]mm", body), body


@needs_avx2
def test_masked_sum_loop_is_packed():
    body = _vector_body(_lanes_asm(positive_sum, "positive_sum"))
    assert re.search(r"vaddpd\s+%[yz]mm", body), body


@needs_avx2
def test_streamed_sums_prefetch_ahead_and_stay_packed():
    """A kernel that only reads into sums and means runs whole groups of lanes, each with prefetch hints for the
    lanes planes.AHEAD past it, whose vectorized body keeps packed adds; a max keeps the plain loop (no hints)."""
    asm = _lanes_asm(streamed, "streamed")
    assert "prefetcht0" in asm, asm
    assert re.search(r"vaddpd\s+.*%[yz]mm", _vector_body(asm)), asm
    assert "prefetcht0" not in _lanes_asm(vmax, "vmax")


@needs_avx2
def test_histogram_keys_loop_is_packed():
    """The keys of m.index are computed by a vectorized loop (the adds into the bins stay one lane at a time)."""
    body = _vector_body(_lanes_asm(hist_auto, "hist_auto"))
    floor = r"(vroundpd|vrndscalepd)\s+\$9, %[yz]mm"  # (vrndscalepd: AVX-512's form of the packed floor)
    assert re.search(floor, body) and re.search(r"vmulpd\s+.*%[yz]mm", body), body
    # a bound of 256 converts through 32 bits: one packed conversion, where a 64-bit one took a scalar
    # vcvttsd2si per lane and 45% of the loop's time (values.NARROW_INDEX)
    assert re.search(r"vcvttpd2(dq|qq)\s+%[yz]mm", body) and "vcvttsd2si" not in body, body


@needs_avx2
def test_stencil_interior_loop_is_packed():
    """The interior columns run packed adds, with no per-lane test of the column left in the loop."""
    body = _vector_body(_lanes_asm(diffuse, "diffuse"))
    assert re.search(r"vaddpd\s+.*%[yz]mm", body) and "vpcmp" not in body, body


# ---- a 1-D grid's interior (grid.interior_lanes): the lanes far from both ends read without clamps -------------
@hawk.kernel
def line_stencil(g: Grid["i"], x: Scalar, a: Param) -> Scalar:
    y = x.at(i=g.i + 2) - 2.0 * x + x.at(i=g.i - 3)
    if g.i > 0:
        y = y + x.at(i=g.i - 1) * a
    if g.i < 4:
        y = y * 2.0
    return y


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 8, 13, 1000, 4099])
def test_line_stencil_bits_on_every_split(n):
    x = np.random.default_rng(n).normal(size=n)
    i = np.arange(n)

    def at(k):
        return x[np.clip(i + k, 0, n - 1)]

    want = at(2) - 2.0 * x + at(-3)
    want = np.where(i > 0, want + at(-1) * 0.3, want)
    want = np.where(i < 4, want * 2.0, want)
    for threads, min_chunk in ((1, None), (3, 2), (2, 5), (4, 1)):
        got = eagle.deploy(line_stencil, threads=threads, min_chunk=min_chunk).run(x=x, a=0.3)
        assert _bits(np.asarray(got)) == _bits(want), (n, threads, min_chunk)


@needs_avx2
def test_line_stencil_interior_loop_is_packed():
    """A 1-D grid's interior lanes run packed loads and adds (they were vector gathers of clamped indices)."""
    body = _vector_body(_lanes_asm(line_stencil, "line_stencil"))
    assert re.search(r"vaddpd\s+.*%[yz]mm", body) and "vgather" not in body, body


# ---- compensated sums over every lane: the blocked loop's bits (chunk_loops.blocked_driver) ---------------------
@hawk.kernel
def comp_sum(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="compensated")


@hawk.kernel
def comp_mean(x: Scalar) -> Scalar:
    return hawk.mean(x, where=x > 0.0, policy="compensated")


def _neumaier(s, c, x):
    """host_emit.neumaier in NumPy (float64, elementwise): an inf or NaN sum keeps its correction."""
    with np.errstate(invalid="ignore", over="ignore"):
        t = s + x
        lost = np.where(np.abs(s) >= np.abs(x), (s - t) + x, (x - t) + s)
        return t, np.where(np.abs(t) < np.inf, c + lost, c)


def _compensated_model(x: np.ndarray, keep: np.ndarray, bounds: list[tuple[int, int]]) -> tuple[float, float]:
    """The host's compensated sum step by step, (sum rounded to float64, count): per chunk, blocks of 1024 lanes
    (from lane 0); a full block's lane g * 8 + j goes into chain j, the chains are merged in order into the
    chunk's pair at the block's end; a cut block's lanes go into the chunk's pair one by one; the chunks' pairs
    are added in order at the end (chunk_loops.blocked_driver, finish.py)."""
    w = x.astype(np.float64)
    ts, tc = np.float64(0.0), np.float64(0.0)
    for lo, hi in bounds:
        s, c = np.float64(0.0), np.float64(0.0)
        for blk in range(lo // 1024, -(-hi // 1024)):
            start, end = blk * 1024, min(blk * 1024 + 1024, hi)
            cs, cc = np.zeros(8), np.zeros(8)
            if start >= lo and end - start == 1024:
                for g, m in zip(w[start:end].reshape(128, 8), keep[start:end].reshape(128, 8), strict=True):
                    ns, nc = _neumaier(cs, cc, g)
                    cs, cc = np.where(m, ns, cs), np.where(m, nc, cc)  # a lane the mask drops adds nothing
            else:
                for lane in range(max(start, lo), end):
                    if keep[lane]:
                        s, c = _neumaier(s, c, w[lane])
            for k in range(8):
                s, c2 = _neumaier(s, c, cs[k])
                c = c2 + cc[k]
        ts, tc2 = _neumaier(ts, tc, s)
        tc = tc2 + c
    with np.errstate(invalid="ignore"):
        return float(ts + tc), float(np.count_nonzero(keep[bounds[0][0]:bounds[-1][1]]))


def _comp_data(n: int, dtype) -> list[np.ndarray]:
    """Terms whose compensated sum depends on the order of its steps (huge terms that nearly cancel: the
    corrections' own roundings show), and with an inf, and with both infinities."""
    rng = np.random.default_rng(n)
    big = rng.standard_normal(n // 2) * 10.0 ** rng.integers(10, 30, n // 2)
    x = np.concatenate([big, -big * (1 + 2.0 ** -40), rng.standard_normal(n - 2 * (n // 2))])
    x = x[rng.permutation(n)].astype(dtype)
    out = [x, (rng.standard_normal(n) + 0.25).astype(dtype)]
    if n > 40:
        inf = x.copy()
        inf[n // 3] = np.inf
        both = inf.copy()
        both[n - 5] = -np.inf
        out += [inf, both]
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n, base", [(1000, 0), (4096, 0), (5 * 1024 + 77, 0), (9000, 1024), (9000, 1500),
                                     (20_000, 3)])
def test_compensated_sum_bits(n, base, dtype):
    """Sums and means with policy="compensated" give the bits of the blocked loop step by step (full blocks in
    eight chains, blocks cut by a chunk or by base=/count= lane by lane), on one chunk and on several, with
    terms whose compensated sum depends on that order, and with infinities."""
    for x in _comp_data(n, dtype):
        count = n - base - 7
        for threads, min_chunk in ((1, None), (2, 37)):
            for kernel in (comp_sum, comp_mean):
                plan = eagle.deploy(kernel, threads=threads, min_chunk=min_chunk)
                b = plan.binder.bind({"x": x})
                _, launcher = plan.prepare(b.spec, 0)
                bounds = launcher.chunk_bounds(b, base, base + count)
                keep = np.ones(n, bool) if kernel is comp_sum else x > 0.0
                total, kept = _compensated_model(x, keep, bounds)
                got = np.asarray(plan.run(x=x, base=base, count=count))
                want = np.asarray([total], dtype=np.float64).astype(dtype)
                if kernel is comp_mean:
                    want = want / np.asarray([kept], dtype=dtype)
                assert got.dtype == dtype
                assert got.tobytes() == want.tobytes(), (kernel.name, threads, len(bounds), got, want)


# ---- a float32 histogram's "auto" counts: whole-number adds into the compensated companion (count_sinks) ---------
@pytest.mark.parametrize("chunks", [False, True])
@pytest.mark.parametrize("kernel", [hist_auto, hist_plain])
def test_histogram_float32_counts_exact(kernel, chunks):
    """float32 counts through m.index: "auto" (compensated: whole-number adds go plainly into the float64
    companion) and "plain" both count exactly; onto a given sink, "auto" rounds prior + count once (fractional
    priors too)."""
    for t in _hist_data(20_000)[:3]:
        with np.errstate(over="ignore"):  # (huge test values become float32 infinities on purpose)
            t = t.astype(np.float32)
        want = _hist(t)
        assert _run(kernel, chunks, t=t).tobytes() == want.astype(np.float32).tobytes()
        prior = np.random.default_rng(3).random(BINS).astype(np.float32) * 1000
        if kernel is hist_plain:  # plain float32 adds round at each add: whole-number priors stay exact
            prior = np.floor(prior)
        plan = eagle.deploy(kernel, threads=2, min_chunk=37) if chunks else eagle.deploy(kernel, threads=1)
        got = np.asarray(plan.run(t=t, counts=prior.copy()))
        assert got.tobytes() == (prior.astype(np.float64) + want).astype(np.float32).tobytes()


@hawk.kernel
def hist_auto_mixed(t: Scalar, w: Scalar, counts: Mutable["bin":BINS]):
    hawk.scatter(counts)[m.index(t * 256.0, BINS)] += 1.0
    hawk.scatter(counts)[m.index(t * 256.0, BINS)] += w


def test_histogram_float32_auto_mixed_adds_stay_compensated():
    """A sink that also takes non-constant adds keeps Neumaier's steps: within the compensated bound."""
    rng = np.random.default_rng(6)
    t, w = rng.random(30_000).astype(np.float32), (rng.standard_normal(30_000) * 1e6).astype(np.float32)
    got = np.asarray(_run(hist_auto_mixed, True, t=t, w=w), dtype=np.float64)
    want = _hist(t) + _hist(t, w.astype(np.float64))
    scale = _hist(t) + _hist(t, np.abs(w.astype(np.float64)))
    assert np.all(np.abs(got - want) <= 2 * np.finfo(np.float32).eps * scale)


@needs_avx2
def test_histogram_float32_auto_keys_loop_is_packed():
    """The float32 "auto" histogram runs the two-pass form: its keys in a packed loop (fused with the adds into
    the companion, each lane called libm's floorf)."""
    body = _vector_body(_lanes_asm(hist_auto, "hist_auto", dtype="float32"))
    assert re.search(r"vroundps\s+\$9, %[xyz]mm", body), body


# ---- chunks of a stage that runs no blocks: on its kept spans only (eagle.launch._blocked) -----------------------
ROW = 1000


@hawk.kernel
def row_total(g: Grid["row", "col":ROW], x: Scalar) -> Scalar:
    return hawk.sum(x, over="col")


@hawk.kernel
def row_softmax(g: Grid["row", "col":ROW], x: Scalar) -> Scalar:
    ex = m.exp(x - hawk.max(x, over="col"))
    return ex / hawk.sum(ex, over="col")


@pytest.mark.parametrize("kernel", [row_total, row_softmax])
def test_row_kernels_split_on_rows(kernel):
    """Rows of 1000 lanes split into chunks of whole rows (not of lcm(1000, 1024) lanes, which made 37 rows one
    chunk), with the bits of one chunk: each row's total is folded by one chunk."""
    x = np.random.default_rng(7).standard_normal((37, ROW))
    one = eagle.deploy(kernel, threads=1)
    want = np.asarray(one.run(x=x))
    many = eagle.deploy(kernel, threads=2, min_chunk=37)
    got = np.asarray(many.run(x=x))
    assert many.last_chunks[0] > 1
    assert got.tobytes() == want.tobytes()
    ref = x.sum(axis=1) if kernel is row_total else np.exp(x - x.max(1, keepdims=True)) / \
        np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)
    np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_block_totals_are_read_once_per_row():
    """A block total read in a loop over one row of its slot (the column shape's rows, a slot's fold) is one
    load per row (block.py lower_block_reduce, Lowering.lane_row), not a division and a load per lane: the
    softmax's exp(x - top) and its division by the row's sum then run packed, with no gather (2.5 to 3 times
    faster on one thread on an AVX-512 host). Checked on the lowered IR: every load of a tile's totals buffer
    (memref<4xf64>: a 4000-lane tile of 1000-lane slots) takes an index made outside its innermost loop."""
    from mlir import ir

    from hawk.ir.dialect import new_context

    text = row_softmax.mlir(after="lower-host-lanes")
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        loads = []

        def visit(op):
            if op.name == "memref.load" and str(op.operands[0].type) == "memref<4xf64>":
                loads.append(op)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
        assert len(loads) >= 3  # the fold's read of the max, the body's reads of the max and the sum
        for load in loads:
            inner = load.block  # (the innermost loop's body, or an if's inside it)
            while inner.owner.operation.name != "scf.for":
                inner = inner.owner.operation.block
            lane = inner.arguments[0]  # the innermost loop's induction variable
            stack = [load.operands[1]]
            while stack:  # the index's definition, back to values made outside that loop
                v = stack.pop()
                assert v != lane, f"a block total's index is made from the lane: {load}"
                if not isinstance(v.owner, ir.Block):
                    stack.extend(v.owner.operation.operands)
