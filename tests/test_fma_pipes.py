"""Spec.fma_pipes (AMD Zen: FMAs have pipes of their own beside two adders): the host's compensated chains write
three of each TwoSum's subtractions as fma(y, -1, x), which rounds once, as x - y does (reduce_full.fma_two_sum).
The bits must be those of the plain TwoSums: both forms are held against the NumPy model of the algorithm
(tests/test_compensated_passes.py), on any CPU (a CPU without FMA runs the form slowly, through libm's fma)."""

import dataclasses

import numpy as np
import pytest
from test_compensated_passes import BLOCK, _data, ch_sum, ch_vector, model

import eagle
from hawk.abi import cache


def _run(kernel, fma: bool, **planes):
    plan = eagle.deploy(kernel, threads=1)
    plan.binder.fma_pipes = fma  # (the specs this plan makes from now on)
    out = plan.run(**planes)
    assert plan.last_chunks == (1,), plan.last_chunks
    return out


@pytest.mark.parametrize("fma", [False, True])
@pytest.mark.parametrize("kind", [0, 2, 3])
def test_both_forms_give_the_model_s_bits(fma, kind):
    rng = np.random.default_rng(4_920 + kind)
    for n in (BLOCK + 5, 6 * BLOCK + 700):
        x = _data(rng, n, kind)
        assert float(np.asarray(_run(ch_sum, fma, x=x))[0]) == model(x), (fma, kind, n)
    x = np.array([1e308, 1e308, -np.inf, 1.0] * (BLOCK // 2))  # an overflowing chain, an inf, then a NaN's
    with np.errstate(all="ignore"):  # (inf - inf in the chains: the model says how it ends)
        want = model(x)
    got = float(np.asarray(_run(ch_sum, fma, x=x))[0])
    assert got == want or (np.isnan(got) and np.isnan(want)), (got, want)


def test_vector_components_in_the_fma_form():
    rng = np.random.default_rng(4_925)
    v = np.stack([_data(rng, 4 * BLOCK + 9, k) for k in (3, 0, 3)])
    got = np.asarray(_run(ch_vector, True, v=v)).reshape(-1)
    assert [float(g) for g in got] == [model(c) for c in v]


def test_the_fma_form_is_in_the_ir_only_when_the_spec_says_so():
    base = ch_sum.default_spec()
    with_fma = ch_sum.lowered(dataclasses.replace(base, fma_pipes=True)).llvm_ir
    without = ch_sum.lowered(dataclasses.replace(base, fma_pipes=False)).llvm_ir
    assert with_fma.count("llvm.intr.fma") >= 3 and with_fma.count("llvm.inline_asm") == 1
    assert "llvm.intr.fma" not in without and "llvm.inline_asm" not in without


def test_which_cpus_take_it(monkeypatch):
    if cache.machine() != "x86_64":
        pytest.skip(f"Spec.fma_pipes is for x86-64 CPUs; this is {cache.machine()}")
    monkeypatch.delenv("HAWK_NO_FMA_PIPES", raising=False)
    assert cache.fma_pipes_host("+avx2,+fma,-avx512f", "znver3")
    assert cache.fma_pipes_host("+avx2,+fma,+avx512f", "znver4")
    assert not cache.fma_pipes_host("+avx2,-fma", "znver3")
    assert not cache.fma_pipes_host("+avx2,+fma", "skylake-avx512")
    monkeypatch.setenv("HAWK_NO_FMA_PIPES", "1")
    assert not cache.fma_pipes_host("+avx2,+fma", "znver3")
