"""The hawk kernels behind exclusive_scan/inclusive_scan, unique and reduce_by_key (built on `hawk.scan`,
integer output planes and plane scatter stores).

Scans: `hawk.scan` gives each lane the running total of the lanes before it (exclusive) or up to it (inclusive) in
fixed 4096-lane blocks (docs/semantics.md, "Scans"): np.cumsum's bits up to 4096 lanes, the same bits everywhere.
Float outputs scan in the run's float type (dst's); integer outputs scan in int64 and the store wraps to dst's
width. `unsigned` Params are 2**64 for a uint64 array read as int64, else 0.0 (`_kernels.as_float`: one rounding).

Runs of equal adjacent keys: lane i starts a run when i == 0 or its key differs from lane i - 1's (so NaN keys are
each their own run); `hawk.scan` of the start flags numbers the runs. A run's first lane stores its key at the
run's number (plane scatters; key -1 elsewhere: no store); integer keys of a run are all equal, so every lane of
the run stores it there (the same bits, whichever lane stores last; no select for LLVM to turn into a branch).
unique: a run's first lane also stores its lane, and `run_lengths` (one lane per run) takes the lengths from the
starts. reduce_by_key: a segmented scan (`reset=start`) gives each lane the run's sum / min / max so far, and the
run's last lane stores it at the run's number (the last lane of all ends a run: `lane.extent("i")` is the lane
count, so the scan's interior lanes drop that test and the clamp of the next lane's read); `runs` receives the
number of runs as a total of the start flags (a cell, summed in the first stage where the lanes are read anyway,
instead of a store by key in every lane of the second: exact in float64, and in float32 below 2**24, which
runs.py checks).
"""

import hawk
import hawk.math as m
from eagle.algorithms._kernels import as_float
from hawk import Grid, Index, Mutable, Param, Scalar


# --- scans -----------------------------------------------------------------------------------------------
@hawk.kernel
def float_scan_inclusive(x: Scalar, out: Mutable[Scalar]):
    out = hawk.scan(x)


@hawk.kernel
def float_scan_exclusive(lane: Grid["i"], x: Scalar, out: Mutable[Scalar]):
    out = m.where(lane.i == 0, 0.0, hawk.scan(x, exclusive=True))  # the empty sum: +0.0, not the identity -0.0


@hawk.kernel
def int_to_float_scan_inclusive(k: Index, unsigned: Param, out: Mutable[Scalar]):
    out = hawk.scan(as_float(k, unsigned))


@hawk.kernel
def int_to_float_scan_exclusive(lane: Grid["i"], k: Index, unsigned: Param, out: Mutable[Scalar]):
    out = m.where(lane.i == 0, 0.0, hawk.scan(as_float(k, unsigned), exclusive=True))


@hawk.kernel
def int_scan_inclusive(k: Index, out: Mutable[Index]):
    out = hawk.scan(k)


@hawk.kernel
def int_scan_exclusive(k: Index, out: Mutable[Index]):
    out = hawk.scan(k, exclusive=True)


@hawk.kernel
def float_to_int_scan_inclusive(x: Scalar, out: Mutable[Index]):
    out = hawk.scan(int(x))


@hawk.kernel
def float_to_int_scan_exclusive(x: Scalar, out: Mutable[Index]):
    out = hawk.scan(int(x), exclusive=True)


# --- unique: the first key of each run and where it starts; then each run's length from the starts --------------
@hawk.kernel
def int_unique(lane: Grid["i"], k: Index, ukeys: Mutable[Index], starts: Mutable[Index], runs: Mutable[Scalar]):
    i = lane.i
    start = (i == 0) | (k != k.at(m.max(i - 1, 0)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    hawk.scatter(ukeys)[run] = k
    hawk.scatter(starts)[m.where(start, run, -1)] = i
    runs = hawk.sum(m.where(start, 1.0, 0.0))


@hawk.kernel
def float_unique(lane: Grid["i"], x: Scalar, ukeys: Mutable[Scalar], starts: Mutable[Index], runs: Mutable[Scalar]):
    i = lane.i
    start = (i == 0) | (x != x.at(m.max(i - 1, 0)))
    at = m.where(start, hawk.scan(m.where(start, 1, 0)) - 1, -1)
    hawk.scatter(ukeys)[at] = x
    hawk.scatter(starts)[at] = i
    runs = hawk.sum(m.where(start, 1.0, 0.0))


@hawk.kernel
def run_lengths(lane: Grid["j"], starts: Index, nlanes: Param, counts: Mutable[Index]):
    j = lane.j
    last = lane.extent("j") - 1  # (one lane per run)
    counts = m.where(j == last, int(nlanes), starts.at(m.min(j + 1, last))) - starts


# --- reduce_by_key: each run's sum / min / max, stored by the run's last lane --------------------------------
# One kernel per key kind, value kind and op, named `<int|float>_keys_<int|float>_<op>` (runs.py picks by name).
# `flip` is INT64_MIN for uint64 values read as int64 under min/max (so that they order as unsigned), else 0.
_OPS = {"sum": m.add, "min": m.min, "max": m.max}


@hawk.func
def _flipped(v, flip):
    return v + int(flip)


@hawk.func
def _unflipped(v, flip):
    return v - int(flip)


@hawk.func
def _as_is(v, flip):
    return v


def _shifts(values) -> tuple:
    """How a run's values enter and leave the scan: integers shifted by flip (uint64 order), floats untouched."""
    return (_flipped, _unflipped) if values is Index else (_as_is, _as_is)


def _int_keys(values, out_type, op: str):
    OP, IN, OUT = _OPS[op], *_shifts(values)

    def body(lane: Grid["i"], k: Index, v: values, flip: Param, ukeys: Mutable[Index], out: out_type,
             runs: Mutable[Scalar]):
        i = lane.i
        last = lane.extent("i") - 1
        start = (i == 0) | (k != k.at(m.max(i - 1, 0)))
        end = (i == last) | (k != k.at(m.min(i + 1, last)))
        run = hawk.scan(m.where(start, 1, 0)) - 1
        total = hawk.scan(IN(v, flip), reset=start, op=OP)
        hawk.scatter(ukeys)[run] = k
        hawk.scatter(out)[m.where(end, run, -1)] = OUT(total, flip)
        runs = hawk.sum(m.where(start, 1.0, 0.0))

    return body


def _float_keys(values, out_type, op: str):
    OP, IN, OUT = _OPS[op], *_shifts(values)

    def body(lane: Grid["i"], x: Scalar, v: values, flip: Param, ukeys: Mutable[Scalar], out: out_type,
             runs: Mutable[Scalar]):
        i = lane.i
        last = lane.extent("i") - 1
        start = (i == 0) | (x != x.at(m.max(i - 1, 0)))
        end = (i == last) | (x != x.at(m.min(i + 1, last)))
        run = hawk.scan(m.where(start, 1, 0)) - 1
        total = hawk.scan(IN(v, flip), reset=start, op=OP)
        hawk.scatter(ukeys)[m.where(start, run, -1)] = x
        hawk.scatter(out)[m.where(end, run, -1)] = OUT(total, flip)
        runs = hawk.sum(m.where(start, 1.0, 0.0))

    return body


def _reduce_kernels() -> dict:
    made = {}
    for keys, factory in (("int", _int_keys), ("float", _float_keys)):
        for vals, values, out_type in (("int", Index, Mutable[Index]), ("float", Scalar, Mutable[Scalar])):
            for op in _OPS:
                body = factory(values, out_type, op)
                body.__name__ = body.__qualname__ = f"{keys}_keys_{vals}_{op}"
                made[body.__name__] = hawk.kernel(body)
    return made


globals().update(_reduce_kernels())


# --- float keys of another width than the values: the runs numbered first (then reduced as integer keys) -------
@hawk.kernel
def float_run_ids(lane: Grid["i"], x: Scalar, ukeys: Mutable[Scalar], ids: Mutable[Index], runs: Mutable[Scalar]):
    i = lane.i
    start = (i == 0) | (x != x.at(m.max(i - 1, 0)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    ids = run
    hawk.scatter(ukeys)[m.where(start, run, -1)] = x
    runs = hawk.sum(m.where(start, 1.0, 0.0))


# --- the run count stored by the last lane: where a float32 `runs` total may have rounded (2**24 runs or more) ---
@hawk.kernel
def int_run_count(lane: Grid["i"], k: Index, runs: Mutable[Index]):
    i = lane.i
    start = (i == 0) | (k != k.at(m.max(i - 1, 0)))
    hawk.scatter(runs)[m.where(i == lane.extent("i") - 1, 0, -1)] = hawk.scan(m.where(start, 1, 0))


@hawk.kernel
def float_run_count(lane: Grid["i"], x: Scalar, runs: Mutable[Index]):
    i = lane.i
    start = (i == 0) | (x != x.at(m.max(i - 1, 0)))
    hawk.scatter(runs)[m.where(i == lane.extent("i") - 1, 0, -1)] = hawk.scan(m.where(start, 1, 0))
