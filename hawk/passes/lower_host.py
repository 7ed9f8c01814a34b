"""lower-chunk-loop: turn one lane's hawk code into a loop over a chunk of lanes, for the CPU.

The kernel func becomes `@<k>_lanes`, a function of flat `memref<?xT>` buffers in the order of `Layout.buffers`
(meta = [lo, hi, chunk, L, extents...]) that runs lanes [lo, hi): per-lane outputs, kept-axis reductions and
sinks (into the chunk's private copies) are written in place; the partials of every-lane reductions go to
#scratch[chunk * width ...] (f64) and, for "ordered" sums, into the chunk's exact accumulators in #exact
(hawk/exact.py, hawk/passes/exact_emit.py). `@<k>_finish`, which combines them after every chunk has run, is
the build-finish pass's (hawk/passes/lower/finish.py); the lanes function goes before it.

This module is the driver only: it makes the lowering context (target "host"), builds the function and lets
chunk_loops run the loop shape the chunk-form pass wrote (`hawk.chunk_form`, chunk_form.py); every hawk op
is lowered by its rule in hawk/passes/lower/ (context.py has the rule table).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func

import hawk.passes.lower  # noqa: F401  (registers the rules)
from hawk.abi.layout import Layout
from hawk.ir.access import kernel_func
from hawk.passes import chunk_form
from hawk.passes.lower import chunk_loops, folds, stream
from hawk.passes.lower.context import Lowering, lanes_point
from hawk.passes.plan import fma_pipes_of, mxcsr_of, sae_of


def lower_host(module: ir.Module, layout: Layout, ftype: ir.Type, itypes: dict[str, ir.Type]) -> None:
    """The kernel func of `module` as @<k>_lanes for the host (the user's combiners, copied where used, go)."""
    cx = Lowering(module, layout, ftype, itypes, "host")
    kfunc = kernel_func(module)
    cx.sae = sae_of(kfunc)  # (an x86-64 CPU with AVX-512F: ordered chains may check the inexact flag)
    cx.fma_pipes = fma_pipes_of(kfunc)  # (AMD Zen: compensated chains' subtractions as FMAs)
    cx.mxcsr = mxcsr_of(kfunc)  # (x86-64 with AVX and FMA: the inexact flag, float64 terms cut on a grid)
    cx.form = chunk_form.read(kfunc, layout, cx.exact_pairs, cx.wide_ok, "lower-chunk-loop")
    folds.collect_folds(cx, kfunc)  # hawk.reduce with a user's operator: hawk/passes/lower/folds.py
    with lanes_point(module, layout.name), kfunc.location:
        lanes = func.FuncOp(f"{layout.name}_lanes", (cx.arg_types(), []))
    entry = lanes.add_entry_block()
    cx.bufs = cx.args(lanes)
    cx.begin(entry, heap=True)
    with ir.InsertionPoint(entry), kfunc.location:
        cx.read_meta()
        cx.stream = stream.flag(cx)  # (large per-lane outputs: non-temporal stores, stream.py)
        chunk_loops.lanes_body(cx, kfunc.regions[0].blocks[0])
        stream.stream_loops(cx, lanes)
        cx.free_heap()
        func.ReturnOp([])
    kfunc.operation.erase()
    folds.drop_combiners(cx)
