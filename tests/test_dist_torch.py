"""eagle.torch over torch.distributed (issue #16): `eagle.torch.wrap(kernel, group=...)` in 4 gloo processes on
one machine, each passing its own shard, against the one-process `Plan.run` over all the lanes.

Pinned here: with shards of unequal sizes (one far smaller than a chunk, one empty of ordered blocks), ordered
sums, means and scatters are bitwise equal to the one-process run on every rank; max is exact; an auto sum is
within the fast form's bound; per-lane outputs are the rank's own lanes; a passed sink's prior content is added
once; the cells of a split kernel (its cut cells combined between stages) are bitwise equal; float32 ordered
sums too; a 2-D stencil over rows split unevenly exchanges halo rows and runs with the whole grid's
coordinates, bitwise equal to one process. The ranks run in a subprocess (torch.multiprocessing.spawn from this
file as a script) and report per case to the test.
"""

import json
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

import hawk  # noqa: E402
import hawk.math as hm  # noqa: E402
from hawk import Grid, Index, Mutable, Param, Scalar, Table, Vector  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RANKS = 4
NR, NC = 48, 16


@hawk.kernel
def dt_sums(x: Scalar, key: Index, acc: Mutable["slot":5], tot: Mutable[Scalar], m: Mutable[Scalar],
            fast: Mutable[Scalar]):
    hawk.scatter(acc, policy="ordered")[key] += x
    tot = hawk.sum(x, policy="ordered")
    m = hawk.mean(x, policy="ordered")
    fast = hawk.sum(x)


@hawk.kernel
def dt_max(x: Scalar, s: Param, mx: Mutable[Scalar], y: Mutable[Scalar]):
    mx = hawk.max(x * s)
    y = x * s


@hawk.kernel
def dt_split(v: Vector[3], tot: Mutable[Vector[3]], z: Mutable[Vector[3]]):
    tot = hawk.sum(v, policy="ordered")
    z = v / tot


@hawk.kernel
def dt_heat(lane: Grid["row", "col":NC], u: Scalar, k: Param, out: Mutable[Scalar], tot: Mutable[Scalar]):
    i, j = lane.row, lane.col
    if hm.land(hm.land(i > 0, i < NR - 1), hm.land(j > 0, j < NC - 1)):
        v = u + k * (u.at(row=i - 1, col=j) + u.at(row=i + 1, col=j) + u.at(row=i, col=j - 1)
                     + u.at(row=i, col=j + 1) - 4.0 * u)
    else:
        v = u * 0.5 + u.at(row=i + 2, col=j) * 0.25 + u.at(row=i - 2, col=j) * 0.25  # clamped at the edges
    out = v
    tot = hawk.sum(v * v, policy="ordered")


@hawk.kernel
def dt_grad(x: Scalar, key: Index, w: Table["slot":5], s: Param, acc: Mutable["slot":5], tot: Mutable[Scalar],
            m: Mutable[Scalar], y: Mutable[Scalar]):
    hawk.scatter(acc, policy="ordered")[key] += x * w.at(slot=key)
    tot = hawk.sum(x * s, policy="ordered")
    m = hawk.mean(x * x, policy="ordered")
    y = x * s + w.at(slot=key)


@hawk.kernel
def dt_ratio(x: Scalar, tot: Mutable[Scalar], z: Mutable[Scalar]):
    tot = hawk.sum(x, policy="ordered")
    z = x / tot


def _data(dtype=np.float64, n=70_001, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=n) * np.exp(rng.normal(size=n) * 6)).astype(dtype)
    key = rng.integers(-1, 5, size=n).astype(np.int32)
    cuts = [0, 37, 20_000, 61_000, n]  # rank 0: 37 lanes; the others uneven
    return x, key, cuts


def _bits(got, want, names):
    for k in names:
        g, w = got[k].numpy(), np.asarray(want[k])
        assert g.shape == w.shape and g.dtype == w.dtype, (k, g.shape, w.shape, g.dtype, w.dtype)
        assert g.tobytes() == w.tobytes(), (k, g, w)


# ---- the cases, run on every rank ---------------------------------------------------------------------------------
def case_sums_uneven_shards(rank, group):
    import torch

    import eagle
    import eagle.torch
    from hawk.exact import fraction_sum

    f = eagle.torch.wrap(dt_sums, group=group)
    x, key, cuts = _data()
    lo, hi = cuts[rank], cuts[rank + 1]
    got = f(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(key[lo:hi]))
    want = eagle.deploy(dt_sums).run(x=x, key=key)
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

    f = eagle.torch.wrap(dt_max, group=group)
    x, _, cuts = _data(seed=1)
    lo, hi = cuts[rank], cuts[rank + 1]
    got = f(x=torch.from_numpy(x[lo:hi]), s=torch.tensor(-0.5, dtype=torch.float64))
    want = eagle.deploy(dt_max).run(x=x, s=-0.5)
    _bits(got, {"mx": want["mx"], "y": np.asarray(want["y"])[lo:hi]}, ["mx", "y"])


def case_prior_sink_added_once(rank, group):
    import torch

    import eagle
    import eagle.torch

    f = eagle.torch.wrap(dt_sums, group=group)
    x, key, cuts = _data(seed=2)
    lo, hi = cuts[rank], cuts[rank + 1]
    prior = np.linspace(-1.0, 1.0, 5)
    got = f(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(key[lo:hi]), acc=torch.from_numpy(prior.copy()))
    want = eagle.deploy(dt_sums).run(x=x, key=key, acc=prior.copy())
    _bits(got, want, ["acc", "tot"])


def case_split_kernel(rank, group):
    import torch

    import eagle
    import eagle.torch

    f = eagle.torch.wrap(dt_split, group=group)
    v = np.random.default_rng(3).normal(size=(3, 9_001))
    cuts = [0, 1_000, 1_001, 5_000, 9_001]
    lo, hi = cuts[rank], cuts[rank + 1]
    got = f(v=torch.from_numpy(np.ascontiguousarray(v[:, lo:hi])))
    want = eagle.deploy(dt_split).run(v=v)
    _bits(got, {**{f"tot_{k}": want[f"tot_{k}"] for k in range(3)}, "z": np.asarray(want["z"])[:, lo:hi]},
          ["tot_0", "tot_1", "tot_2", "z"])


def case_float32_ordered(rank, group):
    import torch

    import eagle
    import eagle.torch

    f = eagle.torch.wrap(dt_sums, group=group)
    x, key, cuts = _data(np.float32, seed=4)
    lo, hi = cuts[rank], cuts[rank + 1]
    got = f(x=torch.from_numpy(x[lo:hi]), key=torch.from_numpy(key[lo:hi]))
    want = eagle.deploy(dt_sums).run(x=x, key=key)
    _bits(got, want, ["acc", "m", "tot"])


def case_stencil_halos_uneven_rows(rank, group):
    import torch

    import eagle
    import eagle.torch

    f = eagle.torch.wrap(dt_heat, group=group)
    u = np.random.default_rng(5).normal(size=(NR, NC))
    cuts = [0, 2, 19, 33, NR]  # rank 0 holds exactly the halo's 2 rows
    lo, hi = cuts[rank], cuts[rank + 1]
    got = f(u=torch.from_numpy(u[lo:hi].copy()), k=0.1)
    want = eagle.deploy(dt_heat).run(u=u, k=0.1)
    _bits(got, {"out": np.asarray(want["out"])[lo:hi], "tot": want["tot"]}, ["out", "tot"])


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

    f = eagle.torch.wrap(dt_grad, group=group)
    x, key, lo, hi, w, s, cot = _grad_setup(rank)
    xt = torch.from_numpy(x[lo:hi].copy()).requires_grad_()
    wt = torch.from_numpy(w.copy()).requires_grad_()
    st = torch.tensor(s, dtype=torch.float64, requires_grad=True)
    prior = torch.from_numpy(np.linspace(-1.0, 1.0, 5)).requires_grad_()
    got = f(x=xt, key=torch.from_numpy(key[lo:hi]), w=wt, s=st, acc=prior)
    loss = sum((got[n] * torch.from_numpy(c[lo:hi] if n == "y" else c)).sum() for n, c in cot.items())
    loss.backward()
    want = eagle.deploy(dt_grad).reverse(cot, x=x, key=key, w=w, s=s, acc=np.linspace(-1.0, 1.0, 5))
    _bits({"x": xt.grad, "w": wt.grad, "s": st.grad.reshape(1), "acc": prior.grad},
          {"x": np.asarray(want["x"])[lo:hi], "w": want["w"], "s": want["s"], "acc": want["acc"]},
          ["x", "w", "s", "acc"])
    assert np.array_equal(prior.grad.numpy(), cot["acc"])  # a sink's prior content: its cotangent
    gx, = torch.autograd.grad(f(x=xt, key=torch.from_numpy(key[lo:hi]), w=w, s=s)["tot"].sum(), [xt])
    assert np.array_equal(gx.numpy(), np.full(hi - lo, s))  # d tot / d x = s, on this rank's lanes only


def case_gradients_of_a_split_kernel(rank, group):
    import torch

    import eagle
    import eagle.torch
    from eagle import InputError

    f = eagle.torch.wrap(dt_ratio, group=group)  # the adjoint recomputes tot (a stage of its own) across ranks
    x = np.random.default_rng(7).normal(size=9_001) + 3.0
    cuts = [0, 1_000, 1_001, 5_000, 9_001]
    lo, hi = cuts[rank], cuts[rank + 1]
    cz = np.random.default_rng(8).normal(size=x.size)
    xt = torch.from_numpy(x[lo:hi].copy()).requires_grad_()
    got = f(x=xt)
    ((got["z"] * torch.from_numpy(cz[lo:hi])).sum() + got["tot"].sum() * 2.0).backward()
    want = eagle.deploy(dt_ratio).reverse({"z": cz, "tot": np.array([2.0])}, x=x)
    _bits({"x": xt.grad}, {"x": np.asarray(want["x"])[lo:hi]}, ["x"])
    vt = torch.ones((3, hi - lo), dtype=torch.float64, requires_grad=True)  # Vector planes and cells: refused
    try:
        eagle.torch.wrap(dt_split, group=group)(v=vt)["tot_0"].sum().backward()
    except InputError as exc:
        assert "plane 'v'" in str(exc) and "dt_split" in str(exc) and "Scalar" in str(exc), str(exc)
    else:
        raise AssertionError("a Vector plane's gradient ran sharded in a kernel with cells")


def case_gradients_of_a_stencil_are_refused_by_plane(rank, group):
    import torch

    import eagle
    import eagle.torch
    from eagle import InputError

    f = eagle.torch.wrap(dt_heat, group=group)
    cuts = [0, 2, 19, 33, NR]
    ut = torch.zeros((cuts[rank + 1] - cuts[rank], NC), dtype=torch.float64, requires_grad=True)
    got = f(u=ut, k=0.1)
    try:
        got["tot"].sum().backward()
    except InputError as exc:
        assert "plane 'u'" in str(exc) and "dt_heat" in str(exc) and "sharded" in str(exc), str(exc)
    else:
        raise AssertionError("a stencil's gradient ran sharded")


CASES = {name: fn for name, fn in globals().items() if name.startswith("case_")}


def _rank(rank: int, port: int, out: str) -> None:
    import torch.distributed as dist

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

    eagle.deploy(dt_heat).run(u=np.ones((3, NC)), k=0.1)
    for k in (dt_sums, dt_max, dt_split):  # compile once here, not in four processes at once
        eagle.deploy(k).run(**({"v": np.ones((3, 4))} if k is dt_split else
                               {"x": np.ones(4), "s": 1.0} if k is dt_max else
                               {"x": np.ones(4), "key": np.zeros(4, np.int32)}))
    eagle.deploy(dt_sums).run(x=np.ones(4, np.float32), key=np.zeros(4, np.int32))
    x, key, *_, w, s, cot = _grad_setup(0)  # the adjoints too
    eagle.deploy(dt_grad).reverse(cot, x=x, key=key, w=w, s=s, acc=np.zeros(5))
    eagle.deploy(dt_ratio).reverse({"z": np.ones(4)}, x=np.ones(4))
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
