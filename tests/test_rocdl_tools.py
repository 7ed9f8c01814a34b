"""The rocdl target's own tools: the in-process LLVM (hawk.targets.llvm_c) against `opt-22 -O3` / `llc-22 -O3`, its
errors, and the code-object reader (hawk.targets.amd_elf) against `llvm-readelf-22`."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import pytest

import hawk
from hawk import Mutable, Scalar, Vector
from hawk import math as m
from hawk.targets import amd_elf, llvm_c
from hawk.targets.rocdl import CHIPS, TRIPLE, RocdlTarget, llvm_c_api, tool


@hawk.kernel
def rt_dot(a: Scalar, b: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(a * b, policy="ordered")


@hawk.kernel
def rt_exp(x: Scalar) -> Scalar:
    return m.exp(x) + m.sin(x)


@hawk.kernel
def rt_vec(a: Vector[4], x: Scalar) -> Vector[4]:
    return hawk.sum(a * x, policy="compensated", where=x > 0.0)


def _linked(kernel, chip: str, d: Path) -> Path:
    """The stage's LLVM IR for `chip`, with the device libraries linked as RocdlTarget.compile links them."""
    target = RocdlTarget(chip)
    return target.linked(target.llvm_ir(kernel.lowered_gpu(kernel.default_spec(), 0, target.subgroup,
                                                           True).gpu_module), d)


@pytest.mark.parametrize("chip", ["gfx90a", "gfx1100"])
@pytest.mark.parametrize("kernel", [rt_dot, rt_exp, rt_vec], ids=lambda k: k.name)
def test_in_process_objects_are_the_tools_objects_byte_for_byte(kernel, chip):
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        src = _linked(kernel, chip, d)
        if kernel is rt_exp:
            assert src.name == "linked.bc"  # the device libraries' path is covered too
        subprocess.run([tool("opt"), "-O3", f"-mtriple={TRIPLE}", f"-mcpu={chip}", "-amdgpu-unroll-threshold-private=0",
                        str(src), "-o", str(d / "o.bc")], check=True, capture_output=True)
        subprocess.run([tool("llc"), f"-mtriple={TRIPLE}", f"-mcpu={chip}", "-O3", "-filetype=obj",
                        "--amdhsa-code-object-version=5", str(d / "o.bc"), "-o", str(d / "o.o")], check=True,
                       capture_output=True)
        got = llvm_c.object_code(llvm_c_api(), src.read_bytes(), TRIPLE, chip, "test")
        assert got == (d / "o.o").read_bytes()


def test_llvm_errors_raise_instead_of_ending_the_process():
    with pytest.raises(RuntimeError, match="compiling for x failed: LLVM cannot read the IR"):
        llvm_c.object_code(llvm_c_api(), b"define void @k( {", TRIPLE, "gfx90a", "compiling for x")
    # a code-generation error (LLVM's default handler would exit): gfx90a's private memory is 128 KiB a thread.
    # (Defined here, not at module level: tests/test_gpu_compile.py builds those with one op per component.)
    @hawk.kernel
    def rt_too_wide(a: Vector[1024], x: Scalar) -> Vector[1024]:
        return hawk.sum(a, policy="compensated", where=x > 0.0)

    target = RocdlTarget("gfx90a")
    text = rt_too_wide.lowered_gpu(rt_too_wide.default_spec(), 0, target.subgroup, True, True).gpu_module
    with pytest.raises(RuntimeError, match="stack frame size.*more private memory per thread than the chip allows"):
        target.compile(text)
    assert target.check(target.compile(rt_dot.lowered_gpu(rt_dot.default_spec(), 0, 64, True).gpu_module),
                        "rt_dot_lanes")["kernels"] == ["rt_dot_lanes"]  # and the process goes on compiling


def test_llvm_options_are_set_once_per_process():
    a = llvm_c_api()
    llvm_c.set_options(a, llvm_c._options)  # the same again: nothing to do
    with pytest.raises(RuntimeError, match="internal error: LLVM options"):
        llvm_c.set_options(a, ("-some-other-option",))


def _amd_code_object(chip: str, decls: str = "", body: str = "", kind: str = "amdgpu_kernel") -> bytes:
    """A code object with one function `k` for `chip` (a kernel unless `kind` says otherwise), straight from LLVM
    IR text (llc-22, ld.lld-22)."""
    ll = (f'target triple = "amdgcn-amd-amdhsa"\n{decls}define {kind} void @k() {{\n  {body}\n'
          "  ret void\n}\n")
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "k.ll").write_text(ll)
        r = subprocess.run([tool("llc"), "-mtriple=amdgcn-amd-amdhsa", f"-mcpu={chip}", "-filetype=obj",
                            str(d / "k.ll"), "-o", str(d / "k.o")], check=True, capture_output=True, text=True)
        assert "not a recognized processor" not in r.stderr, r.stderr
        subprocess.run([tool("ld.lld"), "-shared", str(d / "k.o"), "-o", str(d / "k.so")], check=True,
                       capture_output=True)
        return (d / "k.so").read_bytes()


def test_the_elf_reader_knows_every_chip_as_llvm_names_it():
    """amd_elf.MACH against what llc-22 writes and llvm-readelf-22 names, for every chip the target offers."""
    assert set(amd_elf.MACH) == set(CHIPS)
    for chip in CHIPS:
        binary = _amd_code_object(chip)
        obj = amd_elf.read(binary)
        assert obj.mach == amd_elf.MACH[chip], chip
        assert "k.kd" in obj.defined and not obj.undefined
        with tempfile.NamedTemporaryFile(suffix=".so") as f:
            f.write(binary)
            f.flush()
            header = subprocess.run([tool("llvm-readelf"), "--file-header", f.name], capture_output=True,
                                    text=True, check=True).stdout
        flags = re.search(r"Flags:\s+0x([0-9a-f]+), (gfx\w+)", header)
        assert flags and flags.group(2) == chip and int(flags.group(1), 16) & 0xFF == obj.mach, (chip, header)
        assert RocdlTarget(chip).check(binary, "k")["kernels"] == ["k"]


def test_the_check_refuses_what_is_not_the_chips_complete_kernel():
    target = RocdlTarget()
    binary = target.compile(rt_dot.lowered_gpu(rt_dot.default_spec(), 0, 64, True).gpu_module)
    assert target.check(binary, "rt_dot_lanes")["kernels"] == ["rt_dot_lanes"]
    with pytest.raises(RuntimeError, match="no kernel descriptor nothing_lanes.kd"):
        target.check(binary, "nothing_lanes")
    with pytest.raises(RuntimeError, match="not an ELF"):
        target.check(b"not a code object")
    with pytest.raises(RuntimeError, match="truncated or malformed"):
        target.check(binary[:200])
    with pytest.raises(RuntimeError, match="the code object is for gfx90a, not gfx1100"):
        RocdlTarget("gfx1100").check(binary, "rt_dot_lanes")
    # a kernel calling a function nothing defines: ld.lld -shared leaves the symbol undefined
    called = _amd_code_object("gfx90a", "declare void @nowhere()\n", "call void @nowhere()")
    with pytest.raises(RuntimeError, match=r"gfx90a code object has undefined symbols: \['nowhere'\]"):
        target.check(called, "k")
    with pytest.raises(RuntimeError, match="the code object holds no kernel"):  # a plain function, no descriptor
        target.check(_amd_code_object("gfx90a", kind="dso_local"))


def test_a_missing_llvm_library_is_named(monkeypatch):
    monkeypatch.setattr(llvm_c, "LIBRARY_NAMES", ("libLLVM-not-here.so.22.1",))
    llvm_c._load.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=r"needs LLVM 22's shared library \(libLLVM.so.22.1, Debian package "
                                               r"libllvm22.*libLLVM-not-here"):
            llvm_c.api("AMDGPU")
    finally:
        llvm_c._load.cache_clear()  # the real library again for the tests after


def test_builds_in_several_threads_give_the_same_objects():
    """Each build has its own LLVM context and target machine: stages compiled side by side in threads are the
    objects compiled one after another."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(k, chip) for k in (rt_dot, rt_exp, rt_vec) for chip in ("gfx90a", "gfx1100")]

    def build(job):
        kernel, chip = job
        target = RocdlTarget(chip)
        return target.compile(kernel.lowered_gpu(kernel.default_spec(), 0, target.subgroup, True).gpu_module)

    alone = [build(j) for j in jobs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(build, jobs * 2))
    assert together == alone * 2
