"""lower-host-lanes: turn one lane's hawk code into loops over a chunk of lanes, for the CPU.

The kernel func becomes two functions with the same arguments (flat `memref<?xT>` buffers in the order of
`Layout.buffers`; meta = [lo, hi, chunk, L, extents...]):

  @<k>_lanes   runs lanes [lo, hi): per-lane outputs, kept-axis reductions and sinks are written in place; the
               partials of every-lane reductions go to #scratch[chunk * width ...] (f64) and, for "ordered" sums,
               into the chunk's exact accumulators in #exact (hawk/exact.py, hawk/passes/exact_emit.py).
  @<k>_finish  (meta[2] = number of chunks) combines chunk partials in chunk order, adds up and rounds the exact
               accumulators, folds companions into sinks and divides means by their counts
               (hawk/passes/lower/finish.py).

This module is the driver only: it makes the lowering context (target "host"), builds the two functions and
lets chunk_loops pick the loop shape (flat, two-pass scatters, blocked chains, nested or column rows); every
hawk op is lowered by its rule in hawk/passes/lower/ (context.py has the rule table).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func

import hawk.passes.lower  # noqa: F401  (registers the rules)
from hawk.abi.layout import Layout
from hawk.ir.access import kernel_func
from hawk.passes.lower import chunk_loops, finish, folds
from hawk.passes.lower.context import Lowering


def lower_host(module: ir.Module, layout: Layout, ftype: ir.Type, itypes: dict[str, ir.Type]) -> None:
    """The kernel func of `module` as @<k>_lanes and @<k>_finish for the host."""
    cx = Lowering(module, layout, ftype, itypes, "host")
    kfunc = kernel_func(module)
    folds.collect_folds(cx, kfunc)  # hawk.reduce with a user's operator: hawk/passes/lower/folds.py
    with ir.InsertionPoint(module.body), kfunc.location:
        lanes = func.FuncOp(f"{layout.name}_lanes", (cx.arg_types(), []))
        fin = func.FuncOp(f"{layout.name}_finish", (cx.arg_types(), []))
    entry = lanes.add_entry_block()
    cx.bufs = cx.args(lanes)
    cx.entry, cx.temps = entry, {}
    with ir.InsertionPoint(entry), kfunc.location:
        cx.read_meta()
        chunk_loops.lanes_body(cx, kfunc.regions[0].blocks[0])
        func.ReturnOp([])
    finish.build_finish(cx, fin)
    kfunc.operation.erase()
    folds.drop_combiners(cx)
