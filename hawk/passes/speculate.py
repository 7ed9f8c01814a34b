"""speculate-ifs: an `scf.if` whose branches only compute (no stores, no integer division) becomes both branches
evaluated and an `arith.select` per result.

Every load in a kernel's body is in bounds (lane indices and `.at` coordinates are clamped), so running a
branch that is not taken cannot fault; the drivers' own guards against lanes past the end are marked
`hawk.no_speculate` and stay branches; integer division could, so a branch holding one stays a branch (unless
its divisor is a constant that cannot trap). The
loop body then has no control flow, which is what lets LLVM if-convert and vectorize lane loops with borders.
"""

from __future__ import annotations

from mlir import ir

from hawk.ir.build import create

NO_SPECULATE = "hawk.no_speculate"  # on an scf.if that guards loads (a lane past the end must not be read)
_UNSAFE = {"arith.divsi", "arith.divui", "arith.remsi", "arith.remui", "arith.floordivsi", "arith.ceildivsi",
           "arith.ceildivui"}
_SAFE_DIALECTS = ("arith.", "math.", "vector.", "memref.load", "scf.yield", "scf.if", "memref.dim")
_WRITES = {"vector.store", "vector.maskedstore", "vector.scatter", "vector.compressstore", "vector.transfer_write"}


def _constant_divisor_is_safe(op) -> bool:
    """Whether an integer division's divisor is a constant that cannot trap: nonzero, and not -1 for a signed
    division (INT_MIN / -1 overflows). Lowered `//` and `%` by constants are such divisions."""
    owner = op.operands[1].owner
    if not isinstance(owner, ir.Operation) and hasattr(owner, "operation"):
        owner = owner.operation
    if not isinstance(owner, ir.Operation) or owner.name != "arith.constant":
        return False
    try:
        d = ir.IntegerAttr(owner.attributes["value"]).value
    except (ValueError, KeyError):
        return False  # a vector splat or another attribute: keep the branch
    signed = op.operation.name in ("arith.divsi", "arith.remsi", "arith.floordivsi", "arith.ceildivsi")
    return d != 0 and not (signed and d == -1)


def _pure(region) -> bool:
    ok = [True]

    def visit(op):
        name = op.operation.name
        if name in _UNSAFE and _constant_divisor_is_safe(op):
            return ir.WalkResult.ADVANCE
        if name in _UNSAFE or name in _WRITES or not name.startswith(_SAFE_DIALECTS):
            ok[0] = False
        return ir.WalkResult.ADVANCE

    for block in region.blocks:
        for op in block.operations:
            op.operation.walk(visit)
    return ok[0]


def speculate_ifs(module: ir.Module) -> None:
    ifs = []

    def visit(op):
        if op.operation.name == "scf.if" and len(op.results) > 0 and len(op.regions[1].blocks) > 0 \
                and NO_SPECULATE not in op.operation.attributes:
            ifs.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)  # post-order: inner ifs come first and are flattened before their parents
    for op in ifs:
        then_r, else_r = op.regions[0], op.regions[1]
        if not (_pure(then_r) and _pure(else_r)):
            continue
        values = []
        for region in (then_r, else_r):
            block = region.blocks[0]
            ops = list(block.operations)
            for inner in ops[:-1]:
                inner.move_before(op)
            values.append(list(ops[-1].operands))
        cond = op.operands[0]
        with ir.InsertionPoint(op), op.location:
            for k, res in enumerate(op.results):
                a, b = values[0][k], values[1][k]
                c = cond
                if isinstance(res.type, ir.VectorType):  # a vector result selects lane-wise on a splat condition
                    c = create("vector.broadcast", [cond],
                               [ir.VectorType.get(ir.VectorType(res.type).shape, cond.type)]).result
                sel = create("arith.select", [c, a, b], [res.type]).result
                res.replace_all_uses_with(sel)
        op.operation.erase()
