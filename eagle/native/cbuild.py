"""Build one of eagle's small C libraries with the system C compiler into hawk's cache, sealed like every cache
entry, and load it: the native executor (executor.c), the bridges' call plans (call_plan.c) and the sharded
runs' halves (distributed/dist.c) all come this way.

The cache file's name holds a hash of the source, the compiler, the machine and the flags, so a changed source or
compiler builds afresh. A cached file is never overwritten while loaded: a fresh build goes to a private
temporary folder first and is copied into the cache by `write_entry`.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
from pathlib import Path

BASE_FLAGS = ("-O2", "-std=gnu11", "-fPIC", "-shared", "-pthread")


def compiler() -> str | None:
    """The C compiler to use: $CC, else cc, gcc or clang on PATH; None when there is none."""
    for c in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if c and shutil.which(c):
            return shutil.which(c)
    return None


def xla_flags() -> list[str]:
    """Compile against jaxlib's XLA FFI headers when jax is installed (the library then holds an FFI handler),
    else define EAGLE_NO_XLA."""
    try:
        import jax.ffi

        return [f"-I{jax.ffi.include_dir()}"]
    except ImportError:
        return ["-DEAGLE_NO_XLA"]


def load(source: Path, stem: str, flags: list[str] | tuple[str, ...] = (), what: str = "") -> ctypes.CDLL:
    """`source` built with BASE_FLAGS + `flags` as the cached `<stem>-<hash>.so`, loaded. Raises RuntimeError
    naming `what` (or the source) when there is no compiler or the build fails."""
    from hawk.abi import cache

    what = what or f"eagle/{source.parent.name}/{source.name}"
    cc = compiler()
    if cc is None:
        raise RuntimeError(f"{what} needs a C compiler (cc, gcc or clang; or $CC)")
    flags = list(flags)
    tag = hashlib.sha256(source.read_bytes() + f"\0{cc}\0{platform.machine()}\0{flags}".encode()).hexdigest()[:20]
    d = cache.cache_dir()
    so = d / f"{stem}-{tag}.so" if d else None
    with cache.building(so):  # (another process building the same library: wait for it, then load it)
        if so is not None and cache.entry_ok(so):
            try:
                return ctypes.CDLL(str(so))
            except OSError:
                pass  # sealed but not loadable here: build it again
        return _build(source, stem, so, cc, flags, what)


def _build(source: Path, stem: str, so: Path | None, cc: str, flags: list[str], what: str) -> ctypes.CDLL:
    """Compile `source` in a private folder, load it from there and copy it into the cache at `so`."""
    import subprocess  # (only to build: a process that finds the library in the cache never imports these)
    import tempfile

    from hawk.abi import cache

    tmp = Path(tempfile.mkdtemp(prefix=f"{stem}-"))
    try:
        built = tmp / f"{stem}.so"
        argv = [cc, *BASE_FLAGS, *flags, "-o", str(built), str(source)]
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"building {what} failed: {' '.join(argv)}: {r.stderr.strip()[-400:]}")
        lib = ctypes.CDLL(str(built))
        # never loaded back from the cache path just written (another process may be checking it); the private
        # copy is mapped already, so its folder goes whether or not the cache took the bytes
        if so is not None:
            cache.write_entry(so, built.read_bytes())
        return lib
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
