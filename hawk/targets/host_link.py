"""Linking a host kernel's object into a shared library.

The C compiler driver (`cc -shared k.o -lm`) is the reference: it knows the machine's start files, library paths
and runtime libraries. But a link through it starts three processes (driver, collect2, ld) and took 21 ms here, of
which ld itself is 4 ms; a cold test suite links a few thousand kernels. So the driver is asked once per process
for the linker command it would run (`cc -###`), and each link runs that command with the paths swapped in. The
LTO plugin arguments are dropped (the objects are native code, never LTO bitcode). Most kernels call no library
function at all (their math is emitted inline); for those the libraries after the object are left out too, which
changes no byte of the output (they are linked --as-needed and nothing needs them) and saves reading libc's and
libm's symbol tables (18 -> 5 ms). Whenever the command cannot be derived, or a direct link fails, the driver
links instead (and does so for the rest of the process).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import threading
from pathlib import Path

from hawk.targets import elf

_OBJ, _SO = "/hawk-link-placeholder/k.o", "/hawk-link-placeholder/k.so"
_lock = threading.Lock()
_derived: dict[str, list[str] | None] = {}


def cc() -> str:
    """The C compiler driver: $CC, else cc, gcc or clang."""
    for c in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if c and shutil.which(c):
            return c
    raise RuntimeError("the host target links kernels with a C compiler driver and found none: install gcc "
                       "(apt-get install gcc) or set CC")


def driver_command(obj: Path, so: Path) -> list[str]:
    return [cc(), "-shared", "-o", str(so), str(obj), "-lm"]


def linker_command(driver: str) -> list[str] | None:
    """The linker command `driver` runs for `-shared -o k.so k.o -lm`, with placeholders for the two paths, or
    None when it cannot be read off `driver -###`."""
    with _lock:
        if driver not in _derived:
            _derived[driver] = _derive(driver)
        return _derived[driver]


def _derive(driver: str) -> list[str] | None:
    try:
        r = subprocess.run([driver, "-###", "-shared", "-o", _SO, _OBJ, "-lm"], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln for ln in r.stderr.splitlines() if _OBJ in ln and _SO in ln and not ln.startswith("COLLECT_")]
    if r.returncode != 0 or len(lines) != 1:
        return None
    argv = shlex.split(lines[0])
    if Path(argv[0]).name == "collect2":  # gcc's wrapper around ld: run the ld it would run
        ld = subprocess.run([driver, "-print-prog-name=ld"], capture_output=True, text=True).stdout.strip()
        ld = shutil.which(ld) if ld else None
        if not ld:
            return None
        argv[0] = ld
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "-plugin":
            skip = True
        elif not a.startswith("-plugin-opt"):
            out.append(a)
    return out if shutil.which(out[0]) else None


_LIBRARY_STATE = ("--push-state", "--pop-state", "--as-needed", "--no-as-needed")


def without_libraries(cmd: list[str]) -> list[str]:
    """The linker command without the libraries named after the object (and the flags that scope them)."""
    at = cmd.index(_OBJ)
    return cmd[:at + 1] + [a for a in cmd[at + 1:] if not a.startswith("-l") and a not in _LIBRARY_STATE]


def calls_nothing(obj: Path) -> bool:
    """Whether the object refers to no symbol it does not define (but the GOT the linker makes)."""
    try:
        return not (elf.read(obj.read_bytes()).undefined - {"_GLOBAL_OFFSET_TABLE_"})
    except (OSError, ValueError):
        return False


def link(obj: Path, so: Path) -> None:
    """Link the object `obj` into the shared library `so` (with libm)."""
    driver = cc()
    cmd = linker_command(driver)
    if cmd is not None:
        if calls_nothing(obj):
            cmd = without_libraries(cmd)
        argv = [str(obj) if a == _OBJ else str(so) if a == _SO else a for a in cmd]
        if subprocess.run(argv, capture_output=True).returncode == 0:
            return
        with _lock:  # the derived command does not work here: the driver links from now on
            _derived[driver] = None
    r = subprocess.run(driver_command(obj, so), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"linking the host kernel failed: {r.stderr.strip()}")
