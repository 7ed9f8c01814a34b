"""Float zeros the Vulkan driver cannot see: a constant +-0.0 operand of a multiply, divide, add or subtract is
replaced by a zero computed at run time.

Why: Mesa's lavapipe (22.3, the CI's Vulkan device) folds `x * 0.0` to 0 and `x / 0.0` to 0 at shader compile
time even for instructions decorated NoContraction and with SignedZeroInfNanPreserve declared, where IEEE (and the
host target) give NaN for an infinite or NaN x and +-inf or NaN for the division. Such constants reach the kernel
when the front end or MLIR's canonicaliser folds an expression to zero (`x / m.to_float(m.index(0.5, n))`,
`x / m.to_float((k - k) % 3)`: the spirv target canonicalises the kernel before this step, so that every zero
MLIR can prove is a constant here; a zero only the driver proves is beyond reach). A
zero the driver cannot know keeps IEEE's rules: `float(status[0] - CANARY_TRIPS)`, read from eagle's status
buffer (whose word 0 the runtime sets to CANARY_TRIPS and no invocation writes; hawk/targets/spirv_lower.py
`add_loop_canary`), negated for -0.0. One load and one conversion per invocation, where a kernel has such an op.
"""

from __future__ import annotations

import math

from mlir import ir

from hawk.abi.targets import CANARY_TRIPS
from hawk.targets import spirv_lower

OPS = ("arith.mulf", "arith.divf", "arith.addf", "arith.subf")


def _zero_constant(v: ir.Value) -> bool | None:
    """For a scalar float arith.constant +-0.0, or one widened by arith.extf (spirv_math computes float32
    division in float64): whether it is -0.0; else None."""
    owner = v.owner
    if isinstance(owner, ir.OpView) and owner.operation.name == "arith.extf":
        v = owner.operands[0]
        owner = v.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "arith.constant":
        return None
    if not isinstance(v.type, (ir.F32Type, ir.F64Type)):
        return None
    value = ir.FloatAttr(owner.attributes["value"]).value
    return math.copysign(1.0, value) < 0 if value == 0.0 else None


def opaque_zeros(gpu_func, status: ir.Value) -> int:
    """Replace every constant +-0.0 operand of OPS in `gpu_func` by a run-time zero of its sign and type
    (computed once at the function's start from `status`, eagle's status buffer); returns how many."""
    uses = []

    def visit(op):
        if op.name in OPS:
            for k, v in enumerate(op.operands):
                neg = _zero_constant(v)
                if neg is not None:
                    uses.append((op.operation, k, v.type, neg))
        return ir.WalkResult.ADVANCE

    gpu_func.operation.walk(visit)
    if not uses:
        return 0
    block = gpu_func.regions[0].blocks[0]
    i64, index = ir.IntegerType.get_signless(64), ir.IndexType.get()
    made: dict = {}
    with ir.InsertionPoint.at_block_begin(block), gpu_func.location:
        c0 = _create("arith.constant", [], index, {"value": ir.IntegerAttr.get(index, 0)})
        trips = _create("memref.load", [status, c0], i64)
        known = _create("arith.constant", [], i64, {"value": ir.IntegerAttr.get(i64, CANARY_TRIPS)})
        diff = _create("arith.subi", [trips, known], i64)
        for _, _, t, neg in uses:
            key = (str(t), neg)
            if key not in made:
                z = _create("arith.sitofp", [diff], t)
                made[key] = _create("arith.negf", [z], t) if neg else z
    for op, k, t, neg in uses:
        op.operands[k] = made[(str(t), neg)]
    return len(uses)


def _create(name: str, operands: list, result: ir.Type, attrs: dict | None = None) -> ir.Value:
    return spirv_lower._create(name, operands, [result], attrs).result
