"""The hawk kernels behind exclusive_scan/inclusive_scan, unique and reduce_by_key (built on `hawk.scan`,
integer output planes and plane scatter stores).

Scans: `hawk.scan` gives each lane the running total of the lanes before it (exclusive) or up to it (inclusive) in
fixed 4096-lane blocks (docs/semantics.md, "Scans"): np.cumsum's bits up to 4096 lanes, the same bits everywhere.
Float outputs scan in the run's float type (dst's); integer outputs scan in int64 and the store wraps to dst's
width. `unsigned` Params are 2**64 for a uint64 array read as int64, else 0.0.

Runs of equal adjacent keys: lane i starts a run when i == 0 or its key differs from lane i - 1's (so NaN keys are
each their own run); `hawk.scan` of the start flags numbers the runs, a segmented scan (`reset=start`) gives each
lane its place in its run (or the run's sum / min / max so far), and the run's last lane stores the result at the
run's number with a plane scatter (key -1 elsewhere: no store). `nlanes` is the lane count, `runs` receives the
number of runs (stored by the last lane).
"""

import hawk
import hawk.math as m
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
    out = hawk.scan(float(k) + m.where(k < 0, unsigned, 0.0))


@hawk.kernel
def int_to_float_scan_exclusive(lane: Grid["i"], k: Index, unsigned: Param, out: Mutable[Scalar]):
    out = m.where(lane.i == 0, 0.0, hawk.scan(float(k) + m.where(k < 0, unsigned, 0.0), exclusive=True))


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


# --- unique: the first key of each run and the run's length -----------------------------------------------
@hawk.kernel
def int_unique(lane: Grid["i"], k: Index, nlanes: Param, ukeys: Mutable[Index], counts: Mutable[Index],
               runs: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (k != k.at(m.max(i - 1, 0)))
    end = (i == last) | (k != k.at(m.min(i + 1, last)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    length = hawk.scan(1, reset=start)
    hawk.scatter(ukeys)[m.where(start, run, -1)] = k
    hawk.scatter(counts)[m.where(end, run, -1)] = length
    hawk.scatter(runs)[m.where(i == last, 0, -1)] = run + 1


@hawk.kernel
def float_unique(lane: Grid["i"], x: Scalar, nlanes: Param, ukeys: Mutable[Scalar], counts: Mutable[Index],
                 runs: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (x != x.at(m.max(i - 1, 0)))
    end = (i == last) | (x != x.at(m.min(i + 1, last)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    length = hawk.scan(1, reset=start)
    hawk.scatter(ukeys)[m.where(start, run, -1)] = x
    hawk.scatter(counts)[m.where(end, run, -1)] = length
    hawk.scatter(runs)[m.where(i == last, 0, -1)] = run + 1


# --- reduce_by_key: each run's sum / min / max, stored by the run's last lane --------------------------------
# `flip` is INT64_MIN for uint64 values read as int64 under min/max (so that they order as unsigned), else 0.


@hawk.kernel
def int_keys_int_sum(lane: Grid["i"], k: Index, v: Index, nlanes: Param, ukeys: Mutable[Index], out: Mutable[Index],
                     runs: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (k != k.at(m.max(i - 1, 0)))
    end = (i == last) | (k != k.at(m.min(i + 1, last)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    total = hawk.scan(v, reset=start)
    hawk.scatter(ukeys)[m.where(start, run, -1)] = k
    hawk.scatter(out)[m.where(end, run, -1)] = total
    hawk.scatter(runs)[m.where(i == last, 0, -1)] = run + 1


@hawk.kernel
def int_keys_int_min(lane: Grid["i"], k: Index, v: Index, nlanes: Param, flip: Param, ukeys: Mutable[Index],
                     out: Mutable[Index], runs: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (k != k.at(m.max(i - 1, 0)))
    end = (i == last) | (k != k.at(m.min(i + 1, last)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    total = hawk.scan(v + int(flip), reset=start, op=m.min)
    hawk.scatter(ukeys)[m.where(start, run, -1)] = k
    hawk.scatter(out)[m.where(end, run, -1)] = total - int(flip)
    hawk.scatter(runs)[m.where(i == last, 0, -1)] = run + 1


@hawk.kernel
def int_keys_int_max(lane: Grid["i"], k: Index, v: Index, nlanes: Param, flip: Param, ukeys: Mutable[Index],
                     out: Mutable[Index], runs: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (k != k.at(m.max(i - 1, 0)))
    end = (i == last) | (k != k.at(m.min(i + 1, last)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    total = hawk.scan(v + int(flip), reset=start, op=m.max)
    hawk.scatter(ukeys)[m.where(start, run, -1)] = k
    hawk.scatter(out)[m.where(end, run, -1)] = total - int(flip)
    hawk.scatter(runs)[m.where(i == last, 0, -1)] = run + 1


@hawk.kernel
def int_keys_float_sum(lane: Grid["i"], k: Index, v: Scalar, nlanes: Param, ukeys: Mutable[Index],
                       out: Mutable[Scalar], runs: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (k != k.at(m.max(i - 1, 0)))
    end = (i == last) | (k != k.at(m.min(i + 1, last)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    total = hawk.scan(v, reset=start)
    hawk.scatter(ukeys)[m.where(start, run, -1)] = k
    hawk.scatter(out)[m.where(end, run, -1)] = total
    hawk.scatter(runs)[m.where(i == last, 0, -1)] = run + 1


@hawk.kernel
def int_keys_float_min(lane: Grid["i"], k: Index, v: Scalar, nlanes: Param, ukeys: Mutable[Index],
                       out: Mutable[Scalar], runs: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (k != k.at(m.max(i - 1, 0)))
    end = (i == last) | (k != k.at(m.min(i + 1, last)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    total = hawk.scan(v, reset=start, op=m.min)
    hawk.scatter(ukeys)[m.where(start, run, -1)] = k
    hawk.scatter(out)[m.where(end, run, -1)] = total
    hawk.scatter(runs)[m.where(i == last, 0, -1)] = run + 1


@hawk.kernel
def int_keys_float_max(lane: Grid["i"], k: Index, v: Scalar, nlanes: Param, ukeys: Mutable[Index],
                       out: Mutable[Scalar], runs: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (k != k.at(m.max(i - 1, 0)))
    end = (i == last) | (k != k.at(m.min(i + 1, last)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    total = hawk.scan(v, reset=start, op=m.max)
    hawk.scatter(ukeys)[m.where(start, run, -1)] = k
    hawk.scatter(out)[m.where(end, run, -1)] = total
    hawk.scatter(runs)[m.where(i == last, 0, -1)] = run + 1


@hawk.kernel
def float_keys_int_sum(lane: Grid["i"], x: Scalar, v: Index, nlanes: Param, ukeys: Mutable[Scalar],
                       out: Mutable[Index], runs: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (x != x.at(m.max(i - 1, 0)))
    end = (i == last) | (x != x.at(m.min(i + 1, last)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    total = hawk.scan(v, reset=start)
    hawk.scatter(ukeys)[m.where(start, run, -1)] = x
    hawk.scatter(out)[m.where(end, run, -1)] = total
    hawk.scatter(runs)[m.where(i == last, 0, -1)] = run + 1


@hawk.kernel
def float_keys_int_min(lane: Grid["i"], x: Scalar, v: Index, nlanes: Param, flip: Param, ukeys: Mutable[Scalar],
                       out: Mutable[Index], runs: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (x != x.at(m.max(i - 1, 0)))
    end = (i == last) | (x != x.at(m.min(i + 1, last)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    total = hawk.scan(v + int(flip), reset=start, op=m.min)
    hawk.scatter(ukeys)[m.where(start, run, -1)] = x
    hawk.scatter(out)[m.where(end, run, -1)] = total - int(flip)
    hawk.scatter(runs)[m.where(i == last, 0, -1)] = run + 1


@hawk.kernel
def float_keys_int_max(lane: Grid["i"], x: Scalar, v: Index, nlanes: Param, flip: Param, ukeys: Mutable[Scalar],
                       out: Mutable[Index], runs: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (x != x.at(m.max(i - 1, 0)))
    end = (i == last) | (x != x.at(m.min(i + 1, last)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    total = hawk.scan(v + int(flip), reset=start, op=m.max)
    hawk.scatter(ukeys)[m.where(start, run, -1)] = x
    hawk.scatter(out)[m.where(end, run, -1)] = total - int(flip)
    hawk.scatter(runs)[m.where(i == last, 0, -1)] = run + 1


@hawk.kernel
def float_keys_float_sum(lane: Grid["i"], x: Scalar, v: Scalar, nlanes: Param, ukeys: Mutable[Scalar],
                         out: Mutable[Scalar], runs: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (x != x.at(m.max(i - 1, 0)))
    end = (i == last) | (x != x.at(m.min(i + 1, last)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    total = hawk.scan(v, reset=start)
    hawk.scatter(ukeys)[m.where(start, run, -1)] = x
    hawk.scatter(out)[m.where(end, run, -1)] = total
    hawk.scatter(runs)[m.where(i == last, 0, -1)] = run + 1


@hawk.kernel
def float_keys_float_min(lane: Grid["i"], x: Scalar, v: Scalar, nlanes: Param, ukeys: Mutable[Scalar],
                         out: Mutable[Scalar], runs: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (x != x.at(m.max(i - 1, 0)))
    end = (i == last) | (x != x.at(m.min(i + 1, last)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    total = hawk.scan(v, reset=start, op=m.min)
    hawk.scatter(ukeys)[m.where(start, run, -1)] = x
    hawk.scatter(out)[m.where(end, run, -1)] = total
    hawk.scatter(runs)[m.where(i == last, 0, -1)] = run + 1


@hawk.kernel
def float_keys_float_max(lane: Grid["i"], x: Scalar, v: Scalar, nlanes: Param, ukeys: Mutable[Scalar],
                         out: Mutable[Scalar], runs: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (x != x.at(m.max(i - 1, 0)))
    end = (i == last) | (x != x.at(m.min(i + 1, last)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    total = hawk.scan(v, reset=start, op=m.max)
    hawk.scatter(ukeys)[m.where(start, run, -1)] = x
    hawk.scatter(out)[m.where(end, run, -1)] = total
    hawk.scatter(runs)[m.where(i == last, 0, -1)] = run + 1


# --- float keys of another width than the values: the runs numbered first (then reduced as integer keys) -------
@hawk.kernel
def float_run_ids(lane: Grid["i"], x: Scalar, nlanes: Param, ukeys: Mutable[Scalar], ids: Mutable[Index],
                  runs: Mutable[Index]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (x != x.at(m.max(i - 1, 0)))
    run = hawk.scan(m.where(start, 1, 0)) - 1
    ids = run
    hawk.scatter(ukeys)[m.where(start, run, -1)] = x
    hawk.scatter(runs)[m.where(i == last, 0, -1)] = run + 1
