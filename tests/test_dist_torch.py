"""eagle.torch over torch.distributed (issue #16): `eagle.torch.wrap(kernel, group=...)` in 4 gloo processes on one
machine, each passing its own shard, against the one-process `Plan.run` over all the lanes.

Pinned here: with shards of unequal sizes (one far smaller than a chunk, one empty of ordered blocks), ordered sums,
means and scatters are bitwise equal to the one-process run on every rank; max is exact; an auto sum is within the fast
form's bound; per-lane outputs are the rank's own lanes; a passed sink's prior content is added once; the cells of a
split kernel (its cut cells combined between stages) are bitwise equal; float32 ordered sums too; a 2-D stencil over
rows split unevenly exchanges halo rows and runs with the whole grid's coordinates, bitwise equal to one process (a
Vector plane too); a stencil's gradient (gather form, and the scatter fallback when a pair errs) and a Vector plane's
beside cells are bitwise plan.reverse's on every rank; reverse scans and gradients through scans over uneven ranks
are bitwise the one-process run; a call refused on one rank only (a key outside the sink, a plane
the binder refuses, other dtypes) is refused on every rank with every tensor unchanged. The ranks run in a subprocess
(torch.multiprocessing.spawn from this file as a script) and report per case to the test; the kernels are
tests/dist_kernels.py's, shared with the JAX tests.
"""

import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from dist_kernels import (  # noqa: E402  (the kernels, shared with test_dist_jax.py)
    BIG,
    KC,
    NC,
    NR,
    dist_bigsink,
    dist_bnorm,
    dist_chan,
    dist_clamped,
    dist_colmax,
    dist_colmin,
    dist_cols,
    dist_colvec,
    dist_compact,
    dist_decay,
    dist_ffold,
    dist_fgrad,
    dist_fold,
    dist_fscan,
    dist_grad,
    dist_gridscan,
    dist_gridstore,
    dist_heat,
    dist_hscan,
    dist_ints,
    dist_kfscan,
    dist_kscan,
    dist_loopstore,
    dist_max,
    dist_place,
    dist_prod,
    dist_ratio,
    dist_rowblock,
    dist_rowcoord,
    dist_rowhalo,
    dist_rowhalo_3d,
    dist_rowhalo_cutwide,
    dist_rowhalo_fold,
    dist_rowhalo_max,
    dist_rowhalo_vec,
    dist_rowlerp,
    dist_rowlerp_bare,
    dist_rowloss,
    dist_rowmax,
    dist_rowprod,
    dist_rowstats,
    dist_rowtot,
    dist_rowvec,
    dist_rscan,
    dist_scans,
    dist_sgrad,
    dist_softmax,
    dist_split,
    dist_store,
    dist_sums,
    dist_twice,
    dist_vheat,
    dist_vscan,
    dist_zero_signs,
)

pytestmark = pytest.mark.slow  # (pyproject.toml's markers: -m 'not slow' leaves it out)

ROOT = Path(__file__).resolve().parents[1]
RANKS = 4


def _data(dtype=np.float64, n=70_001, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=n) * np.exp(rng.normal(size=n) * 6)).astype(dtype)
    key = rng.integers(-1, 5, size=n).astype(np.int32)
    cuts = [0, 37, 20_000, 61_000, n]  # rank 0: 37 lanes; the others uneven
    return x, key, cuts


def _bits(got, want, names):
    for k in names:
        g, w = got[k].detach().numpy(), np.asarray(want[k])
        assert g.shape == w.shape and g.dtype == w.dtype, (k, g.shape, w.shape, g.dtype, w.dtype)
        assert g.tobytes() == w.tobytes(), (k, g, w)


# ---- the cases, run on every rank ---------------------------------------------------------------------------------
def case_sums_uneven_shards(rank, group):
    import torch

    import eagle
    import eagle.torch
    from hawk.exact import fraction_sum

    f = eagle.torch.wrap(dist_sums, group=group)
    x, key, cuts = _data()
    lo, hi = cuts[rank], cuts[rank + 1]
    got = f(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(key[lo:hi]))
    want = eagle.deploy(dist_sums).run(x=x, key=key)
    _bits(got, want, ["acc", "m", "tot"])
    exact = float(fraction_sum(x))
    assert got["tot"].item() == exact
    assert abs(got["fast"].item() - exact) <= x.size * np.finfo(np.float64).eps * np.abs(x).sum()
    again = f(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(key[lo:hi]))  # the prepared run, reused
    _bits(again, want, ["acc", "m", "tot"])


def case_max_and_lane_outputs(rank, group):
    import torch

    import eagle
    import eagle.torch

    f = eagle.torch.wrap(dist_max, group=group)
    x, _, cuts = _data(seed=1)
    lo, hi = cuts[rank], cuts[rank + 1]
    got = f(x=torch.from_numpy(x[lo:hi]), s=torch.tensor(-0.5, dtype=torch.float64))
    want = eagle.deploy(dist_max).run(x=x, s=-0.5)
    _bits(got, {"mx": want["mx"], "y": np.asarray(want["y"])[lo:hi]}, ["mx", "y"])


def case_prior_sink_added_once(rank, group):
    import torch

    import eagle
    import eagle.torch

    f = eagle.torch.wrap(dist_sums, group=group)
    x, key, cuts = _data(seed=2)
    lo, hi = cuts[rank], cuts[rank + 1]
    prior = np.linspace(-1.0, 1.0, 5)
    got = f(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(key[lo:hi]), acc=torch.from_numpy(prior.copy()))
    want = eagle.deploy(dist_sums).run(x=x, key=key, acc=prior.copy())
    _bits(got, want, ["acc", "tot"])


def case_zero_signs_of_plain_and_compensated_sinks(rank, group):
    """A slot of only -0.0 (prior and terms) ends -0.0, as on one device; an omitted sink starts at +0.0."""
    import torch

    import eagle
    import eagle.torch

    f = eagle.torch.wrap(dist_zero_signs, group=group)
    _, key, cuts = _data(seed=3)
    x = np.where(key == 2, 0.0, -0.0)  # slot 2 gets +0.0 terms, the others -0.0 ones
    lo, hi = cuts[rank], cuts[rank + 1]
    prior = np.array([-0.0, 0.0, -0.0, -0.0, 0.0])
    for given in ({}, {"acc": prior, "comp": prior}):
        mine = {k: torch.from_numpy(v.copy()) for k, v in given.items()}
        got = f(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(key[lo:hi]), **mine)
        want = eagle.deploy(dist_zero_signs).run(x=x, key=key, **{k: v.copy() for k, v in given.items()})
        _bits(got, want, ["acc", "comp"])
        if given:
            assert np.signbit(want["acc"]).tolist() == [True, False, False, True, False], want["acc"]


def case_split_kernel(rank, group):
    import torch

    import eagle
    import eagle.torch

    f = eagle.torch.wrap(dist_split, group=group)
    v = np.random.default_rng(3).normal(size=(3, 9_001))
    cuts = [0, 1_000, 1_001, 5_000, 9_001]
    lo, hi = cuts[rank], cuts[rank + 1]
    got = f(v=torch.from_numpy(np.ascontiguousarray(v[:, lo:hi])))
    want = eagle.deploy(dist_split).run(v=v)
    _bits(got, {**{f"tot_{k}": want[f"tot_{k}"] for k in range(3)}, "z": np.asarray(want["z"])[:, lo:hi]},
          ["tot_0", "tot_1", "tot_2", "z"])


def case_float32_ordered(rank, group):
    import torch

    import eagle
    import eagle.torch

    f = eagle.torch.wrap(dist_sums, group=group)
    x, key, cuts = _data(np.float32, seed=4)
    lo, hi = cuts[rank], cuts[rank + 1]
    got = f(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(key[lo:hi]))
    want = eagle.deploy(dist_sums).run(x=x, key=key)
    _bits(got, want, ["acc", "m", "tot"])


def case_stencil_halos_uneven_rows(rank, group):
    import torch

    import eagle
    import eagle.torch

    f = eagle.torch.wrap(dist_heat, group=group)
    u = np.random.default_rng(5).normal(size=(NR, NC))
    cuts = [0, 2, 19, 33, NR]  # rank 0 holds exactly the halo's 2 rows
    lo, hi = cuts[rank], cuts[rank + 1]
    got = f(u=torch.from_numpy(u[lo:hi].copy()), k=0.1)
    want = eagle.deploy(dist_heat).run(u=u, k=0.1)
    _bits(got, {"out": np.asarray(want["out"])[lo:hi], "tot": want["tot"]}, ["out", "tot"])
    v = np.random.default_rng(6).normal(size=(2, NR, NC))  # a Vector plane with halos: strided by the shard's rows
    got = eagle.torch.wrap(dist_vheat, group=group)(v=torch.from_numpy(v[:, lo:hi].copy()),
                                                     u=torch.from_numpy(u[lo:hi].copy()))
    want = eagle.deploy(dist_vheat).run(v=v, u=u)
    _bits(got, {"out": np.asarray(want["out"])[:, lo:hi], "tot": want["tot"]}, ["out", "tot"])


def case_scans_and_block_reductions_uneven_shards(rank, group):
    """Forward scans over ranks of 37, 4963, 8000 and 1 lanes (blocks of 4096 lanes over up to 3 ranks; a rank's
    lanes run by another): every rank's lanes bitwise the one-process scan, the ordered total too, keyed scans
    too; a 3-stage grid scan over unevenly split rows; a row softmax (block reductions over the trailing axis)
    over uneven rows."""
    import torch

    import eagle
    import eagle.torch

    rng = np.random.default_rng(13)
    n = 13_001
    x = rng.normal(size=n) * np.exp(rng.normal(size=n) * 4)
    start = (rng.random(n) < 0.002).astype(np.float64)
    lo, hi = [0, 37, 5000, 13_000, n][rank:rank + 2]
    want = eagle.deploy(dist_scans).run(x=x, start=start)
    got = eagle.torch.wrap(dist_scans, group=group)(x=torch.from_numpy(x[lo:hi]), start=torch.from_numpy(start[lo:hi]))
    _bits(got, {k: np.asarray(v)[lo:hi] if k != "tot" else v for k, v in want.items()}, list(want))
    key = rng.integers(-1, 5, size=n).astype(np.int32)  # keyed scans, the same ranks
    want = eagle.deploy(dist_kscan).run(x=x, key=key)
    got = eagle.torch.wrap(dist_kscan, group=group)(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(key[lo:hi]))
    _bits(got, {k: np.asarray(v)[lo:hi] if k != "tot" else v for k, v in want.items()}, list(want))
    u = rng.normal(size=(200, 50))  # 3 stages, blocks starting mid-row, lane.row: rows split 3/87/1/109
    r0, r1 = [0, 3, 90, 91, 200][rank:rank + 2]
    want = eagle.deploy(dist_gridscan).run(u=u)
    got = eagle.torch.wrap(dist_gridscan, group=group)(u=torch.from_numpy(u[r0:r1]))
    _bits(got, {"y": np.asarray(want["y"])[r0:r1], "t": want["t"]}, ["y", "t"])
    u = rng.normal(size=(NR, NC)) * 3
    r0, r1 = [0, 5, 17, 30, NR][rank:rank + 2]
    want = eagle.deploy(dist_softmax).run(u=u)
    got = eagle.torch.wrap(dist_softmax, group=group)(u=torch.from_numpy(u[r0:r1]))
    _bits(got, {"p": np.asarray(want["p"])[r0:r1], "tot": want["tot"]}, ["p", "tot"])


def case_reverse_scans_and_scan_gradients_uneven_shards(rank, group):
    """Reverse scans over ranks of 37, 4963, 8000 and 1 lanes: every rank's lanes bitwise the one-process run
    (np.cumsum(x[::-1])[::-1] for the add: the whole run's lanes folded from the last down by every rank's
    finish), the ordered total too; and backward() through forward add scans (their adjoint: reverse scans)
    bitwise plan.reverse's."""
    import torch

    import eagle
    import eagle.torch

    rng = np.random.default_rng(23)
    n = 13_001
    x = rng.normal(size=n) * np.exp(rng.normal(size=n) * 4)
    start = (rng.random(n) < 0.002).astype(np.float64)
    lo, hi = [0, 37, 5000, 13_000, n][rank:rank + 2]
    want = eagle.deploy(dist_rscan).run(x=x, start=start)
    got = eagle.torch.wrap(dist_rscan, group=group)(x=torch.from_numpy(x[lo:hi]), start=torch.from_numpy(start[lo:hi]))
    _bits(got, {k: np.asarray(v)[lo:hi] if k != "tot" else v for k, v in want.items()}, list(want))
    assert np.asarray(want["y"]).tobytes() == np.cumsum(x[::-1])[::-1].tobytes()
    cy, cz = rng.normal(size=n), rng.normal(size=n)
    xt = torch.from_numpy(x[lo:hi].copy()).requires_grad_()
    got = eagle.torch.wrap(dist_sgrad, group=group)(x=xt, start=torch.from_numpy(start[lo:hi]))
    ((got["y"] * torch.from_numpy(cy[lo:hi])).sum() + (got["z"] * torch.from_numpy(cz[lo:hi])).sum()
     + 0.7 * got["tot"].sum()).backward()
    want = eagle.deploy(dist_sgrad).reverse({"y": cy, "z": cz, "tot": np.array([0.7])}, x=x, start=start)
    _bits({"x": xt.grad}, {"x": np.asarray(want["x"])[lo:hi]}, ["x"])


def case_scans_by_a_func_uneven_shards(rank, group):
    """Scans by a @hawk.func (forward with reset=, reverse exclusive) and an ordered sum of them over ranks of 37,
    4963, 8000 and 1 lanes: bitwise the one-process run (the whole run folded in lane order by every rank's
    finish); backward() through them, through keyed ones and through a fold by the func read later in the body,
    bitwise plan.reverse's."""
    import torch

    import eagle
    import eagle.torch

    rng = np.random.default_rng(29)
    n = 13_001
    x = rng.normal(size=n)
    start = (rng.random(n) < 0.002).astype(np.float64)
    lo, hi = [0, 37, 5000, 13_000, n][rank:rank + 2]
    want = eagle.deploy(dist_fscan).run(x=x, start=start)
    got = eagle.torch.wrap(dist_fscan, group=group)(x=torch.from_numpy(x[lo:hi]), start=torch.from_numpy(start[lo:hi]))
    _bits(got, {k: np.asarray(v)[lo:hi] if k != "tot" else v for k, v in want.items()}, list(want))
    cy, cz = rng.normal(size=n), rng.normal(size=n)
    xt = torch.from_numpy(x[lo:hi].copy()).requires_grad_()
    got = eagle.torch.wrap(dist_fgrad, group=group)(x=xt, start=torch.from_numpy(start[lo:hi]))
    ((got["y"] * torch.from_numpy(cy[lo:hi])).sum() + (got["z"] * torch.from_numpy(cz[lo:hi])).sum()
     + 0.3 * got["tot"].sum()).backward()
    want = eagle.deploy(dist_fgrad).reverse({"y": cy, "z": cz, "tot": np.array([0.3])}, x=x, start=start)
    _bits({"x": xt.grad}, {"x": np.asarray(want["x"])[lo:hi]}, ["x"])
    xt = torch.from_numpy(x[lo:hi].copy()).requires_grad_()  # a fold by the func, read later in the body
    got = eagle.torch.wrap(dist_ffold, group=group)(x=xt)
    ((got["y"] * torch.from_numpy(cy[lo:hi])).sum() + 0.3 * got["t"].sum()).backward()
    want = eagle.deploy(dist_ffold).reverse({"y": cy, "t": np.array([0.3])}, x=x)
    _bits({"x": xt.grad}, {"x": np.asarray(want["x"])[lo:hi]}, ["x"])
    key = rng.integers(-1, 5, size=n).astype(np.int32)  # keyed scans by the func, and their gradient
    xt = torch.from_numpy(x[lo:hi].copy()).requires_grad_()
    got = eagle.torch.wrap(dist_kfscan, group=group)(x=xt, key=torch.from_numpy(key[lo:hi]))
    want = eagle.deploy(dist_kfscan).run(x=x, key=key)
    _bits(got, {k: np.asarray(v)[lo:hi] for k, v in want.items()}, list(want))
    ((got["y"] * torch.from_numpy(cy[lo:hi])).sum() + (got["z"] * torch.from_numpy(cz[lo:hi])).sum()).backward()
    want = eagle.deploy(dist_kfscan).reverse({"y": cy, "z": cz}, x=x, key=key)
    _bits({"x": xt.grad}, {"x": np.asarray(want["x"])[lo:hi]}, ["x"])


def case_running_products_and_their_gradients_uneven_shards(rank, group):
    """Running products (forward; reverse exclusive with reset=) and a product fold over ranks of 37, 4963, 8000
    and 1 lanes: the one-process bits; backward() through all three (zeros included: the first zero's share is
    the product of the others, later lanes' 0) bitwise plan.reverse's."""
    import torch

    import eagle
    import eagle.torch

    rng = np.random.default_rng(29)
    n = 13_001
    x = 1.0 + 0.01 * rng.normal(size=n)
    x[[20, 6000, 6001]] = 0.0
    start = (rng.random(n) < 0.002).astype(np.float64)
    lo, hi = [0, 37, 5000, 13_000, n][rank:rank + 2]
    want = eagle.deploy(dist_prod).run(x=x, start=start)
    xt = torch.from_numpy(x[lo:hi].copy()).requires_grad_()
    got = eagle.torch.wrap(dist_prod, group=group)(x=xt, start=torch.from_numpy(start[lo:hi]))
    _bits(got, {k: np.asarray(v)[lo:hi] if k != "p" else v for k, v in want.items()}, list(want))
    cy, cr = rng.normal(size=n), rng.normal(size=n)
    ((got["y"] * torch.from_numpy(cy[lo:hi])).sum() + (got["r"] * torch.from_numpy(cr[lo:hi])).sum()
     + 0.3 * got["p"].sum()).backward()
    want = eagle.deploy(dist_prod).reverse({"y": cy, "r": cr, "p": np.array([0.3])}, x=x, start=start)
    _bits({"x": xt.grad}, {"x": np.asarray(want["x"])[lo:hi]}, ["x"])


def _grad_setup(rank, seed=6):
    x, key, cuts = _data(seed=seed)
    key = np.where(key < 0, 0, key).astype(np.int32)
    rng = np.random.default_rng(seed + 100)
    w, s = rng.normal(size=5), 1.3
    cot = dict(acc=rng.normal(size=5), tot=np.array([0.7]), m=np.array([-0.4]), y=rng.normal(size=x.size))
    return x, key, cuts[rank], cuts[rank + 1], w, s, cot


def case_gradients_uneven_shards(rank, group):
    import torch

    import eagle
    import eagle.torch

    f = eagle.torch.wrap(dist_grad, group=group)
    x, key, lo, hi, w, s, cot = _grad_setup(rank)
    xt = torch.from_numpy(x[lo:hi].copy()).requires_grad_()
    wt = torch.from_numpy(w.copy()).requires_grad_()
    st = torch.tensor(s, dtype=torch.float64, requires_grad=True)
    prior = torch.from_numpy(np.linspace(-1.0, 1.0, 5)).requires_grad_()
    got = f(x=xt, key=torch.from_numpy(key[lo:hi]), w=wt, s=st, acc=prior)
    loss = sum((got[n] * torch.from_numpy(c[lo:hi] if n == "y" else c)).sum() for n, c in cot.items())
    loss.backward()
    want = eagle.deploy(dist_grad).reverse(cot, x=x, key=key, w=w, s=s, acc=np.linspace(-1.0, 1.0, 5))
    _bits({"x": xt.grad, "w": wt.grad, "s": st.grad.reshape(1), "acc": prior.grad},
          {"x": np.asarray(want["x"])[lo:hi], "w": want["w"], "s": want["s"], "acc": want["acc"]},
          ["x", "w", "s", "acc"])
    assert np.array_equal(prior.grad.numpy(), cot["acc"])  # a sink's prior content: its cotangent
    gx, = torch.autograd.grad(f(x=xt, key=torch.from_numpy(key[lo:hi]), w=w, s=s)["tot"].sum(), [xt])
    assert np.array_equal(gx.numpy(), np.full(hi - lo, s))  # d tot / d x = s, on this rank's lanes only


def case_gradients_through_stores_into_a_sink_from_a_grid_uneven(rank, group):
    """A Grid kernel storing into a sink with `= v` over uneven row splits: backward() gives plan.reverse's bits
    for the rank's rows, the prior (0 where a lane stored) and the per-lane output's input."""
    import torch

    import eagle
    import eagle.torch

    rng = np.random.default_rng(42)
    u, key = rng.normal(size=(NR, NC)), rng.integers(-1, 5, size=(NR, NC)).astype(np.int32)
    key[key == 2] = -1
    prior, ct, co = rng.normal(size=5), rng.normal(size=5), rng.normal(size=(NR, NC))
    r0, r1 = [0, 1, 20, 21, NR][rank:rank + 2]
    want = eagle.deploy(dist_gridstore).reverse({"last": ct, "out": co}, u=u, key=key, last=prior.copy())
    ut = torch.from_numpy(u[r0:r1].copy()).requires_grad_()
    pt = torch.from_numpy(prior.copy()).requires_grad_()
    got = eagle.torch.wrap(dist_gridstore, group=group)(u=ut, key=torch.from_numpy(key[r0:r1].copy()), last=pt)
    ((got["last"] * torch.from_numpy(ct)).sum() + (got["out"] * torch.from_numpy(co[r0:r1])).sum()).backward()
    _bits({"u": ut.grad, "last": pt.grad}, {"u": np.asarray(want["u"])[r0:r1], "last": want["last"]}, ["u", "last"])


def case_gradients_of_block_reductions_beside_lane_row_uneven(rank, group):
    """Row max and row sum read in the body beside `lane.row`, over uneven row splits: backward() runs the adjoint
    with its block reductions sharded, plan.reverse's bits on the rank's rows."""
    import torch

    import eagle
    import eagle.torch

    rng = np.random.default_rng(44)
    x, ct = np.round(rng.normal(size=(NR, NC)) * 2) / 2, rng.normal(size=(NR, NC))
    r0, r1 = [0, 3, 4, 30, NR][rank:rank + 2]
    want = eagle.deploy(dist_rowblock).reverse(ct, x=x)
    xt = torch.from_numpy(x[r0:r1].copy()).requires_grad_()
    (eagle.torch.wrap(dist_rowblock, group=group)(x=xt) * torch.from_numpy(ct[r0:r1])).sum().backward()
    _bits({"x": xt.grad}, {"x": np.asarray(want["x"])[r0:r1]}, ["x"])


def case_folds_keeping_rows_uneven(rank, group):
    """Row folds (hawk.reduce over the columns) over uneven row splits: each rank's rows have the one-device bits
    (an empty row's identity included); without identity= every rank refuses alike, before any launch."""
    import torch

    import eagle
    import eagle.torch
    from eagle import InputError

    x = np.random.default_rng(46).normal(size=(NR, NC))
    x[21] = -2.0  # (the row rank 3 starts with: where= keeps no lane)
    r0, r1 = [0, 1, 2, 21, NR][rank:rank + 2]
    want = eagle.deploy(dist_rowlerp).run(x=x)
    got = eagle.torch.wrap(dist_rowlerp, group=group)(x=torch.from_numpy(x[r0:r1].copy()))
    _bits(got, {k: np.asarray(v)[r0:r1] for k, v in want.items()}, ["tot", "y"])
    mine = torch.from_numpy(x[r0:r1].copy())
    try:
        eagle.torch.wrap(dist_rowlerp_bare, group=group)(x=mine)
    except InputError as exc:
        assert "dist_rowlerp_bare" in str(exc) and "identity=" in str(exc), str(exc)
        assert mine.numpy().tobytes() == x[r0:r1].tobytes()  # (refused before anything ran: the rank's rows kept)
    else:
        raise AssertionError("a row fold without identity= ran over the group")


def case_gradients_of_a_split_kernel(rank, group):
    import torch

    import eagle
    import eagle.torch

    f = eagle.torch.wrap(dist_ratio, group=group)  # the adjoint recomputes tot (a stage of its own) across ranks
    x = np.random.default_rng(7).normal(size=9_001) + 3.0
    cuts = [0, 1_000, 1_001, 5_000, 9_001]
    lo, hi = cuts[rank], cuts[rank + 1]
    cz = np.random.default_rng(8).normal(size=x.size)
    xt = torch.from_numpy(x[lo:hi].copy()).requires_grad_()
    got = f(x=xt)
    ((got["z"] * torch.from_numpy(cz[lo:hi])).sum() + got["tot"].sum() * 2.0).backward()
    want = eagle.deploy(dist_ratio).reverse({"z": cz, "tot": np.array([2.0])}, x=x)
    _bits({"x": xt.grad}, {"x": np.asarray(want["x"])[lo:hi]}, ["x"])
    v = np.random.default_rng(9).normal(size=(3, x.size)) + 3.0  # Vector planes beside cells: whole-run lanes
    cv = np.random.default_rng(10).normal(size=v.shape)
    vt = torch.from_numpy(v[:, lo:hi].copy()).requires_grad_()
    got = eagle.torch.wrap(dist_split, group=group)(v=vt)
    ((got["z"] * torch.from_numpy(cv[:, lo:hi])).sum() + got["tot_0"].sum() * 2.0 - got["tot_2"].sum()).backward()
    want = eagle.deploy(dist_split).reverse({"z": cv, "tot": np.array([2.0, 0.0, -1.0])}, v=v)
    _bits({"v": vt.grad}, {"v": np.asarray(want["v"])[:, lo:hi]}, ["v"])


def case_gradient_of_an_output_read_before_assigned(rank, group):
    """A kernel that reads its output's initial contents (zeros: a sharded call takes no passed outputs) over
    uneven ranks: x's and w's gradients bitwise plan.reverse's on the whole run."""
    import torch

    import eagle
    import eagle.torch

    x = np.random.default_rng(31).normal(size=6_001)
    cuts = [0, 10, 3_000, 3_001, 6_001]
    lo, hi = cuts[rank], cuts[rank + 1]
    cy = np.random.default_rng(32).normal(size=x.size)
    xt = torch.from_numpy(x[lo:hi].copy()).requires_grad_()
    wt = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    got = eagle.torch.wrap(dist_decay, group=group)(x=xt, w=wt)
    ((got["y"] * torch.from_numpy(cy[lo:hi])).sum() + 1.5 * got["tot"].sum()).backward()
    want = eagle.deploy(dist_decay).reverse({"y": cy, "tot": np.array([1.5])}, x=x, w=0.7)
    _bits({"x": xt.grad, "w": wt.grad.reshape(1)}, {"x": np.asarray(want["x"])[lo:hi], "w": want["w"]}, ["x", "w"])


def case_integer_outputs_stay_sharded(rank, group):
    """A Mutable[Index] output beside a float one and an ordered total over uneven ranks: each rank's int64 rows
    bitwise the one-process run's, and backward() through the float results bitwise plan.reverse's (the integer
    output takes no cotangent)."""
    import torch

    import eagle
    import eagle.torch

    x = np.random.default_rng(41).uniform(-0.5, 1.5, size=7_003)
    cuts = [0, 3, 2_500, 2_501, 7_003]
    lo, hi = cuts[rank], cuts[rank + 1]
    want = eagle.deploy(dist_ints).run(x=x)
    f = eagle.torch.wrap(dist_ints, group=group)
    xt = torch.from_numpy(x[lo:hi].copy()).requires_grad_()
    got = f(x=xt)
    assert got["bins"].dtype == torch.int64 and not got["bins"].requires_grad
    _bits(got, {"bins": np.asarray(want["bins"])[lo:hi], "y": np.asarray(want["y"])[lo:hi], "tot": want["tot"]},
          ["bins", "y", "tot"])
    cy = np.random.default_rng(42).normal(size=x.size)
    ((got["y"] * torch.from_numpy(cy[lo:hi])).sum() + 0.3 * got["tot"].sum()).backward()
    grad = eagle.deploy(dist_ints).reverse({"y": cy, "tot": np.array([0.3])}, x=x)
    _bits({"x": xt.grad}, {"x": np.asarray(grad["x"])[lo:hi]}, ["x"])
    _bits(f(x=torch.from_numpy(x[lo:hi])), {"bins": np.asarray(want["bins"])[lo:hi]}, ["bins"])  # no autograd


def case_gradients_of_a_stencil_over_uneven_rows(rank, group):
    """A stencil's gradient (the adjoint adds into neighbours' rows) over rows split 2/17/14/15: every rank's rows
    of u's gradient and k's gradient bitwise plan.reverse's over the whole grid."""
    import torch

    import eagle
    import eagle.torch

    f = eagle.torch.wrap(dist_heat, group=group)
    cuts = [0, 2, 19, 33, NR]
    lo, hi = cuts[rank], cuts[rank + 1]
    rng = np.random.default_rng(11)
    u, cout = rng.normal(size=(NR, NC)), rng.normal(size=(NR, NC))
    ut = torch.from_numpy(u[lo:hi].copy()).requires_grad_()
    kt = torch.tensor(0.1, dtype=torch.float64, requires_grad=True)
    got = f(u=ut, k=kt)
    ((got["out"] * torch.from_numpy(cout[lo:hi])).sum() + 1.5 * got["tot"].sum()).backward()
    want = eagle.deploy(dist_heat).reverse({"out": cout, "tot": np.array([1.5])}, u=u, k=0.1)
    _bits({"u": ut.grad, "k": kt.grad.reshape(1)}, {"u": np.asarray(want["u"])[lo:hi], "k": want["k"]}, ["u", "k"])
    assert f.last_sharded_reverse == "gather"
    # cotangents of wildly different scales: some lane's (high, low) pair errs, on one rank at least, and every
    # rank runs the scatter adjoint, as plan.reverse does: the same bits
    wild = cout * np.exp2(rng.integers(-300, 300, size=cout.shape))
    ut.grad = kt.grad = None
    got = f(u=ut, k=kt)
    ((got["out"] * torch.from_numpy(wild[lo:hi])).sum()).backward()
    p = eagle.deploy(dist_heat)
    want = p.reverse({"out": wild}, u=u, k=0.1)
    assert len(p.last_reverse_chunks) > 2  # (plan.reverse fell back too)
    _bits({"u": ut.grad, "k": kt.grad.reshape(1)}, {"u": np.asarray(want["u"])[lo:hi], "k": want["k"]}, ["u", "k"])
    assert f.last_sharded_reverse == "scatter"


def case_gradients_of_a_vector_stencil_over_uneven_rows(rank, group):
    """A Vector plane read at neighbour rows (2 rows a halo) over rows split 2/17/14/15: its gradient takes the
    gather form (its share planes' components exchanged row by row) with plan.reverse's bits, and cotangents of
    wildly different scales send every rank to the scatter adjoint, with the same bits."""
    import torch

    import eagle
    import eagle.torch

    f = eagle.torch.wrap(dist_vheat, group=group)
    cuts = [0, 2, 19, 33, NR]
    lo, hi = cuts[rank], cuts[rank + 1]
    rng = np.random.default_rng(12)
    v, u, cout = rng.normal(size=(2, NR, NC)), rng.normal(size=(NR, NC)), rng.normal(size=(2, NR, NC))
    for co, how in ((cout, "gather"), (cout * np.exp2(rng.integers(-300, 300, size=cout.shape)), "scatter")):
        vt = torch.from_numpy(v[:, lo:hi].copy()).requires_grad_()
        ut = torch.from_numpy(u[lo:hi].copy()).requires_grad_()
        got = f(v=vt, u=ut)
        ((got["out"] * torch.from_numpy(co[:, lo:hi].copy())).sum() + 0.7 * got["tot"].sum()).backward()
        want = eagle.deploy(dist_vheat).reverse({"out": co, "tot": np.array([0.7])}, v=v, u=u)
        _bits({"v": vt.grad, "u": ut.grad}, {"v": np.asarray(want["v"])[:, lo:hi], "u": np.asarray(want["u"])[lo:hi]},
              ["v", "u"])
        assert f.last_sharded_reverse == how, (how, f.last_sharded_reverse)


def case_neighbour_rows_clamped_to_the_grid_over_uneven_rows(rank, group):
    """Neighbour reads clamped to the grid (m.clamp, m.max, m.min with the grid's edges) over ranks of 3/16/14/15
    rows: halos of 3 rows, the one-process bits, and backward() in the gather form with plan.reverse's bits."""
    import torch

    import eagle
    import eagle.torch

    f = eagle.torch.wrap(dist_clamped, group=group)
    cuts = [0, 3, 19, 33, NR]
    lo, hi = cuts[rank], cuts[rank + 1]
    rng = np.random.default_rng(18)
    u, v, co = rng.normal(size=(NR, NC)), rng.normal(size=(2, NR, NC)), rng.normal(size=(NR, NC))
    ut = torch.from_numpy(u[lo:hi].copy()).requires_grad_()
    vt = torch.from_numpy(v[:, lo:hi].copy()).requires_grad_()
    got = f(u=ut, v=vt, k=0.3)
    want = eagle.deploy(dist_clamped).run(u=u, v=v, k=0.3)
    _bits(got, {"out": np.asarray(want["out"])[lo:hi], "tot": want["tot"]}, ["out", "tot"])
    ((got["out"] * torch.from_numpy(co[lo:hi].copy())).sum() + 0.5 * got["tot"].sum()).backward()
    grads = eagle.deploy(dist_clamped).reverse({"out": co, "tot": np.array([0.5])}, u=u, v=v, k=0.3)
    _bits({"u": ut.grad, "v": vt.grad}, {"u": np.asarray(grads["u"])[lo:hi], "v": np.asarray(grads["v"])[:, lo:hi]},
          ["u", "v"])
    assert f.last_sharded_reverse == "gather"


def case_a_sink_added_into_by_two_stages_uneven(rank, group):
    """Sinks scattered into before and after a total is read (two stages) over ranks of 1/1999/1000/1000 lanes: the
    second stage adds to what the first finished (the prior passed once); the ordered sink and total bitwise the
    one-process run, the plain sink to rounding."""
    import torch

    import eagle
    import eagle.torch

    rng = np.random.default_rng(20)
    x = rng.normal(size=4000) * np.exp(rng.normal(size=4000) * 3)
    key = rng.integers(0, 5, size=4000).astype(np.int32)
    prior = rng.normal(size=5)
    lo, hi = [0, 1, 2000, 3000, 4000][rank:rank + 2]
    want = eagle.deploy(dist_twice).run(x=x, key=key, acc=prior.copy())
    got = eagle.torch.wrap(dist_twice, group=group)(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(key[lo:hi]),
                                                     acc=torch.from_numpy(prior))
    _bits(got, want, ["acc", "tot"])
    np.testing.assert_allclose(got["s"].numpy(), np.asarray(want["s"]), rtol=1e-12)


def case_outputs_written_by_key_uneven(rank, group):
    """Outputs written by key (positions, not lanes) over ranks of 1/3999/2000/2000 lanes: every rank passes the
    whole array and stores into it; each position comes from the rank that stored it (a compaction numbered by a
    scan, whose ranks run whole blocks; a permutation from an Index plane, -1 storing nothing): bitwise the
    one-process run. A key outside the array on one rank refuses the call on every rank, and so does a rank
    passing an array of another length, the tensors passed untouched. The gradient (inputs and the array's initial
    content) is plan.reverse's bits on every rank; a position stored on two ranks refuses it on all."""
    import torch

    import eagle
    import eagle.torch

    rng = np.random.default_rng(44)
    n = 8000
    lo, hi = [0, 1, 4000, 6000, n][rank:rank + 2]
    x = rng.uniform(-1.0, 1.0, size=n)
    want = eagle.deploy(dist_compact).run(x=x, kept=np.zeros(n), at=np.zeros(n, np.int64))
    got = eagle.torch.wrap(dist_compact, group=group)(x=torch.from_numpy(x[lo:hi]),
                                                       kept=torch.zeros(n, dtype=torch.float64),
                                                       at=torch.zeros(n, dtype=torch.int64))
    _bits(got, want, ["kept", "at", "n"])
    key = rng.permutation(n).astype(np.int32)
    key[::7] = -1
    start = rng.normal(size=n)
    want = eagle.deploy(dist_place).run(x=x, key=key, out=start.copy(), ids=np.zeros(n, np.int64))
    f = eagle.torch.wrap(dist_place, group=group)
    out0 = torch.from_numpy(start.copy())
    got = f(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(key[lo:hi]), out=out0,
            ids=torch.zeros(n, dtype=torch.int64))
    _bits(got, {"out": want["out"], "ids": want["ids"], "y": np.asarray(want["y"])[lo:hi], "tot": want["tot"]},
          ["out", "ids", "y", "tot"])
    bad = key[lo:hi].copy()
    if rank == 2:
        bad[7] = n + 3
    try:
        f(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(bad), out=out0, ids=torch.zeros(n, dtype=torch.int64))
        raise AssertionError("a key outside the array ran")
    except eagle.InputError as exc:
        assert "of kernel 'dist_place'" in str(exc) and "outside its array" in str(exc), exc
    assert out0.numpy().tobytes() == start.tobytes()
    mine = torch.from_numpy(np.concatenate([start, [0.5]]) if rank == 3 else start.copy())  # rank 3: one more
    try:
        f(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(key[lo:hi]), out=mine,
          ids=torch.zeros(n, dtype=torch.int64))
        raise AssertionError("ranks passing arrays of other lengths ran")
    except eagle.InputError as exc:
        assert "call it differently" in str(exc) and f"'out' of shape ({n + 1},)" in str(exc), exc
    assert mine.numpy()[:n].tobytes() == start.tobytes()
    cto, cty = rng.normal(size=n), rng.normal(size=n)  # the gradient: plan.reverse's bits on every rank
    want = eagle.deploy(dist_place).reverse({"out": cto, "y": cty, "tot": np.array([0.5])}, x=x, key=key,
                                            out=start.copy(), ids=np.zeros(n, np.int64))
    xt = torch.from_numpy(x[lo:hi].copy()).requires_grad_()
    ot = torch.from_numpy(start.copy()).requires_grad_()
    r = f(x=xt, key=torch.from_numpy(key[lo:hi]), out=ot, ids=torch.zeros(n, dtype=torch.int64))
    assert ot.detach().numpy().tobytes() == start.tobytes()  # (a tensor that requires grad: never written)
    ((r["out"] * torch.from_numpy(cto)).sum() + (r["y"] * torch.from_numpy(cty[lo:hi])).sum()
     + 0.5 * r["tot"].sum()).backward()
    _bits({"x": xt.grad, "out": ot.grad}, {"x": np.asarray(want["x"])[lo:hi], "out": want["out"]}, ["x", "out"])
    bad = key.copy()  # one position stored by lanes of two ranks: refused on every rank, as plan.reverse refuses it
    bad[bad == 77] = -1
    bad[10] = bad[5001] = 77
    xt = torch.from_numpy(x[lo:hi].copy()).requires_grad_()
    ot = torch.from_numpy(start.copy()).requires_grad_()
    try:
        f(x=xt, key=torch.from_numpy(bad[lo:hi]), out=ot, ids=torch.zeros(n, dtype=torch.int64))["out"].sum().backward()
        raise AssertionError("a gradient through a position stored on two ranks ran")
    except eagle.InputError as exc:
        assert "plane 'out' of kernel 'dist_place'" in str(exc) and "(first: position 77, 2 stores)" in str(exc), exc
    assert xt.grad is None and ot.grad is None  # (refused: nothing written into the caller's tensors)
    assert xt.detach().numpy().tobytes() == x[lo:hi].tobytes() and ot.detach().numpy().tobytes() == start.tobytes()


def case_a_refused_call_leaves_every_rank_s_tensors_untouched(rank, group):
    """A call refused on one rank only (a key outside the sink, found as its lanes run; an integer plane the binder
    refuses; float32 planes where the others pass float64) is refused on every rank, before any rank's finish:
    no rank is left waiting in a collective, every tensor passed keeps its bytes, and the next call runs."""
    import torch

    import eagle
    import eagle.torch
    from eagle import InputError

    f = eagle.torch.wrap(dist_sums, group=group)
    x, key, cuts = _data(seed=9)
    lo, hi = cuts[rank], cuts[rank + 1]
    prior = np.linspace(-1.0, 1.0, 5)
    bad_key, bad_int, bad_f32 = key[lo:hi].copy(), x[lo:hi].copy(), x[lo:hi].copy()
    if rank == 2:
        bad_key[hi - lo - 1] = 9  # the shard's last lane
    for words, planes in (
            (("sink 'acc'", "dist_sums", "first bad key: 9", "0..4"), dict(x=x[lo:hi].copy(), key=bad_key)),
            (("plane 'x'", "dist_sums") if rank == 3 else ("rank(s) [3]", "dist_sums"),
             dict(x=bad_int.astype(np.int64) if rank == 3 else bad_int, key=key[lo:hi].copy())),
            (("dist_sums", "rank 0 with float64 planes", "rank 1 with float32 planes"),
             dict(x=bad_f32.astype(np.float32) if rank == 1 else bad_f32, key=key[lo:hi].copy()))):
        tensors = {n: torch.from_numpy(a) for n, a in planes.items()} | {"acc": torch.from_numpy(prior.copy())}
        before = {n: t.numpy().tobytes() for n, t in tensors.items()}
        try:
            f(**tensors)
        except InputError as exc:
            assert all(w in str(exc) for w in words), str(exc)
        else:
            raise AssertionError(f"rank {rank}: a call refused on one rank ran")
        for n, t in tensors.items():
            assert t.numpy().tobytes() == before[n], n
    got = f(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(key[lo:hi]), acc=torch.from_numpy(prior.copy()))
    _bits(got, eagle.deploy(dist_sums).run(x=x, key=key, acc=prior.copy()), ["acc", "m", "tot"])


def case_scans_beside_halos_vectors_stores_and_large_sinks_uneven(rank, group):
    """A scan beside .at reads over rows split 3/297/1/299 (blocks over several ranks; a rank of fewer rows
    than the halo), Vector planes beside a scan over rows split 1/2/287/310, stores into a sink (the last lane
    wins) and a hawk.reduce fold in lane order over ranks of 37 to 41000 lanes, bitwise the one-process run (an
    empty slice refused on every rank); and 5000-slot sinks over ranks of 5000,
    25000, 1000 and 49000 lanes, each rank's chunks' copies folded into one before they cross the group: the
    ordered sink bitwise the one-process run, whether the pairs fold exactly or some err (every rank then moves
    its copies whole), the plain and compensated ones within their bound."""
    import torch

    import eagle
    import eagle.torch
    from eagle import InputError
    from eagle.distributed.sinks import FOLD, XSUM
    from hawk.exact import fraction_sum

    rng = np.random.default_rng(37)
    u = rng.normal(size=(600, NC)) * np.exp(rng.normal(size=(600, NC)) * 3)
    r0, r1 = [0, 3, 300, 301, 600][rank:rank + 2]
    want = eagle.deploy(dist_hscan).run(u=u)
    got = eagle.torch.wrap(dist_hscan, group=group)(u=torch.from_numpy(u[r0:r1].copy()))
    _bits(got, {"y": np.asarray(want["y"])[r0:r1], "r": np.asarray(want["r"])[r0:r1], "tot": want["tot"]},
          ["y", "r", "tot"])
    v, c = rng.normal(size=(2, 600, NC)), rng.normal(size=(3, 600, NC))
    r0, r1 = [0, 1, 3, 290, 600][rank:rank + 2]
    want = eagle.deploy(dist_vscan).run(v=v, c=c)
    got = eagle.torch.wrap(dist_vscan, group=group)(v=torch.from_numpy(v[:, r0:r1].copy()),
                                                     c=torch.from_numpy(c[:, r0:r1].copy()))
    _bits(got, {k: np.asarray(w)[r0:r1] if k == "y" else np.asarray(w)[:, r0:r1] if k == "z" else w
                for k, w in want.items()}, list(want))  # (tot_0, tot_1, tot_2: the Vector cell's components)
    x, key, cuts = _data(seed=3)  # stores into a sink: the last lane of the whole run wins (rank 0: 37 lanes)
    lo, hi = cuts[rank], cuts[rank + 1]
    prior = rng.normal(size=5)
    want = eagle.deploy(dist_store).run(x=x, key=key, last=prior.copy())
    got = eagle.torch.wrap(dist_store, group=group)(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(key[lo:hi]),
                                                     last=torch.from_numpy(prior))
    assert got.numpy().tobytes() == np.asarray(want).tobytes(), (got, want)
    # gradients, the prior's (0 where a lane stored) and the lanes' (where each slot's winner stored), bitwise
    # plan.reverse's: the winners kernel runs across the group like the forward
    ct = np.arange(5.0) - 1.5
    want = eagle.deploy(dist_store).reverse(ct, x=x, key=key, last=prior.copy())
    pt = torch.from_numpy(prior.copy()).requires_grad_(True)
    xt = torch.from_numpy(x[lo:hi].copy()).requires_grad_(True)
    out = eagle.torch.wrap(dist_store, group=group)(x=xt, key=torch.from_numpy(key[lo:hi]), last=pt)
    (out * torch.from_numpy(ct)).sum().backward()
    assert pt.grad.numpy().tobytes() == np.asarray(want["last"]).tobytes(), (pt.grad, want["last"])
    assert xt.grad.numpy().tobytes() == np.asarray(want["x"])[lo:hi].tobytes()
    # the same with the stores inside a for loop (the winners kernel's store numbers and passes, across the group)
    want = eagle.deploy(dist_loopstore).reverse(ct, x=x, key=key, last=prior.copy())
    pt = torch.from_numpy(prior.copy()).requires_grad_(True)
    xt = torch.from_numpy(x[lo:hi].copy()).requires_grad_(True)
    out = eagle.torch.wrap(dist_loopstore, group=group)(x=xt, key=torch.from_numpy(key[lo:hi]), last=pt)
    assert out.detach().numpy().tobytes() == np.asarray(eagle.deploy(dist_loopstore).run(
        x=x, key=key, last=prior.copy())).tobytes()
    (out * torch.from_numpy(ct)).sum().backward()
    assert pt.grad.numpy().tobytes() == np.asarray(want["last"]).tobytes(), (pt.grad, want["last"])
    assert xt.grad.numpy().tobytes() == np.asarray(want["x"])[lo:hi].tobytes()
    x = rng.normal(size=cuts[-1]) * 3  # a fold in lane order (neither associative nor commutative), and an empty slice
    want = eagle.deploy(dist_fold).run(x=x)
    got = eagle.torch.wrap(dist_fold, group=group)(x=torch.from_numpy(x[lo:hi]))
    _bits(got, {"p": want["p"], "q": want["q"], "y": np.asarray(want["y"])[lo:hi]}, ["p", "q", "y"])
    try:
        eagle.torch.wrap(dist_fold, group=group)(x=torch.from_numpy(-np.abs(x[lo:hi])))
    except InputError as exc:
        assert "dist_fold" in str(exc) and "nothing to fold" in str(exc), str(exc)
    else:
        raise AssertionError("an empty slice of a fold without an identity ran sharded")
    n = 80_000
    lo, hi = [0, 5000, 30_000, 31_000, n][rank:rank + 2]
    f = eagle.torch.wrap(dist_bigsink, group=group, threads=4, min_chunk=4096)
    for spread in (2, 600):
        x = rng.normal(size=n) * np.exp2(rng.integers(-spread, spread, size=n).astype(np.float64))
        key = rng.integers(-1, BIG, size=n).astype(np.int32)
        got = f(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(key[lo:hi]))
        _bits(got, eagle.deploy(dist_bigsink).run(x=x, key=key), ["acc"])
        for name, scale in (("plain", 1.0), ("comp", 0.5)):
            for slot in rng.integers(0, BIG, size=40):
                terms = x[key == slot] * scale
                exact = float(fraction_sum(terms)) if terms.size else 0.0
                bound = 64 * np.finfo(np.float64).eps * np.abs(terms).sum()
                assert abs(float(got[name][slot]) - exact) <= bound, (name, slot)
    kinds = [k for run in f._shard_runs.values() for lh, _ in run.halves for k in lh.kinds]
    assert kinds.count(FOLD) == 3 and kinds.count(XSUM) == 1, kinds


def _kept_data(rank: int, seed: int):
    """(rng, x, r0, r1): 1001 rows of KC widely spread values, and this rank's rows [r0, r1) of a 3/397/600/1 split."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(1001, KC)) * np.exp(rng.normal(size=(1001, KC)) * 4)
    r0, r1 = [0, 3, 400, 1000, 1001][rank:rank + 2]
    return rng, x, r0, r1


def case_reductions_keeping_axes_off_the_leading_one_uneven(rank, group):
    """Column sums, means, max and min over rows split 3/397/600/1 (each chunk's copy of the kept cell gathered
    along the chunk axis): ordered sums and means bitwise the one-process run, max/min bitwise, compensated within
    k <= 1, auto within the fast form's bound; per-channel sums of a middle axis beside a scan, a batch norm (its
    kept cell read by a second stage) and `backward()` through Vector column sums, bitwise. Every rank's result
    buffers start as NaN here (`_rank`), so a cell the finish combines into must be reset first."""
    import torch

    import eagle
    import eagle.torch

    rng, x, r0, r1 = _kept_data(rank, 41)
    rows = x.shape[0]
    want = eagle.deploy(dist_cols).run(x=x)
    got = eagle.torch.wrap(dist_cols, group=group)(x=torch.from_numpy(x[r0:r1].copy()))
    _bits(got, want, ["s_ord", "mu_ord"])
    eps = np.finfo(np.float64).eps
    for j in range(KC):
        col, kept = x[:, j], x[:, j][x[:, j] < 1.0]
        assert abs(got["s_comp"][j].item() - math.fsum(col)) <= eps * np.abs(col).sum(), j
        assert abs(got["s_auto"][j].item() - math.fsum(col)) <= rows * eps * np.abs(col).sum(), j
        assert abs(got["mu"][j].item() - math.fsum(kept) / kept.size) <= eps * np.abs(kept).sum(), j
    for kernel in (dist_colmax, dist_colmin):
        g = eagle.torch.wrap(kernel, group=group)(x=torch.from_numpy(x[r0:r1].copy()))
        assert g.numpy().tobytes() == np.asarray(eagle.deploy(kernel).run(x=x)).tobytes(), kernel.name
    x3 = rng.normal(size=(rows, 3, 7))  # 21 lanes a row: the scan's 4096-lane blocks start mid-row
    want = eagle.deploy(dist_chan).run(x=x3)
    got = eagle.torch.wrap(dist_chan, group=group)(x=torch.from_numpy(x3[r0:r1].copy()))
    _bits(got, {"run": np.asarray(want["run"])[r0:r1], "so": want["so"]}, ["run", "so"])
    xb = rng.normal(size=(rows, 3)) * 3 + 1
    want = eagle.deploy(dist_bnorm).run(x=xb)
    got = eagle.torch.wrap(dist_bnorm, group=group)(x=torch.from_numpy(xb[r0:r1].copy()))
    _bits(got, {"y": np.asarray(want["y"])[r0:r1], "mu": want["mu"]}, ["y", "mu"])
    v = rng.normal(size=(2, rows, 3))
    vt = torch.from_numpy(v[:, r0:r1].copy()).requires_grad_(True)
    w = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    out = eagle.torch.wrap(dist_colvec, group=group)(v=vt, w=w)
    cs = rng.normal(size=(2, 3))  # (components, kept columns): as run hands the cell back
    (sum((out[f"s_{i}"] * torch.from_numpy(cs[i])).sum() for i in range(2)) + 0.3 * out["t"].sum()).backward()
    want = eagle.deploy(dist_colvec).reverse({"s": cs, "t": np.array([0.3])}, v=v, w=1.5)
    assert vt.grad.numpy().tobytes() == np.asarray(want["v"])[:, r0:r1].tobytes()
    assert w.grad.item() == float(np.asarray(want["w"]).reshape(-1)[0])


def case_reductions_keeping_the_leading_axis_uneven(rank, group):
    """Row sums of every policy, a masked mean and a max over rows split 3/397/600/1: each rank hands back its
    own rows' totals (its slots' state never crosses the group), bitwise the one-process run, beside an ordered
    total over every lane; backward() through a row sum and the total bitwise plan.reverse, also where a total
    read in the body sends its cotangent to the whole run's first lane (the adjoint then reads every rank's row
    cotangents, gathered)."""
    import torch

    import eagle
    import eagle.torch

    _, x, r0, r1 = _kept_data(rank, 43)
    want = eagle.deploy(dist_rowstats).run(x=x)
    got = eagle.torch.wrap(dist_rowstats, group=group)(x=torch.from_numpy(x[r0:r1].copy()))
    _bits(got, {k: v if k == "tot" else np.asarray(v)[r0:r1] for k, v in want.items()}, list(want))
    g = eagle.torch.wrap(dist_rowmax, group=group)(x=torch.from_numpy(x[r0:r1].copy()))
    assert g.numpy().tobytes() == np.asarray(eagle.deploy(dist_rowmax).run(x=x))[r0:r1].tobytes()
    xt = torch.from_numpy(x[r0:r1].copy()).requires_grad_(True)
    eagle.torch.wrap(dist_rowstats, group=group)(x=xt)["s_ord"].sum().backward()  # (the total takes no part)
    want = eagle.deploy(dist_rowstats).reverse({"s_ord": np.ones(x.shape[0])}, x=x)["x"]
    assert xt.grad.numpy().tobytes() == np.asarray(want)[r0:r1].tobytes()
    xt = torch.from_numpy(x[r0:r1].copy()).requires_grad_(True)
    out = eagle.torch.wrap(dist_rowstats, group=group)(x=xt)
    (out["s_ord"].sum() + 0.5 * out["tot"].sum()).backward()  # (the total's cotangent: the same on every rank)
    want = eagle.deploy(dist_rowstats).reverse({"s_ord": np.ones(x.shape[0]), "tot": np.array([0.5])}, x=x)["x"]
    assert xt.grad.numpy().tobytes() == np.asarray(want)[r0:r1].tobytes()
    xt = torch.from_numpy(x[r0:r1].copy()).requires_grad_(True)  # a total read in the body beside a row sum: its
    out = eagle.torch.wrap(dist_rowtot, group=group)(x=xt)  # adjoint runs at whole-run numbers (refused until
    (out["s"].sum() + out["tot"].sum()).backward()  # 2026-12-07): it reads every rank's row cotangents, gathered
    want = eagle.deploy(dist_rowtot).reverse({"s": np.ones(x.shape[0]), "tot": np.array([1.0])}, x=x)["x"]
    assert xt.grad.numpy().tobytes() == np.asarray(want)[r0:r1].tobytes()


def case_row_cells_beside_neighbour_reads_uneven(rank, group):
    """Row cells in kernels that read neighbours or `lane.row`, over rows split 3/397/598/3 (each rank holds the
    two halo rows its neighbours read): each rank's lanes run at whole-run numbers and take their rows' state out
    of a buffer of every row's (eagle/distributed/rows.py); every policy, a masked ordered mean, a max, a fold, a
    Vector row sum, a 3-D grid's two slots a row, the row sum of `lane.row` and a row mean read in the body over
    more lanes than a block (a row cut between two stages), bitwise the one-process run; backward() through them
    (the Vector's Param too) bitwise plan.reverse."""
    import torch

    import eagle
    import eagle.torch

    rng, x, _, _ = _kept_data(rank, 47)
    r0, r1 = [0, 3, 400, 998, 1001][rank:rank + 2]

    def mine(a):
        return torch.from_numpy(np.ascontiguousarray(a[r0:r1]))

    want = eagle.deploy(dist_rowhalo).run(u=x)
    got = eagle.torch.wrap(dist_rowhalo, group=group)(u=mine(x))
    _bits(got, {k: v if k == "tot" else np.asarray(v)[r0:r1] for k, v in want.items()}, list(want))
    for kernel, name in ((dist_rowhalo_max, "u"), (dist_rowhalo_fold, "u"), (dist_rowcoord, "x")):
        g = eagle.torch.wrap(kernel, group=group)(**{name: mine(x)})
        assert g.numpy().tobytes() == np.asarray(eagle.deploy(kernel).run(**{name: x}))[r0:r1].tobytes(), \
            kernel.name
    v = rng.normal(size=(2, x.shape[0], KC))
    vt = torch.from_numpy(v[:, r0:r1].copy()).requires_grad_(True)
    w = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    g = eagle.torch.wrap(dist_rowhalo_vec, group=group)(v=vt, w=w)
    assert g.detach().numpy().tobytes() == \
        np.asarray(eagle.deploy(dist_rowhalo_vec).run(v=v, w=0.3))[:, r0:r1].tobytes()
    ct = rng.normal(size=(2, x.shape[0]))
    (g * torch.from_numpy(ct[:, r0:r1].copy())).sum().backward()
    want = eagle.deploy(dist_rowhalo_vec).reverse(ct, v=v, w=0.3)
    assert vt.grad.numpy().tobytes() == np.asarray(want["v"])[:, r0:r1].tobytes(), \
        np.abs(vt.grad.numpy() - np.asarray(want["v"])[:, r0:r1]).max()
    assert w.grad.item() == float(np.asarray(want["w"]).reshape(-1)[0])
    u3 = rng.normal(size=(x.shape[0], 3, KC))
    want = eagle.deploy(dist_rowhalo_3d).run(u=u3)
    got = eagle.torch.wrap(dist_rowhalo_3d, group=group)(u=mine(u3))
    _bits(got, {k: np.asarray(v)[r0:r1] for k, v in want.items()}, list(want))
    uw = rng.normal(size=(x.shape[0], 1100))  # a row mean read in the body: a row cut between two stages
    g = eagle.torch.wrap(dist_rowhalo_cutwide, group=group)(u=mine(uw))
    assert g.numpy().tobytes() == np.asarray(eagle.deploy(dist_rowhalo_cutwide).run(u=uw))[r0:r1].tobytes()
    # gradients: the adjoint reads every rank's row cotangents, gathered
    want = eagle.deploy(dist_rowhalo).run(u=x)
    cts = {k: rng.normal(size=np.shape(a)) for k, a in want.items()}
    ut = mine(x).requires_grad_(True)
    out = eagle.torch.wrap(dist_rowhalo, group=group)(u=ut)
    sum((out[k] * torch.from_numpy(c if k == "tot" else np.ascontiguousarray(c[r0:r1]))).sum()
        for k, c in cts.items()).backward()
    assert ut.grad.numpy().tobytes() == np.asarray(eagle.deploy(dist_rowhalo).reverse(cts, u=x)["u"])[r0:r1].tobytes()
    ct = rng.normal(size=x.shape[0])
    for kernel, name in ((dist_rowhalo_max, "u"), (dist_rowhalo_fold, "u"), (dist_rowcoord, "x")):
        ut = mine(x).requires_grad_(True)
        (eagle.torch.wrap(kernel, group=group)(**{name: ut}) * mine(ct)).sum().backward()
        want = eagle.deploy(kernel).reverse(ct, **{name: x})[name]
        assert ut.grad.numpy().tobytes() == np.asarray(want)[r0:r1].tobytes(), kernel.name


def case_gradients_through_row_results_uneven(rank, group):
    """backward() through per-example losses over rows split 3/397/600/1 (an ordered row sum, a masked
    compensated row mean, a per-lane output; a Vector row sum; a row max with ties): each rank's rows' cotangents
    key the adjoint by its own rows, the Param's gradient is an exact sum over every rank: bitwise plan.reverse."""
    import torch

    import eagle
    import eagle.torch

    rng, x, r0, r1 = _kept_data(rank, 44)
    y = rng.normal(size=x.shape)
    x[::3, 1] = x[::3, 0]  # (ties for the max below)
    cot = {k: rng.normal(size=x.shape[0]) for k in ("loss", "mu")} | {"z": rng.normal(size=x.shape)}
    xt, yt = (torch.from_numpy(a[r0:r1].copy()).requires_grad_(True) for a in (x, y))
    w = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    out = eagle.torch.wrap(dist_rowloss, group=group)(x=xt, y=yt, w=w)
    sum((out[k] * torch.from_numpy(np.ascontiguousarray(c[r0:r1]))).sum() for k, c in cot.items()).backward()
    want = eagle.deploy(dist_rowloss).reverse(cot, x=x, y=y, w=1.5)
    assert xt.grad.numpy().tobytes() == np.asarray(want["x"])[r0:r1].tobytes()
    assert yt.grad.numpy().tobytes() == np.asarray(want["y"])[r0:r1].tobytes()
    assert w.grad.item() == float(np.asarray(want["w"]).reshape(-1)[0])
    v = rng.normal(size=(2, *x.shape))
    vt = torch.from_numpy(v[:, r0:r1].copy()).requires_grad_(True)
    w = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    cs = rng.normal(size=(2, x.shape[0]))  # (components, kept rows)
    out = eagle.torch.wrap(dist_rowvec, group=group)(v=vt, w=w)
    (out * torch.from_numpy(cs[:, r0:r1].copy())).sum().backward()  # (one result: (components, own rows))
    want = eagle.deploy(dist_rowvec).reverse({"result": cs}, v=v, w=0.5)
    assert vt.grad.numpy().tobytes() == np.asarray(want["v"])[:, r0:r1].tobytes()
    assert w.grad.item() == float(np.asarray(want["w"]).reshape(-1)[0])
    xt = torch.from_numpy(x[r0:r1].copy()).requires_grad_(True)
    c = rng.normal(size=x.shape[0])
    (eagle.torch.wrap(dist_rowmax, group=group)(x=xt) * torch.from_numpy(c[r0:r1].copy())).sum().backward()
    assert xt.grad.numpy().tobytes() == np.asarray(eagle.deploy(dist_rowmax).reverse({"result": c}, x=x)["x"])[
        r0:r1].tobytes()


def case_gradients_of_row_products_uneven(rank, group):
    """backward() through a product per row over rows split 3/397/600/1, zeros included: its adjoint's running
    products run at whole-run lane numbers, so every rank reads every rank's rows' cotangents (gathered first);
    bitwise plan.reverse."""
    import torch

    import eagle
    import eagle.torch

    rng = np.random.default_rng(47)
    u = 1.0 + 0.01 * rng.normal(size=(1001, NC))
    u[[2, 500, 500], [3, 4, 9]] = 0.0
    r0, r1 = [0, 3, 400, 1000, 1001][rank:rank + 2]
    c = rng.normal(size=1001)
    ut = torch.from_numpy(u[r0:r1].copy()).requires_grad_(True)
    out = eagle.torch.wrap(dist_rowprod, group=group)(u=ut)
    assert out.detach().numpy().tobytes() == np.asarray(eagle.deploy(dist_rowprod).run(u=u))[r0:r1].tobytes()
    (out * torch.from_numpy(c[r0:r1].copy())).sum().backward()
    want = eagle.deploy(dist_rowprod).reverse(c, u=u)["u"]
    assert ut.grad.numpy().tobytes() == np.asarray(want)[r0:r1].tobytes()


CASES = {name: fn for name, fn in globals().items() if name.startswith("case_")}


def _junk_empty():
    """np.empty whose float arrays hold NaN: eagle.torch hands the halves fresh np.empty result buffers, so
    whatever a half reads before writing (a buffer it should have reset) shows as NaN, on every run."""
    real = np.empty

    def empty(shape, dtype=float, *args, **kwargs):
        a = real(shape, dtype, *args, **kwargs)
        if a.dtype.kind == "f":
            a.fill(np.nan)
        return a

    np.empty = empty


def _rank(rank: int, port: int, out: str) -> None:
    import torch.distributed as dist

    _junk_empty()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=RANKS)
    report = {}
    for name, fn in CASES.items():
        try:
            fn(rank, dist.group.WORLD)
            report[name] = "ok"
        except Exception:  # noqa: BLE001 (reported to the parent test)
            report[name] = traceback.format_exc()
        dist.barrier()
    dist.destroy_process_group()
    Path(out, f"{rank}.json").write_text(json.dumps(report))


def _main(out: str) -> None:
    import torch.multiprocessing as mp

    import eagle

    eagle.deploy(dist_heat).run(u=np.ones((3, NC)), k=0.1)
    for k in (dist_sums, dist_max, dist_split):  # compile once here, not in four processes at once
        eagle.deploy(k).run(**({"v": np.ones((3, 4))} if k is dist_split else
                               {"x": np.ones(4), "s": 1.0} if k is dist_max else
                               {"x": np.ones(4), "key": np.zeros(4, np.int32)}))
    eagle.deploy(dist_sums).run(x=np.ones(4, np.float32), key=np.zeros(4, np.int32))
    eagle.deploy(dist_scans).run(x=np.ones(4), start=np.zeros(4))
    eagle.deploy(dist_softmax).run(u=np.ones((3, NC)))
    eagle.deploy(dist_gridscan).run(u=np.ones((3, 50)))
    eagle.deploy(dist_kscan).run(x=np.ones(4), key=np.zeros(4, np.int32))
    eagle.deploy(dist_rscan).run(x=np.ones(4), start=np.zeros(4))
    eagle.deploy(dist_prod).reverse({"y": np.ones(4), "r": np.ones(4), "p": np.ones(1)}, x=np.ones(4),
                                    start=np.zeros(4))
    eagle.deploy(dist_rowprod).reverse(np.ones(3), u=np.ones((3, NC)))
    eagle.deploy(dist_sgrad).reverse({"y": np.ones(4), "z": np.ones(4), "tot": np.ones(1)}, x=np.ones(4),
                                     start=np.zeros(4))
    x, key, *_, w, s, cot = _grad_setup(0)  # the adjoints too
    eagle.deploy(dist_grad).reverse(cot, x=x, key=key, w=w, s=s, acc=np.zeros(5))
    eagle.deploy(dist_ratio).reverse({"z": np.ones(4)}, x=np.ones(4))
    eagle.deploy(dist_ints).reverse({"y": np.ones(4), "tot": np.ones(1)}, x=np.ones(4))
    eagle.deploy(dist_split).reverse({"z": np.ones((3, 4))}, v=np.ones((3, 4)))
    eagle.deploy(dist_vheat).run(v=np.ones((2, 3, NC)), u=np.ones((3, NC)))
    eagle.deploy(dist_hscan).run(u=np.ones((3, NC)))
    eagle.deploy(dist_vscan).run(v=np.ones((2, 3, NC)), c=np.ones((3, 3, NC)))
    eagle.deploy(dist_bigsink).run(x=np.ones(4), key=np.zeros(4, np.int32))
    eagle.deploy(dist_store).run(x=np.ones(4), key=np.zeros(4, np.int32))
    eagle.deploy(dist_loopstore).reverse(np.ones(5), x=np.ones(4), key=np.zeros(4, np.int32))
    eagle.deploy(dist_fold).run(x=np.full(4, 2.0))
    for k in (dist_cols, dist_colmax, dist_colmin, dist_rowstats, dist_rowmax):
        eagle.deploy(k).run(x=np.ones((3, KC)))
    eagle.deploy(dist_rowloss).run(x=np.ones((3, KC)), y=np.ones((3, KC)), w=1.0)
    eagle.deploy(dist_rowvec).run(v=np.ones((2, 3, KC)), w=1.0)
    for k in (dist_rowhalo, dist_rowhalo_max, dist_rowhalo_fold, dist_rowhalo_3d):
        eagle.deploy(k).run(u=np.ones((3, 3, KC)) if k is dist_rowhalo_3d else np.ones((3, KC)))
    eagle.deploy(dist_rowcoord).run(x=np.ones((3, KC)))
    eagle.deploy(dist_rowhalo_cutwide).run(u=np.ones((3, 1100)))
    eagle.deploy(dist_rowhalo_vec).run(v=np.ones((2, 3, KC)), w=1.0)
    eagle.deploy(dist_chan).run(x=np.ones((3, 3, 7)))
    eagle.deploy(dist_bnorm).run(x=np.ones((3, 3)))
    eagle.deploy(dist_colvec).reverse({"s": np.ones((2, 3)), "t": np.ones(1)}, v=np.ones((2, 3, 3)), w=1.0)
    eagle.deploy(dist_heat).reverse({"out": np.exp2(np.arange(NR * NC).reshape(NR, NC) % 600 - 300.0)},
                                    u=np.ones((NR, NC)), k=0.1)  # (the gather form, and its fallback's adjoint)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_rank, args=(port, out), nprocs=RANKS, join=True)


# ---- the tests (run by pytest) --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def reports():
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        r = subprocess.run([sys.executable, __file__, out], capture_output=True, text=True, env=env, cwd=ROOT,
                           timeout=900)
        got = {}
        for rank in range(RANKS):
            p = Path(out, f"{rank}.json")
            assert p.exists(), r.stdout[-2000:] + r.stderr[-4000:]
            got[rank] = json.loads(p.read_text())
        return got


@pytest.mark.parametrize("case", sorted(CASES))
def test_sharded_on_every_rank(reports, case):
    for rank in range(RANKS):
        assert reports[rank][case] == "ok", f"rank {rank}: {reports[rank][case]}"


if __name__ == "__main__":
    _main(sys.argv[1])
