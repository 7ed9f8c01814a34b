"""The reverse of `if`/`else` (part of the sweep in hawk/reverse/sweep.py).

An `if`'s bodies are lane-local and pure: the adjoint hoists them to the level of the if (the forward values of
both sides are computed, and selects replace the if's results), and runs each side's reverse under an `scf.if` on
the same condition, so a lane never evaluates the derivative of the side it did not take. Hawk ops inside (reads)
are reversed at the if's level with the cotangent the reverse-if hands out. A loop with `.at` reads cannot be
reversed under the reverse-if (its reads' adjoint is a scatter, and a scatter may not sit in an if): it stays at
the if's level, the if splits around it, and its end bound becomes its start bound where the lane took the other
side, so it runs no pass there, forward or reverse.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from hawk.ir.access import plane_name
from hawk.ir.build import create
from hawk.ir.dialect import is_hawk
from hawk.reverse.loops import deep_operands, nested_ops
from hawk.reverse.rules import is_float


@dataclass
class If:
    """A forward `if` after hoisting: its condition, the ops of each side, what each side yields, and the
    selects that replaced its results."""

    cond: ir.Value
    then_items: list
    else_items: list
    then_yields: list
    else_yields: list
    results: list
    origin: int = -1  # its position among the ops hoisted


class BranchesMixin:
    """Sweep.hoist, hoist_ops and reverse_if."""

    def hoist(self, block, anchor=None) -> list:
        """The items of a block (ops and Ifs) with every if-body moved before `anchor` (the top-level if)."""
        return self.hoist_ops(list(block.operations), anchor)

    def hoist_ops(self, ops: list, anchor=None) -> list:
        items = []
        for pos, op in enumerate(ops):
            name = op.operation.name
            if name in ("scf.yield", "func.return"):
                continue
            if name == "scf.if":
                top = anchor or op
                then_items = self.hoist(op.regions[0].blocks[0], top)
                else_items = self.hoist(op.regions[1].blocks[0], top) if len(op.regions[1].blocks) else []
                ty = list(_yield(op, 0).operands)
                ey = list(_yield(op, 1).operands)
                cond = op.operands[0]
                with ir.InsertionPoint(top), op.location:
                    sels = [self.select(cond, a, b) for a, b in zip(ty, ey, strict=True)]
                for r, s in zip(op.results, sels, strict=True):
                    r.replace_all_uses_with(s)
                leaves = [x for x in then_items + else_items if not isinstance(x, If) and is_hawk(x)]
                items += leaves
                items += self.split_if(cond, [x for x in then_items if x not in leaves],
                                       [x for x in else_items if x not in leaves], ty, ey, sels, pos)
                op.operation.erase()
                continue
            if anchor is not None:
                op.operation.move_before(anchor)
            items.append(op)
        return items

    def split_if(self, cond, then_items: list, else_items: list, ty: list, ey: list, sels: list, pos: int) -> list:
        """A hoisted if as sweep items. A loop with `.at` reads of a differentiated plane cannot be reversed under
        the reverse-if (its reverse scatters, and a scatter may not sit in an if): it leaves the if, which splits
        around it, and its passes run only where the lane took its side (the end bound becomes the start bound
        elsewhere, so the untaken side's loop runs no pass, forward or reverse, and gives exactly zero)."""
        if not any(not isinstance(x, If) and self.scatters_in_reverse(x) for x in then_items + else_items):
            return [If(cond, then_items, else_items, ty, ey, sels, pos)]
        out: list = []
        parts: list = []
        for side, items in ((0, then_items), (1, else_items)):
            kept = []
            for x in items:
                if not isinstance(x, If) and self.scatters_in_reverse(x):
                    lb, ub = x.operands[0], x.operands[1]
                    with ir.InsertionPoint(x), x.location:
                        x.operands[1] = self.select(cond, ub, lb) if side == 0 else self.select(cond, lb, ub)
                    parts.append((side, kept))
                    parts.append((side, x))
                    kept = []
                else:
                    kept.append(x)
            parts.append((side, kept))
        # then-side pieces in order, each loop between the Ifs of what comes before and after it; the else side's
        # pieces the same way after them (the two sides never read each other's values)
        for side, piece in parts:
            if isinstance(piece, list):
                if piece:
                    out.append(If(cond, piece if side == 0 else [], piece if side == 1 else [], [], [], [], -2))
            else:
                out.append(piece)
        out.append(If(cond, [], [], ty, ey, sels, pos))
        return out

    def scatters_in_reverse(self, op) -> bool:
        """A `for` loop whose reverse scatters: it reads (`.at`) a plane the reverse differentiates."""
        return op.operation.name == "scf.for" and any(
            is_hawk(o, "at") and plane_name(o) in self.p.grad for o in nested_ops(op))

    def reverse_if(self, it: If, adj: dict) -> None:
        seeds = {}
        for r, a, b in zip(it.results, it.then_yields, it.else_yields, strict=True):
            if r in adj:
                g = self.share(adj.pop(r))
                seeds.setdefault(0, []).append((a, g))
                seeds.setdefault(1, []).append((b, g))
        for side, items in ((0, it.then_items), (1, it.else_items)):  # (read by what followed a split: above)
            inner = _defined(items)
            for v in [v for v in adj if v in inner]:
                seeds.setdefault(side, []).append((v, self.share(adj.pop(v))))
        if not seeds:
            return
        inner = _defined(it.then_items) | _defined(it.else_items)
        outer = [v for v in _used(it.then_items + it.else_items, it.then_yields + it.else_yields)
                 if is_float(v.type) and v not in inner]
        op = create("scf.if", [it.cond], [v.type for v in outer], regions=2)
        for side, items in ((0, it.then_items), (1, it.else_items)):
            blk = op.regions[side].blocks.append()
            with ir.InsertionPoint(blk):
                local: dict = {}
                for v, g in seeds.get(side, []):
                    self.acc(v, g, False, local)
                self.in_if += 1
                self.reverse(items, local)
                self.in_if -= 1
                create("scf.yield", [local[v][0] if v in local else self.zero(v.type) for v in outer])
        for v, r in zip(outer, op.results, strict=True):
            self.acc(v, r, False, adj)


def _yield(if_op, side: int):
    blocks = if_op.regions[side].blocks
    return blocks[0].operations[len(blocks[0].operations) - 1]


def _defined(items) -> set:
    out = set()
    for it in items:
        if isinstance(it, If):
            out |= _defined(it.then_items) | _defined(it.else_items) | set(it.results)
        else:
            out |= set(it.results)
    return out


def _used(items, extra) -> list:
    seen, out = set(), []
    for v in [v for it in items for v in _operands(it)] + list(extra):
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


def _operands(it) -> list:
    if isinstance(it, If):
        return [it.cond, *[v for x in it.then_items + it.else_items for v in _operands(x)],
                *it.then_yields, *it.else_yields]
    return deep_operands(it)
