"""Per-call overhead of an eagle.torch operator on a one-lane kernel (issue #15's target: < 10 us over an empty
custom op).

    .venv/bin/python -m benchmarks.torch_overhead [--calls 5000] [--rounds 15] [--clock cpu|wall] [--json FILE]

Times, per call, on a 1-lane float64 tensor: an empty `torch.library` custom op (it only allocates its output, as
any op must), the same with an autograd registration (eagle's op has one: its backward is the reverse), the
wrapped kernel `f(x=x)`, its op called directly (`f.op(x)`), and, for scale, `Plan.run` and a bound launch on a
NumPy array. Kernels: `x + 1` (one per-lane output) and `sum(x)` (one cell). Each round times every
implementation once (`--calls` calls each), in an order rotated by one per round, so slow changes of the machine's
load fall on every implementation alike. The clock is the process's CPU time by default (on a shared, busy
machine the time spent waiting for a core is not the call's), `--clock wall` for elapsed time. The table gives
the median over rounds, the overhead over the empty op (the median over rounds of the per-round difference) and
the ratio to it. Every eagle result is checked against
`x + 1` / `sum(x)` first. A measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
import torch

import eagle
import eagle.torch
from benchmarks import kernels as K
from benchmarks.timing import CLOCKS, add_per_call_options, per_call_overheads, print_per_call

TARGET_US = 10.0


@torch.library.custom_op("eagle_bench::empty", mutates_args=())
def _empty(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op("eagle_bench::empty_grad", mutates_args=())
def _empty_grad(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


_empty.register_fake(lambda x: torch.empty_like(x))
_empty_grad.register_fake(lambda x: torch.empty_like(x))
_empty_grad.register_autograd(lambda ctx, g: g)


def implementations(kernel) -> dict:
    """name -> a no-argument call; each eagle call is checked once against NumPy before it is timed."""
    x = torch.ones(1, dtype=torch.float64)
    xn = np.ones(1)
    f = eagle.torch.wrap(kernel)
    plan = eagle.deploy(kernel)
    bound = plan.bind(x=xn)
    want = np.asarray(plan.run(x=xn)).reshape(-1)
    assert want.tolist() == ([2.0] if kernel is K.tiny_map else [1.0])
    for got in (f(x=x), f.op(x)):
        assert got.numpy().reshape(-1).tobytes() == want.tobytes(), kernel.name
    return {
        "empty custom op": lambda: _empty(x),
        "empty custom op + autograd": lambda: _empty_grad(x),
        "eagle.torch f(x=x)": lambda: f(x=x),
        "eagle.torch f.op(x)": lambda: f.op(x),
        "Plan.run (NumPy)": lambda: plan.run(x=xn),
        "bound launch (NumPy)": bound.launch,
    }


def measure(kernel, calls: int, rounds: int, clock: str = "wall") -> dict:
    return per_call_overheads(implementations(kernel), "empty custom op", calls, rounds, CLOCKS[clock])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_per_call_options(p, 5000)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    out = {"load_before": os.getloadavg()[0], "cores": os.cpu_count(), "clock": a.clock, "kernels": {}}
    for kernel in (K.tiny_map, K.tiny_sum):
        out["kernels"][kernel.name] = rows = measure(kernel, a.calls, a.rounds, a.clock)
        print_per_call(f"{kernel.name}, one lane, float64: median over {a.rounds} rounds of {a.calls} calls "
                       f"({a.clock} time)", rows, "empty op")
    out["load_after"] = os.getloadavg()[0]
    over = max(r["eagle.torch f(x=x)"]["over_us"] for r in out["kernels"].values())
    print(f"\nf(x=x) over an empty custom op: {over:.2f} us (target < {TARGET_US:.0f} us); load average "
          f"{out['load_before']:.1f} -> {out['load_after']:.1f} on {out['cores']} cores")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
