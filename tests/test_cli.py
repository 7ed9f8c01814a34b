"""The artifact command line (`python -m hawk.artifact`, console script `hawk-artifact`), run as a subprocess."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pytest

import hawk

ROOT = Path(__file__).resolve().parent.parent

KERNELS = textwrap.dedent("""
    import hawk
    from hawk import Mutable, Scalar


    @hawk.kernel
    def c_energy(x: Scalar, total: Mutable[Scalar]):
        total = hawk.sum(x * x)


    @hawk.kernel
    def c_share(x: Scalar, z: Mutable[Scalar]):
        z = x / hawk.sum(x)


    def helper(x):
        return x
""")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cli")
    (d / "clikernels.py").write_text(KERNELS)
    (d / "pkg" / "deeper").mkdir(parents=True)
    (d / "pkg" / "deeper" / "more.py").write_text(KERNELS)
    (d / "broken.py").write_text("import hawk\nraise RuntimeError('this module does not import')\n")
    return d


def cli(work: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "hawk.artifact", *args], capture_output=True, text=True, cwd=work,
                          env=env, timeout=120)


def refused(r: subprocess.CompletedProcess, *fragments: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("hawk-artifact: error: ")
    for f in fragments:
        assert f in lines[0], lines[0]


def test_help(work):
    r = cli(work, "--help")
    assert r.returncode == 0 and "build" in r.stdout and "show" in r.stdout
    r = cli(work, "build", "--help")
    assert r.returncode == 0
    for word in ("--bundle", "--target", "--dtype", "--out", "module:kernel"):
        assert word in r.stdout
    assert cli(work, "show", "--help").returncode == 0


def test_build_then_load_and_show(work):
    out = work / "out1"
    r = cli(work, "build", "--out", str(out), "--dtype", "float64", "--dtype", "float32", "clikernels:c_energy")
    assert r.returncode == 0, r.stderr
    assert "c_energy" in r.stdout and "content hash" in r.stdout
    sc = json.loads((out / "c_energy.json").read_text())
    assert sc["dtypes"] == ["float64", "float32"] and sc["targets"] == ["host"]
    x = np.random.default_rng(0).normal(size=1000)
    got = hawk.run(hawk.load(out, "c_energy"), x=x)
    np.testing.assert_allclose(np.asarray(got), [(x * x).sum()], rtol=1e-13)
    r = cli(work, "show", str(out), "c_energy")
    assert r.returncode == 0, r.stderr
    assert "kernel c_energy" in r.stdout and "stages:  1" in r.stdout and sc["content_hash"] in r.stdout


def test_build_from_a_file_path_with_bundle(work):
    out = work / "out2"
    r = cli(work, "build", "--bundle", "--target", "host", "--out", str(out), "pkg/deeper/more.py:c_share",
            "pkg/deeper/more.py:c_energy")
    assert r.returncode == 0, r.stderr
    sc = json.loads((out / "c_share.json").read_text())
    assert [(s["kernel"], s["cells_in"], s["cells_out"]) for s in sc["stages"]] == [
        ("c_share", [], ["cut0"]), ("c_share_2", ["cut0"], [])]
    assert (out / "c_energy.json").is_file()
    r = cli(work, "show", str(out), "c_share")
    assert r.returncode == 0 and "cut0 (internal)" in r.stdout


def test_split_kernel_without_bundle_is_refused(work):
    r = cli(work, "build", "--out", str(work / "out3"), "clikernels:c_share")
    refused(r, "'c_share'", "2 stages", "--bundle")
    assert not (work / "out3" / "c_share.json").exists()


@pytest.mark.parametrize("spec,fragments", [
    ("clikernels", ["is not module:kernel"]),
    ("clikernels:", ["is not module:kernel"]),
    (":c_energy", ["is not module:kernel"]),
    ("clikernels:not-a-name", ["is not a Python name"]),
    ("no_such_module_here:k", ["cannot import module 'no_such_module_here'", "ModuleNotFoundError"]),
    ("broken:k", ["cannot import module 'broken'", "this module does not import"]),
    ("missing/file.py:k", ["no such file"]),
    ("clikernels:helper", ["is a function, not a @hawk.kernel"]),
    ("clikernels:nothing", ["has no 'nothing'"]),
])
def test_bad_kernel_specs_are_refused(work, spec, fragments):
    refused(cli(work, "build", "--out", str(work / "never"), spec), *fragments)


def test_unknown_target_is_refused(work):
    refused(cli(work, "build", "--target", "cuda", "--out", str(work / "never"), "clikernels:c_energy"),
            "unknown target 'cuda'", "['host', 'nvvm', 'rocdl'")


def test_show_refuses_a_tampered_artifact(work, tmp_path):
    out = tmp_path / "t"
    assert cli(work, "build", "--out", str(out), "clikernels:c_energy").returncode == 0
    refused(cli(work, "show", str(out), "nope"), "no sidecar for kernel 'nope'")
    sc = json.loads((out / "c_energy.json").read_text())
    sc["format_version"] = 99
    (out / "c_energy.json").write_text(json.dumps(sc))
    refused(cli(work, "show", str(out), "c_energy"), "format version 99")


@pytest.mark.parametrize("case,fragments", [
    ("a-file", ["is a file, not a directory"]),
    ("under-a-file", ["lies under", "which is a file"]),
    ("unwritable", ["cannot write in this directory"]),
    ("uncreatable", ["the directory cannot be created"]),
])
def test_bad_out_paths_are_refused_in_one_line(work, tmp_path, case, fragments):
    (tmp_path / "plain").write_text("not a directory")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    root = os.geteuid() == 0  # root writes through permissions: use kernel file systems that refuse everyone
    out = {"a-file": tmp_path / "plain", "under-a-file": tmp_path / "plain" / "sub",
           "unwritable": Path("/sys") if root else locked,
           "uncreatable": Path("/proc/hawk-artifact-out") if root else locked / "sub"}[case]
    try:
        r = cli(work, "build", "--out", str(out), "clikernels:c_energy")
    finally:
        locked.chmod(0o700)
    refused(r, "--out", str(out), *fragments)
    assert "Traceback" not in r.stderr


def test_bad_arguments_exit_2(work):
    r = cli(work, "build", "clikernels:c_energy")  # no --out
    assert r.returncode == 2 and "--out" in r.stderr
    r = cli(work, "build", "--dtype", "float16", "--out", "x", "clikernels:c_energy")
    assert r.returncode == 2 and "float16" in r.stderr
    assert cli(work).returncode == 2


def test_console_script_is_declared():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, func = scripts["hawk-artifact"].split(":")
    assert (module, func) == ("hawk.artifact.cli", "main")
    assert callable(getattr(importlib.import_module(module), func))


def test_console_script_runs_when_installed(work):
    exe = shutil.which("hawk-artifact", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("the console script is not installed (pip install -e . installs it)")
    r = subprocess.run([exe, "--help"], capture_output=True, text=True, cwd=work, timeout=60)
    assert r.returncode == 0 and "build" in r.stdout
