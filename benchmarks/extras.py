"""What the suite measures besides throughput: per-call overhead on one lane, cold compile and warm start in a
fresh process, and the memory a run allocates against the size of its inputs."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np

import eagle
from benchmarks import kernels as K
from benchmarks.data import Data
from benchmarks.ops import OPS
from benchmarks.timing import measure

ROOT = Path(__file__).resolve().parent.parent


# ---- per-call overhead on one lane ------------------------------------------------------------------------
def overhead(peers: dict, repeats: int, ours: bool = True) -> dict:
    """Median microseconds per call on a 1-lane input: hawk Plan.run and a bound launch (a map and a sum kernel),
    eagle.reduce (with `ours`), NumPy's call (with `ours` or when numpy is in `peers`) and each other peer's
    cheapest call on one element. The isolated mode asks for hawk and each peer in separate processes."""
    x = np.ones(1, dtype=np.float64)
    rows: dict[str, dict] = {}

    def add(name, kind, call):
        t = measure(call, repeats, 0.02)
        rows[name] = {"kind": kind, "us": t.median_s * 1e6}

    if ours:
        mp, sp = eagle.deploy(K.tiny_map), eagle.deploy(K.tiny_sum)
        add("hawk Plan.run (map: x + 1)", "ours", lambda: mp.run(x=x))
        add("hawk bound launch (map: x + 1)", "ours", mp.bind(x=x).launch)
        add("hawk Plan.run (sum)", "ours", lambda: sp.run(x=x))
        add("hawk bound launch (sum)", "ours", sp.bind(x=x).launch)
        add("eagle.reduce(...).launch() (auto)", "ours", eagle.reduce(x, np.zeros(1), policy="auto").launch)
    o = np.zeros(1)
    if ours or "numpy" in peers:
        add("numpy np.add(out=)", "peer", lambda: np.add(x, 1.0, out=o))
    if "numba" in peers:
        import numba

        @numba.njit(cache=True)
        def plus_one(a, out):
            out[0] = a[0] + 1.0
            return out

        add("numba @njit call", "peer", lambda: plus_one(x, o))
    if "torch" in peers:
        import torch

        tx, to = torch.from_numpy(x), torch.zeros(1, dtype=torch.float64)
        add("torch.add(out=)", "peer", lambda: torch.add(tx, 1.0, out=to))
    if "jax" in peers:
        import jax
        import jax.numpy as jnp

        f, jx = jax.jit(lambda a: a + 1.0), jnp.asarray(x)
        add("jax.jit call + block_until_ready", "peer", lambda: f(jx).block_until_ready())
    if "warp" in peers:
        import warp as wp

        from benchmarks.peers import warp_peer

        wx, wo = wp.array(x, device="cpu"), wp.zeros(1, dtype=wp.float64, device="cpu")
        k = warp_peer._K["subtract_mean"]
        add("wp.launch (1 thread)", "peer", lambda: wp.launch(k, dim=1, inputs=[wx, wx, wo], device="cpu"))
    return rows


# ---- cold compile and warm start --------------------------------------------------------------------------
def _startup(cache: str, pycache: str, *args: str) -> dict:
    env = dict(os.environ, HAWK_CACHE_DIR=cache, PYTHONPYCACHEPREFIX=pycache,
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # (an installed package has its bytecode: see benchmarks/startup.py)
    r = subprocess.run([sys.executable, "-m", "benchmarks.startup", *args], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"startup probe failed: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def startup(runs: int) -> dict:
    """Fresh processes, `runs` of each: once per machine (an empty HAWK_CACHE_DIR and bytecode folder: eagle's
    native runtime built, the bytecode written, another kernel compiled), then a cold compile of the small kernel
    (the same folders) and a warm start (the same again: the kernel from the disk cache)."""
    first, cold, warm = [], [], []
    for _ in range(max(1, runs)):
        with tempfile.TemporaryDirectory(prefix="hawk-bench-cache-") as d, \
                tempfile.TemporaryDirectory(prefix="hawk-bench-pycache-") as p:
            first.append(_startup(d, p, "--prime"))
            cold.append(_startup(d, p))
            warm.append(_startup(d, p))
    med = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
    return {
        "runs": len(cold),
        "first_use_ms": med(first, "prime_s") * 1e3,
        "cold_first_result_ms": med(cold, "first_result_s") * 1e3,
        "warm_first_result_ms": med(warm, "first_result_s") * 1e3,
        "cold_large_result_ms": med(cold, "large_first_result_s") * 1e3,
        "warm_large_result_ms": med(warm, "large_first_result_s") * 1e3,
        "import_ms": med(cold + warm, "import_s") * 1e3,
        "second_plan_same_process_ms": med(cold + warm, "next_plan_s") * 1e3,
        "bytecode": all(r["bytecode"] for r in first + cold + warm),
        "ok": all(r["ok"] for r in first + cold + warm),
    }


# ---- memory -----------------------------------------------------------------------------------------------
def _peak_bytes(fn) -> int:
    """Peak bytes traced (Python and NumPy allocations) while fn() runs, above what was held before."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn()
        return max(0, tracemalloc.get_traced_memory()[1] - base)
    finally:
        tracemalloc.stop()


MEMORY_CASES = (("sum", "hawk auto"), ("sum", "hawk compensated"), ("sum", "hawk ordered"), ("mean", "hawk"),
                ("row_sum", "hawk"), ("scatter_random", "hawk auto"), ("scatter_random", "hawk ordered"),
                ("histogram", "hawk auto"), ("stencil", "hawk"), ("centre", "hawk"))
_INPUTS = {"sum": ("x",), "mean": ("x",), "row_sum": ("u",), "scatter_random": ("keys", "x"), "histogram": ("t",),
           "stencil": ("u",), "centre": ("x",)}


def memory(n: int, dtype=np.float64) -> dict:
    """Peak allocation of one run against its inputs: Plan.run (allocates its outputs), a bound launch (should
    allocate nothing) and NumPy's call for the same operation."""
    from benchmarks.peers import numpy_peer

    d = Data(dtype, n)
    ops = {op.name: op for op in OPS}
    rows = {}
    for op_name, variant in MEMORY_CASES:
        op = ops[op_name]
        impl = op.ours(d)[variant]
        bound, plan, given = impl.call, impl.plan, impl.planes
        plan.run(**given)
        bound()
        out = np.asarray(bound())
        npy = next(iter(numpy_peer.impls(op_name, d).values())).call
        npy()
        inputs = sum(getattr(d, a).nbytes for a in _INPUTS[op_name])
        rows[f"{op_name} / {variant}"] = {
            "input_bytes": inputs,
            "output_bytes": int(out.nbytes),
            "plan_run_peak_bytes": _peak_bytes(lambda p=plan, g=given: p.run(**g)),
            "bound_launch_peak_bytes": _peak_bytes(bound),
            "numpy_peak_bytes": _peak_bytes(npy),
        }
    return {"n": n, "dtype": np.dtype(dtype).name, "cases": rows}
