"""Compiled code runs with IEEE subnormals and round to nearest, whatever the calling thread's floating-point mode.

XLA's CPU threads flush subnormals to zero (MXCSR's FTZ and DAZ bits), and so does a thread after
`torch.set_flush_denormal(True)`. Kernels ran in the caller's mode, so under `jax.jit` `x * 1.0 + x` of a
subnormal x gave 0 where `Plan.run` gives 2x (found by tests/fuzz_bridges.py: `x % x` of x = 5e-324 gave NaN), and
an exact sum's error-free steps lose their low parts. The native executor now sets the mode for each launch and
for its pool threads, and puts the caller's back (eagle/native/executor.c, fp_ieee)."""

import math
import platform

import numpy as np
import pytest
from conftest import bt_spirv_missing, bt_target_missing

import eagle
import eagle.native
import hawk
from hawk import Mutable, Scalar

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                                reason="torch.set_flush_denormal sets the mode on x86 only")

SUBNORMALS = np.array([5e-324, 1e-310, -3e-320, 2.5e-308, 1.0, -7e-315])


@hawk.kernel
def twice(x: Scalar) -> Scalar:
    return x * 1.0 + x


@hawk.kernel
def exact_total(x: Scalar, total: Mutable[Scalar]) -> Scalar:
    total = hawk.sum(x * 0.5, policy="ordered")
    return x * 0.5


class FlushDenormals:
    """The calling thread flushes subnormals (FTZ and DAZ) while inside."""

    def __enter__(self):
        assert torch.set_flush_denormal(True), "this CPU cannot flush subnormals"
        assert float(torch.tensor([1e-310], dtype=torch.float64) * 1.0) == 0.0  # the mode is on
        return self

    def __exit__(self, *exc):
        torch.set_flush_denormal(False)


def test_plan_run_keeps_subnormals_when_the_caller_flushes_them():
    want = np.asarray(eagle.deploy(twice).run(x=SUBNORMALS)).copy()
    np.testing.assert_array_equal(want, SUBNORMALS * 2.0)
    with FlushDenormals():
        got = np.asarray(eagle.deploy(twice).run(x=SUBNORMALS))
        assert float(torch.tensor([1e-310], dtype=torch.float64) * 1.0) == 0.0  # the caller's mode is back
    assert got.tobytes() == want.tobytes()


def test_an_exact_sum_of_subnormal_halves_split_over_threads():
    rng = np.random.default_rng(8)
    x = rng.choice(SUBNORMALS, size=200_000) * rng.uniform(0.5, 2.0, size=200_000)
    want = math.fsum(v * 0.5 for v in x.tolist())
    plan = eagle.deploy(exact_total, threads=3, min_chunk=4096)
    was = eagle.native.deal_tasks(True)  # every pool thread really runs chunks
    try:
        with FlushDenormals():
            got = plan.run(x=x)
    finally:
        eagle.native.deal_tasks(was)
    assert plan.last_chunks[0] > 3
    assert float(got["total"][0]) == want
    assert np.asarray(got["result"]).tobytes() == (x * 0.5).tobytes()


def test_jax_calls_keep_subnormals():
    jax = pytest.importorskip("jax")
    import eagle.jax

    jax.config.update("jax_enable_x64", True)
    f = eagle.jax.wrap(twice)
    want = np.asarray(eagle.deploy(twice).run(x=SUBNORMALS))
    assert np.asarray(f(x=jax.numpy.asarray(SUBNORMALS))).tobytes() == want.tobytes()
    jitted = jax.jit(lambda x: f(x=x))
    assert np.asarray(jitted(jax.numpy.asarray(SUBNORMALS))).tobytes() == want.tobytes()
    assert float(jax.numpy.asarray(1e-310) * 1.0) == 0.0  # XLA itself still flushes: only eagle's code is IEEE
    g = jax.grad(lambda x: eagle.jax.wrap(exact_total)(x=x)["total"][0])(jax.numpy.asarray(SUBNORMALS))
    np.testing.assert_array_equal(np.asarray(g), np.full(SUBNORMALS.size, 0.5))


def test_a_gpu_stage_finishes_in_ieee_mode():
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    x = np.random.default_rng(9).choice(np.array([5e-324, 1e-312, -3e-320, -7e-315]), size=60)  # a subnormal total
    want = math.fsum(v * 0.5 for v in x.tolist())
    assert 0.0 < abs(want) < 2.2250738585072014e-308
    with FlushDenormals():
        got = eagle.deploy(exact_total, target="spirv").run(x=x)
    assert float(got["total"][0]) == want


@pytest.fixture
def python_path(monkeypatch):
    """Stages launched without the native executor ($EAGLE_NATIVE=0): the Python thread pool calls the code."""
    monkeypatch.setenv("EAGLE_NATIVE", "0")
    monkeypatch.setattr(eagle.native, "_STATE", {})
    assert eagle.native.library() is None


def test_the_python_path_runs_in_ieee_mode_too(python_path):
    """eagle.fpenv.ieee around the Python path's launch and in its pool threads (fegetenv/fesetenv)."""
    with FlushDenormals():
        got = np.asarray(eagle.deploy(twice).run(x=SUBNORMALS))
        assert float(torch.tensor([1e-310], dtype=torch.float64) * 1.0) == 0.0  # the caller's mode is back
    assert got.tobytes() == (SUBNORMALS * 2.0).tobytes()
    rng = np.random.default_rng(10)
    x = rng.choice(SUBNORMALS, size=200_000) * rng.uniform(0.5, 2.0, size=200_000)
    plan = eagle.deploy(exact_total, threads=3, min_chunk=4096)
    with FlushDenormals():
        got = plan.run(x=x)
    assert plan.last_chunks[0] > 3
    assert float(got["total"][0]) == math.fsum(v * 0.5 for v in x.tolist())
    assert np.asarray(got["result"]).tobytes() == (x * 0.5).tobytes()
