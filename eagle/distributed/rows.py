"""Row cells (reductions keeping the leading lane axes) in a shard that runs at whole-run lane numbers.

A shard whose kernel reads neighbours or its own coordinates runs its lanes at their numbers in the whole run
(eagle/distributed/geometry.py), and the compiled code then numbers a row cell's slots, and counts them, as the
whole run does: slot `r * K + j` of `R * K` (R: the run's rows, K: the slots a row keeps, 1 for a row sum). So
the lanes half gets the cell's state (the cell, a mean's counts, a compensated companion, an ordered cell's
exact accumulators and parked pairs, a fold's per-slot entries) sized for the whole run's slots, writes only the
slots of its own rows there, and `own_slots` then takes those out, laid out as a run of the shard's rows alone
lays them out, for the finish half, which was prepared for the shard's own rows.

Every such buffer is `A` blocks of one entry of `B` values per slot (`A x slots x B`), then `T` more values:

| role | A | B | T |
|---|---|---|---|
| cell | components | 1 | 0 |
| count (a mean's) | 1 | 1 | 0 |
| comp (compensated: sums, then corrections) | 2 x components | 1 | 0 |
| exact (per slot: values, then a mean's counts) | components (+1 for a mean) | words per accumulator | 1 |
| parked (a (high, low) pair per value) | components (+1 for a mean) | 2 | 0 |
| fold (a flag, then the payload) | 1 | components + 1 | 0 |

Slots are row-major over the kept axes, so a shard's rows `[r0, r0 + n)` are the slots `[r0 * K, (r0 + n) * K)`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hawk.abi.exact import words as exact_words


@dataclass(frozen=True)
class Slots:
    """Where a shard's own slots lie in a row cell's state buffer sized for the whole run."""

    blocks: int  # A
    per_row: int  # K: slots per row of the leading axis
    entry: int  # B
    tail: int  # T
    rows: int  # the whole run's rows

    def size(self, rows: int) -> int:
        """Values of the buffer for a run of `rows` rows."""
        return self.blocks * rows * self.per_row * self.entry + self.tail


def slots(r, role: str, extents: tuple[int, ...], rows: int, dtype) -> Slots:
    """The layout above for reduction `r`'s buffer of `role`, in a run of float `dtype` whose lanes have
    `extents` (the shard's: its trailing extents are the run's) and whose leading axis has `rows` rows in all."""
    comps = math.prod(r.payload) if r.payload else 1
    values = comps + (1 if r.kind == "mean" else 0)
    per_row = math.prod(extents[1:len(r.kept)])
    blocks, entry, tail = {
        "cell": (comps, 1, 0),
        "count": (1, 1, 0),
        "comp": (2 * comps, 1, 0),
        "exact": (values, exact_words(np.dtype(dtype).name), 1),
        "parked": (values, 2, 0),
        "fold": (1, comps + 1, 0),
    }[role]
    return Slots(blocks, per_row, entry, tail, rows)


def own_slots(xp, a, s: Slots, first_row, rows: int):
    """The slots of rows `[first_row, first_row + rows)` of buffer `a` (laid out for the whole run), laid out as a
    run of those rows alone: `first_row` may be traced (a JAX shard's index times its rows)."""
    whole = s.blocks * s.rows * s.per_row * s.entry
    body = a[:whole].reshape(s.blocks, s.rows * s.per_row, s.entry)
    picked = xp.take(body, first_row * s.per_row + xp.arange(rows * s.per_row), axis=1).reshape(-1)
    return xp.concatenate([picked, a[whole:]]) if s.tail else picked


def place_slots(xp, a, s: Slots, first_row, rows: int):
    """The inverse of `own_slots` for a cut cell: the slots of rows `[first_row, first_row + rows)` (`a`, laid out
    as a run of those rows alone) placed in a buffer laid out for the whole run, zeros elsewhere (a later stage's
    lanes, at whole-run numbers, read only their own rows' slots)."""
    n = rows * s.per_row
    body = a[:s.blocks * n * s.entry].reshape(s.blocks, n, s.entry)
    padded = xp.concatenate([body, xp.zeros((s.blocks, 1, s.entry), dtype=body.dtype)], axis=1)
    src = xp.arange(s.rows * s.per_row) - first_row * s.per_row
    src = xp.where((src >= 0) & (src < n), src, n)
    placed = xp.take(padded, src, axis=1).reshape(-1)
    return xp.concatenate([placed, a[s.blocks * n * s.entry:]]) if s.tail else placed
