"""Publishing kernels ahead of time: one binary per (stage, dtype, target) and a JSON sidecar per kernel.

This is the compiler side (it needs MLIR; each target's code generation is hawk/targets/); loading what it writes
does not (eagle/artifact.py, reading the format of hawk.abi.artifact).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from hawk import __version__ as HAWK_VERSION
from hawk.abi import cache
from hawk.abi.artifact.format import (
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
from hawk.abi.layout import CELL_SLOTS, Spec, layout_to_json
from hawk.compiler import Kernel


# ---- targets ------------------------------------------------------------------------------------------------
def _build_host(kernel: Kernel, spec: Spec, stage: int, path: Path, desc: bytes, cpu: str | None) -> None:
    """LLVM-dialect IR -> object -> shared library at `path`, carrying its description (format.description) as an
    exported constant string; compiled for this machine's CPU (cpu=None) or the generic CPU `cpu`."""
    _host_library(kernel, spec, stage, path, desc, cpu, finish=False)


def _build_finish(kernel: Kernel, spec: Spec, stage: int, path: Path, desc: bytes, cpu: str | None) -> None:
    """A GPU stage's host finish (the runtime copies partials back and finishes on the host) as a shared library."""
    _host_library(kernel, spec, stage, path, desc, cpu, finish=True)


def _host_library(kernel: Kernel, spec: Spec, stage: int, path: Path, desc: bytes, cpu: str | None,
                  finish: bool) -> None:
    from hawk.targets.build import host_library

    symbol = description_symbol(kernel.stages(spec)[stage].name)
    host_library(kernel, spec, stage, path, finish, cpu, (symbol, desc))


def _gpu_builder(name: str):
    def build(kernel: Kernel, spec: Spec, stage: int, path: Path, chip: str | None = None) -> dict:
        """The device binary at `path`, checked by the target's offline tool (ptxas, ld.lld, spirv-val);
        returns the build's chip and entry name."""
        from hawk.targets import gpu_target
        from hawk.targets.build import device_binary

        target = gpu_target(name, **({"chip": chip} if chip else {}))
        binary = device_binary(kernel, spec, stage, target)  # a target's refusal points at the user's line
        target.check(binary)
        path.write_bytes(binary)
        return {"chip": getattr(target, "chip", name), "entry": f"{kernel.stages(spec)[stage].name}_lanes"}

    build.__name__ = f"_build_{name}"
    return build


def _has_spirv() -> bool:
    import importlib.util

    return importlib.util.find_spec("hawk.targets.spirv") is not None


# One builder per target: (kernel, spec, stage index, output path, ...) -> writes the binary. The host builder also
# takes the library's description and the CPU; a GPU builder takes chip= and returns {"chip", "entry"}, and its
# stage's host finish is built by _build_finish. A new target adds an
# entry here, a suffix in hawk.abi.artifact.format.SUFFIX and a loader in eagle.artifact.LOADERS.
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
    index = [p.name for p in kernel.signature.planes if p.integer_plane]  # Index planes and integer outputs
    for plane, dt in given.items():
        if plane not in index:
            raise ValueError(f"index_dtypes names {plane!r}, which is not an Index plane or integer output of "
                             f"kernel '{kernel.name}' (its Index planes and integer outputs: {index})")
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
          cpu: str = "native", reverse: bool | Iterable[str] = False,
          reverse_extents: Iterable[int] | None = None, reverse_positions: dict[str, int] | None = None) -> Path:
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

    reverse=True also publishes the kernel's adjoint (docs/reverse.md) for every float input (or for the inputs
    named, reverse=("x", "w")), with all its stages, so that `hawk.load(dir, name).reverse(cotangent, **planes)`
    gives plan.reverse's gradients without MLIR. An adjoint whose gradient spans the lanes (a plane read with
    .at, a cell that keeps an axis, stores by key on a grid) is specialised to the lane extents: give them as
    reverse_extents=(n,) or (rows, columns). A float output written by key (hawk.scatter(out)[k] = v) has a
    cotangent per position: give the array length the runs will pass (or their lane count, when they leave it
    out) as reverse_positions={"out": n}.
    """
    kernel = _kernel(kernel)
    n = kernel.stage_count
    if n > 1:
        raise ValueError(f"kernel '{kernel.name}' runs in {n} stages (it reads a value reduced over every lane), and "
                         f"hawk.artifact.build publishes exactly one launch: use hawk.artifact.build_bundle("
                         f"[{kernel.name}], dir) to publish it with all its stages")
    ts = _targets(targets)
    args = (Path(directory), ts, _dtypes(dtypes), _index_dtypes(kernel, index_dtypes), _chips(chips, ts),
            _host_cpu(cpu))
    rev = _publish_reverse(kernel, reverse, (reverse_extents, reverse_positions), *args)
    return _publish(kernel, *args, rev)


def build_bundle(kernels: Iterable[Kernel], directory, targets: Iterable[str] = ("host",),
                 dtypes: Iterable[str] = ("float64",), index_dtypes: dict[str, str] | None = None,
                 chips: dict[str, str] | None = None, cpu: str = "native", reverse: bool | Iterable[str] = False,
                 reverse_extents: Iterable[int] | dict | None = None,
                 reverse_positions: dict | None = None) -> list[Path]:
    """Publish each kernel with all its stages into `directory` (one sidecar each); returns the sidecars' paths.

    `index_dtypes` maps Index plane names to int32/int64 for every kernel that has such a plane; `chips` and
    `cpu` as in build. `reverse` as in build, for every kernel (True, or the inputs to differentiate in each
    kernel that has them); `reverse_extents` one tuple for every kernel or a dict by kernel name;
    `reverse_positions` {output: length} for every kernel that writes such an output by key, or a dict of those by
    kernel name.
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
    every_index = {p.name for k in ks for p in k.signature.planes if p.integer_plane}
    stray = sorted(set(idx) - every_index)
    if stray:
        raise ValueError(f"index_dtypes names {stray[0]!r}, which is not an Index plane of any of {names}")
    per = [_index_dtypes(k, {p: d for p, d in idx.items()
                             if k.signature.get(p) is not None and k.signature.get(p).integer_plane}) for k in ks]
    ch, hc = _chips(chips, ts), _host_cpu(cpu)
    made = [n for k in ks for n in reverse_kernel_names(k.name)] if reverse is not False else []
    clash = next((n for n in names if n in made), None)
    if clash is not None:
        raise ValueError(f"build_bundle(reverse=...) publishes the adjoint kernels beside the kernels, and kernel "
                         f"'{clash}' has the name of one of them: rename it")
    if reverse not in (False, True):
        stray = [x for x in _words(reverse, "reverse") if all(k.signature.get(x) is None for k in ks)]
        if stray:
            raise ValueError(f"reverse= names {stray[0]!r}, which is not a plane of any of {names}")
    paths = []
    for k, i in zip(ks, per, strict=True):
        if reverse is False:
            rev = None
        else:
            ext = reverse_extents.get(k.name) if isinstance(reverse_extents, dict) else reverse_extents
            pos = reverse_positions
            if isinstance(pos, dict) and any(isinstance(v, dict) for v in pos.values()):  # (by kernel name)
                pos = pos.get(k.name)
            elif pos is not None:
                pos = {n: v for n, v in pos.items() if k.signature.get(n) is not None}
            wrt = reverse if reverse is True else [x for x in _words(reverse, "reverse")
                                                   if k.signature.get(x) is not None]
            rev = _publish_reverse(k, wrt, (ext, pos), Path(directory), ts, ds, i, ch, hc) if wrt else None
        paths.append(_publish(k, Path(directory), ts, ds, i, ch, hc, rev))
    return paths


def reverse_kernel_names(name: str) -> tuple[str, ...]:
    """The names of the kernels a reverse build may publish beside kernel `name`: the adjoint, the winners kernel,
    and a stencil's gather form (shares adjoint, gather, Param sums: hawk/reverse/gather.py)."""
    return (f"{name}__reverse", f"{name}__winners", f"{name}__reverse_shares", f"{name}__gather",
            f"{name}__param_sums")


def _reverse_wrt(kernel: Kernel, reverse) -> tuple[str, ...]:
    sig = kernel.signature
    floats = [p.name for p in sig.planes if p.kind in ("lane", "param", "table")]
    # and the float outputs whose initial contents the body reads (differentiated when a run passes them)
    floats += sorted(n for n in kernel.initial_reads() if not sig.get(n).integer)
    names = tuple(floats) if reverse is True else _words(reverse, "reverse")
    bad = [n for n in names if n not in floats]
    if bad:
        raise ValueError(f"reverse= names '{bad[0]}', which is not a float input of kernel '{kernel.name}' (its float "
                         f"inputs: {floats}); reverse=True differentiates all of them")
    if not names:
        raise ValueError(f"kernel '{kernel.name}' has no float input to differentiate: build it without reverse=")
    return names


def _reverse_extents(kernel: Kernel, wrt: tuple[str, ...], extents) -> tuple[int, ...] | None:
    """The lane extents the adjoint is specialised to, where it needs them (hawk.reverse.needs_extents)."""
    from hawk.reverse import needs_extents

    axes = kernel.signature.lane_axes()
    labels = [a.label for a in axes]
    if not needs_extents(kernel, wrt):
        return None
    if extents is None:
        raise ValueError(f"kernel '{kernel.name}': its reverse is specialised to the lane extents (a gradient spans "
                         f"the lanes: a plane read with .at, a cell that keeps an axis, or stores by key on a grid): "
                         f"pass reverse_extents=({', '.join(labels)}) for the runs it will differentiate")
    ext = tuple(extents)
    if len(ext) != len(axes) or not all(isinstance(e, int) and not isinstance(e, bool) and e > 0 for e in ext):
        raise ValueError(f"kernel '{kernel.name}': reverse_extents= takes {len(axes)} positive whole number(s), one "
                         f"per lane axis {labels}, got {extents!r}")
    for a, e in zip(axes, ext, strict=True):
        if a.extent is not None and a.extent != e:
            raise ValueError(f"kernel '{kernel.name}': reverse_extents= gives {e} lanes on axis '{a.label}', which "
                             f"the kernel fixes at {a.extent}")
    return ext


def _reverse_positions(kernel: Kernel, positions) -> tuple:
    """((output, length), ...) for each float output written by key, from reverse_positions={output: length}."""
    from hawk.reverse import facts

    keyed = sorted(facts(kernel).keyed)
    got = dict(positions or {})
    stray = sorted(set(got) - set(keyed))
    if stray:
        raise ValueError(f"kernel '{kernel.name}': reverse_positions= names '{stray[0]}', which is not a float output "
                         f"it writes by key (those: {keyed})")
    for out in keyed:
        n = got.get(out)
        if n is None:
            raise ValueError(f"kernel '{kernel.name}': output plane '{out}' is written by key, and its reverse is made "
                             f"for the array's length: pass reverse_positions={{'{out}': n}} with the length the "
                             f"runs will pass (their lane count, when they leave it out)")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"kernel '{kernel.name}': reverse_positions= gives '{out}' {n!r}; give a positive whole "
                             f"number (the array's length)")
    return tuple((out, got[out]) for out in keyed)


def _publish_reverse(kernel: Kernel, reverse, specialised: tuple, d: Path, targets, dtypes, index_dtypes, chips,
                     host_cpu) -> dict | None:
    """Publish the adjoint (and winners) kernels of `kernel` into `d`; returns the sidecar's reverse entry.
    `specialised`: (reverse_extents, reverse_positions) as given."""
    extents, positions = specialised
    if reverse is False or reverse is None:
        for name, given in (("reverse_extents", extents), ("reverse_positions", positions)):
            if given is not None:
                raise ValueError(f"kernel '{kernel.name}': {name}= is for a build with reverse=True")
        return None
    from hawk.abi.reverse import gather_to_json, info_to_json
    from hawk.reverse import adjoint, winners

    wrt = _reverse_wrt(kernel, reverse)
    ext = _reverse_extents(kernel, wrt, extents)
    pos = _reverse_positions(kernel, positions)
    adj, design = adjoint(kernel, wrt, ext, pos)
    win = winners(kernel, ext, pos) if design.win or design.positions else None

    def publish(k) -> dict:
        idx = {p: t for p, t in index_dtypes.items() if k.signature.get(p) is not None}
        path = _publish(k, d, targets, dtypes, idx, chips, host_cpu)
        return {"kernel": k.name, "content_hash": json.loads(path.read_text())["content_hash"]}

    entry = publish(adj)
    entry.update(winners=None if win is None else publish(win), wrt=list(wrt),
                 extents=None if ext is None else list(ext), **info_to_json(design))
    # a stencil's gradient in gather form (hawk/reverse/gather.py): plain lane kernels, with the adjoint above as
    # the exact path for a call where some lane's pair erred; the loaded door runs them as plan.reverse does
    got = kernel.gather_adjoint(wrt, ext) if ext is not None and not pos else None
    if got is not None:
        shares, _, gk, sk, g = got
        entry["gather"] = {"shares": publish(shares), "gather": publish(gk),
                           "sums": None if sk is None else publish(sk), **gather_to_json(g)}
    return entry


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
             index_dtypes: dict[str, str], chips: dict[str, str], host_cpu: dict, reverse: dict | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    specs = {dt: kernel.spec_for(dt, index_dtypes, auto_sum="ordered") for dt in dtypes}
    # the host's builds give kept cells copies up to CELL_SLOTS, as a host plan does (Spec.cell_slots)
    # (and may read the inexact flag, on x86-64: Spec.mxcsr, built for a CPU with AVX-512F with silent adds:
    # Spec.sae; for AMD Zen, FMAs subtract in compensated chains: Spec.fma_pipes)
    sae = not host_cpu["portable"] and cache.sae_host(host_cpu["features"])
    fma = not host_cpu["portable"] and cache.fma_pipes_host(host_cpu["features"], host_cpu["cpu"])
    flag = not host_cpu["portable"] and cache.mxcsr_host(host_cpu["features"])
    host_specs = {dt: dataclasses.replace(sp, cell_slots=CELL_SLOTS, sae=sae, fma_pipes=fma, mxcsr=flag)
                  for dt, sp in specs.items()}
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
            for tg in targets:
                spec = specs[dt] if tg in GPU_TARGETS else host_specs[dt]
                layout = layout_to_json(kernel.layout(spec, k))
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
                    blob, _ = _write(d, name, BUILDERS[tg], kernel, spec, k, description(head, entry), cpu)
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
    if reverse is not None:
        sidecar["reverse"] = reverse
    sidecar["content_hash"] = content_hash(sidecar)
    path = d / f"{kernel.name}.json"
    text = json.dumps(sidecar, indent=1, allow_nan=False) + "\n"
    check_sidecar(json.loads(text), f"{path} (as built)")  # what a loader will check: a drift fails here
    part = d / f".{kernel.name}.json.{os.getpid()}.part"
    part.write_text(text)
    os.replace(part, path)  # written last: a sidecar only ever names binaries that are complete
    return path
