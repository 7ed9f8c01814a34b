"""Full unrolling of `for` loops with a constant pass count, for a stencil's gather form (hawk/reverse/gather.py).

A read inside `for j in range(4)` such as `x.at(t=g.t - j)` (a filter's taps along each row) has an offset that
depends on the pass, so the gather form, which needs every read's offset to be a constant, left such planes to the
ordered scatter. Unrolled, each pass's read has a constant offset: the loop's body is copied once per pass with the
pass number a constant and the carried values threaded from one copy to the next. Only the gather form's kernels
see the unrolled IR; the scatter adjoint (the door's exact path) keeps the loop, and both must sum the same terms,
each rounded the same way, so that their bits agree. A value whose adjoint gathers contributions from inside the
loop and from outside it breaks that: the loop's reverse sums the passes' contributions in a carried value and adds
that to the others, the unrolled code adds each pass's straight into the others, which can round differently. So a
loop is left as it is (its reads keep the scatter) when its body reads a float defined before it (other than a
constant; carried values come in as the body's arguments), or loads a plane or Param twice in its body or also
outside it (the lane's own `x` in the body and after the loop: own loads' adjoints are summed per plane, a pass's
first), or belongs to a nest of loops that loads any (each inner loop's passes are summed first), or stores by key (a
store's number names its passes: hawk/reverse/store_numbers.py; the fuzzer's seed 68006 case 24 lost a later
pass's winning store's gradient). tests/test_reverse_gather.py checks the bits; a random campaign of loop
stencils found the loads' rules."""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith

from hawk.ir.access import scatter_mode
from hawk.reverse.loops import clone_ops, nested_ops

MAX_PASSES = 16  # a loop of more passes is left as it is (its reads keep the scatter)
MAX_COPIED = 4096  # nor is one whose unrolled body would exceed this many ops


def constant(v: ir.Value) -> int | None:
    """The integer `v` holds when it is a constant (through index casts), or None."""
    owner = v.owner
    while not isinstance(owner, ir.Block) and owner.name in ("arith.index_cast", "arith.index_castui"):
        owner = owner.operands[0].owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return None
    attr = owner.attributes["value"]
    return attr.value if isinstance(attr, ir.IntegerAttr) else None


def _passes(loop) -> range | None:
    bounds = [constant(loop.operands[k]) for k in range(3)]
    if any(b is None for b in bounds) or bounds[2] <= 0:
        return None
    return range(*bounds)


def unroll_loops(module: ir.Module, wanted: Callable[[ir.Operation], bool]) -> int:
    """Unroll, innermost first, every scf.for of constant bounds with at most MAX_PASSES passes whose body holds
    an op `wanted` picks. Returns how many loops were unrolled."""
    done = 0
    skip: set = set()
    while True:
        loops = [o for o in nested_ops(module.operation) if o.name == "scf.for" and o not in skip and
                 any(wanted(inner) for inner in nested_ops(o)[1:])]
        if not loops:
            return done
        loop = loops[-1]  # (pre-order: no loop still to unroll lies inside the last one)
        passes = _passes(loop)
        if passes is None or len(passes) > MAX_PASSES or len(passes) * len(nested_ops(loop)) > MAX_COPIED or \
                reads_outer_floats(loop) or loads_that_gather(loop, module) or nest_loads(loop) or stores(loop):
            skip.add(loop)
            continue
        _unroll(loop, passes)
        done += 1
        fold_integers(module)


def stores(loop: ir.Operation) -> bool:
    """Whether the loop's body stores by key (`hawk.scatter(...)[k] = v`): a store's number names its pass of each
    loop around it (hawk/reverse/store_numbers.py), which an unrolled copy no longer has, so its cotangent would be
    compared with the wrong store's and a later pass's winning store would get none."""
    return any(o.name == "hawk.scatter" and scatter_mode(o) == "set" for o in nested_ops(loop))


def _is_float(t: ir.Type) -> bool:
    return isinstance(t, ir.FloatType) or (isinstance(t, ir.VectorType) and isinstance(t.element_type, ir.FloatType))


def reads_outer_floats(loop: ir.Operation) -> bool:
    """Whether the loop's body reads a float defined before the loop that is not a constant (its carried values
    come in as the body's arguments)."""
    inner, used = set(), []
    for o in nested_ops(loop):
        for region in o.regions:
            for block in region.blocks:
                inner.update(block.arguments)
        if o != loop:
            inner.update(o.results)
            used.extend(o.operands)
    return any(v not in inner and _is_float(v.type) and (isinstance(v.owner, ir.Block) or
                                                        v.owner.name != "arith.constant") for v in used)


def _loads(ops) -> list:
    """The planes and Params `ops` load (the lane's own value of a plane, a Param's value), once per load."""
    from hawk.ir.dialect import is_hawk

    return [o.operands[0] for o in ops if is_hawk(o, "load") or is_hawk(o, "param")]


def _loaded(ops) -> set:
    return set(_loads(ops))


def loads_that_gather(loop: ir.Operation, module: ir.Module) -> bool:
    """Whether a plane or Param the loop's body loads is loaded twice in it, or outside the loop too: the body's
    reverse sums a pass's loads first, then adds that to the carried sum of the passes before."""
    inside = nested_ops(loop)
    kept = set(inside)
    outside = [o for o in nested_ops(module.operation) if o not in kept]
    loads = _loads(inside)
    return len(loads) != len(set(loads)) or bool(set(loads) & _loaded(outside))


def nest_loads(loop: ir.Operation) -> bool:
    """Whether the loop is part of a nest of loops (inside another or around one) that loads a plane or Param:
    the nest's reverse sums each inner loop's passes' contributions, then those sums, which unrolled code adds
    one by one."""
    from hawk.reverse.loops import enclosing_loops

    outer = (enclosing_loops(loop) or [loop])[0]
    inside = nested_ops(outer)
    return sum(o.name == "scf.for" for o in inside) > 1 and bool(_loaded(inside))


_FOLD = {"arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b, "arith.muli": lambda a, b: a * b,
         "arith.index_cast": lambda a: a, "arith.index_castui": lambda a: a}


def fold_integers(module: ir.Module) -> None:
    """Replace integer adds, subtractions, products and index casts of constants by the constant (the pass number
    an unrolled copy computes its offsets from: `g.t - j` becomes the lane's coordinate minus a constant, which
    hawk/ir/reach.lane_offset reads). Wraps as the integer width does."""
    for op in nested_ops(module.operation):
        fold = _FOLD.get(op.name)
        if fold is None:
            continue
        args = [constant(v) for v in op.operands]
        if any(a is None for a in args):
            continue
        t = op.results[0].type
        bits = t.width if isinstance(t, ir.IntegerType) else 64
        value = (fold(*args) + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
        with ir.InsertionPoint(op), op.location:
            c = arith.ConstantOp(t, value)
        op.results[0].replace_all_uses_with(c.result)
        op.erase()


def _unroll(loop: ir.Operation, passes: range) -> None:
    """Replace `loop` by one copy of its body per pass, in order, before it."""
    body = loop.regions[0].blocks[0]
    iv, carried_args = body.arguments[0], list(body.arguments)[1:]
    ops = list(body.operations)
    yielded = list(ops[-1].operands)  # (the scf.yield)
    carried = list(loop.operands)[3:]
    with ir.InsertionPoint(loop), loop.location:
        for i in passes:
            mapping = {iv: arith.ConstantOp(ir.IndexType.get(), i).result, **dict(zip(carried_args, carried,
                                                                                       strict=True))}
            clone_ops(ops[:-1], mapping, effects=True)
            carried = [mapping.get(v, v) for v in yielded]
    for r, v in zip(loop.results, carried, strict=True):
        r.replace_all_uses_with(v)
    loop.erase()
