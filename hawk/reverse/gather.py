"""The gather form of a stencil's gradient (#13): plain lane kernels instead of one ordered scatter over lanes.

The adjoint of `u.at(r=g.r + 1)` adds the read's cotangent into `u`'s gradient at the coordinates the forward
read. As a scatter that is an ordered sink with a slot per lane, whose per-chunk (high, low) pairs span every
slot (hawk/abi/layout.PAIR_SLOTS): cost grows with chunks x lanes. When every `.at` read of a plane is the lane's
own coordinates plus constants (a stencil: what hawk/ir/reach.py calls a bounded reach; reads in `for` loops of
constant pass counts once hawk/reverse/unroll.py unrolled them), the terms of each gradient slot are known
statically, so the gradient is gathered instead:

1. the "shares" adjoint is the adjoint (hawk/reverse/sweep.py) with those scatters replaced by stores: each
   distinct cotangent value a read site (or the lane's own loads) adds goes to a per-lane share plane;
2. the "gather" kernel adds, for each lane j and each read site with offset d, the shares of the lanes i whose
   clamped read `clamp(i + d)` is j: `i = j - d` inside the grid, plus the lanes clamped onto an edge lane.
   Those few terms are summed with two error-free TwoSums each into a (high, low) pair and rounded once,
   fl(high + low): the exact sum rounded once whenever the second TwoSum never erred, which is the ordered
   sink's own fast path, so the bits are the scatter's on every split and target. A lane where it erred (or a
   term is not finite) is counted in the kernel's `flag` cell, and the door (eagle/reverse.py) then runs the
   scatter adjoint for that call, whose exact accumulators take any terms: same contract, rarely needed;
3. the "Param sums" kernel: each Param's gradient, the ordered sum over lanes of the per-lane shares the shares
   adjoint stored (an ordered sum's lane loop is heavier than a plain one: kept out of the other two).

Each gradient slot is therefore still the exact sum of its terms rounded once (hawk/exact.py, docs/ordered.md),
and no kernel has a sink over the lanes (one chunk's work is O(its lanes)).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field

from hawk import types as T
from hawk.abi.signature import PlaneSpec, Signature

MAX_TERMS = 64  # gather terms per lane and plane beyond which a plane keeps the ordered scatter


@dataclass
class Gather:
    """What the kernels exchange: per gathered plane, its read sites (share plane, offset per lane axis)."""

    sites: dict[str, list[tuple[str, tuple[int, ...]]]] = field(default_factory=dict)
    shares: list[str] = field(default_factory=list)  # share planes the gather reads (shares adjoint outputs)
    grad: dict[str, str] = field(default_factory=dict)  # gathered plane -> its gradient output in the gather
    sums: dict[str, str] = field(default_factory=dict)  # a Param's gradient cell -> its share plane (outputs of
    # the shares adjoint too), which the Param sums kernel adds up
    flag: str = "gather_flag"  # the gather's cell: how many lanes' pairs erred
    payload: dict[str, int] = field(default_factory=dict)  # a Vector plane's components, by gathered plane (from
    # its design) and by share plane (from the cotangent stored; absent: a Scalar's)


def at_offsets(op, axes: list[str], extents: tuple[int, ...] | None = None) -> tuple[int, ...] | None:
    """A `.at` read's offset from the lane's own coordinates on every lane axis (an axis left out: 0), or None
    when some coordinate is not the lane's own plus a constant (a flat index, data, another axis); clamped to the
    grid's edges or not (hawk.ir.reach.lane_offset; `extents`: the grid's, for a constant last coordinate)."""
    from hawk.ir.access import at_coords, coord_axes
    from hawk.ir.reach import lane_offset

    named = coord_axes(op)
    if named == ["#"] or any(a not in axes for a in named):
        return None
    offs = []
    for a in axes:
        if a not in named:
            offs.append(0)
            continue
        last = extents[axes.index(a)] - 1 if extents is not None else None
        k = lane_offset(at_coords(op)[named.index(a)], a, last)
        if k is None:
            return None
        offs.append(k)
    return tuple(offs)


def reads_of(candidates: set[str]):
    """A test of ops: a `.at` read of one of `candidates` (what unroll_loops unrolls the loops around)."""
    from hawk.ir.access import plane_name
    from hawk.ir.dialect import is_hawk

    return lambda op: is_hawk(op, "at") and plane_name(op) in candidates


def gathered_planes(text: str, candidates: set[str], axes: list[str], extents: tuple[int, ...] | None = None
                    ) -> set[str]:
    """The planes of `candidates` (per-lane planes read with `.at`, differentiated) whose every `.at`
    read in the forward hawk IR `text` has constant offsets once `for` loops of constant pass counts around such
    reads are unrolled (hawk/reverse/unroll.py) and sits outside other loops, with few terms."""
    from mlir import ir

    from hawk.ir.access import plane_name
    from hawk.ir.dialect import is_hawk, new_context
    from hawk.reverse.loops import enclosing_loops, nested_ops
    from hawk.reverse.unroll import unroll_loops

    bad, terms = set(), {}
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        unroll_loops(module, reads_of(candidates))
        for op in nested_ops(module.operation):
            if not is_hawk(op, "at") or plane_name(op) not in candidates:
                continue
            plane = plane_name(op)
            offs = at_offsets(op, axes, extents)
            if offs is None or enclosing_loops(op):
                bad.add(plane)
                continue
            n = 1
            for d in offs:
                n *= abs(d) + 1
            terms[plane] = terms.get(plane, 1) + n
    return {p for p in candidates if p not in bad and terms.get(p, 1) <= MAX_TERMS}


def shares_sweep_class():
    """The Sweep that stores the gathered planes' cotangents into share planes (imported late: MLIR)."""
    from hawk.ir.build import create
    from hawk.passes.verify import error_at
    from hawk.reverse.sweep import Sweep

    class SharesSweep(Sweep):
        def __init__(self, module, plan, gathered: set[str], g: Gather, used: set[str]):
            super().__init__(module, plan)
            self.gathered, self.g, self.used = gathered, g, set(used)
            self.share_of: dict = {}  # cotangent value -> its share plane
            # (a gathered plane's gradient is the gather kernel's: no placeholder scatter into its sink, which the
            # shares adjoint does not have; outputs.py gives a Vector plane's untouched sink one)
            self.scattered.update(plan.grad[x] for x in gathered)

        def fresh(self, base: str) -> str:
            """A plane name no plane of the forward or the adjoint has (the same in every run of the sweep)."""
            while base in self.used:
                base += "_"
            self.used.add(base)
            return base

        def put(self, plane: str, v, offs: tuple[int, ...]) -> None:
            from mlir import ir

            name = self.share_of.get(v)
            if name is None:
                name = self.share_of[v] = self.fresh(f"share{len(self.share_of)}_{self.p.grad[plane]}")
                create("hawk.store", [self.arg(name, "output", v.type, self.p.axes), v], [])
                if name not in self.g.shares:
                    self.g.shares.append(name)
                if isinstance(v.type, ir.VectorType):  # (a Vector plane's cotangent: a share per component)
                    self.g.payload[name] = ir.VectorType(v.type).shape[0]
            self.g.sites.setdefault(plane, []).append((name, offs))

        def reverse_at(self, op, g) -> None:
            from hawk.ir.access import plane_name

            plane = plane_name(op)
            if plane not in self.gathered or plane not in self.p.grad:
                return super().reverse_at(op, g)
            if self.in_if:  # (gathered_planes keeps reads in loops out; hoisted reads reverse at the top level)
                raise error_at(op, "internal error: a gathered .at read reversed inside an if")
            self.put(plane, g, at_offsets(op, self.p.axes, self.p.extents))

        def cell_out(self, out: str, share) -> None:
            """A Param's per-lane shares go to a plane the Param sums kernel adds up (ordered): this kernel
            then has no sum over lanes and runs as a plain lane loop."""
            name = self.fresh(f"share_{out}")
            create("hawk.store", [self.arg(name, "output", share.type, self.p.axes), share], [])
            self.g.sums[out] = name

        def own_share(self, plane: str, out: str, v) -> None:
            if plane not in self.gathered:
                return super().own_share(plane, out, v)
            self.put(plane, v, tuple(0 for _ in self.p.axes))

    return SharesSweep


def shares_signature(sig: Signature, d, g: Gather, gathered: set[str]) -> tuple[Signature, dict]:
    """The shares adjoint's signature and extra outputs: the adjoint's, less the gathered planes' gradient sinks,
    plus a per-lane share output per share plane."""
    drop = {d.grad[x] for x in gathered} | set(g.sums)
    planes = [p for p in sig.planes if p.name not in drop]
    outs = [*g.shares, *sorted(g.sums.values())]
    planes += [_spec(s, "output", g.payload.get(s)) for s in outs]
    return Signature(tuple(planes), None), {s: "lane" for s in outs}


def _spec(name: str, kind: str, comps: int | None) -> PlaneSpec:
    """A per-lane plane (`kind` "lane") or output of Scalars, or of Vector[comps]."""
    value = T.Vector[comps] if comps else T.Scalar
    return PlaneSpec(name, kind, T.Mutable[value] if kind == "output" else value,
                     T.Payload((comps,) if comps else ()))


def gather_signature(fwd_sig: Signature, g: Gather) -> tuple[Signature, dict]:
    """The gather kernel's: the forward's grid, the share planes in, a gradient per gathered plane and the flag
    cell out."""
    planes = [p for p in fwd_sig.planes if p.kind == "grid"]
    planes += [_spec(s, "lane", g.payload.get(s)) for s in g.shares]
    by_grad = {o: x for x, o in g.grad.items()}
    outs = [*sorted(g.grad.values()), g.flag]
    planes += [_spec(o, "output", g.payload.get(by_grad.get(o, ""))) for o in outs]
    return Signature(tuple(planes), None), {**{o: "lane" for o in g.grad.values()}, g.flag: "cell"}


def sums_signature(fwd_sig: Signature, g: Gather) -> tuple[Signature, dict]:
    """The Param sums kernel's: the forward's grid, the Params' share planes in, their gradient cells out."""
    planes = [p for p in fwd_sig.planes if p.kind == "grid"]
    planes += [PlaneSpec(s, "lane", T.Scalar, T.Payload(())) for s in sorted(g.sums.values())]
    planes += [PlaneSpec(o, "output", T.Mutable[T.Scalar], T.Payload(())) for o in sorted(g.sums)]
    return Signature(tuple(planes), None), {o: "cell" for o in g.sums}


def _candidates(d: int, j, extent: int, e) -> list[tuple[object, object]]:
    """(condition or None, source coordinate) on one axis: the lanes i with clamp(i + d) == j."""
    if d == 0:
        return [(None, j)]
    last = extent - 1
    i = e.op("arith.subi", j, e.iconst(d))
    if d > 0:
        out = [(e.icmp("sge", j, e.iconst(d)), i)]
        at_edge = e.icmp_eq(j, e.iconst(last))
        out += [(at_edge, e.iconst(last - d + t)) for t in range(1, d + 1) if last - d + t >= 0]
    else:
        out = [(e.icmp("sle", j, e.iconst(last + d)), i)]
        at_edge = e.icmp_eq(j, e.iconst(0))
        out += [(at_edge, e.iconst(-d - t)) for t in range(1, -d + 1) if -d - t <= last]
    return out


def build_gather(module, g: Gather, axes: list[str], extents: tuple[int, ...], float_dtype: str,
                 name: str) -> None:
    """Replace the kernel func of `module` (a parsed forward kernel) with the gather kernel's body."""
    from mlir import ir
    from mlir.dialects import vector

    from hawk.ir.access import kernel_func
    from hawk.ir.build import create, strs
    from hawk.ir.types import add_arg, drop_unused_args, of_value
    from hawk.reverse.rules import Emit

    func = kernel_func(module)
    block = func.regions[0].blocks[0]
    ops = list(block.operations)
    ret = ops[-1]
    for op in reversed(ops[:-1]):
        op.operation.erase()
    drop_unused_args(func)
    f = ir.F64Type.get() if float_dtype == "float64" else ir.F32Type.get()
    i64 = ir.IntegerType.get_signless(64)

    class E(Emit):
        def icmp(self, pred: str, a, b):
            code = {"sge": 5, "sle": 3}[pred]
            return create("arith.cmpi", [a, b], [ir.IntegerType.get_signless(1)],
                          {"predicate": ir.IntegerAttr.get(i64, code)}).result

    e = E()
    i1 = ir.IntegerType.get_signless(1)
    with ir.InsertionPoint(ret), func.location:
        lanes = [create("hawk.lane", [], [i64], {"axis": a}).result for a in axes]
        flag = create("arith.constant", [], [i1], {"value": ir.IntegerAttr.get(i1, 0)}).result

        def read(arg, combo, vt, zero):
            """One term: the share at the source lane where the combination's conditions hold, else 0."""
            conds = [c for _, (c, _) in combo if c is not None]
            if not conds:
                return create("hawk.load", [arg], [vt]).result
            # (a named-axis read clamps to the grid's edges on every target: docs/semantics.md)
            v = create("hawk.at", [arg, *(i for _, (_, i) in combo)], [vt], {"axes": strs(axes)}).result
            cond = conds[0]
            for c in conds[1:]:
                cond = e.land(cond, c)
            return e.select(cond, v, zero)

        def scalars(vals, comps):
            """Values as scalars (a Vector's by component): a pair crosses an scf.if so (spirv's takes none)."""
            return [p for v in vals for p in ([v] if not comps else [vector.extract(v, [], [k]) for k in range(comps)])]

        def erred(e2, zero, comps):
            """Whether the second TwoSum erred (in any component of a Vector's)."""
            parts = scalars([e.cmp("une", e2, zero)], comps)
            out = parts[0]
            for b in parts[1:]:
                out = e.op("arith.ori", out, b)
            return out

        def chain(terms, hi, lo, flag, vt, zero, comps):
            """Each term into (hi, lo) by two error-free TwoSums (hawk/passes/lower/scatters.exact_add's pair;
            a Vector's componentwise); `flag` turns true where the second TwoSum errs (NaN too: a term or a sum
            that is not finite)."""
            for arg, combo in terms:
                s1, e1 = _two_sum(e, hi, read(arg, combo, vt, zero))
                s2, e2 = _two_sum(e, lo, e1)
                flag = e.op("arith.ori", flag, erred(e2, zero, comps))
                hi, lo = s1, s2
            return hi, lo, flag

        for plane in sorted(g.grad):
            comps = g.payload.get(plane)
            vt = ir.VectorType.get([comps], f) if comps else f
            zero = e.zero(vt)
            inner, edge, edge_conds = [], [], []
            for share, offs in g.sites.get(plane, []):
                arg = add_arg(func, share, of_value("plane", vt, axes))
                cands = [list(enumerate(_candidates(d, lanes[k], extents[k], e))) for k, d in enumerate(offs)]
                for combo in itertools.product(*cands):
                    if all(n == 0 for n, _ in combo):
                        inner.append((arg, combo))
                        continue
                    edge.append((arg, combo))  # a source clamped onto an edge lane: only edge lanes have one
                    edge_conds += [c for n, (c, _) in combo if n > 0 and c not in edge_conds]
            hi, lo, flag = chain(inner, zero, zero, flag, vt, zero, comps)
            if edge:
                at_edge = edge_conds[0]
                for c in edge_conds[1:]:
                    at_edge = e.op("arith.ori", at_edge, c)
                branch = create("scf.if", [at_edge], [f] * (2 * (comps or 1)) + [i1], regions=2)
                with ir.InsertionPoint(branch.regions[0].blocks.append()):
                    h2, l2, f2 = chain(edge, hi, lo, flag, vt, zero, comps)
                    create("scf.yield", [*scalars([h2, l2], comps), f2], [])
                with ir.InsertionPoint(branch.regions[1].blocks.append()):
                    create("scf.yield", [*scalars([hi, lo], comps), flag], [])
                got, flag = list(branch.results[:-1]), branch.results[-1]
                if comps:
                    hi = create("vector.from_elements", got[:comps], [vt]).result
                    lo = create("vector.from_elements", got[comps:], [vt]).result
                else:
                    hi, lo = got
            out = add_arg(func, g.grad[plane], of_value("output", vt, axes))
            create("hawk.store", [out, e.add(hi, lo)], [])
        mark = e.select(flag, e.const(1.0, f), e.zero(f))  # (0s and 1s add exactly in any order: a plain sum)
        r = create("hawk.reduce", [mark], [f], {"kind": "sum", "over": strs(axes), "policy": "auto"}).result
        create("hawk.cell", [add_arg(func, g.flag, of_value("total", f, ())), r], [])
    func.attributes["sym_name"] = ir.StringAttr.get(name)


def build_sums(module, g: Gather, axes: list[str], float_dtype: str, name: str) -> None:
    """Replace the kernel func of `module` with the Param sums' body: each Param's gradient is the ordered sum
    over lanes of its share plane (what the sweep's `total` computes in the scatter adjoint). A kernel of its
    own: an ordered sum's lane loop is heavier than a plain one, so the gather and the shares stay plain."""
    from mlir import ir

    from hawk.ir.access import kernel_func
    from hawk.ir.build import create, strs
    from hawk.ir.types import add_arg, drop_unused_args, of_value

    func = kernel_func(module)
    block = func.regions[0].blocks[0]
    ops = list(block.operations)
    for op in reversed(ops[:-1]):
        op.operation.erase()
    drop_unused_args(func)
    f = ir.F64Type.get() if float_dtype == "float64" else ir.F32Type.get()
    with ir.InsertionPoint(ops[-1]), func.location:
        for out, share in sorted(g.sums.items()):
            v = create("hawk.load", [add_arg(func, share, of_value("plane", f, axes))], [f]).result
            r = create("hawk.reduce", [v], [f], {"kind": "sum", "over": strs(axes), "policy": "ordered"}).result
            create("hawk.cell", [add_arg(func, out, of_value("total", f, ())), r], [])
    func.attributes["sym_name"] = ir.StringAttr.get(name)


def _two_sum(e, a, b):
    """(s, err) with s = fl(a + b) and a + b = s + err exactly (Knuth's TwoSum; err is NaN if s is not finite)."""
    s = e.add(a, b)
    bb = e.sub(s, a)
    err = e.add(e.sub(a, e.sub(s, bb)), e.sub(b, bb))
    return s, err


def gather_kernels(kernel, wrt: tuple[str, ...], extents: tuple[int, ...] | None):
    """(shares adjoint, its Design, gather kernel, Param sums kernel or None, Gather) for `kernel`'s gradient
    with respect to `wrt`, or None when no plane of `wrt` is read with `.at` at constant offsets only, or when
    the kernel writes an output by key (the scatter adjoint serves). A Vector plane is gathered like a Scalar
    one (a share plane per read site, of the plane's components; its gather keeps a pair per component)."""
    from mlir import ir

    from hawk.ir.dialect import new_context
    from hawk.reverse.kernel import IRKernel, _transform, design, facts, located_ir
    from hawk.reverse.unroll import unroll_loops

    if extents is None or facts(kernel).keyed:  # (outputs written by key: the scatter adjoint, made per length)
        return None
    d, sig, outputs, f = design(kernel, wrt, extents, "float64")
    candidates = {x for x in wrt if x in f.at_read and d.grad_kind.get(x) == "sink"
                  and len(d.payload.get(x, ())) <= 1}
    if not candidates:
        return None
    axes = list(d.axes)
    text = located_ir(kernel, kernel.spec_for("float64", {}))
    gathered = gathered_planes(text, candidates, axes, tuple(extents))
    if not gathered:
        return None
    sweep = shares_sweep_class()
    g = Gather()
    sd = dataclasses.replace(d, name=f"{kernel.name}__reverse_shares")  # the shares adjoint's func name
    used = {p.name for p in sig.planes} | {a.label for a in sig.lane_axes()} | {"result"}
    unrolled = reads_of(gathered)
    with new_context(), ir.Location.unknown():  # a dry run: which share planes the sweep makes
        module = ir.Module.parse(text)
        unroll_loops(module, unrolled)
        sweep(module, sd, gathered, g, used).build()
    if not g.shares:  # (every read of the planes sat in loops of no passes: nothing to gather, and a gather kernel
        return None  # with no share plane could not tell its lanes; the scatter adjoint gives the zeros)
    g.grad = {x: d.grad[x] for x in sorted(gathered)}
    g.payload.update({x: d.payload[x][0] for x in gathered if d.payload.get(x)})  # (also with no read site left)
    while g.flag in used | set(g.shares) | set(g.sums.values()):
        g.flag += "_"
    ssig, souts = shares_signature(sig, d, g, gathered)

    def shares(module, float_dtype):
        sd.float_dtype = float_dtype
        unroll_loops(module, unrolled)
        sweep(module, sd, gathered, Gather(), used).build()

    key = repr((wrt, extents))
    kept = {o: kind for o, kind in outputs.items() if ssig.get(o) is not None}  # (less the gradients gathered)
    adj = IRKernel(kernel, sd.name, ssig, {**kept, **souts}, _transform(shares), key)
    gsig, gouts = gather_signature(kernel.signature, g)
    name, sums_name = f"{kernel.name}__gather", f"{kernel.name}__param_sums"

    def gather(module, float_dtype):
        build_gather(module, g, axes, extents, float_dtype, name)

    def sums(module, float_dtype):
        build_sums(module, g, axes, float_dtype, sums_name)

    sums_kernel = None
    if g.sums:
        ssig, souts = sums_signature(kernel.signature, g)
        sums_kernel = IRKernel(kernel, sums_name, ssig, souts, _transform(sums), key)
    return adj, d, IRKernel(kernel, name, gsig, gouts, _transform(gather), key), sums_kernel, g
