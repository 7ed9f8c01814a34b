"""The gradients of `hawk.reduce` folds (docs/reverse.md, "Folds").

A fold's adjoint needs its operator's derivatives along the chain of partial results. The operators with rules
of their own are recognised by the combiner's code:

- a product (`m.mul`, or a func returning `a * b`): lane i's share is the cotangent times the product of every
  other kept lane of its slice, the exclusive running product from the slice's first lane times the one from
  its last (two `hawk.scan(op=m.mul)`, reset at each slice's first lane): exact zeros need no division (as
  jax.grad of jnp.prod), and the scans' bits are the same on every thread count and target;
- a sum (a func returning `a + b`): every kept lane's share is the cotangent;
- a fold of truth values (`m.land`, `m.lor`, or any operator over a value converted from truth values or
  integers): nothing float reaches it, so no lane gets a share.

Any other operator ("func") follows its chain through its own Jacobians (hawk/reverse/chains.py). A product (or a
func fold) keeping leading lane axes runs its scans in the lanes' flat order, reset at each slice's first lane
(its slices are contiguous there); one keeping other axes runs keyed scans (by= the slot, order="lane": each
slot's lanes in lane order), in groups of the keyed scans' MAX_KEYS slots when it keeps more
(KeyedScansMixin.grouped_scan).
"""

from __future__ import annotations

from mlir import ir

_CONVERTED = ("arith.uitofp", "arith.sitofp")


def fold_form(module: ir.Module, op) -> str | None:
    """How the reverse treats fold `op` of `module`: "product", "sum", "constant" (its value comes from truth
    values or integers) or "func" (another operator: its chain's partials, hawk/reverse/chains.py)."""
    from hawk.ir.access import combiner_name, combiners

    owner = op.operands[0].owner
    if isinstance(owner, (ir.Operation, ir.OpView)) and owner.operation.name in _CONVERTED:
        return "constant"
    fn = combiners(module)[combiner_name(op)]
    block = fn.regions[0].blocks[0]
    ops = list(block.operations)
    if len(ops) != 2 or ops[1].name != "func.return" or ops[1].operands[0] != ops[0].results[0]:
        return "func"
    args = {block.arguments[0], block.arguments[1]}
    if set(ops[0].operands) != args or len(list(ops[0].operands)) != 2:
        return "func"
    return {"arith.mulf": "product", "arith.addf": "sum"}.get(ops[0].name, "func")


def keeps_leading(over: list[str], axes: list[str]) -> bool:
    """Whether a reduction over `over` keeps a leading run of the lane axes `axes` (or none): its slices are then
    contiguous runs of the flat lane order."""
    kept = [a for a in axes if a not in over]
    return kept == axes[:len(kept)]
