"""MLIR rewrites the SPIR-V target runs on a gpu.module before convert-gpu-to-spirv (hawk/targets/spirv.py
lists why each exists): scalarize, add_loop_canary, unroll_innermost_loops, guard_zero_trip_loops,
expand_sign_extensions.

scalarize: SPIR-V has only 1-D vectors of 2, 3 or 4 elements and convert-gpu-to-spirv has no pattern for
`vector.multi_reduction`, `vector.from_elements` into 2-D vectors and friends. The GPU lowering keeps vectors
local (built from scalars, combined, taken apart again; loop-carried values are scalars), so every vector value is
replaced by its elements, row-major, and every op on vectors by the same op on each element. Reductions combine
in the host's order (the accumulator first, then the elements in index order), so a lane's terms carry the same
bits as on the host. A rank-1 vector stored to or loaded from a memref at one index (a wide payload's per-thread
buffer, hawk/passes/gpu_wide.py) becomes one memref.store or memref.load per element.
"""

from __future__ import annotations

import itertools
import math

from mlir import ir

from hawk.ir.build import create

# vector.kind -> the scalar op combining two values (float, integer)
KINDS = {"add": ("arith.addf", "arith.addi"), "mul": ("arith.mulf", "arith.muli"),
         "maxnumf": ("arith.maxnumf", None), "minnumf": ("arith.minnumf", None),
         "maximumf": ("arith.maximumf", None), "minimumf": ("arith.minimumf", None),
         "maxsi": (None, "arith.maxsi"), "minsi": (None, "arith.minsi"), "maxui": (None, "arith.maxui"),
         "minui": (None, "arith.minui"), "and": (None, "arith.andi"), "or": (None, "arith.ori"),
         "xor": (None, "arith.xori")}
DYNAMIC = -(1 << 63)
CANARY_TAG = "eagle.canary"


class Unsupported(Exception):
    """An op on vectors the scalariser does not know."""


def _vec(t: ir.Type):
    try:
        return ir.VectorType(t)
    except ValueError:
        return None


def _shape(t: ir.Type) -> list[int]:
    return list(ir.VectorType(t).shape)


def _ints(attr) -> list[int]:
    return [int(x) for x in ir.DenseI64ArrayAttr(attr)]


def _strides(shape: list[int]) -> list[int]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return out[::-1]


def _flat(idx, shape) -> int:
    return sum(i * s for i, s in zip(idx, _strides(shape), strict=True))


def _create(name, operands, results, attrs=None):
    return create(name, operands, results, attrs)


def _is_float(t: ir.Type) -> bool:
    return isinstance(t, (ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type))


def _constant(elem: ir.Type, value) -> ir.Value:
    attr = ir.FloatAttr.get(elem, value) if _is_float(elem) else ir.IntegerAttr.get(elem, int(value))
    return _create("arith.constant", [], [elem], {"value": attr}).result


def scalarize(gpu_module) -> None:
    """Replace every vector value in `gpu_module` by its elements (see the module docstring)."""
    ops: list[ir.Operation] = []

    def collect(op):
        op = op.operation
        if any(_vec(r.type) for r in op.results) or any(_vec(v.type) for v in op.operands):
            ops.append(op)
        for region in op.regions:
            for block in region.blocks:
                if any(_vec(a.type) for a in block.arguments):
                    raise Unsupported(f"a block argument of vector type under {op.name}")
        return ir.WalkResult.ADVANCE

    gpu_module.operation.walk(collect, ir.WalkOrder.PRE_ORDER)
    if not ops:
        return
    parts: dict = {}  # vector Value -> list of scalar Values

    def get(v: ir.Value) -> list[ir.Value]:
        if v not in parts:
            raise Unsupported(f"a vector value defined by {v.owner.name if hasattr(v.owner, 'name') else 'a block'}")
        return parts[v]

    for op in ops:
        with ir.InsertionPoint(op), op.location:
            values = _rewrite(op, get)
        for r, v in zip(op.results, values, strict=True):
            if _vec(r.type):
                parts[r] = v
            else:
                r.replace_all_uses_with(v)
    for op in reversed(ops):
        for r in op.results:
            if list(r.uses):
                raise Unsupported(f"a vector result of {op.name} is used by {next(iter(r.uses)).owner.name}")
        op.erase()


def _rewrite(op: ir.Operation, get) -> list:
    """The replacement of each result of `op`: a list of scalars for a vector result, a scalar otherwise."""
    name = op.name
    attrs = {a: op.attributes[a] for a in op.attributes}
    if name in ("vector.store", "vector.load") and _flat_access(op):
        return _buffer_access(op, get)
    if name in ("scf.yield", "scf.for", "scf.if", "scf.while", "func.return", "gpu.return", "memref.store",
                "memref.load", "vector.load", "vector.store", "vector.transfer_read", "vector.transfer_write"):
        raise Unsupported(f"{name} on vector values")
    if name == "arith.constant":
        t = ir.VectorType(op.results[0].type)
        elem, n = t.element_type, math.prod(t.shape)
        dense = ir.DenseElementsAttr(attrs["value"])
        if dense.is_splat:
            v = _constant(elem, _py(dense.get_splat_value()))
            return [[v] * n]
        typed = ir.DenseFPElementsAttr(dense) if _is_float(elem) else ir.DenseIntElementsAttr(dense)
        return [[_constant(elem, typed[i]) for i in range(n)]]
    if name == "vector.from_elements":
        return [list(op.operands)]
    if name in ("vector.broadcast", "vector.splat"):
        src = op.operands[0]
        shape = _shape(op.results[0].type)
        if not _vec(src.type):
            return [[src] * math.prod(shape)]
        sshape, sv = _shape(src.type), get(src)
        lead = len(shape) - len(sshape)
        out = []
        for idx in itertools.product(*[range(s) for s in shape]):
            sidx = [0 if s == 1 else i for i, s in zip(idx[lead:], sshape, strict=True)]
            out.append(sv[_flat(sidx, sshape)])
        return [out]
    if name == "vector.shape_cast":
        return [list(get(op.operands[0]))]
    if name == "vector.extract":
        src = op.operands[0]
        pos = _static_position(op, attrs)
        sshape, sv = _shape(src.type), get(src)
        start = _flat(pos + [0] * (len(sshape) - len(pos)), sshape)
        size = math.prod(sshape[len(pos):])
        chunk = sv[start:start + size]
        return [chunk if _vec(op.results[0].type) else chunk[0]]
    if name == "vector.insert":
        val, dest = op.operands[0], op.operands[1]
        pos = _static_position(op, attrs)
        dshape, out = _shape(dest.type), list(get(dest))
        start = _flat(pos + [0] * (len(dshape) - len(pos)), dshape)
        new = get(val) if _vec(val.type) else [val]
        out[start:start + len(new)] = new
        return [out]
    if name == "vector.transpose":
        src = op.operands[0]
        perm = _ints(attrs["permutation"])
        sshape, sv = _shape(src.type), get(src)
        rshape = _shape(op.results[0].type)
        out = []
        for idx in itertools.product(*[range(s) for s in rshape]):
            sidx = [0] * len(sshape)
            for k, p in enumerate(perm):
                sidx[p] = idx[k]
            out.append(sv[_flat(sidx, sshape)])
        return [out]
    if name == "vector.multi_reduction":
        src, acc = op.operands[0], op.operands[1]
        dims = set(_ints(attrs["reduction_dims"]))
        sshape, sv = _shape(src.type), get(src)
        combine = _combiner(attrs["kind"], ir.VectorType(src.type).element_type, attrs.get("fastmath"))
        keep = [d for d in range(len(sshape)) if d not in dims]
        red = sorted(dims)
        accs = get(acc) if _vec(acc.type) else [acc]
        out = []
        for k, kidx in enumerate(itertools.product(*[range(sshape[d]) for d in keep])):
            r = accs[k]
            for ridx in itertools.product(*[range(sshape[d]) for d in red]):
                full = [0] * len(sshape)
                for d, i in zip(keep, kidx, strict=True):
                    full[d] = i
                for d, i in zip(red, ridx, strict=True):
                    full[d] = i
                r = combine(r, sv[_flat(full, sshape)])
            out.append(r)
        return [out if _vec(op.results[0].type) else out[0]]
    if name == "vector.reduction":
        src = op.operands[0]
        sv = get(src)
        combine = _combiner(attrs["kind"], ir.VectorType(src.type).element_type, attrs.get("fastmath"))
        if len(op.operands) > 1:
            r, rest = op.operands[1], sv
        else:
            r, rest = sv[0], sv[1:]
        for v in rest:
            r = combine(r, v)
        return [r]
    if name.startswith("vector."):
        raise Unsupported(name)
    if op.regions and any(len(r.blocks) for r in op.regions):
        raise Unsupported(f"{name} with regions on vector values")
    # an elementwise op (arith, math): the same op on each element
    shapes = {tuple(_shape(v.type)) for v in [*op.operands, *op.results] if _vec(v.type)}
    if len(shapes) != 1:
        raise Unsupported(f"{name} mixing vector shapes {sorted(shapes)}")
    n = math.prod(next(iter(shapes)))
    cols = [get(v) if _vec(v.type) else [v] * n for v in op.operands]
    rtypes = [ir.VectorType(r.type).element_type if _vec(r.type) else r.type for r in op.results]
    outs = [[] for _ in op.results]
    for i in range(n):
        new = _create(name, [c[i] for c in cols], rtypes, attrs)
        for k, r in enumerate(new.results):
            outs[k].append(r)
    return outs


def _flat_access(op) -> bool:
    """A rank-1 vector stored to or loaded from a memref at one index (how hawk/passes/gpu_wide.py moves a wide
    payload to and from its per-thread buffer)."""
    v = op.operands[0] if op.name == "vector.store" else op.results[0]
    return len(op.operands) == (3 if op.name == "vector.store" else 2) and ir.VectorType(v.type).rank == 1


def _buffer_access(op, get) -> list:
    """vector.store / vector.load element by element: memref.store / memref.load at index + k."""
    index = ir.IndexType.get()

    def at(k: int) -> ir.Value:
        base = op.operands[-1]
        return base if k == 0 else _create("arith.addi", [base, _constant(index, k)], [index]).result

    if op.name == "vector.store":
        for k, x in enumerate(get(op.operands[0])):
            _create("memref.store", [x, op.operands[1], at(k)], [])
        return []
    t = ir.VectorType(op.results[0].type)
    return [[_create("memref.load", [op.operands[0], at(k)], [t.element_type]).result
             for k in range(math.prod(t.shape))]]


def _static_position(op, attrs) -> list[int]:
    pos = _ints(attrs["static_position"])
    if any(p == DYNAMIC for p in pos):
        raise Unsupported(f"{op.name} at a dynamic position")
    return pos


def _combiner(kind_attr, elem: ir.Type, fastmath):
    kind = str(kind_attr).split("<", 1)[1].rstrip(">")
    fop, iop = KINDS.get(kind, (None, None))
    opname = fop if _is_float(elem) else iop
    if opname is None:
        raise Unsupported(f"vector reduction kind {kind} on {elem}")
    attrs = {"fastmath": fastmath} if fastmath is not None and opname.endswith("f") else {}

    def combine(a, b):
        return _create(opname, [a, b], [elem], attrs).result

    return combine


def _py(attr):
    if isinstance(attr, ir.FloatAttr):
        return attr.value
    return ir.IntegerAttr(attr).value


def guard_zero_trip_loops(gpu_module, also: str | None = None, only_dynamic: bool = False) -> None:
    """Wrap every `scf.for` that carries values (and every one tagged with the attribute `also`) in
    `scf.if (lb < ub) {for} else {init}`.

    MLIR 22's scf.for -> SPIR-V conversion reads a loop's results from function variables that only the loop body
    stores, so a loop that runs zero times yields garbage instead of its initial values (llvm/llvm-project#211981,
    fixed upstream by #206280 after this MLIR). Both arms of an scf.if store their results, so the guard is exact.
    """
    loops: list[ir.Operation] = []

    def collect(op):
        if op.name == "scf.for" and (len(op.results) or (also and also in op.attributes)):
            if not (only_dynamic and _trips(op) is not None):
                loops.append(op.operation)
        return ir.WalkResult.ADVANCE

    gpu_module.operation.walk(collect)
    from mlir.dialects import scf

    for loop in loops:
        lb, ub, inits = loop.operands[0], loop.operands[1], list(loop.operands[3:])
        with ir.InsertionPoint(loop), loop.location:
            cond = _create("arith.cmpi", [lb, ub], [ir.IntegerType.get_signless(1)],
                           {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 2)}).result  # slt
            guard = scf.IfOp(cond, [r.type for r in loop.results], has_else=True)
        with ir.InsertionPoint(guard.then_block), loop.location:
            yield_then = scf.YieldOp(list(loop.results))
        with ir.InsertionPoint(guard.else_block), loop.location:
            scf.YieldOp(inits)
        loop.move_before(yield_then.operation)
        for r, g in zip(loop.results, guard.results, strict=True):
            r.replace_all_uses_except(g, yield_then.operation)


UNROLL_TAG = "eagle.unroll"
FULL_UNROLL_TRIPS = 16  # constant-trip loops up to this many trips are unrolled completely...
MAX_UNROLLED_OPS = 256  # ...as long as the copies stay under this many ops; a loop over lanes gets at most
# factor x body <= 2 x MAX_UNROLLED_OPS (lavapipe's compile time grows steeply with the shader's size)
_UNROLL = """
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
BODY    transform.yield
  }
}
"""
_UNROLL_ONE = """    %loops_K = transform.structured.match attributes {TAG = K : i64} in %root
      : (!transform.any_op) -> !transform.any_op
    transform.loop.unroll %loops_K {factor = K} : !transform.any_op
"""


def _const_index(v: ir.Value):
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return None
    return ir.IntegerAttr(owner.attributes["value"]).value


def _trips(loop) -> int | None:
    lb, ub, step = (_const_index(loop.operands[k]) for k in range(3))
    if None in (lb, ub, step) or step <= 0:
        return None
    return max(0, -(-(ub - lb) // step))


def _innermost(gpu_module) -> list:
    out = []

    def visit(op):
        if op.name == "scf.for" and CANARY_TAG not in op.attributes and UNROLL_TAG not in op.attributes:
            inner = []
            op.operation.walk(lambda o: (inner.append(o.name), ir.WalkResult.ADVANCE)[1])
            if inner.count("scf.for") == 1:  # the walk sees the loop itself
                out.append((op.operation, len(inner)))
        return ir.WalkResult.ADVANCE

    gpu_module.operation.walk(visit)
    return out


def unroll_innermost_loops(gpu_module, factor: int) -> None:
    """Unroll loops so that an invocation makes fewer loop trips: small innermost constant-trip loops completely
    (their parent becomes innermost and is treated next), innermost loops with a trip count known only at run time
    (the loops over lanes) and long constant-trip ones (at least 8 x `factor` trips: a wide payload's component
    loops) by up to `factor` (a main loop of copies of the body, in order, then a remainder loop). The same
    operations run in the same order, so the results carry the same bits. Lavapipe counts trips
    against a budget per invocation (see add_loop_canary); a GPU does not mind. A loop with a trip count only known
    at run time is first guarded by `lb < ub`, so the unroller's trip-count arithmetic never sees an empty range."""
    from mlir.dialects.transform import interpreter

    i64 = ir.IntegerType.get_signless(64)
    for _ in range(4):  # rounds: a completely unrolled loop exposes its parent
        picks: dict[int, list] = {}
        full = False
        for loop, size in _innermost(gpu_module):
            trips = _trips(loop)
            if trips is not None and trips >= 8 * factor:
                # a long constant-trip loop (over a wide payload's components): `factor` copies of a small body
                k = factor if factor * size <= 2 * MAX_UNROLLED_OPS else 1
            elif trips is not None:  # a loop inside a block or a `for` over a constant range
                k = trips if trips <= FULL_UNROLL_TRIPS and trips * size <= MAX_UNROLLED_OPS else 1
                full = full or k > 1
            else:  # a loop over lanes
                k = max(1, min(factor, 2 * MAX_UNROLLED_OPS // max(size, 1)))
            loop.attributes[UNROLL_TAG] = ir.IntegerAttr.get(i64, k)
            picks.setdefault(k, []).append(loop)
        picks.pop(0, None)
        picks.pop(1, None)
        if not picks:
            break
        guard_zero_trip_loops(gpu_module, also=UNROLL_TAG, only_dynamic=True)
        body = "".join(_UNROLL_ONE.replace("TAG", UNROLL_TAG).replace("K", str(k)) for k in sorted(picks))
        script = ir.Module.parse(_UNROLL.replace("BODY", body))
        interpreter.apply_named_sequence(gpu_module.operation, script.body.operations[0], script)
        if not full:
            break

    def untag(op):
        if UNROLL_TAG in op.attributes:
            del op.attributes[UNROLL_TAG]
        return ir.WalkResult.ADVANCE

    gpu_module.operation.walk(untag)


def expand_sign_extensions(gpu_module) -> None:
    """Write each sign extension of a narrow integer as `(zext(v) ^ 2^(w-1)) - 2^(w-1)`.

    Mesa's lavapipe (Mesa 22.3, Debian 12) miscompiles comparisons of an OpSConvert'ed value: for int32 keys,
    `extsi(key) >= 0` came out always true and `extsi(key) < 7` always false, while the converted value itself
    was right. The xor/sub form is the same integer on every device and avoids OpSConvert altogether.
    """
    ops: list[ir.Operation] = []

    def collect(op):
        if op.name in ("arith.extsi", "arith.index_cast"):
            src, dst = op.operands[0].type, op.results[0].type
            if isinstance(src, ir.IntegerType) and 1 < src.width < 64 and (
                    isinstance(dst, ir.IndexType) or (isinstance(dst, ir.IntegerType) and dst.width > src.width)):
                ops.append(op.operation)
        return ir.WalkResult.ADVANCE

    gpu_module.operation.walk(collect)
    for op in ops:
        v = op.operands[0]
        width = ir.IntegerType(v.type).width
        dst = op.results[0].type
        wide = ir.IntegerType.get_signless(64) if isinstance(dst, ir.IndexType) else dst
        with ir.InsertionPoint(op), op.location:
            z = _create("arith.extui", [v], [wide]).result
            h = _create("arith.constant", [], [wide], {"value": ir.IntegerAttr.get(wide, 1 << (width - 1))}).result
            e = _create("arith.subi", [_create("arith.xori", [z, h], [wide]).result, h], [wide]).result
            if isinstance(dst, ir.IndexType):
                e = _create("arith.index_cast", [e], [dst]).result
        op.results[0].replace_all_uses_with(e)
        op.erase()


def add_loop_canary(gpu_func) -> ir.Value:
    """Give the kernel one more argument, eagle's status buffer `status: memref<?xi64>` (bound after the kernel's
    own arguments; returned), and end it with a loop of `status[0]` trips (the runtime puts 2 there) that sets
    `status[1] = 1` when it ran fewer. (status[2] is not set: it was the flag of sin/cos arguments spirv_math
    could not reduce, which it now reduces all.)

    Mesa's lavapipe ends every loop of a shader invocation once the invocation has run 65535 loop iterations in
    all (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS), silently. An invocation that hit that budget cuts the canary
    short too, so the runtime can refuse the results instead of returning wrong numbers. The trip count comes from
    memory so that no compiler can unroll the canary away; on a GPU it costs two loop trips per thread.
    """
    from mlir.dialects import scf

    i64, index = ir.IntegerType.get_signless(64), ir.IndexType.get()
    block = gpu_func.regions[0].blocks[0]
    status = block.add_argument(ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], i64), gpu_func.location)
    ftype = ir.FunctionType(ir.TypeAttr(gpu_func.attributes["function_type"]).value)
    gpu_func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([*ftype.inputs, status.type], []))
    ret = block.operations[len(block.operations) - 1]
    if ret.name != "gpu.return":
        raise Unsupported(f"the kernel ends with {ret.name}, not gpu.return")

    def const(t, v):
        return _create("arith.constant", [], [t], {"value": ir.IntegerAttr.get(t, v)}).result

    with ir.InsertionPoint(ret), ret.location:
        c0, c1 = const(index, 0), const(index, 1)
        trips = _create("memref.load", [status, c0], [i64]).result
        n = _create("arith.index_cast", [trips], [index]).result
        loop = scf.ForOp(c0, n, c1, [const(i64, 0)])
        loop.operation.attributes[CANARY_TAG] = ir.UnitAttr.get()
        with ir.InsertionPoint(loop.body):
            scf.YieldOp([_create("arith.addi", [loop.inner_iter_args[0], const(i64, 1)], [i64]).result])
        short = _create("arith.cmpi", [loop.results[0], trips], [ir.IntegerType.get_signless(1)],
                        {"predicate": ir.IntegerAttr.get(i64, 1)}).result  # ne
        flag = scf.IfOp(short, [], has_else=False)
        with ir.InsertionPoint(flag.then_block):
            _create("memref.store", [const(i64, 1), status, c1], [])
            scf.YieldOp([])
    return status
