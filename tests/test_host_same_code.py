"""Host stages that are the same code under other names share one compiled object (hawk/targets/host_objects.py):
the second kernel compiles nothing, runs with its own symbols, and its machine code is byte for byte what compiling
it under its own name gives; a module that writes the stage's name anywhere else is compiled on its own."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

import eagle
import hawk
from eagle.targets import host as eagle_host
from hawk import Scalar
from hawk.targets import elf, host, host_objects


def twin_a(x: Scalar) -> Scalar:
    return hawk.sum(x * 3.0 + 1.0, policy="ordered")


def twin_b(x: Scalar) -> Scalar:
    return hawk.sum(x * 3.0 + 1.0, policy="ordered")


def other(x: Scalar) -> Scalar:
    return hawk.sum(x * 5.0, policy="ordered")


@pytest.fixture()
def fresh(tmp_path, monkeypatch):
    """An empty disk cache and memory, and a count of what is compiled."""
    monkeypatch.setenv("HAWK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(host_objects, "_memory", {})
    monkeypatch.setattr(eagle_host, "_MEMORY", {})
    compiled: list[str] = []
    real = host.compile_object

    def counting(text, obj, cpu=None):
        compiled.append(re.findall(r"llvm\.func @(\w+)_lanes", text)[0])
        real(text, obj, cpu)

    monkeypatch.setattr(host, "compile_object", counting)
    return compiled


def _kernels():
    return [hawk.kernel(f) for f in (twin_a, twin_b, other)]  # (fresh Kernel objects: nothing built yet)


def test_a_kernel_that_is_the_same_code_compiles_nothing_and_runs_under_its_name(fresh):
    a, b, c = _kernels()
    x = np.linspace(-1.0, 2.0, 5001)
    ra = eagle.deploy(a).run(x=x)
    assert fresh == [host_objects.PLACEHOLDER]
    rb = eagle.deploy(b).run(x=x)
    assert fresh == [host_objects.PLACEHOLDER], "the twin compiled again"
    assert np.asarray(ra).tobytes() == np.asarray(rb).tobytes()
    assert float(np.asarray(rb)[0]) == pytest.approx(float(np.sum(x * 3.0 + 1.0)), rel=1e-15)
    eagle.deploy(c).run(x=x)
    assert len(fresh) == 2, "a kernel with other code must compile"


def test_a_shared_object_renamed_is_the_objects_own_compile_byte_for_byte(tmp_path, monkeypatch):
    monkeypatch.setattr(host_objects, "_memory", {})
    monkeypatch.setenv("HAWK_CACHE_DIR", "")
    (k,) = [hawk.kernel(twin_b)]
    spec = k.default_spec()
    text = k.lowered(spec, 0).llvm_ir
    stage = k.stages(spec)[0].name
    own = tmp_path / "own.o"
    host.compile_object(text, own, None)
    host_objects.write_object(text, stage, None, host.compile_object, tmp_path / "shared.o")
    shared = (tmp_path / "shared.o").read_bytes()
    mine, theirs = _sections(own.read_bytes()), _sections(shared)
    code = [n for n in mine if n.startswith((".text", ".ltext", ".rodata", ".lrodata", ".data", ".rela"))]
    assert code and all(mine[n] == theirs[n] for n in code), [n for n in code if mine[n] != theirs[n]]
    assert elf.read(shared).defined == elf.read(own.read_bytes()).defined
    assert {f"{stage}_lanes", f"_mlir_{stage}_lanes", f"_mlir_{stage}_finish"} <= elf.read(shared).defined


def test_a_renamed_object_links_and_its_functions_answer_to_their_new_names(tmp_path):
    src = tmp_path / "k.c"
    src.write_text("double old_f(double x) { return 2 * x + 1; }\nint old_g(void) { return 7; }\n")
    import subprocess

    from hawk.targets import host_link

    obj = tmp_path / "k.o"
    subprocess.run([host_link.cc(), "-c", "-fPIC", "-O2", str(src), "-o", str(obj)], check=True)
    new = elf.renamed(obj.read_bytes(), lambda n: "fresh_" + n[4:] if n.startswith("old_") else None)
    assert {"fresh_f", "fresh_g"} <= elf.read(new).defined and not {"old_f", "old_g"} & elf.read(new).defined
    obj.write_bytes(new)
    host_link.link(obj, tmp_path / "k.so")
    lib = ctypes.CDLL(str(tmp_path / "k.so"))
    lib.fresh_f.restype, lib.fresh_f.argtypes = ctypes.c_double, [ctypes.c_double]
    assert lib.fresh_f(3.0) == 7.0 and lib.fresh_g() == 7


def test_a_module_that_writes_the_stage_name_elsewhere_is_not_shared():
    text = 'module {\n  llvm.func @k_lanes() {\n    llvm.return\n  }\n  llvm.mlir.global @msg("abc") : i32\n}\n'
    assert host_objects.same_code(text, "k") is not None
    assert host_objects.same_code(text.replace('"abc"', '"in k"'), "k") is None
    assert host_objects.same_code(text.replace("@msg", "@k"), "k") is None
    assert host_objects.same_code(text.replace("@msg", "@" + host_objects.PLACEHOLDER), "k") is None
    layout = 'module attributes {hawk.layout = {name = "k", s = "}{"}, other = 1} {\n' + text.split("\n", 1)[1]
    assert host_objects.same_code(layout, "k").startswith("module attributes {other = 1} {\n")
    layout = 'module attributes {gpu.container_module, hawk.layout = {name = "k"}} {\n' + text.split("\n", 1)[1]
    assert host_objects.same_code(layout, "k").startswith("module attributes {gpu.container_module} {\n")


def test_a_damaged_shared_object_in_the_disk_cache_is_rebuilt(fresh, tmp_path):
    (a,) = [hawk.kernel(twin_a)]
    x = np.arange(100.0)
    want = np.asarray(eagle.deploy(a).run(x=x))
    (entry,) = (tmp_path / "cache").glob("same-code-*.o")
    entry.write_bytes(entry.read_bytes()[:100])
    host_objects._memory.clear()
    (b,) = [hawk.kernel(twin_b)]
    assert np.asarray(eagle.deploy(b).run(x=x)).tobytes() == want.tobytes()
    assert len(fresh) == 2


def _sections(binary: bytes) -> dict[str, bytes]:
    import struct

    (shoff,) = struct.unpack_from("<Q", binary, 40)
    entsize, num, names = struct.unpack_from("<HHH", binary, 58)
    hdr = [struct.unpack_from("<IIQQQQ", binary, shoff + i * entsize) for i in range(num)]
    base = hdr[names][4]
    out = {}
    for name, _kind, _flags, _addr, off, size in hdr:
        n = binary[base + name:binary.index(b"\0", base + name)].decode()
        out[n] = binary[off:off + size]
    return out
