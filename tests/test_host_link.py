"""Host kernels link with the linker command the C compiler driver would run (hawk/targets/host_link.py): the
same library, byte for byte, as `cc -shared`; and the driver whenever that command cannot be had or fails."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import pytest

from hawk.targets import host_link

SOURCE = """#include <math.h>
double f(double x) { return sin(x) + 1.0; }
unsigned __int128 q(unsigned __int128 a, unsigned __int128 b) { return a / b; }  /* libgcc's __udivti3 */
"""


PLAIN = "double g(double x) { return x * x + 1.0; }\n"  # calls nothing: linked without the libraries


def _object(tmp_path: Path, source: str, name: str = "k") -> Path:
    (tmp_path / f"{name}.c").write_text(source)
    subprocess.run([host_link.cc(), "-c", "-fPIC", "-O2", str(tmp_path / f"{name}.c"), "-o",
                    str(tmp_path / f"{name}.o")], check=True)
    return tmp_path / f"{name}.o"


@pytest.fixture()
def obj(tmp_path: Path) -> Path:
    return _object(tmp_path, SOURCE)


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(host_link, "_derived", {})


def _f(so: Path) -> float:
    lib = ctypes.CDLL(str(so))
    lib.f.restype, lib.f.argtypes = ctypes.c_double, [ctypes.c_double]
    return lib.f(0.5)


def test_the_direct_link_gives_the_drivers_library_byte_for_byte(obj: Path, tmp_path: Path):
    cmd = host_link.linker_command(host_link.cc())
    assert cmd is not None and Path(cmd[0]).name != "collect2" and not any("plugin" in a for a in cmd)
    calls = []
    real = subprocess.run

    def spy(argv, *a, **k):
        calls.append(argv[0])
        return real(argv, *a, **k)

    host_link.subprocess.run = spy
    try:
        host_link.link(obj, tmp_path / "direct.so")
    finally:
        host_link.subprocess.run = real
    assert calls == [cmd[0]]  # one process: the linker itself
    subprocess.run(host_link.driver_command(obj, tmp_path / "driver.so"), check=True)
    assert (tmp_path / "direct.so").read_bytes() == (tmp_path / "driver.so").read_bytes()
    assert _f(tmp_path / "direct.so") == pytest.approx(1.479425538604203, rel=1e-15)


def test_an_object_that_calls_nothing_links_without_libraries_to_the_same_bytes(obj: Path, tmp_path: Path):
    plain = _object(tmp_path, PLAIN, "plain")
    assert host_link.calls_nothing(plain) and not host_link.calls_nothing(obj)
    cmd = host_link.linker_command(host_link.cc())
    lean = host_link.without_libraries(cmd)
    assert "-lm" in cmd and not [a for a in lean[lean.index(host_link._OBJ):] if a.startswith("-l")]
    host_link.link(plain, tmp_path / "lean.so")
    subprocess.run(host_link.driver_command(plain, tmp_path / "driver.so"), check=True)
    assert (tmp_path / "lean.so").read_bytes() == (tmp_path / "driver.so").read_bytes()
    lib = ctypes.CDLL(str(tmp_path / "lean.so"))
    lib.g.restype, lib.g.argtypes = ctypes.c_double, [ctypes.c_double]
    assert lib.g(3.0) == 10.0


def test_a_linker_command_that_fails_hands_over_to_the_driver(obj: Path, tmp_path: Path):
    host_link._derived[host_link.cc()] = ["false"]
    host_link.link(obj, tmp_path / "k.so")
    assert _f(tmp_path / "k.so") == pytest.approx(1.479425538604203, rel=1e-15)
    assert host_link._derived[host_link.cc()] is None  # and the driver links for the rest of the process


def test_a_driver_that_prints_no_linker_command_is_used_as_is(obj: Path, tmp_path: Path, monkeypatch):
    wrapper = tmp_path / "mycc"
    wrapper.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = "-###" ] && exit 1; done\nexec {host_link.cc()} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapper))
    assert host_link.cc() == str(wrapper) and host_link.linker_command(str(wrapper)) is None
    host_link.link(obj, tmp_path / "k.so")
    assert _f(tmp_path / "k.so") == pytest.approx(1.479425538604203, rel=1e-15)


def test_a_link_that_cannot_succeed_says_so(tmp_path: Path):
    (tmp_path / "bad.o").write_bytes(b"not an object")
    with pytest.raises(RuntimeError, match="linking the host kernel failed"):
        host_link.link(tmp_path / "bad.o", tmp_path / "k.so")
