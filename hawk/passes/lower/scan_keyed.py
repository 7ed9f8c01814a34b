"""Keyed scans (`hawk.scan(x, by=key, keys=n)`, hawk/frontend/scan_keyed.py): per-key running totals.

The bits contract is the unkeyed scan's, per key (docs/semantics.md, "Scans", "Keyed scans"): lanes go in blocks
of SCAN_BLOCK counted from lane 0 (a host chunk and a GPU thread of the chunk form start on a block), and one
"scan" buffer (hawk.abi.layout.keyed_values) holds two rows of n values per block:

  stage s     `scan_totals`: at a block's first lane its row of the first half starts at the identity; each
              lane with key k in 0..n-1 folds x into entry k (lanes one by one, in lane order); key -1 adds
              nothing; any other key is reported through #err (the run is refused after this stage).
              The finish (`finish_keyed`, on the host for every target) turns the totals into offsets in place:
              keys outer, blocks inner, one running value that restarts at the identity at every key
              (order="lane": the fold of the same key's earlier blocks) or runs on (order="key": the fold of
              every smaller key's blocks, then the same key's earlier ones).
  stage s+1   `scan_apply`: at a block's first lane the block's row of offsets is copied into its row of the
              second half (the running values: the offsets stay for any later stage that reads the scan too; in a
              slot-range stage, where every chunk runs every block, into a row of the chunk's own instead);
              a lane with key k reads entry k (its exclusive value), folds x in, writes it back (its inclusive
              value); a lane with key -1 gets the identity.

Every target runs these same operations in the same order (a GPU thread runs one block as a host chunk does),
so the bits depend on neither threads nor target. The running values live in memory, not in the lanes' loop's
iter_args: a keyed scan keeps no slot in the chunk state (scan.plan_scans skips it).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from hawk.abi.layout import SCAN_BLOCK
from hawk.ir.access import scan_cell, scan_key, scan_keys, scan_mode, scan_op, scan_value
from hawk.passes.lower import slot_ranges
from hawk.passes.lower.context import Lowering

_NE, _ULT = 1, 6  # arith.cmpi predicates
_SHIFT = SCAN_BLOCK.bit_length() - 1


def _row(cx: Lowering, n: int) -> ir.Value:
    """Where this lane's block row of n values starts (in the first half)."""
    e = cx.e
    return e.mul_i(e.op("arith.shrui", cx.lane, e.c(_SHIFT)), e.c(n))


def _half(cx: Lowering, n: int) -> ir.Value:
    """Where the second half (the running values) starts: n values per block of the run (at least one block;
    from the lane count, not memref.dim, which spirv lacks)."""
    e = cx.e
    blocks = e.op("arith.shrui", e.add_i(cx.L, e.c(SCAN_BLOCK - 1)), e.c(_SHIFT))
    return e.mul_i(e.op("arith.maxui", blocks, e.c(1)), e.c(n))


def _at_block_start(cx: Lowering, body) -> None:
    """Run `body(k)` for k in 0..n-1 at a block's first lane (scf.if around an scf.for)."""
    from hawk.passes.lower.scan import _block_start

    branch = scf.IfOp(_block_start(cx), [], has_else=False)
    with ir.InsertionPoint(branch.then_block):
        body()
        scf.YieldOp([])


def _inside(cx: Lowering, key: ir.Value, n: int) -> ir.Value:
    """0 <= key < n (one unsigned compare)."""
    return cx.e.cmpi(_ULT, key, cx.e.c(n, cx.e.i64))


def keyed_totals(cx: Lowering, op) -> None:
    """Stage s: this lane's x into its block's total for its key."""
    from hawk.passes.lower.scan import combine, identity
    from hawk.passes.lower.scatters import report_bad_key

    e = cx.e
    n, x, key, kind, cell = scan_keys(op), scan_value(op), scan_key(op), scan_op(op), scan_cell(op)
    buf = cx.bufs[(cell, "scan")]
    row = _row(cx, n)

    def start():
        loop = scf.ForOp(e.c(0), e.c(n), e.c(1))
        with ir.InsertionPoint(loop.body):
            e.store(identity(cx, kind, x.type), buf, e.add_i(row, loop.induction_variable))
            scf.YieldOp([])

    _at_block_start(cx, start)
    branch = scf.IfOp(_inside(cx, key, n), [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        at = e.add_i(row, e.to_index(key))
        e.store(combine(cx, kind, e.load(buf, at), x), buf, at)
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        report_bad_key(cx, cell, key, e.cmpi(_NE, key, e.c(-1, e.i64)), role="scan")
        scf.YieldOp([])


def keyed_apply(cx: Lowering, op) -> ir.Value:
    """Stage s+1: this lane's running value for its key (the identity for key -1)."""
    from hawk.passes.lower.scan import combine, identity

    e = cx.e
    n, x, key, kind = scan_keys(op), scan_value(op), scan_key(op), scan_op(op)
    buf = cx.bufs[(scan_cell(op), "scanoff")]
    row = _row(cx, n)
    if slot_ranges.active(cx):  # every chunk runs every block: the running values in a row of its own
        runs, run = cx.local_buffer(n, x.type), e.c(0)
    else:
        runs, run = buf, e.add_i(_half(cx, n), row)

    def start():
        loop = scf.ForOp(e.c(0), e.c(n), e.c(1))
        with ir.InsertionPoint(loop.body):
            k = loop.induction_variable
            e.store(e.load(buf, e.add_i(row, k)), runs, e.add_i(run, k))
            scf.YieldOp([])

    _at_block_start(cx, start)
    branch = scf.IfOp(_inside(cx, key, n), [x.type], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        at = e.add_i(run, e.to_index(key))
        prev = e.load(runs, at)
        new = combine(cx, kind, prev, x)
        e.store(new, runs, at)
        scf.YieldOp([new if scan_mode(op) == "inclusive" else prev])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([identity(cx, kind, x.type)])
    return branch.results[0]


def finish_keyed(cx: Lowering, cell: str, kind: str, t: ir.Type, n: int, order: str) -> None:
    """The finish: each block's per-key totals into its per-key offsets, in place (keys outer, blocks inner)."""
    from hawk.passes.lower.scan import combine, identity

    e = cx.e
    buf = cx.bufs[(cell, "scan")]
    blocks = e.op("arith.divui", e.dim(buf), e.c(2 * n))
    ident = identity(cx, kind, t)
    keys = scf.ForOp(e.c(0), e.c(n), e.c(1), [ident])
    with ir.InsertionPoint(keys.body):
        k = keys.induction_variable
        start = ident if order == "lane" else keys.inner_iter_args[0]
        loop = scf.ForOp(e.c(0), blocks, e.c(1), [start])
        with ir.InsertionPoint(loop.body):
            off = loop.inner_iter_args[0]
            at = e.add_i(e.mul_i(loop.induction_variable, e.c(n)), k)
            total = e.load(buf, at)
            e.store(off, buf, at)
            scf.YieldOp([combine(cx, kind, off, total)])
        scf.YieldOp([loop.results[0]])
