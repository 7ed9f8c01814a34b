"""eagle.deploy(kernel) -> Plan: compiles a kernel per specialisation and runs it.

The plan owns the compile side (hawk IR -> binary, cached); `eagle.launch.Launcher` owns buffers and launches.
"""

from __future__ import annotations

import os

from eagle import cache
from eagle.binding import Binder
from eagle.errors import InputError
from eagle.launch import Launcher
from eagle.targets import auto_target, gpu_target, host
from eagle.targets.device import DeviceStage, device_binary
from hawk.compiler import Kernel
from hawk.layout import Spec


class Plan:
    """A kernel deployed for a target. `run(**planes, **extents)` validates, launches and returns results."""

    def __init__(self, kernel: Kernel, target: str = "host", threads: int | None = None, **options):
        if not isinstance(kernel, Kernel):
            raise TypeError(f"eagle.deploy takes a @hawk.kernel, got {type(kernel).__name__}")
        if target == "auto":
            target = auto_target()
        if target == "cpu":
            target = "host"
        if target == "host" and options:
            raise ValueError(f"the host target takes no options, got {sorted(options)}")
        self.kernel, self.target = kernel, target
        self.device = None if target == "host" else gpu_target(target, **options)
        self.threads = threads if threads is not None else int(os.environ.get("EAGLE_THREADS", os.cpu_count() or 1))
        if self.threads < 1:
            raise ValueError("threads must be at least 1")
        self.binder = Binder(kernel.name, kernel.signature, kernel.outputs)
        self._ready: dict[tuple[Spec, int], tuple] = {}
        self._runtime = None

    def __repr__(self) -> str:
        return f"<eagle.Plan {self.kernel.name} target={self.target} threads={self.threads}>"

    def prepare(self, spec: Spec, stage: int = 0) -> tuple[host.HostLibrary, Launcher]:
        """The compiled library and launcher for one stage of one specialisation (compiled once, cached)."""
        ready = self._ready.get((spec, stage))
        if ready is None and self.device is not None:
            ready = self._ready[(spec, stage)] = self.prepare_device(spec, stage)
        if ready is None:
            st = self.kernel.stages(spec)[stage]
            key = cache.key(st.key, repr(self.kernel), repr(spec), self.target, "opt3")
            lib = host.load(key, st.name, lambda: self.kernel.lowered(spec, stage).llvm_ir)
            self.kernel.persist()  # so that a later process finds the kernel's facts beside its binary
            launcher = Launcher(self.binder, self.kernel.layout(spec, stage), self.threads)
            ready = self._ready[(spec, stage)] = (lib, launcher)
        return ready

    def runtime(self):
        """The GPU target's runtime, made once per plan (RuntimeMissing when the machine lacks it)."""
        if self._runtime is None:
            rt = self.device.runtime()
            if getattr(self.device, "subgroup", 0) and hasattr(rt, "check_subgroup"):
                rt.check_subgroup(self.device.subgroup)  # shuffles compiled for one subgroup size
            self._runtime = rt
        return self._runtime

    def prepare_device(self, spec: Spec, stage: int):
        """For a GPU target: (finish library for the host, launcher, device binary, entry name)."""
        st = self.kernel.stages(spec)[stage]
        key = cache.key(st.key, repr(self.kernel), repr(spec), self.target, self.device.options)
        binary = device_binary(key, st.name, self.device,
                               lambda: self.kernel.lowered_gpu(spec, stage, self.device.subgroup,
                                                               self.device.float_atomics).gpu_module)
        finish = host.load(cache.key(key, "finish"), st.name,
                           lambda: self.kernel.gpu_finish(spec, stage))
        launcher = Launcher(self.binder, self.kernel.layout(spec, stage), self.threads)
        return finish, launcher, binary, f"{st.name}_lanes"

    def run(self, base: int | None = None, count: int | None = None, **planes):
        """Run the kernel over every lane (or lanes [base, base + count) of a single-stage kernel)."""
        b = self.binder.bind(planes)
        n = self.kernel.stage_count
        lo, hi = self.lane_range(base, count, b.lanes, n)
        results: dict = {}
        cuts: dict = {}
        runtime = None
        if self.device is not None:
            for k in range(n):  # compile every stage first: a missing runtime is reported after a full build
                self.prepare(b.spec, k)
            runtime = self.runtime()
        for k in range(n):
            if runtime is not None:
                finish, launcher, binary, entry = self.prepare(b.spec, k)
                stage = DeviceStage(launcher, binary, entry, runtime, finish, b, lo, hi, cuts)
                stage.fire()
                out, made = stage.results, stage.cells_out
            else:
                lib, launcher = self.prepare(b.spec, k)
                out, made = launcher.run(lib, b, lo, hi, cuts)
            results.update(out)
            cuts.update(made)
        if len(results) == 1:
            return next(iter(results.values()))
        return {k: results[k] for k in sorted(results)}

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
        if base is None and count is None:
            return 0, lanes
        if stages > 1:
            raise InputError(f"kernel '{self.kernel.name}': this kernel reads a value reduced over every lane, so it "
                             f"runs over every lane (no base= or count=); it runs in {stages} stages")
        lo = 0 if base is None else int(base)
        hi = lanes if count is None else lo + int(count)
        if not 0 <= lo <= hi <= lanes:
            raise InputError(f"kernel '{self.kernel.name}': base={base} count={count} is outside the {lanes} lanes")
        return lo, hi


def deploy(kernel: Kernel, target: str = "host", threads: int | None = None, **options) -> Plan:
    """Build a plan that runs `kernel` on `target`: 'host' (the CPU), 'nvvm', 'rocdl', 'spirv' or 'auto'."""
    return Plan(kernel, target, threads, **options)
