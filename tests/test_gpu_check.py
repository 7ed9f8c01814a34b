"""scripts/gpu_check.sh stays working without a GPU: build a small bundle here, run it on the host target with MLIR
blocked (as on the GPU machine), and check what it prints; its NumPy-only input recipe gives fixed bits."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
CASES = "sum_ordered,scatter_ordered,scatter_plain,over_fast_axis,split_share,math,bench_sum_ordered,bench_diffuse"


def _driver():
    spec = importlib.util.spec_from_file_location("gpu_check_driver", ROOT / "scripts" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _sh(*args, timeout=300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHON=sys.executable)
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=str(ROOT), env=env,
                          timeout=timeout)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_check") / "bundle"
    r = _sh("build", "--out", str(out), "--only", CASES, "--bench-lanes", "20000")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out


@pytest.mark.slow
def test_build_writes_a_manifest_inputs_and_expected_results(bundle):
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["targets"] == ["host", "nvvm"]
    ids = [e["id"] for e in manifest["cases"]]
    assert "sum_ordered.float32.n100003" in ids and "bench_diffuse.float64.n20000" in ids
    for e in manifest["cases"]:
        assert (bundle / e["expected"]).is_file()
        assert (e["inputs"] is None) == e["bench"]
    sc = json.loads((bundle / "artifacts" / "gk_share.json").read_text())
    assert sc["targets"] == ["host", "nvvm"] and len(sc["stages"]) == 2
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    assert size < 64 << 20


def test_run_on_the_host_without_mlir_passes_everything_bitwise(bundle):
    r = _sh("run", "--bundle", str(bundle), "--target", "host", "--no-mlir", "--budget", "20")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    n = len(json.loads((bundle / "manifest.json").read_text())["cases"])
    assert lines[-1] == f"{n} passed, 0 failed"
    assert f"{n} bitwise equal to the host" in r.stdout
    assert "skip  device_planes: target host keeps no device arrays" in r.stdout  # (counted nowhere)
    assert any(ln.startswith("ok    bench_diffuse.float64.n20000") and "GB/s" in ln for ln in lines)


def test_run_without_a_gpu_runtime_stops_with_the_reason(bundle):
    r = _sh("run", "--bundle", str(bundle), "--target", "nvvm", "--only", "sum_ordered", "--no-mlir")
    if r.returncode == 0:
        pytest.skip("this machine runs nvvm: the no-runtime path cannot be seen")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "target 'nvvm' compiled, but running it needs" in r.stderr


def test_run_reports_a_wrong_result(bundle, tmp_path):
    import shutil

    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    e = next(e for e in manifest["cases"] if e["id"] == "sum_ordered.float64.n1000")
    want = dict(np.load(copy / e["expected"]))
    want["_"] = np.nextafter(want["_"], np.inf)  # one ulp off: an ordered sum must match bit for bit
    np.savez(copy / e["expected"], **want)
    r = _sh("run", "--bundle", str(copy), "--target", "host", "--only", "sum_ordered", "--budget", "5")
    assert r.returncode == 1
    assert "FAIL  sum_ordered.float64.n1000" in r.stdout and "not bitwise equal" in r.stdout
    assert r.stdout.splitlines()[-1].endswith("passed, 1 failed")


def test_recipe_inputs_have_fixed_bits():
    d = _driver()
    got = d.recipe_inputs({"x": "signed", "key": "keys", "t": "unit"}, 1000, "float64", seed=7)
    assert got["key"].dtype == np.int32 and 0 <= got["key"].min() and got["key"].max() < 1024
    assert np.all((got["t"] >= 0.0) & (got["t"] < 1.0))
    # splitmix64 of 7 + 1: the first value, computed by hand from the published constants
    z = (8 * 0x9E3779B97F4A7C15) % 2**64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2**64
    z ^= z >> 31
    assert int(d._splitmix(1, 7)[0]) == z
    grid = d.recipe_inputs({"u": "signed", "@cols": 10, "rate": 0.5, "last_row": "@rows-1"}, 95, "float32", 1)
    assert grid["u"].shape == (9, 10) and grid["u"].dtype == np.float32
    assert grid["rate"] == 0.5 and grid["last_row"] == 8.0


@pytest.mark.slow
def test_run_on_a_device_runtime_here_when_there_is_one(tmp_path):
    """The run mode through a real device runtime: the spirv target on lavapipe (where this checkout has it)."""
    if importlib.util.find_spec("eagle.targets.spirv") is None:
        pytest.skip("this checkout has no eagle.targets.spirv")
    import eagle
    from eagle.targets import gpu_target

    try:
        gpu_target("spirv").runtime()
    except eagle.RuntimeMissing as exc:
        pytest.skip(f"no Vulkan device here: {exc}")
    out = tmp_path / "spv"
    cases = "sum_ordered,scatter_ordered,histogram,split_standardize,stencil_at,slot_ranges,bench_sum_auto,bench_centre"
    r = _sh("build", "--out", str(out), "--only", cases, "--bench-lanes", "20000", "--targets", "spirv")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = _sh("run", "--bundle", str(out), "--target", "spirv", "--no-mlir", "--budget", "20")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    n = len(json.loads((out / "manifest.json").read_text())["cases"])
    assert r.stdout.splitlines()[-1] == f"{n + 1} passed, 0 failed"  # the cases, then device_planes:
    assert "ok    device_planes  split_standardize.float64" in r.stdout  # planes as device Arrays, none copied
    assert "lane-plane copies: 0" in r.stdout
