"""Nothing stale or damaged is ever run from the compile cache.

Stale: a kernel is keyed by every Python value its body captures, by value (a NumPy scalar, a 0-d array, a module
attribute, a closure cell), so another process with another value compiles its own code. Damaged: each entry (host
library, device binary, kernel facts, and the seals beside them) is checked against the sha256 recorded when it was
written; an empty, truncated or corrupted one is rebuilt. The damaged loads run in a fresh process, so a crash
would show as a signal instead of killing the test run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import hawk
from eagle import cache as ecache
from eagle.targets import host
from hawk.abi import cache

pytestmark = pytest.mark.slow  # (pyproject.toml's markers: -m 'not slow' leaves it out)

ROOT = Path(__file__).resolve().parent.parent

CAPTURES = textwrap.dedent("""
    import os
    import numpy as np
    import hawk
    import icfg
    from hawk import Mutable, Scalar

    VAL = float(os.environ["HAWK_TEST_VAL"])
    F32 = np.float32(VAL)
    I64 = np.int64(int(VAL * 4))
    ZERO_D = np.array(VAL * 100)
    PAIR = (np.float64(VAL), 7)


    def make(scale):
        @hawk.kernel
        def ic_closure(x: Scalar) -> Scalar:
            return x * scale

        return ic_closure


    ic_closure = make(np.float32(VAL * 1000))


    @hawk.kernel
    def ic_globals(x: Scalar, total: Mutable[Scalar], y: Mutable[Scalar]):
        total = hawk.sum(x * F32)
        y = x * I64 + ZERO_D + icfg.OFFSET + PAIR[0]
""")

RUN_CAPTURES = textwrap.dedent("""
    import json, sys
    import numpy as np
    import eagle
    sys.path.insert(0, sys.argv[1])
    import ic_kernels as k
    x = np.arange(1.0, 5.0)
    out = eagle.deploy(k.ic_globals).run(x=x)
    print(json.dumps({"total": float(np.asarray(out["total"])[0]), "y": np.asarray(out["y"]).tolist(),
                      "closure": np.asarray(eagle.deploy(k.ic_closure).run(x=x)).tolist()}))
""")


def _env(cache_dir: Path, **extra: str) -> dict:
    env = dict(os.environ, HAWK_CACHE_DIR=str(cache_dir), PYTHONPATH=str(ROOT), **extra)
    env.pop("HAWK_DUMP_DIR", None)
    return env


def _captures_run(work: Path, cache_dir: Path, val: float) -> dict:
    r = subprocess.run([sys.executable, "-c", RUN_CAPTURES, str(work)], capture_output=True, text=True, timeout=300,
                       env=_env(cache_dir, HAWK_TEST_VAL=repr(val)))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _captures_want(val: float) -> dict:
    x = np.arange(1.0, 5.0)
    f32, i64 = float(np.float32(val)), int(val * 4)
    return {"total": float(np.sum(x * f32)), "y": (x * i64 + val * 100 + val * 10 + val).tolist(),
            "closure": (x * float(np.float32(val * 1000))).tolist()}


def test_each_process_gets_its_own_captured_values(tmp_path):
    (tmp_path / "ic_kernels.py").write_text(CAPTURES)
    (tmp_path / "icfg.py").write_text("import os\nOFFSET = float(os.environ['HAWK_TEST_VAL']) * 10\n")
    shared = tmp_path / "cache"
    for val in (1.5, 2.25, 1.5, -3.0):  # the same cache for all: a value seen before reuses its own entry
        got = _captures_run(tmp_path, shared, val)
        want = _captures_want(val)
        np.testing.assert_allclose(got["total"], want["total"], rtol=1e-12)
        np.testing.assert_array_equal(got["y"], want["y"])
        np.testing.assert_array_equal(got["closure"], want["closure"])
    facts = sorted(p.name for p in shared.glob("ic_globals-*.kernel.json"))
    assert len(facts) == 3, facts  # one entry per distinct value, none reused across values


def test_numpy_scalars_key_by_value_and_type():
    from hawk.frontend.refs import captured_key

    keys = [captured_key(v) for v in (np.float32(2.5), np.float32(3.5), np.float64(2.5), np.int64(2),
                                      np.int32(2), np.array(2.5), 2.5, 2, True, np.bool_(True), -0.0, 0.0)]
    assert len(set(keys)) == len(keys), keys
    assert captured_key(np.float32(2.5)) == captured_key(np.float32(2.5))
    assert captured_key((1, np.float32(2.0))) != captured_key((1, np.float32(3.0)))


def test_a_captured_array_is_refused_at_decoration():
    table = np.arange(3.0)

    with pytest.raises(hawk.KernelError) as e:
        @hawk.kernel
        def ic_array(x: hawk.Scalar) -> hawk.Scalar:
            return x * table  # the line the error names

    msg = str(e.value)
    assert "kernel 'ic_array'" in msg and "'table'" in msg and "shape (3,)" in msg
    assert "pass it as a plane" in msg and "Table" in msg
    assert msg.startswith(f"{__file__}:") and e.value.line is not None


def test_host_binaries_are_keyed_by_llvm_version_and_cpu(monkeypatch, tmp_path):
    monkeypatch.setattr(host, "_MEMORY", {})
    monkeypatch.setenv("HAWK_CACHE_DIR", str(tmp_path / "cache"))

    @hawk.kernel
    def ic_keyed(x: hawk.Scalar) -> hawk.Scalar:
        return x + 1.0

    import eagle

    eagle.deploy(ic_keyed).run(x=np.ones(3))
    libs = lambda: sorted(p.name for p in (tmp_path / "cache").glob("ic_keyed-*.so"))  # noqa: E731
    assert len(libs()) == 1
    key = cache.host_key()
    assert f"llvm={cache.host_cpu()['llvm']}" in key and f"cpu={cache.host_cpu()['name']}" in key
    for other in ("llvm=23.0.0 " + key.split(" ", 1)[1], key.replace("cpu=", "cpu=other-")):
        monkeypatch.setattr(host, "_MEMORY", {})
        monkeypatch.setattr(ecache, "host_key", lambda other=other: other)
        np.testing.assert_array_equal(np.asarray(eagle.deploy(ic_keyed).run(x=np.ones(3))), [2.0, 2.0, 2.0])
    assert len(libs()) == 3  # another LLVM, another CPU: another library


def test_host_cpu_is_what_llvm_detects():
    c = cache.host_cpu()
    assert c["detected"] == "llvm" and c["llvm"].split(".")[0].isdigit()
    assert c["name"] and c["arch"] == cache.machine()
    if c["arch"] == "x86_64":
        assert "sse2" in cache.enabled(c["features"])


# ---- damaged entries ------------------------------------------------------------------------------------------
DAMAGE_KERNELS = textwrap.dedent("""
    import hawk
    from hawk import Mutable, Scalar


    @hawk.kernel
    def id_energy(x: Scalar, total: Mutable[Scalar], y: Mutable[Scalar]):
        total = hawk.sum(x * x, policy="ordered")
        y = x * 3.0 - 1.0
""")

RUN_DAMAGE = textwrap.dedent("""
    import json, sys
    import numpy as np
    import eagle
    sys.path.insert(0, sys.argv[1])
    import id_kernels as k
    x = np.linspace(-2.0, 5.0, 1001)
    out = eagle.deploy(k.id_energy, target=sys.argv[2]).run(x=x)
    print(json.dumps({"total": float(np.asarray(out["total"])[0]), "y": np.asarray(out["y"]).tolist()}))
""")


def _damage_run(work: Path, target: str) -> dict:
    r = subprocess.run([sys.executable, "-c", RUN_DAMAGE, str(work), target], capture_output=True, text=True,
                       timeout=300, env=_env(work / "cache"))
    assert r.returncode == 0, f"exit {r.returncode} (a negative one is a signal): {r.stderr[-2000:]}"
    return json.loads(r.stdout)


def _check_damage_result(got: dict) -> None:
    x = np.linspace(-2.0, 5.0, 1001)
    np.testing.assert_allclose(got["total"], np.sum(x * x), rtol=1e-12)
    np.testing.assert_array_equal(got["y"], x * 3.0 - 1.0)


DAMAGES = {
    "empty": lambda b: b"",
    "truncated": lambda b: b[: len(b) // 2],
    "zeroed": lambda b: bytes(len(b)),
    "flipped": lambda b: b[: len(b) // 2] + bytes([b[len(b) // 2] ^ 0x5A]) + b[len(b) // 2 + 1:],
}


@pytest.fixture(scope="module")
def damage_work(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("damage")
    (work / "id_kernels.py").write_text(DAMAGE_KERNELS)
    return work


def _entry(cache_dir: Path, pattern: str) -> Path:
    found = sorted(cache_dir.glob(pattern))
    assert len(found) == 1, (pattern, [p.name for p in cache_dir.iterdir()])
    return found[0]


_PRISTINE: dict[tuple[str, str], Path] = {}  # (target, compiler fingerprint) -> a cache one clean run filled


def _fresh_cache(work: Path, target: str) -> Path:
    """work/cache as one clean run of the kernel leaves it: built by a run the first time (per target and compiler
    fingerprint), copied from that after (a copy has the same bytes, without a compile per test case)."""
    import shutil

    key = (target, cache.compiler_fingerprint.__wrapped__())
    shutil.rmtree(work / "cache", ignore_errors=True)
    if key not in _PRISTINE:
        _check_damage_result(_damage_run(work, target))
        _PRISTINE[key] = work / f"pristine-{target}-{len(_PRISTINE)}"
        shutil.copytree(work / "cache", _PRISTINE[key])
    else:
        shutil.copytree(_PRISTINE[key], work / "cache")
    return work / "cache"


ENTRIES = [  # (kind, target, file pattern); a seal is a line of text: empty and flipped cover it
    ("host library", "host", "id_energy-*.so", sorted(DAMAGES)),
    ("host library seal", "host", "id_energy-*.so.sha256", ["empty", "flipped"]),
    ("kernel facts", "host", "id_energy-*.kernel.json", sorted(DAMAGES)),
    ("device binary", "spirv", "id_energy-*.spv", sorted(DAMAGES)),
    ("device binary seal", "spirv", "id_energy-*.spv.sha256", ["empty", "flipped"]),
]


@pytest.mark.parametrize("kind,target,pattern,damage", [(k, t, p, d) for k, t, p, ds in ENTRIES for d in ds])
def test_a_damaged_cache_entry_is_rebuilt(damage_work, kind, target, pattern, damage):
    if target != "host":
        from conftest import bt_target_missing

        why = bt_target_missing(target)
        if why:
            pytest.skip(f"target '{target}' cannot run here: {why}")
    for _ in range(3):  # other engineers' edits change the compiler's fingerprint (the key): try again then
        before = cache.compiler_fingerprint.__wrapped__()
        d = _fresh_cache(damage_work, target)
        entry = _entry(d, pattern)
        entry.write_bytes(DAMAGES[damage](entry.read_bytes()))
        _check_damage_result(_damage_run(damage_work, target))  # a fresh process: a crash would be a signal
        if cache.compiler_fingerprint.__wrapped__() == before:
            break
    data = entry.with_name(entry.name.removesuffix(".sha256"))
    if kind == "kernel facts":
        from hawk.compiler import _read_info

        assert _read_info(data), f"the {kind} entry was not rebuilt"
    else:
        assert cache.read_entry(data) is not None, f"the {kind} entry was not rebuilt"
    assert not [p.name for p in d.iterdir() if p.name.endswith(".part")]


def test_an_unsealed_library_is_not_loaded(damage_work):
    d = _fresh_cache(damage_work, "host")
    lib = _entry(d, "id_energy-*.so")
    (lib.parent / (lib.name + ".sha256")).unlink()  # a crash between writing the library and its seal
    lib.write_bytes(b"\x7fELF" + bytes(64))
    _check_damage_result(_damage_run(damage_work, "host"))
    assert cache.entry_ok(lib)


def test_a_full_disk_leaves_no_half_entry(monkeypatch, tmp_path):
    entry = tmp_path / "k-1.spv"
    assert cache.write_entry(entry, b"first")

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    assert not cache.write_entry(entry, b"second, longer")
    assert cache.read_entry(entry) == b"first"  # the old entry, whole, or (on another failure) none
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k-1.spv", "k-1.spv.sha256"]


def test_a_cache_that_cannot_be_written_still_runs(monkeypatch, tmp_path):
    monkeypatch.setattr(host, "_MEMORY", {})
    monkeypatch.setenv("HAWK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(ecache, "write_entry", lambda path, data: False)  # e.g. a full disk

    @hawk.kernel
    def ic_nowrite(x: hawk.Scalar) -> hawk.Scalar:
        return x * 2.0

    import eagle

    np.testing.assert_array_equal(np.asarray(eagle.deploy(ic_nowrite).run(x=np.arange(3.0))), [0.0, 2.0, 4.0])
    assert not list((tmp_path / "cache").glob("ic_nowrite-*.so"))


NO_CACHE_RUN = """
import numpy as np
import eagle, hawk
from eagle import native


@hawk.kernel
def ic_nocache(x: hawk.Scalar) -> hawk.Scalar:
    return x * 2.0 + hawk.sum(x)


assert np.asarray(eagle.deploy(ic_nocache).run(x=np.arange(3.0))).tolist() == [3.0, 5.0, 7.0]
print(native.FIRES[0])
"""


def test_with_the_cache_off_nothing_is_left_in_the_temporary_directory(tmp_path):
    """Libraries are built in private folders; with no cache to take them (HAWK_CACHE_DIR=''), the folders used to
    stay behind, one per library and process. A mapped library needs no file, so none is left."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = dict(_env(tmp_path, TMPDIR=str(tmpdir)), HAWK_CACHE_DIR="")
    (tmp_path / "ic_nocache.py").write_text(NO_CACHE_RUN)
    r = subprocess.run([sys.executable, str(tmp_path / "ic_nocache.py")], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[-1]) > 0  # the native executor (a C library built here) ran the stages
    assert sorted(p.name for p in tmpdir.iterdir()) == []
