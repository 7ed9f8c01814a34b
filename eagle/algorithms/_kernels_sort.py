"""The hawk kernels behind argsort and sort_by_key: a stable least-significant-digit radix sort, 4-bit digits.

Keys are first mapped to int64 values that order as the keys do (`wrap` = 2**32 for uint32 keys read as int32,
`flip` = INT64_MIN for uint64 keys read as int64) and the smallest key (`low_hi` * 2**32 + `low_lo`) is
subtracted, wrapping: the difference, read as unsigned 64 bits, is what the passes sort, 4 bits a pass, so the
passes follow the keys' spread, not their width. `radix_prepare` writes these differences once (`shifted`) and
counts their bytes (a 4-bit digit's counts are then sums over one nibble of its byte's histogram); each pass
hands the next one its keys shifted down 4 bits (`moved`, an arithmetic shift: the low bits stay right even where
a 32-bit plane wrapped). Forming the differences inside each pass instead doubled a pass's time.

One pass places every lane at start[digit] + (how many earlier lanes have its digit). hawk has no keyed scan (a
running count per key value), so that count comes from plain `hawk.scan`s of packed counters: digit d adds 1 to
the 32-bit half d & 1 of the int64 counter d >> 1, eight exclusive scans side by side, and the lane reads its own
half (exact below 2**31 lanes). `starts` holds the pass's 16 digit starts (an exclusive scan of its histogram).
Bit masks (`&`) and divisions by constants only: a division by a run-time value costs a hardware divide a lane.
"""

import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar, Table

HALF = 4294967296  # 2**32
LOW = 4294967295  # 2**32 - 1
RADIX = 16  # values of a 4-bit digit
SLOTS = 2048  # byte histograms of up to 8 bytes (64-bit spreads)


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
def radix_prepare(k: Index, wrap: Param, flip: Param, low_hi: Param, low_lo: Param, nbytes: Param,
                  hist: Mutable["slot":SLOTS], shifted: Mutable[Index]):
    u = k + m.where(k < 0, int(wrap), 0) + int(flip) - (int(low_hi) * HALF + int(low_lo))
    shifted = u
    for q in range(int(nbytes)):  # byte histograms: half the scatters of one per 4-bit digit
        hawk.scatter(hist, policy="plain")[q * 256 + (u & 255)] += 1.0
        u = u // 256


@hawk.kernel
def low_nibbles(lane: Grid["byte", "high":RADIX, "low":RADIX], tally: Scalar) -> Scalar:
    return hawk.sum(tally, over="high")  # per byte: the counts of its low 4 bits (whole numbers: exact)


@hawk.kernel
def high_nibbles(lane: Grid["byte", "high":RADIX, "low":RADIX], tally: Scalar) -> Scalar:
    return hawk.sum(tally, over="low")


@hawk.kernel
def lane_order(lane: Grid["i"], out: Mutable[Index]):
    out = lane.i


@hawk.kernel
def radix_first(lane: Grid["i"], u0: Index, starts: Table["digit":RADIX], order: Mutable[Index],
                moved: Mutable[Index]):
    u = u0
    d = u & 15
    pair = d & 14
    f = m.where(d & 1 == 0, 1, HALF)
    c0 = hawk.scan(m.where(pair == 0, f, 0), exclusive=True)
    c1 = hawk.scan(m.where(pair == 2, f, 0), exclusive=True)
    c2 = hawk.scan(m.where(pair == 4, f, 0), exclusive=True)
    c3 = hawk.scan(m.where(pair == 6, f, 0), exclusive=True)
    c4 = hawk.scan(m.where(pair == 8, f, 0), exclusive=True)
    c5 = hawk.scan(m.where(pair == 10, f, 0), exclusive=True)
    c6 = hawk.scan(m.where(pair == 12, f, 0), exclusive=True)
    c7 = hawk.scan(m.where(pair == 14, f, 0), exclusive=True)
    c = m.where(d < 8, m.where(d < 4, m.where(d < 2, c0, c1), m.where(d < 6, c2, c3)),
                m.where(d < 12, m.where(d < 10, c4, c5), m.where(d < 14, c6, c7)))
    rank = m.where(d & 1 == 0, c & LOW, c // HALF)
    dest = int(starts.at(digit=d)) + rank
    hawk.scatter(order)[dest] = lane.i
    hawk.scatter(moved)[dest] = u // RADIX


@hawk.kernel
def radix_only(lane: Grid["i"], u0: Index, starts: Table["digit":RADIX], order: Mutable[Index]):
    u = u0
    d = u & 15
    pair = d & 14
    f = m.where(d & 1 == 0, 1, HALF)
    c0 = hawk.scan(m.where(pair == 0, f, 0), exclusive=True)
    c1 = hawk.scan(m.where(pair == 2, f, 0), exclusive=True)
    c2 = hawk.scan(m.where(pair == 4, f, 0), exclusive=True)
    c3 = hawk.scan(m.where(pair == 6, f, 0), exclusive=True)
    c4 = hawk.scan(m.where(pair == 8, f, 0), exclusive=True)
    c5 = hawk.scan(m.where(pair == 10, f, 0), exclusive=True)
    c6 = hawk.scan(m.where(pair == 12, f, 0), exclusive=True)
    c7 = hawk.scan(m.where(pair == 14, f, 0), exclusive=True)
    c = m.where(d < 8, m.where(d < 4, m.where(d < 2, c0, c1), m.where(d < 6, c2, c3)),
                m.where(d < 12, m.where(d < 10, c4, c5), m.where(d < 14, c6, c7)))
    rank = m.where(d & 1 == 0, c & LOW, c // HALF)
    dest = int(starts.at(digit=d)) + rank
    hawk.scatter(order)[dest] = lane.i


@hawk.kernel
def radix_next(u0: Index, at: Index, starts: Table["digit":RADIX], order: Mutable[Index], moved: Mutable[Index]):
    u = u0
    d = u & 15
    pair = d & 14
    f = m.where(d & 1 == 0, 1, HALF)
    c0 = hawk.scan(m.where(pair == 0, f, 0), exclusive=True)
    c1 = hawk.scan(m.where(pair == 2, f, 0), exclusive=True)
    c2 = hawk.scan(m.where(pair == 4, f, 0), exclusive=True)
    c3 = hawk.scan(m.where(pair == 6, f, 0), exclusive=True)
    c4 = hawk.scan(m.where(pair == 8, f, 0), exclusive=True)
    c5 = hawk.scan(m.where(pair == 10, f, 0), exclusive=True)
    c6 = hawk.scan(m.where(pair == 12, f, 0), exclusive=True)
    c7 = hawk.scan(m.where(pair == 14, f, 0), exclusive=True)
    c = m.where(d < 8, m.where(d < 4, m.where(d < 2, c0, c1), m.where(d < 6, c2, c3)),
                m.where(d < 12, m.where(d < 10, c4, c5), m.where(d < 14, c6, c7)))
    rank = m.where(d & 1 == 0, c & LOW, c // HALF)
    dest = int(starts.at(digit=d)) + rank
    hawk.scatter(order)[dest] = at
    hawk.scatter(moved)[dest] = u // RADIX


@hawk.kernel
def radix_last(u0: Index, at: Index, starts: Table["digit":RADIX], order: Mutable[Index]):
    u = u0
    d = u & 15
    pair = d & 14
    f = m.where(d & 1 == 0, 1, HALF)
    c0 = hawk.scan(m.where(pair == 0, f, 0), exclusive=True)
    c1 = hawk.scan(m.where(pair == 2, f, 0), exclusive=True)
    c2 = hawk.scan(m.where(pair == 4, f, 0), exclusive=True)
    c3 = hawk.scan(m.where(pair == 6, f, 0), exclusive=True)
    c4 = hawk.scan(m.where(pair == 8, f, 0), exclusive=True)
    c5 = hawk.scan(m.where(pair == 10, f, 0), exclusive=True)
    c6 = hawk.scan(m.where(pair == 12, f, 0), exclusive=True)
    c7 = hawk.scan(m.where(pair == 14, f, 0), exclusive=True)
    c = m.where(d < 8, m.where(d < 4, m.where(d < 2, c0, c1), m.where(d < 6, c2, c3)),
                m.where(d < 12, m.where(d < 10, c4, c5), m.where(d < 14, c6, c7)))
    rank = m.where(d & 1 == 0, c & LOW, c // HALF)
    dest = int(starts.at(digit=d)) + rank
    hawk.scatter(order)[dest] = at
