"""The doors the exact fuzzers (tests/fuzz_exact_sums.py, fuzz_exact_scatters.py) run a case through: "plan"
(eagle.deploy, then Plan.run) or "artifact" (hawk.artifact.build_bundle for the case's target and dtype, then
hawk.load and hawk.run, with no MLIR on the run's path). Both take the case's split (threads, min_chunk) and its
route: with `off`, $HAWK_NO_SAE=1 while the plan is deployed or the artifact built, so the build keeps the range
check and the grouped scatters. An ordered result promises the same exact bits through either door."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from exact_families import no_sae

DOORS = ("plan", "artifact")


@dataclasses.dataclass(frozen=True)
class Ran:
    """What a fuzzer's verdict says of a run: the chunks each stage ran, and whether the build could take the
    flag routes (MXCSR's flags or AVX-512's silent adds: a host build for this CPU without $HAWK_NO_SAE)."""

    chunks: tuple[int, ...]
    flagged: bool

    @property
    def split(self) -> bool:
        return max(self.chunks, default=1) > 1


def run_through(door: str, kernel, planes: dict, *, dtype, threads: int, min_chunk: int, off: bool, target: str,
                workdir: str, variant: str = "") -> tuple[object, Ran]:
    """Run `kernel` on `planes` through `door`; returns what the run returned and its Ran. `variant` tells apart
    kernels of one name built for different extents (an artifact is built once per process, kernel, dtype, route,
    target and Index widths, into `workdir`)."""
    import eagle

    if door == "plan":
        with no_sae(off):
            plan = eagle.deploy(kernel, target=target, threads=threads, min_chunk=min_chunk)
            got = plan.run(**planes)
        return got, Ran(tuple(plan.last_chunks), bool(plan.binder.mxcsr or plan.binder.sae))
    if door != "artifact":
        raise ValueError(f"door {door!r}: expected one of {DOORS}")
    import hawk
    import hawk.artifact
    from hawk.abi import cache

    widths = {n: str(a.dtype) for n, a in planes.items()
              if (p := kernel.signature.get(n)) is not None and p.integer_plane}
    tag = "_".join(f"{n}{w[3:]}" for n, w in sorted(widths.items()))
    where = Path(workdir) / f"art{os.getpid()}_{kernel.name}{variant}_{dtype}_{'off' if off else 'on'}_{target}_{tag}"
    with no_sae(off):
        if not (where / f"{kernel.name}.json").exists():
            hawk.artifact.build_bundle([kernel], where, targets=(target,), dtypes=(str(dtype),),
                                       index_dtypes=widths)
        flagged = target == "host" and (cache.mxcsr_host() or cache.sae_host())
    loaded = hawk.load(where, kernel.name, target=target, threads=threads, min_chunk=min_chunk)
    got = hawk.run(loaded, **planes)
    return got, Ran(tuple(loaded.last_chunks), flagged)
