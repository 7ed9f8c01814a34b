"""The Layout as IR: the facts a kernel func carries, the `plan-buffers` pass, and the attribute codec.

A kernel func carries what the analysis needs beyond its body, as attributes (written by `annotate` when the
front end builds a kernel's IR, so `Kernel.mlir()` text compiles alone):
  hawk.signature  its planes (kind, payload, axes) and return payload, as Signature.to_json in attribute form
  hawk.outputs    [[name, "lane" | "cell" | "scatter" | "scatter-run"], ...] each output's mode ("scatter":
                  written by key, every key read straight from an Index plane; "scatter-run": some key computed)
  hawk.spec       {float = f64, index = {i = i32}[, floats = {y = f32}][, copies = N][, cells = N][, sae]
                  [, fma_pipes][, mxcsr]}: the specialisation's element types (floats: the per-lane float
                  outputs of another float type, which the stores convert into; copies: Spec.copy_slots, the
                  largest sink with private copies, when not the default; cells: Spec.cell_slots, the same for
                  reductions keeping axes: a host plan's; sae: Spec.sae, the code runs on x86-64 with AVX-512F;
                  fma_pipes: Spec.fma_pipes, on AMD Zen; mxcsr: Spec.mxcsr, on x86-64 with AVX and FMA)
  hawk.stage      {cells_in, cells_out, owns}: one stage of a split kernel (written by split-stages)
`plan-buffers` runs hawk/passes/analysis.py on that and writes the result as `hawk.layout` on the func, a
dictionary whose ordered maps are arrays of [key, value] pairs and whose buffers read "name:role:dtype". The
lowering passes read it there and move it onto the module, where it survives the LLVM lowering; the compiler
reads the Layout the runtime gets back from the lowered module (`module_layout`).
"""

from __future__ import annotations

import dataclasses

from mlir import ir

from hawk.abi.layout import PAIR_SLOTS, PRIVATE_SLOTS, Layout, Spec, layout_from_json, layout_to_json
from hawk.abi.signature import Signature
from hawk.passes.analysis import analyse
from hawk.passes.base import ModulePass, kernel_funcs, register

LAYOUT = "hawk.layout"
_ORDERED_MAPS = ("outputs", "sinks", "index_keys", "sink_policy", "private")
_FLOATS = {"float64": ir.F64Type, "float32": ir.F32Type}
_INDEX_WIDTHS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}  # (int8/int16: integer outputs only)


# ---- plain values <-> attributes ---------------------------------------------------------------------------
def to_attr(v: object) -> ir.Attribute:
    """A JSON-like value as an attribute: dict -> dictionary, list -> array, None -> unit."""
    if isinstance(v, dict):
        return ir.DictAttr.get({str(k): to_attr(x) for k, x in v.items()})
    if isinstance(v, (list, tuple)):
        return ir.ArrayAttr.get([to_attr(x) for x in v])
    if isinstance(v, bool):
        return ir.BoolAttr.get(v)
    if isinstance(v, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)
    if isinstance(v, str):
        return ir.StringAttr.get(v)
    if v is None:
        return ir.UnitAttr.get()
    raise TypeError(f"no attribute form for {type(v).__name__}")


def from_attr(a: ir.Attribute) -> object:
    """The JSON-like value of an attribute written by `to_attr`."""
    if isinstance(a, ir.DictAttr):
        return {n.name: from_attr(n.attr) for n in a}
    if isinstance(a, ir.ArrayAttr):
        return [from_attr(x) for x in a]
    if isinstance(a, ir.BoolAttr):
        return bool(a.value)
    if isinstance(a, ir.IntegerAttr):
        return int(a.value)
    if isinstance(a, ir.StringAttr):
        return a.value
    if isinstance(a, ir.UnitAttr):
        return None
    raise ValueError(f"unexpected attribute {a} in a hawk fact")


def _get(op, name: str, what: str) -> ir.Attribute:
    attrs = op.operation.attributes
    if name not in attrs:
        sym = ir.StringAttr(attrs["sym_name"]).value if "sym_name" in attrs else op.operation.name
        hint = "" if name == LAYOUT else (": Kernel.mlir() prints a kernel's IR with its facts, "
                                          "hawk.passes.plan.annotate writes them")
        raise ValueError(f"'{sym}' has no {name} attribute ({what}){hint}")
    return attrs[name]


# ---- the layout ---------------------------------------------------------------------------------------------
def layout_attr(lay: Layout) -> ir.Attribute:
    d = layout_to_json(lay)
    for k in _ORDERED_MAPS:
        d[k] = [[n, v] for n, v in d[k].items()]
    d["buffers"] = [f"{b['name']}:{b['role']}:{b['dtype']}" for b in d["buffers"]]
    return to_attr(d)


def layout_of_attr(a: ir.Attribute) -> Layout:
    d = from_attr(a)
    for k in _ORDERED_MAPS:
        d[k] = {n: v for n, v in d[k]}
    d["buffers"] = [dict(zip(("name", "role", "dtype"), b.rsplit(":", 2), strict=True)) for b in d["buffers"]]
    return layout_from_json(d)


def func_layout(func) -> Layout:
    """The Layout plan-buffers wrote on a kernel func (refused in one line when it has none)."""
    return layout_of_attr(_get(func, LAYOUT, "run plan-buffers first"))


def module_layout(module: ir.Module) -> Layout:
    """The Layout a lowered (or planned single-stage) module carries."""
    if LAYOUT in module.operation.attributes:
        return layout_of_attr(module.operation.attributes[LAYOUT])
    funcs = kernel_funcs(module)
    if len(funcs) != 1:
        raise ValueError(f"the module carries no {LAYOUT}: run plan-buffers (and a lowering pass) first")
    return layout_of_attr(_get(funcs[0], LAYOUT, "run plan-buffers first"))


def take_layout(module: ir.Module, what: str) -> tuple[object, Layout]:
    """For a lowering pass: the module's one kernel func and its planned Layout, which moves onto the module."""
    funcs = kernel_funcs(module)
    if len(funcs) != 1:
        raise ValueError(f"{what} lowers a module holding one kernel func (one stage), found {len(funcs)}: run "
                         "split-stages and lower each stage in its own module")
    attr = _get(funcs[0], LAYOUT, "run plan-buffers first")
    module.operation.attributes[LAYOUT] = attr
    return funcs[0], layout_of_attr(attr)


# ---- the facts ----------------------------------------------------------------------------------------------
def spec_types(spec: Spec) -> tuple[ir.Type, dict[str, ir.Type]]:
    """The MLIR float type of a specialisation and the element type of each plane whose dtype is its own: an
    Index plane's or integer output's integer type, a float output's float type (in the current context)."""
    return (_FLOATS[spec.float_dtype].get(),
            {**{n: ir.IntegerType.get_signless(_INDEX_WIDTHS[d]) for n, d in spec.index_dtypes},
             **{n: _FLOATS[d].get() for n, d in spec.float_outputs}})


def annotate(module: ir.Module, sig: Signature, outputs: dict[str, str], spec: Spec,
             stage: tuple[tuple[str, ...], tuple[str, ...], frozenset[str]] | None = None) -> None:
    """Write the Python-side facts onto the module's kernel func (`stage`: cells_in, cells_out, owns)."""
    (func,) = kernel_funcs(module)
    attrs = func.operation.attributes
    attrs["hawk.signature"] = to_attr(sig.to_json())
    attrs["hawk.outputs"] = to_attr([[n, m] for n, m in outputs.items()])
    ftype, itypes = spec_types(spec)
    floats = {n for n, _ in spec.float_outputs}
    attrs["hawk.spec"] = ir.DictAttr.get({
        "float": ir.TypeAttr.get(ftype),
        "index": ir.DictAttr.get({n: ir.TypeAttr.get(t) for n, t in itypes.items() if n not in floats}),
        **({"floats": ir.DictAttr.get({n: ir.TypeAttr.get(itypes[n]) for n in sorted(floats)})} if floats else {}),
        **({"copies": to_attr(spec.copy_slots)} if spec.copy_slots else {}),
        **({"cells": to_attr(spec.cell_slots)} if spec.cell_slots else {}),
        **({"sae": ir.UnitAttr.get()} if spec.sae else {}),
        **({"fma_pipes": ir.UnitAttr.get()} if spec.fma_pipes else {}),
        **({"mxcsr": ir.UnitAttr.get()} if spec.mxcsr else {})})
    if stage is not None:
        set_stage(func, *stage)


def set_stage(func, cells_in, cells_out, owns) -> None:
    func.operation.attributes["hawk.stage"] = to_attr({"cells_in": list(cells_in), "cells_out": list(cells_out),
                                                       "owns": sorted(owns)})


def signature_of(func) -> Signature:
    return Signature.from_json(from_attr(_get(func, "hawk.signature", "the kernel's planes")))


def outputs_of(func) -> dict[str, str]:
    return {n: m for n, m in from_attr(_get(func, "hawk.outputs", "each output's mode"))}


def types_of(func) -> tuple[ir.Type, dict[str, ir.Type]]:
    """The float type of the func's specialisation and the element types of the planes with their own (as
    spec_types gives them)."""
    spec = ir.DictAttr(_get(func, "hawk.spec", "the float and index types"))
    own = [n for k in ("index", "floats") if k in spec for n in ir.DictAttr(spec[k])]
    return ir.TypeAttr(spec["float"]).value, {n.name: ir.TypeAttr(n.attr).value for n in own}


def _spec_count(func, key: str, default: int) -> int:
    """hawk.spec's integer entry `key`, or `default` when the specialisation leaves it out."""
    spec = ir.DictAttr(_get(func, "hawk.spec", "the float and index types"))
    return int(ir.IntegerAttr(spec[key]).value) if key in spec else default


def copy_slots_of(func) -> int:
    """The largest sink with private copies for this func's specialisation (hawk.spec's `copies`; PAIR_SLOTS
    when absent)."""
    return _spec_count(func, "copies", PAIR_SLOTS)


def cell_slots_of(func) -> int:
    """The largest reduction keeping axes with a copy per chunk (hawk.spec's `cells`: Spec.cell_slots;
    PRIVATE_SLOTS when absent)."""
    return _spec_count(func, "cells", PRIVATE_SLOTS)


def sae_of(func) -> bool:
    """Whether this func's specialisation runs on an x86-64 CPU with AVX-512F (hawk.spec's `sae`: Spec.sae)."""
    return "sae" in ir.DictAttr(_get(func, "hawk.spec", "the float and index types"))


def mxcsr_of(func) -> bool:
    """Whether this func's specialisation runs on x86-64, whose MXCSR's inexact flag the ordered chains may read
    (hawk.spec's `mxcsr`: Spec.mxcsr)."""
    return "mxcsr" in ir.DictAttr(_get(func, "hawk.spec", "the float and index types"))


def fma_pipes_of(func) -> bool:
    """Whether this func's specialisation runs on an x86-64 CPU whose FMAs have pipes of their own (hawk.spec's
    `fma_pipes`: Spec.fma_pipes)."""
    return "fma_pipes" in ir.DictAttr(_get(func, "hawk.spec", "the float and index types"))


def stage_of(func) -> dict | None:
    attrs = func.operation.attributes
    return from_attr(attrs["hawk.stage"]) if "hawk.stage" in attrs else None


def plan(func, owns: set[str] | None = None) -> Layout:
    """Run the analysis over one kernel func from its facts (`owns`: the outputs and sinks it hands back, when
    its hawk.stage attribute does not say yet: split-stages' parts)."""
    _, itypes = types_of(func)
    short = {n: f"i{ir.IntegerType(t).width}" if isinstance(t, ir.IntegerType) else
             "f64" if isinstance(t, ir.F64Type) else "f32" for n, t in itypes.items()}
    st = stage_of(func)
    if st is not None:
        owns = set(st["owns"])
    return analyse(func, signature_of(func), outputs_of(func), ir.StringAttr(func.attributes["sym_name"]).value,
                   short, owns, tuple(st["cells_out"]) if st else (), copy_slots=copy_slots_of(func),
                   cell_slots=cell_slots_of(func))


@register
@dataclasses.dataclass
class PlanBuffers(ModulePass):
    name = "plan-buffers"
    summary = ("the Layout (buffer order and roles, private copies, policies, reduction slots) as the "
               "hawk.layout attribute of each kernel func")

    def apply(self, module: ir.Module) -> None:
        for func in kernel_funcs(module):
            _refuse_unsplit(func, self.name)
            func.operation.attributes[LAYOUT] = layout_attr(plan(func))


def _refuse_unsplit(func, pass_name: str) -> None:
    """A kernel func that reads a reduced value (or a scan's) in its own body needs split-stages first: its
    lowering would otherwise erase a reduction that ops still use (an abort inside MLIR, not an error)."""
    from hawk.ir.dialect import is_hawk

    found = []

    def visit(op):
        if (is_hawk(op, "reduce") or is_hawk(op, "scan")) and \
                any(not is_hawk(u.owner, "cell") for r in op.results for u in r.uses):
            found.append(op.name)
        return ir.WalkResult.ADVANCE

    func.operation.walk(visit)
    if found:
        name = ir.StringAttr(func.attributes["sym_name"]).value
        raise ValueError(f"{pass_name}: kernel func '{name}' reads the result of a {found[0]} in its own body: run "
                         "split-stages first (a read of a reduced value is a stage boundary, or a block reduction)")
