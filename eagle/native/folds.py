"""The parallel finish of a large sink (issue 10, "no single-thread cliffs").

A sink over hawk.abi.layout.PRIVATE_SLOTS slots that is only added into keeps a private copy per chunk (a fixed
number of chunks: Layout.fixed_chunks). The compiled finish would fold every copy into the sink (or, compensated,
into its companion) on one thread. Instead the executor (executor.c's fold_part) folds them first, in chunk order
and with the compiled finish's very steps (plain adds in the sink's type, or host_emit.neumaier on float64 pairs),
by ranges of slots on every thread; while the finish runs, the copies' size reads 0, so it folds none and the
bits are the finish's own. The Python pool's launch does the same folds here in NumPy, slot by slot.
"""

from __future__ import annotations

import numpy as np

from hawk.abi.layout import PRIVATE_SLOTS, Layout

PARALLEL_FINISH = True  # turned off, the compiled finish folds every copy alone (tests compare the bits)
FOLD_SLOTS = 1 << 14  # the fewest slots a part of the fold takes


def fold_plan(lay: Layout, buffers: list[np.ndarray], nchunks: int) -> list[tuple[int, int, int, int]]:
    """(copies buffer, target buffer, kind, slots) per sink over PRIVATE_SLOTS slots that is only added into:
    plain (kind 0: float64, 1: float32; into the sink) or compensated (kind 2: into its companion's pairs)."""
    if not PARALLEL_FINISH or nchunks == 1:
        return []
    folds = []
    for name, slots in lay.private.items():
        policy = lay.sink_policy.get(name)
        if name not in lay.sinks or name in lay.stored or slots <= PRIVATE_SLOTS or \
                policy not in ("plain", "compensated"):
            continue
        priv = lay.buffer_index(name, "priv")
        target = lay.buffer_index(name, "comp" if policy == "compensated" else "sink")
        width = 2 if policy == "compensated" else 1
        if buffers[priv].size != width * slots * nchunks or buffers[target].size != width * slots:
            continue  # (copies not made one per chunk: the finish folds them)
        kind = 2 if policy == "compensated" else 0 if buffers[target].dtype == np.float64 else 1
        folds.append((priv, target, kind, slots))
    return folds


def parts(folds: list, most: int) -> int:
    """Ranges of slots the fold runs in: up to `most`, each at least FOLD_SLOTS slots of the smallest sink (the
    ranges never change a result: each slot is folded alone)."""
    return min(most, max(1, min(f[3] for f in folds) // FOLD_SLOTS)) if folds else 1


def fold_python(keep: list[np.ndarray], folds: list, nchunks: int) -> None:
    """The folds in NumPy: per copy in chunk order, the same IEEE steps on every slot at once."""
    for priv, target, kind, slots in folds:
        t = keep[target]
        copies = keep[priv].reshape(nchunks, -1)
        if kind != 2:
            for c in range(nchunks):
                np.add(t, copies[c], out=t)
            continue
        s, corr = t[:slots], t[slots:]
        with np.errstate(invalid="ignore", over="ignore"):  # (inf - inf: a correction the step then drops)
            for c in range(nchunks):
                x = copies[c, :slots]
                total = s + x
                lost = np.where(np.abs(s) >= np.abs(x), (s - total) + x, (x - total) + s)
                corr[:] = np.where(np.abs(total) < np.inf, corr + lost, corr) + copies[c, slots:]
                s[:] = total
