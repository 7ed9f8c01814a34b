"""The hawk kernels behind argsort and sort_by_key: a stable least-significant-digit radix sort, 8-bit digits.

Keys are mapped to int64 values that order as the keys do (`wrap` = 2**32 for uint32 keys read as int32, `flip` =
INT64_MIN for uint64 keys read as int64) and the smallest key (`low_hi` * 2**32 + `low_lo`) is subtracted,
wrapping: the difference, read as unsigned 64 bits, is what the passes sort, 8 bits a pass, so the passes follow
the keys' spread, not their width. The first pass forms the differences itself; each pass hands the next one its
keys shifted down 8 bits (`moved`, an arithmetic shift: the low bits stay right even where a 32-bit plane
wrapped) and the order so far (`order`).

One pass is one keyed scan and two plane scatters: `hawk.scan(1, by=digit, keys=256, order="key",
exclusive=True)` counts, for each lane, the lanes before it in (digit, lane) order, which is its place in a stable
sort by the digit (a counting sort's destination in one op: docs/semantics.md, "Keyed scans"). The scan's stage
counts each 4096-lane block's digits, its finish turns the counts into starts, and the next stage scatters.
"""

import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar

HALF = 4294967296  # 2**32
LOW = 4294967295  # 2**32 - 1
RADIX = 256  # values of an 8-bit digit


@hawk.kernel
def key_range_narrow(k: Index, wrap: Param, top: Mutable[Scalar], bottom: Mutable[Scalar]):
    o = float(k + m.where(k < 0, int(wrap), 0))  # int32 / uint32 keys: exact in float64
    top = hawk.max(o)
    bottom = hawk.max(-o)


@hawk.kernel
def key_range_wide(k: Index, flip: Param, top_hi: Mutable[Scalar], top_lo: Mutable[Scalar],
                   bottom_hi: Mutable[Scalar], bottom_lo: Mutable[Scalar]):
    o = k + int(flip)
    h = float(o // HALF)
    lo = float(o & LOW)
    top_hi = hawk.max(h)
    bottom_hi = hawk.max(-h)
    top_lo = hawk.max(m.where(h == top_hi, lo, -1.0))
    bottom_lo = hawk.max(m.where(h == -bottom_hi, -lo, -4294967296.0))


@hawk.kernel
def lane_order(lane: Grid["i"], out: Mutable[Index]):
    out = lane.i


@hawk.kernel
def radix_first(lane: Grid["i"], k: Index, wrap: Param, flip: Param, low_hi: Param, low_lo: Param,
                order: Mutable[Index], moved: Mutable[Index]):
    u = k + m.where(k < 0, int(wrap), 0) + int(flip) - (int(low_hi) * HALF + int(low_lo))
    dest = hawk.scan(1, by=u & 255, keys=RADIX, order="key", exclusive=True)
    hawk.scatter(order)[dest] = lane.i
    hawk.scatter(moved)[dest] = u // RADIX


@hawk.kernel
def radix_only(lane: Grid["i"], k: Index, wrap: Param, flip: Param, low_hi: Param, low_lo: Param,
               order: Mutable[Index]):
    u = k + m.where(k < 0, int(wrap), 0) + int(flip) - (int(low_hi) * HALF + int(low_lo))
    dest = hawk.scan(1, by=u & 255, keys=RADIX, order="key", exclusive=True)
    hawk.scatter(order)[dest] = lane.i


@hawk.kernel
def radix_next(u0: Index, at: Index, order: Mutable[Index], moved: Mutable[Index]):
    u = u0
    dest = hawk.scan(1, by=u & 255, keys=RADIX, order="key", exclusive=True)
    hawk.scatter(order)[dest] = at
    hawk.scatter(moved)[dest] = u // RADIX


@hawk.kernel
def radix_last(u0: Index, at: Index, order: Mutable[Index]):
    dest = hawk.scan(1, by=u0 & 255, keys=RADIX, order="key", exclusive=True)
    hawk.scatter(order)[dest] = at
