"""End to end: one computation written in JAX or PyTorch alone, and the same with a hawk kernel inside through
eagle's bridge, on the host at 1e6 and 1e7 lanes.

    .venv/bin/python -m benchmarks.end_to_end [--sizes 1000000,10000000] [--rounds 5] [--repeats 7] [--json F]

The computation: a = 1.5 * u + 0.25 (the framework), y = a * w, centred by its ordered total (the hawk kernel
`e2e_center`, two stages: a total then a per-lane output), then mean(r * r) (the framework). "native" writes the
middle in the framework too (jax.numpy under `jax.jit`; torch eager). "bridge" calls `eagle.jax.wrap` inside the
jitted function (an XLA FFI call) or `eagle.torch.wrap` (a torch.library op). Every measurement is its own fresh
process (`--worker`), one at a time, so no framework's thread pool outlives its own runs (as
benchmarks/isolated.py); rounds interleave the implementations with a rotating start and each figure is the
median over rounds of a worker's median sample. Each worker checks its result against NumPy in float64 first.
Wall-clock seconds per call are reported, with CPU seconds per call beside them (all threads together), since
the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MARK = "E2E_RESULT "
IMPLS = ("jax_native", "jax_bridge", "torch_native", "torch_bridge")


def inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(20261201)
    return rng.standard_normal(n), rng.uniform(0.5, 1.5, n)


def reference(u: np.ndarray, w: np.ndarray) -> float:
    y = (1.5 * u + 0.25) * w
    r = y - y.sum() / y.size
    return float(np.mean(r * r))


def kernel():
    import hawk
    from hawk import Param, Scalar

    @hawk.kernel
    def e2e_center(a: Scalar, w: Scalar, inv_n: Param) -> Scalar:
        y = a * w
        return y - hawk.sum(y, policy="ordered") * inv_n

    return e2e_center


def build(impl: str, n: int, u: np.ndarray, w: np.ndarray):
    """A zero-argument callable running the computation once, returning a Python float."""
    if impl.startswith("jax"):
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        ju, jw = jnp.asarray(u), jnp.asarray(w)
        if impl == "jax_native":
            def f(u, w):
                y = (1.5 * u + 0.25) * w
                r = y - jnp.sum(y) / n
                return jnp.mean(r * r)
        else:
            import eagle.jax

            center = eagle.jax.wrap(kernel())

            def f(u, w):
                r = center(a=1.5 * u + 0.25, w=w, inv_n=1.0 / n)
                return jnp.mean(r * r)
        g = jax.jit(f)
        return lambda: float(g(ju, jw).block_until_ready())
    import torch

    tu, tw = torch.from_numpy(u), torch.from_numpy(w)
    if impl == "torch_native":
        def run():
            y = (1.5 * tu + 0.25) * tw
            r = y - y.sum() / n
            return float((r * r).mean())
        return run
    import eagle.torch

    center = eagle.torch.wrap(kernel())

    def run():
        r = center(a=1.5 * tu + 0.25, w=tw, inv_n=1.0 / n)
        return float((r * r).mean())
    return run


def worker(impl: str, n: int, repeats: int) -> dict:
    u, w = inputs(n)
    run = build(impl, n, u, w)
    got, want = run(), reference(u, w)
    if not abs(got - want) <= 1e-9 * abs(want):
        raise SystemExit(f"{impl} at {n}: {got!r}, NumPy says {want!r}")
    run()
    walls, cpus = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        run()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return {"impl": impl, "n": n, "wall": statistics.median(walls), "cpu": statistics.median(cpus)}


def call(impl: str, n: int, repeats: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "benchmarks.end_to_end", "--worker", impl, "--size", str(n),
                        "--repeats", str(repeats)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith(MARK)]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"{impl} at {n}: {(r.stderr.strip() or r.stdout.strip())[-600:]}")
    return json.loads(lines[-1][len(MARK):])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000000,10000000")
    p.add_argument("--impls", default=",".join(IMPLS))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--json")
    p.add_argument("--worker")
    p.add_argument("--size", type=int)
    a = p.parse_args(argv)
    if a.worker:
        print(MARK + json.dumps(worker(a.worker, a.size, a.repeats)), flush=True)
        return 0
    impls = a.impls.split(",")
    rows = []
    for n in (int(s) for s in a.sizes.split(",")):
        seen: dict[str, list[dict]] = {i: [] for i in impls}
        for k in range(a.rounds):
            for impl in impls[k % len(impls):] + impls[:k % len(impls)]:
                seen[impl].append(call(impl, n, a.repeats))
        for impl in impls:
            wall = statistics.median(r["wall"] for r in seen[impl])
            cpu = statistics.median(r["cpu"] for r in seen[impl])
            rows.append({"n": n, "impl": impl, "wall_ms": 1e3 * wall, "cpu_ms": 1e3 * cpu})
    print(f"{'lanes':>10} {'implementation':14} {'wall ms':>9} {'cpu ms':>9}  bridge / native (wall)")
    for r in rows:
        base = next((x for x in rows if x["n"] == r["n"] and x["impl"] == r["impl"].split("_")[0] + "_native"),
                    None)
        ratio = f"{r['wall_ms'] / base['wall_ms']:.2f}" if base and r["impl"].endswith("bridge") else ""
        print(f"{r['n']:>10} {r['impl']:14} {r['wall_ms']:9.2f} {r['cpu_ms']:9.2f}  {ratio}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
