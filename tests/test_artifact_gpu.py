"""Artifacts for GPU targets: a device binary and a host finish library per (stage, dtype, target), listed in the
sidecar and checked on load; running them without a GPU says which runtime is missing; loading needs no MLIR."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import eagle
import hawk
import hawk.artifact
from hawk import Mutable, Scalar
from hawk.abi.artifact.format import describe
from hawk.artifact import ArtifactError

ROOT = Path(__file__).resolve().parent.parent


@hawk.kernel
def ag_energy(x: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(x * x)


@hawk.kernel
def ag_share(x: Scalar, z: Mutable[Scalar]):
    z = x / hawk.sum(x)  # two stages


@pytest.fixture(scope="module")
def gpu_bundle(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpu_artifacts")
    hawk.artifact.build_bundle([ag_energy, ag_share], d, targets=("host", "nvvm", "rocdl"),
                               dtypes=("float64", "float32"), chips={"rocdl": "gfx1100"})
    return d


def test_sidecar_lists_a_device_binary_and_a_finish_per_gpu_build(gpu_bundle):
    sc = json.loads((gpu_bundle / "ag_share.json").read_text())
    assert sc["targets"] == ["host", "nvvm", "rocdl"]
    builds = {(b["stage"], b["dtype"], b["target"]): b for b in sc["builds"]}
    assert len(builds) == 2 * 2 * 3
    for (stage, dtype, target), b in builds.items():
        assert (gpu_bundle / b["file"]).is_file()
        if target == "host":
            assert "device" not in b and b["file"] == f"ag_share.{stage}.{dtype}.host.so"
            continue
        dev = b["device"]
        assert b["file"] == f"ag_share.{stage}.{dtype}.{target}{'.ptx' if target == 'nvvm' else '.hsaco'}"
        assert dev["finish"] == f"ag_share.{stage}.{dtype}.{target}.finish.so"
        assert dev["entry"] == f"{stage}_lanes"
        assert dev["chip"] == {"nvvm": "sm_80", "rocdl": "gfx1100"}[target]
        assert (gpu_bundle / dev["finish"]).read_bytes()[:4] == b"\x7fELF"
    ptx = (gpu_bundle / builds[("ag_share", "float64", "nvvm")]["file"]).read_text()
    assert ".entry ag_share_lanes" in ptx
    hsaco = (gpu_bundle / builds[("ag_share_2", "float32", "rocdl")]["file"]).read_bytes()
    assert hsaco[:4] == b"\x7fELF"
    text = describe(sc)
    assert "ag_share.ag_share.float64.nvvm.ptx" in text and "(sm_80)" in text and "(gfx1100)" in text
    assert "ag_share.ag_share_2.float32.rocdl.finish.so" in text


def test_host_build_of_the_same_bundle_still_runs(gpu_bundle):
    x = np.random.default_rng(3).normal(size=5000)
    got = hawk.run(hawk.load(gpu_bundle, "ag_share"), x=x)
    want = eagle.deploy(ag_share).run(x=x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)


@pytest.mark.parametrize("target, words", [("nvvm", "NVIDIA"), ("rocdl", "no ROCm runtime")])
def test_running_a_gpu_build_without_its_runtime_says_which(gpu_bundle, target, words):
    loaded = hawk.load(gpu_bundle, "ag_energy", target=target)  # loading needs no device
    try:
        loaded.runtime()
    except eagle.RuntimeMissing:
        pass
    else:
        pytest.skip(f"this machine has a {target} runtime and device: the no-runtime path cannot be seen")
    with pytest.raises(eagle.RuntimeMissing, match=words):
        hawk.run(loaded, x=np.ones(10))


def test_a_changed_finish_library_is_refused(gpu_bundle, tmp_path):
    d = tmp_path / "copy"
    shutil.copytree(gpu_bundle, d)
    fin = d / "ag_energy.ag_energy.float64.nvvm.finish.so"
    fin.write_bytes(fin.read_bytes() + b"\0")
    with pytest.raises(ArtifactError, match="ag_energy.ag_energy.float64.nvvm.finish.so' does not match"):
        hawk.load(d, "ag_energy", target="nvvm")
    fin.unlink()
    with pytest.raises(ArtifactError, match="finish.so' \\(the host finish of stage ag_energy.*is missing"):
        hawk.load(d, "ag_energy", target="host")


def _rewrite(d: Path, name: str, change) -> None:
    from hawk.abi.artifact.format import content_hash

    p = d / f"{name}.json"
    sc = json.loads(p.read_text())
    change(sc)
    sc["content_hash"] = content_hash(sc)
    p.write_text(json.dumps(sc))


def test_sidecar_device_entries_are_checked(gpu_bundle, tmp_path):
    d = tmp_path / "copy"
    shutil.copytree(gpu_bundle, d)

    def drop(sc):
        del next(b for b in sc["builds"] if b["target"] == "nvvm")["device"]

    _rewrite(d, "ag_energy", drop)
    with pytest.raises(ArtifactError, match="lacks a 'device' entry"):
        hawk.load(d, "ag_energy")

    shutil.rmtree(d)
    shutil.copytree(gpu_bundle, d)

    def host_device(sc):
        host = next(b for b in sc["builds"] if b["target"] == "host")
        host["device"] = dict(next(b for b in sc["builds"] if b["target"] == "nvvm")["device"])

    _rewrite(d, "ag_energy", host_device)
    with pytest.raises(ArtifactError, match="has a 'device' entry"):
        hawk.load(d, "ag_energy")

    shutil.rmtree(d)
    shutil.copytree(gpu_bundle, d)

    def bad_entry(sc):
        next(b for b in sc["builds"] if b["target"] == "rocdl")["device"]["entry"] = "other_lanes"

    _rewrite(d, "ag_energy", bad_entry)
    with pytest.raises(ArtifactError, match="device.entry must be the stage's kernel"):
        hawk.load(d, "ag_energy")

    shutil.rmtree(d)
    shutil.copytree(gpu_bundle, d)

    def escape(sc):
        next(b for b in sc["builds"] if b["target"] == "rocdl")["device"]["finish"] = "../x.so"

    _rewrite(d, "ag_energy", escape)
    with pytest.raises(ArtifactError, match="plain file name"):
        hawk.load(d, "ag_energy")


def test_chips_are_checked(tmp_path):
    with pytest.raises(ValueError, match="chips= names target 'rocdl'"):
        hawk.artifact.build(ag_energy, tmp_path, targets=("host",), chips={"rocdl": "gfx942"})
    with pytest.raises(ValueError, match="rocdl chip 'sm_90' is not known"):
        hawk.artifact.build(ag_energy, tmp_path, targets=("rocdl",), chips={"rocdl": "sm_90"})


NO_MLIR = textwrap.dedent("""
    import importlib.abc, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "mlir" or name.startswith("mlir."):
                raise ImportError("mlir is blocked in this process: " + name)
            return None

    sys.meta_path.insert(0, Block())
    import numpy as np
    import eagle, hawk

    loaded = hawk.load(sys.argv[1], "ag_share", target=sys.argv[2])
    try:
        hawk.run(loaded, x=np.ones(10))
    except eagle.RuntimeMissing as exc:
        print("missing:", exc)
    assert "hawk.compiler" not in sys.modules
    assert not [m for m in sys.modules if m == "mlir" or m.startswith("mlir.")]
""")


def _no_mlir(bundle: Path, target: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", NO_MLIR, str(bundle), target], capture_output=True, text=True,
                          env=env, cwd=str(bundle), timeout=120)


def test_rocdl_artifacts_load_and_reach_the_runtime_without_mlir(gpu_bundle):
    r = _no_mlir(gpu_bundle, "rocdl")
    assert r.returncode == 0, r.stderr
    assert "no ROCm runtime" in r.stdout or r.stdout == ""


def test_nvvm_artifacts_load_and_reach_the_runtime_without_mlir(gpu_bundle):
    r = _no_mlir(gpu_bundle, "nvvm")
    assert r.returncode == 0, r.stderr
    assert "NVIDIA" in r.stdout or r.stdout == ""


def _spirv_runtime():
    """The Vulkan runtime when this checkout has the spirv target and a Vulkan device (lavapipe counts); else why
    not."""
    import importlib.util

    if importlib.util.find_spec("eagle.targets.spirv") is None:
        return None, "this checkout has no eagle.targets.spirv"
    from eagle.targets import gpu_target

    try:
        return gpu_target("spirv").runtime(), None
    except eagle.RuntimeMissing as exc:
        return None, str(exc)


def test_a_device_build_runs_through_its_runtime_like_the_host(tmp_path):
    """The device path of a loaded artifact end to end (device binary + host finish, split stages, both dtypes),
    on the one GPU runtime this machine can run: Vulkan on lavapipe; the host's bits, which the device must give,
    are the same at 1, 2 and 3 threads in small chunks (each run checked to split)."""
    rt, why = _spirv_runtime()
    if rt is None:
        pytest.skip(f"needs the spirv target and a Vulkan device: {why}")
    hawk.artifact.build_bundle([ag_energy, ag_share], tmp_path, targets=("host", "spirv"),
                               dtypes=("float64", "float32"))
    x = np.random.default_rng(11).normal(size=60_013)
    for name in ("ag_energy", "ag_share"):
        for dt in (np.float64, np.float32):
            host = np.asarray(hawk.run(hawk.load(tmp_path, name, threads=1), x=x.astype(dt)))
            for threads in (2, 3):  # small chunks: the host's split must not change a bit
                split = hawk.load(tmp_path, name, threads=threads, min_chunk=1024)
                got = np.asarray(hawk.run(split, x=x.astype(dt)))
                assert min(split.last_chunks) > 1, (name, threads, split.last_chunks)
                assert got.tobytes() == host.tobytes(), f"{name} {dt.__name__}: threads={threads} differs"
            loaded = hawk.load(tmp_path, name, target="spirv")
            dev = np.asarray(hawk.run(loaded, x=x.astype(dt)))
            assert min(loaded.last_chunks) > 1, loaded.last_chunks  # workgroups' partials, combined on the host
            assert dev.dtype == host.dtype and dev.shape == host.shape
            assert dev.tobytes() == host.tobytes(), f"{name} {dt.__name__}: spirv differs from the host"
