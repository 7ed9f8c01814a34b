"""Which `= v` store won each slot of a sink (part of the sweep in hawk/reverse/sweep.py): each store's number,
the vector the winners kernel (hawk.reverse.kernel.winners) stores by the store's keys and the adjoint compares
with what the slot holds.

A store's number names one store a lane makes: the lane, the statement, and the pass of each `for` loop around it.
A reverse loop runs copies of the forward body, so the statement's position and the passes travel with the ops
as discardable attributes while the sweep works (`untag` removes them): STORE_POS on each `=` store, PASS_ID on a
reverse loop's copies, keying the passes that loop gave them.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import vector

from hawk.abi.reverse import PART_BITS, PARTS, win_components
from hawk.ir.access import scatter_mode, sink_name
from hawk.ir.build import create, strs
from hawk.reverse.loops import enclosing_loops, nested_ops

STORE_POS = "hawk.store_pos"  # an `=` store's position among the stores into its sink
PASS_ID = "hawk.pass_id"  # a reverse loop's copy of a loop or store: its entry in WinnersMixin.loop_passes


class WinnersMixin:
    """Sweep.store_number and what it needs: the stores' positions, the passes around each store, the
    comparison with the winners Table."""

    def number_stores(self) -> None:
        """Tag each `=` store with its position among the stores into its sink (copies keep it)."""
        seen: dict = {}
        i64 = ir.IntegerType.get_signless(64)
        for op in nested_ops(self.func):
            if op.name == "hawk.scatter" and scatter_mode(op) == "set":
                sink = sink_name(op)
                op.attributes[STORE_POS] = ir.IntegerAttr.get(i64, seen.get(sink, 0))
                seen[sink] = seen.get(sink, 0) + 1
        self.loop_passes: dict[int, list] = {}  # a PASS_ID -> the forward pass of each loop around the op tagged

    def store_number(self, op) -> ir.Value:
        """A store's number: this lane's index times the stores into the sink, plus the statement's position,
        then the pass of each `for` loop around the store, outermost first (zeros past its loops, up to the
        sink's deepest store), each integer in hawk.abi.reverse.PARTS parts of PART_BITS bits, low first (exact in
        float32 however many lanes): a vector, so each store a lane makes has its own. The forward's store rule
        picks the winner; the number only names it."""
        k = ir.IntegerAttr(op.attributes[STORE_POS]).value
        sink = sink_name(op)
        n = self.p.stores.get(sink, 1)
        num = self.linear() if n == 1 else self.op("arith.addi", self.op("arith.muli", self.linear(),
                                                                           self.iconst(n)), self.iconst(k))
        i64 = ir.IntegerType.get_signless(64)
        ints = [num] + [create("arith.index_cast", [j], [i64]).result for j in self.passes_of(op)]
        parts = []
        for v in ints:
            for part in range(PARTS):
                bits = self.op("arith.shrsi", v, self.iconst(part * PART_BITS)) if part else v
                if part < PARTS - 1:
                    bits = self.op("arith.andi", bits, self.iconst((1 << PART_BITS) - 1))
                parts.append(self.op("arith.sitofp", bits, t=self.ftype))
        size = win_components(self.p.passes.get(sink, 0))
        parts += [self.zero(self.ftype)] * (size - len(parts))
        return create("vector.from_elements", parts, [ir.VectorType.get([size], self.ftype)]).result

    def passes_of(self, op) -> list:
        """The pass (an index from 0: the loop variable less the loop's start) of each `for` loop around `op`,
        outermost first: from the loops themselves where `op` sits in the forward body, as a reverse loop gave
        them to its copy otherwise."""
        if PASS_ID in op.attributes:
            return self.loop_passes[ir.IntegerAttr(op.attributes[PASS_ID]).value]
        return [create("arith.subi", [loop.regions[0].blocks[0].arguments[0], loop.operands[0]],
                       [ir.IndexType.get()]).result for loop in enclosing_loops(op)]

    def tag_passes(self, ops: list, passes: list) -> None:
        """Record the forward passes around the loops and `=` stores among `ops` (a reverse loop's copies)."""
        key = len(self.loop_passes)
        self.loop_passes[key] = passes
        tag = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), key)
        for c in ops:
            for o in nested_ops(c):
                if o.name == "scf.for" or (o.name == "hawk.scatter" and STORE_POS in o.attributes):
                    o.attributes[PASS_ID] = tag

    def untag(self) -> None:
        """Drop the reverse's own attributes from what is left of the body."""
        for o in nested_ops(self.func):
            for name in (STORE_POS, PASS_ID):
                if name in o.attributes:
                    del o.attributes[name]

    def won(self, op, sink: str, keys: list) -> ir.Value:
        """Whether the slot at `keys` holds store `op`'s number (a vector, whose components the winners Table
        holds along its first axis)."""
        labels = ["p"] + [f"a{k}" for k in range(len(keys))]
        num = self.store_number(op)
        table = self.arg(self.p.win[sink], "table", self.ftype, labels)
        mine = None
        for c in range(ir.VectorType(num.type).shape[0]):
            at = create("hawk.at", [table, self.iconst(c), *keys], [self.ftype], {"axes": strs(labels)}).result
            same = self.cmp("oeq", at, vector.extract(num, [], [c]))
            mine = same if mine is None else self.land(mine, same)
        return mine
