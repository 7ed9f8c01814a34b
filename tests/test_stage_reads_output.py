"""A stage that reads an output plane's passed value (a lane's own, before the kernel assigns it) that a later stage
writes, or that no stage writes: that stage gets the run's array for the plane (the caller's, zeros when omitted),
shared with the stage that writes it. Before, the read-only stage had no buffer for the plane and the compiler
failed with a KeyError.
"""

import math

import numpy as np
import pytest
from conftest import bt_same_bits, bt_spirv_missing, bt_target_missing

import eagle
import hawk
from eagle.errors import InputError
from hawk import Index, Mutable, Scalar

N = 30_001


@hawk.kernel
def so_renorm(x: Scalar, y: Mutable[Scalar]):
    y = (y + x) / hawk.sum(y * y, policy="ordered")  # stage 1 reads y as passed; stage 2 writes it


@hawk.kernel
def so_keep(x: Scalar, y: Mutable[Scalar], scale: Mutable[Scalar]) -> Scalar:
    scale = hawk.sum(y, policy="ordered")  # (y: read, never written by any stage)
    return x / scale


@hawk.kernel
def so_keys(k: Index, x: Scalar, y: Mutable[Scalar], bins: Mutable["bin":16]):
    t = hawk.sum(y, policy="ordered")  # stage 1 reads y
    y = y * 0.5 + x / t
    hawk.scatter(bins, policy="ordered")[k - 1] += y  # a computed key: checked as the lanes run


def _split_runs(kernel, **planes):
    outs = []
    for threads in (1, 2, 3):
        plan = eagle.deploy(kernel, threads=threads, min_chunk=2048)
        out = plan.run(**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in planes.items()})
        if threads > 1:
            assert all(c > 1 for c in plan.last_chunks), plan.last_chunks
        outs.append(out if isinstance(out, dict) else {"": out})
    for out in outs[1:]:
        for name, v in out.items():
            bt_same_bits(np.asarray(v), np.asarray(outs[0][name]), f"{kernel.name}: '{name}' across threads")
    return {k: np.asarray(v) for k, v in outs[0].items()}


def test_an_earlier_stage_reads_the_value_passed_for_a_later_stages_output():
    assert so_renorm.stage_count == 2
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=N), rng.normal(size=N)
    got = _split_runs(so_renorm, x=x, y=y)
    total = math.fsum((y * y).tolist())  # ordered: the exact sum, rounded once
    bt_same_bits(got[""], (y + x) / total, "(y + x) / sum(y * y), y as passed")


def test_an_omitted_output_reads_as_zeros_in_every_stage():
    x = np.random.default_rng(5).normal(size=N)
    got = np.asarray(eagle.deploy(so_renorm, threads=2, min_chunk=2048).run(x=x))
    assert np.all(np.isinf(got) | np.isnan(got))  # (0 + x) / 0: the total of an omitted y is 0.0


def test_an_output_no_stage_writes_is_read_and_handed_back_as_passed():
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=N), rng.normal(size=N)
    got = _split_runs(so_keep, x=x, y=y)
    total = math.fsum(y.tolist())
    bt_same_bits(got["result"], x / total, "x / sum(y)")
    assert float(got["scale"][0]) == total
    bt_same_bits(got["y"], y, "y, unwritten")


def test_bound_launches_and_plan_runs_read_each_runs_own_array():
    rng = np.random.default_rng(7)
    x = rng.normal(size=N)
    plan = eagle.deploy(so_renorm, threads=2, min_chunk=2048)
    for _ in range(3):  # Plan.run reuses its prepared stages: each run reads the array it is given
        y = rng.normal(size=N)
        y_in = y.copy()
        plan.run(x=x, y=y)
        bt_same_bits(y, (y_in + x) / math.fsum((y_in * y_in).tolist()), "Plan.run, in place")
    y = rng.normal(size=N)
    bound = plan.bind(x=x, y=y)
    for _ in range(2):  # a bound launch writes y in place, and the next one reads what it wrote
        before = y.copy()
        bound.launch()
        bt_same_bits(y, (before + x) / math.fsum((before * before).tolist()), "bound launch")


def test_a_refused_run_leaves_the_read_output_as_it_was():
    rng = np.random.default_rng(8)
    k = rng.integers(1, 17, size=N).astype(np.int32)
    x, y = rng.normal(size=N), rng.normal(size=N) + 3.0
    bins = rng.normal(size=16)
    given = {"y": y.copy(), "bins": bins.copy()}
    k[20_000] = 0  # key -1: nothing
    k[25_000] = 40
    with pytest.raises(InputError, match="first bad key: 39"):
        eagle.deploy(so_keys, threads=2, min_chunk=2048).run(k=k, x=x, **given)
    bt_same_bits(given["y"], y, "y")
    bt_same_bits(given["bins"], bins, "bins")
    k[25_000] = 16
    out = eagle.deploy(so_keys, threads=2, min_chunk=2048).run(k=k, x=x, **given)
    t = math.fsum(y.tolist())
    new = y * 0.5 + x / t
    bt_same_bits(np.asarray(out["y"]), new, "y * 0.5 + x / sum(y)")
    want = [math.fsum([float(bins[s]), *new[k - 1 == s].tolist()]) for s in range(16)]
    assert np.asarray(out["bins"]).tolist() == want


def test_spirv_gives_the_hosts_bits():
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    rng = np.random.default_rng(9)
    x, y = rng.normal(size=4096), rng.normal(size=4096)
    host = np.asarray(eagle.deploy(so_renorm).run(x=x, y=y.copy()))
    gpu = np.asarray(eagle.deploy(so_renorm, target="spirv").run(x=x, y=y.copy()))
    bt_same_bits(gpu, host, "spirv against host")
