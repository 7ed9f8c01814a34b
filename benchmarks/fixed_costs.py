"""Fixed costs of a host run, one lane (issue 12's targets: Plan.run < 10 us, a bound launch < 2 us).

    .venv/bin/python -m benchmarks.fixed_costs [--calls 20000] [--json FILE]

Prints the median microseconds per call of: Plan.run (prepared stages reused, and with reuse defeated so every run
prepares afresh), a bound launch, each with the native executor and with the Python pool ($EAGLE_NATIVE=0 in a
child process), and the parts of a reused Plan.run (the run key, the rebound planes, rebinding the stages, the
launch, the foreign call alone). Kernels: `x + 1` (one stage, one output) and `sum(x)` (one cell). A measurement,
not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def _median_us(call, calls: int, rounds: int = 7) -> float:
    call()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(samples)


def measure(calls: int) -> dict:
    import eagle
    from benchmarks import kernels as K
    x = np.ones(1)
    rows: dict[str, float] = {}
    for kernel in (K.tiny_map, K.tiny_sum):
        plan = eagle.deploy(kernel)
        name = kernel.name
        rows[f"{name} Plan.run"] = _median_us(lambda p=plan: p.run(x=x), calls)
        fresh = eagle.deploy(kernel)
        rows[f"{name} Plan.run, prepared afresh"] = _median_us(
            lambda p=fresh: (p._runs.entries.clear(), p.run(x=x)), max(1, calls // 10))
        rows[f"{name} bound launch"] = _median_us(plan.bind(x=x).launch, calls)
        if plan._runs.entries:
            _parts(name, plan._runs, x, calls, rows)
        rows[f"{name} executor"] = plan.last_executor[0]
    return rows


def _parts(name: str, runs, x: np.ndarray, calls: int, rows: dict) -> None:
    """The parts of a reused Plan.run, each timed alone."""
    from eagle.stage import rebind_stages, run_stages

    planes = {"x": x}
    template, stages, _, steps = next(iter(runs.entries.values()))
    b = runs.rebound(template, planes, steps)
    rows[f"{name} part: run key"] = _median_us(lambda: runs.key(None, None, planes), calls)
    rows[f"{name} part: rebound planes"] = _median_us(lambda: runs.rebound(template, planes, steps), calls)
    rows[f"{name} part: rebind stages"] = _median_us(lambda: rebind_stages(stages, b), calls)
    rows[f"{name} part: launch (run_stages)"] = _median_us(lambda: run_stages(stages), calls)
    if stages[0].executor == "native":
        rows[f"{name} part: the foreign call"] = _median_us(stages[0].args.fire, calls)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20000, help="calls per sample (7 samples, the median kept)")
    p.add_argument("--json", default=None, help="also write the rows here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(measure(a.calls)))
        return
    out = {}
    for label, native in (("native", "1"), ("python pool", "0")):
        env = dict(os.environ, EAGLE_NATIVE=native)
        r = subprocess.run([sys.executable, "-m", "benchmarks.fixed_costs", "--child", "--calls", str(a.calls)],
                           env=env, capture_output=True, text=True, check=True)
        out[label] = json.loads(r.stdout.strip().splitlines()[-1])
    keys = list(out["native"])
    print(f"{'one lane, median us per call':<44} {'native':>10} {'python pool':>12}")
    for k in keys:
        v = [out[m].get(k, "") for m in out]
        cells = [f"{c:10.2f}" if isinstance(c, float) else f"{c:>10}" for c in v]
        print(f"{k:<44} {cells[0]} {cells[1]:>12}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
