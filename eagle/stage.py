"""One stage of one run, prepared: every buffer allocated, the argument block packed, ready to launch.

`Prepared.launch` resets what must start fresh, runs the chunks (one call into the native executor, eagle/native,
or the same steps from Python on a thread pool), folds large sinks' copies and runs the finish; `commit` then
hands the results to the caller's arrays. `rebind` points a prepared stage at another run's arrays of the same
shapes and `release` lets go of them while it waits in a cache (eagle/native/reuse.py). `run_stages` launches a
run's stages in order and commits them only once every one has run, so a refused run leaves the caller's arrays
as they were. eagle.launch.Launcher allocates the buffers and makes these.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from eagle import native
from eagle.array import Array
from eagle.binding import Bound
from eagle.native import folds as large_folds
from hawk.abi.layout import Layout

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from eagle.launch import Launcher

IDENT = {"sum": 0.0, "mean": 0.0, "max": -np.inf, "min": np.inf, "fold": 0.0}  # (a fold's finish writes it)
OVERSPLIT = 4  # chunks per thread: threads take chunks as they come free, so a thread slowed by other work on
# its core (another library's spinning pool, say) leaves its later chunks to the others
_GONE = np.empty(0)  # what a released stage (Prepared.release) holds where a run's arrays were
_POOL: ThreadPoolExecutor | None = None


def _pool(n: int) -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None or _POOL._max_workers < n:
        from concurrent.futures import ThreadPoolExecutor  # (imported when first needed: not on a warm start)

        _POOL = ThreadPoolExecutor(max_workers=n, thread_name_prefix="eagle")
    return _POOL


def run_stages(stages: list) -> None:
    """Launch every stage of a run in order, then commit them all: a stage that refuses (a bad key found at run
    time) leaves the caller's arrays as they were, whichever stage it is (a stage that refuses restores what it
    wrote in place itself; the stages before it restore theirs here)."""
    for j, st in enumerate(stages):
        try:
            st.launch()
        except BaseException:
            for done in reversed(stages[:j]):
                if isinstance(done, Prepared):  # (a GPU stage writes scratch copies only)
                    done.restore()
            raise
    for st in stages:
        st.commit()


def cell_index(lay: Layout, name: str) -> int:
    """The buffer of an internal cell a stage hands to later ones: a total's cell, or a scan's block offsets."""
    try:
        return lay.buffer_index(name, "cell")
    except KeyError:
        pass
    try:
        return lay.buffer_index(name, "scan")
    except KeyError:
        return lay.buffer_index(name, "rscan")


def commit(copies, staged) -> None:
    """Hand a stage's results to the caller's arrays: given cells, then the scratch copies of staged arrays."""
    for dst, src in copies:
        np.copyto(dst, src.reshape(dst.shape))
    for dst, src in staged:
        np.copyto(dst, src)


class Prepared:
    """One stage of one run with every buffer allocated: `fire()` = `launch()` (reset what must start fresh,
    run the chunks, finish, check) then `commit()` (write the caller's cells and staged arrays). `nchunks`: the
    chunks each launch runs; `executor`: "native" (one call into eagle/native) or "python" (a Python pool);
    `fold`: fold a large sink's copies on every thread before the finish (eagle/native/folds.py), for a launch
    that runs the stage's own lanes and finish (a caller that swaps either leaves it off)."""

    def __init__(self, launcher: Launcher, lib, buffers, metas, nchunks, results, copies, resets, staged=(),
                 recipe=None, *, fold: bool = False, saves=()):
        self.launcher, self.lib, self.buffers = launcher, lib, buffers
        self.nchunks, self.results, self.copies = nchunks, results, copies
        self.staged = list(staged)
        self.saves = list(saves)  # (caller's array written in place, the copy of it each launch saves first)
        self.recipe, self._kept = recipe, None
        self.per_run = [(k, how) for k, how in enumerate(recipe or ()) if how[0] != "keep"]  # what rebind redoes
        sig = launcher.binder.sig
        self.checks_keys = bool(launcher.lay.index_keys) or any(p.kind == "index" and p.sorted for p in sig.planes)
        self.meta = buffers[launcher.meta_k]
        self.err = buffers[launcher.err_k]
        self.out_k = [cell_index(launcher.lay, c) for c in launcher.lay.cells_out]
        self.cells_out = {c: buffers[k] for c, k in zip(launcher.lay.cells_out, self.out_k, strict=True)}
        at = {native.address(a): k for k, a in enumerate(buffers) if a.size}
        self.resets = [(at[native.address(a)], fill) for a, fill in resets if a.size]
        # each chunk's copies (of sinks and kept cells) laid out chunk by chunk: each chunk resets its own part
        self.split = frozenset(k for k, _ in self.resets if launcher.lay.buffers[k].role in ("priv", "mark", "pairs")
                               and nchunks > 1 and buffers[k].size % nchunks == 0)
        copies_in = [(at[native.address(scratch)], dst) for dst, scratch in self.staged if scratch.size]
        self.copy_slot = []  # staged pair j -> its copy in the argument block (-1: empty, nothing to copy)
        for _, scratch in self.staged:
            self.copy_slot.append(len([s for s in self.copy_slot if s >= 0]) if scratch.size else -1)
        nat = native.library() if getattr(lib, "lanes", None) is not None else None
        self.executor = "native" if nat is not None else "python"
        # a large sink's parallel finish (`fold`: a whole launch, lanes then finish, as Launcher.prepare makes)
        self.folds = large_folds.fold_plan(launcher.lay, buffers, nchunks) if fold else []
        nparts = large_folds.parts(self.folds, OVERSPLIT * launcher.threads)
        self.args = native.StageArgs(nat, buffers, metas, launcher.meta_k, launcher.err_k, self.resets, copies_in,
                                     launcher.threads, self.split, self.folds, nparts)
        if nat is not None:
            self.args.functions(lib.lanes, lib.finish)

    def fire(self) -> None:
        self.launch()
        self.commit()

    def commit(self) -> None:
        if self.copies or self.staged:
            commit(self.copies, self.staged)

    def launch(self) -> None:
        for dst, saved in self.saves:
            np.copyto(saved, dst)
        try:
            if self.args.lib is None:
                self.launch_python()
            elif self.args.fire():
                self.launcher.check_errors(self.err)
        except BaseException:
            self.restore()
            raise

    def restore(self) -> None:
        """Put back what the arrays this stage writes in place held before its launch (the run refused)."""
        for dst, saved in self.saves:
            np.copyto(dst, saved)

    def launch_python(self) -> None:
        """The launch without the native executor: the same steps, chunks handed to a Python thread pool."""
        keep = self.args.keep
        for dst, src in self.staged:  # the scratch copies start from what the caller's arrays hold now
            np.copyto(src, dst)
        for k, fill in self.resets:
            if k not in self.split:
                keep[k].fill(fill)
        lanes = self.lib.lanes
        if self.nchunks == 1:
            self.meta[2] = 0
            lanes(self.args.chunk_ptrs[0])
        else:  # the calling thread and the pool's take the chunks as they come free (the order of the partials,
            # and so the results, do not depend on which thread ran which chunk)
            todo = iter(enumerate(self.args.chunk_ptrs))
            parts = [(keep[k].reshape(self.nchunks, -1), fill) for k, fill in self.resets if k in self.split]

            def work():
                for c, ptrs in todo:
                    for part, fill in parts:  # this chunk's own copies
                        part[c].fill(fill)
                    lanes(ptrs)

            workers = min(self.launcher.threads, self.nchunks)
            futures = [_pool(workers).submit(work) for _ in range(workers - 1)]
            work()
            for f in futures:
                f.result()
        self.meta[2] = self.nchunks
        vals = self.args.vals
        hidden = large_folds.fold_python(self.args.keep, self.folds, self.nchunks) if self.folds else []
        for k, size in hidden:  # the finish finds the folded copies empty (a folded ordered sink: one slot)
            vals[5 * k + 3] = size
        self.lib.finish(self.args.finish_ptrs)
        for k, _ in hidden:
            vals[5 * k + 3] = self.args.keep[k].size
        if self.err.any():
            self.launcher.check_errors(self.err)

    def rebind(self, b: Bound, cuts: dict) -> None:
        """Point this stage at another run's arrays (`b`: bound with the same specialisation, shapes and given
        planes as the run it was prepared for; `cuts`: what the run's earlier stages hand on). The run's outputs
        and cells are allocated afresh (they are its results); every internal buffer is reused."""
        lc = self.launcher
        results: dict[str, Array] = {}
        copies: list = []
        j = i = 0
        bufs, args = self.buffers, self.args
        vals, keep = args.vals, args.keep
        for k, how in self.per_run:
            tag, name = how[0], how[1]
            if tag == "in":
                flat = b.arrays[name]
            elif tag == "fresh":
                shape = how[2]
                a = cuts[f"#run:{name}"] = np.zeros(shape, dtype=lc.binder.out_dtype(name, b))
                flat = a if len(shape) == 1 else a.reshape(-1)
                results[name] = Array(a)
            elif tag == "cut":
                flat = cuts[name]
            elif tag == "shared":
                shared = cuts[f"#run:{name}"]
                flat = shared.reshape(-1)
                results[name] = Array(b.given.get(name, shared))
            elif tag == "given":
                a = b.given[name]
                flat = a.reshape(-1)
                results[name] = Array(a)
            elif tag == "staged":
                a, scratch = b.given[name], self.staged[j][1]
                self.staged[j] = (a, scratch)
                if self.copy_slot[j] >= 0:
                    args.set_copy(self.copy_slot[j], a)
                j += 1
                cuts[f"#run:{name}"] = scratch
                results[name] = Array(a)
                continue
            elif tag == "saved":  # written in place, saved first
                a = cuts[f"#run:{name}"] = b.given[name]
                self.saves[i] = (a, self.saves[i][1])
                i += 1
                flat = a.reshape(-1)
                results[name] = Array(a)
            else:  # "cell": a result of the run
                shape = how[2]
                r = lc.red[name]
                flat = np.empty(math.prod(shape), dtype=b.dtype)
                flat.fill(IDENT[r.kind])  # (np.full's Python wrapper costs more than this at one lane)
                lc.cell_results(name, r, flat, shape, b, results, copies)
            bufs[k] = keep[k] = flat  # (args.set_buffer, inlined: this runs for every slot of every reused run)
            vals[5 * k] = vals[5 * k + 1] = native.address(flat)
        self.results, self.copies = results, copies
        if self.out_k:
            self.cells_out = {c: bufs[k] for c, k in zip(lc.lay.cells_out, self.out_k, strict=True)}

    def release(self) -> None:
        """Let go of one run's arrays (its inputs, results and the caller's arrays) while this stage waits in a
        cache for its next `rebind`, which points every one of those slots at new arrays before any launch."""
        args = self.args
        bufs, keep, vals = self.buffers, args.keep, args.vals
        for k, how in self.per_run:
            if how[0] != "staged":  # (a scratch copy stays: only the caller's array it starts from goes)
                bufs[k] = keep[k] = _GONE
                vals[5 * k] = vals[5 * k + 1] = 0
        if self.copy_slot:
            for j, slot in enumerate(self.copy_slot):
                self.staged[j] = (_GONE, self.staged[j][1])
                if slot >= 0:
                    args.copies[slot].src = None
                    args.copy_src[slot] = _GONE
        if self.saves:  # the saved copies stay, as scratch copies do
            self.saves = [(_GONE, saved) for _, saved in self.saves]
        self.results, self.copies = {}, []
        if self.out_k:
            self.cells_out = {}

    def kept_bytes(self) -> int:
        """Bytes of the buffers this stage keeps from one run to the next (internal ones and scratch copies)."""
        if self._kept is None:
            keep = {k for k, how in enumerate(self.recipe or ()) if how[0] == "keep"}
            self._kept = sum(a.nbytes for k, a in enumerate(self.buffers) if k in keep) + \
                sum(s.nbytes for _, s in self.staged) + sum(s.nbytes for _, s in self.saves)
        return self._kept


def rebind_stages(stages: list[Prepared], b: Bound) -> dict:
    """Every prepared stage of a run pointed at another run's arrays (keys checked first, as `prepare_stages`
    does): the results by name."""
    for st in stages:
        if st.checks_keys:
            st.launcher.binder.check_keys(st.launcher.lay, b)
    results: dict = {}
    cuts: dict = {}
    for st in stages:
        st.rebind(b, cuts)
        results.update(st.results)
        cuts.update(st.cells_out)
    return results
