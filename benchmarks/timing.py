"""Timing implementations: warm up, check, calibrate the calls per sample, take samples, check again.

A case's implementations are sampled in rounds (one sample of each, in a rotating order, per round), so that other
work on the shared machine, which comes and goes over seconds, falls on all of them alike rather than on whichever
happened to be timed at that moment.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Timing:
    median_s: float = math.nan
    min_s: float = math.nan
    samples_s: list[float] = field(default_factory=list)
    number: int = 0  # calls per sample
    first_call_s: float = math.nan  # the first call: includes JIT compiles (hawk, JAX, Numba, Warp)


class Runner:
    """One implementation under test: `prepare()`, then `sample()` as often as wanted, then `finish()`."""

    def __init__(self, call, check=None):
        self.call, self.check = call, check
        self.t = Timing()
        self.value = None

    def prepare(self, min_time: float) -> None:
        """Two warm-up calls (the first compiles where a peer compiles lazily); the first one's output is checked.
        Each later sample runs the call `number` times, enough to last about `min_time`."""
        t0 = time.perf_counter()
        value = self.call()
        self.t.first_call_s = time.perf_counter() - t0
        if self.check is not None:
            self.check(value)
        t0 = time.perf_counter()
        self.call()
        one = max(time.perf_counter() - t0, 1e-7)
        self.t.number = max(1, min(100_000, int(min_time / one)))

    def sample(self) -> None:
        call, number = self.call, self.t.number
        t0 = time.perf_counter()
        for _ in range(number):
            value = call()
        self.t.samples_s.append((time.perf_counter() - t0) / number)
        self.value = value

    def finish(self) -> Timing:
        """Check the last timed call's output too (a reused buffer that is not reset fails here); the statistics."""
        if self.check is not None and self.value is not None:
            self.check(self.value)
        self.t.median_s = float(np.median(self.t.samples_s))
        self.t.min_s = float(np.min(self.t.samples_s))
        return self.t


def measure(call, repeats: int, min_time: float, check=None) -> Timing:
    """Median seconds per call of `call()` on its own (see Runner)."""
    r = Runner(call, check)
    r.prepare(min_time)
    for _ in range(max(1, repeats)):
        r.sample()
    return r.finish()


def rounds(names: list, repeats: int):
    """The order of samples: `repeats` rounds of every name, the starting point rotating by round."""
    for k in range(max(1, repeats)):
        for i in range(len(names)):
            yield names[(i + k) % len(names)]


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}  # the per-call benchmarks' --clock


def add_per_call_options(p, calls: int) -> None:
    """The per-call benchmarks' options (benchmarks/torch_overhead.py, jax_overhead.py): --calls (default `calls`),
    --rounds, --clock, --json."""
    p.add_argument("--calls", type=int, default=calls, help="calls per implementation per round")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                   help="cpu: the process's CPU time (all its threads; time a busy machine gives other processes "
                        "does not count); wall: elapsed time")
    p.add_argument("--json", default=None, help="also write the rows here")


def print_per_call(title: str, rows: dict, base: str) -> None:
    """per_call_overheads' rows as a table: us a call, the excess over `base` (words for the header) and the ratio."""
    width = max(len(n) for n in rows) + 2
    print(f"\n{title}")
    print(f"{'':<{width}} {'us/call':>9} {'over ' + base:>{len(base) + 6}} {'/ ' + base:>{len(base) + 3}}")
    for n, r in rows.items():
        print(f"{n:<{width}} {r['median_us']:9.2f} {r['over_us']:{len(base) + 6}.2f} {r['ratio']:{len(base) + 3}.2f}")


def per_call_overheads(impls: dict, base: str, calls: int, repeats: int, clock) -> dict:
    """Per-call cost of each no-argument call in `impls`, in microseconds by `clock` (a seconds counter), from
    `repeats` rounds in which every call runs `calls` times (order rotating by round: `rounds`), after a warm-up:
    {name: median us, the median over rounds of its excess over `base`'s, the median ratio to it}."""
    def timed(call, n: int) -> float:
        t0 = clock()
        for _ in range(n):
            call()
        return (clock() - t0) / n * 1e6

    for call in impls.values():
        timed(call, max(1, calls // 10))
    samples: dict[str, list[float]] = {n: [] for n in impls}
    for n in rounds(list(impls), repeats):
        samples[n].append(timed(impls[n], calls))
    ref = samples[base]
    return {n: {"median_us": statistics.median(s),
                "over_us": statistics.median(a - b for a, b in zip(s, ref, strict=True)),
                "ratio": statistics.median(a / b for a, b in zip(s, ref, strict=True))} for n, s in samples.items()}
