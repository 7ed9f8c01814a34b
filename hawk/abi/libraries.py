"""Loading a shared library that may live under one of several names (a runtime, a toolchain's library)."""

from __future__ import annotations

import ctypes
from collections.abc import Iterable


def first_loadable(names: Iterable[str]) -> tuple[ctypes.CDLL | None, list[str]]:
    """The first of `names` that ctypes loads (None if none does), and why each one tried before it failed: the
    caller words the error, naming what to install."""
    errors: list[str] = []
    for name in names:
        try:
            return ctypes.CDLL(name), errors
        except OSError as exc:
            errors.append(str(exc))
    return None, errors
