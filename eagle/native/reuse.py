"""Plan.run's fast path on the host (and hawk.run's, for a loaded artifact: eagle/artifact.py): a run's prepared
stages kept and rebound to the next run of the same shape.

Preparing a run (checking its planes, allocating every buffer, building the argument blocks) costs far more than
launching a small one. A host plan therefore keeps the prepared stages of recent runs, keyed by what decides
every outcome of the binder's checks and every buffer's size: the planes' names in order, each array's type,
dtype, shape, strides and (for arrays the run writes) writability, the type of each Param, the value of each
grid extent passed, and base=/count=. A later run with the same key rebinds those stages to its own arrays
(eagle.stage.Prepared.rebind): its inputs are taken as the binder takes them (what the key fixes decides, once
per entry, whether an array is taken as it is or converted: `RunCache.steps`), its outputs and cells are
allocated afresh (they are the results it hands back), every internal buffer is reused.

What depends on the values and not on the key is checked again at every run: keys of Index planes against their
sinks (`check_keys`), and, when the run writes arrays the caller passed, their overlaps with each other and with
the inputs (the binder's `_check_written`). Anything else (masked arrays, DLPack producers, lists, NumPy scalar
types other than float32/float64) takes the full path. An entry is taken out of the cache while its run uses
it, so runs from several threads never share buffers; a run that raises does not put its entry back. A kept
entry holds none of its last run's arrays (Prepared.release), and a run whose internal buffers and scratch copies
exceed MAX_KEPT_BYTES is not kept.

The common case has a shorter path with the same checks and results: a run of one stage that checks no keys
and takes every plane as it is, writing no array the caller passed (`Entry.alone`), is rebound to its planes
directly, and on the native executor launched by its foreign call alone (`Entry.fires`).

After a run, `plan.last_executor` says which executor ran each stage ("native" or "python"), as
`plan.last_chunks` says how many chunks.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from eagle.binding import Bound
from eagle.stage import Prepared, fires_alone, rebind_stages, run_stages

MAX_ENTRIES = 8  # shapes kept per plan (least recently used dropped first)
MAX_KEPT_BYTES = 64 << 20  # a run whose internal buffers and scratch copies hold more is not kept (preparing it
# costs little next to running it, and the cache would hold the memory until the plan goes)
_INT64 = (-(1 << 63), 1 << 63)


class Entry:
    """One kept run: its Bound template (what the key fixes, holding no array between runs), prepared stages,
    facts ((chunks, executor) per stage) and `steps` (RunCache.steps); it unpacks as (template, stages, facts,
    steps). `alone`: the one stage when the run is a single stage that checks no keys and takes every plane as
    it is (no conversion, no array the caller passed to be written): its planes are then exactly the arrays
    the binder would hand it, so a run rebinds it to them directly (Prepared.rebind's `arrays`). `fires`: that
    stage again when its launch is its foreign call alone (eagle.stage.fires_alone), else None."""

    __slots__ = ("template", "stages", "facts", "steps", "alone", "fires")

    def __init__(self, template: Bound, stages: list, facts: tuple, steps: tuple):
        self.template, self.stages, self.facts, self.steps = template, stages, facts, steps
        simple = len(stages) == 1 and not stages[0].checks_keys and all(how == "as is" for _, _, how in steps)
        self.alone = stages[0] if simple else None
        # an `alone` stage writes no array the caller passed, so nothing to save or commit: on the native executor
        # its launch is its foreign call (stays so: what decides it is fixed by the key)
        self.fires = self.alone if simple and fires_alone(self.alone) else None

    def __iter__(self):
        return iter((self.template, self.stages, self.facts, self.steps))


class RunCache:
    """Prepared host stages of one plan's recent runs, by run key (see the module docstring)."""

    def __init__(self, plan):
        self.plan = plan
        self.entries: OrderedDict = OrderedDict()
        self.hits = 0  # runs that reused prepared stages (tests read it)

    def key(self, base, count, planes: dict) -> tuple | None:
        """What decides a run's checks and buffer sizes, or None when the run must take the full path."""
        if not (base is None or type(base) is int) or not (count is None or type(count) is int):
            return None
        labels = self.plan.binder._labels
        parts: list = [base, count]
        add = parts.append
        for name, v in planes.items():
            t = type(v)
            if t is np.ndarray:
                add((name, v.dtype, v.shape, v.strides, v.flags.writeable))
            elif t is float or t is np.float64 or t is np.float32:
                add((name, t))
            elif t is int and _INT64[0] <= v < _INT64[1]:
                add((name, t, v if name in labels else None))
            else:
                return None
        return tuple(parts)

    def run(self, base, count, planes: dict):
        """Plan.run on the host: the results (one Array, or a dict of them by name). A run whose key has an entry
        takes it out of the cache, rebinds its stages to this run's arrays, launches them and puts the entry
        back (a run that raises does not); any other run takes the full path (`first_run`)."""
        key = self.key(base, count, planes)
        entry = self.entries.pop(key, None) if key is not None else None
        if entry is None:
            return self.first_run(key, base, count, planes)
        stages, alone = entry.stages, entry.alone
        if alone is not None:  # its planes are the arrays it reads (`Entry.alone`): no Bound to fill and empty
            alone.rebind(entry.template, {}, planes)
            results = alone.results
        else:
            b = self.rebound(entry.template, planes, entry.steps)
            results = rebind_stages(stages, b)
        self.hits += 1
        if entry.fires is not None:  # run_stages(stages), for a stage that fires alone (eagle.stage.fires_alone)
            alone.fire_native()
        else:
            run_stages(stages)
        plan = self.plan
        plan.last_chunks, plan.last_executor = entry.facts  # fixed for prepared stages: kept with them
        for st in stages:  # the cache holds no array of this run: not the caller's, not the results
            st.release()
        if alone is None:
            b.arrays, b.given = {}, {}  # (b is the entry's template: it keeps no array either)
        self.entries[key] = entry
        return handed_back(results)

    def first_run(self, key, base, count, planes: dict):
        """A run with no entry for its key: bound and prepared in full, then kept under `key` (None: not kept)
        when every stage can be rebound and its kept buffers are small enough."""
        plan = self.plan
        b = plan.binder.bind(planes)
        lo, hi = plan.lane_range(base, count, b.lanes, plan.kernel.stage_count)
        stages, results = plan.stages(b, lo, hi)
        if key is not None and not all(isinstance(st, Prepared) and st.recipe is not None for st in stages):
            key = None
        facts = (tuple(st.nchunks for st in stages), tuple(st.executor for st in stages))
        run_stages(stages)
        plan.last_chunks, plan.last_executor = facts
        if key is not None:
            for st in stages:  # the cache holds no array of this run: not the caller's, not the results
                st.release()
            if sum(st.kept_bytes() for st in stages) <= MAX_KEPT_BYTES:
                template = Bound(b.spec, b.extents, b.lanes, b.dtype)
                self.entries[key] = Entry(template, stages, facts, self.steps(template, planes))
                while len(self.entries) > MAX_ENTRIES:
                    self.entries.popitem(last=False)
        return handed_back(results)

    def steps(self, template: Bound, planes: dict) -> tuple:
        """What `rebound` does with each plane of a run whose key matches `planes`' (the key fixes each array's
        type, dtype, shape and strides, so whether the binder would convert it is known once): (name, plane spec,
        how), how = "given" (written by the run), "as is" (a flat C-contiguous array the binder would take
        unconverted) or "convert" (the binder's `_input`); grid extents (fixed by the key) have no step."""
        specs, out = self.plan.binder.plane_specs, []
        for name, v in planes.items():
            p = specs.get(name)
            if p is None:
                continue
            if p.kind in ("output", "sink"):
                how = "given"
            elif type(v) is np.ndarray and (p.kind == "index" or p.kind == "lane" and v.dtype == template.dtype) \
                    and v.ndim == 1 and v.flags.c_contiguous:
                how = "as is"
            else:
                how = "convert"
            out.append((name, p, how))
        return tuple(out)

    def rebound(self, template: Bound, planes: dict, steps: tuple) -> Bound:
        """The binder's Bound for `planes`, whose key matches the run `template` was bound for: the template
        itself (what the key fixes is in it already) holding `planes`' arrays, converted and checked as the binder
        does."""
        b = template  # (the entry is this run's alone until the run puts it back; `run` empties it then)
        arrays, given = b.arrays, b.given = {}, {}
        for name, p, how in steps:
            v = planes[name]
            if how == "as is":
                arrays[name] = v
            elif how == "given":
                given[name] = v
            else:
                arrays[name] = self.plan.binder._input(p, v if type(v) is np.ndarray else np.asarray(v), b)
        if given:
            self.plan.binder._check_written(b)
        return b


def handed_back(results: dict):
    """What Plan.run returns: a run's one result, or every result by name in sorted order."""
    if len(results) == 1:
        for r in results.values():
            return r
    return {k: results[k] for k in sorted(results)}
