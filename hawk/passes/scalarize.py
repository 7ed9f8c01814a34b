"""scalarize-payloads: a lane's vector and matrix arithmetic split into its components inside the host's lane
loops.

A payload value is an MLIR vector (`vector<3xf64>` for a `Vector[3]`), and LLVM's loop vectorizer does not widen
instructions whose type is already a vector: a lane loop whose body works on such values ran lane by lane, the
SLP vectorizer packing each lane's components into a register with inserts and extracts around it (a `Vector[3]`
map `v * s + w` of 1e7 lanes took 16 ms where the same work on three Scalar planes took 12). Here every
elementwise arith or math op on a payload-sized vector (at most WIDE_PAYLOAD entries: wider payloads run component
loops already) inside a loop the lowering marked as a lane loop (`LANES`) becomes one scalar op per component,
reading the components with `vector.extract` and rebuilding the vector with `vector.from_elements`; canonicalize
then folds each extract of a rebuilt (or broadcast) vector into the scalar itself, so the body becomes scalar code
that the loop vectorizer widens across lanes. Each component gets the same IEEE operation as before: no bit
changes. A loop that carries a vector value from one lane to the next (a vector sum's accumulator) is left as it
is: its values would go through inserts and extracts every lane.

It runs after speculate-ifs (whose selects on payload values it splits too) and before expand-math (which then
sees scalar math). The functions expand-math writes as eagle's own code (exp, log, sin...) are split on payloads
wherever they are, in a lane loop or not: a component then gets the same bits as a Scalar lane's call (before,
a payload's call went to libm element by element).
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import vector

from hawk.ir.build import create
from hawk.passes.host_emit import WIDE_PAYLOAD
from hawk.targets.host_math import FUNCS

LANES = "hawk.lanes"  # on an scf.for the host lowering runs lanes in (stream.mark writes it)


def scalarize_payloads(module: ir.Module) -> None:
    """Split payload arithmetic into components in every marked lane loop of the module's host functions, and
    the functions expand-math expands on payloads wherever they are."""
    loops, funcs = [], []

    def visit(op):
        if op.name == "scf.for" and LANES in op.attributes:
            loops.append(op)
        elif op.name.startswith("math.") and op.name[5:] in FUNCS and _splittable(op):
            funcs.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op in funcs:
        _split(op)
    for loop in loops:
        del loop.attributes[LANES]
        if any(isinstance(v.type, ir.VectorType) for v in loop.operands[3:]):
            continue  # (a vector carried across lanes)
        for op in _splittable_ops(loop):
            _split(op)


def _splittable_ops(loop) -> list:
    found = []

    def collect(op):
        if _splittable(op):
            found.append(op)
        return ir.WalkResult.ADVANCE

    for op in loop.regions[0].blocks[0].operations:
        op.walk(collect)
    return found


def _splittable(op) -> bool:
    name = op.name
    if not name.startswith(("arith.", "math.")) or name == "arith.constant" or len(op.results) != 1:
        return False
    t = op.results[0].type
    if not isinstance(t, ir.VectorType) or t.has_rank is False or not 0 < math.prod(t.shape) <= WIDE_PAYLOAD:
        return False
    return all(not isinstance(v.type, ir.VectorType) or ir.VectorType(v.type).shape == t.shape
               for v in op.operands)


def _split(op) -> None:
    t = ir.VectorType(op.results[0].type)
    positions = _positions(t.shape)
    attrs = {name: op.attributes[name] for name in op.attributes}
    with ir.InsertionPoint(op), op.location:
        parts = []
        for pos in positions:
            operands = [vector.extract(v, [], pos) if isinstance(v.type, ir.VectorType) else v for v in op.operands]
            parts.append(create(op.name, operands, [t.element_type], attrs).result)
        whole = create("vector.from_elements", parts, [t]).result
    op.results[0].replace_all_uses_with(whole)
    op.erase()


def _positions(shape) -> list[list[int]]:
    """Every position of a vector of `shape`, row-major (from_elements' order)."""
    out = [[]]
    for d in shape:
        out = [p + [k] for p in out for k in range(d)]
    return out
