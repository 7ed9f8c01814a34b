"""eagle.deploy(kernel) -> Plan: compiles a kernel per specialisation and runs it.

The plan owns the compile side (hawk IR -> binary, cached); `eagle.launch.Launcher` owns buffers and launches.
A run checks what it can for every stage before the first launch, and launches every stage before it commits
any result to the caller's arrays (eagle.stage.run_stages), so a refused run writes nothing the caller passed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eagle import cache
from eagle.binding import Binder, lane_local_inputs
from eagle.launch import Launcher, lane_range, prepare_stages
from eagle.native.reuse import RunCache
from eagle.settings import chosen_chunk, min_chunk_setting, threads_setting
from eagle.stage import run_stages
from eagle.targets import auto_target, host, runtime
from hawk.abi.layout import CELL_SLOTS, Spec

if TYPE_CHECKING:  # (GPU targets' modules are imported when a GPU plan needs them, not on a host warm start)
    from eagle.targets.device import DeviceStage


class Plan:
    """A kernel deployed for a target. `run(**planes, **extents)` validates, launches and returns results.

    `threads`: host threads (else $EAGLE_THREADS, else the CPU count). `min_chunk`: the fewest lanes a host
    chunk takes (else $EAGLE_MIN_CHUNK, else eagle.settings.MIN_CHUNK); tests shrink it so that small runs split.
    `last_chunks`: the chunks each stage of the latest `run` ran (host: chunks handed to threads; GPU: the
    launch's sets of partials), a tuple with one entry per stage. `unspecified` (host; set before the first run):
    outputs stored by key whose positions no lane stores may hold anything after a run instead of zeros (what
    eagle.algorithms sets for its compaction outputs, read only up to the run count)."""

    def __init__(self, kernel, target: str = "host", threads: int | None = None,
                 min_chunk: int | None = None, **options):
        if not _is_kernel(kernel):
            raise TypeError(f"eagle.deploy takes a @hawk.kernel, got {type(kernel).__name__}")
        if target == "auto":
            target = auto_target()
        if target == "cpu":
            target = "host"
        if target == "host" and options:
            raise ValueError(f"the host target takes no options, got {sorted(options)}")
        self.kernel, self.target, self.options = kernel, target, options
        if target == "spirv" and options.get("subgroup") == "device":  # this machine's Vulkan device says
            from eagle.targets.spirv import device_subgroup

            options = {**options, "subgroup": device_subgroup()}
        self.device = None if target == "host" else kernel.target(target, **options)
        try:
            self.threads = threads_setting(threads)
            self.min_chunk = min_chunk_setting(min_chunk)
            self.chosen_chunk = chosen_chunk(min_chunk)  # (else the launcher's default rule also weighs copies)
        except ValueError as exc:
            raise ValueError(f"eagle.deploy({kernel.name}): {exc}") from None
        self.last_chunks: tuple[int, ...] = ()
        self.binder = Binder(kernel.name, kernel.signature, kernel.outputs, lane_local_inputs(kernel),
                             mixed=True, cell_slots=CELL_SLOTS if self.device is None else 0,
                             sae=self.device is None and cache.sae_host(),
                             fma_pipes=self.device is None and cache.fma_pipes_host(),
                             mxcsr=self.device is None and cache.mxcsr_host())
        self._ready: dict[tuple[Spec, int], tuple] = {}
        self._runtime = None
        self._runs = RunCache(self) if self.device is None else None  # prepared host runs reused by shape
        # outputs stored by key whose positions no lane stores may hold anything after a run (set before the first
        # run: eagle.algorithms reads its compaction outputs only up to the run count, so they are not zeroed)
        self.unspecified: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        return f"<eagle.Plan {self.kernel.name} target={self.target} threads={self.threads}>"

    def _launcher(self, spec, stage: int) -> Launcher:
        lc = Launcher(self.binder, self.kernel.layout(spec, stage), self.threads, self.min_chunk, self.chosen_chunk)
        if self.device is None:  # (an output no lane reads before assigning it needs no zeros: Launcher.buffers)
            lanes = frozenset(n for n, how in self.kernel.outputs.items() if how == "lane")
            lc.assigned = (lanes - self.kernel.initial_reads()) | self.unspecified
        return lc

    def prepare(self, spec: Spec, stage: int = 0) -> tuple[host.HostLibrary, Launcher]:
        """The compiled library and launcher for one stage of one specialisation (compiled once, cached)."""
        ready = self._ready.get((spec, stage))
        if ready is None and self.device is not None:
            ready = self._ready[(spec, stage)] = self.prepare_device(spec, stage)
        if ready is None:
            st = self.kernel.stages(spec)[stage]
            key = cache.key(st.key, repr(self.kernel), repr(spec), self.target, "opt3")
            lib = host.load(key, st.name, lambda path: self.kernel.build_library(spec, stage, path))
            self.kernel.persist()  # so that a later process finds the kernel's facts beside its binary
            launcher = self._launcher(spec, stage)
            ready = self._ready[(spec, stage)] = (lib, launcher)
        return ready

    def runtime(self):
        """The GPU target's runtime, made once per plan (RuntimeMissing when the machine lacks it)."""
        if self._runtime is None:
            rt = runtime(self.target)
            if getattr(self.device, "subgroup", 0) and hasattr(rt, "check_subgroup"):
                rt.check_subgroup(self.device.subgroup)  # shuffles compiled for one subgroup size
            self._runtime = rt
        return self._runtime

    def prepare_device(self, spec: Spec, stage: int):
        """For a GPU target: (finish library for the host, launcher, device binary, entry name)."""
        from eagle.targets.device import device_binary

        st = self.kernel.stages(spec)[stage]
        key = cache.key(st.key, repr(self.kernel), repr(spec), self.target, self.device.options)
        binary = device_binary(key, st.name, self.device.suffix,
                               lambda: self.kernel.device_binary(spec, stage, self.device))
        finish = host.load(cache.key(key, "finish"), st.name,
                           lambda path: self.kernel.build_library(spec, stage, path, finish=True))
        launcher = self._launcher(spec, stage)
        return finish, launcher, binary, f"{st.name}_lanes"

    def run(self, base: int | None = None, count: int | None = None, **planes):
        """Run the kernel over every lane (or lanes [base, base + count) of a single-stage kernel)."""
        if self._runs is not None:
            return self._runs.run(base, count, planes)
        from eagle.targets import device_planes

        b = device_planes.bind(self, planes)  # (a GPU target: device arrays bound where they lie)
        lo, hi = self.lane_range(base, count, b.lanes, self.kernel.stage_count)
        stages, results = self.stages(b, lo, hi)
        run_stages(stages)
        self.last_chunks = tuple(st.nchunks for st in stages)
        if len(results) == 1:
            return next(iter(results.values()))
        return {k: results[k] for k in sorted(results)}

    def stages(self, b, lo: int, hi: int) -> tuple[list, dict]:
        """Every stage of a run prepared before any launches (eagle.launch.prepare_stages); on a GPU target every
        stage is compiled before the runtime is asked for, so a missing runtime is reported after a full build.
        Returns (stages, results by name)."""
        parts = [self.prepare(b.spec, k) for k in range(self.kernel.stage_count)]
        if self.device is None:
            return prepare_stages(parts, b, lo, hi)
        from eagle.targets.device import DeviceStage

        runtime = self.runtime()

        def device_stage(k: int, cuts: dict) -> DeviceStage:
            finish, launcher, binary, entry = parts[k]
            return DeviceStage(launcher, binary, entry, runtime, finish, b, lo, hi, cuts)

        return prepare_stages([(p[0], p[1]) for p in parts], b, lo, hi, device_stage)

    def reverse(self, cotangent=None, wrt=None, /, **planes) -> dict:
        """Gradients of the outputs weighted by `cotangent`, by input name (the reverse: eagle/reverse.py). A
        kernel with a plane named `cotangent` or `wrt` passes that plane by keyword and the argument positionally."""
        from eagle.reverse import reverse

        return reverse(self, cotangent, wrt, planes)

    def bind(self, base: int | None = None, count: int | None = None, **planes):
        """A launch with its planes checked and its buffers allocated once: call `.launch()` repeatedly."""
        from eagle.doors import BoundLaunch

        return BoundLaunch(self, planes, base, count)

    def simulate(self, steps: int, carry: dict[str, str] | None = None, **planes):
        """Step the kernel `steps` times, copying each `carry` output into its input plane between steps."""
        from eagle.doors import simulate

        return simulate(self, steps, carry, **planes)

    def until_done(self, done, carry: dict[str, str] | None = None, max_steps: int = 10_000, **planes):
        """Step the kernel until `done` (a callable on the results, or a cell name) holds: (results, steps)."""
        from eagle.doors import until_done

        return until_done(self, done, carry, max_steps, **planes)

    def lane_range(self, base, count, lanes: int, stages: int) -> tuple[int, int]:
        return lane_range(self.kernel.name, base, count, lanes, stages)


def deploy(kernel, target: str = "host", threads: int | None = None, min_chunk: int | None = None,
           **options) -> Plan:
    """Build a plan that runs `kernel` on `target`: 'host' (the CPU), 'nvvm', 'rocdl', 'spirv' or 'auto'."""
    return Plan(kernel, target, threads, min_chunk, **options)


def _is_kernel(obj) -> bool:
    """Whether `obj` is a hawk kernel, by what the plan asks of it (eagle imports no compiler class)."""
    return all(callable(getattr(obj, m, None))
               for m in ("stages", "layout", "build_library", "device_binary", "target"))
