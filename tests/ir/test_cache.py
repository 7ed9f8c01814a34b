"""Compiled kernels are cached: in memory for the process, on disk (HAWK_CACHE_DIR) across processes, and per
specialisation (float32 and float64, int32 and int64 keys are different binaries)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import eagle
import hawk
from eagle import cache
from eagle.targets import host
from hawk import Index, Mutable, Scalar, Table
from hawk.targets import host as codegen
from hawk.targets import host_objects

from .cache_kernels import ir_c_bykey, ir_c_energy

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture
def compiles(monkeypatch, tmp_path):
    """Every call of host.compile_object (the LLVM-dialect text it compiled), with an empty in-memory cache and
    HAWK_CACHE_DIR=tmp_path/cache, so that nothing compiled before this test is found."""
    monkeypatch.setattr(host, "_MEMORY", {})
    monkeypatch.setattr(host_objects, "_memory", {})
    monkeypatch.setenv("HAWK_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[str] = []
    real = codegen.compile_object

    def counting(text, obj, *args):
        calls.append(text)
        return real(text, obj, *args)

    monkeypatch.setattr(codegen, "compile_object", counting)
    return calls


def _planes(dtype=np.float64, n=37):
    rng = np.random.default_rng(4242)
    return {"v": rng.normal(size=n).astype(dtype), "w": rng.uniform(0.5, 1.5, size=n).astype(dtype)}


def _run(kernel, **planes):
    out = eagle.deploy(kernel).run(**planes)
    return {k: np.asarray(v) for k, v in out.items()} if isinstance(out, dict) else np.asarray(out)


def _libraries(tmp_path) -> list[str]:
    """The compiled kernel libraries in the cache (it also keeps each kernel's facts as <name>-<key>.kernel.json,
    each entry's seal as <entry>.sha256, eagle's own native helpers as eagle-*.so, the host CPU as host-cpu-*, the
    objects stages that are the same code share as same-code-*.o, and the builds' lock files under locks/)."""
    return sorted(p.name for p in (tmp_path / "cache").iterdir()
                  if not p.name.endswith((".kernel.json", ".sha256")) and p.name != cache.LOCKS
                  and not p.name.startswith(("eagle-", "host-cpu-", "same-code-")))


def test_second_deploy_and_run_reuses_the_compiled_kernel(compiles):
    planes = _planes()
    first = _run(ir_c_energy, **planes)
    assert len(compiles) == 1
    second = _run(ir_c_energy, **planes)  # a new plan: found in memory, not compiled again
    assert len(compiles) == 1
    plan = eagle.deploy(ir_c_energy)
    for _ in range(3):
        plan.run(**planes)
    assert len(compiles) == 1
    for name in ("total", "scaled"):
        np.testing.assert_array_equal(first[name], second[name])
    np.testing.assert_allclose(first["total"][0], np.sum(planes["v"] ** 2 * planes["w"]), rtol=1e-12)


def test_disk_cache_writes_a_shared_library(compiles, tmp_path):
    _run(ir_c_energy, **_planes())
    libs = _libraries(tmp_path)
    assert len(libs) == 1, libs  # one library, no half-written .part file left behind
    assert libs[0].startswith("ir_c_energy-") and libs[0].endswith(".so")
    # in this process, with the memory cache emptied, the library comes back from disk
    host._MEMORY.clear()
    _run(ir_c_energy, **_planes())
    assert len(compiles) == 1
    assert _libraries(tmp_path) == libs


_FRESH_PROCESS = textwrap.dedent("""
    import importlib.util, json, sys
    import numpy as np
    import eagle
    from hawk.targets import host

    def refuse(*args, **kwargs):
        raise SystemExit("compile_object was called: the disk cache was not used")

    host.compile_object = refuse
    spec = importlib.util.spec_from_file_location("cache_kernels", sys.argv[1])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rng = np.random.default_rng(4242)
    v = rng.normal(size=37)
    w = rng.uniform(0.5, 1.5, size=37)
    out = eagle.deploy(mod.ir_c_energy).run(v=v, w=w)
    print(json.dumps({k: np.asarray(a).tolist() for k, a in out.items()}))
""")


def _fresh_process(cache_dir) -> subprocess.CompletedProcess:
    env = dict(os.environ, HAWK_CACHE_DIR=str(cache_dir), PYTHONPATH=str(ROOT))
    env.pop("HAWK_DUMP_DIR", None)
    return subprocess.run([sys.executable, "-c", _FRESH_PROCESS, str(HERE / "cache_kernels.py")], env=env,
                          capture_output=True, text=True, timeout=120)


def test_fresh_process_loads_the_library_from_disk(compiles, tmp_path):


    here = _run(ir_c_energy, **_planes())
    assert len(compiles) == 1
    r = _fresh_process(tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    there = json.loads(r.stdout)
    np.testing.assert_array_equal(there["total"], here["total"])
    np.testing.assert_array_equal(there["scaled"], here["scaled"])
    assert len(_libraries(tmp_path)) == 1


def test_fresh_process_with_an_empty_cache_compiles(tmp_path):
    # the control for the test above: with nothing on disk the fresh process must compile (and is refused)
    r = _fresh_process(tmp_path / "empty")
    assert r.returncode != 0 and "compile_object was called" in r.stderr


def test_float32_and_float64_are_different_entries(compiles, tmp_path):
    r64 = _run(ir_c_energy, **_planes(np.float64))
    r32 = _run(ir_c_energy, **_planes(np.float32))
    assert len(compiles) == 2
    assert "f64" in compiles[0] and "f32" not in compiles[0]
    assert "f32" in compiles[1]
    assert len(_libraries(tmp_path)) == 2
    assert r64["scaled"].dtype == np.float64 and r32["scaled"].dtype == np.float32
    _run(ir_c_energy, **_planes(np.float32))
    _run(ir_c_energy, **_planes(np.float64))
    assert len(compiles) == 2  # each specialisation is reused


def test_int32_and_int64_keys_are_different_entries(compiles, tmp_path):
    v = np.arange(1.0, 9.0)
    keys = np.array([0, 3, 1, 3, 2, 0, 3, 1])
    got = [_run(ir_c_bykey, key=keys.astype(t), v=v) for t in (np.int32, np.int64, np.int32)]
    assert len(compiles) == 2
    assert len(_libraries(tmp_path)) == 2
    want = np.bincount(keys, weights=v, minlength=4)
    for g in got:
        np.testing.assert_array_equal(g, want)


def _sink_kernel(n):
    @hawk.kernel
    def ir_c_sized(key: Index, v: Scalar, acc: Mutable["slot":n]):
        hawk.scatter(acc)[key] += v

    return ir_c_sized


def _table_kernel(n):
    @hawk.kernel
    def ir_c_lookup(t: Table["i":n], k: Index) -> Scalar:
        return t.at(i=k)

    return ir_c_lookup


def test_same_kernel_with_other_extents_is_a_different_entry(compiles):
    # a redefinition that changes only an extent (a notebook cell run again) must not reuse the old binary
    small, large = _sink_kernel(3), _sink_kernel(6)
    v = np.ones(4)
    np.testing.assert_array_equal(_run(small, key=np.array([0, 1, 2, 2], dtype=np.int32), v=v), [1, 1, 2])
    np.testing.assert_array_equal(_run(large, key=np.array([0, 5, 4, 5], dtype=np.int32), v=v), [1, 0, 0, 0, 1, 2])
    t3, t6 = _table_kernel(3), _table_kernel(6)
    k = np.array([0, 1, 2], dtype=np.int32)
    np.testing.assert_array_equal(_run(t3, t=np.arange(3.0), k=k), [0, 1, 2])
    np.testing.assert_array_equal(_run(t6, t=np.arange(6.0) * 10, k=k + 3), [30, 40, 50])
    assert len(compiles) == 4


def test_changed_body_is_a_different_entry(compiles):
    def make(scale):
        @hawk.kernel
        def ir_c_scale(v: Scalar) -> Scalar:
            return v * scale

        return ir_c_scale

    v = np.arange(4.0)
    np.testing.assert_array_equal(_run(make(2.0), v=v), v * 2.0)
    np.testing.assert_array_equal(_run(make(3.0), v=v), v * 3.0)
    assert len(compiles) == 2


def test_empty_cache_dir_turns_the_disk_cache_off(compiles, monkeypatch, tmp_path):
    monkeypatch.setenv("HAWK_CACHE_DIR", "")
    assert cache.cache_dir() is None
    _run(ir_c_energy, **_planes())
    _run(ir_c_energy, **_planes())
    assert len(compiles) == 1  # the memory cache still holds it
    assert not (tmp_path / "cache").exists()


_WARM_PROCESS = textwrap.dedent("""
    import importlib.abc, importlib.util, json, sys
    import numpy as np

    class NoMlir(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "mlir" or name.startswith("mlir."):
                raise ImportError("MLIR is blocked in this process")
            return None

    sys.meta_path.insert(0, NoMlir())
    import eagle
    spec = importlib.util.spec_from_file_location("cache_kernels", sys.argv[1])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rng = np.random.default_rng(4242)
    out = eagle.deploy(mod.ir_c_energy).run(v=rng.normal(size=37), w=rng.uniform(0.5, 1.5, size=37))
    print(json.dumps({k: np.asarray(a).tolist() for k, a in out.items()}))
""")


def test_a_warm_process_needs_no_mlir(compiles, tmp_path):
    # what the compiler learned (stages, layouts) and the binary both come from the disk cache: no MLIR at all
    here = _run(ir_c_energy, **_planes())
    ir_c_bykey.persist()  # the module's other kernel is decorated there too: its facts must be on disk as well
    env = dict(os.environ, HAWK_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", _WARM_PROCESS, str(HERE / "cache_kernels.py")], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(json.loads(r.stdout)["total"], here["total"])
