"""Choosing a target: names, options, 'auto', and what a missing runtime says."""

from __future__ import annotations

import numpy as np
import pytest

import eagle
import hawk
from eagle.targets import TARGETS, gpu_target
from hawk import Mutable, Scalar


@hawk.kernel
def tg_total(x: Scalar, t: Mutable[Scalar]):
    t = hawk.sum(x, policy="ordered")


def _gpu_present(name: str) -> bool:
    try:
        gpu_target(name).runtime()
        return True
    except Exception:
        return False


def test_auto_picks_a_gpu_with_a_runtime_else_the_host():
    plan = eagle.deploy(tg_total, target="auto")
    if not (_gpu_present("nvvm") or _gpu_present("rocdl")):
        # lavapipe (a CPU Vulkan device) is never preferred to the host
        assert plan.target in ("host", "spirv")
    x = np.random.default_rng(70).normal(size=3001)
    host = eagle.deploy(tg_total).run(x=x)
    np.testing.assert_array_equal(np.asarray(plan.run(x=x)), np.asarray(host))


def test_unknown_target_lists_the_known_ones():
    with pytest.raises(ValueError) as info:
        eagle.deploy(tg_total, target="tpu")
    for name in TARGETS:
        assert name in str(info.value)


def test_target_options_are_checked():
    with pytest.raises(ValueError, match="takes no options"):
        eagle.deploy(tg_total, target="host", chip="sm_90")
    with pytest.raises(ValueError, match="sm_1"):
        eagle.deploy(tg_total, target="nvvm", chip="sm_1")
    with pytest.raises(ValueError, match="gfx"):
        eagle.deploy(tg_total, target="rocdl", chip="gfx1")


def test_cpu_is_the_host():
    assert eagle.deploy(tg_total, target="cpu").target == "host"


@pytest.mark.parametrize("target", ["nvvm", "rocdl"])
def test_a_missing_gpu_runtime_is_named_after_compiling(target):
    if _gpu_present(target):
        pytest.skip(f"a {target} device is present here: the run succeeds instead")
    with pytest.raises(eagle.RuntimeMissing) as info:
        eagle.deploy(tg_total, target=target).run(x=np.ones(10))
    text = str(info.value)
    assert f"target '{target}' compiled" in text and ("NVIDIA" in text or "ROCm" in text)
