"""The adjoint of a kernel as a kernel: its planes (hawk/reverse/sweep.Design), its signature, and a `Kernel`
made from hawk IR instead of a Python function, so that it is split into stages, laid out, lowered, compiled and
cached exactly as a decorated kernel is (every target, the same disk cache).

`adjoint(kernel, wrt, extents)` reads the forward kernel's hawk IR once to decide the adjoint's planes:
- each per-lane output `y` gets a cotangent plane of its payload; each cell a Param (a Table of its components
  for a vector or matrix cell); each sink a Table shaped like the sink (payload first);
- each differentiated per-lane input gets a per-lane gradient output, or, when some lane reads it with `.at`, a
  gradient sink over the lanes (ordered scatters); each Param a cell (an ordered sum); each Table a gradient
  sink with the table's axes;
- a sink stored into with `=` needs the store that won each slot: a small "winners" kernel stores each store's
  number (and, inside `for` loops, the pass of each loop around it) by the same keys, and the adjoint reads the
  result as a Table;
- an output plane written by key (`hawk.scatter(out)[k] = v`) gets a cotangent Table of the array's length, so
  the adjoint is specialised to it (`positions`); the winners kernel also counts the stores into each position,
  since a position stored twice kept an unspecified store's value, whose gradient the reverse then refuses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hawk import types as T
from hawk.abi import cache
from hawk.abi.reverse import win_components
from hawk.abi.signature import PlaneSpec, Signature, _annotation
from hawk.compiler import Kernel, _info_path, _read_info
from hawk.errors import KernelError


@dataclass(frozen=True)
class Facts:
    """What the forward hawk IR says that the adjoint's planes depend on."""

    at_read: frozenset[str]  # per-lane planes some lane reads with .at
    sink_payload: dict  # sink -> payload shape of what is scattered into it
    stored: frozenset[str]  # sinks stored into with =
    kept: dict  # cell -> the lane axes its reduction keeps (cells over every lane are left out)
    stores: dict  # stored sink -> how many `=` statements store into it
    init_read: frozenset[str] = frozenset()  # outputs whose initial contents the body reads (before assigning)
    keyed: frozenset[str] = field(default_factory=frozenset)  # float outputs written by key (hawk.scatter(out)[k])
    passes: dict = field(default_factory=dict)  # stored sink -> the most for loops around one of its `=` stores


def facts(kernel: Kernel) -> Facts:
    """Read the forward IR (float64) and refuse what the reverse cannot take, naming kernel and plane."""
    from mlir import ir

    from hawk.ir.access import (
        cell_name,
        plane_name,
        scan_keys,
        scan_op,
        scan_order,
        scan_value,
        scatter_mode,
        sink_name,
        store_key,
        stored_value,
    )
    from hawk.ir.dialect import is_hawk, new_context
    from hawk.passes.verify import error_at
    from hawk.reverse.loops import enclosing_loops
    from hawk.reverse.rules import is_float

    known = kernel.__dict__.get("_reverse_facts")
    if known is not None:
        return known
    sig = kernel.signature
    at, pay, stored, added, kept, counts, keyed, passes = set(), {}, set(), set(), {}, {}, set(), {}
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(located_ir(kernel, kernel.default_spec()))
        found = []
        module.operation.walk(lambda o: (found.append(o), ir.WalkResult.ADVANCE)[1])
        for op in found:
            if is_hawk(op, "at") and sig.get(plane_name(op)).kind == "lane":
                at.add(plane_name(op))
            elif is_hawk(op, "scan") and scan_keys(op) is not None and is_float(scan_value(op).type) and \
                    scan_order(op) == "key" and scan_op(op) not in ("add", "mul"):
                raise error_at(op, f"the reverse differentiates a hawk.scan with order=\"key\" only with op=m.add "
                                   f"or m.mul (op=m.{scan_op(op)} in key order has no gradient rule yet): keep it "
                                   "out of the gradient, or scan by key in lane order (order=\"lane\")")
            elif is_hawk(op, "store") and store_key(op) is not None:
                if not sig.get(plane_name(op)).integer:  # (an integer output has no cotangent)
                    keyed.add(plane_name(op))
            elif is_hawk(op, "scatter"):
                sink = sink_name(op)
                t = stored_value(op).type
                pay[sink] = tuple(ir.VectorType(t).shape) if isinstance(t, ir.VectorType) else ()
                if scatter_mode(op) == "set":
                    depth = len(enclosing_loops(op))
                    if depth:
                        passes[sink] = max(passes.get(sink, 0), depth)
                    stored.add(sink)
                    counts[sink] = counts.get(sink, 0) + 1
                else:
                    added.add(sink)
            elif is_hawk(op, "cell") and cell_name(op) in kernel.outputs:
                axes = _kept_axes(stored_value(op), sig)
                if axes:
                    kept[cell_name(op)] = axes
    both = stored & added
    if both:
        raise KernelError(f"the reverse cannot take sink '{sorted(both)[0]}', both stored into (=) and added "
                          "into (+=): use two sinks", kernel=kernel.name)
    # outputs read before assigned (the front end's record, Kernel.initial_reads): input planes of the adjoint
    kernel._reverse_facts = Facts(frozenset(at), pay, frozenset(stored), kept, counts, kernel.initial_reads(),
                                  frozenset(keyed), passes)
    return kernel._reverse_facts


def located_ir(kernel: Kernel, spec) -> str:
    """The kernel's hawk IR for `spec` with its source locations (the compiler's text drops them), so that a
    refusal found on an op points at the user's line."""
    from mlir import ir

    from hawk.frontend.visitor import KernelBuilder
    from hawk.ir.dialect import new_context
    from hawk.passes.plan import spec_types

    kernel.hawk_ir(spec)  # the compiler's checks (captured values unchanged since decoration, verify-hawk)
    with new_context(), ir.Location.unknown():
        ftype, itypes = spec_types(spec)
        module = KernelBuilder(kernel.source, kernel.signature, ftype, itypes).build()
        return module.operation.get_asm(enable_debug_info=True)


def _kept_axes(v, sig: Signature) -> tuple[str, ...]:
    """The lane axes kept by the reduction a cell's value comes from (through ops on reduced values)."""
    from hawk.ir.access import reduce_over
    from hawk.ir.dialect import is_hawk

    owner = v.owner
    if not hasattr(owner, "operands"):
        return ()
    if is_hawk(owner, "reduce"):
        over = set(reduce_over(owner))
        return tuple(a.label for a in sig.lane_axes() if a.label not in over)
    for u in owner.operands:
        kept = _kept_axes(u, sig)
        if kept:
            return kept
    return ()


def ct_axes(size: int, keyed: tuple) -> tuple:
    """A cotangent Table's axes: its payload's components ("p", when more than one or nothing else), then the
    sink's or kept cell's axes ("a0", "a1", ...)."""
    return ((T.Axis("p", size),) if size > 1 or not keyed else ()) + keyed


def _fresh(base: str, used: set[str]) -> str:
    name = base
    while name in used:
        name = "_" + name
    used.add(name)
    return name


def _payload_type(shape: tuple[int, ...]):
    return _annotation("lane", T.Payload(tuple(shape)), (), False)


def initial_planes(sig: Signature, f: Facts) -> list[PlaneSpec]:
    """The input planes that hold the initial contents of the outputs the body reads before assigning them, under
    the outputs' own names: a float output's as a per-lane plane, an integer one's as an Index plane."""
    out = []
    for y in sorted(f.init_read):
        p = sig.get(y)
        out.append(PlaneSpec(y, "index", T.Index) if p.integer else
                   PlaneSpec(y, "lane", _payload_type(p.payload.shape), p.payload))
    return out


def design(kernel: Kernel, wrt: tuple[str, ...], extents: tuple[int, ...] | None, float_dtype: str,
           positions: tuple = ()):
    """The adjoint's Design (hawk/reverse/sweep.py), its Signature and its outputs' modes. `positions`: (output,
    length) of each float output written by key, whose cotangent is a Table of that length."""
    from hawk.reverse.sweep import Design

    sig, f = kernel.signature, facts(kernel)
    lengths = _lengths(kernel, f, positions)
    used = {p.name for p in sig.planes} | {a.label for a in sig.lane_axes()} | {"result"}
    planes = [p for p in sig.planes if p.kind in ("lane", "index", "param", "table", "grid")]
    ct, ct_kind, payload, grad, grad_kind, win, outputs = {}, {}, {}, {}, {}, {}, {}
    for out, mode in sorted(kernel.outputs.items()):
        if out != "result" and sig.get(out).integer:  # an integer output has no cotangent
            continue
        shape = sig.returns.shape if out == "result" else sig.get(out).payload.shape
        ct[out], payload[out] = _fresh(f"ct_{out}", used), shape
        if out in f.keyed:  # written by key: a cotangent per position of the array
            ct_kind[out] = "table"
            axes = (T.Axis("a0", lengths[out]),)
            planes.append(PlaneSpec(ct[out], "table", T.TableType(axes), axes=axes))
        elif mode == "lane":
            ct_kind[out] = "lane"
            planes.append(PlaneSpec(ct[out], "lane", _payload_type(shape), T.Payload(shape)))
        elif not shape and out not in f.kept:
            ct_kind[out] = "param"
            planes.append(PlaneSpec(ct[out], "param", T.Param))
        else:
            ct_kind[out] = "table"
            labels = [a.label for a in sig.lane_axes()]
            keyed = tuple(T.Axis(f"a{k}", extents[labels.index(a)]) for k, a in enumerate(f.kept.get(out, ())))
            axes = ct_axes(math.prod(shape), keyed)
            planes.append(PlaneSpec(ct[out], "table", T.TableType(axes), axes=axes))
    for p in sig.planes:
        if p.kind != "sink" or p.name not in f.sink_payload:
            continue
        shape = f.sink_payload[p.name]
        ct[p.name], ct_kind[p.name], payload[p.name] = _fresh(f"ct_{p.name}", used), "table", shape
        keyed = tuple(T.Axis(f"a{k}", a.extent) for k, a in enumerate(p.axes))
        axes = ct_axes(math.prod(shape), keyed)
        planes.append(PlaneSpec(ct[p.name], "table", T.TableType(axes), axes=axes))
        if p.name in f.stored:  # the winning store's number, then each loop's pass (hawk.abi.reverse)
            win[p.name] = _fresh(f"win_{p.name}", used)
            axes = (T.Axis("p", win_components(f.passes.get(p.name, 0))),) + keyed
            planes.append(PlaneSpec(win[p.name], "table", T.TableType(axes), axes=axes))
    planes += initial_planes(sig, f)
    lanes = math.prod(extents) if extents else None
    for x in wrt:
        p = sig.get(x)
        grad[x] = _fresh(f"grad_{x}", used)
        if p.kind == "output":  # (its initial contents: choose_wrt names only outputs in init_read)
            payload[x], grad_kind[x], outputs[grad[x]] = p.payload.shape, "lane", "lane"
            planes.append(PlaneSpec(grad[x], "output", T.Mutable[_payload_type(p.payload.shape)], p.payload))
        elif p.kind == "lane":
            payload[x] = p.payload.shape
            if x in f.at_read:
                grad_kind[x] = "sink"
                axes = (T.Axis("lane", lanes),)
                planes.append(PlaneSpec(grad[x], "sink", T.SinkType(axes), axes=axes))
            else:
                grad_kind[x], outputs[grad[x]] = "lane", "lane"
                planes.append(PlaneSpec(grad[x], "output", T.Mutable[_payload_type(p.payload.shape)],
                                        p.payload))
        elif p.kind == "param":
            grad_kind[x], outputs[grad[x]] = "cell", "cell"
            planes.append(PlaneSpec(grad[x], "output", T.Mutable[T.Scalar], T.Payload(())))
        else:  # a Table: a sink with its axes
            grad_kind[x] = "sink"
            planes.append(PlaneSpec(grad[x], "sink", T.SinkType(p.axes), axes=p.axes))
    tables = {p.name: [(a.label, a.extent) for a in p.axes] for p in sig.planes if p.kind == "table"}
    d = Design(kernel.name, f"{kernel.name}__reverse", [a.label for a in sig.lane_axes()], extents, ct, ct_kind,
               payload, grad, grad_kind, win, tables, float_dtype, dict(f.kept), dict(f.stores),
               tuple(sorted(f.init_read)), lengths,
               {a.label: a.extent for a in sig.lane_axes() if a.extent is not None}, dict(f.passes))
    return d, Signature(tuple(planes), None), outputs, f


def _lengths(kernel: Kernel, f: Facts, positions: tuple) -> dict[str, int]:
    """The length of each float output written by key, from `positions` ((name, length) pairs)."""
    got = dict(positions)
    for out in sorted(f.keyed):
        n = got.get(out)
        if not isinstance(n, int) or n < 1:
            raise KernelError(f"the reverse of output plane '{out}', written by key, is made for the array's "
                              f"length: give positions=(('{out}', n),) (plan.reverse does)", kernel=kernel.name)
    return {out: got[out] for out in sorted(f.keyed)}


def needs_extents(kernel: Kernel, wrt: tuple[str, ...]) -> bool:
    """Whether the adjoint is specialised to the lane extents: a gradient sink over the lanes (a plane read
    with .at), or the lane index of a grid lane (stores into a sink by key), or a kept cell's cotangent (by the
    kept axes)."""
    f = facts(kernel)
    return reads_other_lanes(kernel, wrt) or bool(f.kept) or \
        bool(f.stored and len(kernel.signature.lane_axes()) > 1)


def reads_other_lanes(kernel: Kernel, wrt: tuple[str, ...]) -> bool:
    """Whether the adjoint adds into other lanes' gradients (a plane of `wrt` read with .at)."""
    return bool(facts(kernel).at_read & set(wrt))


class IRKernel(Kernel):
    """A kernel whose hawk IR is made from another kernel's (per specialisation) rather than read from Python.
    Everything after the hawk IR (stages, layouts, lowering, caches) is the decorated kernel's own code."""

    def __init__(self, forward: Kernel, name: str, signature: Signature, outputs: dict[str, str],
                 transform, key: str):
        self.fn = None
        self.forward, self.name, self.transform = forward, name, transform
        self.__doc__ = f"made from the hawk IR of kernel '{forward.name}'"
        self.source = forward.source  # errors point at the forward kernel's lines
        self.signature = signature
        self._hawk, self._lowered, self._layouts, self._stages = {}, {}, {}, {}
        self._info_key = cache.key(forward._info_key, name, key)
        self._info = _read_info(_info_path(name, self._info_key))
        self._info["outputs"] = dict(outputs)
        self.stages(self.default_spec())  # build and split now: refusals come before any launch

    def initial_reads(self) -> frozenset[str]:
        return frozenset()  # (an adjoint reads no output's initial contents: it is not differentiated again)

    def hawk_ir(self, spec=None) -> str:
        """The made kernel's IR with its facts on its func, as the front end writes a decorated kernel's
        (hawk/lowering.py build_hawk): splitting it into stages reads them, so that a reduction over a Grid's
        trailing axes read later in the body is a block reduction here too, as in the forward, instead of a
        stage boundary."""
        from hawk.passes.plan import annotate

        spec = spec or self.default_spec()
        if spec not in self._hawk:
            fwd = self.forward
            idt = {n: d for n, d in spec.index_dtypes if fwd.signature.get(n) is not None}
            text = self.transform(located_ir(fwd, fwd.spec_for(spec.float_dtype, idt)), spec.float_dtype,
                                  lambda module: annotate(module, self.signature, self._info["outputs"], spec))
            self._hawk[spec] = (text, self._info["outputs"])
        return self._hawk[spec][0]


def _transform(fn):
    """Run `fn(module, float_dtype)` on a parsed copy of the forward IR and give back the verified text, after
    `annotate(module)` has written the made kernel's facts onto it."""

    def run(text: str, float_dtype: str, annotate) -> str:
        from mlir import ir

        from hawk.ir.dialect import new_context

        with new_context(), ir.Location.unknown():
            module = ir.Module.parse(text)
            fn(module, float_dtype)
            try:
                module.operation.verify()
            except ir.MLIRError as exc:  # a bug of the reverse, not the user's
                raise RuntimeError(f"internal error: the adjoint IR does not verify: {exc}\n{module}") from exc
            annotate(module)
            return str(module)

    return run


def adjoint(kernel: Kernel, wrt: tuple[str, ...], extents: tuple[int, ...] | None,
            positions: tuple = ()) -> tuple[IRKernel, object]:
    """The adjoint kernel of `kernel` for the inputs `wrt` (and the lane extents, when it needs them; and the
    lengths of the outputs written by key, `positions`)."""
    from hawk.reverse.sweep import Sweep

    d, sig, outputs, f = design(kernel, wrt, extents, "float64", positions)

    def build(module, float_dtype):
        d.float_dtype = float_dtype
        Sweep(module, d).build()

    key = repr((wrt, extents, tuple(sorted(d.positions.items())))) if d.positions else repr((wrt, extents))
    return IRKernel(kernel, d.name, sig, outputs, _transform(build), key), d


def winners(kernel: Kernel, extents: tuple[int, ...] | None, positions: tuple = ()) -> IRKernel:
    """The kernel that stores each store's number (Sweep.store_number: lane index x stores into the sink + the
    statement's position, and the pass of each `for` loop around it) into the sinks `kernel` stores into with
    `=`, by the same keys: run on sinks filled with -1, it leaves each slot's winning store (the last in lane
    order, then in the order the lane made them), or -1. Each float output
    written by key becomes a sink of its length (`positions`) into which every store by key adds 1 instead: run
    on zeros, it counts the stores into each position."""
    from hawk.ir.access import (
        kernel_func,
        plane_name,
        plane_type,
        plane_value,
        scatter_mode,
        set_stored_value,
        store_key,
        stored_value,
    )
    from hawk.ir.build import create
    from hawk.ir.dialect import is_hawk
    from hawk.ir.types import drop_unused_args, of_value, retype_arg
    from hawk.reverse.loops import dce, nested_ops
    from hawk.reverse.sweep import Sweep

    sig, f = kernel.signature, facts(kernel)
    lengths = _lengths(kernel, f, positions)
    planes = [p for p in sig.planes if p.kind in ("lane", "index", "param", "table", "grid")
              or (p.kind == "sink" and p.name in f.stored)] + initial_planes(sig, f)
    for out, n in lengths.items():
        axes = (T.Axis("slot", n),)
        planes.append(PlaneSpec(out, "sink", T.SinkType(axes), axes=axes))
    name = f"{kernel.name}__winners"

    def build(module, float_dtype):
        from mlir import ir

        d, _, _, _ = design(kernel, (), extents, float_dtype, positions)
        d.name = name
        s = Sweep(module, d)
        s.read_initial()
        for op in nested_ops(kernel_func(module)):  # (inside for loops too)
            if op.name not in ("hawk.store", "hawk.cell", "hawk.scatter"):
                continue
            op = op.opview
            if is_hawk(op, "scatter") and scatter_mode(op) == "set":
                with ir.InsertionPoint(op), op.location:  # the lane's store number, whatever the payload stored
                    set_stored_value(op, s.store_number(op))
            elif is_hawk(op, "store") and store_key(op) is not None and plane_name(op) in lengths:
                with ir.InsertionPoint(op), op.location:  # a count of the stores into each position
                    one = s.const(1.0, s.ftype)
                    create("hawk.scatter", [plane_value(op), one, store_key(op)], [],
                           {"mode": "add", "policy": "plain"})
                op.operation.erase()
            else:
                op.operation.erase()
        kernel_func(module).attributes["sym_name"] = ir.StringAttr.get(name)
        dce(kernel_func(module))
        s.untag()
        for op in nested_ops(kernel_func(module)):  # a sink now gets store numbers (or counts), whatever it held
            if is_hawk(op, "scatter"):
                axes = ("slot",) if plane_name(op) in lengths else plane_type(op).axes
                retype_arg(plane_value(op), of_value("sink", stored_value(op).type, axes))
        drop_unused_args(kernel_func(module))

    key = repr((extents, tuple(sorted(lengths.items())))) if lengths else repr(extents)
    return IRKernel(kernel, name, Signature(tuple(planes), None), {}, _transform(build), key)
