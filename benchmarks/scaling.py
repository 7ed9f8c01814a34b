"""Weak scaling of sharded hawk kernels on a JAX mesh of 1, 2 and 4 CPU devices (issue #16).

    .venv/bin/python -m benchmarks.scaling [--per-device 1048576] [--repeats 7] [--torch] [--json FILE]

Each device holds `--per-device` lanes; the mesh grows, so the whole run grows with it (weak scaling: ideal is a
flat time). Per device count it times, median of `--repeats` calls of the jitted program: an ordered sum with an
ordered 1024-slot scatter inside `jax.shard_map` (`eagle.jax.wrap(kernel, axis_name="d")`), the same kernel under
plain `jax.jit` with NamedSharding inputs (`partition=True`), a 2-D five-point stencil with halo exchange, and
the one-device call over all the lanes; with `--torch`, also 1, 2 and 4 gloo processes calling
`eagle.torch.wrap(kernel, group=...)`, each on its own lanes. It checks that the sharded ordered results are
bitwise equal to the one-device run and reports, from the compiled HLO, the largest array any collective moves
(partial state only: never a lane input). JAX runs in a child process with
XLA_FLAGS=--xla_force_host_platform_device_count=4 (JAX fixes its device count at start-up). A measurement, not a
test: nothing here asserts a time. On this 2-core machine 4 devices share 2 cores, so expect the 4-device time
to rise.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

DEVICES = (1, 2, 4)
NC = 256  # stencil columns


def _median_s(call, repeats: int) -> float:
    call()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def _kernels():
    import hawk
    import hawk.math as hm
    from hawk import Grid, Index, Mutable, Param, Scalar

    @hawk.kernel
    def scale_sums(x: Scalar, key: Index, acc: Mutable["slot":1024], tot: Mutable[Scalar]):
        hawk.scatter(acc, policy="ordered")[key] += x
        tot = hawk.sum(x, policy="ordered")

    @hawk.kernel
    def scale_heat(lane: Grid["row", "col":NC], u: Scalar, k: Param, out: Mutable[Scalar], tot: Mutable[Scalar]):
        i, j = lane.row, lane.col
        if hm.land(hm.land(i > 0, j > 0), j < NC - 1):
            v = u + k * (u.at(row=i - 1, col=j) + u.at(row=i + 1, col=j) + u.at(row=i, col=j - 1)
                         + u.at(row=i, col=j + 1) - 4.0 * u)
        else:
            v = u
        out = v
        tot = hawk.sum(v, policy="ordered")

    return scale_sums, scale_heat


def _largest_collective(hlo: str) -> int:
    """Elements of the largest array an all-gather, all-reduce or collective-permute moves in this HLO."""
    most = 0
    for line in hlo.splitlines():
        if re.search(r"(all-gather|all-reduce|collective-permute)(-start)?\(", line):
            for dims in re.findall(r"[a-z]\d+\[([\d,]*)\]", line.split("=", 1)[1].split("(", 1)[0]):
                most = max(most, int(np.prod([int(d) for d in dims.split(",") if d] or [1])))
    return most


def measure(per_device: int, repeats: int) -> list[dict]:
    import jax

    jax.config.update("jax_enable_x64", True)
    kernels = _kernels()
    return [_one_mesh(d, per_device, repeats, kernels) for d in DEVICES if d <= jax.device_count()]


def _one_mesh(d: int, per_device: int, repeats: int, kernels) -> dict:
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle
    import eagle.jax

    sums, heat = kernels
    rng = np.random.default_rng(d)
    mesh = jax.make_mesh((d,), ("d",), devices=jax.devices()[:d])
    sh = NamedSharding(mesh, P("d"))
    n = d * per_device
    x = rng.normal(size=n)
    key = rng.integers(0, 1024, size=n).astype(np.int32)
    u = rng.normal(size=(n // NC, NC))
    xs, keys, us = jax.device_put(x, sh), jax.device_put(key, sh), jax.device_put(u, sh)
    f = eagle.jax.wrap(sums, axis_name="d")
    g = jax.jit(jax.shard_map(lambda x, key: f(x=x, key=key), mesh=mesh, in_specs=(P("d"), P("d")), out_specs=P()))
    fp = eagle.jax.wrap(sums, partition=True)
    gp = jax.jit(lambda x, key: fp(x=x, key=key))
    h = eagle.jax.wrap(heat, axis_name="d")
    gh = jax.jit(jax.shard_map(lambda u: h(u=u, k=0.1), mesh=mesh, in_specs=(P("d"),),
                               out_specs={"out": P("d"), "tot": P()}))
    one = eagle.jax.wrap(sums)
    g1 = jax.jit(lambda x, key: one(x=x, key=key))
    same = True
    for got, want in ((g(xs, keys), eagle.deploy(sums).run(x=x, key=key)),
                      (gp(xs, keys), eagle.deploy(sums).run(x=x, key=key)),
                      (gh(us), eagle.deploy(heat).run(u=u, k=0.1))):
        same &= all(np.asarray(got[k]).tobytes() == np.asarray(want[k]).tobytes() for k in want)
    return {
        "devices": d, "lanes": n,
        "shard_map ordered sum+scatter s": _median_s(lambda: jax.block_until_ready(g(xs, keys)), repeats),
        "jit NamedSharding (partition=True) s": _median_s(lambda: jax.block_until_ready(gp(xs, keys)), repeats),
        "shard_map stencil with halos s": _median_s(lambda: jax.block_until_ready(gh(us)), repeats),
        "one device, all lanes s": _median_s(lambda: jax.block_until_ready(g1(x, key)), repeats),
        "bitwise equal to one device": bool(same),
        "largest collective (elements)": _largest_collective(gp.lower(xs, keys).compile().as_text()),
    }


def _torch_rank(rank: int, ranks: int, port: int, per_device: int, repeats: int, out: str) -> None:
    """One gloo rank of the torch weak-scaling run: its own `per_device` lanes, the group combining."""
    import torch
    import torch.distributed as dist

    import eagle
    import eagle.torch

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks)
    sums, _ = _kernels()
    rng = np.random.default_rng(rank)
    x = torch.from_numpy(rng.normal(size=per_device))
    key = torch.from_numpy(rng.integers(0, 1024, size=per_device).astype(np.int32))
    f = eagle.torch.wrap(sums, group=dist.group.WORLD)

    def call():
        dist.barrier()
        f(x=x, key=key)

    t = _median_s(call, repeats)
    if rank == 0:
        parts = [torch.empty_like(x) for _ in range(ranks)]
        dist.all_gather(parts, x)
    else:
        dist.all_gather([torch.empty_like(x) for _ in range(ranks)], x)
    got = f(x=x, key=key)
    if rank == 0:
        whole = torch.cat(parts).numpy()
        keys = [torch.empty_like(key) for _ in range(ranks)]
        dist.all_gather(keys, key)
        want = eagle.deploy(sums).run(x=whole, key=torch.cat(keys).numpy())
        same = all(got[k].numpy().tobytes() == np.asarray(want[k]).tobytes() for k in want)
        with open(out, "w") as fh:
            json.dump({"s": t, "same": bool(same)}, fh)
    else:
        dist.all_gather([torch.empty_like(key) for _ in range(ranks)], key)
    dist.destroy_process_group()


def measure_torch(per_device: int, repeats: int) -> dict:
    """Per rank count (1, 2, 4 gloo processes): the median seconds of one sharded call, and the bitwise check."""
    import socket
    import tempfile

    import torch.multiprocessing as mp

    rows = {}
    for ranks in DEVICES:
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            port = sk.getsockname()[1]
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.json")
            mp.spawn(_torch_rank, args=(ranks, port, per_device, repeats, out), nprocs=ranks, join=True)
            with open(out) as fh:
                rows[ranks] = json.load(fh)
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--per-device", type=int, default=1 << 20, help="lanes per device")
    p.add_argument("--repeats", type=int, default=7, help="timed calls per case (the median kept)")
    p.add_argument("--json", default=None, help="also write the rows here")
    p.add_argument("--torch", action="store_true", help="also run 1, 2 and 4 gloo processes (eagle.torch, group=)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(measure(a.per_device, a.repeats)))
        return
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    r = subprocess.run([sys.executable, "-m", "benchmarks.scaling", "--child", "--per-device", str(a.per_device),
                        "--repeats", str(a.repeats)], env=env, capture_output=True, text=True, check=True)
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    keys = [k for k in rows[0] if k not in ("devices", "lanes")]
    print(f"weak scaling, {a.per_device} lanes per device; times in ms (median of {a.repeats})")
    print(f"{'':<40}" + "".join(f"{str(r['devices']) + ' device(s)':>14}" for r in rows))
    for k in keys:
        cells = [r[k] for r in rows]
        label = k[:-2] + " (ms)" if k.endswith(" s") else k
        print(f"{label:<40}" + "".join(f"{c * 1e3:14.2f}" if isinstance(c, float) else f"{c!s:>14}"
                                       for c in cells))
    if a.torch:
        got = measure_torch(a.per_device, a.repeats)
        print(f"{'torch gloo, ordered sum+scatter (ms)':<40}" + "".join(f"{got[d]['s'] * 1e3:14.2f}" for d in got))
        print(f"{'torch: bitwise equal to one process':<40}" + "".join(f"{got[d]['same']!s:>14}" for d in got))
        for r in rows:
            r["torch gloo s"], r["torch bitwise equal"] = got[r["devices"]]["s"], got[r["devices"]]["same"]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
