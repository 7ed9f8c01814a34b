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

from eagle import fpenv, native
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
_IN, _FRESH, _CELL, _RARE = range(4)  # what Prepared.rebind does with a slot (Prepared.slots)
_SMALL_CELL = 4096  # a cell of at most this many values starts each reused run as a copy of a template
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
    if len(stages) == 1:  # (the common case, without the bookkeeping for stages before a refusal)
        st = stages[0]
        st.launch()
        st.commit()
        return
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


def fires_alone(st) -> bool:
    """Whether launching `st` is its foreign call and nothing else: a host stage on the native executor that saves
    nothing before its launch (no output stored by key in place) and commits nothing after it (no cell or
    scratch copy handed to the caller's arrays, or scratch copies its native launch copies back itself:
    launched_alone), so run_stages([st]) is `st.fire_native()` (what a bound launch and a reused run then
    call)."""
    return isinstance(st, Prepared) and st.args.lib is not None and not (st.saves or st.copies) and \
        (not st.staged or bool(st.args.stage.copy_back))


def launched_alone(stages: list):
    """The stage of a one-stage run that a bound launch fires by its foreign call alone, or None: one that
    `fires_alone`, or one whose whole commit is copying its staged scratch copies (a scatter's passed sink)
    into the caller's arrays, which its native launch is then told to do itself when it refuses nothing
    (executor.c, copy_back; a bound 1000-lane plain scatter into 1024 slots: 3.1 -> 1.8 us)."""
    if len(stages) != 1:
        return None
    st = stages[0]
    if isinstance(st, Prepared) and st.args.lib is not None and st.staged and not (st.saves or st.copies):
        st.args.stage.copy_back = 1
    return st if fires_alone(st) else None


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
                 recipe=None, *, fold: bool = False, saves=(), diverts=()):
        self.launcher, self.lib, self.buffers = launcher, lib, buffers
        self.nchunks, self.results, self.copies = nchunks, results, copies
        self.staged = list(staged)
        self.saves = list(saves)  # (caller's array written in place, the copy of it each launch saves first)
        self.diverts = list(diverts)  # (buffer of a sink written in place, where a refused launch's finish writes)
        self.recipe, self._kept = recipe, None
        self.per_run = [(k, how) for k, how in enumerate(recipe or ()) if how[0] != "keep"]  # what rebind redoes
        self._gone = [(k, 5 * k) for k, how in self.per_run if how[0] != "staged"]  # what release lets go of
        # self.per_run as `rebind` walks it (`slots`), made by the first rebind: a stage is rebound only by its
        # cache entry (eagle/native/reuse.py), whose key fixes the specialisation, dtype and shapes it depends on
        self._slots: list[tuple] | None = None
        sig = launcher.binder.sig
        self.checks_keys = bool(launcher.lay.index_keys) or any(p.kind == "index" and p.sorted for p in sig.planes)
        self.meta = buffers[launcher.meta_k]
        self.err = buffers[launcher.err_k]
        self.out_k = [cell_index(launcher.lay, c) for c in launcher.lay.cells_out]
        self._cells_out_at = list(zip(launcher.lay.cells_out, self.out_k, strict=True))
        self.cells_out = {c: buffers[k] for c, k in self._cells_out_at}
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
                                     launcher.threads, self.split, self.folds, nparts, self.diverts)
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
                with fpenv.ieee():  # (the native executor sets IEEE mode itself)
                    self.launch_python()
            else:
                self.fire_native()
        except BaseException:
            self.restore()
            raise

    def fire_native(self) -> None:
        """The native launch: the foreign call, then the refusal it reports in #err raised (check_errors). A
        stage that `fires_alone` is launched by this alone (a bound launch, a reused Plan.run)."""
        if self.args.fire():
            self.launcher.check_errors(self.err)

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
                with fpenv.ieee():  # (each pool thread in IEEE mode while it runs chunks)
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
        # refused in the lanes: the sinks written in place are left alone, their fold and finish go to scratch
        aside = [(k, keep[k], scratch) for k, scratch in self.diverts] if self.diverts and self.err.any() else []
        for k, _, scratch in aside:  # (as executor.c does)
            self.args.set_buffer(k, scratch)
        try:
            hidden = large_folds.fold_python(self.args.keep, self.folds, self.nchunks) if self.folds else []
            for k, size in hidden:  # the finish finds the folded copies empty (a folded ordered sink: one slot)
                vals[5 * k + 3] = size
            self.lib.finish(self.args.finish_ptrs)
            for k, _ in hidden:
                vals[5 * k + 3] = self.args.keep[k].size
        finally:
            for k, a, _ in aside:
                self.args.set_buffer(k, a)
        if self.err.any():
            self.launcher.check_errors(self.err)

    def rebind(self, b: Bound, cuts: dict, arrays: dict | None = None) -> None:
        """Point this stage at another run's arrays (`b`: bound with the same specialisation, shapes and given
        planes as the run it was prepared for; `cuts`: what the run's earlier stages hand on; `arrays`: the input
        planes by name, when not `b.arrays`). The run's outputs and cells are allocated afresh (they are its
        results); every internal buffer is reused. Runs at every reused Plan.run: it walks `slots` (the recipe's
        per-run slots, looked up once) and stores each slot's address in the argument block directly
        (args.set_buffer, inlined)."""
        if self._slots is None:
            self._slots = self.slots(b)
        results: dict[str, Array] = {}
        copies: list = []
        given = b.given
        if arrays is None:
            arrays = b.arrays
        bufs, keep, vals, address = self.buffers, self.args.keep, self.args.vals, native.address
        for k, k5, code, name, what in self._slots:
            if code == _IN:
                flat = arrays[name]
            elif code == _FRESH:  # a per-lane output the caller did not pass: a result of the run
                run_key, shape, dtype, flatten, make = what
                a = cuts[run_key] = make(shape, dtype)
                flat = a.reshape(-1) if flatten else a
                results[name] = Array(a)
            elif code == _CELL:  # a cell: a result of the run, starting at its identity
                r, shape, start, view = what
                if type(start) is np.ndarray:
                    flat = start.copy()  # (one call: np.empty then fill, or np.full, cost more at one lane)
                else:
                    flat = np.empty(start[0], dtype=b.dtype)
                    flat.fill(start[1])
                if view is not None and not given:
                    results[name] = Array(flat.reshape(view))
                else:
                    self.launcher.cell_results(name, r, flat, shape, b, results, copies)
            else:
                flat = self.rebind_rare(what, b, cuts, results)
                if flat is None:
                    continue
            bufs[k] = keep[k] = flat
            vals[k5] = vals[k5 + 1] = address(flat)
        self.results, self.copies = results, copies
        if self.out_k:
            self.cells_out = {c: bufs[k] for c, k in self._cells_out_at}

    def slots(self, b: Bound) -> list[tuple]:
        """The recipe's per-run slots as `rebind` walks them: (buffer index, its first value in the argument
        block, code, plane name, what the code needs), with everything fixed by the run's specialisation and
        shapes (an output's dtype, a cell's identity, the "#run:" names later stages find it by) worked out once
        per cache entry instead of at every run."""
        lc, out = self.launcher, []
        j = i = 0  # the staged pair / saved array each "staged" / "saved" slot takes, in recipe order
        for k, how in self.per_run:
            tag, name = how[0], how[1]
            if tag == "in":
                out.append((k, 5 * k, _IN, name, None))
            elif tag == "fresh":
                shape = how[2]
                dtype = lc.binder.out_dtype(name, b)
                make = np.empty if how[3] else np.zeros  # (an output every lane assigns: Launcher.buffers)
                out.append((k, 5 * k, _FRESH, name, (f"#run:{name}", shape, dtype, len(shape) != 1, make)))
            elif tag == "cell":
                shape, r = how[2], lc.red[name]
                size, fill = math.prod(shape), IDENT[r.kind]
                if size <= _SMALL_CELL:  # copied from a filled template at every run
                    start = np.empty(size, dtype=b.dtype)
                    start.fill(fill)
                else:
                    start = (size, fill)
                view = (shape if shape else (1,)) if name == "result" or not r.payload else None
                out.append((k, 5 * k, _CELL, name, (r, shape, start, view)))
            elif tag == "alias":  # a one-chunk kept cell's copy: the cell itself, rebound just before it
                out.append((k, 5 * k, _RARE, name, (tag, name, how[2])))
            else:
                out.append((k, 5 * k, _RARE, name, (tag, name, j if tag == "staged" else i)))
                j += tag == "staged"
                i += tag == "saved"
        return out

    def rebind_rare(self, what: tuple, b: Bound, cuts: dict, results: dict) -> np.ndarray | None:
        """`rebind` for the slots other than inputs, fresh outputs and cells: the flat array slot k now holds
        (None for a staged array, whose scratch copy stays in its slot)."""
        tag, name, n = what
        if tag == "cut":
            return cuts[name]
        if tag == "alias":
            return self.buffers[n]
        if tag == "shared":
            shared = cuts[f"#run:{name}"]
            results[name] = Array(b.given.get(name, shared))
            return shared.reshape(-1)
        if tag == "given":
            a = b.given[name]
            results[name] = Array(a)
            return a.reshape(-1)
        if tag == "staged":
            a, scratch = b.given[name], self.staged[n][1]
            self.staged[n] = (a, scratch)
            if self.copy_slot[n] >= 0:
                self.args.set_copy(self.copy_slot[n], a)
            cuts[f"#run:{name}"] = scratch
            results[name] = Array(a)
            return None
        if tag == "saved":  # written in place, saved first
            a = cuts[f"#run:{name}"] = b.given[name]
            self.saves[n] = (a, self.saves[n][1])
            results[name] = Array(a)
            return a.reshape(-1)
        raise RuntimeError(f"internal error: unknown recipe entry {tag!r} for '{name}'")

    def release(self) -> None:
        """Let go of one run's arrays (its inputs, results and the caller's arrays) while this stage waits in a
        cache for its next `rebind`, which points every one of those slots at new arrays before any launch."""
        bufs, keep, vals = self.buffers, self.args.keep, self.args.vals
        for k, k5 in self._gone:  # (a scratch copy stays: only the caller's array it starts from goes)
            bufs[k] = keep[k] = _GONE
            vals[k5] = vals[k5 + 1] = 0
        if self.copy_slot:
            args = self.args
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
                sum(s.nbytes for _, s in self.staged) + sum(s.nbytes for _, s in self.saves) + \
                sum(s.nbytes for _, s in self.diverts)
        return self._kept


def rebind_stages(stages: list[Prepared], b: Bound) -> dict:
    """Every prepared stage of a run pointed at another run's arrays (keys checked first, as `prepare_stages`
    does): the results by name."""
    for st in stages:
        if st.checks_keys:
            st.launcher.binder.check_keys(st.launcher.lay, b)
    if len(stages) == 1:  # (its results are the run's: no dict to gather them into)
        st = stages[0]
        st.rebind(b, {})
        return st.results
    results: dict = {}
    cuts: dict = {}
    for st in stages:
        st.rebind(b, cuts)
        results.update(st.results)
        cuts.update(st.cells_out)
    return results
