"""eagle.deploy(kernel) -> Plan: compiles a kernel per specialisation and runs it.

The plan owns the compile side (hawk IR -> binary, cached); `eagle.launch.Launcher` owns buffers and launches.
"""

from __future__ import annotations

import os

from eagle import cache
from eagle.binding import Binder
from eagle.launch import Launcher
from eagle.targets import host
from hawk.compiler import Kernel
from hawk.layout import Spec


class Plan:
    """A kernel deployed for a target. `run(**planes, **extents)` validates, launches and returns results."""

    def __init__(self, kernel: Kernel, target: str = "host", threads: int | None = None):
        if not isinstance(kernel, Kernel):
            raise TypeError(f"eagle.deploy takes a @hawk.kernel, got {type(kernel).__name__}")
        if target not in ("host", "auto", "cpu"):
            raise ValueError(f"target {target!r} is not available in this release; use 'host'")
        self.kernel, self.target = kernel, "host"
        self.threads = threads if threads is not None else int(os.environ.get("EAGLE_THREADS", os.cpu_count() or 1))
        if self.threads < 1:
            raise ValueError("threads must be at least 1")
        self.binder = Binder(kernel.name, kernel.signature, kernel.outputs)
        self._ready: dict[Spec, tuple[host.HostLibrary, Launcher]] = {}

    def __repr__(self) -> str:
        return f"<eagle.Plan {self.kernel.name} target={self.target} threads={self.threads}>"

    def prepare(self, spec: Spec) -> tuple[host.HostLibrary, Launcher]:
        """The compiled library and launcher for one specialisation (compiled once, then cached)."""
        ready = self._ready.get(spec)
        if ready is None:
            text = self.kernel.hawk_ir(spec)
            key = cache.key(text, repr(self.kernel), repr(spec), self.target, "opt3")
            lib = host.load(key, self.kernel.name, lambda: self.kernel.lowered(spec).llvm_ir)
            ready = self._ready[spec] = (lib, Launcher(self.binder, self.kernel.layout(spec), self.threads))
        return ready

    def run(self, **kwargs):
        b = self.binder.bind(kwargs)
        lib, launcher = self.prepare(b.spec)
        return launcher.run(lib, b)


def deploy(kernel: Kernel, target: str = "host", threads: int | None = None) -> Plan:
    """Build a plan that runs `kernel` on `target` ('host' for the CPU)."""
    return Plan(kernel, target, threads)
