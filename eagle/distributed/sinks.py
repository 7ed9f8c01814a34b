"""Large sinks across shards: what crosses the collectives is one copy per shard, not every chunk's.

A sink's partial state in a lanes half is one private copy per chunk (a plain sink's slots, a compensated one's
(sum, correction) pairs, an ordered one's (high, low) pairs) and, for an ordered sink, one exact accumulator per
slot shared by the chunks (int64 limbs, hawk/exact.py) with a count of the terms the pairs could not take. Moved
as they are, that is S x C copies gathered and 72 words per slot summed, whatever the terms. For a large sink
(LARGE values a copy or more):

* `FOLD`: each shard first folds its C copies into one (dist.c `eagle_dist_fold`, with the compiled finish's own
  steps; a compensated sink's where its pairs lie side by side, past hawk.abi.layout.SIDE_BY_SIDE values), the
  shards gather one copy each, and the finish gets them as copies s x C of S x C, the others zero (a zero copy
  adds nothing: x + 0 = x, a TwoSum with 0 is exact). An ordered sink's folded pair holds the exact
  sum of the shard's terms for the slot unless a TwoSum erred; the finish rounds the exact total of what it is
  given once, so the bits are those of the copies moved whole. Where any shard's pair erred (the counts summed
  over the shards), every shard moves the copies whole instead (the same decision everywhere). A plain or
  compensated sink's fold adds the shard's copies in chunk order first: the result is the finish's combine of
  the shards' sums (within the same bound, the same on every shard and for every topology, as before).
* `XSUM`: an ordered sink's shared exact accumulators are summed only when some shard's pairs spilled a term
  into them (the spill counts, their last words, summed first): else every shard's are zero, and so is the sum.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

import numpy as np

from eagle.native.folds import copy_fold

FOLD, XSUM = "fold", "xsum"
LARGE = 1 << 12  # values of one private copy (or words of a sink's exact accumulators) from which they are folded


class _FoldHead(ctypes.Structure):  # dist.c's dist_fold
    _fields_ = [("kind", ctypes.c_int64), ("copies", ctypes.c_int64), ("slots", ctypes.c_int64)]


@dataclass
class Fold:
    """One sink's copies in a lanes half: dist.c's kind, the copies (chunks), the slots, values a copy holds, and
    whether a fold can err (ordered pairs)."""

    kind: int
    copies: int
    slots: int
    values: int
    exact: bool
    _head: _FoldHead | None = field(default=None, repr=False)

    @property
    def address(self) -> int:
        """The address of its dist_fold (dist.c), made once."""
        if self._head is None:
            self._head = _FoldHead(self.kind, self.copies, self.slots)
        return ctypes.addressof(self._head)

    def run(self, copies: np.ndarray) -> tuple[np.ndarray, int]:
        """(the folded copy, slots whose pair erred) of one shard's copies, through dist.c (eagle.torch)."""
        from eagle import native
        from eagle.distributed.stages import library

        want = np.float32 if self.kind == 1 else np.float64  # (kinds 3, 4: float64 pairs of either sink)
        if copies.dtype != want or copies.size != self.copies * self.values:
            raise RuntimeError(f"internal error: a fold of kind {self.kind} takes {self.copies} x {self.values} "
                               f"{np.dtype(want).name} values, got {copies.size} {copies.dtype}")
        out = np.empty(self.values, dtype=copies.dtype)
        a = np.ascontiguousarray(copies)
        bad = library().eagle_dist_fold_run(ctypes.c_void_p(self.address), ctypes.c_void_p(native.address(a)),
                                      ctypes.c_void_p(native.address(out)))
        return out, int(bad)

    def spread(self, xp, got, shards: int):
        """Every shard's folded copy (gathered) as the finish takes the copies: shard s's at copy s x C, the
        others empty (-0.0 for a plain or compensated sink's copies, as the launcher fills them: x + -0.0 is x,
        bit for bit; zero for an ordered sink's pairs)."""
        g = got.reshape(shards, 1, self.values)
        empty = 0.0 if self.exact else -0.0
        z = xp.full((shards, self.copies - 1, self.values), empty, dtype=got.dtype)
        return xp.concatenate([g, z], axis=1).reshape(-1)


def large_sinks(lay, bufs: list, outs: list[int], kinds: list, chunks: int) -> dict[int, Fold]:
    """Relabel the lanes half's results of large sinks (kinds changed in place): a sink's private copies FOLD (the
    returned Fold by result position), an ordered sink's shared exact accumulators XSUM (when its terms go to
    pairs first, so that the spill count says whether any reached them)."""
    folds: dict[int, Fold] = {}
    for i, j in enumerate(outs):
        buf = lay.buffers[j]
        name = buf.name
        if name not in lay.sinks or name in lay.stored:
            continue
        slots = lay.private.get(name, 0)
        if buf.role == "exact" and name in lay.exact_names() and bufs[j].size >= LARGE and \
                any(b.name == name and b.role == "pairs" and a.size for b, a in zip(lay.buffers, bufs, strict=True)):
            kinds[i] = XSUM
            continue
        if buf.role not in ("pairs", "priv") or chunks < 2 or not slots:
            continue
        if buf.role == "pairs":  # (float64 pairs; the fold's kind says the sink's type: dist.c FOLD_PAIRS)
            sink = next(a for b, a in zip(lay.buffers, bufs, strict=True) if b.name == name and b.role == "sink")
            fold = copy_fold("ordered", sink.dtype) if bufs[j].dtype == np.float64 else None
        else:
            fold = copy_fold(lay.policy_of(name), bufs[j].dtype)
            if lay.policy_of(name) == "compensated" and not lay.pairs_side_by_side(name):
                fold = None  # (dist.c's kind 2 reads pairs side by side; smaller copies move whole)
        if fold is None:
            continue
        width, kind = fold
        if width * slots < LARGE or bufs[j].size != width * slots * chunks:
            continue
        folds[i] = Fold(kind, chunks, slots, width * slots, buf.role == "pairs")
        kinds[i] = FOLD
    return folds
