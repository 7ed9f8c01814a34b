"""The host target's runtime: a kernel's shared library, found in memory or in the disk cache or built, loaded
with ctypes.

Each compiled function is called through its packed wrapper `_mlir_<name>(void **args)`: one pointer per
scalar of the expanded memref descriptors, so a launch costs one foreign call with prebuilt argument arrays.
Building the library is the compiler's (hawk/targets/host.py): `load` takes it as a function that writes the
library to a path. Libraries in the disk cache are keyed by the LLVM version and the CPU too, and checked against
their recorded sha256 before they are loaded (hawk.abi.cache).
"""

from __future__ import annotations

import ctypes
import shutil
import tempfile
import threading
from collections.abc import Callable
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


def load(key: str, name: str, build: Callable[[Path], None]) -> HostLibrary:
    """The library for `key`: from memory, else the disk cache (if its bytes match their recorded sha256), else
    written by `build(path)` (the compiler's, e.g. a kernel's `build_library`). The key is extended with the LLVM
    version and this machine's CPU."""
    with _LOCK:
        lib = _MEMORY.get(key)
        if lib is not None:
            return lib
        d = cache.cache_dir()
        so = d / f"{name}-{cache.key(key, cache.host_key())}.so" if d else None
        with cache.building(so):  # (another process building the same library: wait for it, then load it)
            lib = _cached(so, name)
            if lib is None:
                lib = _build_into(so, name, build)
        _MEMORY[key] = lib
        return lib


def _cached(so: Path | None, name: str) -> HostLibrary | None:
    """The library at `so` in the disk cache, if it is there, sealed and loadable."""
    if so is None or not cache.entry_ok(so):
        return None
    try:
        return HostLibrary(so, name)
    except (OSError, AttributeError):  # sealed yet not loadable (another machine's file): rebuild it
        return None


def _build_into(so: Path | None, name: str, build: Callable[[Path], None]) -> HostLibrary:
    """Build the library in a private temporary directory, load it from there and put a copy in the cache at `so`
    (atomically, with its seal). It is never loaded back from `so`: another process may find the entry between
    its rename and its seal, take it for a damaged one and remove it. The private folder is removed once the
    library is mapped (a mapped library needs no file), and after a failed build, so that nothing is left in the
    temporary directory, with the cache off or on."""
    tmp = Path(tempfile.mkdtemp(prefix="hawk-host-"))
    try:
        built = tmp / f"{name}.so"
        build(built)
        lib = HostLibrary(built, name)
        if so is not None and cache.write_entry(so, built.read_bytes()):
            lib.path = so
        return lib
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
