"""Ordered sums over every lane whose blocks the CPU's inexact flag proves exact (x86-64: with AVX-512F's silent
adds, or, with AVX and FMA, float64 terms cut on a grid: hawk/passes/lower/flag_chains.py, docs/ordered.md).

Which stages take the flag (a body that rounds nothing, only ordered sums kept in chains), what the lowering
emits for them, and that their results are the exact sums, rounded once, bit for bit as under the range check
(conftest's chain_check runs each): data that keep every block on the fast route, data that send blocks to the
retry (a wide spread, one huge term, magnitudes that jump between blocks), special values, subnormals, float32
and float64, split over several threads.
"""

import dataclasses
import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import bt_host_asm, bt_ordered_sum
from exact_families import FAMILIES, assert_exact, same_bits, split_runs

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Scalar, Vector
from hawk.abi import cache
from hawk.abi.layout import ORDERED_BLOCK

N = 5 * ORDERED_BLOCK + 77  # blocks cut by small chunks, a partial last group


@hawk.kernel
def fc_sum(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="ordered")


@hawk.kernel
def fc_masked_mean(x: Scalar, w: Scalar) -> Scalar:
    return hawk.mean(m.abs(x), where=w > 0.0, policy="ordered") + hawk.sum(-x, policy="ordered")


@hawk.kernel
def fc_vector(v: Vector[3]) -> Vector[3]:
    return hawk.sum(v, policy="ordered")


@hawk.kernel
def fc_gather(x: Scalar, src: Index) -> Scalar:
    return hawk.sum(x.at(src), policy="ordered")  # (a neighbour's read: the block's terms first, in a loop)


@hawk.kernel
def fc_component(v: Vector[3]) -> Scalar:
    return hawk.sum(-v[2], where=v[0] > v[1], policy="ordered")


@hawk.kernel
def fc_product(x: Scalar, w: Scalar) -> Scalar:
    return hawk.sum(x * w, policy="ordered")


@hawk.kernel
def fc_beside_auto(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="ordered") + hawk.sum(x)


@hawk.kernel
def fc_beside_scatter(key: Index, x: Scalar, acc: Mutable["slot":8]) -> Scalar:
    hawk.scatter(acc, policy="ordered")[key] += x
    return hawk.sum(x, policy="ordered")


@hawk.kernel
def fc_with_store(x: Scalar, y: Mutable[Scalar]) -> Scalar:
    y = x  # noqa: F841
    return hawk.sum(x, policy="ordered")


def _lowered(kernel, dtype: str, sae: bool, mxcsr: bool = False) -> str:
    spec = dataclasses.replace(kernel.spec_for(dtype, {}), sae=sae, mxcsr=mxcsr)
    return kernel.lowered(spec).llvm_ir


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kernel, flagged", [(fc_sum, True), (fc_masked_mean, True), (fc_vector, True),
                                             (fc_gather, True), (fc_component, True),
                                             (fc_product, False), (fc_beside_auto, False), (fc_beside_scatter, False),
                                             (fc_with_store, False)])
def test_which_stages_check_the_flag(kernel, flagged, dtype):
    text = _lowered(kernel, dtype, sae=True)
    assert ("stmxcsr" in text) == flagged, kernel.name
    assert ("llvm.x86.avx512.add.pd.512" in text) == flagged, kernel.name  # (the silent adds)
    grid = _lowered(kernel, dtype, sae=False, mxcsr=True)  # x86-64 without AVX-512F: float64 terms on a grid
    assert ("stmxcsr" in grid) == flagged and "avx512" not in grid, kernel.name
    assert ("llvm.intr.roundeven" in grid) == (flagged and dtype == "float64"), kernel.name
    plain = _lowered(kernel, dtype, sae=False)  # not x86-64: the range check, never the flag
    assert "stmxcsr" not in plain and "avx512" not in plain and "roundeven" not in plain


def test_host_plans_say_whether_the_cpu_has_the_silent_adds(monkeypatch):
    plan = eagle.deploy(fc_sum)
    assert plan.binder.sae == cache.sae_host() and plan.binder.mxcsr == cache.mxcsr_host()
    monkeypatch.setenv("HAWK_NO_SILENT_ADDS", "1")
    assert not cache.sae_host() and not eagle.deploy(fc_sum).binder.sae
    assert eagle.deploy(fc_sum).binder.mxcsr == (cache.machine() == "x86_64" and cache.mxcsr_host())
    monkeypatch.setenv("HAWK_NO_SAE", "1")
    assert not cache.mxcsr_host() and not eagle.deploy(fc_sum).binder.mxcsr


def test_which_cpus_cut_terms_on_a_grid(monkeypatch):
    if cache.machine() != "x86_64":
        assert not cache.mxcsr_host("+avx,+fma")
        return
    monkeypatch.delenv("HAWK_NO_SAE", raising=False)
    assert cache.mxcsr_host("+avx,+avx2,+fma,-avx512f") and cache.mxcsr_host("+avx,+fma,+avx512f")
    assert not cache.mxcsr_host("+avx,-fma") and not cache.mxcsr_host("+sse4.1,-avx")


@pytest.mark.skipif(cache.machine() != "x86_64", reason="the grid's rounding is x86-64's vroundpd")
def test_the_grid_rounds_without_raising_the_flag():
    # the step's one rounding (roundeven) must raise no flag, or every block would retry: x86 rounds with its
    # inexact exception suppressed (the immediate's bit 3: vroundpd $8), and never calls libm's roundeven
    spec = dataclasses.replace(fc_sum.spec_for("float64", {}), mxcsr=True)
    for cpu in ("x86-64-v3", "znver3"):
        asm = bt_host_asm(fc_sum.lowered(spec).llvm_ir, cpu)
        assert "vroundpd\t$8, %ymm" in asm and "roundeven" not in asm and "stmxcsr" in asm, cpu


def _jumps(n, dtype, rng):
    """Blocks whose magnitudes jump by 2**40 up and down: every other block's guess is wrong."""
    scale = np.repeat(2.0 ** (40 * (np.arange(n // ORDERED_BLOCK + 1) % 3)), ORDERED_BLOCK)[:n]
    return (rng.standard_normal(n) * scale).astype(dtype)


def _one_huge(n, dtype, rng):
    """Normal data with one huge term (and its negation) in the third block: one retry, then the fast route."""
    x = rng.standard_normal(n).astype(dtype)
    big = 1e300 if dtype == np.float64 else 1e37
    x[2 * ORDERED_BLOCK + 5], x[2 * ORDERED_BLOCK + 700] = big, -big
    return x


DATA = {"normal": lambda n, dt, rng: rng.standard_normal(n).astype(dt),
        "integers": lambda n, dt, rng: rng.integers(-9, 9, n).astype(dt),
        "spread": lambda n, dt, rng: (rng.standard_normal(n) * 10.0 ** rng.uniform(-30, 30, n)).astype(dt),
        "jumps": _jumps, "one_huge": _one_huge}


DATA.update({f: FAMILIES[f] for f in ("kahan", "span", "subnormal", "negzeros", "overflow", "beyond", "tie_odd",
                                       "trap")})  # (exact_families' adversaries)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("data", sorted(DATA))
def test_sums_are_exact_on_either_check_at_every_split(chain_check, data, dtype):
    rng = np.random.default_rng([47_000, sorted(DATA).index(data), int(dtype == np.float32)])
    x = DATA[data](N, dtype, rng)
    for threads, out in split_runs(fc_sum, "host", x=x):
        assert_exact(out, x, dtype, f"{data} {chain_check} threads={threads}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_special_values_in_a_block_of_normal_data(chain_check, dtype):
    rng = np.random.default_rng(47_200)
    base = rng.standard_normal(N).astype(dtype)
    top = float(np.finfo(dtype).max)
    for where, values, want in [((3000,), [math.nan], math.nan), ((3000,), [math.inf], math.inf),
                                ((10, 4000), [math.inf, -math.inf], math.nan),
                                ((7, 2000, 4100), [top, top, -top], None)]:
        x = base.copy()
        x[list(where)] = values
        for threads, out in split_runs(fc_sum, "host", x=x, threads=(1, 3)):
            if want is None:
                assert_exact(out, x, dtype, f"{values} {chain_check} threads={threads}")
            else:
                same_bits(np.asarray(out).reshape(-1)[:1], [want], dtype, f"{values} {chain_check}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("flags", ["flags", "grid"])
def test_means_masks_vectors_and_gathers_match_the_range_check(monkeypatch, dtype, flags):
    if flags == "flags" and not cache.sae_host():
        pytest.skip("the inexact-flag chains with silent adds need an x86-64 CPU with AVX-512F; this one has none")
    if flags == "grid":
        monkeypatch.setenv("HAWK_NO_SILENT_ADDS", "1")
        if not cache.mxcsr_host():
            pytest.skip("the inexact-flag chains on a grid need an x86-64 CPU with AVX and FMA; this one has none")
    rng = np.random.default_rng(47_300)
    x = (rng.standard_normal(N) * 10.0 ** rng.integers(-8, 8, N)).astype(dtype)
    w = rng.standard_normal(N).astype(dtype)
    src = rng.integers(0, N, N).astype(np.int32)
    v = (rng.standard_normal((3, N)) * [[1.0], [1e-20], [1e20]]).astype(dtype)  # (payload first)
    runs = {}
    for mode in ("flags", "range"):
        if mode == "range":
            monkeypatch.setenv("HAWK_NO_SAE", "1")
        a = eagle.deploy(fc_masked_mean, threads=2, min_chunk=1024)
        b = eagle.deploy(fc_vector, threads=2, min_chunk=1024)
        c = eagle.deploy(fc_gather, threads=2, min_chunk=1024)
        d = eagle.deploy(fc_component, threads=2, min_chunk=1024)
        runs[mode] = (np.asarray(a.run(x=x, w=w)), np.asarray(b.run(v=v)), np.asarray(c.run(x=x, src=src)),
                      np.asarray(d.run(v=v)))
        assert all(max(p.last_chunks) > 1 for p in (a, b, c, d))
    for got, want in zip(runs["flags"], runs["range"], strict=True):
        same_bits(got, want, dtype, "flags against range")
    for c in range(3):
        assert_exact(runs["flags"][1][c:c + 1], v[c], dtype, f"component {c}")
    assert_exact(runs["flags"][2], x[src], dtype, "gathered")
    assert_exact(runs["flags"][3], -v[2], dtype, "one component, masked", mask=v[0] > v[1])


# ---- rows: ordered sums over the trailing axes (the nested driver's chains, nested_chains.py) ----------------

def _rows_kernel(cols: int):
    @hawk.kernel
    def fc_rows(g: Grid["r", "c":cols], x: Scalar) -> Scalar:
        return hawk.sum(x, over="c", policy="ordered")

    return fc_rows


ROWS = {cols: _rows_kernel(cols) for cols in (64, 1000, 1016, 1040, 2603)}  # (groups of 32 leave 0-24 + 0-7)


@hawk.kernel
def fc_row_mean(g: Grid["r", "c":200], x: Scalar, v: Vector[2], avg: Mutable[Scalar], tot: Mutable[Vector[2]]):
    avg = hawk.mean(m.abs(x), over="c", where=x < 1.0, policy="ordered")  # noqa: F841
    tot = hawk.sum(v, over="c", policy="ordered")  # noqa: F841


@hawk.kernel
def fc_row_product(g: Grid["r", "c":200], x: Scalar) -> Scalar:
    return hawk.sum(x * x, over="c", policy="ordered")


@hawk.kernel
def fc_short_rows(g: Grid["r", "c":16], x: Scalar) -> Scalar:
    return hawk.sum(x, over="c", policy="ordered")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kernel, flagged", [(ROWS[1000], True), (fc_row_mean, True), (fc_row_product, False),
                                             (fc_short_rows, False)])
def test_which_row_stages_check_the_flag(kernel, flagged, dtype):
    assert ("stmxcsr" in _lowered(kernel, dtype, sae=True)) == flagged, kernel.name
    grid = _lowered(kernel, dtype, sae=False, mxcsr=True)
    assert ("stmxcsr" in grid) == flagged and "avx512" not in grid, kernel.name
    assert ("llvm.intr.roundeven" in grid) == (flagged and dtype == "float64"), kernel.name
    assert "stmxcsr" not in _lowered(kernel, dtype, sae=False)


def _rows_want(x, dtype):
    return np.array([bt_ordered_sum(r, dtype) for r in x.reshape(x.shape[0], -1)], dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("cols", sorted(ROWS))
def test_rows_are_exact_on_either_check_at_every_split(chain_check, cols, dtype):
    rng = np.random.default_rng([47_400, cols, int(dtype == np.float32)])
    rows = 24
    d = 20 if dtype == np.float64 else 12
    x = rng.standard_normal((rows, cols)) * 10.0 ** rng.integers(-d, d, (rows, 1))  # (guesses off row to row)
    x[3] *= 10.0 ** rng.integers(-d, d, cols)  # a row spread over many binades: its blocks retry
    for row, at, value in [(5, slice(cols // 2, None), 0.0), (6, slice(None), -0.0), (7, cols - 1, np.inf),
                           (8, [1, cols - 3], [np.inf, -np.inf]), (9, cols // 3, np.nan)]:
        x[row, at] = value
    x = x.astype(dtype)
    want = _rows_want(x, dtype)
    for threads, out in split_runs(ROWS[cols], "host", threads=[1, 2, 3], min_chunk=cols * 5 // 2, x=x):
        same_bits(out, want, dtype, f"{cols} columns, {chain_check}, threads={threads}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_means_with_a_mask_and_a_vector_sum(chain_check, dtype):
    rng = np.random.default_rng(47_500)
    x = (rng.standard_normal((30, 200)) * 10.0 ** rng.integers(-9, 9, (30, 200))).astype(dtype)
    v = (rng.standard_normal((2, 30, 200)) * [[[1.0]], [[1e-30]]]).astype(dtype)  # (payload first)
    mask = x < 1.0
    want = np.array([bt_ordered_sum(np.abs(x[i]), dtype, mask[i]) for i in range(30)], dtype=dtype)
    want = (want / mask.sum(axis=1)).astype(dtype)
    for threads, out in split_runs(fc_row_mean, "host", threads=[1, 2], min_chunk=1000, x=x, v=v):
        same_bits(out["avg"], want, dtype, f"masked row means, {chain_check}, threads={threads}")
        for c in range(2):
            same_bits(out[f"tot_{c}"], _rows_want(v[c], dtype), dtype, f"component {c}, {chain_check}")


# ---- columns: ordered sums over the leading axis in tiles (column_tiles.py) ----------------------------------

@hawk.kernel
def fc_columns(g: Grid["r", "c":1003], x: Scalar) -> Scalar:
    return hawk.sum(x, over="r", policy="ordered")


@hawk.kernel
def fc_column_squares(g: Grid["r", "c":1003], x: Scalar) -> Scalar:
    return hawk.sum(x * x, over="r", policy="ordered")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_which_column_stages_check_the_flag(dtype):
    assert "stmxcsr" in _lowered(fc_columns, dtype, sae=True)
    assert "stmxcsr" not in _lowered(fc_columns, dtype, sae=False)
    assert "stmxcsr" not in _lowered(fc_column_squares, dtype, sae=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_columns_are_exact_on_either_check_at_every_split(kept_check, dtype):
    rng = np.random.default_rng(47_600)
    d = 25 if dtype == np.float64 else 12
    x = rng.standard_normal((300, 1003)) * 10.0 ** rng.integers(-d, d, (1, 1003))  # (guesses per column)
    x[:, 7] *= 10.0 ** rng.integers(-d, d, 300)  # a column spread over many binades: its tiles' blocks go again
    x[100:, 500] = x[:100, 500].repeat(2) * 1e10  # a column whose scale jumps between blocks of rows
    x[5, 9], x[200, 40], x[201, 40], x[70, 41] = np.nan, np.inf, -np.inf, np.inf
    x = x.astype(dtype)
    want = np.array([bt_ordered_sum(x[:, j], dtype) for j in range(x.shape[1])], dtype=dtype)
    for threads, out in split_runs(fc_columns, "host", threads=[1, 2, 3], min_chunk=40 * 1003, x=x):
        same_bits(out, want, dtype, f"columns, {kept_check}, threads={threads}")


@hawk.kernel
def fc_columns_64(g: Grid["r", "c":64], x: Scalar) -> Scalar:
    return hawk.sum(x, over="r", policy="ordered")


def test_float32_blocks_whose_sums_pass_float32s_range(chain_check):
    # without a window nothing bounds a float32 block's chain sums: here they (and the 8 a block's 32 fold into,
    # a row's blocks, a column tile's block of 64 rows) pass 2**127 while every total is a float32. The values a
    # block hands on as float32 parts must stay under 2**127 (flag_chains.lost): past it, the parts were infinite
    # and the results NaN.
    i = np.arange(2048)
    big = np.float32(4.7e36)  # (32 of them: about 2**127.1)
    row = np.where((i % 32) % 8 < 4, big, -big).astype(np.float32)  # (chains 0-3 of each 8 up, 4-7 down)
    row[5] = 1.0
    x = np.stack([row, -row, np.roll(row, 3)])
    for threads, out in split_runs(fc_sum, "host", threads=[1, 2], min_chunk=1024, x=row):
        assert_exact(out, row, np.float32, f"a sum, {chain_check}, threads={threads}")
    for threads, out in split_runs(_rows_kernel(2048), "host", threads=[1, 2], min_chunk=2048, x=x):
        same_bits(out, _rows_want(x, np.float32), np.float32, f"rows, {chain_check}, threads={threads}")
    y = np.tile(np.where(np.arange(128) < 64, 3e37, -3e37)[:, None], (1, 64)).astype(np.float32)  # (a block of
    y[0] = 1.0  # 64 rows sums to 2**130.5, the next to minus that)
    want = np.array([bt_ordered_sum(y[:, j], np.float32) for j in range(64)], dtype=np.float32)
    for threads, out in split_runs(fc_columns_64, "host", threads=[1], x=y):
        same_bits(out, want, np.float32, f"columns, {chain_check}, threads={threads}")


def test_artifacts_take_the_flag_only_when_built_for_such_a_cpu(tmp_path):
    # a native build on x86-64 with AVX and FMA reads the flag (Spec.mxcsr, and Spec.sae with AVX-512F, from the
    # build's host_cpu); a portable one, built for the generic x86-64 CPU, must not (its compile could not select
    # the AVX-512 adds, nor round without a call to libm)
    import llvm

    x = np.random.default_rng(47_700).standard_normal(9_001) * 10.0 ** (np.arange(9_001) % 17)
    for cpu in ("native", "portable"):
        d = tmp_path / cpu
        hawk.artifact.build(fc_sum, d, dtypes=("float64",), cpu=cpu)
        out = hawk.run(hawk.load(d, "fc_sum"), x=x)
        assert_exact(np.asarray(out["result"] if isinstance(out, dict) else out), x, np.float64, cpu)
        if cache.machine() != "x86_64":
            continue
        sc = json.loads((d / "fc_sum.json").read_text())
        objdump = Path(llvm.__file__).parent / "bin" / "llvm-objdump"
        text = "".join(subprocess.run([str(objdump), "-d", str(d / b["file"])], capture_output=True, text=True,
                                      check=True).stdout for b in sc["builds"])
        assert ("stmxcsr" in text) == (cpu == "native" and cache.mxcsr_host()), cpu
        assert ("vroundpd" in text or "vrndscalepd" in text) == (cpu == "native" and cache.mxcsr_host()
                                                                and not cache.sae_host()), cpu
