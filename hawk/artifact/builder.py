"""Publishing kernels ahead of time: one binary per (stage, dtype, target) and a JSON sidecar per kernel.

This is the compiler side (it needs MLIR); loading what it writes does not (hawk.artifact.loader).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from hawk import __version__ as HAWK_VERSION
from hawk import cache
from hawk.artifact.format import (
    FINISH_SUFFIX,
    FLOAT_DTYPES,
    FORMAT,
    FORMAT_VERSION,
    GPU_TARGETS,
    INDEX_DTYPES,
    SUFFIX,
    check_sidecar,
    content_hash,
    description,
    description_symbol,
)
from hawk.compiler import Kernel
from hawk.errors import KernelError
from hawk.layout import Spec, layout_to_json


# ---- targets ------------------------------------------------------------------------------------------------
def _build_host(kernel: Kernel, spec: Spec, stage: int, path: Path, desc: bytes, cpu: str | None) -> None:
    """LLVM-dialect IR -> object -> shared library at `path`, carrying its description (format.description) as an
    exported constant string; compiled for this machine's CPU (cpu=None) or the generic CPU `cpu`."""
    _host_library(kernel.lowered(spec, stage).llvm_ir, kernel.stages(spec)[stage].name, path, desc, cpu)


def _build_finish(kernel: Kernel, spec: Spec, stage: int, path: Path, desc: bytes, cpu: str | None) -> None:
    """A GPU stage's host finish (the runtime copies partials back and finishes on the host) as a shared library."""
    _host_library(kernel.gpu_finish(spec, stage), kernel.stages(spec)[stage].name, path, desc, cpu)


def _host_library(text: str, stage: str, path: Path, desc: bytes, cpu: str | None) -> None:
    from eagle.targets import host

    host.build(host.with_description(text, description_symbol(stage), desc), path, cpu)


def _gpu_builder(name: str):
    def build(kernel: Kernel, spec: Spec, stage: int, path: Path, chip: str | None = None) -> dict:
        """The device binary at `path`, checked by the target's offline tool (ptxas, ld.lld, spirv-val);
        returns the build's chip and entry name."""
        from eagle.targets import gpu_target

        target = gpu_target(name, **({"chip": chip} if chip else {}))
        try:
            binary = target.compile(kernel.lowered_gpu(spec, stage, target.subgroup, target.float_atomics,
                                                       target.wide_loops).gpu_module)
        except KernelError as exc:  # a target's refusal, pointed at the user's line
            raise kernel.located(exc) from None
        target.check(binary)
        path.write_bytes(binary)
        return {"chip": getattr(target, "chip", name), "entry": f"{kernel.stages(spec)[stage].name}_lanes"}

    build.__name__ = f"_build_{name}"
    return build


def _has_spirv() -> bool:
    import importlib.util

    return importlib.util.find_spec("eagle.targets.spirv") is not None


# One builder per target: (kernel, spec, stage index, output path, ...) -> writes the binary. The host builder also
# takes the library's description and the CPU; a GPU builder takes chip= and returns {"chip", "entry"}, and its
# stage's host finish is built by _build_finish. A new target adds an
# entry here, a suffix in format.SUFFIX and a loader in loader.LOADERS.
BUILDERS = {"host": _build_host, "nvvm": _gpu_builder("nvvm"), "rocdl": _gpu_builder("rocdl")}
if _has_spirv():  # the Vulkan target, where this checkout has it
    BUILDERS["spirv"] = _gpu_builder("spirv")


def known_targets() -> list[str]:
    return sorted(BUILDERS)


# ---- arguments ----------------------------------------------------------------------------------------------
def _words(value, what: str) -> tuple[str, ...]:
    items = (value,) if isinstance(value, str) else tuple(value)
    if not items or not all(isinstance(v, str) for v in items):
        raise ValueError(f"{what}= takes one or more names, got {value!r}")
    return tuple(dict.fromkeys(items))


def _targets(targets) -> tuple[str, ...]:
    ts = _words(targets, "targets")
    bad = [t for t in ts if t not in BUILDERS]
    if bad:
        raise ValueError(f"unknown target {bad[0]!r}: the targets hawk.artifact builds are {known_targets()}")
    return ts


def _dtypes(dtypes) -> tuple[str, ...]:
    ds = _words(dtypes, "dtypes")
    bad = [d for d in ds if d not in FLOAT_DTYPES]
    if bad:
        raise ValueError(f"dtype {bad[0]!r} is not a float dtype a kernel is built for: use {list(FLOAT_DTYPES)}")
    return ds


def _index_dtypes(kernel: Kernel, index_dtypes) -> dict[str, str]:
    given = dict(index_dtypes or {})
    index = [p.name for p in kernel.signature.planes if p.kind == "index"]
    for plane, dt in given.items():
        if plane not in index:
            raise ValueError(f"index_dtypes names {plane!r}, which is not an Index plane of kernel '{kernel.name}' "
                             f"(its Index planes: {index})")
        if dt not in INDEX_DTYPES:
            raise ValueError(f"index_dtypes[{plane!r}] is {dt!r}: an Index plane is one of {list(INDEX_DTYPES)}")
    return given


def _kernel(k) -> Kernel:
    if not isinstance(k, Kernel):
        raise TypeError(f"hawk.artifact publishes @hawk.kernel functions, got {type(k).__name__}")
    return k


# ---- publishing ---------------------------------------------------------------------------------------------
def _chips(chips, targets: tuple[str, ...]) -> dict[str, str]:
    given = dict(chips or {})
    for tg, chip in given.items():
        if tg not in targets or tg == "host":
            raise ValueError(f"chips= names target {tg!r}, which is not a GPU target being built ({list(targets)})")
        if not isinstance(chip, str):
            raise ValueError(f"chips[{tg!r}] must be a chip name such as 'sm_90' or 'gfx942', got {chip!r}")
    return given


def _host_cpu(cpu: str) -> dict:
    """The sidecar's host_cpu: what host code is compiled for (format.check_cpu reads it back)."""
    if cpu not in ("native", "portable"):
        raise ValueError(f"cpu= is 'native' (this machine's CPU) or 'portable' (any {cache.machine()} CPU), "
                         f"got {cpu!r}")
    here = cache.host_cpu()
    if cpu == "portable":
        return {"llvm": here["llvm"], "arch": here["arch"], "cpu": cache.portable_cpu(), "features": "",
                "portable": True}
    return {"llvm": here["llvm"], "arch": here["arch"], "cpu": here["name"], "features": here["features"],
            "portable": False}


def build(kernel: Kernel, directory, targets: Iterable[str] = ("host",), dtypes: Iterable[str] = ("float64",),
          index_dtypes: dict[str, str] | None = None, chips: dict[str, str] | None = None,
          cpu: str = "native") -> Path:
    """Publish `kernel` as exactly one launch into `directory`; returns the sidecar's path.

    A kernel that reads a reduced value later in its body runs in several stages (launches): publish it with
    build_bundle. Sums with policy="auto" over every lane are built "ordered", so a run's cells are bitwise
    reproducible and equal to eagle's "ordered" policy.

    GPU targets ("nvvm", "rocdl", "spirv") store, per stage and dtype, the device binary and the host library
    that finishes the stage; `chips={"rocdl": "gfx942"}` picks a chip (defaults: the target's, e.g. sm_80 PTX,
    which newer NVIDIA GPUs compile on load; gfx90a code objects).

    Host code (host builds, and GPU builds' finish libraries) is compiled for this machine's CPU (cpu="native"):
    hawk.load refuses it on another CPU. cpu="portable" compiles it for the architecture's generic CPU (x86-64:
    SSE2, no AVX) so that it loads on any machine of that architecture, at some cost in speed.
    """
    kernel = _kernel(kernel)
    n = kernel.stage_count
    if n > 1:
        raise ValueError(f"kernel '{kernel.name}' runs in {n} stages (it reads a value reduced over every lane), and "
                         f"hawk.artifact.build publishes exactly one launch: use hawk.artifact.build_bundle("
                         f"[{kernel.name}], dir) to publish it with all its stages")
    ts = _targets(targets)
    return _publish(kernel, Path(directory), ts, _dtypes(dtypes), _index_dtypes(kernel, index_dtypes),
                    _chips(chips, ts), _host_cpu(cpu))


def build_bundle(kernels: Iterable[Kernel], directory, targets: Iterable[str] = ("host",),
                 dtypes: Iterable[str] = ("float64",), index_dtypes: dict[str, str] | None = None,
                 chips: dict[str, str] | None = None, cpu: str = "native") -> list[Path]:
    """Publish each kernel with all its stages into `directory` (one sidecar each); returns the sidecars' paths.

    `index_dtypes` maps Index plane names to int32/int64 for every kernel that has such a plane; `chips` and
    `cpu` as in build.
    """
    ks = [_kernel(k) for k in ([kernels] if isinstance(kernels, Kernel) else list(kernels))]
    if not ks:
        raise ValueError("build_bundle takes a list of one or more @hawk.kernel functions")
    names = [k.name for k in ks]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ValueError(f"build_bundle got two kernels named '{dup}'; a directory holds one sidecar per name")
    ts, ds = _targets(targets), _dtypes(dtypes)
    idx = dict(index_dtypes or {})
    every_index = {p.name for k in ks for p in k.signature.planes if p.kind == "index"}
    stray = sorted(set(idx) - every_index)
    if stray:
        raise ValueError(f"index_dtypes names {stray[0]!r}, which is not an Index plane of any of {names}")
    per = [_index_dtypes(k, {p: d for p, d in idx.items()
                             if k.signature.get(p) is not None and k.signature.get(p).kind == "index"}) for k in ks]
    ch, hc = _chips(chips, ts), _host_cpu(cpu)
    return [_publish(k, Path(directory), ts, ds, i, ch, hc) for k, i in zip(ks, per, strict=True)]


def file_name(kernel: str, stage: str, dtype: str, target: str) -> str:
    """A binary's file name: flat, and unique across the kernels of one directory."""
    return f"{kernel}.{stage}.{dtype}.{target}{SUFFIX[target]}"


def finish_name(kernel: str, stage: str, dtype: str, target: str) -> str:
    """The file name of a GPU build's host finish library."""
    return f"{kernel}.{stage}.{dtype}.{target}{FINISH_SUFFIX}"


def _write(d: Path, name: str, make, kernel: Kernel, spec: Spec, stage: int, *extra) -> tuple[bytes, object]:
    """`make(kernel, spec, stage, path, *extra)` on a private part file, then moved into place atomically: the
    bytes written and what `make` returned."""
    part = d / f".{name}.{os.getpid()}.part"
    try:
        out = make(kernel, spec, stage, part, *extra)
        blob = part.read_bytes()
        os.replace(part, d / name)  # atomic: a reader never sees half a binary
    finally:
        part.unlink(missing_ok=True)
    return blob, out


def _publish(kernel: Kernel, d: Path, targets: tuple[str, ...], dtypes: tuple[str, ...],
             index_dtypes: dict[str, str], chips: dict[str, str], host_cpu: dict) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    specs = {dt: kernel.spec_for(dt, index_dtypes, auto_sum="ordered") for dt in dtypes}
    stages = kernel.stages(specs[dtypes[0]])
    shape = [(s.name, s.cells_in, s.cells_out) for s in stages]
    for dt in dtypes[1:]:  # the split does not depend on the dtype; make sure
        if [(s.name, s.cells_in, s.cells_out) for s in kernel.stages(specs[dt])] != shape:
            raise RuntimeError(f"internal error: kernel '{kernel.name}' splits differently for {dt}")
    head = {"name": kernel.name, "index_dtypes": dict(specs[dtypes[0]].index_dtypes), "host_cpu": host_cpu}
    cpu = None if not host_cpu["portable"] else host_cpu["cpu"]
    builds = []
    for k, st in enumerate(stages):
        for dt in dtypes:
            layout = layout_to_json(kernel.layout(specs[dt], k))
            for tg in targets:
                name = file_name(kernel.name, st.name, dt, tg)
                entry = {"stage": st.name, "dtype": dt, "target": tg, "file": name, "layout": layout}
                if tg in GPU_TARGETS:
                    blob, dev = _write(d, name, BUILDERS[tg], kernel, specs[dt], k, chips.get(tg))
                    fin = finish_name(kernel.name, st.name, dt, tg)
                    entry["sha256"] = hashlib.sha256(blob).hexdigest()
                    entry["device"] = {"chip": dev["chip"], "entry": dev["entry"], "finish": fin}
                    fin_blob, _ = _write(d, fin, _build_finish, kernel, specs[dt], k, description(head, entry), cpu)
                    entry["device"]["finish_sha256"] = hashlib.sha256(fin_blob).hexdigest()
                else:
                    blob, _ = _write(d, name, BUILDERS[tg], kernel, specs[dt], k, description(head, entry), cpu)
                    entry["sha256"] = hashlib.sha256(blob).hexdigest()
                builds.append({f: entry[f] for f in ("stage", "dtype", "target", "file", "sha256", "layout",
                                                      "device") if f in entry})
    outputs = dict(kernel.outputs)
    made = [c for s in stages for c in s.cells_out]
    cells = [{"name": c, "internal": False} for c, m in outputs.items() if m == "cell"]
    cells += [{"name": c, "internal": True} for c in made if c not in outputs]
    sidecar = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "hawk_version": HAWK_VERSION,
        "name": kernel.name,
        "planes": kernel.signature.to_json(),
        "outputs": outputs,
        "index_dtypes": dict(specs[dtypes[0]].index_dtypes),
        "stages": [{"kernel": s.name, "cells_in": list(s.cells_in), "cells_out": list(s.cells_out)} for s in stages],
        "cells": cells,
        "dtypes": list(dtypes),
        "targets": list(targets),
        "host_cpu": host_cpu,
        "builds": builds,
    }
    sidecar["content_hash"] = content_hash(sidecar)
    path = d / f"{kernel.name}.json"
    text = json.dumps(sidecar, indent=1, allow_nan=False) + "\n"
    check_sidecar(json.loads(text), f"{path} (as built)")  # what a loader will check: a drift fails here
    part = d / f".{kernel.name}.json.{os.getpid()}.part"
    part.write_text(text)
    os.replace(part, path)  # written last: a sidecar only ever names binaries that are complete
    return path
