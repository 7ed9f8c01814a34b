"""The Kernel object behind `@hawk.kernel`: read a Python function once, check it, and build its hawk IR per
specialisation on demand.

What the compiler learns about a kernel (its output modes, its stages, each stage's layout) is also kept in the
disk cache under a key of the kernel's source and the compiler's own source, so a process that finds its
kernels there (and their binaries) runs them without importing MLIR at all.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
from dataclasses import dataclass, field

from hawk.abi import cache
from hawk.abi.layout import Layout, Spec, copy_slots_setting, layout_from_json, layout_to_json, make_spec
from hawk.abi.signature import Signature
from hawk.errors import KernelError
from hawk.frontend.refs import ABSENT, Unkeyable, captured_key, captured_parts, captured_values
from hawk.frontend.source import Source, read_def
from hawk.signature import read_signature


@dataclass(frozen=True)
class Stage:
    """One launch of a kernel: its name, a hash of its hawk IR, the internal cells it reads and writes, the
    outputs it owns, and (once built in this process) the IR text itself."""

    name: str
    key: str
    cells_in: tuple[str, ...]
    cells_out: tuple[str, ...]
    owns: frozenset[str]
    text: str | None = field(default=None, compare=False, repr=False)


@dataclass
class GpuLowered:
    """A stage lowered for a GPU target: the kernel's gpu.module and the host finish (LLVM dialect)."""

    kernel: str
    spec: Spec
    hawk_ir: str
    gpu_module: str
    finish_llvm_ir: str
    layout: Layout


@dataclass
class Lowered:
    """A kernel lowered for a target: LLVM-dialect IR text plus the layout the runtime binds."""

    kernel: str
    spec: Spec
    hawk_ir: str
    llvm_ir: str
    layout: Layout


def _lowering():
    from hawk import lowering  # MLIR: imported only when something must be built

    return lowering


class Kernel:
    """A compiled-on-demand lane kernel. `repr` names it and its planes."""

    def __init__(self, fn, scope: dict | None = None):
        if not inspect.isfunction(fn):
            raise TypeError("@hawk.kernel decorates a plain Python function")
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        text, fdef, file, first = read_def(fn, "@hawk.kernel", kernel=self.name)
        # line numbers inside `fdef` count from the first source line (decorators included)
        self.source = Source(fn, fdef, file, first, self.name)
        self.signature: Signature = read_signature(fn, file, self._param_lines(fdef, first), self.name, scope)
        self._hawk: dict[Spec, tuple[str, dict[str, str]]] = {}
        self._lowered: dict[tuple, Lowered | GpuLowered] = {}
        self._layouts: dict[tuple[Spec, int], Layout] = {}
        self._stages: dict[Spec, list[Stage]] = {}
        self._info_key = _source_key(fn, fdef, text, file, first, repr(self), self.name)
        self._info = _read_info(_info_path(self.name, self._info_key))
        if self._info:  # what is on disk already (persist writes only facts learnt since)
            self._persisted = (_info_path(self.name, self._info_key), _facts_hash(self._info))
        self.stages(self.default_spec())  # read, check and split the body now, so errors surface at decoration
        self._captured = (fdef, first, self._captured_now(fdef, first))  # what the key above was made from

    @staticmethod
    def _param_lines(fdef: ast.FunctionDef, first: int) -> dict[str, int]:
        """The source line of each parameter (and of the def, under 'return'), for error messages."""
        lines = {a.arg: first + a.lineno - 1 for a in (*fdef.args.args, *fdef.args.kwonlyargs)}
        lines["return"] = first + (fdef.returns.lineno if fdef.returns is not None else fdef.lineno) - 1
        return lines

    # ---- description ------------------------------------------------------------------------------
    @property
    def planes(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.signature.planes)

    def __repr__(self) -> str:
        planes = ", ".join(f"{p.name}: {p.describe()}" for p in self.signature.planes)
        ret = f" -> {self.signature.returns.describe()}" if self.signature.returns is not None else ""
        return f"<Kernel {self.name}({planes}){ret}>"

    def __call__(self, *args, **kwargs):
        raise TypeError(f"kernel '{self.name}' runs through eagle: eagle.deploy({self.name}).run(**planes)")

    def default_spec(self) -> Spec:
        """The float64 specialisation under the copy limit in force now ($HAWK_COPY_SLOTS, read as make_spec
        reads it): the one stage_count describes, so that it agrees with the specs runs make."""
        limit = copy_slots_setting()
        known = self.__dict__.get("_default_spec")
        if known is None or known[0] != limit:
            known = self._default_spec = (limit, make_spec(self.signature, "float64", {}))
        return known[1]

    def spec_for(self, float_dtype: str, index_dtypes: dict[str, str], auto_sum: str = "fast") -> Spec:
        return make_spec(self.signature, float_dtype, index_dtypes, auto_sum)

    # ---- what the compiler knows ------------------------------------------------------------------
    @property
    def outputs(self) -> dict[str, str]:
        """Each output's mode: 'lane' (a per-lane plane) or 'cell' (a reduced value)."""
        if "outputs" not in self._info:
            self.hawk_ir()
        return self._info["outputs"]

    def _captured_now(self, fdef: ast.FunctionDef, first: int) -> dict[str, tuple[str, int]]:
        """Each Python value the body reads from outside, as its cache-key text, with the line that reads it."""
        out = {}
        for path, (v, line) in captured_values(self.fn, fdef, first).items():
            try:
                out[path] = ("<absent>" if v is ABSENT else captured_key(v), line)
            except Unkeyable:
                out[path] = ("<unkeyable>", line)
        return out

    def _check_captured(self) -> None:
        """Another specialisation (float32 planes, int64 keys) is built from the kernel's source when first run,
        reading the Python values the body captures again. Its code and its facts in the disk cache are filed under
        the key made at decoration, so a value changed since then would compile code that key does not describe
        (and a later process would load it). Refuse instead, naming the value."""
        fdef, first, then = self._captured
        now = self._captured_now(fdef, first)
        changed = [p for p in sorted(set(then) | set(now)) if then.get(p, ("",))[0] != now.get(p, ("",))[0]]
        if changed:
            path = changed[0]
            line = (now.get(path) or then[path])[1]
            raise KernelError(f"'{path}' has changed since the kernel was decorated: a kernel is compiled from the "
                              "values it captures at decoration, for every dtype. Decorate the kernel again after "
                              "changing it, or pass it as a plane (Param for one number per run)",
                              file=self.source.file, line=line, kernel=self.name)

    def hawk_ir(self, spec: Spec | None = None) -> str:
        """The kernel's hawk-dialect module as text (checked, not yet lowered)."""
        spec = spec or self.default_spec()
        if spec not in self._hawk:
            if "_captured" in self.__dict__:  # after decoration: built from the values the key was made from
                self._check_captured()
            text, outputs, reads = _lowering().build_hawk(self.source, self.signature, self.name, spec)
            self._hawk[spec] = (text, outputs)
            self._info.setdefault("outputs", outputs)
            self._info.setdefault("initial_reads", reads)
        return self._hawk[spec][0]

    def stages(self, spec: Spec | None = None) -> list[Stage]:
        """The kernel's stages (one unless it reads a reduced value later in its body)."""
        spec = spec or self.default_spec()
        if spec in self._stages:
            return self._stages[spec]
        if "_captured" in self.__dict__:  # a specialisation first used after decoration, built or read from disk
            self._check_captured()  # alike: the same refusal whatever the disk cache holds
        known = self._info.get("specs", {}).get(repr(spec))
        if known is not None:
            self._stages[spec] = [Stage(s["name"], s["key"], tuple(s["cells_in"]), tuple(s["cells_out"]),
                                        frozenset(s["owns"])) for s in known["stages"]]
            for k, lay in enumerate(known["layouts"]):
                self._layouts[(spec, k)] = layout_from_json(lay)
            return self._stages[spec]
        self._build_stages(spec)
        return self._stages[spec]

    def _build_stages(self, spec: Spec) -> None:
        """Build the hawk IR, split it, analyse every stage's layout, and record it all in the disk cache."""
        lw = _lowering()
        with lw.front_end():
            text = self.hawk_ir(spec)
            parts = lw.split(text, self.name, self.signature, self.outputs)
            stages = [Stage(n, _hash(t), ci, co, ow, t) for n, t, ci, co, ow in parts]
            multi = len(stages) > 1
            layouts = []
            for st in stages:
                try:
                    layouts.append(lw.stage_layout(self.signature, self.outputs, spec, st, multi))
                except KernelError as exc:  # found on the IR, which keeps no source lines: point at the user's call
                    raise self.located(exc) from None
        self._stages[spec] = stages
        self._layouts.update({(spec, k): lay for k, lay in enumerate(layouts)})
        specs = self._info.setdefault("specs", {})
        specs[repr(spec)] = {
            "stages": [{"name": s.name, "key": s.key, "cells_in": list(s.cells_in), "cells_out": list(s.cells_out),
                        "owns": sorted(s.owns)} for s in stages],
            "layouts": [layout_to_json(self._layouts[(spec, k)]) for k in range(len(stages))]}
        self.persist()

    def persist(self) -> None:
        """Write what the compiler knows about this kernel to the disk cache in use now (if not there yet)."""
        path = _info_path(self.name, self._info_key)
        if path is None or "specs" not in self._info:
            return
        facts = _facts_hash(self._info)  # (a warm start read these very facts: no write, no fsync)
        if (path, facts) != self._persisted or not path.exists():
            _write_info(path, self._info)
            self._persisted = (path, facts)

    _persisted = None

    def stage_text(self, spec: Spec, stage: int) -> Stage:
        """The stage with its hawk IR text (built in this process if it came from the disk cache)."""
        st = self.stages(spec)[stage]
        if st.text is None:
            self._stages.pop(spec, None)
            self._build_stages(spec)
            st = self._stages[spec][stage]
        return st

    @property
    def stage_count(self) -> int:
        """Stages of the kernel (the same for every specialisation made under one copy limit: splitting depends on
        data flow, and on which sinks are too large for private copies, hawk/passes/split_sinks.py)."""
        return len(self._stages.get(self.default_spec()) or self.stages())

    def layout(self, spec: Spec, stage: int = 0) -> Layout:
        """The buffers a stage's compiled lane function takes, read off its hawk IR (no lowering needed)."""
        self.stages(spec)
        return self._layouts[(spec, stage)]

    def located(self, exc: KernelError) -> KernelError:
        """`exc` with the user's file and line filled in when a target refused a call after lowering (which keeps
        no source locations): the first line of this kernel that calls the function it names."""
        call = getattr(exc, "call", None)
        if exc.line is not None or call is None:
            return exc
        line = self.source.call_line(call)
        if line is None:
            return exc
        out = KernelError(exc.text, file=self.source.file, line=line, kernel=exc.kernel or self.name)
        out.call = call
        return out

    # ---- lowering -----------------------------------------------------------------------------------
    def mlir(self, dtype: str = "float64", after: str | None = None, stage: int = 0, spec: Spec | None = None) -> str:
        """The IR as text: hawk dialect by default, or one stage after the named pass of the host pipeline; of
        `spec` when given (another CPU's, say), else of `dtype`'s default specialisation."""
        spec = self.spec_for(dtype, {}) if spec is None else spec
        if not 0 <= stage < self.stage_count:
            raise ValueError(f"kernel '{self.name}' has {self.stage_count} stage(s): "
                             f"stage= is 0..{self.stage_count - 1}")
        if after is None:
            return self.hawk_ir(spec) if self.stage_count == 1 else self.stage_text(spec, stage).text
        from hawk.passes.pipeline import HOST

        if after not in HOST:
            raise ValueError(f"no pass named {after!r}; the host pipeline is {list(HOST)}")
        dumps: dict[str, str] = {}
        st = self.stage_text(spec, stage)
        _lowering().lower_stage(self.signature, self.outputs, spec, st, self.stage_count > 1,
                                dump=lambda n, t: dumps.__setitem__(n, t), stop_after=after)
        return dumps[after]

    def lowered(self, spec: Spec, stage: int = 0) -> Lowered:
        key = (spec, stage)
        if key not in self._lowered:
            st = self.stage_text(spec, stage)
            text, layout = _lowering().lower_stage(self.signature, self.outputs, spec, st,
                                                   len(self.stages(spec)) > 1)
            self._lowered[key] = Lowered(st.name, spec, st.text, text, layout)
        return self._lowered[key]

    def lowered_gpu(self, spec: Spec, stage: int = 0, subgroup: int = 0, atomics: bool = False,
                    wide: bool | str = False) -> GpuLowered:
        """One stage for a GPU target: its gpu.module (upstream dialects; tree, slots or chunk form) as text,
        and its finish function lowered to LLVM for the host (the runtime finishes on the host). `subgroup` is
        the target's shuffle width (32 for a warp, 64 or 32 for a wavefront; 0 for none); `atomics` whether it
        has float atomic adds in global memory (plain scatters into sinks too large to privatise use them);
        `wide` where payloads of more than WIDE_PAYLOAD components take loops over components (the target's
        `wide_loops`: True everywhere, "tree" in the tree form only; compile time about linear in the payload)
        rather than straight-line code per component."""
        key = (spec, stage, "gpu", subgroup, atomics, wide)
        if key not in self._lowered:
            st = self.stage_text(spec, stage)
            gpu_text, finish, layout = _lowering().lower_stage_gpu(self.signature, self.outputs, spec, st,
                                                                  len(self.stages(spec)) > 1, subgroup, atomics,
                                                                  wide)
            self._lowered[key] = GpuLowered(st.name, spec, st.text, gpu_text, finish, layout)
        return self._lowered[key]

    def gpu_finish(self, spec: Spec, stage: int = 0) -> str:
        """A GPU stage's host finish (LLVM dialect). It is the same for every target variant (subgroup width,
        atomics), so one already lowered for the stage serves; else the plain variant is lowered."""
        for key, low in self._lowered.items():
            if key[:3] == (spec, stage, "gpu"):
                return low.finish_llvm_ir
        return self.lowered_gpu(spec, stage).finish_llvm_ir

    # ---- what the runtime asks of a kernel (eagle imports none of the compiler: hawk/targets/build.py) ----------
    def target(self, name: str, **options):
        """The GPU target `name` compiles for (hawk.targets.gpu_target), options checked."""
        from hawk.targets import gpu_target

        return gpu_target(name, **options)

    def build_library(self, spec: Spec, stage: int, path, finish: bool = False) -> None:
        """The stage's host shared library at `path` (finish=True: a GPU stage's host finish)."""
        from hawk.targets.build import host_library

        host_library(self, spec, stage, path, finish)

    def device_binary(self, spec: Spec, stage: int, target) -> bytes:
        """The stage compiled by the GPU `target` (from `self.target`)."""
        from hawk.targets.build import device_binary

        return device_binary(self, spec, stage, target)

    def adjoint(self, wrt: tuple[str, ...], extents: tuple[int, ...] | None, positions: tuple = ()):
        """(adjoint kernel, its design, winners kernel or None) for the inputs `wrt` (hawk/reverse); `positions`:
        (name, length) of each float output written by key."""
        from hawk.reverse import adjoint, winners

        adj, design = adjoint(self, wrt, extents, positions)
        return adj, design, winners(self, extents, positions) if design.win or design.positions else None

    def gather_adjoint(self, wrt: tuple[str, ...], extents: tuple[int, ...]):
        """(shares adjoint, its design, gather kernel, Param sums kernel or None, Gather) for a stencil's
        gradient in gather form, or None when a plane of `wrt` is not read at constant offsets only
        (hawk/reverse/gather.py)."""
        from hawk.reverse.gather import gather_kernels

        return gather_kernels(self, wrt, extents)

    def lane_reach(self, spec: Spec | None = None) -> tuple[dict[str, int | None], bool]:
        """How far `.at` reads reach along the leading lane axis, per per-lane plane (None: any lane), and whether
        the kernel reads its leading coordinate (hawk/ir/reach.py; what eagle.distributed shards by). Read once
        per specialisation (it parses the hawk IR: milliseconds, and a sharded backward asks on every call)."""
        from hawk.ir.reach import lane_reach

        spec = spec or self.default_spec()
        known = self.__dict__.setdefault("_lane_reach", {})
        if spec not in known:
            axes = self.signature.lane_axes()
            per_lane = frozenset(p.name for p in self.signature.planes if p.kind in ("lane", "index"))
            known[spec] = lane_reach(self.hawk_ir(spec), axes[0].label if axes else None, per_lane)
        halo, coordinates = known[spec]
        return dict(halo), coordinates

    def initial_reads(self) -> frozenset[str]:
        """The outputs whose initial contents the body reads before assigning them: the adjoint reads them as
        inputs, and a float one's initial contents have a gradient. Known from the kernel's facts (no MLIR on a
        warm start: a bound launch asks, to keep those contents for its reverse)."""
        if "initial_reads" not in self._info:
            self.hawk_ir()
        return frozenset(self._info["initial_reads"])

    def adjoint_needs_extents(self, wrt: tuple[str, ...]) -> bool:
        """Whether the adjoint for `wrt` is specialised to the lane extents (hawk.reverse.needs_extents)."""
        from hawk.reverse import needs_extents

        return needs_extents(self, wrt)

    def adjoint_reads_other_lanes(self, wrt: tuple[str, ...]) -> bool:
        """Whether the adjoint for `wrt` adds into other lanes' gradients (hawk.reverse.reads_other_lanes)."""
        from hawk.reverse import reads_other_lanes

        return reads_other_lanes(self, wrt)

    def stored_sinks(self) -> frozenset[str]:
        """Sinks the body stores into with `= v` (hawk.reverse.facts): where a lane stored, a sink's prior content
        is replaced, so its gradient there is zero."""
        from hawk.reverse import facts

        return frozenset(facts(self).stored)

    def kept_cells(self) -> dict[str, tuple[str, ...]]:
        """Cells of reductions that keep lane axes, with the axes each keeps (hawk.reverse.facts)."""
        from hawk.reverse import facts

        return dict(facts(self).kept)

    def folds_without_identity(self) -> tuple[tuple[tuple[str, ...], str], ...]:
        """Each hawk.reduce fold without identity= as (its reduced lane axes, how a message names it: into its
        cell, returned, or read later in the body), from the kernel's hawk IR (read once). A sharded run keeps a
        row fold's slots on their shards and refuses one that could find a slot empty on one shard alone."""
        got = self.__dict__.get("_bare_folds")
        if got is None:
            from mlir import ir

            from hawk.ir.access import fold_identity, plane_name, reduce_kind, reduce_over
            from hawk.ir.dialect import is_hawk, new_context

            found = []
            with new_context(), ir.Location.unknown():
                ops, module = [], ir.Module.parse(self.hawk_ir())  # (the module outlives the ops read from it)
                module.operation.walk(lambda o: (ops.append(o), ir.WalkResult.ADVANCE)[1])
                for op in ops:
                    if not is_hawk(op, "reduce") or reduce_kind(op) != "fold" or fold_identity(op) is not None:
                        continue
                    uses = [u.owner for u in op.results[0].uses]
                    cells = [plane_name(u) for u in uses if is_hawk(u, "cell")]
                    what = f"hawk.reduce into '{cells[0]}'" if cells else "the hawk.reduce returned" if any(
                        u.name == "func.return" for u in uses) else "a hawk.reduce read later in the body"
                    found.append((tuple(reduce_over(op)), what))
            got = self.__dict__["_bare_folds"] = tuple(found)
        return got


# ---- the kernel-info disk cache --------------------------------------------------------------------------
def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _source_key(fn, fdef: ast.FunctionDef, text: str, file: str, first: int, signature: str, name: str) -> str:
    """What decides the hawk IR: the source, where it sits (error lines), the signature, and every Python value
    the body names, by value (hawk.frontend.refs.captured_key), including constants read through modules
    (`cfg.SCALE`). A value that cannot be keyed is refused here, with the line that names it."""
    def refuse(path: str, why: str, line: int) -> KernelError:
        return KernelError(f"'{path}' is {why}, which a kernel cannot use as a constant (and hawk cannot key its "
                           "compiled code by it): pass it as a plane instead (Table for an array, Param for one "
                           "number per run), or write a Python number", file=file, line=line, kernel=name)

    return cache.key(text, file, str(first), signature, *captured_parts(fn, fdef, first, refuse))


def _info_path(name: str, key: str):
    d = cache.cache_dir()
    return d / f"{name}-{key}.kernel.json" if d else None


def _read_info(path) -> dict:
    """The facts recorded for a kernel, if the entry is whole: it holds its own sha256 (of the canonical JSON of the
    facts), checked here; an empty, truncated or corrupted entry reads as nothing, so the facts are rebuilt."""
    if path is None or not path.exists():
        return {}
    try:
        entry = json.loads(path.read_bytes())
        info = entry["facts"]
        if isinstance(info, dict) and entry.get("sha256") == _facts_hash(info):
            return info
    except (OSError, ValueError, TypeError, KeyError):
        pass
    return {}


def _facts_hash(info: dict) -> str:
    return hashlib.sha256(json.dumps(info, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _write_info(path, info: dict) -> None:
    """Write the facts atomically with their sha256 (a full disk leaves the old entry or none)."""
    if path is None:
        return
    try:
        cache.write_atomic(path, json.dumps({"sha256": _facts_hash(info), "facts": info}).encode())
    except OSError:
        pass
