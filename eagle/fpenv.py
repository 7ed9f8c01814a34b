"""IEEE floating-point mode for compiled code run without the native executor (eagle/stage.py's Python path).

The native executor sets IEEE mode itself for each launch (executor.c, fp_ieee: subnormals kept, round to
nearest) and restores the caller's. Without it, a launch from a thread that flushes subnormals (XLA's threads,
`torch.set_flush_denormal(True)`) would run the compiled code that way too. `ieee()` gives the same guarantee
through the C library's `fegetenv` / `fesetenv(FE_DFL_ENV)` (glibc's default environment: round to nearest,
every exception masked, flush-to-zero and denormals-are-zero off on x86 and FZ off on aarch64), restoring the
caller's environment after. Where the C library offers no such default (not glibc), it does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Iterator

_STATE: dict = {}
_ENV_BYTES = 512  # more than any fenv_t (glibc x86_64: 32 bytes, aarch64: 8)


def _libm():
    """The C math library with fegetenv/fesetenv typed, or None where FE_DFL_ENV is not glibc's (fenv_t *) -1."""
    if "lib" not in _STATE:
        lib = None
        if sys.platform.startswith("linux"):
            try:
                lib = _open_libm()
                lib.fegetenv.argtypes = lib.fesetenv.argtypes = [ctypes.c_void_p]
                lib.fegetenv.restype = lib.fesetenv.restype = ctypes.c_int
            except (OSError, AttributeError):
                lib = None
        _STATE["lib"] = lib
    return _STATE["lib"]


def _open_libm() -> ctypes.CDLL:
    """glibc's libm by its soname; ctypes.util's search (subprocesses, and importing subprocess: about 5 ms of a
    warm start) only where that name does not load."""
    try:
        return ctypes.CDLL("libm.so.6")
    except OSError:
        from ctypes import util

        return ctypes.CDLL(util.find_library("m") or "libm.so.6")


@contextlib.contextmanager
def ieee() -> Iterator[None]:
    """Run the body in IEEE mode (subnormals kept, round to nearest), then restore the thread's environment."""
    lib = _libm()
    if lib is None:
        yield
        return
    saved = ctypes.create_string_buffer(_ENV_BYTES)
    if lib.fegetenv(saved) != 0:
        yield
        return
    lib.fesetenv(ctypes.c_void_p(-1))  # glibc's FE_DFL_ENV
    try:
        yield
    finally:
        lib.fesetenv(saved)
