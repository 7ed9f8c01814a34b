"""The other doors into a deployed kernel: a bound launch that reuses its buffers, and the step loops
(`simulate`, `until_done`) that carry state from one step to the next.

A bound launch validates and allocates once; `launch()` then costs one foreign call per stage plus the resets
of what must start fresh (cells, sinks the caller did not pass). Inputs are read from the arrays bound (or
private copies, when a plane needed converting), so changing a bound input array in place between launches
is seen by the next launch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from eagle.errors import InputError


def single_stage_only(kernel: str, stages: int, door: str) -> InputError:
    return InputError(f"'{kernel}' runs in {stages} stages; {door} runs single-stage kernels in this release. "
                      "Use a plain kernel per step there.")


class BoundLaunch:
    """`plan.bind(**planes)`: a launch with its buffers allocated once. `launch()` returns the results."""

    def __init__(self, plan, planes: dict, base: int | None = None, count: int | None = None):
        self.plan = plan
        self.bound = plan.binder.bind(planes)
        n = plan.kernel.stage_count
        lo, hi = plan.lane_range(base, count, self.bound.lanes, n)
        self.stages = []
        cuts: dict = {}
        results: dict = {}
        if plan.device is not None:
            for k in range(n):  # compile every stage before asking for the runtime, as run() does
                plan.prepare(self.bound.spec, k)
        for k in range(n):
            if plan.device is not None:
                from eagle.targets.device import DeviceStage

                finish, launcher, binary, entry = plan.prepare(self.bound.spec, k)
                prepared = DeviceStage(launcher, binary, entry, plan.runtime(), finish, self.bound, lo, hi, cuts)
            else:
                lib, launcher = plan.prepare(self.bound.spec, k)
                prepared = launcher.prepare(lib, self.bound, lo, hi, cuts)
            cuts.update(prepared.cells_out)
            results.update(prepared.results)
            self.stages.append(prepared)
        self.results = results[next(iter(results))] if len(results) == 1 else {k: results[k] for k in sorted(results)}

    @property
    def inputs(self) -> dict[str, np.ndarray]:
        """The input buffers this launch reads (flat, C-contiguous): write into them to change the next step."""
        return self.bound.arrays

    def launch(self):
        for st in self.stages:
            st.fire()
        return self.results

    __call__ = launch

    def __repr__(self) -> str:
        return f"<eagle.BoundLaunch {self.plan.kernel.name} lanes={self.bound.lanes} stages={len(self.stages)}>"


def _carry_pairs(plan, carry: Mapping[str, str]) -> list[tuple[str, str]]:
    sig = plan.kernel.signature
    pairs = []
    for out, inp in carry.items():
        o, i = sig.get(out) if out != "result" else None, sig.get(inp)
        if out != "result" and (o is None or o.kind != "output"):
            raise InputError(f"kernel '{plan.kernel.name}': carry={{{out!r}: {inp!r}}}: '{out}' is not an output")
        if out != "result" and plan.kernel.outputs.get(out) == "cell":
            raise InputError(f"kernel '{plan.kernel.name}': carry={{{out!r}: {inp!r}}}: '{out}' is a cell (one value "
                             "for the run), not a per-lane plane; carry per-lane outputs into per-lane inputs")
        if i is None or i.kind not in ("lane", "index"):
            raise InputError(f"kernel '{plan.kernel.name}': carry={{{out!r}: {inp!r}}}: '{inp}' is not a per-lane "
                             "input plane")
        pairs.append((out, inp))
    return pairs


def _step_loop(plan, door: str, planes: dict, carry: Mapping[str, str], steps: int,
               done: Callable | str | None):
    n = plan.kernel.stage_count
    if n > 1:
        raise single_stage_only(plan.kernel.name, n, door)
    pairs = _carry_pairs(plan, carry)
    # the caller's inputs are never written: the state carried between steps lives in private copies
    planes = {k: (np.array(v, copy=True) if k in {i for _, i in pairs} else v) for k, v in planes.items()}
    bound = BoundLaunch(plan, planes)
    results = bound.results
    named = results if isinstance(results, dict) else {next(iter(bound.stages[0].results)): results}
    for step in range(1, steps + 1):
        bound.launch()
        if done is not None and _is_done(done, results, named):
            return results, step, True
        for out, inp in pairs:
            np.copyto(bound.inputs[inp], np.asarray(named[out]).reshape(-1))
    return results, steps, False


def _is_done(done, results, named) -> bool:
    if callable(done):
        return bool(done(results))
    if done not in named:
        raise InputError(f"until_done(done={done!r}): the kernel has no output named {done!r}")
    return bool(np.asarray(named[done]).reshape(-1)[0])


def simulate(plan, steps: int, carry: Mapping[str, str] | None = None, **planes):
    """Step the kernel `steps` times; after each step every `carry` output is copied into its input plane.

    Returns the results of the last step (as `run` does). The caller's arrays are not modified.
    """
    if steps < 1:
        raise InputError(f"kernel '{plan.kernel.name}': simulate needs steps >= 1, got {steps}")
    return _step_loop(plan, "simulate", planes, carry or {}, steps, None)[0]


def until_done(plan, done: Callable | str, carry: Mapping[str, str] | None = None, max_steps: int = 10_000,
               **planes):
    """Step the kernel until `done` holds: a callable given the step's results, or the name of a scalar cell
    whose value is nonzero. Returns (results, steps taken); raises if max_steps pass first."""
    results, taken, finished = _step_loop(plan, "until_done", planes, carry or {}, max_steps, done)
    if not finished:
        raise InputError(f"kernel '{plan.kernel.name}': until_done did not finish within max_steps={max_steps}")
    return results, taken
