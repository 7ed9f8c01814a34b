"""Fixed costs of host runs (issue 12): what the fast paths skip must not change what a run does.

A reused Plan.run takes each plane as the first run of its key decided (a flat array of the run's dtype as it is,
anything else converted as the binder converts it); the host CPU is read from the cache directory instead of
libLLVM; a warm start neither rewrites the kernel's facts nor loads MLIR, libLLVM or numpy.ma. Speed itself is
measured by benchmarks/fixed_costs.py and benchmarks/startup.py, never asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import eagle
import hawk
from eagle.errors import InputError
from hawk import Mutable, Param, Scalar
from hawk.abi import cache

ROOT = Path(__file__).resolve().parents[1]


@hawk.kernel
def fc_affine(x: Scalar, s: Param) -> Scalar:
    return x * s + 1.0


@hawk.kernel
def fc_into(x: Scalar, y: Mutable[Scalar]):
    y = x * 2.0


def _laid_out(values: np.ndarray, how: str) -> np.ndarray:
    """`values` as a flat array, every other element of a larger one, or float32."""
    if how == "strided":
        big = np.full(2 * values.size, np.nan)
        big[::2] = values
        return big[::2]
    return values.astype(np.float32) if how == "float32" else values.copy()


@pytest.mark.parametrize("how", ["flat", "strided", "float32"])
def test_reused_runs_read_each_runs_own_planes_whether_taken_as_they_are_or_converted(how):
    plan = eagle.deploy(fc_affine)
    rng = np.random.default_rng(12)
    for j in range(3):  # the first run of the key prepares, the next ones reuse (taking x as it is, or converting)
        x, s = _laid_out(rng.standard_normal(32), how), 0.5 * j - 1.0
        before = x.copy()
        got = np.asarray(plan.run(x=x, s=s))
        want = x * np.float32(s) + np.float32(1.0) if how == "float32" else x * s + 1.0
        assert got.dtype == x.dtype and got.shape == (32,)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(x, before)
    assert plan._runs.hits == 2


def test_a_reused_run_reads_an_input_that_is_also_the_written_array_as_it_was():
    plan = eagle.deploy(fc_into)
    x, y = np.arange(8.0), np.zeros(8)
    plan.run(x=x, y=y)
    np.testing.assert_array_equal(y, x * 2.0)
    buf = np.arange(8.0) + 1.0  # the same key as (x, y): a reused run, where x is y
    plan.run(x=buf, y=buf)
    assert plan._runs.hits == 1
    np.testing.assert_array_equal(buf, (np.arange(8.0) + 1.0) * 2.0)
    ro = np.zeros(8)
    ro.flags.writeable = False
    with pytest.raises(InputError, match=r"plane 'y' of kernel 'fc_into': is written in place but the array "
                                         r"passed is read-only"):
        plan.run(x=x, y=ro)
    assert (ro == 0.0).all()


def test_the_host_cpu_is_kept_in_the_cache_directory_and_a_damaged_record_is_ignored(monkeypatch, tmp_path):
    monkeypatch.setenv("HAWK_CACHE_DIR", str(tmp_path))
    here = cache.detect_host_cpu()
    assert cache.host_cpu.__wrapped__() == here
    saved = sorted(tmp_path.glob("host-cpu-*.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text())["cpu"] == here

    def no_llvm():
        raise AssertionError("libLLVM asked again although the record is there")

    monkeypatch.setattr(cache, "detect_host_cpu", no_llvm)
    assert cache.host_cpu.__wrapped__() == here  # read back, libLLVM not loaded
    saved[0].write_text('{"stamp": "another libLLVM", "cpu": {"name": "wrong"}}')
    monkeypatch.setattr(cache, "detect_host_cpu", lambda: here)
    assert cache.host_cpu.__wrapped__() == here  # a record for another stamp is not believed
    saved[0].write_bytes(b"\0garbage")
    assert cache.host_cpu.__wrapped__() == here


WARM = """
import json, sys
import numpy as np
import eagle
from benchmarks.startup import sum_of_squares
x = np.arange(1000, dtype=np.float64)
got = float(np.asarray(eagle.deploy(sum_of_squares).run(x=x))[0])
maps = open("/proc/self/maps").read() if sys.platform == "linux" else ""
print(json.dumps({"ok": got == float(np.sum(x * x)), "mlir": sorted(m for m in sys.modules if m.startswith("mlir")),
                  "ma": "numpy.ma" in sys.modules, "libllvm": "libLLVM" in maps}))
"""


def test_a_warm_start_rewrites_no_facts_and_loads_neither_mlir_nor_libllvm_nor_numpy_ma():
    d = cache.cache_dir()
    if d is None:
        pytest.skip("the disk cache is off (HAWK_CACHE_DIR='')")
    env = dict(os.environ, HAWK_CACHE_DIR=str(d), PYTHONPATH=str(ROOT))

    def run() -> dict:
        r = subprocess.run([sys.executable, "-c", WARM], capture_output=True, text=True, cwd=ROOT, env=env,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])

    for _ in range(3):  # other engineers' edits change the compiler's fingerprint (the key): try again then
        assert run()["ok"]  # compiles and records the facts unless an earlier process did
        facts = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in d.glob("sum_of_squares-*.kernel.json")}
        warm = run()
        now = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in d.glob("sum_of_squares-*.kernel.json")}
        if set(now) == set(facts):
            break
    assert warm["ok"] and warm["mlir"] == [] and not warm["ma"] and not warm["libllvm"], warm
    assert now == facts  # read, not written again
