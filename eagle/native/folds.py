"""The parallel finish of a large sink (issue 10, "no single-thread cliffs") and of an ordered sink's pairs (#13).

A sink over hawk.abi.layout.PRIVATE_SLOTS slots that is only added into keeps a private copy per chunk (a fixed
number of chunks: Layout.fixed_chunks). The compiled finish would fold every copy into the sink (or, compensated,
into its companion) on one thread. Instead the executor (executor.c's fold_part) folds them first, in chunk order
and with the compiled finish's very steps (plain adds in the sink's type, or host_emit.neumaier on float64 pairs),
by ranges of slots on every thread; while the finish runs, the copies' size reads 0, so it folds none and the
bits are the finish's own.

An ordered sink (up to PAIR_SLOTS slots) keeps a (high, low) pair per slot per chunk. When no term spilled into
its exact accumulators (their last word is zero), the finish's fast path adds each slot's prior content and its
pairs by TwoSums into one pair and rounds once, fl(high + low). The executor runs that very path by ranges of
slots on every thread; if every slot's pair stayed exact, the finish then sees a one-slot sink and no pairs (it
rounds slot 0's result again, which gives it back). If some slot's pair lost a bit, that slot is left as it was
(flagged) and the others' pairs are emptied; the compiled finish then runs over every slot: a written slot with
no pairs rounds back to itself, a flagged one takes the finish's own path (its exact accumulator). When a term
spilled at lane time, the compiled finish does the sink alone. The bits are the finish's in every case. The
Python pool's launch does the same folds here in NumPy (all or nothing).

A slot-range stage (hawk.abi.layout.wants_slot_ranges: a sink too large for copies, applied by ranges of slots)
keeps no copies, but a compensated sink's companion (sum, correction per slot) still goes into the sink at the
finish: slot = (prior + sum) + correction (a zero correction left out), rounded once (kinds 5, 6), by ranges of
slots on every thread; while the finish runs, the sink's size reads 0, so its own companion loop does nothing.
"""

from __future__ import annotations

import numpy as np

from hawk.abi.layout import PRIVATE_SLOTS, Layout

PARALLEL_FINISH = True  # turned off, the compiled finish folds every copy alone (tests compare the bits)
FOLD_SLOTS = 1 << 14  # the fewest slots a part of the fold takes
PAIR_KINDS = (3, 4)  # an ordered sink's float64 / float32 (high, low) pairs


def copy_fold(policy: str, dtype: np.dtype) -> tuple[int, int] | None:
    """(values per slot, fold kind) of a sink's per-chunk copies in `dtype`, as executor.c's fold_part and dist.c
    fold them: plain 0 (float64) / 1 (float32) into the sink, compensated 2 (float64 (sum, correction) pairs into
    the companion), ordered 3 / 4 (the float64 (high, low) pairs of a float64 / float32 sink); None where no fold
    applies."""
    if policy == "plain" and dtype in (np.float64, np.float32):
        return 1, 0 if dtype == np.float64 else 1
    if policy == "compensated" and dtype == np.float64:
        return 2, 2
    if policy == "ordered" and dtype in (np.float64, np.float32):
        return 2, PAIR_KINDS[dtype == np.float32]
    return None


def fold_plan(lay: Layout, buffers: list[np.ndarray], nchunks: int) -> list[tuple]:
    """(copies buffer, target buffer, kind, slots, exact buffer, lost flags) per sink over PRIVATE_SLOTS slots
    that is only added into: plain (kind 0: float64, 1: float32; into the sink) or compensated (kind 2: into its
    companion's pairs); and per ordered sink of at least FOLD_SLOTS values with a pair per chunk (kinds 3, 4: the
    sink's pairs, the sink, its exact accumulators, a zeroed flag per slot). One chunk's copy is folded by the
    executor too (the compiled finish would take the same steps): its fold refills it, so the next launch skips
    its reset (executor.c fold_range; 10**5 lanes into 10**6 slots reset 8 MB at every launch). A copies' fold
    ends with the Index plane that names the slots (Layout.fold_keys; else -1): a run of one chunk of few lanes
    folds only the slots its keys name (executor.c keyed_fold: every other slot of the copy holds its fill,
    -0.0, whose add leaves a value's bits as they are, so the bits are the dense fold's)."""
    if not PARALLEL_FINISH:
        return []
    folds: list[tuple] = []
    for name, slots in lay.private.items():
        policy = lay.sink_policy.get(name)
        if name not in lay.sinks or name in lay.stored or slots <= PRIVATE_SLOTS or \
                policy not in ("plain", "compensated") or \
                (policy == "compensated" and not lay.pairs_side_by_side(name)):
            continue  # (kind 2 reads (sum, correction) pairs side by side: every sink of this size keeps them so)
        priv = lay.buffer_index(name, "priv")
        target = lay.buffer_index(name, "comp" if policy == "compensated" else "sink")
        fold = copy_fold(policy, buffers[priv].dtype)
        if fold is None or buffers[target].dtype != buffers[priv].dtype or \
                buffers[priv].size != fold[0] * slots * nchunks or buffers[target].size != fold[0] * slots:
            continue  # (copies not made one per chunk: the finish folds them)
        kind = fold[1]
        plane = lay.fold_keys.get(name) if nchunks == 1 else None  # (a run of few lanes: the keyed fold)
        folds.append((priv, target, kind, slots, -1, None, -1 if plane is None else lay.buffer_index(plane, "index"),
                      lay.buffer_index(name, "sink")))
    if nchunks == 1:
        return folds
    return folds + companion_plan(lay, buffers) + pair_plan(lay, buffers, nchunks)


COMPANION_KINDS = (5, 6)  # a slot-range stage's compensated companion into its float64 / float32 sink


def companion_plan(lay: Layout, buffers: list[np.ndarray]) -> list[tuple]:
    """(companion, sink, kind 5 or 6, slots, -1, None) per compensated sink of a slot-range stage of at least
    FOLD_SLOTS slots (see fold_plan)."""
    if not lay.slot_ranges():
        return []
    folds = []
    for name in lay.sinks:
        if lay.sink_policy.get(name) != "compensated" or name in lay.private or not lay.pairs_side_by_side(name):
            continue  # (a smaller companion, sums then corrections, is the compiled finish's)
        target, comp = lay.buffer_index(name, "sink"), lay.buffer_index(name, "comp")
        sink = buffers[target]
        if sink.size < FOLD_SLOTS or buffers[comp].size != 2 * sink.size or buffers[comp].dtype != np.float64 or \
                sink.dtype not in (np.float64, np.float32):
            continue
        folds.append((comp, target, 5 if sink.dtype == np.float64 else 6, sink.size, -1, None))
    return folds


def pair_plan(lay: Layout, buffers: list[np.ndarray], nchunks: int) -> list[tuple]:
    """The ordered sinks whose pairs the executor folds (see fold_plan): a sink (not a kept cell, whose mean has
    counts too) with one pair per value per chunk, float64 or float32."""
    folds = []
    for name in lay.exact_names():
        if name not in lay.sinks or name not in lay.private or name in lay.stored or name in lay.mixed:
            continue
        try:
            pairs, target, exact = (lay.buffer_index(name, r) for r in ("pairs", "sink", "exact"))
        except (KeyError, ValueError, StopIteration):
            continue
        sink = buffers[target]
        n = sink.size
        fold = copy_fold("ordered", sink.dtype)
        if fold is None or n < FOLD_SLOTS or buffers[pairs].size != 2 * n * nchunks or \
                buffers[pairs].dtype != np.float64 or buffers[exact].size < 1:
            continue
        folds.append((pairs, target, fold[1], n, exact, np.zeros(n, np.uint8)))
    return folds


def parts(folds: list, most: int) -> int:
    """Ranges of slots the fold runs in: up to `most`, each at least FOLD_SLOTS slots of the smallest sink (the
    ranges never change a result: each slot is folded alone)."""
    return min(most, max(1, min(f[3] for f in folds) // FOLD_SLOTS)) if folds else 1


def fold_python(keep: list[np.ndarray], folds: list, nchunks: int) -> list[tuple[int, int]]:
    """The folds in NumPy: per copy in chunk order, the same IEEE steps on every slot at once. Returns the
    (buffer, size) the finish must see while it runs (the folded copies empty, a folded ordered sink one slot)."""
    hidden = []
    for priv, target, kind, slots, exact, *_ in folds:  # (a keyed fold's bits are its dense form's)
        t = keep[target]
        if kind in COMPANION_KINDS:  # (the same IEEE steps as executor.c's companion_range)
            comp = keep[priv]  # ((sum, correction) side by side: Layout.pairs_side_by_side)
            total, fix = t.astype(np.float64) + comp[0:2 * slots:2], comp[1:2 * slots:2]
            t[:] = np.where(fix == 0.0, total, total + fix).astype(t.dtype)  # (a zero correction left out)
            hidden.append((target, 0))
            continue
        if kind in PAIR_KINDS:
            if keep[exact][-1] == 0 and fold_pairs_python(t, keep[priv].reshape(nchunks, -1, 2)):
                hidden += [(target, 1), (priv, 0)]
            continue
        hidden.append((priv, 0))
        copies = keep[priv].reshape(nchunks, -1)
        if kind != 2:
            for c in range(nchunks):
                np.add(t, copies[c], out=t)
            continue
        s, corr = t[0::2], t[1::2]  # (views of the (sum, correction) pairs, side by side)
        with np.errstate(invalid="ignore", over="ignore"):  # (inf - inf: a correction the step then drops)
            for c in range(nchunks):
                x = copies[c, 0::2]
                total = s + x
                lost = np.where(np.abs(s) >= np.abs(x), (s - total) + x, (x - total) + s)
                corr[:] = np.where(np.abs(total) < np.inf, corr + lost, corr) + copies[c, 1::2]
                s[:] = total
    return hidden


def fold_pairs_python(sink: np.ndarray, pairs: np.ndarray) -> bool:
    """An ordered sink's fast path (executor.c pairs_range) on every slot at once: writes the sink and returns
    True when every slot's pair stayed exact (and, for a float32 sink, its rounding is sure: pairs_range_f32),
    else leaves the sink as it was and returns False."""
    hi, lo = np.zeros(sink.shape), np.zeros(sink.shape)
    ok = True
    with np.errstate(invalid="ignore", over="ignore"):
        for x in (sink.astype(np.float64), *(p for c in pairs for p in (c[:, 0], c[:, 1]))):
            s1 = hi + x
            b1 = s1 - hi
            e1 = (hi - (s1 - b1)) + (x - b1)
            s2 = lo + e1
            b2 = s2 - lo
            e2 = (lo - (s2 - b2)) + (e1 - b2)
            hi, lo = s1, s2
            ok = ok and bool(np.all(e2 == 0))
        if ok and sink.dtype == np.float32:
            t = hi + lo
            b = t - hi
            low = (hi - (t - b)) + (lo - b)
            tie = (t.view(np.uint64) & np.uint64((1 << 29) - 1)) == np.uint64(1 << 28)
            ok = not bool(np.any(tie & (low != 0)))
            hi, lo = t, np.zeros_like(t)
        if ok:
            sink[:] = hi + lo
    return ok
