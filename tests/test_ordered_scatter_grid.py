"""Ordered scatters proved exact by MXCSR's flags (hawk/passes/lower/grid_scatters.py, issue #11's cost line on
x86-64 without AVX-512's silent adds): each term is cut on a grid into the slot's (high, low) pair by steps that
raise the inexact flag (or, for an inf, the invalid one) whenever they round, and a chunk whose flags are raised, or
that met a key outside its sink, runs again in the grouped TwoSum form.

The tests here hold the route itself, with the redo switched off (a lowering made in the test, no disk cache):
ordinary data must come out exact from the grid alone on several chunks, and each kind of data the grid cannot
hold (an inf, a term far above the chunk's first block, a low bit under the low's reach, a bad key) must show
that it depended on the redo. Every ordered-scatter test runs both routes with the redo on (conftest's
scatter_route): test_ordered_scatter_paired.py, test_ordered_scatter_f32_pairs.py, test_exact_ordered.py.
"""

import dataclasses

import numpy as np
import pytest
from conftest import bt_host_asm, bt_ordered_scatter
from exact_families import SMALL, f_kahan, f_span, f_subnormal, f_zeros, same_bits

import eagle
import hawk
from hawk import Index, Mutable, Scalar
from hawk.abi import cache
from hawk.passes.lower import grid_scatters
from hawk.passes.lower.scatters import PREFETCH_SLOTS

pytestmark = pytest.mark.skipif(not (cache.mxcsr_host() or cache.sae_host()),
                                reason="ordered scatters on a grid need an x86-64 CPU with AVX and FMA")


@hawk.kernel
def xg_one(key: Index, x: Scalar, acc: Mutable["slot":64]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def xg_computed(key: Index, x: Scalar, acc: Mutable["slot":64]):
    hawk.scatter(acc, policy="ordered")[key - 1] += x


@hawk.kernel
def xg_big(key: Index, x: Scalar, acc: Mutable["slot":PREFETCH_SLOTS]):
    hawk.scatter(acc, policy="ordered")[key] += x  # (its lanes wait on their pairs' misses: the grouped form)


@hawk.kernel
def xg_beside(key: Index, x: Scalar, acc: Mutable["slot":64], raw: Mutable["slot":64]):
    hawk.scatter(acc, policy="ordered")[key] += x
    hawk.scatter(raw, policy="plain")[key] += x  # (a plain sink beside: not this route)


def _lowered(kernel, dtype: str, mxcsr: bool) -> str:
    spec = dataclasses.replace(kernel.spec_for(dtype, {"key": "int64"}), mxcsr=mxcsr)
    return kernel.lowered(spec).llvm_ir


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_only_ordered_scatter_bodies_on_such_a_cpu_take_the_grid(dtype):
    grid = _lowered(xg_one, dtype, mxcsr=True)
    assert "ldmxcsr" in grid and "stmxcsr" in grid and "llvm.intr.roundeven" in grid
    assert "llvm.intr.roundeven" not in _lowered(xg_one, dtype, mxcsr=False)  # (not x86-64: the pairs)
    assert "llvm.intr.roundeven" not in _lowered(xg_beside, dtype, mxcsr=True)
    assert "llvm.intr.roundeven" not in _lowered(xg_big, dtype, mxcsr=True)


def test_the_grid_rounds_without_raising_the_flag():
    # the cut's one rounding (roundeven) must raise no flag, or every chunk would run again: x86 rounds with its
    # inexact exception suppressed (the immediate's bit 3), and never calls libm's roundeven
    for cpu in ("x86-64-v3", "znver3"):
        asm = bt_host_asm(_lowered(xg_one, "float64", True), cpu)
        assert "vroundpd\t$8, %ymm" in asm and "vroundsd\t$8" in asm and "roundeven" not in asm, cpu
        assert "ldmxcsr" in asm and "stmxcsr" in asm, cpu


@pytest.fixture
def no_redo(monkeypatch):
    """A call patches the lowering: from then on the redo is replaced by zeroing the chunk's pairs (and the disk
    cache is skipped), and it returns a maker of fresh kernels, so that a kernel made in the test shows what the
    grid alone leaves in the pairs, and a chunk that asked for the redo shows as zeros."""

    def patch():
        monkeypatch.setenv("HAWK_CACHE_DIR", "")
        monkeypatch.delenv("HAWK_NO_SAE", raising=False)
        monkeypatch.setattr(grid_scatters, "redo", lambda cx, body, sinks: [grid_scatters._zero_pairs(cx, s)
                                                                            for s in dict.fromkeys(sinks)])

        def make():
            @hawk.kernel
            def xg_fresh(key: Index, x: Scalar, acc: Mutable["slot":64]):
                hawk.scatter(acc, policy="ordered")[key - 1] += x  # (a computed key: checked as the lanes run)

            return xg_fresh

        return make

    return patch


def _run(kernel, key, x, dtype, threads=2):
    plan = eagle.deploy(kernel, threads=threads, min_chunk=1024)
    out = np.asarray(plan.run(key=key + (kernel is not xg_one), x=x))
    if threads > 1:
        assert max(plan.last_chunks) > 1, plan.last_chunks
    return out, bt_ordered_scatter(np.zeros(64, dtype), key, x, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ordinary_data_is_exact_on_the_grid_alone(no_redo, dtype):
    make = no_redo()
    rng = np.random.default_rng([51_001, int(dtype == np.float32)])
    n = 20_000
    key = rng.integers(-1, 64, n)  # (keys of -1 add nothing)
    masked = rng.standard_normal(n)
    masked[key == -1] = rng.choice([np.inf, -np.inf, np.nan, 1e300 if dtype == np.float64 else 3e38], n)[key == -1]
    for what, x in [("normal", rng.standard_normal(n)), ("lognormal", rng.lognormal(0.0, 2.0, n)),
                    ("specials behind keys of -1", masked),
                    ("signed spread", rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)),
                    ("counts", np.ones(n)), ("ramp", np.arange(n, dtype=np.float64))]:
        got, want = _run(make(), key, x.astype(dtype), dtype)
        same_bits(got, want, dtype, f"{what}: the grid alone")


@hawk.kernel
def xg_prep(key: Index, x: Scalar, acc: Mutable["slot":5]):
    hawk.scatter(acc, policy="ordered")[key] += x


def test_flags_an_earlier_launch_left_set_do_not_count(no_redo):
    # the threads that run chunks keep MXCSR from launch to launch: a chunk must not read the invalid flag an
    # earlier launch left set (here one whose adversarial terms went to the redo, whose spills of huge, tiny and
    # special terms into the accumulators raise it) as its own
    rng = np.random.default_rng(51_003)
    n = 6 * 1024 + 3
    key = rng.integers(0, 5, n)
    q = n // 4
    x = np.concatenate([f_kahan(q, np.float64, rng), f_span(q, np.float64, rng),
                        f_subnormal(q, np.float64, rng), f_zeros(n - 3 * q, np.float64, rng)])
    x[rng.choice(np.flatnonzero(key == 3), 2, replace=False)] = np.inf
    prep = {t: eagle.deploy(xg_prep, threads=t, min_chunk=SMALL) for t in (1, 2, 4)}  # (before the patch)
    for plan in prep.values():
        plan.run(key=key, x=x, acc=np.zeros(5))
    kernel = no_redo()()
    key, x = rng.integers(0, 64, 20_000), rng.standard_normal(20_000)
    for threads in (1, 2, 4):
        prep[threads].run(key=key % 5, x=np.where(key == 3, np.nan, x * 1e300), acc=np.zeros(5))
        got, want = _run(kernel, key, x, np.float64, threads=threads)
        same_bits(got, want, np.float64, f"threads={threads}")


def test_what_the_grid_cannot_hold_needs_the_redo(no_redo):
    kernel = no_redo()()
    n = 4096
    key = np.zeros(n, np.int64)
    cases = {}
    x = np.ones(n)
    x[3000] = np.inf  # (x - r * 2**g is inf - inf: the invalid flag)
    cases["inf"] = x
    x = np.ones(n)
    x[3000], x[3500] = 2.0 ** 80, -(2.0 ** 80)  # (past the grid of the first block: 4096 + 2**80 rounds)
    cases["growth"] = x
    x = np.ones(n)
    x[1000:1000 + grid_scatters.LATE + 1] = 2.0 ** -300  # (more tiny terms than a chunk may put off)
    cases["a full list"] = x
    for what, x in cases.items():
        got, want = _run(kernel, key, x, np.float64, threads=1)
        assert got[0] != want[0] and not (np.isnan(got[0]) and np.isnan(want[0])), what
        same_bits(got[1:], want[1:], np.float64, what)
    key[100] = 64  # (outside the sink: reported only by the redo)
    out = eagle.deploy(kernel, threads=1).run(key=key + 1, x=np.ones(n))
    assert float(np.asarray(out)[0]) == 0.0


def test_tiny_terms_put_off_are_exact_without_the_redo(no_redo):
    kernel = no_redo()()
    n = 4096
    key = np.arange(n) % 4
    x = np.zeros(n)
    x[0], x[4], x[3000] = 1.0, 2.0 ** -53, 2.0 ** -300  # (a tie the tiny term breaks: to the accumulator)
    x[1], x[2001] = 3.0, 2.0 ** -1070  # (a subnormal)
    x[2], x[6], x[2002] = 1.0, 1.0, 2.0 ** -40
    x[3:1000:4] = 1.0 + 2.0 ** -52  # (lows on the grid)
    x[3001:4000:4] = 2.0 ** -200
    got, want = _run(kernel, key, x, np.float64, threads=1)
    same_bits(got, want, np.float64, "late terms")
    assert got[0] == 1.0 + 2.0 ** -52


def test_with_the_redo_those_cases_are_exact():
    n = 4096
    key = np.zeros(n, np.int64)
    for x in ([np.inf], [2.0 ** 80, -(2.0 ** 80)], [2.0 ** -300] * (grid_scatters.LATE + 1)):
        terms = np.ones(n)
        terms[1000:1000 + len(x)] = x
        got, want = _run(xg_one, key, terms, np.float64, threads=1)
        same_bits(got, want, np.float64, f"redo {x}")
    key[100], key[200] = 64, 70  # (the first bad lane's key is reported, as lane by lane)
    acc = np.arange(64, dtype=np.float64)
    for threads in (1, 2):
        with pytest.raises(eagle.InputError, match=r"2 lane\(s\) .*first bad key: 64\)"):
            eagle.deploy(xg_computed, threads=threads, min_chunk=1024).run(key=key + 1, x=np.ones(n), acc=acc)
        assert np.array_equal(acc, np.arange(64)), "a refused run left the passed sink changed"
