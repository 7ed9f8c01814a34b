"""Wide vector values of a GPU kernel moved into per-thread buffers, each op a loop over components.

The host lowering keeps a wide payload (more than host_emit.WIDE_PAYLOAD components) as one vector value between
its component loops, and LLVM's x86 backend handles `<1024 x double>` arithmetic well. GPU backends do not: the
AMDGPU register allocator grows steeply with one huge live vector (a Vector[1024] elementwise kernel took minutes
in llc). So on GPUs every wide vector value gets a buffer in private memory and every op on it becomes a loop
that applies the same scalar op (same attributes, so the same IEEE results) to each component: code size and
compile time stay linear in the payload. A shape cast is the same buffer (buffers are row-major); a sum of one
lane's components (vector.reduction) adds them in component order. Any other op on a wide value keeps its
vector form, reading the value back with vector.load (sorted runs' registers, say): correct, only not smaller.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import scf

from hawk.ir.build import create
from hawk.passes.host_emit import WIDE_PAYLOAD, size

_SCALAR_OPS = ("arith.", "math.")
_NOT_ELEMENTWISE = {"arith.constant", "arith.index_cast"}


def _stored(elem: ir.Type) -> ir.Type:
    """How a buffer holds an element: booleans as 32-bit integers (a Vulkan device need not store bytes: SPIR-V's
    Int8 capability is optional, and without it the spirv target cannot lower a store of an i8)."""
    return ir.IntegerType.get_signless(32) if elem == ir.IntegerType.get_signless(1) else elem


def _as_stored(v: ir.Value) -> ir.Value:
    """A vector value as its buffer holds it (booleans widened to 32 bits)."""
    t = ir.VectorType(v.type)
    if _stored(t.element_type) == t.element_type:
        return v
    return create("arith.extui", [v], [ir.VectorType.get(t.shape, _stored(t.element_type))]).result


def _wide(t: ir.Type) -> bool:
    return isinstance(t, ir.VectorType) and size(ir.VectorType(t).shape) > WIDE_PAYLOAD


class WideBuffers:
    """Rewrites one gpu.func; `alloc(n, elem)` gives a per-thread buffer of n values at the function's top."""

    def __init__(self, alloc: Callable[[int, ir.Type], ir.Value]):
        self.alloc = alloc
        self.index = ir.IndexType.get()
        self.bufs: dict = {}  # wide value -> its buffer
        self.done: list = []  # ops now computed by loops, erased at the end (users first)
        self.free: dict = {}  # (components, element type) -> buffers no live value uses
        self.refs: dict = {}  # buffer -> live values in it (a shape cast shares its operand's)
        self.dies: dict = {}  # op -> values whose last use in their block it is
        self.pos: dict = {}  # op -> its place in its block (the ops listed before the rewrite)
        self.blocks: set = set()

    def c(self, v: int) -> ir.Value:
        return create("arith.constant", [], [self.index], {"value": ir.IntegerAttr.get(self.index, v)}).result

    def loop(self, n: int):
        """A loop over n components: yields its index once, inside the loop."""
        lp = scf.ForOp(self.c(0), self.c(n), self.c(1), [])
        with ir.InsertionPoint(lp.body):
            yield lp.induction_variable
            scf.YieldOp([])

    def new_buf(self, t: ir.Type) -> ir.Value:
        """A buffer for a value of type t: one a dead value left (same size and type), else a new one. Booleans
        are kept as 32-bit integers (memrefs of i1 do not lower to LLVM; see _stored)."""
        vt = ir.VectorType(t)
        key = (size(vt.shape), str(vt.element_type))
        pool = self.free.setdefault(key, [])
        return pool.pop() if pool else self.alloc(size(vt.shape), _stored(vt.element_type))

    def ld(self, buf: ir.Value, i: ir.Value, elem: ir.Type) -> ir.Value:
        """Component i of a buffer of this pass, as `elem`."""
        x = create("memref.load", [buf, i], [_stored(elem)]).result
        return create("arith.trunci", [x], [elem]).result if _stored(elem) != elem else x

    def st(self, x: ir.Value, buf: ir.Value, i: ir.Value) -> None:
        if _stored(x.type) != x.type:
            x = create("arith.extui", [x], [_stored(x.type)]).result
        create("memref.store", [x, buf, i], [])

    def own(self, v: ir.Value, buf: ir.Value) -> None:
        """v now lives in buf until its last use in its own block (self.last); then buf can be reused."""
        self.bufs[v] = buf
        self.refs[buf] = self.refs.get(buf, 0) + 1
        owner = v.owner if isinstance(v.owner, ir.Block) else v.owner.operation.block
        last = None
        for use in v.uses:
            user = use.owner.operation if hasattr(use.owner, "operation") else use.owner
            while user is not None and user.block != owner:
                user = user.parent.operation if user.parent is not None else None
            if user is not None and (last is None or self.pos.get(user, -1) > self.pos.get(last, -1)):
                last = user
        if last is None or last not in self.pos:  # no use (or one this rewrite did not list): kept to the end
            return
        self.dies.setdefault(last, []).append(v)

    def release(self, op) -> None:
        for v in self.dies.pop(op, ()):
            buf = self.bufs[v]
            self.refs[buf] -= 1
            if not self.refs[buf]:
                vt = ir.VectorType(v.type)
                self.free.setdefault((size(vt.shape), str(vt.element_type)), []).append(buf)

    def buf_of(self, v: ir.Value) -> ir.Value:
        """The buffer of a wide value; one defined elsewhere (a block argument, an op kept in vector form) is
        stored into a fresh buffer here."""
        if v in self.bufs:
            return self.bufs[v]
        buf = self.new_buf(v.type)
        flat = _as_stored(v)
        if ir.VectorType(v.type).rank != 1:
            flat = create("vector.shape_cast", [flat], [ir.VectorType.get([size(ir.VectorType(v.type).shape)],
                                                                        ir.VectorType(flat.type).element_type)]
                          ).result
        create("vector.store", [flat, buf, self.c(0)], [])
        return buf

    def value_of(self, v: ir.Value) -> ir.Value:
        """A wide value as a vector again (for an op that keeps its vector form)."""
        t = ir.VectorType(v.type)
        flat_t = ir.VectorType.get([size(t.shape)], _stored(t.element_type))
        out = create("vector.load", [self.bufs[v], self.c(0)], [flat_t]).result
        if _stored(t.element_type) != t.element_type:
            out = create("arith.trunci", [out], [ir.VectorType.get([size(t.shape)], t.element_type)]).result
        return out if t.rank == 1 else create("vector.shape_cast", [out], [v.type]).result

    def run(self, func_op) -> None:
        ops: list = []
        func_op.operation.walk(lambda op: (ops.append(op.operation), ir.WalkResult.ADVANCE)[1])
        for op in ops:
            block = op.block
            if block not in self.blocks:
                self.blocks.add(block)
                self.pos.update((o.operation, k) for k, o in enumerate(block.operations))
        for op in ops:
            with ir.InsertionPoint(op), op.location:
                self.rewrite(op)
            self.release(op)
        for op in reversed(self.done):
            op.erase()

    def rewrite(self, op) -> None:
        name = op.name
        res = op.results[0] if len(op.results) == 1 else None
        wide_res = res is not None and _wide(res.type)
        wide_in = [v for v in op.operands if _wide(v.type)]
        if not wide_res and not wide_in:
            return
        if name == "vector.shape_cast" and wide_res and wide_in:
            self.own(res, self.buf_of(op.operands[0]))
            self.done.append(op)
        elif name == "arith.constant" and wide_res and isinstance(op.attributes["value"], ir.DenseElementsAttr) \
                and ir.DenseElementsAttr(op.attributes["value"]).is_splat:
            splat = ir.DenseElementsAttr(op.attributes["value"]).get_splat_value()
            elem = ir.VectorType(res.type).element_type
            x = create("arith.constant", [], [elem], {"value": splat}).result
            self.fill(res, lambda c: x)
        elif name == "vector.broadcast" and wide_res and not isinstance(op.operands[0].type, ir.VectorType):
            x = op.operands[0]
            self.fill(res, lambda c: x)
        elif name == "vector.load" and wide_res and ir.VectorType(res.type).rank == 1 and len(op.operands) == 2:
            src, at = op.operands

            def load(c, src=src, at=at):
                return create("memref.load", [src, create("arith.addi", [at, c], [self.index]).result],
                              [ir.VectorType(res.type).element_type]).result
            self.fill(res, load)
        elif name == "vector.store" and len(op.operands) == 3 and ir.VectorType(op.operands[0].type).rank == 1:
            v, dst, at = op.operands
            buf = self.buf_of(v)
            for c in self.loop(size(ir.VectorType(v.type).shape)):
                x = self.ld(buf, c, ir.VectorType(v.type).element_type)
                create("memref.store", [x, dst, create("arith.addi", [at, c], [self.index]).result], [])
            self.done.append(op)
        elif name == "vector.extract" and not isinstance(res.type, ir.VectorType) and len(op.operands) == 1:
            shape = ir.VectorType(op.operands[0].type).shape
            k = 0
            for d, p in zip(shape, ir.DenseI64ArrayAttr(op.attributes["static_position"]), strict=True):
                k = k * d + p
            x = self.ld(self.buf_of(op.operands[0]), self.c(k), res.type)
            res.replace_all_uses_with(x)
            self.done.append(op)
        elif name == "vector.reduction" and len(op.operands) in (1, 2) and \
                str(op.attributes["kind"]) == "#vector.kind<add>":
            self.reduce(op)
        elif name == "vector.multi_reduction" and str(op.attributes["kind"]) == "#vector.kind<add>" and wide_in:
            self.multi_reduce(op)
        elif name.startswith(_SCALAR_OPS) and name not in _NOT_ELEMENTWISE and wide_res and all(
                not isinstance(v.type, ir.VectorType) or v.type.shape == res.type.shape for v in op.operands):
            self.elementwise(op)
        else:  # kept in vector form: its wide operands read back from their buffers
            for k, v in enumerate(op.operands):
                if v in self.bufs:
                    op.operands[k] = self.value_of(v)

    def fill(self, res: ir.Value, comp) -> None:
        buf = self.new_buf(res.type)
        for c in self.loop(size(ir.VectorType(res.type).shape)):
            self.st(comp(c), buf, c)
        self.own(res, buf)
        self.done.append(res.owner)

    def elementwise(self, op) -> None:
        res = op.results[0]
        elem = ir.VectorType(res.type).element_type
        attrs = {k: op.attributes[k] for k in op.attributes}
        ins = [(self.buf_of(v), ir.VectorType(v.type).element_type) if isinstance(v.type, ir.VectorType) else v
               for v in op.operands]

        def comp(c):
            args = [self.ld(x[0], c, x[1]) if isinstance(x, tuple) else x for x in ins]
            return create(op.name, args, [elem], attrs).result
        self.fill(res, comp)

    def reduce(self, op) -> None:
        """One lane's components added in order, from the accumulator when there is one (else from the first)."""
        res = op.results[0]
        v = op.operands[0]
        n = size(ir.VectorType(v.type).shape)
        buf = self.buf_of(v)
        attrs = {"fastmath": op.attributes["fastmath"]} if "fastmath" in op.attributes else None
        start = op.operands[1] if len(op.operands) == 2 else create("memref.load", [buf, self.c(0)],
                                                                      [res.type]).result
        first = 0 if len(op.operands) == 2 else 1
        lp = scf.ForOp(self.c(first), self.c(n), self.c(1), [start])
        with ir.InsertionPoint(lp.body):
            x = create("memref.load", [buf, lp.induction_variable], [res.type]).result
            scf.YieldOp([create("arith.addf", [lp.inner_iter_args[0], x], [res.type], attrs).result])
        res.replace_all_uses_with(lp.results[0])
        self.done.append(op)

    def multi_reduce(self, op) -> None:
        """A sum over some dims of one lane's payload: each result entry from its accumulator, adding the
        reduced entries in row-major order (an in-lane `.sum(axis=...)`)."""
        res, (v, acc) = op.results[0], list(op.operands)
        shape = list(ir.VectorType(v.type).shape)
        elem = ir.VectorType(v.type).element_type
        dims = set(ir.DenseI64ArrayAttr(op.attributes["reduction_dims"]))
        kept = [d for d in range(len(shape)) if d not in dims]
        red = sorted(dims)
        stride = [size(shape[d + 1:]) for d in range(len(shape))]
        src = self.buf_of(v)
        nkept, nred = size([shape[d] for d in kept]), size([shape[d] for d in red])
        attrs = {"fastmath": op.attributes["fastmath"]} if "fastmath" in op.attributes else None
        vec = isinstance(res.type, ir.VectorType)
        if vec:
            out = self.new_buf(res.type)
            accbuf = self.buf_of(acc) if _wide(acc.type) else self.narrow_buf(acc)

        def at(dlist, i):  # linear offset of the dims `dlist` of flat index i (row-major over them)
            off = self.c(0)
            for d in reversed(dlist):
                q = create("arith.remui", [i, self.c(shape[d])], [self.index]).result
                off = create("arith.addi", [off, create("arith.muli", [q, self.c(stride[d])], [self.index]).result],
                             [self.index]).result
                i = create("arith.divui", [i, self.c(shape[d])], [self.index]).result
            return off

        def sums(o, a0):  # the reduced entries of output entry o added to a0, in order
            base = at(kept, o)
            inner = scf.ForOp(self.c(0), self.c(nred), self.c(1), [a0])
            with ir.InsertionPoint(inner.body):
                i = create("arith.addi", [base, at(red, inner.induction_variable)], [self.index]).result
                x = create("memref.load", [src, i], [elem]).result
                scf.YieldOp([create("arith.addf", [inner.inner_iter_args[0], x], [elem], attrs).result])
            return inner.results[0]

        if not vec:  # every dim reduced: one sum
            res.replace_all_uses_with(sums(self.c(0), acc))
            self.done.append(op)
            return
        for o in self.loop(nkept):
            create("memref.store", [sums(o, create("memref.load", [accbuf, o], [elem]).result), out, o], [])
        if _wide(res.type):
            self.own(res, out)
        else:
            flat = ir.VectorType.get([size(ir.VectorType(res.type).shape)], elem)
            got = create("vector.load", [out, self.c(0)], [flat]).result
            if ir.VectorType(res.type).rank != 1:
                got = create("vector.shape_cast", [got], [res.type]).result
            res.replace_all_uses_with(got)
        self.done.append(op)

    def narrow_buf(self, v: ir.Value) -> ir.Value:
        t = ir.VectorType(v.type)
        flat = ir.VectorType.get([size(t.shape)], t.element_type)
        buf = self.alloc(size(t.shape), t.element_type)
        if t.rank != 1:
            v = create("vector.shape_cast", [v], [flat]).result
        create("vector.store", [v, buf, self.c(0)], [])
        return buf
