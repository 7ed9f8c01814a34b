"""The other doors into a deployed kernel: a bound launch that reuses its buffers, and the step loops
(`simulate`, `until_done`) that carry state from one step to the next.

A bound launch validates and allocates once; `launch()` then costs one foreign call per stage plus the resets
of what must start fresh (cells, sinks the caller did not pass). Inputs are read from the arrays bound (or
private copies, when a plane needed converting), so changing a bound input array in place between launches
is seen by the next launch.

Nothing lost: a launch that refuses (a key found out of range as it runs) leaves the caller's arrays as they
were (eagle.stage.run_stages), and a step loop that refuses, at any step or for running out of steps, leaves
every array the caller passed as it was: its sinks and outputs are written only when the loop succeeds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from eagle.errors import InputError
from eagle.settings import is_whole
from eagle.stage import launched_alone, run_stages


def single_stage_only(kernel: str, stages: int, door: str) -> InputError:
    return InputError(f"'{kernel}' runs in {stages} stages; {door} runs single-stage kernels in this release. "
                      "Use a plain kernel per step there.")


class BoundLaunch:
    """`plan.bind(**planes)`: a launch with its buffers allocated once. `launch()` returns the results."""

    def __init__(self, plan, planes: dict, base: int | None = None, count: int | None = None,
                 keep_initial: bool = True):
        self.plan, self.planes = plan, planes
        if getattr(plan, "device", None) is not None:  # a GPU target: device arrays bound where they lie
            from eagle.targets import device_planes

            self.bound = device_planes.bind(plan, planes)
        else:
            self.bound = plan.binder.bind(planes)
        lo, hi = plan.lane_range(base, count, self.bound.lanes, plan.kernel.stage_count)
        self.lane_span = (lo, hi)  # the reverse refuses a range (eagle/reverse.py)
        self.stages, results = plan.stages(self.bound, lo, hi)
        self.results = results[next(iter(results))] if len(results) == 1 else {k: results[k] for k in sorted(results)}
        # passed outputs whose initial contents the body reads: a launch writes them, and the reverse needs what
        # the last launch started from (or, before any launch, what the next starts from): kept in copies
        reads = plan.kernel.initial_reads() if keep_initial else ()
        self.initial = {n: np.array(planes[n], copy=True) for n in sorted(reads)
                        if isinstance(planes.get(n), np.ndarray)}
        self._direct = None if self.initial else launched_alone(self.stages)

    @property
    def chunks(self) -> tuple[int, ...]:
        """The chunks each stage runs per launch (host: chunks handed to threads; GPU: sets of partials)."""
        return tuple(st.nchunks for st in self.stages)

    @property
    def inputs(self) -> dict[str, np.ndarray]:
        """The input buffers this launch reads (flat, C-contiguous): write into them to change the next step."""
        return self.bound.arrays

    def launch(self):
        """Run every stage; the caller's arrays get the results only once every stage has succeeded."""
        st = self._direct
        if st is not None:  # Prepared.launch and commit of a stage with nothing to save first or commit after
            st.fire_native()
            return self.results
        for n, kept in self.initial.items():
            np.copyto(kept, self.planes[n])
        run_stages(self.stages)
        return self.results

    __call__ = launch

    def reverse(self, cotangent, wrt=None) -> dict:
        """Gradients for the bound planes, the adjoint's buffers bound once (the reverse: eagle/reverse.py)."""
        from eagle.reverse import reverse_bound

        return reverse_bound(self, cotangent, wrt)

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
    # the caller's inputs are never written: the state carried between steps lives in private copies; the
    # outputs and sinks the caller passed are stepped in private copies too, copied back once the loop succeeds
    carried = {i for _, i in pairs}
    sig = plan.kernel.signature
    given = {k: v for k, v in planes.items() if isinstance(v, np.ndarray) and sig.get(k) is not None
             and sig.get(k).kind in ("output", "sink")}
    plan.binder.check_writable(given, "loop")  # the loop steps private copies: the binder never sees these
    planes = {k: (np.array(v, copy=True) if k in carried or k in given else v) for k, v in planes.items()}
    bound = BoundLaunch(plan, planes, keep_initial=False)  # (a loop has no reverse)
    results = bound.results
    named = results if isinstance(results, dict) else {next(iter(bound.stages[0].results)): results}
    for step in range(1, steps + 1):
        bound.launch()
        if done is not None and _is_done(done, results, named):
            return _hand_back(results, named, given, planes), step, True
        for out, inp in pairs:
            np.copyto(bound.inputs[inp], np.asarray(named[out]).reshape(-1))
    if done is not None:
        return results, steps, False  # until_done refuses: the caller's arrays stay as they were
    return _hand_back(results, named, given, planes), steps, False


def _hand_back(results, named: dict, given: dict, copies: dict):
    """The loop succeeded: copy the stepped outputs and sinks into the arrays the caller passed, and hand those
    back in the results (as a run does for arrays it writes in place)."""
    if not given:
        return results
    from eagle.array import Array

    for k, a in given.items():
        np.copyto(a, copies[k])
    # per-lane outputs and sinks were results in place (the copies): hand back the caller's arrays instead; a
    # cell's result is the run's own buffer, as in a run
    out = {k: (Array(given[k]) if k in given and np.asarray(v) is copies[k] else v) for k, v in named.items()}
    return out if isinstance(results, dict) else next(iter(out.values()))


def _is_done(done, results, named) -> bool:
    if callable(done):
        return bool(done(results))
    if done not in named:
        raise InputError(f"until_done(done={done!r}): the kernel has no output named {done!r}")
    value = np.asarray(named[done])
    if value.size != 1:
        raise InputError(f"until_done(done={done!r}): '{done}' holds {value.size} values, not one: done= names a "
                         f"cell of one value; for an array pass a callable, e.g. done=lambda r: "
                         f"(r['{done}'] < 1e-6).all()")
    return bool(value.reshape(-1)[0])


def simulate(plan, steps: int, carry: Mapping[str, str] | None = None, **planes):
    """Step the kernel `steps` times; after each step every `carry` output is copied into its input plane.

    Returns the results of the last step (as `run` does). The caller's arrays are not modified.
    """
    steps = _count_of_steps(plan, "simulate", "steps", steps)
    return _step_loop(plan, "simulate", planes, carry or {}, steps, None)[0]


def _count_of_steps(plan, door: str, arg: str, v) -> int:
    """`steps=` / `max_steps=`: a whole number >= 1 (a bool, a float or a string is refused, not truncated)."""
    if not is_whole(v) or v < 1:
        raise InputError(f"kernel '{plan.kernel.name}': {door} needs {arg} >= 1, a whole number, got {v!r} "
                         f"({type(v).__name__})")
    return int(v)


def until_done(plan, done: Callable | str, carry: Mapping[str, str] | None = None, max_steps: int = 10_000,
               **planes):
    """Step the kernel until `done` holds: a callable given the step's results, or the name of a scalar cell
    whose value is nonzero. Returns (results, steps taken); raises if max_steps pass first."""
    max_steps = _count_of_steps(plan, "until_done", "max_steps", max_steps)
    results, taken, finished = _step_loop(plan, "until_done", planes, carry or {}, max_steps, done)
    if not finished:
        raise InputError(f"kernel '{plan.kernel.name}': until_done did not finish within max_steps={max_steps}")
    return results, taken
