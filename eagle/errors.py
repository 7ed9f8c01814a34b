"""Errors a run raises for bad input: they name the kernel, the plane and what was expected."""

from __future__ import annotations


class InputError(ValueError):
    """A plane, extent or key that does not fit the kernel; nothing was written to the caller's arrays (an
    error found during the launch included: the compiled code then wrote scratch copies)."""


class RuntimeMissing(RuntimeError):
    """A target's runtime (driver, loader) is not present on this machine."""
