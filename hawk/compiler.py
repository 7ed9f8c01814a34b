"""The Kernel object behind `@hawk.kernel`: read a Python function once, check it, and build its hawk IR
per dtype on demand."""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from functools import cached_property

from mlir import ir, passmanager

from hawk.errors import KernelError
from hawk.frontend.visitor import KernelBuilder, Source
from hawk.ir.dialect import attr_str, attr_strs, is_hawk, new_context
from hawk.layout import Layout, Spec, make_spec
from hawk.passes.analysis import analyse, written_names
from hawk.passes.pipeline import GPU, HOST, LLVM_PIPELINE, Job, Pipeline
from hawk.passes.stages import split_stages
from hawk.signature import Signature, read_signature

_FTYPES = {"float64": ir.F64Type, "float32": ir.F32Type}
_ITYPES = {"int32": 32, "int64": 64}


@dataclass(frozen=True)
class Stage:
    """One launch of a kernel: its hawk IR, the internal cells it reads and writes, the outputs it owns."""

    name: str
    text: str
    cells_in: tuple[str, ...]
    cells_out: tuple[str, ...]
    owns: frozenset[str]


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


class Kernel:
    """A compiled-on-demand lane kernel. `repr` names it and its planes."""

    def __init__(self, fn):
        if not inspect.isfunction(fn):
            raise TypeError("@hawk.kernel decorates a plain Python function")
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        file = inspect.getsourcefile(fn) or fn.__code__.co_filename
        try:
            lines, first = inspect.getsourcelines(fn)
        except OSError as exc:
            raise KernelError("the kernel's source is not available (define kernels in a file or notebook cell)",
                              file=file, line=fn.__code__.co_firstlineno, kernel=self.name) from exc
        tree = ast.parse(textwrap.dedent("".join(lines)))
        fdef = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
        # line numbers inside `fdef` count from the first source line (decorators included)
        self.source = Source(fn, fdef, file, first, self.name)
        self.signature: Signature = read_signature(fn, file, self._param_lines(fdef, first), self.name)
        self._hawk: dict[Spec, tuple[str, dict[str, str]]] = {}
        self._lowered: dict[tuple, Lowered | GpuLowered] = {}
        self._layouts: dict[tuple[Spec, int], Layout] = {}
        self._stages: dict[Spec, list[Stage]] = {}
        self.stages(self.default_spec())  # read, check and split the body now, so errors surface at decoration

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
        return make_spec(self.signature, "float64", {})

    def spec_for(self, float_dtype: str, index_dtypes: dict[str, str], auto_sum: str = "fast") -> Spec:
        return make_spec(self.signature, float_dtype, index_dtypes, auto_sum)

    # ---- IR ---------------------------------------------------------------------------------------
    def _types(self, spec: Spec):
        ftype = _FTYPES[spec.float_dtype].get()
        itypes = {n: ir.IntegerType.get_signless(_ITYPES[d]) for n, d in spec.index_dtypes}
        return ftype, itypes

    def _build(self, spec: Spec) -> tuple[ir.Module, dict[str, str]]:
        ftype, itypes = self._types(spec)
        builder = KernelBuilder(self.source, self.signature, ftype, itypes)
        module = builder.build()
        try:
            module.operation.verify()
        except ir.MLIRError as exc:  # a front-end bug, not a user error
            raise RuntimeError(f"internal error: hawk IR of kernel '{self.name}' does not verify: {exc}") from exc
        Pipeline(("verify-hawk",)).run(module, None)
        if spec.auto_sum == "ordered":
            _auto_sums_ordered(module)
        return module, builder.outputs

    def hawk_ir(self, spec: Spec | None = None) -> str:
        """The kernel's hawk-dialect module as text (checked, not yet lowered)."""
        spec = spec or self.default_spec()
        if spec not in self._hawk:
            with new_context(), ir.Location.unknown():
                module, outputs = self._build(spec)
                self._hawk[spec] = (str(module), outputs)
        return self._hawk[spec][0]

    def stages(self, spec: Spec | None = None) -> list[Stage]:
        """The kernel's stages (one unless it reads a reduced value later in its body)."""
        spec = spec or self.default_spec()
        if spec not in self._stages:
            text = self.hawk_ir(spec)
            with new_context(), ir.Location.unknown():
                reserved = frozenset(self.planes) | {"result"}
                parts = split_stages(text, self.name, reserved)
                names = {p.name for p in self.signature.planes if p.kind in ("output", "sink")} | set(
                    self._hawk[spec][1])
                written = [written_names(ir.Module.parse(p.text)) & names for p in parts]
                unwritten = names - set().union(*written)
                self._stages[spec] = [
                    Stage(p.name, p.text, p.cells_in, p.cells_out,
                          frozenset(w | (unwritten if k == len(parts) - 1 else set())))
                    for k, (p, w) in enumerate(zip(parts, written, strict=True))]
        return self._stages[spec]

    @property
    def stage_count(self) -> int:
        return len(self.stages())

    def mlir(self, dtype: str = "float64", after: str | None = None, stage: int = 0) -> str:
        """The IR as text: hawk dialect by default, or one stage after the named pass of the host pipeline."""
        spec = self.spec_for(dtype, {})
        if not 0 <= stage < self.stage_count:
            raise ValueError(f"kernel '{self.name}' has {self.stage_count} stage(s): "
                             f"stage= is 0..{self.stage_count - 1}")
        if after is None:
            return self.hawk_ir(spec) if stage == 0 and self.stage_count == 1 else self.stages(spec)[stage].text
        dumps: dict[str, str] = {}
        self._lower(spec, stage, dump=lambda n, t: dumps.__setitem__(n, t), stop_after=after)
        if after not in dumps:
            raise ValueError(f"no pass named {after!r}; the host pipeline is {list(HOST)}")
        return dumps[after]

    def layout(self, spec: Spec, stage: int = 0) -> Layout:
        """The buffers a stage's compiled lane function takes, read off its hawk IR (no lowering needed)."""
        key = (spec, stage)
        if key not in self._layouts:
            st = self.stages(spec)[stage]
            with new_context(), ir.Location.unknown():
                self._layouts[key] = self._analyse(ir.Module.parse(st.text), spec, st)
        return self._layouts[key]

    def _analyse(self, module: ir.Module, spec: Spec, st: Stage) -> Layout:
        owns = None if self.stage_count == 1 else set(st.owns)
        return analyse(module, self.signature, self._hawk[spec][1], st.name, _short(spec), owns, st.cells_out)

    def lowered(self, spec: Spec, stage: int = 0) -> Lowered:
        key = (spec, stage)
        if key not in self._lowered:
            self._lowered[key] = self._lower(spec, stage)
        return self._lowered[key]

    def _lower(self, spec: Spec, stage: int = 0, dump=None, stop_after=None) -> Lowered:
        st = self.stages(spec)[stage]
        with new_context() as ctx, ir.Location.unknown():
            ctx.allow_unregistered_dialects = False
            module = ir.Module.parse(st.text)
            ftype, itypes = self._types(spec)
            layout = self._analyse(module, spec, st)
            Pipeline(HOST).run(module, Job(layout, ftype, itypes), dump=dump, stop_after=stop_after)
            return Lowered(st.name, spec, st.text, str(module), layout)

    def lowered_gpu(self, spec: Spec, stage: int = 0) -> GpuLowered:
        """One stage for a GPU target: its gpu.module (upstream dialects, one chunk of lanes per thread) as text,
        and its finish function lowered to LLVM for the host (the runtime finishes on the host)."""
        key = (spec, stage, "gpu")
        if key not in self._lowered:
            st = self.stages(spec)[stage]
            with new_context(), ir.Location.unknown():
                module = ir.Module.parse(st.text)
                ftype, itypes = self._types(spec)
                layout = self._analyse(module, spec, st)
                Pipeline(GPU).run(module, Job(layout, ftype, itypes))
                gpu_text = "module attributes {gpu.container_module} {\n" + "\n".join(
                    str(op) for op in module.body.operations if op.operation.name == "gpu.module") + "\n}\n"
                for op in list(module.body.operations):
                    if op.operation.name == "gpu.module":
                        op.operation.erase()
                passmanager.PassManager.parse(LLVM_PIPELINE).run(module.operation)
                self._lowered[key] = GpuLowered(st.name, spec, st.text, gpu_text, str(module), layout)
        return self._lowered[key]

    @cached_property
    def outputs(self) -> dict[str, str]:
        """Each output's mode: 'lane' (a per-lane plane) or 'cell' (a reduced value)."""
        self.hawk_ir()
        return self._hawk[self.default_spec()][1]


def _auto_sums_ordered(module: ir.Module) -> None:
    """Make every policy="auto" sum over all lanes an ordered one (artifact builds)."""

    def visit(op):
        if is_hawk(op, "reduce") and attr_str(op, "policy") == "auto" and attr_str(op, "kind") in ("sum", "mean") \
                and not _keeps_axes(op):
            op.attributes["policy"] = ir.StringAttr.get("ordered")
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)


def _keeps_axes(op) -> bool:
    over = set(attr_strs(op, "over"))
    func_op = op.operation.parent
    while func_op.name != "func.func":
        func_op = func_op.parent
    return False if "hawk.axes" not in func_op.attributes else bool(set(attr_strs(func_op, "hawk.axes")) - over)


def _short(spec: Spec) -> dict[str, str]:
    return {n: ("i32" if d == "int32" else "i64") for n, d in spec.index_dtypes}


