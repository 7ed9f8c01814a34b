"""The host target: LLVM-dialect IR -> native object (MLIR's ExecutionEngine) -> shared library -> ctypes.

Each compiled function is called through its packed wrapper `_mlir_<name>(void **args)`: one pointer per
scalar of the expanded memref descriptors, so a launch costs one foreign call with prebuilt argument arrays.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from eagle import cache

_LOCK = threading.Lock()
_MEMORY: dict[str, HostLibrary] = {}


class HostLibrary:
    """A loaded shared library with a kernel's lane and finish functions."""

    def __init__(self, path: Path, name: str):
        self.path = path
        self.lib = ctypes.CDLL(str(path))
        self.lanes = self._fn(f"_mlir_{name}_lanes", required=False)  # absent from a GPU stage's finish library
        self.finish = self._fn(f"_mlir_{name}_finish")

    def _fn(self, symbol: str, required: bool = True):
        if not required and not hasattr(self.lib, symbol):
            return None
        f = getattr(self.lib, symbol)
        f.argtypes = [ctypes.c_void_p]
        f.restype = None
        return f


def _cc() -> str:
    for c in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if c and shutil.which(c):
            return c
    raise RuntimeError("the host target links kernels with a C compiler driver and found none: install gcc "
                       "(apt-get install gcc) or set CC")


def compile_object(llvm_dialect_ir: str, obj: Path) -> None:
    from mlir import ir  # MLIR only when something must be compiled
    from mlir.execution_engine import ExecutionEngine

    from hawk.ir.dialect import new_context

    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(llvm_dialect_ir)
        engine = ExecutionEngine(module, opt_level=3, enable_pic=True)
        engine.dump_to_object_file(str(obj))


def link(obj: Path, so: Path) -> None:
    r = subprocess.run([_cc(), "-shared", "-o", str(so), str(obj), "-lm"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"linking the host kernel failed: {r.stderr.strip()}")


def load(key: str, name: str, lower) -> HostLibrary:
    """The library for `key`: from memory, else the disk cache, else built by `lower()` -> LLVM-dialect text."""
    with _LOCK:
        lib = _MEMORY.get(key)
        if lib is not None:
            return lib
        d = cache.cache_dir()
        so = d / f"{name}-{key}.so" if d else None
        if so is None or not so.exists():
            text = lower()
            with tempfile.TemporaryDirectory() as tmp:
                obj = Path(tmp) / "k.o"
                compile_object(text, obj)
                target = so if so is not None else Path(tempfile.mkdtemp()) / f"{name}.so"
                part = target.with_suffix(f".{os.getpid()}.part")
                link(obj, part)
                os.replace(part, target)  # atomic: a concurrent process never sees half a library
                so = target
        lib = HostLibrary(so, name)
        _MEMORY[key] = lib
        return lib
