"""Loading and running a published artifact, with no compiler: NumPy, ctypes, hawk.abi (the artifact format, the
layout) and eagle's binder and launcher. Nothing here imports MLIR. `hawk.load` / `hawk.run` forward here.

A loaded artifact is data, not code to trust: the sidecar is parsed as JSON, validated against its JSON Schema and
checked for consistency (hawk.abi.artifact: format and read), its content hash is recomputed, every binary's
sha256 is checked against it, and the bytes that were checked are the bytes that get loaded (a private copy, never
the path a second time). Host code built for another CPU is refused before it is mapped, and each library's own
description is compared with the sidecar before anything in it is called. The only code that ever runs is the
compiled kernel's own.

Nothing lost: a run prepares every stage (key checks, shape checks, buffers) before the first launch and hands
results to the caller's arrays only once every stage has run (eagle.stage.run_stages), as eagle's Plan.run does:
a refusal in any stage leaves every array the caller passed as it was.

A sidecar with a `reverse` entry (hawk.artifact.build(..., reverse=True)) names the adjoint's own artifacts in the
same directory, pinned by their content hashes; they are read, checked and loaded with the kernel, and
`loaded.reverse(cotangent, **planes)` runs them through eagle's reverse door (eagle/reverse.py).
"""

from __future__ import annotations

import ctypes
import os
import tempfile
import threading
import uuid

from eagle.binding import Binder
from eagle.errors import InputError, RuntimeMissing
from eagle.launch import Launcher, lane_range, prepare_stages
from eagle.native.reuse import RunCache
from eagle.settings import chosen_chunk, min_chunk_setting, threads_setting
from eagle.stage import run_stages
from hawk.abi.artifact.format import (
    INDEX_DTYPES,
    ArtifactError,
    check_cpu,
    description,
    description_differs,
    description_symbol,
    sha256_bytes,
)
from hawk.abi.artifact.read import Artifact, read
from hawk.abi.layout import layout_from_json
from hawk.abi.signature import Signature

__all__ = ["Artifact", "DeviceBinary", "HostBinary", "LOADERS", "LoadedKernel", "load", "read", "run"]


# ---- targets ------------------------------------------------------------------------------------------------
class HostBinary:
    """A host kernel library loaded from verified bytes: `lanes(void**)` and `finish(void**)`, the interface of
    eagle.targets.host.HostLibrary, without the compiler side. A GPU stage's finish library has no `lanes`.

    The library carries its own description (format.description: dtype, layout, entries...), read right after it is
    mapped and compared with `expect`, the one the sidecar implies, before any function of it is looked up or
    called: a sidecar edited to disagree with its binaries is refused instead of run."""

    def __init__(self, data: bytes, stage: str, where: str, expect: bytes, lanes: bool = True):
        self.lib = _dlopen_bytes(data, stage, where)
        _check_description(self.lib, stage, where, expect)
        self.lanes = self._fn(f"_mlir_{stage}_lanes", where) if lanes else None
        self.finish = self._fn(f"_mlir_{stage}_finish", where)

    def _fn(self, symbol: str, where: str):
        try:
            f = getattr(self.lib, symbol)
        except AttributeError:
            raise ArtifactError(f"{where}: the binary has no function {symbol}; it was not built for this "
                                "stage") from None
        f.argtypes = [ctypes.c_void_p]
        f.restype = None
        return f


def _check_description(lib: ctypes.CDLL, stage: str, where: str, expect: bytes) -> None:
    symbol = description_symbol(stage)
    try:
        got = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, symbol)))
    except (ValueError, AttributeError):
        raise ArtifactError(f"{where}: the binary carries no description of stage '{stage}' ({symbol}): it was not "
                            "built for this stage, or by a hawk without descriptions; rebuild the artifact") from None
    if got != expect:
        raise ArtifactError(f"{where}: the binary does not match the sidecar ({description_differs(got, expect)}): "
                            "the sidecar or the binary was changed after the build; rebuild the artifact")


_LIBS: dict[str, ctypes.CDLL] = {}
_LIBS_LOCK = threading.Lock()
_FDS: list[int] = []  # memory files backing loaded libraries: kept open, so that no later one reuses the path


def _dlopen_bytes(data: bytes, stage: str, where: str) -> ctypes.CDLL:
    """dlopen exactly these bytes (checked by the caller), once per process for the same bytes.

    They go into an anonymous memory file where the OS has one (nothing is written to disk, so a noexec /tmp does
    not matter), else into a private temporary file with a unique name that is removed once loaded. The loader
    matches libraries by path, so a path is never reused: the memory file stays open while the process runs.
    """
    key = sha256_bytes(data)
    with _LIBS_LOCK:
        lib = _LIBS.get(key)
        if lib is None:
            lib = _LIBS[key] = _dlopen_new(data, stage, where)
        return lib


def _dlopen_new(data: bytes, stage: str, where: str) -> ctypes.CDLL:
    errors = []
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create(f"hawk-{stage}")
        try:
            _write_all(fd, data)
            lib = ctypes.CDLL(f"/proc/self/fd/{fd}")
            _FDS.append(fd)
            return lib
        except OSError as exc:
            os.close(fd)
            errors.append(str(exc))
    tmp = tempfile.mkdtemp(prefix="hawk-artifact-")
    path = os.path.join(tmp, f"{stage}-{uuid.uuid4().hex}.so")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        return ctypes.CDLL(path)
    except OSError as exc:
        errors.append(str(exc))
    finally:
        if os.path.exists(path):
            os.unlink(path)
        os.rmdir(tmp)
    raise ArtifactError(f"{where}: the host binary of stage '{stage}' does not load on this machine: "
                        f"{'; '.join(errors)}")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class DeviceBinary:
    """A GPU stage from verified bytes: the device binary (launched by the target's runtime) and the host library
    that finishes the stage."""

    def __init__(self, data: bytes, stage: str, where: str, expect: bytes, finish: bytes, device: dict):
        self.binary = data
        self.entry: str = device["entry"]
        self.chip: str = device["chip"]
        self.finish_lib = HostBinary(finish, stage, f"{where} (finish {device['finish']})", expect, lanes=False)


def device_runtime(target: str):
    """The runtime of a GPU target (RuntimeMissing naming what is missing). It imports the target's launch code,
    which needs NumPy and the vendor runtime, not the compiler."""
    from eagle.targets import runtime

    try:
        return runtime(target)
    except ImportError as exc:
        raise RuntimeMissing(f"target '{target}': its launch code does not import here ({exc})") from exc


# One loader per target: a host loader takes (bytes, stage name, where, expected description) and gives an object
# with `lanes(void**)` and `finish(void**)`; a GPU target's is DeviceBinary (which also takes the finish library's
# bytes and the build's "device" entry). A new target adds an entry here, a builder in builder.BUILDERS and a suffix
# in format.SUFFIX.
LOADERS = {"host": HostBinary, "nvvm": DeviceBinary, "rocdl": DeviceBinary, "spirv": DeviceBinary}


# ---- the loaded kernel --------------------------------------------------------------------------------------
class _PlanView:
    """What eagle.native.reuse.RunCache reads and writes of a plan, for a loaded artifact's host runs: its binder,
    stage count, lane range and prepared stages (with the artifact's dtype checks), and the facts of its latest
    run."""

    def __init__(self, loaded: LoadedKernel):
        self.loaded, self.binder, self.kernel = loaded, loaded.binder, self

    @property
    def stage_count(self) -> int:
        return self.loaded.stage_count

    def lane_range(self, base, count, lanes: int, stages: int) -> tuple[int, int]:
        return self.loaded._lane_range(base, count, lanes)

    def stages(self, b, lo: int, hi: int) -> tuple[list, dict]:
        return self.loaded.prepare_run(b, lo, hi)

    def __setattr__(self, name: str, value) -> None:  # (a run's facts land on the loaded kernel)
        object.__setattr__(self.loaded if name in ("last_chunks", "last_executor") else self, name, value)


class LoadedKernel:
    """A published kernel loaded for one target: run it with hawk.run(loaded, **planes) or loaded.run(...)."""

    def __init__(self, art: Artifact, target: str = "host", threads: int | None = None,
                 min_chunk: int | None = None):
        sc = art.sidecar
        where = str(art.directory / f"{sc['name']}.json")
        if target not in sc["targets"]:
            raise ArtifactError(f"{where}: kernel '{sc['name']}' was built for targets {sc['targets']}, not "
                                f"{target!r}")
        if target not in LOADERS:
            raise ArtifactError(f"{where}: this hawk cannot load target {target!r}; it loads {sorted(LOADERS)}")
        self.name: str = sc["name"]
        self.directory = art.directory
        self.target = target
        try:
            self.threads = threads_setting(threads)
            self.min_chunk = min_chunk_setting(min_chunk)
            self.chosen_chunk = chosen_chunk(min_chunk)
        except ValueError as exc:
            raise ValueError(f"hawk.load({sc['name']}): {exc}") from None
        self.last_chunks: tuple[int, ...] = ()  # the chunks each stage of the latest run ran
        self.content_hash: str = sc["content_hash"]
        self.hawk_version: str = sc["hawk_version"]
        self.dtypes: tuple[str, ...] = tuple(sc["dtypes"])
        self.index_dtypes: dict[str, str] = dict(sc["index_dtypes"])
        self.outputs: dict[str, str] = dict(sc["outputs"])
        self.stages = [(st["kernel"], tuple(st["cells_in"]), tuple(st["cells_out"])) for st in sc["stages"]]
        self.cells: dict[str, bool] = {c["name"]: c["internal"] for c in sc["cells"]}
        try:
            self.signature = Signature.from_json(sc["planes"])
        except (KeyError, TypeError, ValueError) as exc:  # unreachable after check_sidecar; kept as a backstop
            raise ArtifactError(f"{where}: the planes do not describe a signature: {exc}") from None
        self.binder = Binder(self.name, self.signature, self.outputs)
        builds = {(b["stage"], b["dtype"], b["target"]): b for b in sc["builds"]}
        check_cpu(sc["host_cpu"], where)  # before any host library is mapped
        load = LOADERS[target]
        self._runs: dict[str, list] = {}
        for dtype in self.dtypes:
            runs = []
            for stage, _, _ in self.stages:
                b = builds[(stage, dtype, target)]
                try:
                    layout = layout_from_json(b["layout"])
                except (KeyError, TypeError, ValueError) as exc:  # a backstop, as above
                    raise ArtifactError(f"{where}: the layout of {b['file']!r} is malformed: {exc}") from None
                at = f"{where}: {b['file']}"
                expect = description(sc, b)
                if "device" in b:
                    lib = load(art.binaries[b["file"]], stage, at, expect, art.binaries[b["device"]["finish"]],
                               b["device"])
                else:
                    lib = load(art.binaries[b["file"]], stage, at, expect)
                runs.append((lib, Launcher(self.binder, layout, self.threads, self.min_chunk, self.chosen_chunk)))
            self._runs[dtype] = runs
        self._runtime = None
        self.last_executor: tuple[str, ...] = ()  # which executor ran each stage of the latest host run
        # prepared host runs reused by shape, as Plan.run's (eagle/native/reuse.py: a host run's results hold no
        # internal cell, which stay inside the prepared stages)
        self._host_runs = RunCache(_PlanView(self)) if target == "host" else None
        self.last_reverse_chunks: tuple[int, ...] = ()
        self._reverse = ReverseSource(self, art, sc["reverse"], where) if "reverse" in sc else None

    @property
    def planes(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.signature.planes)

    def runtime(self):
        """A GPU target's runtime, made at the first run (eagle.RuntimeMissing where the machine lacks it)."""
        if self._runtime is None:
            self._runtime = device_runtime(self.target)
        return self._runtime

    @property
    def stage_count(self) -> int:
        return len(self.stages)

    def __repr__(self) -> str:
        return (f"<hawk.artifact {self.name}: {self.stage_count} stage(s), {'/'.join(self.dtypes)}, "
                f"target={self.target}, from {self.directory}>")

    def run(self, base: int | None = None, count: int | None = None, **planes):
        """Run over every lane (or lanes [base, base + count) of a single-stage kernel); results as Plan.run:
        one output as an eagle.Array, several as a dict sorted by name. Internal cells are not handed back."""
        if self._host_runs is not None:
            return self._host_runs.run(base, count, planes)
        from eagle.targets import device_planes  # (device arrays bound where they lie)

        b = device_planes.bind(self, planes)
        lo, hi = self._lane_range(base, count, b.lanes)
        stages, results = self.prepare_run(b, lo, hi)
        run_stages(stages)
        self.last_chunks = tuple(st.nchunks for st in stages)
        results = {k: v for k, v in results.items() if not self.cells.get(k, False)}
        if len(results) == 1:
            return next(iter(results.values()))
        return {k: results[k] for k in sorted(results)}

    def prepare_run(self, b, lo: int, hi: int) -> tuple[list, dict]:
        """Every stage of a run over lanes [lo, hi) of the bound planes `b` prepared (dtype and key dtypes
        checked against the build): (stages, results by name), as eagle's Plan.stages."""
        runs = self._runs.get(b.dtype.name)
        if runs is None:
            raise InputError(f"kernel '{self.name}': this artifact was built for {list(self.dtypes)}, the planes are "
                             f"{b.dtype.name}: convert them, or rebuild with dtypes=({b.dtype.name!r},)")
        got = dict(b.spec.index_dtypes)
        for plane, want in self.index_dtypes.items():
            if got.get(plane) != want:
                raise InputError(f"plane '{plane}' of kernel '{self.name}': this artifact was built for {want} "
                                 f"{'outputs' if self.signature.get(plane).kind == 'output' else 'keys'}, "
                                 f"got {got.get(plane)} (convert with .astype(np.{want})"
                                 f"{_rebuild(plane, got.get(plane))})")
        return self._prepare(runs, b, lo, hi)

    def _prepare(self, runs: list, b, lo: int, hi: int) -> tuple[list, dict]:
        """Every stage prepared before any launches, as eagle's Plan.stages (eagle.launch.prepare_stages)."""
        if self.target == "host":
            return prepare_stages(runs, b, lo, hi)
        runtime = self.runtime()
        from eagle.targets.device import DeviceStage

        def device_stage(k: int, cuts: dict):
            lib, launcher = runs[k]
            return DeviceStage(launcher, lib.binary, lib.entry, runtime, lib.finish_lib, b, lo, hi, cuts)

        return prepare_stages(runs, b, lo, hi, device_stage)

    def reverse(self, cotangent=None, wrt=None, /, **planes) -> dict:
        """The gradients of the outputs weighted by `cotangent`, by input name, as eagle's plan.reverse gives
        them (docs/reverse.md), from the adjoint built into the artifact (hawk.artifact.build(..., reverse=True)).
        A kernel with a plane named `cotangent` or `wrt` passes that plane by keyword, the argument positionally."""
        from eagle.reverse import Reverse, split_args

        if self._reverse is None:
            raise InputError(f"kernel '{self.name}': this artifact was built without its reverse: rebuild it with "
                             "hawk.artifact.build(..., reverse=True) (hawk-artifact build --reverse)")
        cotangent, wrt, planes = split_args(self, cotangent, wrt, planes)
        return Reverse(self, planes, wrt, self._reverse)(cotangent)

    @property
    def reverse_wrt(self) -> tuple[str, ...]:
        """The inputs the artifact's reverse differentiates (empty when it was built without one)."""
        return () if self._reverse is None else self._reverse.built

    def _lane_range(self, base, count, lanes: int) -> tuple[int, int]:
        return lane_range(self.name, base, count, lanes, self.stage_count)


_CT_PLANE = {"lane": "lane", "param": "param", "table": "table"}
_GRAD_PLANE = {"lane": "output", "cell": "output", "sink": "sink"}


class ReverseSource:
    """The adjoint (and winners) kernels an artifact was built with, loaded like the forward and checked against
    it: their sidecars are pinned by the content hashes the forward's sidecar records, their planes hold the
    forward's inputs unchanged and the cotangent and gradient planes the sidecar names. Called by eagle.reverse's
    door as `source(forward, wrt, extents)`."""

    def __init__(self, fwd: LoadedKernel, art: Artifact, rev: dict, where: str):
        from eagle.reverse import info_from_json

        self.forward, self.info = fwd, info_from_json(rev)
        self.built: tuple[str, ...] = tuple(rev["wrt"])
        self.extents = None if rev["extents"] is None else tuple(rev["extents"])
        opts = dict(target=fwd.target, threads=fwd.threads, min_chunk=fwd.min_chunk)
        self.adjoint = LoadedKernel(read(art.directory, rev["kernel"], rev["content_hash"]), **opts)
        win = rev["winners"]
        self.winners = None if win is None else LoadedKernel(read(art.directory, win["kernel"],
                                                                  win["content_hash"]), **opts)
        for k in (self.adjoint, self.winners):
            if k is not None:
                self._check(k, where)
        self.gathered = None  # a stencil's gradient in gather form: (shares adjoint, gather, Param sums, planes)
        if rev.get("gather") is not None:
            from hawk.abi.reverse import gather_from_json

            g = rev["gather"]

            def kernel(entry):
                return None if entry is None else LoadedKernel(read(art.directory, entry["kernel"],
                                                                    entry["content_hash"]), **opts)

            self.gathered = (kernel(g["shares"]), kernel(g["gather"]), kernel(g["sums"]), gather_from_json(g))
            self._check_gather(where)

    def _check(self, k: LoadedKernel, where: str, inputs: bool = True, want: dict | None = None) -> None:
        """`k` was built for the forward's dtypes and (`inputs`) takes its inputs unchanged, and has the planes
        `want` names ({name: kind}; the adjoint's: its cotangent, gradient and winners planes)."""
        fwd, info = self.forward.signature, self.info
        if k.dtypes != self.forward.dtypes or k.index_dtypes != {n: d for n, d in self.forward.index_dtypes.items()
                                                                 if k.signature.get(n) is not None}:
            raise ArtifactError(f"{where}: the reverse kernel '{k.name}' was built for other dtypes than the kernel")

        def same(p, q) -> bool:
            return q is not None and (p.kind, p.payload.shape, tuple(p.axes), p.sorted) == \
                (q.kind, q.payload.shape, tuple(q.axes), q.sorted)

        for p in fwd.planes if inputs else ():
            if p.kind in ("lane", "index", "param", "table", "grid") and not same(p, k.signature.get(p.name)):
                raise ArtifactError(f"{where}: the reverse kernel '{k.name}' does not take plane '{p.name}' as the "
                                    "kernel does: the artifact was not built as one")
        if want is None and k is self.adjoint:
            want = {**{info.ct[o]: _CT_PLANE[info.ct_kind[o]] for o in info.ct},
                    **{info.grad[x]: _GRAD_PLANE[info.grad_kind[x]] for x in info.grad},
                    **{t: "table" for t in info.win.values()}}
        for name, kind in (want or {}).items():
            got = k.signature.get(name)
            if got is None or got.kind != kind:
                raise ArtifactError(f"{where}: the reverse kernel '{k.name}' has no {kind} plane '{name}', which the "
                                    "sidecar's reverse names")

    def _check_gather(self, where: str) -> None:
        """The gather form's kernels take the planes the sidecar names: the shares adjoint takes the adjoint's
        planes but for the gradients gathered or summed elsewhere, and writes the share planes; the gather reads
        those and writes the gradients and the flag cell; the Param sums kernel reads the Params' share planes
        and writes their gradient cells."""
        shares, gather, sums, g = self.gathered
        info = self.info
        elsewhere = {*g.grad.values(), *g.sums}
        self._check(shares, where, want={
            **{info.ct[o]: _CT_PLANE[info.ct_kind[o]] for o in info.ct},
            **{info.grad[x]: _GRAD_PLANE[info.grad_kind[x]] for x in info.grad if info.grad[x] not in elsewhere},
            **{t: "table" for t in info.win.values()}, **{s: "output" for s in (*g.shares, *g.sums.values())}})
        self._check(gather, where, inputs=False,
                    want={**{s: "lane" for s in g.shares}, **{o: "output" for o in (*g.grad.values(), g.flag)}})
        if sums is not None:
            self._check(sums, where, inputs=False,
                        want={**{s: "lane" for s in g.sums.values()}, **{c: "output" for c in g.sums}})

    def gather(self, wrt: tuple[str, ...], extents: tuple[int, ...]):
        """(shares adjoint, Info, gather, Param sums or None, GatherPlanes) for eagle.reverse's door, or None when
        the artifact has no gather form (the adjoint serves, with the same bits)."""
        if self.gathered is None:
            return None
        shares, gather, sums, g = self.gathered
        return shares, self.info, gather, sums, g

    def __call__(self, fwd, wrt: tuple[str, ...], extents: tuple[int, ...], positions: tuple = ()):
        if self.extents is not None and tuple(extents) != self.extents:
            raise InputError(f"kernel '{self.forward.name}': reverse: this artifact's reverse was built for lane "
                             f"extents {self.extents} (a gradient spans the lanes), the planes have "
                             f"{tuple(extents)}: rebuild it with reverse_extents={tuple(extents)}")
        if dict(positions) != self.info.positions:
            raise InputError(f"kernel '{self.forward.name}': reverse: this artifact's reverse was built for outputs "
                             f"written by key of lengths {self.info.positions}, this run's are {dict(positions)}: "
                             f"rebuild it with reverse_positions={dict(positions)}")
        return self.adjoint, self.info, self.winners


def load(directory, name: str, target: str = "host", threads: int | None = None,
         content_hash: str | None = None, min_chunk: int | None = None) -> LoadedKernel:
    """Load kernel `name` published in `directory` by hawk.artifact.build or build_bundle.

    The sidecar and binaries are checked first (ArtifactError on anything amiss); `content_hash=` pins the
    artifact to a hash you recorded. `threads` is the number of host threads (EAGLE_THREADS or every core);
    `min_chunk` the fewest lanes a host chunk takes (as eagle.deploy's: else $EAGLE_MIN_CHUNK, else the default).
    """
    return LoadedKernel(read(directory, name, content_hash), target, threads, min_chunk)


def run(loaded: LoadedKernel, base: int | None = None, count: int | None = None, **planes):
    """Run a loaded artifact: hawk.run(hawk.load(dir, name), **planes). Pass a cell's output array ((1,) for a
    scalar cell, (columns,) for a vector cell) to have it filled in place."""
    if not isinstance(loaded, LoadedKernel):
        raise TypeError(f"hawk.run takes what hawk.load(dir, name) returns, got {type(loaded).__name__}; run a "
                        "@hawk.kernel with eagle.deploy(kernel).run(...)")
    return loaded.run(base=base, count=count, **planes)


def _rebuild(plane: str, got: str | None) -> str:
    """The rebuild hint of a dtype refusal, offered only for a dtype an artifact can be built for."""
    if got in INDEX_DTYPES:
        return f", or rebuild with index_dtypes={{'{plane}': '{got}'}}"
    return f"; artifacts are built for {' or '.join(INDEX_DTYPES)} only"
