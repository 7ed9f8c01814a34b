"""Peers: each module has NAME, `load()` (raises ImportError/RuntimeError with a reason when the peer cannot run)
and `impls(op, d) -> {name: Impl}` for the operations it has (an empty dict for those it lacks)."""

from __future__ import annotations

import importlib

ORDER = ("numpy", "jax", "torch", "numba", "warp")


def load(names=ORDER) -> tuple[dict, dict[str, str]]:
    """The peer modules that import and start here, and a reason for each one that does not."""
    ready, skipped = {}, {}
    for name in names:
        try:
            mod = importlib.import_module(f"benchmarks.peers.{name}_peer")
            mod.load()
        except Exception as e:  # a peer that is absent or broken is skipped, never fatal
            skipped[name] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
            continue
        ready[name] = mod
    return ready, skipped
