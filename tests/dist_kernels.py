"""The kernels of the sharded-run tests (tests/test_dist_jax.py, tests/test_dist_torch.py), defined once.

Both test files run their cases in child processes (a script run of the test file, then `jax.distributed`
processes or `torch.multiprocessing.spawn` ranks), which import this module by name from tests/ (the test file's
folder is first on their path): the kernels must live at a module's top level for that. Defining them imports
neither JAX nor torch, so the children may set those up afterwards.
"""

import hawk
import hawk.math as hm
from hawk import Grid, Index, Mutable, Param, Scalar, Table, Vector

NR, NC = 8 * 6, 16  # the stencils' grid: 6 rows a shard on 8 devices, 12 on 4; uneven row splits under torch


@hawk.kernel
def dist_sums(x: Scalar, key: Index, acc: Mutable["slot":5], tot: Mutable[Scalar], m: Mutable[Scalar],
              fast: Mutable[Scalar]):
    hawk.scatter(acc, policy="ordered")[key] += x
    tot = hawk.sum(x, policy="ordered")
    m = hawk.mean(x, policy="ordered")
    fast = hawk.sum(x)


@hawk.kernel
def dist_zero_signs(x: Scalar, key: Index, acc: Mutable["slot":5], comp: Mutable["slot":5]):
    hawk.scatter(acc, policy="plain")[key] += x  # (the sign of a zero: docs/semantics.md)
    hawk.scatter(comp, policy="compensated")[key] += x


@hawk.kernel
def dist_max(x: Scalar, s: Param, mx: Mutable[Scalar], y: Mutable[Scalar]):
    mx = hawk.max(x * s)
    y = x * s


@hawk.kernel
def dist_split(v: Vector[3], tot: Mutable[Vector[3]], z: Mutable[Vector[3]]):
    tot = hawk.sum(v, policy="ordered")
    z = v / tot


@hawk.kernel
def dist_heat(lane: Grid["row", "col":NC], u: Scalar, k: Param, out: Mutable[Scalar], tot: Mutable[Scalar]):
    i, j = lane.row, lane.col
    if hm.land(hm.land(i > 0, i < NR - 1), hm.land(j > 0, j < NC - 1)):
        v = u + k * (u.at(row=i - 1, col=j) + u.at(row=i + 1, col=j) + u.at(row=i, col=j - 1)
                     + u.at(row=i, col=j + 1) - 4.0 * u)
    else:
        v = u * 0.5 + u.at(row=i + 2, col=j) * 0.25 + u.at(row=i - 2, col=j) * 0.25  # clamped at the edges
    out = v
    tot = hawk.sum(v * v, policy="ordered")


@hawk.kernel
def dist_grad(x: Scalar, key: Index, w: Table["slot":5], s: Param, acc: Mutable["slot":5], tot: Mutable[Scalar],
              m: Mutable[Scalar], y: Mutable[Scalar]):
    hawk.scatter(acc, policy="ordered")[key] += x * w.at(slot=key)
    tot = hawk.sum(x * s, policy="ordered")
    m = hawk.mean(x * x, policy="ordered")
    y = x * s + w.at(slot=key)


@hawk.kernel
def dist_ratio(x: Scalar, tot: Mutable[Scalar], z: Mutable[Scalar]):
    tot = hawk.sum(x, policy="ordered")
    z = x / tot


# ---- what only the JAX tests use: refused reads and stores, a grid kernel's gradient -------------------------------
@hawk.kernel
def dist_shift(x: Scalar, src: Index) -> Scalar:
    return x.at(src) - x


@hawk.kernel
def dist_far(lane: Grid["row", "col":NC], u: Scalar, r: Index) -> Scalar:
    return u.at(row=r, col=lane.col)


@hawk.kernel
def dist_store(x: Scalar, key: Index, last: Mutable["slot":5]):
    hawk.scatter(last)[key] = x


@hawk.kernel
def dist_loopstore(x: Scalar, key: Index, last: Mutable["slot":5]):
    for j in range(2):  # (each lane stores twice; its second store wins over its first)
        hawk.scatter(last)[hm.where(key < 0, -1, (key + j) % 5)] = x * (j + 1.0)


@hawk.kernel
def dist_gridgrad(lane: Grid["row", "col":NC], u: Scalar, k: Param, out: Mutable[Scalar], tot: Mutable[Scalar]):
    out = u * k + lane.row * 0.5
    tot = hawk.sum(u * u * k, policy="ordered")


@hawk.kernel
def dist_gridstore(lane: Grid["row", "col":NC], u: Scalar, key: Index, last: Mutable["slot":5], out: Mutable[Scalar]):
    hawk.scatter(last)[key] = u * lane.col  # each slot: the last lane of the whole grid (row-major) that stores
    out = u * u


@hawk.kernel
def dist_rowblock(lane: Grid["row", "col":NC], x: Scalar) -> Scalar:
    top = hawk.max(x * x, over="col")  # block reductions (a row fits a workgroup), read in the body, beside
    return (lane.row + 1.0) * (top + hawk.sum(x, over="col")) * x  # lane.row: whole-run lane numbers


# ---- scans and block reductions (every shard runs whole scan blocks; a block reduction's slots are rows) -----------
@hawk.kernel
def dist_scans(x: Scalar, start: Scalar, y: Mutable[Scalar], z: Mutable[Scalar], lo: Mutable[Scalar],
               hi: Mutable[Scalar], pos: Mutable[Scalar], tot: Mutable[Scalar]):
    y = hawk.scan(x)
    z = hawk.scan(x, reset=start > 0.5, exclusive=True)
    lo = hawk.scan(x, op=hm.min)
    hi = hawk.scan(x, op=hm.max, exclusive=True)
    pos = hm.to_float(hawk.scan(x > 0.0, exclusive=True))
    tot = hawk.sum(y * start, policy="ordered")


@hawk.kernel
def dist_prod(x: Scalar, start: Scalar, y: Mutable[Scalar], r: Mutable[Scalar], p: Mutable[Scalar]):
    y = hawk.scan(x, op=hm.mul)
    r = hawk.scan(x, op=hm.mul, reverse=True, reset=start > 0.5, exclusive=True)
    p = hawk.reduce(hm.mul, x)


@hawk.kernel
def dist_prodgrad(x: Scalar, p: Mutable[Scalar], y: Mutable[Scalar]):
    p = hawk.reduce(hm.mul, x, where=x > 0.5)
    y = hm.sin(x)


@hawk.kernel
def dist_rowprod(lane: Grid["row", "col":NC], u: Scalar) -> Scalar:
    return hawk.reduce(hm.mul, u, over="col")


@hawk.kernel
def dist_softmax(lane: Grid["row", "col":NC], u: Scalar, p: Mutable[Scalar], tot: Mutable[Scalar]):
    e = hm.exp(u - hawk.max(u, over="col"))
    p = e / hawk.sum(e, over="col")
    tot = hawk.sum(p * u, policy="ordered")


@hawk.kernel
def dist_rscan(x: Scalar, start: Scalar, y: Mutable[Scalar], z: Mutable[Scalar], hi: Mutable[Scalar],
               tot: Mutable[Scalar]):
    y = hawk.scan(x, reverse=True)
    z = hawk.scan(x, reverse=True, reset=start > 0.5, exclusive=True)
    hi = hawk.scan(x, op=hm.max, reverse=True)
    tot = hawk.sum(y * start, policy="ordered")


@hawk.func
def ema(a, b):
    return 0.75 * a + 0.25 * b  # neither associative nor commutative: the one-device bits need the lane order


@hawk.func
def then(p, q):
    return hm.vec(q[0] * p[0], q[0] * p[1] + q[1])  # affine maps h -> a * h + b as (a, b): p, then q


@hawk.kernel
def dist_fscan(x: Scalar, start: Scalar, y: Mutable[Scalar], z: Mutable[Scalar], h: Mutable[Scalar],
               tot: Mutable[Scalar]):
    y = hawk.scan(x, op=ema, reset=start > 0.5)
    z = hawk.scan(x, op=ema, reverse=True, exclusive=True, identity=0.0)
    h = hawk.scan(hm.vec(0.5 + 0.5 * start, x), op=then)[1]  # a Vector's scan: two values a lane
    tot = hawk.sum(y * z, policy="ordered")


@hawk.kernel
def dist_fgrad(x: Scalar, start: Scalar, y: Mutable[Scalar], z: Mutable[Scalar], tot: Mutable[Scalar]):
    y = hawk.scan(x * x, op=ema, reset=start > 0.5)
    z = hawk.scan(x, op=ema, reverse=True, exclusive=True, identity=0.0)
    tot = hawk.sum(y * z, policy="ordered")


@hawk.kernel
def dist_ffold(x: Scalar, y: Mutable[Scalar], t: Mutable[Scalar]):
    t = hawk.reduce(ema, x * x, where=x > -1.0)  # its gradient: chains by the func (hawk/reverse/chains.py)
    y = x * t


@hawk.kernel
def dist_kfscan(x: Scalar, key: Index, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = hawk.scan(x, op=ema, by=key, keys=5)  # each key's lanes in lane order, across shards
    z = hawk.scan(x * x, op=ema, by=key, keys=5, reverse=True, exclusive=True, identity=0.0)


@hawk.kernel
def dist_kscan(x: Scalar, key: Index, y: Mutable[Scalar], pos: Mutable[Scalar], tot: Mutable[Scalar]):
    y = hawk.scan(x, by=key, keys=5)
    pos = hm.to_float(hawk.scan(1, by=key, keys=5, order="key", exclusive=True))
    tot = hawk.sum(y, policy="ordered")


@hawk.kernel
def dist_gridscan(lane: Grid["row", "col":50], u: Scalar, y: Mutable[Scalar], t: Mutable[Scalar]):
    y = hawk.scan(u - hawk.mean(u, policy="ordered") + lane.row * 0.25, op=hm.max, reset=lane.col == 0)
    t = hawk.sum(hawk.scan(u * 3.0 - lane.col), policy="ordered")


# ---- the grid's extent (lane.extent): the whole grid's on every shard, with or without reading lane.row -----------
@hawk.kernel
def dist_extent(lane: Grid["row", "col":NC], u: Scalar, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = u * float(lane.extent("row")) + float(lane.extent("col"))
    z = hm.where(lane.row == lane.extent("row") - 1, u, 0.0)


@hawk.kernel
def dist_extent_only(lane: Grid["row", "col":NC], u: Scalar, y: Mutable[Scalar]):
    y = u * float(lane.extent("row"))  # (no coordinate read: the extent alone makes the shards' lanes global)


# ---- Vector planes where shards run with the whole grid's lane numbers (halos, coordinates, a cell's gradient) -----
@hawk.kernel
def dist_vheat(lane: Grid["row", "col":NC], v: Vector[2], u: Scalar, out: Mutable[Vector[2]], tot: Mutable[Scalar]):
    i, j = lane.row, lane.col
    w = v.at(row=i - 1, col=j) + v.at(row=i + 2, col=j) - v * 2.0 + u * 0.5
    out = w + i * 0.25
    tot = hawk.sum(w[0] * w[1] + u * v[1], policy="ordered")


@hawk.kernel
def dist_twice(x: Scalar, key: Index, acc: Mutable["slot":5], s: Mutable["slot":3], tot: Mutable[Scalar]):
    hawk.scatter(acc, policy="ordered")[key] += x
    hawk.scatter(s)[key % 3] += x * 0.5
    tot = hawk.sum(x, policy="ordered")
    hawk.scatter(acc, policy="ordered")[key] += x * tot  # (a second stage adding into the same sinks)
    hawk.scatter(s)[key % 3] += x - tot


@hawk.func
def halfway(a, b):
    return (a + b) * 0.5


@hawk.kernel
def dist_foldat(lane: Grid["row", "col":NC], x: Scalar, total: Mutable[Scalar]) -> Scalar:
    total = hawk.reduce(halfway, x * x)  # (its adjoint scans: shards run whole blocks)
    return x.at(col=lane.col + 1) * 2.0  # (its adjoint scatters into x's gradient in another stage than the fold's)


@hawk.kernel
def dist_clamped(lane: Grid["row", "col":NC], u: Scalar, v: Vector[2], k: Param, out: Mutable[Scalar],
                 tot: Mutable[Scalar]):
    last = lane.extent("row") - 1  # neighbour rows clamped to the grid, as docs/semantics.md writes them
    up = u.at(row=hm.max(lane.row - 2, 0), col=hm.min(lane.col + 1, NC - 1))
    down = v.at(row=hm.clamp(lane.row + 1, 0, last))
    out = u * k + up * down[0] - down[1] * v.at(row=hm.min(lane.row + 3, last), col=hm.max(lane.col - 1, 0))[0]
    tot = hawk.sum(out * u, policy="ordered")


@hawk.kernel
def dist_sgrad(x: Scalar, start: Scalar, y: Mutable[Scalar], z: Mutable[Scalar], tot: Mutable[Scalar]):
    y = hawk.scan(x * x)
    z = hawk.scan(x, reset=start > 0.5, exclusive=True)
    tot = hawk.sum(y * x, policy="ordered")


# ---- scans beside halos and Vector planes; a large sink (each shard's copies folded into one) -----------------------
@hawk.kernel
def dist_hscan(lane: Grid["row", "col":NC], u: Scalar, y: Mutable[Scalar], r: Mutable[Scalar], tot: Mutable[Scalar]):
    i, j = lane.row, lane.col
    s = u.at(row=i - 1, col=j) + u.at(row=i + 2, col=j) * 0.5 - u
    y = hawk.scan(s)
    r = hawk.scan(u.at(row=i + 1, col=j - 1), op=hm.max, reverse=True)
    tot = hawk.sum(y * u, policy="ordered")


@hawk.kernel
def dist_vscan(lane: Grid["row", "col":NC], v: Vector[2], c: Vector[3], y: Mutable[Scalar], z: Mutable[Vector[2]],
               tot: Mutable[Vector[3]]):
    i, j = lane.row, lane.col
    w = v.at(row=i + 1, col=j) - v.at(row=i - 3, col=j) * 0.5 + v
    y = hawk.scan(w[0] * c[2] + w[1], reset=j == 0)
    z = w * y + c[0]
    tot = hawk.sum(c * y, policy="ordered")


BIG = 5000  # slots of the large sinks: over sinks.LARGE values a copy (plain too)


@hawk.kernel
def dist_bigsink(x: Scalar, key: Index, acc: Mutable["slot":BIG], plain: Mutable["slot":BIG],
                 comp: Mutable["slot":BIG]):
    hawk.scatter(acc, policy="ordered")[key] += x
    hawk.scatter(plain, policy="plain")[key] += x
    hawk.scatter(comp)[key] += x * 0.5


@hawk.func
def dist_lerp(a, b):  # neither associative nor commutative: the fold's order is in the bits
    return a + (b - a) * 0.25


@hawk.kernel
def dist_rowlerp(lane: Grid["row", "col":NC], x: Scalar, tot: Mutable[Scalar], y: Mutable[Scalar]):
    tot = hawk.reduce(dist_lerp, x, over="col", where=x > -1.0, identity=7.0)  # each row's fold, on its shard
    y = x * hawk.reduce(dist_lerp, x * x, over="col", identity=0.0)  # (read in the body: a second stage)


@hawk.kernel
def dist_rowlerp_bare(lane: Grid["row", "col":NC], x: Scalar, tot: Mutable[Scalar]):
    tot = hawk.reduce(dist_lerp, x, over="col", where=x > -1.0)  # no identity=: an empty row refuses


@hawk.kernel
def dist_fold(x: Scalar, p: Mutable[Scalar], q: Mutable[Scalar], y: Mutable[Scalar]):
    p = hawk.reduce(dist_lerp, x)
    q = hawk.reduce(dist_lerp, x * 2.0, where=x > 1.0)
    y = x - p


@hawk.kernel
def dist_decay(x: Scalar, w: Param, y: Mutable[Scalar], tot: Mutable[Scalar]):
    y = y * w + hm.sin(x)  # (reads y's initial contents: zeros in a sharded call, which takes no passed outputs)
    tot = hawk.sum(y * y, policy="ordered")


@hawk.kernel
def dist_rkscan(x: Scalar, k: Index, y: Mutable[Scalar], z: Mutable[Scalar], w: Mutable[Scalar],
                v: Mutable[Scalar]):
    y = hawk.scan(x, by=k, keys=5, reverse=True)  # each key's lanes from the last down (a finish's fold)
    z = hawk.scan(x * x, by=k, keys=5)  # (its gradient: a reversed keyed scan)
    w = hawk.scan(x, by=k, keys=5, op=hm.max)  # (its gradient: keyed scans by funcs along each key's plateaus)
    v = hawk.scan(x, by=k, keys=5, order="key")  # (its gradient: keyed scans and one in key order)


# ---- reductions keeping axes other than the leading one (each chunk's copy of the cell, gathered like a sink's) ---
KC = 5  # the kept columns


@hawk.kernel
def dist_cols(lane: Grid["row", "col":KC], x: Scalar, s_auto: Mutable[Scalar], s_comp: Mutable[Scalar],
              s_ord: Mutable[Scalar], mu: Mutable[Scalar], mu_ord: Mutable[Scalar]):
    s_auto = hawk.sum(x, over="row")
    s_comp = hawk.sum(x, over="row", policy="compensated")
    s_ord = hawk.sum(x * x, over="row", policy="ordered")
    mu = hawk.mean(x, over="row", where=x < 1.0)
    mu_ord = hawk.mean(x, over="row", where=x < 2.0, policy="ordered")


@hawk.kernel
def dist_colmax(lane: Grid["row", "col":KC], x: Scalar) -> Scalar:
    return hawk.max(x, over="row")


@hawk.kernel
def dist_colmin(lane: Grid["row", "col":KC], x: Scalar) -> Scalar:
    return hawk.min(x, over="row", where=x > -1.0)


@hawk.kernel
def dist_chan(lane: Grid["n", "c":3, "p":7], x: Scalar, run: Mutable[Scalar], s: Mutable[Scalar],
              so: Mutable[Scalar]):  # per channel (a middle axis), beside a scan: shards start mid-row
    run = hawk.scan(x)
    s = hawk.sum(x, over=("n", "p"), policy="compensated")
    so = hawk.sum(x, over=("n", "p"), policy="ordered")


@hawk.kernel
def dist_bnorm(lane: Grid["n", "c":3], x: Scalar, y: Mutable[Scalar], mu: Mutable[Scalar]):
    mu = hawk.mean(x, over="n", policy="ordered")  # read below: a cut cell, combined before the second stage
    d = x - mu
    y = d / hm.sqrt(hawk.mean(d * d, over="n", policy="ordered") + 1e-5)


@hawk.kernel
def dist_colvec(lane: Grid["row", "col":3], v: Vector[2], w: Param, s: Mutable[Vector[2]], t: Mutable[Scalar]):
    s = hawk.sum(v * v * w, over="row", policy="ordered")
    t = hawk.sum(v[0] * w, policy="ordered")




@hawk.kernel
def dist_colwide(lane: Grid["row", "col":70_000], x: Scalar) -> Scalar:  # over PRIVATE_SLOTS: copies on the host
    return hawk.sum(x, over="row")


@hawk.kernel
def dist_colfold(lane: Grid["row", "col":3], x: Scalar) -> Scalar:  # refused: a fold keeps no copy per chunk
    return hawk.reduce(dist_lerp, x, over="row")


# ---- reductions keeping the leading axis (a row sum): each shard's own rows, like a per-lane output ------------------
@hawk.kernel
def dist_rowstats(lane: Grid["row", "col":KC], x: Scalar, s_auto: Mutable[Scalar], s_comp: Mutable[Scalar],
                  s_ord: Mutable[Scalar], mu: Mutable[Scalar], tot: Mutable[Scalar]):
    s_auto = hawk.sum(x, over="col")
    s_comp = hawk.sum(x, over="col", policy="compensated")
    s_ord = hawk.sum(x * x, over="col", policy="ordered")
    mu = hawk.mean(x, over="col", where=x < 1.0)
    tot = hawk.sum(x, policy="ordered")  # (over every lane: the whole run's, beside the shard's rows)


@hawk.kernel
def dist_rowmax(lane: Grid["row", "col":KC], x: Scalar) -> Scalar:
    return hawk.max(x, over="col")


@hawk.kernel
def dist_rowloss(lane: Grid["row", "col":KC], x: Scalar, y: Scalar, w: Param, loss: Mutable[Scalar],
                 mu: Mutable[Scalar], z: Mutable[Scalar]):
    e = x * w - y  # per-example losses: what a gradient through a sharded batch differentiates
    loss = hawk.sum(e * e, over="col", policy="ordered")
    mu = hawk.mean(e, over="col", where=x < 1.0, policy="compensated")
    z = e * 2.0


@hawk.kernel
def dist_rowvec(lane: Grid["row", "col":KC], v: Vector[2], w: Param) -> Vector[2]:
    return hawk.sum(v * v * w, over="col")


@hawk.kernel
def dist_rowtot(lane: Grid["row", "col":KC], x: Scalar, s: Mutable[Scalar], tot: Mutable[Scalar], z: Mutable[Scalar]):
    s = hawk.sum(x, over="col")  # tot's cotangent (read below) enters at the whole run's first lane, so the
    tot = hawk.sum(x, policy="ordered")  # adjoint runs at whole-run numbers and reads the rows' gathered
    z = x - tot


@hawk.kernel
def dist_rowcoord(lane: Grid["row", "col":KC], x: Scalar) -> Scalar:  # refused: global rows (lane.row)
    return hawk.sum(x * lane.row, over="col")


@hawk.kernel
def dist_rowscan(lane: Grid["row", "col":KC], x: Scalar, run: Mutable[Scalar], tot: Mutable[Scalar]):
    run = hawk.scan(x)  # refused beside a row sum: a scan runs shards with whole-run lane numbers
    tot = hawk.sum(x, over="col")


@hawk.kernel
def dist_rowfold(lane: Grid["row", "col":KC], x: Scalar) -> Scalar:  # refused: a row fold without identity=
    return hawk.reduce(dist_lerp, x, over="col")


@hawk.kernel
def dist_rowwhole(lane: Grid["row", "col":KC], x: Scalar, tot: Mutable[Scalar], every: Mutable[Scalar]):
    tot = hawk.reduce(dist_lerp, x, over="col", identity=0.0)  # refused beside a fold over every lane (whole-run
    every = hawk.reduce(dist_lerp, x)  # lane numbers), whose missing identity= is not the row fold's


@hawk.kernel
def dist_ints(x: Scalar, bins: Mutable[Index], y: Mutable[Scalar], tot: Mutable[Scalar]):
    bins = hm.index(x * 4.0, 4)  # an integer output: per lane, sharded like y
    y = x * x
    tot = hawk.sum(x * x, policy="ordered")


@hawk.kernel
def dist_place(key: Index, x: Scalar, out: Mutable[Scalar], ids: Mutable[Index], y: Mutable[Scalar],
               tot: Mutable[Scalar]):
    hawk.scatter(out)[key] = x * 2.0  # outputs written by key: positions, not lanes (every shard stores into all)
    hawk.scatter(ids)[key] = hm.index(x * 4.0, 4)
    y = x * x
    tot = hawk.sum(x * x, policy="ordered")


@hawk.kernel
def dist_compact(lane: Grid["i"], x: Scalar, kept: Mutable[Scalar], at: Mutable[Index], n: Mutable[Scalar]):
    keep = x > 0.3  # stream compaction: the kept lanes' values at the positions a scan numbers them (whole blocks)
    pos = hm.where(keep, hawk.scan(hm.where(keep, 1, 0)) - 1, -1)
    hawk.scatter(kept)[pos] = x * 2.0
    hawk.scatter(at)[pos] = lane.i
    n = hawk.sum(hm.where(keep, 1.0, 0.0), policy="ordered")


# ---- row cells beside neighbour reads and coordinates: shards at whole-run lane numbers (eagle/distributed/rows.py)
@hawk.kernel
def dist_rowhalo(lane: Grid["row", "col":KC], u: Scalar, s_auto: Mutable[Scalar], s_comp: Mutable[Scalar],
                 s_ord: Mutable[Scalar], mu: Mutable[Scalar], tot: Mutable[Scalar], out: Mutable[Scalar]):
    v = u.at(row=lane.row - 1) + u.at(row=lane.row + 2) - 2.0 * u + u.at(col=lane.col + 1) * 0.5
    s_auto = hawk.sum(v, over="col")
    s_comp = hawk.sum(v, over="col", policy="compensated")
    s_ord = hawk.sum(v * v, over="col", policy="ordered")
    mu = hawk.mean(v, over="col", where=v < 1.0, policy="ordered")
    tot = hawk.sum(v, policy="ordered")
    out = v * lane.row


@hawk.kernel
def dist_rowhalo_max(lane: Grid["row", "col":KC], u: Scalar) -> Scalar:
    return hawk.max(u.at(row=lane.row + 1) - u, over="col", where=u < 2.0)


@hawk.kernel
def dist_rowhalo_fold(lane: Grid["row", "col":KC], u: Scalar) -> Scalar:
    return hawk.reduce(dist_lerp, u.at(row=lane.row - 1) * u, over="col", where=u > -1.0, identity=7.0)


@hawk.kernel
def dist_rowhalo_vec(lane: Grid["row", "col":KC], v: Vector[2], w: Param) -> Vector[2]:
    return hawk.sum(v.at(row=lane.row + 1) * v * w, over="col", policy="ordered")


@hawk.kernel
def dist_rowhalo_3d(lane: Grid["row", "mid":3, "col":KC], u: Scalar, s: Mutable[Scalar], m: Mutable[Scalar]):
    v = u.at(row=lane.row - 1) * 0.5 + u + lane.mid
    s = hawk.sum(v, over="col", policy="ordered")  # (slots per row: the 3 mids)
    m = hawk.mean(v, over="col", policy="compensated")


@hawk.kernel
def dist_rowhalo_cut(lane: Grid["row", "col":KC], u: Scalar) -> Scalar:
    v = u.at(row=lane.row + 1) * 0.5 + u  # a row mean read in the body: a cut cell between two stages
    return v - hawk.mean(v, over="col", policy="ordered")


@hawk.kernel
def dist_rowhalo_cutwide(lane: Grid["row", "col":1100], u: Scalar) -> Scalar:
    v = u.at(row=lane.row + 1) * 0.5 + u  # a row mean over more lanes than a block: two stages, a row cut
    return v - hawk.mean(v, over="col", policy="ordered")
