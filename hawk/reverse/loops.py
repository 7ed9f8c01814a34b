"""The reverse of a `for k in range(...)` loop (part of the sweep in hawk/reverse/sweep.py), and the IR walks,
copies and dead-code removal the sweep shares.

A loop runs its passes backwards in an `scf.for` of its own. A pass's reverse needs the values the loop carried
into that pass: they are recomputed from the loop's start (an inner loop of the forward passes before it), which
costs passes**2 / 2 forward passes but no memory, and keeps the adjoint a plain lane-local hawk kernel. The
cotangents of the carried values travel backwards as the reverse loop's own carried values; those of values from
outside the loop are summed over the passes the same way and handed out when it ends.
"""

from __future__ import annotations

from mlir import ir

from hawk.ir.build import create
from hawk.passes.verify import error_at
from hawk.reverse.rules import is_float

EFFECTS = ("hawk.store", "hawk.cell", "hawk.scatter")


def nested_ops(op) -> list:
    """`op` and every op inside it, outer first."""
    out = []
    op.operation.walk(lambda o: (out.append(o), ir.WalkResult.ADVANCE)[1], ir.WalkOrder.PRE_ORDER)
    return out


def enclosing_loops(op) -> list:
    """The scf.for ops of the kernel's body around `op`, outermost first."""
    loops, p = [], op.parent
    while p is not None and p.name != "func.func":
        if p.name == "scf.for":
            loops.append(p)
        p = p.parent
    return loops[::-1]


def deep_operands(op) -> list:
    """Values `op` (or any op inside it) uses that are defined outside it."""
    inner, used = set(), []
    for o in nested_ops(op):
        inner.update(o.results)
        for region in o.regions:
            for block in region.blocks:
                inner.update(block.arguments)
        used.extend(o.operands)
    return [v for v in used if v not in inner]


def _remap(op, mapping: dict) -> None:
    for o in nested_ops(op):
        for k, v in enumerate(list(o.operands)):
            if v in mapping:
                o.operands[k] = mapping[v]


def clone_ops(ops: list, mapping: dict, effects: bool) -> list:
    """Copies of `ops` at the insertion point, reading the values `mapping` gives in place of the originals
    (the mapping learns each copy's results). Without `effects`, stores, cells and scatters are left out."""
    out = []
    for o in ops:
        if not effects and o.operation.name in EFFECTS:
            continue
        c = o.operation.clone()
        _remap(c, mapping)
        if not effects:
            for inner in reversed(nested_ops(c)[1:]):
                if inner.name in EFFECTS:
                    inner.erase()
        for a, b in zip(o.results, c.results, strict=True):
            mapping[a] = b
        out.append(c)
    return out


class LoopsMixin:
    """Sweep.reverse_for."""

    def reverse_for(self, op, adj: dict) -> None:
        body = op.regions[0].blocks[0]
        ops = list(body.operations)
        ops, yields = ops[:-1], list(ops[-1].operands)
        lb, ub, step = list(op.operands)[:3]
        inits = list(op.operands)[3:]
        iv, iters = body.arguments[0], list(body.arguments)[1:]
        has_effects = any(o.name in EFFECTS for x in ops for o in nested_ops(x))
        floats = [k for k, v in enumerate(inits) if is_float(v.type)]
        seeds = {k: self.share(adj.pop(op.results[k])) for k in floats if op.results[k] in adj}
        if not seeds and not has_effects:
            return
        if not _is_one(step):
            raise error_at(op, "the reverse takes range(...) loops with step 1")
        inner = {iv, *iters}
        for x in ops:
            for o in nested_ops(x):
                inner.update(o.results)
                for region in o.regions:
                    for block in region.blocks:
                        inner.update(block.arguments)
        outer = []
        for v in [v for x in ops for v in deep_operands(x)] + yields:
            if is_float(v.type) and v not in inner and v not in outer:
                outer.append(v)
        carried = [seeds[k] if k in seeds else self.zero(inits[k].type) for k in floats]
        carried += [self.zero(v.type) for v in outer]
        rev = create("scf.for", [lb, ub, step, *carried], [v.type for v in carried], regions=1)
        index = ir.IndexType.get()
        blk = rev.regions[0].blocks.append(index, *[v.type for v in carried])
        with ir.InsertionPoint(blk):
            one = create("arith.constant", [], [index], {"value": ir.IntegerAttr.get(index, 1)}).result
            top = create("arith.subi", [create("arith.addi", [ub, lb], [index]).result, one], [index]).result
            j = create("arith.subi", [top, blk.arguments[0]], [index]).result  # passes backwards
            state = self.recompute(lb, j, step, inits, iv, iters, ops, yields)
            mapping = {iv: j, **dict(zip(iters, state, strict=True))}
            clones = clone_ops(ops, mapping, effects=True)
            passes = [*self.passes_of(op), create("arith.subi", [j, lb], [index]).result]
            self.tag_passes(clones, passes)  # (an `=` store's number names its passes)
            effects = [o for c in clones for o in nested_ops(c) if o.name in EFFECTS]
            ys = [_where(mapping.get(yields[k], yields[k]), clones) for k in floats]
            items = self.hoist_ops(clones)
            ifs = {it.origin: it for it in items if hasattr(it, "origin")}
            local: dict = {}
            for n, y in enumerate(ys):  # an if's results were replaced by selects as it was hoisted
                y = ifs[y[0]].results[y[1]] if isinstance(y, tuple) else y
                self.acc(y, blk.arguments[1 + n], False, local)
            self.reverse(items, local)
            for o in effects:
                o.erase()
            out = [local[state[k]][0] if state[k] in local else self.zero(inits[k].type) for k in floats]
            accs = list(blk.arguments)[1 + len(floats):]
            out += [self.add(a, local[v][0]) if v in local else a for a, v in zip(accs, outer, strict=True)]
            create("scf.yield", out)
        for n, k in enumerate(floats):
            self.acc(inits[k], rev.results[n], False, adj)
        for n, v in enumerate(outer):
            self.acc(v, rev.results[len(floats) + n], False, adj)

    def recompute(self, lb, j, step, inits, iv, iters, ops, yields) -> list:
        """The values the loop carries into pass j: the forward passes lb .. j-1 run again (effects left out)."""
        if not iters:
            return []
        loop = create("scf.for", [lb, j, step, *inits], [v.type for v in inits], regions=1)
        blk = loop.regions[0].blocks.append(ir.IndexType.get(), *[v.type for v in inits])
        with ir.InsertionPoint(blk):
            mapping = {iv: blk.arguments[0], **dict(zip(iters, list(blk.arguments)[1:], strict=True))}
            clone_ops(ops, mapping, effects=False)
            create("scf.yield", [mapping.get(y, y) for y in yields])
        return list(loop.results)


def _is_one(v: ir.Value) -> bool:
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return False
    return ir.IntegerAttr(owner.attributes["value"]).value == 1


def _where(v: ir.Value, clones: list):
    """`v`, or (position in `clones`, result number) when an scf.if among them makes it (hoisting erases it)."""
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.name != "scf.if":
        return v
    for k, c in enumerate(clones):
        if c.operation == owner.operation:
            return (k, ir.OpResult(v).result_number)
    return v


def dce(func_op) -> None:
    """Erase ops whose results nobody uses (the forward values the reverse does not need), to a fixed point. An op
    holding an effect is kept: a reverse loop whose carried cotangents nobody reads may still scatter (the
    gradient of a `.at` read inside it)."""
    changed = True
    while changed:
        changed = False
        for o in reversed(_all_ops(func_op)):
            name = o.name
            if name in EFFECTS or name in ("scf.yield", "func.return", "func.func") or not len(o.results):
                continue
            if o.regions and any(inner.name in EFFECTS for inner in nested_ops(o)):
                continue
            if all(not list(r.uses) for r in o.results):
                o.erase()
                changed = True
                break


def _all_ops(func_op) -> list:
    """Every op inside `func_op`, inner ones before the op that holds them."""
    ops = []

    def visit(o):
        ops.append(o)
        return ir.WalkResult.ADVANCE

    func_op.operation.walk(visit, ir.WalkOrder.POST_ORDER)
    return ops
