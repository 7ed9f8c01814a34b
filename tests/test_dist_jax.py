"""eagle.jax over sharded data (issue #16): `eagle.jax.wrap(kernel, axis_name="d")` inside `jax.shard_map` on 4 and 8
CPU host devices, against the one-device `Plan.run`. Pinned here: ordered sums, means and scatters (and the cells of a
split kernel, whose cut cells are combined between stages) are bitwise equal to the one-device run for 4 and 8 shards,
with shard sizes that are not multiples of the chunk alignment; max is exact; an auto sum is within the fast form's
bound (n * eps * sum|x|); per-lane outputs stay sharded and equal the one-device outputs; a passed sink's prior content
is added once; float32 ordered sums round once; a 2-D stencil exchanges halo rows between shards (ppermute) and runs
with the whole grid's coordinates, bitwise equal to one device; `.at` reads that can reach any lane (a flat index, a
computed row) are refused by name; reductions that keep axes run sharded (off the leading axis: each chunk's copy of the
cell gathered, ordered ones bitwise; keeping the leading axis: each shard's own rows, bitwise, also beside halos and
`lane.row`, where shards run at whole-run lane numbers), and what they cannot do
is refused by name (under partition=True, run whole over gathered lanes with a warning); `= v` stores into sinks keep
the last lane's value across shards; a Vector plane runs beside halos; scans run beside halos and Vector planes; large
sinks' copies are folded per shard before the gather (the ordered one bitwise); a stencil's gradient (gather form with
halos of share rows, and its scatter fallback) and a Vector plane's beside cells are bitwise plan.reverse's; forward and
keyed scans (shards run whole 4096-lane blocks), reverse scans (every shard's finish folds the whole run's lanes) and
gradients through scans, and block reductions are bitwise the one-device run; a key outside a sink on one shard refuses
the call on every shard (in Plan.run's words, the arrays passed unchanged, the program usable again); `jax.grad` /
`jax.vjp` through the sharded call (the adjoint run sharded the same way) give per-lane, Table, Param and prior-sink
gradients bitwise equal to `plan.reverse` on 4 and 8 shards, and for a split kernel whose adjoint recomputes a cell;
under plain `jax.jit` with NamedSharding inputs (`partition=True`: custom_partitioning) the compiled HLO runs one launch
per shard and gathers no lane input, a stencil partitions too (its gradient in gather form), and jax.grad through it is
bitwise plan.reverse's; two processes under `jax.distributed` (2 devices each, gloo) give the one-device bits. JAX fixes
its device count at start-up, so the cases run in one subprocess with XLA_FLAGS=--xla_force_host_platform_device_count=8
and report back per case.
"""

import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

pytest.importorskip("jax")

import dist_kernels as dk  # noqa: E402  (the kernels, shared with test_dist_torch.py)

pytestmark = pytest.mark.slow  # (pyproject.toml's markers: -m 'not slow' leaves it out)

ROOT = Path(__file__).resolve().parents[1]
NR, NC = dk.NR, dk.NC  # the stencils' grid


# ---- the cases (run in the subprocess) ----------------------------------------------------------------------------
def _setup():
    """NumPy and the kernels by short name (tests/dist_kernels.py), float64 turned on in JAX."""
    import jax
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    names = ("sums", "max", "split", "shift", "heat", "far", "store", "grad", "ratio", "gridgrad", "vheat", "ints",
             "place", "gridstore", "rowblock", "loopstore", "clamped", "twice", "foldat", "compact")
    return np, {n: getattr(dk, f"dist_{n}") for n in names}


def _mesh(n):
    import jax

    return jax.make_mesh((n,), ("d",), devices=jax.devices()[:n])


def _no_lane_collective(hlo: str, *shapes: str) -> None:
    """No collective of compiled HLO (all-gather, all-to-all, collective-permute) moves an array of the lane
    shapes given ("48,16": the whole grid's; a shard's too): shards pass partial state only."""
    for line in hlo.splitlines():
        if "all-gather(" in line or "all-to-all(" in line or "collective-permute(" in line:
            assert not any(f"[{s}]" in line for s in shapes), line


def _shard_grad(kernel, shards: int, planes: dict, cts: dict):
    """jax.grad, with respect to the first of `planes`, of sum(ct * output) over the outputs `cts` names, through
    eagle.jax.wrap(kernel, axis_name="d") inside shard_map over `shards` devices: the planes sharded along "d",
    a one-value cotangent's output (a cell) replicated."""
    import jax
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle.jax

    names = list(planes)
    f = eagle.jax.wrap(kernel, axis_name="d")
    mesh = _mesh(shards)
    lone = list(kernel.outputs) == ["result"]  # (a lone returned result comes back bare, not in a dict)
    specs = {k: P() if np.size(c) == 1 else P("d") for k, c in cts.items()}
    g = jax.shard_map(lambda *a: f(**dict(zip(names, a, strict=True))), mesh=mesh,
                      in_specs=tuple(P("d") for _ in names), out_specs=specs["result"] if lone else specs)

    def loss(*a):
        r = g(*a)
        r = {"result": r} if lone else r
        return sum((r[k] * c).sum() for k, c in cts.items())

    sh = NamedSharding(mesh, P("d"))
    return jax.jit(jax.grad(loss))(*(jax.device_put(planes[k], sh) for k in names))


def _sharded(kernel, mesh, planes, in_specs, out_specs, **fixed):
    import jax
    from jax.sharding import NamedSharding

    import eagle.jax

    f = eagle.jax.wrap(kernel, axis_name="d")
    names = list(planes)
    g = jax.jit(jax.shard_map(lambda *a: f(**dict(zip(names, a, strict=True)), **fixed), mesh=mesh,
                              in_specs=tuple(in_specs[n] for n in names), out_specs=out_specs))
    args = [jax.device_put(planes[n], NamedSharding(mesh, in_specs[n])) for n in names]
    return g(*args)


def _bits_equal(got, want, names):
    import numpy as np

    for k in names:
        g, w = np.asarray(got[k]), np.asarray(want[k])
        assert g.shape == w.shape and g.dtype == w.dtype, (k, g.shape, w.shape, g.dtype, w.dtype)
        assert g.tobytes() == w.tobytes(), (k, g, w)


def case_sums_bitwise_on_4_and_8_devices():
    from jax.sharding import PartitionSpec as P

    import eagle
    from hawk.exact import fraction_sum

    np, ks = _setup()
    rng = np.random.default_rng(1)
    for shards, n in ((4, 4 * 12_345), (8, 8 * 7_777)):
        x = rng.normal(size=n) * np.exp(rng.normal(size=n) * 8)
        key = rng.integers(-1, 5, size=n).astype(np.int32)
        want = eagle.deploy(ks["sums"]).run(x=x, key=key)
        got = _sharded(ks["sums"], _mesh(shards), dict(x=x, key=key), dict(x=P("d"), key=P("d")), P())
        _bits_equal(got, want, ["acc", "m", "tot"])
        exact = float(fraction_sum(x))
        assert np.asarray(got["tot"])[0] == exact  # the exact sum, rounded once
        bound = n * np.finfo(np.float64).eps * np.abs(x).sum()  # the fast form's: grows with the terms
        assert abs(float(np.asarray(got["fast"])[0]) - exact) <= bound


def case_max_and_sharded_lane_outputs():
    from jax.sharding import PartitionSpec as P

    import eagle

    np, ks = _setup()
    x = np.random.default_rng(2).normal(size=8 * 3001)
    want = eagle.deploy(ks["max"]).run(x=x, s=-1.5)
    got = _sharded(ks["max"], _mesh(8), dict(x=x), dict(x=P("d")), {"mx": P(), "y": P("d")}, s=-1.5)
    _bits_equal(got, want, ["mx", "y"])
    assert len(got["y"].sharding.device_set) == 8  # the per-lane output stays sharded


def case_prior_sink_content_added_once():
    from jax.sharding import PartitionSpec as P

    import eagle

    np, ks = _setup()
    rng = np.random.default_rng(3)
    x, key = rng.normal(size=4 * 2000), rng.integers(0, 5, size=4 * 2000).astype(np.int32)
    prior = rng.normal(size=5)
    want = eagle.deploy(ks["sums"]).run(x=x, key=key, acc=prior.copy())
    got = _sharded(ks["sums"], _mesh(4), dict(x=x, key=key, acc=prior),
                   dict(x=P("d"), key=P("d"), acc=P()), P())
    _bits_equal(got, want, ["acc", "tot"])
    import warnings

    import jax
    from jax.sharding import NamedSharding

    import eagle.jax

    # under plain jit (partition=True) too, sharded: a passed prior used to make the call run over gathered lanes,
    # with a warning telling the caller to pass it as they had
    mesh, f = _mesh(4), eagle.jax.wrap(ks["sums"], partition=True)
    xs, kk = (jax.device_put(a, NamedSharding(mesh, P("d"))) for a in (x, key))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = jax.jit(lambda x, k, p: f(x=x, key=k, acc=p))
        got = g(xs, kk, prior)
    _bits_equal(got, want, ["acc", "tot"])
    hlo = g.lower(xs, kk, prior).compile().as_text()
    assert "eagle_hawk_call" in hlo and f"f64[{x.size}]" not in hlo  # one launch per shard; no lane gathered


def case_split_kernel_cut_cells_combined():
    from jax.sharding import PartitionSpec as P

    import eagle

    np, ks = _setup()
    v = np.random.default_rng(4).normal(size=(3, 8 * 1001))
    want = eagle.deploy(ks["split"]).run(v=v)
    outs = {f"tot_{k}": P() for k in range(3)} | {"z": P(None, "d")}
    got = _sharded(ks["split"], _mesh(8), dict(v=v), dict(v=P(None, "d")), outs)
    _bits_equal(got, want, sorted(want))


def case_float32_ordered():
    from jax.sharding import PartitionSpec as P

    import eagle

    np, ks = _setup()
    rng = np.random.default_rng(5)
    x = (rng.normal(size=8 * 4099) * 1e3).astype(np.float32)
    key = rng.integers(0, 5, size=x.size).astype(np.int32)
    want = eagle.deploy(ks["sums"]).run(x=x, key=key)
    got = _sharded(ks["sums"], _mesh(8), dict(x=x, key=key), dict(x=P("d"), key=P("d")), P())
    _bits_equal(got, want, ["acc", "m", "tot"])


def case_at_on_a_lane_plane_is_refused():
    from jax.sharding import PartitionSpec as P

    from eagle import InputError

    np, ks = _setup()
    x = np.zeros(8 * 16)
    src = np.zeros(x.size, dtype=np.int32)
    try:
        _sharded(ks["shift"], _mesh(8), dict(x=x, src=src), dict(x=P("d"), src=P("d")), P("d"))
    except InputError as exc:
        assert "plane 'x'" in str(exc) and "dist_shift" in str(exc) and "shard" in str(exc), str(exc)
    else:
        raise AssertionError("a .at read of a sharded per-lane plane ran")


def case_jit_with_named_sharding_partitions_without_gathering_lanes():
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(6)
    n = 8 * 5003
    x, key = rng.normal(size=n) * 1e3, rng.integers(0, 5, size=n).astype(np.int32)
    want = eagle.deploy(ks["sums"]).run(x=x, key=key)
    f = eagle.jax.wrap(ks["sums"], partition=True)
    g = jax.jit(lambda x, key: f(x=x, key=key))
    sh = NamedSharding(_mesh(8), P("d"))
    xs, keys = jax.device_put(x, sh), jax.device_put(key, sh)
    _bits_equal(g(xs, keys), want, ["acc", "m", "tot"])
    hlo = g.lower(xs, keys).compile().as_text()
    assert "eagle_hawk_call" in hlo and f"f64[{n // 8}]" in hlo  # one launch per shard, on the shard's lanes
    _no_lane_collective(hlo, f"{n}", f"{n // 8}")  # collectives move partial state only: never a lane input
    assert f"f64[{n}]" not in hlo  # nothing the size of every lane anywhere
    _bits_equal(g(x, key), want, ["acc", "m", "tot"])  # unsharded inputs: the one-device call
    kmax = eagle.jax.wrap(ks["max"], partition=True)
    got = jax.jit(lambda x: kmax(x=x, s=2.0))(xs)
    _bits_equal(got, eagle.deploy(ks["max"]).run(x=x, s=2.0), ["mx", "y"])
    assert got["y"].sharding.spec == P("d")  # per-lane outputs stay sharded like the inputs


def case_stencil_with_halo_exchange():
    from jax.sharding import PartitionSpec as P

    import eagle

    np, ks = _setup()
    u = np.random.default_rng(7).normal(size=(NR, NC))
    want = eagle.deploy(ks["heat"]).run(u=u, k=0.1)
    for shards in (4, 8):  # halos of 2 rows (the edge rows' reads) between shards of 12 and 6 rows
        got = _sharded(ks["heat"], _mesh(shards), dict(u=u), dict(u=P("d")), {"out": P("d"), "tot": P()}, k=0.1)
        _bits_equal(got, want, ["out", "tot"])
    u32 = u.astype(np.float32)  # 4-byte elements: the shards' address shifts scale with them
    got = _sharded(ks["heat"], _mesh(8), dict(u=u32), dict(u=P("d")), {"out": P("d"), "tot": P()}, k=0.1)
    _bits_equal(got, eagle.deploy(ks["heat"]).run(u=u32, k=0.1), ["out", "tot"])
    v = np.random.default_rng(8).normal(size=(2, NR, NC))  # a Vector plane with halos (payload first, rows after)
    got = _sharded(ks["vheat"], _mesh(4), dict(v=v, u=u), dict(v=P(None, "d"), u=P("d")),
                   {"out": P(None, "d"), "tot": P()})
    _bits_equal(got, eagle.deploy(ks["vheat"]).run(v=v, u=u), ["out", "tot"])


def case_at_with_a_computed_row_is_refused():
    from jax.sharding import PartitionSpec as P

    from eagle import InputError

    np, ks = _setup()
    u, r = np.zeros((NR, NC)), np.zeros((NR, NC), dtype=np.int32)
    try:
        _sharded(ks["far"], _mesh(8), dict(u=u, r=r), dict(u=P("d"), r=P("d")), P("d"))
    except InputError as exc:
        assert "plane 'u'" in str(exc) and "dist_far" in str(exc) and "row" in str(exc), str(exc)
    else:
        raise AssertionError("a .at read at a computed row ran sharded")


def case_what_shards_cannot_do_is_refused_by_name():
    from jax.sharding import PartitionSpec as P

    from eagle import InputError

    np, ks = _setup()
    for kernel, planes, specs, words in (
            (dk.dist_rowscan, dict(x=np.ones((8, dk.KC))), dict(x=P("d")),
             ("'tot' keeps the leading lane axis", "scans or folds over every lane", "a kernel of its own")),
            (dk.dist_rowfold, dict(x=np.ones((8, dk.KC))), dict(x=P("d")),
             ("keeps lane axes ['row']", "no identity=", "alone")),
            (dk.dist_colfold, dict(x=np.ones((8, 3))), dict(x=P("d")), ("'result'", "without a copy per chunk")),
            (dk.dist_rowwhole, dict(x=np.ones((8, dk.KC))), dict(x=P("d")),
             ("'tot' keeps the leading lane axis", "scans or folds over every lane")),):
        try:
            _sharded(kernel, _mesh(8), planes, specs, P())
        except InputError as exc:
            assert kernel.name in str(exc) and all(w in str(exc) for w in words), str(exc)
        else:
            raise AssertionError(f"{kernel.name} ran sharded")
    # 70,000 columns: refused until 2026-12-05 (no copy per chunk past PRIVATE_SLOTS); the host's specs now keep
    # copies up to CELL_SLOTS, so the shards combine it
    import math

    x = np.random.default_rng(7).normal(size=(8, 70_000))
    got = np.asarray(_sharded(dk.dist_colwide, _mesh(8), dict(x=x), dict(x=P("d")), P())).reshape(-1)
    exact = np.array([math.fsum(c) for c in x.T.tolist()])
    assert np.all(np.abs(got - exact) <= 8 * np.finfo(np.float64).eps * np.abs(x).sum(axis=0))


def case_stores_into_sinks_last_lane_wins_across_shards():
    """`hawk.scatter(last)[key] = x`: each chunk keeps a copy and marks, and chunk s x C + c of the finish is in
    lane order, so each slot holds the value of the last lane of the whole run that stored into it, bitwise the
    one-device run on 4 and 8 shards (slots no lane stores into keep the passed prior content)."""
    from jax.sharding import PartitionSpec as P

    import eagle

    np, ks = _setup()
    rng = np.random.default_rng(35)
    for shards, n in ((4, 4 * 3001), (8, 8 * 50)):
        x, key = rng.normal(size=n), rng.integers(-1, 5, size=n).astype(np.int32)
        key[key == 3] = -1  # (slot 3: nobody stores, the prior stays)
        prior = rng.normal(size=5)
        want = eagle.deploy(ks["store"]).run(x=x, key=key, last=prior.copy())
        got = _sharded(ks["store"], _mesh(shards), dict(x=x, key=key, last=prior),
                       dict(x=P("d"), key=P("d"), last=P()), P())
        _bits_equal({"last": got}, {"last": want}, ["last"])
        assert np.asarray(got)[3] == prior[3] and np.asarray(got)[0] == x[np.flatnonzero(key == 0)[-1]]
    import warnings

    import jax
    from jax.sharding import NamedSharding

    import eagle.jax

    # gradients, the prior's too (zero where a lane stored, the prior replaced), bitwise plan.reverse's: the
    # winners kernel (each slot's last store) runs sharded like the forward, whole-run lane numbers and all
    mesh = _mesh(4)
    n = 4 * 1001
    x, key = rng.normal(size=n), rng.integers(-1, 5, size=n).astype(np.int32)
    key[key == 3] = -1
    xs, ks_ = (jax.device_put(a, NamedSharding(mesh, P("d"))) for a in (x, key))
    f, fp = eagle.jax.wrap(ks["store"], axis_name="d"), eagle.jax.wrap(ks["store"], partition=True)
    g = jax.shard_map(lambda x, k, p: f(x=x, key=k, last=p), mesh=mesh, in_specs=(P("d"), P("d"), P()),
                      out_specs=P())
    with warnings.catch_warnings():  # a passed prior does not stop partition=True from sharding (it did)
        warnings.simplefilter("error")
        got = jax.jit(lambda x, k, p: fp(x=x, key=k, last=p))(xs, ks_, prior)
    _bits_equal({"last": got}, {"last": eagle.deploy(ks["store"]).run(x=x, key=key, last=prior.copy())}, ["last"])
    ct = np.arange(5.0) - 1.5
    want = eagle.deploy(ks["store"]).reverse(ct, x=x, key=key, last=prior.copy())
    for call in (g, lambda x, k, p: fp(x=x, key=k, last=p)):
        for argnums in (2, (0, 2)):
            got = jax.jit(jax.grad(lambda x, k, p, call=call: (call(x, k, p) * ct).sum(), argnums=argnums))(
                xs, ks_, prior)
            got = dict(zip(("x", "last"), got, strict=True)) if argnums != 2 else {"last": got}
            _bits_equal(got, {k: np.asarray(v) for k, v in want.items()}, list(got))
        assert np.asarray(got["last"])[3] == ct[3] and np.asarray(got["last"])[0] == 0.0
    assert all(np.asarray(want["x"])[key == -1] == 0.0)


def case_stores_inside_loops_and_their_gradient_across_shards():
    """`= v` stores inside a for loop: each slot keeps the whole run's last store (the last lane's second pass over
    its first), bitwise the one-device run on 4 shards; jax.grad through the call, inside shard_map and under
    partition=True, is bitwise plan.reverse's (the winners kernel's store numbers and passes, run sharded)."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(36)
    mesh, n, k = _mesh(4), 4 * 777, ks["loopstore"]
    x, key = rng.normal(size=n), rng.integers(-1, 5, size=n).astype(np.int32)
    key[key == 2] = -1  # (slot 2 only from a key-1 lane's second pass)
    prior = rng.normal(size=5)
    xs, ks_ = (jax.device_put(a, NamedSharding(mesh, P("d"))) for a in (x, key))
    f, fp = eagle.jax.wrap(k, axis_name="d"), eagle.jax.wrap(k, partition=True)
    g = jax.shard_map(lambda x, k, p: f(x=x, key=k, last=p), mesh=mesh, in_specs=(P("d"), P("d"), P()),
                      out_specs=P())
    want = eagle.deploy(k).run(x=x, key=key, last=prior.copy())
    for call in (g, lambda x, k, p: fp(x=x, key=k, last=p)):
        _bits_equal({"last": jax.jit(call)(xs, ks_, prior)}, {"last": want}, ["last"])
    ct = np.arange(5.0) - 1.5
    rev = eagle.deploy(k).reverse(ct, x=x, key=key, last=prior.copy())
    for call in (g, lambda x, k, p: fp(x=x, key=k, last=p)):
        got = jax.jit(jax.grad(lambda x, k, p, call=call: (call(x, k, p) * ct).sum(), argnums=(0, 2)))(
            xs, ks_, prior)
        _bits_equal(dict(zip(("x", "last"), got, strict=True)), {k: np.asarray(v) for k, v in rev.items()},
                    ["x", "last"])
    last = {(kk + j) % 5: (i, j) for i, kk in enumerate(key) if kk >= 0 for j in range(2)}
    want_x = np.zeros(n)
    for slot, (i, j) in last.items():
        want_x[i] += ct[slot] * (j + 1.0)
    assert np.array_equal(np.asarray(rev["x"]), want_x)


def case_gradients_of_a_stencil_bitwise():
    """A stencil's gradient (its adjoint adds into neighbours' rows) inside shard_map on 4 and 8 shards: u's
    gradient (each shard's rows) and k's bitwise plan.reverse's; and where a lane's (high, low) pair errs
    (cotangents of wildly different scales), plan.reverse's fallback bits too."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(14)
    u, co = rng.normal(size=(NR, NC)), rng.normal(size=(NR, NC))
    f = eagle.jax.wrap(ks["heat"], axis_name="d")
    for shards, c in ((4, co), (8, co), (4, co * np.exp2(rng.integers(-300, 300, size=co.shape)))):
        mesh = _mesh(shards)
        g = jax.shard_map(lambda u, k: f(u=u, k=k), mesh=mesh, in_specs=(P("d"), P()),
                          out_specs={"out": P("d"), "tot": P()})

        def loss(u, k, c=c, g=g):
            r = g(u, k)
            return (r["out"] * c).sum() + 1.5 * r["tot"].sum()

        gu, gk = jax.jit(jax.grad(loss, argnums=(0, 1)))(jax.device_put(u, NamedSharding(mesh, P("d"))), 0.1)
        want = eagle.deploy(ks["heat"]).reverse({"out": c, "tot": np.array([1.5])}, u=u, k=0.1)
        _bits_equal({"u": gu, "k": np.asarray(gk).reshape(1)}, want, ["u", "k"])


def _partitioned_scan(kernel, x, start):
    """A scan kernel of planes x and start called under plain jax.jit with both sharded over 4 devices
    (partition=True)."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle.jax

    f = eagle.jax.wrap(kernel, partition=True)
    sh = NamedSharding(_mesh(4), P("d"))
    return jax.jit(lambda x, start: f(x=x, start=start))(jax.device_put(x, sh), jax.device_put(start, sh))


def case_scans_bitwise_with_blocks_across_shards():
    """Forward scans (add, exclusive add with reset=, min, exclusive max, an integer count) and an ordered sum of
    a scan: each shard runs whole scan blocks, so every result is the one-device run's bits, for shards larger
    and smaller than a block (a block over 2 to 5 shards), float64 and float32."""
    from jax.sharding import PartitionSpec as P

    import eagle

    np, _ = _setup()
    rng = np.random.default_rng(11)
    names = ("y", "z", "lo", "hi", "pos", "tot")
    specs = {k: (P() if k == "tot" else P("d")) for k in names}
    for shards, n, dtype in ((2, 2 * 5003, np.float64), (4, 4 * 3001, np.float64), (8, 8 * 1000, np.float64),
                             (4, 4 * 2500, np.float32)):
        x = (rng.normal(size=n) * np.exp(rng.normal(size=n) * 4)).astype(dtype)
        start = (rng.random(n) < 0.002).astype(dtype)
        want = eagle.deploy(dk.dist_scans).run(x=x, start=start)
        got = _sharded(dk.dist_scans, _mesh(shards), dict(x=x, start=start), dict(x=P("d"), start=P("d")), specs)
        _bits_equal(got, want, names)
    y = np.asarray(got["y"])  # (and a float32 scan past one block is not one left-to-right sum)
    assert y.tobytes() != np.cumsum(x).tobytes()
    import jax  # under plain jit, partitioned by the inputs' NamedSharding: the same shards, the same bits
    from jax.sharding import NamedSharding

    import eagle.jax

    k = eagle.jax.wrap(dk.dist_kscan, axis_name="d")  # keyed scans (by=, order="key" too), and a bad key's refusal
    for shards, n in ((4, 4 * 3001), (8, 8 * 1000)):
        xk, key = rng.normal(size=n) * 1e3, rng.integers(-1, 5, size=n).astype(np.int32)
        mesh = _mesh(shards)
        sh = NamedSharding(mesh, P("d"))
        g = jax.jit(jax.shard_map(lambda x, key: k(x=x, key=key), mesh=mesh, in_specs=(P("d"), P("d")),
                                  out_specs={"y": P("d"), "pos": P("d"), "tot": P()}))
        _bits_equal(g(jax.device_put(xk, sh), jax.device_put(key, sh)),
                    eagle.deploy(dk.dist_kscan).run(x=xk, key=key), ["y", "pos", "tot"])
    key[n - 3] = 9
    try:
        jax.block_until_ready(g(jax.device_put(xk, sh), jax.device_put(key, sh)))
    except Exception as exc:  # noqa: BLE001 (XLA's runtime error, carrying eagle's refusal)
        assert all(w in str(exc) for w in ("dist_kscan", "keyed hawk.scan", "first bad key: 9", "0..4")), str(exc)
    else:
        raise AssertionError("a keyed scan's bad key ran sharded")

    g = eagle.jax.wrap(dk.dist_gridscan, axis_name="d")  # 3 stages, a Grid whose blocks start mid-row, lane.row
    for shards, rows in ((4, 4 * 50), (8, 8 * 7)):
        u = rng.normal(size=(rows, 50))
        mesh = _mesh(shards)
        got = jax.jit(jax.shard_map(lambda u: g(u=u), mesh=mesh, in_specs=(P("d"),),
                                    out_specs={"y": P("d"), "t": P()}))(jax.device_put(u, NamedSharding(mesh, P("d"))))
        _bits_equal(got, eagle.deploy(dk.dist_gridscan).run(u=u), ["y", "t"])
    got = _partitioned_scan(dk.dist_scans, x, start)
    _bits_equal(got, want, names)
    assert got["y"].sharding.spec == P("d")


def case_reverse_scans_and_scan_gradients_bitwise():
    """Reverse scans (add, exclusive add with reset=, max, an ordered sum of one): every shard hands its lanes'
    values to every shard's finish, which folds the whole run from the last lane down as one device does, so the
    results are the one-device bits (np.cumsum(x[::-1])[::-1] for the add) on 4 and 8 shards, float64 and
    float32, inside shard_map and under partition=True; and jax.grad through forward add scans (their adjoint is
    a reverse scan) is bitwise plan.reverse's, inside shard_map and under partition=True."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, _ = _setup()
    rng = np.random.default_rng(21)
    names = ("y", "z", "hi", "tot")
    specs = {k: (P() if k == "tot" else P("d")) for k in names}
    for shards, n, dtype in ((4, 4 * 3001, np.float64), (8, 8 * 1000, np.float64), (4, 4 * 2500, np.float32)):
        x = (rng.normal(size=n) * np.exp(rng.normal(size=n) * 4)).astype(dtype)
        start = (rng.random(n) < 0.002).astype(dtype)
        want = eagle.deploy(dk.dist_rscan).run(x=x, start=start)
        assert np.asarray(want["y"]).tobytes() == np.cumsum(x[::-1])[::-1].tobytes()
        got = _sharded(dk.dist_rscan, _mesh(shards), dict(x=x, start=start), dict(x=P("d"), start=P("d")), specs)
        _bits_equal(got, want, names)
    got = _partitioned_scan(dk.dist_rscan, x, start)
    _bits_equal(got, want, names)
    assert got["y"].sharding.spec == P("d")
    for shards, n in ((4, 4 * 3001), (8, 8 * 1000)):  # gradients through forward scans: reverse scans, sharded
        x = rng.normal(size=n) * np.exp(rng.normal(size=n) * 4)
        start = (rng.random(n) < 0.002).astype(np.float64)
        cy, cz = rng.normal(size=n), rng.normal(size=n)
        cts = {"y": cy, "z": cz, "tot": np.array([0.7])}
        gx = _shard_grad(dk.dist_sgrad, shards, {"x": x, "start": start}, cts)
        _bits_equal({"x": gx}, eagle.deploy(dk.dist_sgrad).reverse(cts, x=x, start=start), ["x"])
    fp = eagle.jax.wrap(dk.dist_sgrad, partition=True)  # the same under plain jit, partitioned (4 shards)

    def ploss(x, s):
        r = fp(x=x, start=s)
        return (r["y"] * cy).sum() + (r["z"] * cz).sum() + 0.7 * r["tot"].sum()

    sh = NamedSharding(_mesh(4), P("d"))
    x, start = x[:4 * 2000], start[:4 * 2000]
    cy, cz = cy[:x.size], cz[:x.size]
    gx = jax.jit(jax.grad(ploss))(jax.device_put(x, sh), jax.device_put(start, sh))
    want = eagle.deploy(dk.dist_sgrad).reverse({"y": cy, "z": cz, "tot": np.array([0.7])}, x=x, start=start)
    _bits_equal({"x": gx}, want, ["x"])
    assert gx.sharding.spec == P("d")


def case_running_products_and_product_gradients_bitwise():
    """Running products (forward; reverse, exclusive, with reset=) and a product fold: the one-device bits on 4
    and 8 shards, and jax.grad through them (zeros included) bitwise plan.reverse's; jax.grad of a product over
    every lane under where= (its adjoint: two running products) bitwise plan.reverse's inside shard_map; and of a
    product per row, whose adjoint reads every shard's rows' cotangents, inside shard_map and under
    partition=True."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, _ = _setup()
    rng = np.random.default_rng(31)
    names = ("y", "r", "p")
    specs = {"y": P("d"), "r": P("d"), "p": P()}
    for shards, n in ((4, 4 * 3001), (8, 8 * 1000)):
        x = 1.0 + 0.01 * rng.normal(size=n)
        start = (rng.random(n) < 0.002).astype(np.float64)
        want = eagle.deploy(dk.dist_prod).run(x=x, start=start)
        got = _sharded(dk.dist_prod, _mesh(shards), dict(x=x, start=start), dict(x=P("d"), start=P("d")), specs)
        _bits_equal(got, want, names)
    for shards, n in ((4, 4 * 3001), (8, 8 * 1000)):  # the running products' and the product's gradients
        x = 1.0 + 0.01 * rng.normal(size=n)
        x[[11, n // 2, n // 2 + 3]] = 0.0
        start = (rng.random(n) < 0.002).astype(np.float64)
        cts = {"y": rng.normal(size=n), "r": rng.normal(size=n), "p": np.array([0.3])}
        gx = _shard_grad(dk.dist_prod, shards, {"x": x, "start": start}, cts)
        _bits_equal({"x": gx}, eagle.deploy(dk.dist_prod).reverse(cts, x=x, start=start), ["x"])
        x[[7, n - 5]] = [0.5, -1.0]  # (where= leaves the -1.0 out)
        cts = {"p": np.array([0.5]), "y": rng.normal(size=n)}
        gx = _shard_grad(dk.dist_prodgrad, shards, {"x": x}, cts)
        _bits_equal({"x": gx}, eagle.deploy(dk.dist_prodgrad).reverse(cts, x=x), ["x"])
    u = 1.0 + 0.01 * rng.normal(size=(NR, NC))
    u[3, 5] = 0.0
    cq = rng.normal(size=NR)
    # products per row: their adjoint's scans run at whole-run lane numbers, so every shard reads the rows'
    # cotangents whole (gathered first); the one-device bits, inside shard_map and under partition=True
    want = eagle.deploy(dk.dist_rowprod).reverse(cq, u=u)
    fr = eagle.jax.wrap(dk.dist_rowprod, axis_name="d")
    fp = eagle.jax.wrap(dk.dist_rowprod, partition=True)
    for shards in (2, 4, 8):
        mesh = _mesh(shards)
        g = jax.shard_map(lambda u, mesh=mesh: fr(u=u), mesh=mesh, in_specs=(P("d"),), out_specs=P("d"))
        su = jax.device_put(u, NamedSharding(mesh, P("d")))
        _bits_equal({"r": jax.jit(g)(su)}, {"r": eagle.deploy(dk.dist_rowprod).run(u=u)}, ["r"])
        for f in (g, lambda u: fp(u=u)):
            grad = jax.jit(jax.grad(lambda u, f=f: (f(u) * cq).sum()))
            gu = grad(su)
            _bits_equal({"u": gu}, want, ["u"])
            assert gu.sharding.spec[0] == "d"  # (rows sharded: P("d") or P("d", None))
            # (the rows' cotangents are gathered, the lanes not)
            _no_lane_collective(grad.lower(su).compile().as_text(), f"{NR},{NC}", f"{NR // shards},{NC}")


def case_block_reductions_run_on_whole_rows():
    """A row softmax (block max and sum over the trailing axis, read in the same stage) on 2 and 4 shards of rows:
    every slot is one row, on one shard; the one-device bits."""
    from jax.sharding import PartitionSpec as P

    import eagle

    np, _ = _setup()
    u = np.random.default_rng(12).normal(size=(NR, NC)) * 3
    want = eagle.deploy(dk.dist_softmax).run(u=u)
    for shards in (2, 4):
        got = _sharded(dk.dist_softmax, _mesh(shards), dict(u=u), dict(u=P("d")), {"p": P("d"), "tot": P()})
        _bits_equal(got, want, ["p", "tot"])


def case_gradients_bitwise_on_4_and_8_devices():
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(11)
    f = eagle.jax.wrap(ks["grad"], axis_name="d")
    for shards, n in ((4, 4 * 3_001), (8, 8 * 1_777)):
        x, key = rng.normal(size=n) * np.exp(rng.normal(size=n) * 4), rng.integers(0, 5, size=n).astype(np.int32)
        w, s, prior = rng.normal(size=5), 1.3, rng.normal(size=5)
        cot = dict(acc=rng.normal(size=5), tot=np.array([0.7]), m=np.array([-0.4]), y=rng.normal(size=n))
        mesh = _mesh(shards)
        sh, rep = NamedSharding(mesh, P("d")), NamedSharding(mesh, P())
        g = jax.shard_map(lambda x, key, w, s, acc: f(x=x, key=key, w=w, s=s, acc=acc), mesh=mesh,
                          in_specs=(P("d"), P("d"), P(), P(), P()),
                          out_specs={"acc": P(), "tot": P(), "m": P(), "y": P("d")})

        def loss(x, w, s, acc, key, g=g, cot=cot):
            r = g(x, key, w, s, acc)
            return sum((r[k] * c).sum() for k, c in cot.items())

        args = (jax.device_put(x, sh), jax.device_put(w, rep), jnp.asarray(s), jax.device_put(prior, rep))
        got = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)))(*args, jax.device_put(key, sh))
        want = eagle.deploy(ks["grad"]).reverse(cot, x=x, key=key, w=w, s=s, acc=prior.copy())
        names = ("x", "w", "s", "acc")
        _bits_equal({k: np.asarray(a).reshape(-1) for k, a in zip(names, got, strict=True)},
                    {k: np.asarray(want[k]).reshape(-1) for k in names}, names)
        assert got[0].sharding.spec == P("d")  # per-lane gradients stay sharded
        keys = jax.device_put(key, sh)
        _, vjp = jax.vjp(lambda x, g=g, keys=keys, args=args: g(x, keys, *args[1:])["tot"], args[0])
        assert np.array_equal(np.asarray(vjp(jnp.ones(1))[0]), np.full(n, s))  # jax.vjp: d tot / d x = s


def case_gradients_through_partition_under_jit():
    """jax.grad of a loss over `partition=True` calls (plain jit, NamedSharding inputs): the adjoint is partitioned
    the same way; per-lane, Table, Param and prior-sink gradients bitwise plan.reverse's on 2 and 4 shards, the
    per-lane gradient sharded like x, and no lane-sized array in any collective of the compiled gradient."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(14)
    f = eagle.jax.wrap(ks["grad"], partition=True)
    for shards, n in ((4, 4 * 3_001), (2, 2 * 1_777)):
        x, key = rng.normal(size=n) * np.exp(rng.normal(size=n) * 4), rng.integers(0, 5, size=n).astype(np.int32)
        w, s, prior = rng.normal(size=5), 1.3, rng.normal(size=5)
        cot = dict(acc=rng.normal(size=5), tot=np.array([0.7]), m=np.array([-0.4]), y=rng.normal(size=n))
        mesh = _mesh(shards)
        sh, rep = NamedSharding(mesh, P("d")), NamedSharding(mesh, P())

        def loss(x, w, s, acc, key, cot=cot):
            r = f(x=x, key=key, w=w, s=s, acc=acc)
            return sum((r[k] * c).sum() for k, c in cot.items())

        args = (jax.device_put(x, sh), jax.device_put(w, rep), jnp.asarray(s), jax.device_put(prior, rep),
                jax.device_put(key, sh))
        g = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)))
        got = g(*args)
        want = eagle.deploy(ks["grad"]).reverse(cot, x=x, key=key, w=w, s=s, acc=prior.copy())
        names = ("x", "w", "s", "acc")
        _bits_equal({k: np.asarray(a).reshape(-1) for k, a in zip(names, got, strict=True)},
                    {k: np.asarray(want[k]).reshape(-1) for k in names}, names)
        assert got[0].sharding.spec == P("d")
        _no_lane_collective(g.lower(*args).compile().as_text(), f"{n}", f"{n // shards}")


def case_gradient_of_a_split_kernel():
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(12)
    n = 8 * 1_001
    x, cz = rng.normal(size=n) + 3.0, rng.normal(size=n)
    f = eagle.jax.wrap(ks["ratio"], axis_name="d")
    mesh = _mesh(8)
    g = jax.shard_map(lambda x: f(x=x), mesh=mesh, in_specs=P("d"), out_specs={"tot": P(), "z": P("d")})
    def loss(x):  # one call: its cotangents go into one adjoint run, as into plan.reverse
        r = g(x)
        return (r["z"] * cz).sum() + 2.0 * r["tot"].sum()

    got = jax.jit(jax.grad(loss))(jax.device_put(x, NamedSharding(mesh, P("d"))))
    want = eagle.deploy(ks["ratio"]).reverse({"z": cz, "tot": np.array([2.0])}, x=x)
    _bits_equal({"x": got}, want, ["x"])
    v, cv = rng.normal(size=(3, n)) + 3.0, rng.normal(size=(3, n))  # Vector planes beside cells (whole-run lanes)
    f = eagle.jax.wrap(ks["split"], axis_name="d")
    outs = {"tot_0": P(), "tot_1": P(), "tot_2": P(), "z": P(None, "d")}
    g = jax.shard_map(lambda v: f(v=v), mesh=mesh, in_specs=P(None, "d"), out_specs=outs)

    def vloss(v):
        r = g(v)
        return (r["z"] * cv).sum() + 2.0 * r["tot_0"].sum() - r["tot_2"].sum()

    got = jax.jit(jax.grad(vloss))(jax.device_put(v, NamedSharding(mesh, P(None, "d"))))
    want = eagle.deploy(ks["split"]).reverse({"z": cv, "tot": np.array([2.0, 0.0, -1.0])}, v=v)
    _bits_equal({"v": got}, want, ["v"])


def case_gradient_of_an_output_read_before_assigned():
    """A kernel that reads its output's initial contents (zeros: a sharded call takes no passed outputs): x's and
    w's gradients bitwise plan.reverse's, inside shard_map on 4 shards and partitioned under jit."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, _ = _setup()
    dist_decay = dk.dist_decay
    rng = np.random.default_rng(33)
    n = 4 * 1_500
    x, cy = rng.normal(size=n), rng.normal(size=n)
    want = eagle.deploy(dist_decay).reverse({"y": cy, "tot": np.array([1.5])}, x=x, w=0.7)
    mesh = _mesh(4)
    f = eagle.jax.wrap(dist_decay, axis_name="d")
    g = jax.shard_map(lambda x, w: f(x=x, w=w), mesh=mesh, in_specs=(P("d"), P()),
                      out_specs={"tot": P(), "y": P("d")})
    fp = eagle.jax.wrap(dist_decay, partition=True)
    for call in (g, lambda x, w: fp(x=x, w=w)):
        def loss(x, w, call=call):
            r = call(x, w)
            return (r["y"] * cy).sum() + 1.5 * r["tot"].sum()

        gx, gw = jax.jit(jax.grad(loss, argnums=(0, 1)))(jax.device_put(x, NamedSharding(mesh, P("d"))), 0.7)
        _bits_equal({"x": gx, "w": np.asarray(gw).reshape(1)}, want, ["x", "w"])


def case_scans_by_a_func_bitwise():
    """Scans by a @hawk.func (a non-associative average; forward with reset=, reverse exclusive) and an ordered
    sum of them: every shard hands its lanes' values to every shard's finish, which folds the whole run in lane
    order as one device does, so every shard's lanes are the one-device bits (itertools.accumulate's for the
    forward scan without flags), on 4 and 8 shards and under partition=True; jax.grad through them, through
    keyed ones and through a fold by the func read later in the body, inside shard_map is bitwise
    plan.reverse's."""
    import itertools

    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, _ = _setup()
    rng = np.random.default_rng(27)
    names = ("y", "z", "h", "tot")
    specs = {k: (P() if k == "tot" else P("d")) for k in names}
    for shards, n in ((4, 4 * 3001), (8, 8 * 1000)):
        x = rng.normal(size=n)
        start = (rng.random(n) < 0.002).astype(np.float64)
        want = eagle.deploy(dk.dist_fscan).run(x=x, start=start)
        plain = eagle.deploy(dk.dist_fscan).run(x=x, start=np.zeros(n))
        ref = np.array(list(itertools.accumulate(x, lambda a, b: 0.75 * a + 0.25 * b)))
        assert np.asarray(plain["y"]).tobytes() == ref.tobytes()
        got = _sharded(dk.dist_fscan, _mesh(shards), dict(x=x, start=start), dict(x=P("d"), start=P("d")), specs)
        _bits_equal(got, want, names)
    got = _partitioned_scan(dk.dist_fscan, x, start)
    _bits_equal(got, want, names)
    for shards, n in ((4, 4 * 3001), (8, 8 * 1000)):  # gradients: scans by funcs again (hawk/reverse/chains.py)
        x = rng.normal(size=n)
        start = (rng.random(n) < 0.002).astype(np.float64)
        cts = {"y": rng.normal(size=n), "z": rng.normal(size=n), "tot": np.array([0.3])}
        gx = _shard_grad(dk.dist_fgrad, shards, {"x": x, "start": start}, cts)
        _bits_equal({"x": gx}, eagle.deploy(dk.dist_fgrad).reverse(cts, x=x, start=start), ["x"])
        cts = {"y": rng.normal(size=n), "t": np.array([0.3])}  # a fold by the func, read later in the body
        gx = _shard_grad(dk.dist_ffold, shards, {"x": x}, cts)
        _bits_equal({"x": gx}, eagle.deploy(dk.dist_ffold).reverse(cts, x=x), ["x"])
        key = rng.integers(-1, 5, size=n).astype(np.int32)  # keyed scans by the func, and their gradient
        want = eagle.deploy(dk.dist_kfscan).run(x=x, key=key)
        got = _sharded(dk.dist_kfscan, _mesh(shards), dict(x=x, key=key), dict(x=P("d"), key=P("d")),
                       {"y": P("d"), "z": P("d")})
        _bits_equal(got, want, ("y", "z"))
        cts = {"y": rng.normal(size=n), "z": rng.normal(size=n)}
        gx = _shard_grad(dk.dist_kfscan, shards, {"x": x, "key": key}, cts)
        _bits_equal({"x": gx}, eagle.deploy(dk.dist_kfscan).reverse(cts, x=x, key=key), ["x"])


def case_reverse_keyed_scans_and_their_gradient():
    """A reversed keyed scan (one sequential fold per key in the finish) inside shard_map on 4 shards: every
    shard's lanes bitwise the one-device run, and jax.grad through forward keyed scans (an add scan, whose adjoint
    is a reversed keyed scan; a running max by key; an add scan in key order) bitwise plan.reverse's."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, _ = _setup()
    rng = np.random.default_rng(34)
    n = 4 * 3_001
    x, k = np.round(rng.normal(size=n) * 4) / 4, rng.integers(-1, 5, n)  # (ties for the running max)
    cz, cw, cv = rng.normal(size=(3, n))
    mesh = _mesh(4)
    f = eagle.jax.wrap(dk.dist_rkscan, axis_name="d")
    outs = ["y", "z", "w", "v"]
    g = jax.jit(jax.shard_map(lambda x, k: f(x=x, k=k), mesh=mesh, in_specs=(P("d"), P("d")),
                              out_specs={o: P("d") for o in outs}))
    ks = jax.device_put(k, NamedSharding(mesh, P("d")))
    xs = jax.device_put(x, NamedSharding(mesh, P("d")))
    _bits_equal(g(xs, ks), eagle.deploy(dk.dist_rkscan).run(x=x, k=k), outs)

    def loss(x):
        out = g(x, ks)
        return (out["z"] * cz).sum() + (out["w"] * cw).sum() + (out["v"] * cv).sum()

    gx = jax.jit(jax.grad(loss))(xs)
    want = eagle.deploy(dk.dist_rkscan).reverse({"z": cz, "w": cw, "v": cv}, x=x, k=k)
    _bits_equal({"x": gx}, want, ["x"])


def case_partitioned_stencil_under_jit():
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    u = np.random.default_rng(8).normal(size=(NR, NC))
    f = eagle.jax.wrap(ks["heat"], partition=True)
    us = jax.device_put(u, NamedSharding(_mesh(8), P("d")))
    got = jax.jit(lambda u: f(u=u, k=0.1))(us)
    _bits_equal(got, eagle.deploy(ks["heat"]).run(u=u, k=0.1), ["out", "tot"])
    assert got["out"].sharding.spec == P("d")
    # its gradient: the shard_map form's gather form (halo share rows) per shard, bitwise plan.reverse's, on 4 and
    # 8 shards, and (cotangents whose pairs err) through the scatter fallback; unsharded: the one-device VJP
    rng = np.random.default_rng(15)
    co = rng.normal(size=(NR, NC))
    for shards, c in ((4, co), (8, co), (4, co * np.exp2(rng.integers(-300, 300, size=co.shape))), (0, co)):

        def loss(u, k, c=c):
            r = f(u=u, k=k)
            return (r["out"] * c).sum() + 1.5 * r["tot"].sum()

        us = jax.device_put(u, NamedSharding(_mesh(shards), P("d"))) if shards else u
        gu, gk = jax.jit(jax.grad(loss, argnums=(0, 1)))(us, 0.1)
        want = eagle.deploy(ks["heat"]).reverse({"out": c, "tot": np.array([1.5])}, u=u, k=0.1)
        _bits_equal({"u": gu, "k": np.asarray(gk).reshape(1)}, want, ["u", "k"])
        if shards:
            assert gu.sharding.spec == P("d")


def case_gradients_of_a_vector_stencil_in_gather_form():
    """A Vector plane read at neighbour rows: jax.grad inside shard_map (4 shards: halos of 2 rows, the share
    planes' components exchanged) and under partition=True (8) takes the gather form (its local gathers are the
    kernels called), bitwise plan.reverse's; cotangents of wildly different scales take the scatter adjoint on
    every shard, with the same bits."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(16)
    v, u, co = rng.normal(size=(2, NR, NC)), rng.normal(size=(NR, NC)), rng.normal(size=(2, NR, NC))
    wild = co * np.exp2(rng.integers(-300, 300, size=co.shape))
    for shards, c, partition in ((4, co, False), (8, co, True), (4, wild, False)):
        mesh = _mesh(shards)
        f = eagle.jax.wrap(ks["vheat"], **({"partition": True} if partition else {"axis_name": "d"}))
        call = (lambda v, u, f=f: f(v=v, u=u)) if partition else \
            jax.shard_map(lambda v, u, f=f: f(v=v, u=u), mesh=mesh, in_specs=(P(None, "d"), P("d")),
                          out_specs={"out": P(None, "d"), "tot": P()})

        def loss(v, u, c=c, call=call):
            r = call(v, u)
            return (r["out"] * c).sum() + 0.7 * r["tot"].sum()

        gv, gu = jax.jit(jax.grad(loss, argnums=(0, 1)))(jax.device_put(v, NamedSharding(mesh, P(None, "d"))),
                                                        jax.device_put(u, NamedSharding(mesh, P("d"))))
        want = eagle.deploy(ks["vheat"]).reverse({"out": c, "tot": np.array([0.7])}, v=v, u=u)
        _bits_equal({"v": gv, "u": gu}, want, ["v", "u"])
        called = [k for k in f._adjoints if isinstance(k, tuple)]
        assert any(k[0] == "local" for k in called), "the gather form's local gathers were not called"


def case_neighbour_rows_clamped_to_the_grid_run_with_halos():
    """Neighbour reads clamped to the grid (`m.clamp(lane.row + 1, 0, lane.extent("row") - 1)`, `m.max`, `m.min`;
    refused as computed rows until 2026-12-07) run with halos of 3 rows on 4 and 8 shards, bitwise the one-device
    run, and their gradients on 4 (the gather form, a Vector plane's too) bitwise plan.reverse's."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(17)
    u, v, co = rng.normal(size=(NR, NC)), rng.normal(size=(2, NR, NC)), rng.normal(size=(NR, NC))
    want = eagle.deploy(ks["clamped"]).run(u=u, v=v, k=0.3)
    grads = eagle.deploy(ks["clamped"]).reverse({"out": co, "tot": np.array([0.5])}, u=u, v=v, k=0.3)
    for shards in (4, 8):
        mesh = _mesh(shards)
        got = _sharded(ks["clamped"], mesh, dict(u=u, v=v), dict(u=P("d"), v=P(None, "d")),
                       {"out": P("d"), "tot": P()}, k=0.3)
        _bits_equal(got, want, ["out", "tot"])
        if shards == 8:
            continue  # (the gradient on 4 shards)
        f = eagle.jax.wrap(ks["clamped"], axis_name="d")
        g = jax.shard_map(lambda u, v, f=f: f(u=u, v=v, k=0.3), mesh=mesh, in_specs=(P("d"), P(None, "d")),
                          out_specs={"out": P("d"), "tot": P()})

        def loss(u, v, g=g):
            r = g(u, v)
            return (r["out"] * co).sum() + 0.5 * r["tot"].sum()

        gu, gv = jax.jit(jax.grad(loss, argnums=(0, 1)))(jax.device_put(u, NamedSharding(mesh, P("d"))),
                                                        jax.device_put(v, NamedSharding(mesh, P(None, "d"))))
        _bits_equal({"u": gu, "v": gv}, grads, ["u", "v"])
        assert any(k[0] == "local" for k in f._adjoints if isinstance(k, tuple)), "not the gather form"


def case_a_sink_added_into_by_two_stages():
    """Sinks scattered into before and after a total is read (two stages): the second stage adds to what the first
    finished, as on one device (the sharded run dropped the first stage's adds until 2026-12-07), the prior passed
    once; the ordered sink and total bitwise the one-device run on 4 and 8 shards, the plain one to rounding. And
    a gradient whose adjoint adds into one sink in two stages (a fold's, beside a neighbour read): bitwise
    plan.reverse's."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(19)
    x = rng.normal(size=4000) * np.exp(rng.normal(size=4000) * 3)
    key = rng.integers(0, 5, size=4000).astype(np.int32)
    prior = rng.normal(size=5)
    want = eagle.deploy(ks["twice"]).run(x=x, key=key, acc=prior.copy())
    for shards in (4, 8):
        got = _sharded(ks["twice"], _mesh(shards), dict(x=x, key=key, acc=prior),
                       dict(x=P("d"), key=P("d"), acc=P()), {"acc": P(), "s": P(), "tot": P()})
        _bits_equal(got, want, ["acc", "tot"])
        np.testing.assert_allclose(np.asarray(got["s"]), np.asarray(want["s"]), rtol=1e-12)
    u, co = rng.normal(size=(NR, NC)), rng.normal(size=(NR, NC))
    grads = eagle.deploy(ks["foldat"]).reverse({"result": co, "total": np.array([0.5])}, x=u)
    mesh = _mesh(4)
    f = eagle.jax.wrap(ks["foldat"], axis_name="d")
    g = jax.shard_map(lambda x: f(x=x), mesh=mesh, in_specs=(P("d"),), out_specs={"result": P("d"), "total": P()})
    gu = jax.jit(jax.grad(lambda x: (g(x)["result"] * co).sum() + 0.5 * g(x)["total"].sum()))(
        jax.device_put(u, NamedSharding(mesh, P("d"))))
    _bits_equal({"x": gu}, grads, ["x"])


def case_gradients_of_a_grid_kernel_in_float64_and_float32():
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    mesh = _mesh(8)  # 6 rows a shard; the adjoint adds tot's cotangent at lane 0 of the whole grid
    f = eagle.jax.wrap(ks["gridgrad"], axis_name="d")
    g = jax.shard_map(lambda u, k: f(u=u, k=k), mesh=mesh, in_specs=(P("d"), P()),
                      out_specs={"out": P("d"), "tot": P()})
    rng = np.random.default_rng(13)
    for dt in (np.float64, np.float32):
        u, co = rng.normal(size=(NR, NC)).astype(dt), rng.normal(size=(NR, NC)).astype(dt)

        def loss(u, k, co=co):
            r = g(u, k)
            return (r["out"] * co).sum() + 0.3 * r["tot"].sum()

        gu, gk = jax.jit(jax.grad(loss, argnums=(0, 1)))(jax.device_put(u, NamedSharding(mesh, P("d"))),
                                                        jnp.asarray(1.7, dt))
        want = eagle.deploy(ks["gridgrad"]).reverse({"out": co, "tot": np.array([0.3], dt)}, u=u, k=1.7)
        _bits_equal({"u": gu, "k": np.asarray(gk).reshape(1)}, want, ["u", "k"])


def case_gradients_through_stores_into_a_sink_from_a_grid():
    """A Grid kernel storing into a sink with `= v`: the winners kernel and the adjoint number the stores by the
    whole grid's row-major lane index, so `jax.grad` through shard_map and through partition=True gives
    plan.reverse's bits for the lanes, the prior and the per-lane output's input."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(41)
    u, key = rng.normal(size=(NR, NC)), rng.integers(-1, 5, size=(NR, NC)).astype(np.int32)
    key[key == 2] = -1  # (slot 2: nobody stores)
    prior, ct, co = rng.normal(size=5), rng.normal(size=5), rng.normal(size=(NR, NC))
    want = eagle.deploy(ks["gridstore"]).reverse({"last": ct, "out": co}, u=u, key=key, last=prior.copy())
    for shards in (4, 8):
        mesh = _mesh(shards)
        f, fp = eagle.jax.wrap(ks["gridstore"], axis_name="d"), eagle.jax.wrap(ks["gridstore"], partition=True)
        g = jax.shard_map(lambda u, k, p, f=f: f(u=u, key=k, last=p), mesh=mesh, in_specs=(P("d"), P("d"), P()),
                          out_specs={"last": P(), "out": P("d")})
        us, kk = (jax.device_put(a, NamedSharding(mesh, P("d"))) for a in (u, key))
        for call in (g, lambda u, k, p, fp=fp: fp(u=u, key=k, last=p)):
            def loss(u, k, p, call=call):
                r = call(u, k, p)
                return (r["last"] * ct).sum() + (r["out"] * co).sum()

            gu, gp = jax.jit(jax.grad(loss, argnums=(0, 2)))(us, kk, prior)
            _bits_equal({"u": gu, "last": gp}, want, ["u", "last"])
    assert np.asarray(want["last"])[2] == ct[2] and np.asarray(want["last"])[0] == 0.0


def case_gradients_of_block_reductions_beside_lane_row():
    """Row max and row sum read in the body (block reductions) beside `lane.row` (whole-run lane numbers): the
    adjoint keeps them block reductions, as the forward does, so jax.grad through shard_map and partition=True
    runs sharded with plan.reverse's bits (ties in the row max included)."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(43)
    x, ct = np.round(rng.normal(size=(NR, NC)) * 2) / 2, rng.normal(size=(NR, NC))  # (ties in x * x)
    want = eagle.deploy(ks["rowblock"]).reverse(ct, x=x)
    for shards in (4, 8):
        mesh = _mesh(shards)
        f, fp = eagle.jax.wrap(ks["rowblock"], axis_name="d"), eagle.jax.wrap(ks["rowblock"], partition=True)
        g = jax.shard_map(lambda x, f=f: f(x=x), mesh=mesh, in_specs=P("d"), out_specs=P("d"))
        xs = jax.device_put(x, NamedSharding(mesh, P("d")))
        for call in (g, lambda x, fp=fp: fp(x=x)):
            got = jax.jit(jax.grad(lambda x, call=call: (call(x) * ct).sum()))(xs)
            _bits_equal({"x": got}, want, ["x"])


def case_folds_keeping_rows_bitwise_or_refused_without_identity():
    """hawk.reduce folds over the columns keep the leading axis: each row's one fold in lane order runs whole on
    its shard (its flags and partials stay there), so the rows, an empty one's identity included, have the
    one-device bits on 4 and 8 shards, under shard_map and partition=True. Without identity= an empty row would
    refuse on its shard alone: refused by name, before anything runs (partition=True: gathered, warned)."""
    import warnings

    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax
    from eagle import InputError

    np, _ = _setup()
    x = np.random.default_rng(45).normal(size=(NR, NC))
    x[7] = -2.0  # (row 7: where= keeps no lane, the identity)
    want = eagle.deploy(dk.dist_rowlerp).run(x=x)
    for shards in (4, 8):
        mesh = _mesh(shards)
        f, fp = eagle.jax.wrap(dk.dist_rowlerp, axis_name="d"), eagle.jax.wrap(dk.dist_rowlerp, partition=True)
        g = jax.shard_map(lambda x, f=f: f(x=x), mesh=mesh, in_specs=P("d"),
                          out_specs={"tot": P("d"), "y": P("d")})
        xs = jax.device_put(x, NamedSharding(mesh, P("d")))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for got in (jax.jit(g)(xs), jax.jit(lambda x, fp=fp: fp(x=x))(xs)):
                _bits_equal(got, want, ["tot", "y"])
    assert np.asarray(want["tot"])[7] == 7.0
    bare = eagle.jax.wrap(dk.dist_rowlerp_bare, axis_name="d")
    try:
        jax.jit(jax.shard_map(lambda x: bare(x=x), mesh=mesh, in_specs=P("d"), out_specs=P("d")))(xs)
    except InputError as exc:
        assert "dist_rowlerp_bare" in str(exc) and "identity=" in str(exc) and "'tot'" in str(exc), exc
    else:
        raise AssertionError("a row fold without identity= ran sharded")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        y = x + 3.0  # (no empty row: the gathered call runs)
        got = jax.jit(lambda x: eagle.jax.wrap(dk.dist_rowlerp_bare, partition=True)(x=x))(
            jax.device_put(y, NamedSharding(mesh, P("d"))))
    assert any("runs unsharded" in str(w.message) and "identity=" in str(w.message) for w in said), said
    _bits_equal({"tot": got}, {"tot": eagle.deploy(dk.dist_rowlerp_bare).run(x=y)}, ["tot"])


def case_a_refused_run_leaves_the_arrays_untouched():
    """A key outside the sink on one shard refuses the call on every shard (no device is left waiting in a
    collective: the shards' #err triples are gathered and looked at before any finish), in Plan.run's words;
    the arrays passed keep their bytes and the same program runs again with good keys, through shard_map and
    through jit's partitioning."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(14)
    n = 4 * 2000
    x, key, prior = rng.normal(size=n), rng.integers(0, 5, size=n).astype(np.int32), rng.normal(size=5)
    mesh = _mesh(4)
    sh, rep = NamedSharding(mesh, P("d")), NamedSharding(mesh, P())
    f = eagle.jax.wrap(ks["sums"], axis_name="d")
    mapped = jax.jit(jax.shard_map(lambda x, key, acc: f(x=x, key=key, acc=acc), mesh=mesh,
                                   in_specs=(P("d"), P("d"), P()), out_specs=P()))
    fp = eagle.jax.wrap(ks["sums"], partition=True)
    parted = jax.jit(lambda x, key, acc: fp(x=x, key=key, acc=acc))
    want = eagle.deploy(ks["sums"]).run(x=x, key=key, acc=prior.copy())
    for g, at, k in ((mapped, 2 * 2000 + 17, 7), (mapped, 0, -2), (parted, n - 1, 5)):
        bad = key.copy()
        bad[at] = k  # on shard 2; on shard 0's first lane; on the last shard's last lane
        args = (jax.device_put(x, sh), jax.device_put(bad, sh), jax.device_put(prior, rep))
        before = [np.asarray(a).tobytes() for a in args]
        try:
            jax.block_until_ready(g(*args))
        except Exception as exc:  # noqa: BLE001 (XLA's runtime error, carrying eagle's refusal)
            words = ("sink 'acc'", "dist_sums", f"first bad key: {k}", "0..4")
            assert all(w in str(exc) for w in words), str(exc)
        else:
            raise AssertionError(f"a key {k} outside the sink ran sharded")
        assert [np.asarray(a).tobytes() for a in args] == before
        got = g(jax.device_put(x, sh), jax.device_put(key, sh), jax.device_put(prior, rep))
        _bits_equal(got, want, ["acc", "m", "tot"])


def case_scans_beside_halos_and_vector_planes():
    """A scan in a kernel that reads neighbours with .at (forward and reverse scans, halos of 1 and 2 rows): each
    shard runs whole scan blocks, and the planes it reads with .at come with the rows around the lanes it runs
    (from however many shards hold them), so every result is the one-device run's bits, on 4 and 8 shards of
    rows larger and smaller than a block and smaller than the halo, and under partition=True; Vector planes
    beside a scan (one read with a halo of 3 rows, one plain, a Vector output) the same."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, _ = _setup()
    rng = np.random.default_rng(31)
    specs = {"y": P("d"), "r": P("d"), "tot": P()}
    for shards, rows in ((4, 4 * 150), (8, 8 * 75), (8, 8 * 1)):  # 2400, 1200 and 16 lanes a shard
        u = rng.normal(size=(rows, NC)) * np.exp(rng.normal(size=(rows, NC)) * 3)
        want = eagle.deploy(dk.dist_hscan).run(u=u)
        _bits_equal(_sharded(dk.dist_hscan, _mesh(shards), dict(u=u), dict(u=P("d")), specs), want, list(specs))
    f = eagle.jax.wrap(dk.dist_hscan, partition=True)
    got = jax.jit(lambda u: f(u=u))(jax.device_put(u, NamedSharding(_mesh(8), P("d"))))
    _bits_equal(got, want, list(specs))
    assert got["y"].sharding.spec == P("d")
    specs = {"y": P("d"), "z": P(None, "d")} | {f"tot_{k}": P() for k in range(3)}  # (the Vector cell's parts)
    for shards, rows in ((4, 4 * 150), (8, 8 * 2)):
        v, c = rng.normal(size=(2, rows, NC)), rng.normal(size=(3, rows, NC))
        want = eagle.deploy(dk.dist_vscan).run(v=v, c=c)
        got = _sharded(dk.dist_vscan, _mesh(shards), dict(v=v, c=c), dict(v=P(None, "d"), c=P(None, "d")), specs)
        _bits_equal(got, want, list(specs))


def case_large_sinks_fold_each_shard_s_copies():
    """Sinks of 5000 slots, 4 chunks a shard: each shard folds its chunks' copies into one before the gather (and
    an ordered sink's exact accumulators are summed only when some shard spilled into them). The ordered sink is
    bitwise the one-device run whether every shard's pairs fold exactly (terms of like scale) or some err
    (terms 2**-600 to 2**600: every shard then moves its copies whole); the plain and the compensated sinks are
    within their bound of the exact sums."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax
    from eagle.distributed.sinks import FOLD, XSUM
    from hawk.exact import fraction_sum

    np, _ = _setup()
    rng = np.random.default_rng(33)
    n = 4 * 20_000
    f = eagle.jax.wrap(dk.dist_bigsink, axis_name="d", threads=4, min_chunk=4096)
    mesh = _mesh(4)
    sh = NamedSharding(mesh, P("d"))
    g = jax.jit(jax.shard_map(lambda x, key: f(x=x, key=key), mesh=mesh, in_specs=(P("d"), P("d")), out_specs=P()))
    for spread in (2, 600):
        x = rng.normal(size=n) * np.exp2(rng.integers(-spread, spread, size=n).astype(np.float64))
        key = rng.integers(-1, dk.BIG, size=n).astype(np.int32)
        got = g(jax.device_put(x, sh), jax.device_put(key, sh))
        want = eagle.deploy(dk.dist_bigsink).run(x=x, key=key)
        _bits_equal(got, want, ["acc"])
        for name, scale in (("plain", 1.0), ("comp", 0.5)):
            for slot in rng.integers(0, dk.BIG, size=40):
                terms = x[key == slot] * scale
                exact = float(fraction_sum(terms)) if terms.size else 0.0
                bound = 64 * np.finfo(np.float64).eps * np.abs(terms).sum()
                assert abs(float(np.asarray(got[name])[slot]) - exact) <= bound, (name, slot)
    kinds = [k for run in f._calls.values() for lh, _ in run.halves for k in lh.kinds]
    assert kinds.count(FOLD) == 3 and kinds.count(XSUM) == 1, kinds


def case_folds_keep_lane_order_across_shards():
    """hawk.reduce with an operator that is neither associative nor commutative, over every lane and under where=:
    shards run whole 1024-lane blocks at their global numbers, each block's partial written by the one shard that
    runs it, and every shard's finish folds the blocks in order, so the cells (and a later stage's use of one) are
    the one-device bits on 4 and 8 shards; an empty slice refuses the call on every shard."""
    import jax
    from jax.sharding import PartitionSpec as P

    import eagle

    np, _ = _setup()
    rng = np.random.default_rng(39)
    specs = {"p": P(), "q": P(), "y": P("d")}
    for shards, n in ((4, 4 * 3001), (8, 8 * 100)):
        x = rng.normal(size=n) * 3
        want = eagle.deploy(dk.dist_fold).run(x=x)
        _bits_equal(_sharded(dk.dist_fold, _mesh(shards), dict(x=x), dict(x=P("d")), specs), want, list(specs))
    try:
        jax.block_until_ready(_sharded(dk.dist_fold, _mesh(4), dict(x=-np.abs(x[:400])), dict(x=P("d")), specs))
    except Exception as exc:  # noqa: BLE001 (XLA's runtime error, carrying eagle's refusal)
        assert all(w in str(exc) for w in ("dist_fold", "'q'", "nothing to fold", "identity=")), str(exc)
    else:
        raise AssertionError("an empty slice of a fold without an identity ran sharded")
    _bits_equal(_sharded(dk.dist_fold, _mesh(8), dict(x=x), dict(x=P("d")), specs), want, list(specs))  # (again)


def case_the_grid_extent_is_the_whole_grids_on_every_shard():
    """lane.extent("row") on a shard is the whole grid's row count (a kernel that reads it runs with the whole
    grid's lane numbers, as one reading lane.row does), inside shard_map on 4 and 8 devices: one device's bits."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, _ = _setup()
    u = np.random.default_rng(17).normal(size=(NR, NC))
    for kernel, names in ((dk.dist_extent, ["y", "z"]), (dk.dist_extent_only, ["y"])):
        want = eagle.deploy(kernel).run(u=u)
        if len(names) == 1:
            want = {names[0]: want}
        np.testing.assert_array_equal(np.asarray(want["y"]), u * NR + (NC if "z" in names else 0.0))
        g = eagle.jax.wrap(kernel, axis_name="d")
        for shards in (4, 8):
            mesh = _mesh(shards)
            out = {n: P("d") for n in names}
            got = jax.jit(jax.shard_map(lambda u, g=g: g(u=u), mesh=mesh, in_specs=(P("d"),),
                                        out_specs=out if len(names) > 1 else P("d")))(
                jax.device_put(u, NamedSharding(mesh, P("d"))))
            _bits_equal(got if len(names) > 1 else {names[0]: got}, want, names)


def _kept_bounds(np, got, x, mask=None):
    """Per kept column of `x` (rows x columns): the compensated sum within k <= 1 and the auto sum and mean within
    the fast form's bound (n x eps x sum|x|) of the exact values."""
    import math

    eps = np.finfo(x.dtype).eps
    for j in range(x.shape[1]):
        col = x[:, j]
        mag = float(np.abs(col).sum())
        assert abs(float(np.asarray(got["s_comp"])[j]) - math.fsum(col)) <= eps * mag, j
        assert abs(float(np.asarray(got["s_auto"])[j]) - math.fsum(col)) <= col.size * eps * mag, j
        kept = col[col < 1.0]
        want = math.fsum(kept) / kept.size
        assert abs(float(np.asarray(got["mu"])[j]) - want) <= kept.size * eps * np.abs(kept).sum() / kept.size, j


def case_reductions_keeping_axes_off_the_leading_one():
    """Column sums, means, max and min (kept axes other than the leading one: each chunk keeps its own copy of the
    cell, gathered along the chunk axis like a sink's copies) on 4 and 8 shards, a shard of one row too: ordered
    sums and means bitwise the one-device run, max/min bitwise, compensated within k <= 1, auto within the fast
    form's bound; a middle kept axis beside a scan (shards start mid-row); a split kernel whose kept cell is read
    by the next stage (a batch norm: its cut cell combined between the stages); a Vector payload."""
    import math

    from jax.sharding import PartitionSpec as P

    import eagle

    np, _ = _setup()
    rng = np.random.default_rng(21)
    for shards, rows in ((4, 4 * 3001), (8, 8 * 17), (8, 8)):
        x = rng.normal(size=(rows, dk.KC)) * np.exp(rng.normal(size=(rows, dk.KC)) * 4)
        want = eagle.deploy(dk.dist_cols).run(x=x)
        got = _sharded(dk.dist_cols, _mesh(shards), dict(x=x), dict(x=P("d")), P())
        _bits_equal(got, want, ["s_ord", "mu_ord"])
        _kept_bounds(np, got, x)
        for kernel in (dk.dist_colmax, dk.dist_colmin):
            _bits_equal({"r": _sharded(kernel, _mesh(shards), dict(x=x), dict(x=P("d")), P())},
                        {"r": eagle.deploy(kernel).run(x=x)}, ["r"])
        x3 = rng.normal(size=(shards * 250, 3, 7))  # 5250 lanes a shard: its scan blocks start mid-row
        want = eagle.deploy(dk.dist_chan).run(x=x3)
        got = _sharded(dk.dist_chan, _mesh(shards), dict(x=x3), dict(x=P("d")), {"run": P("d"), "s": P(), "so": P()})
        _bits_equal(got, want, ["run", "so"])
        for c in range(3):
            col = x3[:, c, :].reshape(-1)
            assert abs(float(np.asarray(got["s"])[c]) - math.fsum(col)) <= np.finfo(float).eps * np.abs(col).sum(), \
                (shards, rows, c, np.asarray(got["s"]), np.asarray(want["s"]), math.fsum(col))
        xb = rng.normal(size=(rows, 3)) * 3 + 1
        got = _sharded(dk.dist_bnorm, _mesh(shards), dict(x=xb), dict(x=P("d")), {"y": P("d"), "mu": P()})
        _bits_equal(got, eagle.deploy(dk.dist_bnorm).run(x=xb), ["y", "mu"])
        v = rng.normal(size=(2, rows, 3))
        got = _sharded(dk.dist_colvec, _mesh(shards), dict(v=v), dict(v=P(None, "d")), P(), w=1.5)
        _bits_equal(got, eagle.deploy(dk.dist_colvec).run(v=v, w=1.5), ["s_0", "s_1", "t"])


def case_kept_axes_gradients_and_partition_under_jit():
    """jax.grad through column sums of a Vector plane on 4 and 8 shards (the adjoint reads each column's
    cotangent, the same on every shard), bitwise plan.reverse; under plain jit with NamedSharding
    (`partition=True`) the kept sums bitwise the one-device run, and no lane input gathered."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, _ = _setup()
    rng = np.random.default_rng(22)
    f = eagle.jax.wrap(dk.dist_colvec, axis_name="d")
    for shards, rows in ((4, 4 * 301), (8, 8 * 5)):
        v = rng.normal(size=(2, rows, 3))
        cot = {"s": rng.normal(size=(2, 3)), "t": np.array([0.3])}  # (components, kept columns)
        mesh = _mesh(shards)
        g = jax.shard_map(lambda v, w: f(v=v, w=w), mesh=mesh, in_specs=(P(None, "d"), P()), out_specs=P())

        def loss(v, w, g=g, cot=cot):
            r = g(v, w)
            return sum((r[f"s_{i}"] * cot["s"][i]).sum() for i in range(2)) + (r["t"] * cot["t"]).sum()

        got = jax.jit(jax.grad(loss, argnums=(0, 1)))(jax.device_put(v, NamedSharding(mesh, P(None, "d"))),
                                                      jnp.asarray(1.5))
        want = eagle.deploy(dk.dist_colvec).reverse(cot, v=v, w=1.5)
        _bits_equal({"v": got[0], "w": np.asarray(got[1]).reshape(-1)},
                    {"v": want["v"], "w": np.asarray(want["w"]).reshape(-1)}, ["v", "w"])
    rows = 8 * 503
    x = rng.normal(size=(rows, dk.KC)) * 1e3
    fp = eagle.jax.wrap(dk.dist_cols, partition=True)
    g = jax.jit(lambda x: fp(x=x))
    xs = jax.device_put(x, NamedSharding(_mesh(8), P("d")))
    _bits_equal(g(xs), eagle.deploy(dk.dist_cols).run(x=x), ["s_ord", "mu_ord"])
    hlo = g.lower(xs).compile().as_text()
    assert "eagle_hawk_call" in hlo and f"f64[{rows // 8},{dk.KC}]" in hlo  # a launch per shard, its own rows
    _no_lane_collective(hlo, f"{rows},{dk.KC}", f"{rows // 8},{dk.KC}")


def case_reductions_keeping_the_leading_axis_per_shard():
    """Row sums of every policy, a masked mean and a max (each kept slot's lanes on one shard, which keeps its
    slots' state to itself) on 4 and 8 shards, one of a single row: each shard hands back its own rows, sharded
    like the input, bitwise the one-device run (a slot is one fold in lane order, whatever the policy); beside an
    ordered total over every lane; under partition=True the same, sharded P("d"); the gradient through a row sum
    beside a total read in the body (whose adjoint runs at whole-run lane numbers: it reads every shard's row
    cotangents, gathered) bitwise plan.reverse's."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, _ = _setup()
    rng = np.random.default_rng(23)
    outs = {k: P("d") for k in ("s_auto", "s_comp", "s_ord", "mu")} | {"tot": P()}
    for shards, rows in ((4, 4 * 301), (8, 8 * 3), (8, 8)):
        x = rng.normal(size=(rows, dk.KC)) * np.exp(rng.normal(size=(rows, dk.KC)) * 4)
        want = eagle.deploy(dk.dist_rowstats).run(x=x)
        got = _sharded(dk.dist_rowstats, _mesh(shards), dict(x=x), dict(x=P("d")), outs)
        _bits_equal(got, want, list(want))
        assert len(got["s_ord"].sharding.device_set) == shards
        _bits_equal({"r": _sharded(dk.dist_rowmax, _mesh(shards), dict(x=x), dict(x=P("d")), P("d"))},
                    {"r": eagle.deploy(dk.dist_rowmax).run(x=x)}, ["r"])
        fp = eagle.jax.wrap(dk.dist_rowstats, partition=True)
        xs = jax.device_put(x, NamedSharding(_mesh(shards), P("d")))
        got = jax.jit(lambda x, fp=fp: fp(x=x))(xs)
        _bits_equal(got, want, list(want))
        assert got["s_ord"].sharding.spec == P("d")
    # a row sum beside a total read in the body: the total's cotangent enters at the run's lane 0, so the adjoint
    # runs at whole-run lane numbers and reads every shard's row cotangents, gathered (refused until 2026-12-07)
    cts = {"s": rng.normal(size=8), "tot": np.array([0.3]), "z": rng.normal(size=(8, dk.KC))}
    got = _shard_grad(dk.dist_rowtot, 4, dict(x=x[:8]), cts)
    _bits_equal({"x": got}, eagle.deploy(dk.dist_rowtot).reverse(cts, x=x[:8]), ["x"])


def case_row_cells_beside_neighbour_reads_and_coordinates():
    """A row cell in a kernel that reads neighbours (halos) or `lane.row`: shards run at whole-run lane numbers,
    where the compiled code numbers the cell's slots as the whole run does, so each shard writes its rows' state
    into a buffer of every row's and hands its own rows to the finish (eagle/distributed/rows.py). Auto,
    compensated and ordered row sums, an ordered masked mean, a masked max, a fold with identity=, a Vector row
    sum, two slots a row (a 3-D grid), the row sum of `lane.row` (refused until 2026-12-07) and a row mean over
    more lanes than a block, read in the body (a cut cell between two stages, handed to the second laid out for
    every row: rows.place_slots), on 4 and 8 shards, one of two rows a shard: every result bitwise the one-device
    run, sharded P("d"); under partition=True too. Their gradients (jax.grad in shard_map and under
    partition=True, the adjoint reading every shard's row cotangents, gathered) bitwise plan.reverse's, a Param's
    among them. Taking the slots from the wrong rows fails every one of these (checked by hand when written)."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, _ = _setup()
    rng = np.random.default_rng(29)
    for shards, rows in ((4, 4 * 301), (8, 8 * 3), (8, 8 * 2)):
        u = rng.normal(size=(rows, dk.KC)) * np.exp(rng.normal(size=(rows, dk.KC)) * 3)
        want = eagle.deploy(dk.dist_rowhalo).run(u=u)
        got = _sharded(dk.dist_rowhalo, _mesh(shards), dict(u=u), dict(u=P("d")),
                       {k: P() if k == "tot" else P("d") for k in want})
        _bits_equal(got, want, list(want))
        assert len(got["s_ord"].sharding.device_set) == shards
        for kernel, x in ((dk.dist_rowhalo_max, u), (dk.dist_rowhalo_fold, u), (dk.dist_rowcoord, u)):
            planes = dict(x=x) if kernel is dk.dist_rowcoord else dict(u=x)
            got = _sharded(kernel, _mesh(shards), planes, {k: P("d") for k in planes}, P("d"))
            _bits_equal({"r": got}, {"r": eagle.deploy(kernel).run(**planes)}, ["r"])
        v = rng.normal(size=(2, rows, dk.KC))
        got = _sharded(dk.dist_rowhalo_vec, _mesh(shards), dict(v=v), dict(v=P(None, "d")), P(None, "d"), w=0.3)
        _bits_equal({"r": got}, {"r": eagle.deploy(dk.dist_rowhalo_vec).run(v=v, w=0.3)}, ["r"])
        u3 = rng.normal(size=(rows, 3, dk.KC))
        want = eagle.deploy(dk.dist_rowhalo_3d).run(u=u3)
        got = _sharded(dk.dist_rowhalo_3d, _mesh(shards), dict(u=u3), dict(u=P("d")), {k: P("d") for k in want})
        _bits_equal(got, want, list(want))
        fp = eagle.jax.wrap(dk.dist_rowhalo, partition=True)
        us = jax.device_put(u, NamedSharding(_mesh(shards), P("d")))
        got = jax.jit(lambda u, fp=fp: fp(u=u))(us)
        want = eagle.deploy(dk.dist_rowhalo).run(u=u)
        _bits_equal(got, want, list(want))
        assert got["s_ord"].sharding.spec == P("d")
        uw = rng.normal(size=(rows, 1100))
        got = _sharded(dk.dist_rowhalo_cutwide, _mesh(shards), dict(u=uw), dict(u=P("d")), P("d"))
        _bits_equal({"r": got}, {"r": eagle.deploy(dk.dist_rowhalo_cutwide).run(u=uw)}, ["r"])
        # gradients: every output's cotangent at once
        cts = {k: rng.normal(size=np.shape(a)) for k, a in want.items()}
        _bits_equal({"u": _shard_grad(dk.dist_rowhalo, shards, dict(u=u), cts)},
                    eagle.deploy(dk.dist_rowhalo).reverse(cts, u=u), ["u"])

        def loss(u, fp=fp, cts=cts):  # (one call, every output's cotangent at once)
            r = fp(u=u)
            return sum((r[k] * c).sum() for k, c in cts.items())

        g = jax.jit(jax.grad(loss))
        _bits_equal({"u": g(us)}, eagle.deploy(dk.dist_rowhalo).reverse(cts, u=u), ["u"])
        ct = rng.normal(size=rows)
        for kernel, name in ((dk.dist_rowhalo_max, "u"), (dk.dist_rowhalo_fold, "u"), (dk.dist_rowcoord, "x")):
            got = _shard_grad(kernel, shards, {name: u}, {"result": ct})
            _bits_equal({name: got}, eagle.deploy(kernel).reverse(ct, **{name: u}), [name])
        cts = {"s": rng.normal(size=(rows, 3)), "m": rng.normal(size=(rows, 3))}
        _bits_equal({"u": _shard_grad(dk.dist_rowhalo_3d, shards, dict(u=u3), cts)},
                    eagle.deploy(dk.dist_rowhalo_3d).reverse(cts, u=u3), ["u"])
        ct = rng.normal(size=rows)
        _bits_equal({"u": _shard_grad(dk.dist_rowhalo_cutwide, shards, dict(u=uw), {"result": ct[:, None] * uw})},
                    eagle.deploy(dk.dist_rowhalo_cutwide).reverse(ct[:, None] * uw, u=uw), ["u"])
        ct = rng.normal(size=(2, rows))
        fv = eagle.jax.wrap(dk.dist_rowhalo_vec, axis_name="d")
        gv = jax.shard_map(lambda v, w, fv=fv: fv(v=v, w=w), mesh=_mesh(shards), in_specs=(P(None, "d"), P()),
                           out_specs=P(None, "d"))
        dv, dw = jax.jit(jax.grad(lambda v, w, gv=gv, ct=ct: (gv(v, w) * ct).sum(), argnums=(0, 1)))(
            jax.device_put(v, NamedSharding(_mesh(shards), P(None, "d"))), jax.numpy.asarray(0.3))
        want = eagle.deploy(dk.dist_rowhalo_vec).reverse(ct, v=v, w=0.3)
        _bits_equal({"v": dv, "w": dw.reshape(1)}, {"v": want["v"], "w": np.asarray(want["w"]).reshape(1)},
                    ["v", "w"])


def case_gradients_through_row_results_bitwise():
    """jax.grad through per-example losses on 2, 4 and 8 shards (one of a single row): an ordered row sum, a
    masked compensated row mean and a per-lane output, a Vector row sum, a row max with ties, beside a total over
    every lane; inside shard_map and under plain jit (partition=True). Each shard's rows' cotangents key the
    adjoint by its own rows: bitwise plan.reverse."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, _ = _setup()
    rng = np.random.default_rng(24)
    f, fp = eagle.jax.wrap(dk.dist_rowloss, axis_name="d"), eagle.jax.wrap(dk.dist_rowloss, partition=True)
    for shards, rows in ((4, 4 * 31), (8, 8), (2, 2 * 7)):
        x, y = rng.normal(size=(rows, dk.KC)), rng.normal(size=(rows, dk.KC))
        x[::3, 1] = x[::3, 0]
        cot = {k: rng.normal(size=rows) for k in ("loss", "mu")} | {"z": rng.normal(size=(rows, dk.KC))}
        mesh = _mesh(shards)
        g = jax.shard_map(lambda x, y, w: f(x=x, y=y, w=w), mesh=mesh, in_specs=(P("d"), P("d"), P()),
                          out_specs=P("d"))
        want = eagle.deploy(dk.dist_rowloss).reverse(cot, x=x, y=y, w=1.5)
        for call in (g, lambda x, y, w: fp(x=x, y=y, w=w)):
            def loss(x, y, w, call=call, cot=cot):
                r = call(x, y, w)
                return sum((r[k] * cot[k]).sum() for k in cot)

            xs, ys = (jax.device_put(a, NamedSharding(mesh, P("d"))) for a in (x, y))
            got = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(xs, ys, jnp.asarray(1.5))
            _bits_equal(dict(zip("xyw", (np.asarray(a).reshape(-1) for a in got), strict=True)),
                        {k: np.asarray(want[k]).reshape(-1) for k in "xyw"}, list("xyw"))
    rows, mesh = 4 * 9, _mesh(4)
    v, cs = rng.normal(size=(2, rows, dk.KC)), rng.normal(size=(2, rows))
    fv = eagle.jax.wrap(dk.dist_rowvec, axis_name="d")
    g = jax.shard_map(lambda v, w: fv(v=v, w=w), mesh=mesh, in_specs=(P(None, "d"), P()), out_specs=P(None, "d"))
    got = jax.jit(jax.grad(lambda v, w: (g(v, w) * cs).sum(), argnums=(0, 1)))(
        jax.device_put(v, NamedSharding(mesh, P(None, "d"))), jnp.asarray(0.5))
    want = eagle.deploy(dk.dist_rowvec).reverse({"result": cs}, v=v, w=0.5)
    _bits_equal({"v": got[0], "w": np.asarray(got[1]).reshape(-1)},
                {"v": want["v"], "w": np.asarray(want["w"]).reshape(-1)}, ["v", "w"])
    x, c = rng.normal(size=(8 * 5, dk.KC)), rng.normal(size=8 * 5)
    x[::2, 3] = x[::2].max(axis=1)  # (ties share the cotangent)
    fm, mesh = eagle.jax.wrap(dk.dist_rowmax, axis_name="d"), _mesh(8)
    g = jax.shard_map(lambda x: fm(x=x), mesh=mesh, in_specs=P("d"), out_specs=P("d"))
    got = jax.jit(jax.grad(lambda x: (g(x) * c).sum()))(jax.device_put(x, NamedSharding(mesh, P("d"))))
    _bits_equal({"x": got}, {"x": eagle.deploy(dk.dist_rowmax).reverse({"result": c}, x=x)["x"]}, ["x"])
    fs = eagle.jax.wrap(dk.dist_rowstats, axis_name="d")  # a row sum beside a total over every lane
    outs = {k: P("d") for k in ("s_auto", "s_comp", "s_ord", "mu")} | {"tot": P()}
    g = jax.shard_map(lambda x: fs(x=x), mesh=mesh, in_specs=P("d"), out_specs=outs)
    def loss(x, g=g):  # (one call: two would add their gradients in JAX, in another order than the adjoint)
        r = g(x)
        return r["s_ord"].sum() + 0.5 * r["tot"].sum()

    got = jax.jit(jax.grad(loss))(jax.device_put(x, NamedSharding(mesh, P("d"))))
    want = eagle.deploy(dk.dist_rowstats).reverse({"s_ord": np.ones(8 * 5), "tot": np.array([0.5])}, x=x)
    _bits_equal({"x": got}, want, ["x"])


def case_what_cannot_shard_runs_gathered_under_partition():
    """Under plain jit (partition=True), a kernel the sharded path refuses (a flat `.at` read) runs as the
    one-device call over gathered lanes, bitwise Plan.run, with a UserWarning naming the kernel and the read (inside
    shard_map the same kernel is refused: case_at_on_a_lane_plane_is_refused)."""
    import warnings

    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(24)
    n = 8 * 1001
    x, src = rng.normal(size=n), rng.integers(0, n, size=n).astype(np.int32)
    f = eagle.jax.wrap(ks["shift"], partition=True)
    sh = NamedSharding(_mesh(8), P("d"))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        got = jax.jit(lambda x, src: f(x=x, src=src))(jax.device_put(x, sh), jax.device_put(src, sh))
    _bits_equal({"r": got}, {"r": eagle.deploy(ks["shift"]).run(x=x, src=src)}, ["r"])
    text = [str(w.message) for w in said if "runs unsharded" in str(w.message)]
    assert text and "dist_shift" in text[0] and "plane 'x'" in text[0], [str(w.message) for w in said]


def case_integer_outputs_stay_sharded():
    """A Mutable[Index] output beside a float one and an ordered total, under shard_map and partition=True on 4
    and 8 shards: bitwise the one-device run (the integer output int64, sharded like x), and jax.grad of the float
    results bitwise plan.reverse's."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(41)
    part = eagle.jax.wrap(ks["ints"], partition=True)
    for shards, n in ((4, 4 * 2_501), (8, 8 * 1_333)):
        x = rng.uniform(-0.5, 1.5, size=n)
        want = eagle.deploy(ks["ints"]).run(x=x)
        outs = {"bins": P("d"), "y": P("d"), "tot": P()}
        got = _sharded(ks["ints"], _mesh(shards), dict(x=x), dict(x=P("d")), outs)
        _bits_equal(got, want, ["bins", "y", "tot"])
        assert got["bins"].dtype == np.int64 and len(got["bins"].sharding.device_set) == shards
        xs = jax.device_put(x, NamedSharding(_mesh(shards), P("d")))
        _bits_equal(jax.jit(lambda v: part(x=v))(xs), want, ["bins", "y", "tot"])
        cot = dict(y=rng.normal(size=n), tot=np.array([0.3]))
        def loss(v, c=cot):
            r = part(x=v)  # (one call: one adjoint run takes both cotangents, as plan.reverse does)
            return sum((r[k] * w).sum() for k, w in c.items())

        g = jax.jit(jax.grad(loss))(xs)
        _bits_equal({"x": g}, eagle.deploy(ks["ints"]).reverse(cot, x=x), ["x"])


def case_outputs_written_by_key_run_gathered_under_partition():
    """Outputs written by key (positions, not lanes): under plain jit (partition=True) the kernel runs as the
    one-device call over gathered lanes, bitwise Plan.run, with a warning naming the kernel and the plane (inside
    shard_map they run sharded: case_outputs_written_by_key_inside_shard_map)."""
    import warnings

    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(43)
    n = 8 * 1001
    x, key = rng.uniform(-1.0, 1.0, size=n), rng.permutation(n).astype(np.int32)
    key[::7] = -1  # (lanes that write nothing)
    want = eagle.deploy(ks["place"]).run(x=x, key=key)
    f = eagle.jax.wrap(ks["place"], partition=True)
    sh = NamedSharding(_mesh(8), P("d"))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        got = jax.jit(lambda x, key: f(x=x, key=key))(jax.device_put(x, sh), jax.device_put(key, sh))
    _bits_equal(got, want, ["out", "ids", "y", "tot"])
    assert got["ids"].dtype == np.int64
    text = [str(w.message) for w in said if "runs unsharded" in str(w.message)]
    assert text and "dist_place" in text[0] and "plane 'out'" in text[0], [str(w.message) for w in said]
    ct = rng.normal(size=n)  # its gradient: the one-device call's VJP over the gathered lanes, plan.reverse's bits

    def loss(v, k):
        r = f(x=v, key=k)
        return jax.numpy.sum(r["out"] * ct) + 0.5 * r["tot"][0] + jax.numpy.sum(r["y"] * ct)

    g = jax.jit(jax.grad(loss))(jax.device_put(x, sh), jax.device_put(key, sh))
    want = eagle.deploy(ks["place"]).reverse({"out": ct, "tot": np.array([0.5]), "y": ct}, x=x, key=key)
    _bits_equal({"x": g}, want, ["x"])


def case_outputs_written_by_key_inside_shard_map():
    """Outputs written by key inside shard_map: every shard passes the whole array (replicated) and stores into it;
    each position comes from the shard that stored it (a compaction numbered by a scan, whose shards run whole
    blocks; a permutation from an Index plane, -1 storing nothing, float and Index outputs), bitwise Plan.run on 4
    and 8 shards. A key outside the array on one shard fails the call with Plan.run's refusal. The gradient
    (inputs and the array's initial content) is bitwise plan.reverse's on 4 and 8 shards; a position stored on two
    shards refuses it, as one device refuses a position stored twice."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    rng = np.random.default_rng(45)
    n = 8 * 1001
    x = rng.uniform(-1.0, 1.0, size=n)
    z, zi = np.zeros(n), np.zeros(n, np.int64)
    want = eagle.deploy(ks["compact"]).run(x=x, kept=z.copy(), at=zi.copy())
    key = rng.permutation(n).astype(np.int32)
    key[::7] = -1
    start = rng.normal(size=n)
    placed = eagle.deploy(ks["place"]).run(x=x, key=key, out=start.copy(), ids=zi.copy())
    specs = dict(x=P("d"), key=P("d"), out=P(), ids=P())
    outs = {"out": P(), "ids": P(), "y": P("d"), "tot": P()}
    for shards in (4, 8):
        got = _sharded(ks["compact"], _mesh(shards), dict(x=x, kept=z, at=zi), dict(x=P("d"), kept=P(), at=P()),
                       {"kept": P(), "at": P(), "n": P()})
        _bits_equal(got, want, ["kept", "at", "n"])
        got = _sharded(ks["place"], _mesh(shards), dict(x=x, key=key, out=start, ids=zi), specs, outs)
        _bits_equal(got, placed, ["out", "ids", "y", "tot"])
    bad = key.copy()
    bad[5000] = n + 3
    try:
        got = _sharded(ks["place"], _mesh(8), dict(x=x, key=bad, out=start, ids=zi), specs, outs)
        np.asarray(got["tot"])  # (the refusal surfaces when the result is read)
        raise AssertionError("a key outside the array ran")
    except Exception as exc:  # (JAX raises the failed call as its runtime error, carrying eagle's words)
        assert "of kernel 'dist_place'" in str(exc) and "outside its array" in str(exc), exc
    # the gradient: each lane's store reads its position's cotangent; the array's initial content keeps it where
    # no shard stored; the stores counted over every shard (plan.reverse's bits on 4 and 8 shards)
    cto, cty = rng.normal(size=n), rng.normal(size=n)
    want = eagle.deploy(ks["place"]).reverse({"out": cto, "y": cty, "tot": np.array([0.5])}, x=x, key=key,
                                             out=start.copy(), ids=zi.copy())
    f = eagle.jax.wrap(ks["place"], axis_name="d")
    for shards in (4, 8):
        mesh = _mesh(shards)
        g = jax.shard_map(lambda x, k, o, i: (lambda r: (r["out"], r["y"], r["tot"]))(f(x=x, key=k, out=o, ids=i)),
                          mesh=mesh, in_specs=(P("d"), P("d"), P(), P()), out_specs=(P(), P("d"), P()))
        keys = jax.device_put(key, NamedSharding(mesh, P("d")))

        def loss(v, o, keys=keys, g=g):
            a, y, tot = g(v, keys, o, zi)
            return jax.numpy.sum(a * cto) + jax.numpy.sum(y * cty) + 0.5 * tot[0]

        gx, go = jax.jit(jax.grad(loss, argnums=(0, 1)))(jax.device_put(x, NamedSharding(mesh, P("d"))), start)
        _bits_equal({"x": gx, "out": go}, want, ["x", "out"])
    bad = key.copy()  # one position stored by lanes of two shards: refused, as plan.reverse refuses it
    bad[bad == 77] = -1
    bad[10] = bad[5001] = 77
    mesh = _mesh(4)
    g = jax.shard_map(lambda x, k, o, i: f(x=x, key=k, out=o, ids=i)["out"], mesh=mesh,
                      in_specs=(P("d"), P("d"), P(), P()), out_specs=P())
    keys = jax.device_put(bad, NamedSharding(mesh, P("d")))
    try:
        got = jax.jit(jax.grad(lambda x: g(x, keys, start, zi).sum()))(
            jax.device_put(x, NamedSharding(mesh, P("d"))))
        np.asarray(got)
        raise AssertionError("a gradient through a position stored on two shards ran")
    except AssertionError:
        raise
    except Exception as exc:  # (raised from inside the compiled backward, as JAX's runtime error)
        assert "plane 'out' of kernel 'dist_place'" in str(exc) and "(first: position 77, 2 stores)" in str(exc), exc


CASES = {name: fn for name, fn in globals().items() if name.startswith("case_")}


def _process(pid: int, port: int) -> None:
    """One of two JAX processes (jax.distributed, gloo CPU collectives, 2 devices each): a 4-shard run whose
    ordered results must be the one-device bits on both processes."""
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid)
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    np, ks = _setup()
    mesh = jax.make_mesh((4,), ("d",))
    n = 4 * 3001
    rng = np.random.default_rng(10)
    x, key = rng.normal(size=n) * np.exp(rng.normal(size=n) * 8), rng.integers(0, 5, size=n).astype(np.int32)
    sh = NamedSharding(mesh, P("d"))
    xs = jax.make_array_from_callback((n,), sh, lambda idx: x[idx])
    keys = jax.make_array_from_callback((n,), sh, lambda idx: key[idx])
    f = eagle.jax.wrap(ks["sums"], axis_name="d")
    g = jax.jit(jax.shard_map(lambda x, key: f(x=x, key=key), mesh=mesh, in_specs=(P("d"), P("d")), out_specs=P()))
    got = g(xs, keys)
    want = eagle.deploy(ks["sums"]).run(x=x, key=key)
    same = all(np.asarray(got[k].addressable_data(0)).tobytes() == np.asarray(want[k]).tobytes()
               for k in ("acc", "m", "tot"))
    print(f"@@PROCESS@@{pid} {jax.process_count()} {jax.device_count()} {same}", flush=True)
    jax.distributed.shutdown()


def _main():
    if len(sys.argv) > 1:
        _process(int(sys.argv[1]), int(sys.argv[2]))
        return
    report = {}
    for name, fn in CASES.items():
        try:
            fn()
            report[name] = "ok"
        except Exception:  # noqa: BLE001 (reported to the parent test)
            report[name] = traceback.format_exc()
    print("@@REPORT@@" + json.dumps(report))


def _xla_flags(devices: int) -> str:
    """$XLA_FLAGS (scripts/test.sh's among them) with `devices` CPU devices."""
    return f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()


# ---- the tests (run by pytest) --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def report():
    env = dict(os.environ, XLA_FLAGS=_xla_flags(8),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, __file__], capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("@@REPORT@@")), None)
    assert line is not None, r.stdout[-2000:] + r.stderr[-4000:]
    return json.loads(line[len("@@REPORT@@"):])


@pytest.mark.parametrize("case", sorted(CASES))
def test_sharded(report, case):
    assert report[case] == "ok", report[case]


def test_two_jax_processes_under_jax_distributed():
    """The multi-node form on one machine: two processes, jax.distributed.initialize, 2 CPU devices each."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, XLA_FLAGS=_xla_flags(2),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    procs = [subprocess.Popen([sys.executable, __file__, str(pid), str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT) for pid in (0, 1)]
    outs = [p.communicate(timeout=600) for p in procs]
    for pid, (out, err) in enumerate(outs):
        line = next((ln for ln in out.splitlines() if ln.startswith("@@PROCESS@@")), None)
        assert line == f"@@PROCESS@@{pid} 2 4 True", out[-2000:] + err[-3000:]


if __name__ == "__main__":
    _main()
