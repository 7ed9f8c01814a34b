"""hawk.artifact: kernels published ahead of time, and loaded where no compiler is installed.

`build(kernel, dir)` publishes a single-launch kernel, `build_bundle([kernels], dir)` publishes kernels with all
their stages; each kernel gets one binary per (stage, dtype, target) and a JSON sidecar `<dir>/<kernel>.json`.
`hawk.load(dir, name)` checks the sidecar and binaries and loads them; `hawk.run(loaded, **planes)` runs them.
See docs/artifacts.md.

Importing this package (and loading or running an artifact) does not import MLIR; `build` and `build_bundle`
import the compiler when they are first used. The artifact format and its reading live in hawk.abi.artifact.
Loading and running are the runtime's (eagle/artifact.py): `load`, `run` and `LoadedKernel` here are a lazy
forwarding to it (the one place, with hawk.load / hawk.run, where hawk reaches eagle, and only when called).
"""

from __future__ import annotations

from hawk.abi.artifact.format import FORMAT, FORMAT_VERSION, ArtifactError
from hawk.abi.artifact.read import Artifact, read

_BUILD_SIDE = ("build", "build_bundle", "BUILDERS", "known_targets")
_RUN_SIDE = ("load", "run", "LoadedKernel")


def __getattr__(name: str):
    if name in _BUILD_SIDE:  # the compiler side needs MLIR: imported on first use
        from hawk.artifact import builder

        return getattr(builder, name)
    if name in _RUN_SIDE:  # the runtime's: forwarded to eagle.artifact on first use
        from eagle import artifact

        return getattr(artifact, name)
    raise AttributeError(f"module 'hawk.artifact' has no attribute '{name}'")


__all__ = ["FORMAT", "FORMAT_VERSION", "Artifact", "ArtifactError", "LoadedKernel", "build", "build_bundle", "load",
           "read", "run"]
