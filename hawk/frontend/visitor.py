"""The syntax half of the front end: walks a kernel's Python AST and builds the hawk module.

Typing rules live in `values.Semantics`, calls to hawk/hawk.math functions in `calls.CallsMixin`; this module
only knows Python statements and expressions and how they map onto SSA values and scf regions.
"""

from __future__ import annotations

import ast
import builtins
import types as pytypes

from mlir import ir
from mlir.dialects import func, scf

from hawk.abi.signature import Signature
from hawk.errors import KernelError
from hawk.frontend import refs as R
from hawk.frontend import retired
from hawk.frontend.args import plane_type
from hawk.frontend.calls import CallsMixin
from hawk.frontend.float_outputs import FloatOutputsMixin
from hawk.frontend.inline import RET, FuncsMixin
from hawk.frontend.source import Source
from hawk.frontend.values import HVal, SemanticError, Semantics, const
from hawk.ir.access import reduced_kept_axes
from hawk.ir.build import create, strs
from hawk.ir.types import add_arg, hawk_type, sync_signature

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
           ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


class KernelBuilder(CallsMixin, FuncsMixin, FloatOutputsMixin):
    """Builds `func.func @<kernel>` holding one lane's code in hawk ops."""

    def __init__(self, source: Source, sig: Signature, ftype: ir.Type, itypes: dict[str, ir.Type]):
        self.src, self.sig, self.sem = source, sig, Semantics(ftype)
        self.itypes = itypes  # element type of each Index plane (i32 or i64)
        self.env: dict[str, object] = {}
        self.outputs: dict[str, str] = {}  # output name -> 'lane' or 'cell'
        self.returned = False
        self._node: ast.AST | None = None
        self.scatter_payloads: dict[str, tuple[int, ...]] = {}
        self.placed: set[str] = set()  # outputs written by key (hawk.scatter(out)[k] = v): calls.py
        self.out_reads: set[str] = set()  # outputs whose lane value the body reads
        self.nesting: list[str] = []  # enclosing 'if'/'for' statements of the code being read
        self.kernel_name = source.name
        self.frames: list = []  # the @hawk.func calls being inlined (inline.Frame), outermost first

    # ---- errors and locations -------------------------------------------------------------------
    def error(self, msg: str, node: ast.AST | None = None) -> KernelError:
        node = node or self._node
        line = self.src.first_line + (getattr(node, "lineno", 1) - 1)
        if self.frames:  # inside a func: its own file and line, and who called it
            return KernelError(msg, file=self.src.file, line=line, kernel=self.kernel_name, func=self.src.name,
                               called_from=self.called_from())
        return KernelError(msg, file=self.src.file, line=line, kernel=self.src.name)

    def loc(self, node: ast.AST) -> ir.Location:
        line = self.src.first_line + (getattr(node, "lineno", 1) - 1)
        return ir.Location.file(self.src.file, line, getattr(node, "col_offset", 0) + 1)

    # ---- entry ----------------------------------------------------------------------------------
    def build(self) -> ir.Module:
        module = ir.Module.create(loc=self.loc(self.src.tree))
        with ir.InsertionPoint(module.body), self.loc(self.src.tree):
            f = func.FuncOp(self.src.name, ([], []))
            f.attributes["hawk.kernel"] = ir.UnitAttr.get()
            f.attributes["hawk.axes"] = strs([a.label for a in self.sig.lane_axes()])
            block = f.add_entry_block()
            self.make_args(f)
            with ir.InsertionPoint(block):
                body = list(self.src.tree.body)
                if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                        and isinstance(body[0].value.value, str):
                    body = body[1:]  # docstring
                self.block(body, top=True)
                with self.loc(self.src.tree.body[-1]):
                    try:
                        self.finish_outputs()
                    except SemanticError as exc:
                        raise self.error(str(exc), self.src.tree.body[-1]) from None
                    func.ReturnOp([])
            sync_signature(f)
        return module

    # ---- the kernel func's typed arguments ------------------------------------------------------------
    def make_args(self, f) -> None:
        """One typed, named block argument per plane of the signature (hawk/ir/types.py); outputs start as
        per-lane outputs and become totals when a reduced value is handed out."""
        self.func_op, self.plane_args = f, {}
        lane = [a.label for a in self.sig.lane_axes()]
        for p in self.sig.planes:
            t = plane_type(p, self.sem.ftype, self.itypes, lane)
            if t is not None:
                self.plane_args[p.name] = add_arg(f, p.name, t)

    def plane_arg(self, name: str) -> ir.Value:
        """The block argument of a plane, sink or output."""
        return self.plane_args[name]

    def output_arg(self, name: str, shape: tuple[int, ...], v: ir.Value, cell: bool) -> ir.Value:
        """The argument an output (or the return value) is written through, typed as what it gets."""
        lane = [a.label for a in self.sig.lane_axes()]
        elem = self.itypes[name] if name in self.itypes else self.sem.ftype  # an integer output: its int type
        t = hawk_type("total", elem, shape, reduced_kept_axes(v, lane)) if cell else \
            hawk_type("output", elem, shape, lane)
        if name not in self.plane_args:
            self.plane_args[name] = add_arg(self.func_op, name, t)
        elif self.plane_args[name].type != t:
            self.plane_args[name].set_type(t)
        return self.plane_args[name]

    def finish_outputs(self):
        if self.sig.returns is not None and not self.returned:
            raise self.error("the kernel is annotated with a return type but never returns a value: end the body "
                             "with return <value>", self.src.tree)
        for p in self.sig.planes:
            if p.kind != "output" or p.name not in self.env:
                continue
            v = self.env[p.name]
            if isinstance(v, R.Undefined):
                raise self.error(f"output '{p.name}' is assigned only on some paths: {v.why}", self.src.tree)
            self.emit_output(p.name, p.payload.shape, v, self.src.tree)

    def emit_output(self, name: str, shape: tuple[int, ...], v: HVal, node: ast.AST):
        what = "the return value" if name == "result" else f"output '{name}'"
        if v.shape != shape:
            raise self.error(f"{what} is declared with payload shape {shape} but gets a value of shape "
                             f"{v.shape}", node)
        spec = self.sig.get(name)
        integer = spec is not None and spec.integer
        if v.reduced is not None and integer:
            raise self.error(f"output '{name}' is Mutable[Index], an integer plane with one value per lane, and "
                             "cannot hold a reduced value: declare it Mutable[Scalar] for a total, or store a "
                             "per-lane value", node)
        if v.reduced is not None:
            self.outputs[name] = "cell"
            value = self.sem.mlir(v)
            create("hawk.cell", [self.output_arg(name, shape, value, True), value], [])
            return
        self.outputs[name] = "lane"
        if integer:  # int64 in the body; an int32 plane keeps the low 32 bits (wraps, as NumPy's astype)
            value = self.sem.mlir(self.sem.to_int(v))
            if self.itypes[name] != self.sem.i64:
                value = create("arith.trunci", [value], [self.itypes[name]]).result
            create("hawk.store", [self.output_arg(name, shape, value, False), value], [])
            return
        v = self.sem.to_float(v)
        if v.is_const:
            v = self.sem.broadcast(v, shape) if shape else v
        value = self.own_float(name, self.sem.mlir(v))
        create("hawk.store", [self.output_arg(name, shape, value, False), value], [])

    # ---- statements -------------------------------------------------------------------------------
    def block(self, stmts: list[ast.stmt], top: bool = False):
        for k, s in enumerate(stmts):
            if self.returned:
                raise self.error("code after return never runs: remove it", s)
            self._node = s
            hint = retired.all_samples_message(s)
            if hint is not None:
                raise self.error(hint, s)
            with self.loc(s):
                try:
                    self.stmt(s, top)
                except SemanticError as exc:
                    raise self.error(str(exc), s) from None
            if isinstance(s, ast.Return) and not self.frames and (not top or k != len(stmts) - 1):
                raise self.error("return must be the last statement of the kernel body, outside any if/for: "
                                 "assign the value to a variable in each branch and return it at the end", s)

    def stmt(self, s: ast.stmt, top: bool):
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise self.error("chained assignment a = b = v is not supported: assign each name on its own line")
            self.assign(s.targets[0], s.value, s)
        elif isinstance(s, ast.AnnAssign):
            if s.value is None:
                raise self.error("a declaration without a value does nothing: assign a value")
            self.assign(s.target, s.value, s)
        elif isinstance(s, ast.AugAssign):
            self.aug_assign(s)
        elif isinstance(s, ast.If):
            self.if_stmt(s)
        elif isinstance(s, ast.For):
            self.for_stmt(s)
        elif isinstance(s, ast.Return):
            self.return_stmt(s)
        elif isinstance(s, ast.Expr):
            if isinstance(s.value, ast.Constant):
                return
            self.expr(s.value)
        elif isinstance(s, ast.Pass):
            return
        else:
            kind = type(s).__name__.lower()
            hint = {"while": "use for k in range(n) with a fixed bound",
                    "with": "remove it", "try": "remove it: kernels do not raise",
                    "functiondef": "define helpers outside the kernel with @hawk.func and call them"}.get(kind, "")
            raise self.error(f"'{kind}' statements are not supported in a kernel body" + (f": {hint}" if hint else ""))

    def assign(self, target: ast.expr, value: ast.expr, node: ast.stmt):
        if isinstance(target, ast.Subscript):
            base = self.expr(target.value)
            if isinstance(base, R.Scatter):
                self.scatter(base, target.slice, value, "set", node)
                return
            if isinstance(target.value, ast.Call) and self.is_all_samples(target.value.func):
                raise self.error(retired.ALL_SAMPLES_STORE, node)
            raise self.error("a subscript store is not supported: write by key with hawk.scatter(sink)[key] = v, "
                             "and update a lane's own output by assigning its name")
        if isinstance(target, ast.Tuple):
            vals = self.expr(value)
            if not isinstance(vals, tuple) or len(vals) != len(target.elts):
                raise self.error(f"cannot unpack this value into {len(target.elts)} names: write one assignment "
                                 "per name")
            for t, v in zip(target.elts, vals, strict=True):
                self.bind(t, v, node)
            return
        self.bind(target, self.expr(value), node)

    def bind(self, target: ast.expr, v, node: ast.stmt):
        if not isinstance(target, ast.Name):
            raise self.error("only plain names can be assigned in a kernel body (no attributes or subscripts)")
        name = target.id
        spec = self.plane_spec(name)
        if spec is not None and spec.kind != "output":
            if spec.kind == "sink":
                raise self.error(f"'{name}' is a sink: write into it with hawk.scatter({name})[key] += v")
            raise self.error(f"'{name}' is an input plane and cannot be assigned: use a new local name, or declare "
                             f"it Mutable[...] to make it an output")
        if isinstance(v, (R.PlaneRef, R.OutRef, R.ParamRef)):
            v = self.read(v)
        if not isinstance(v, HVal):
            raise self.error(f"cannot assign {self.describe(v)} to '{name}': only lane values can be stored in "
                             "variables")
        if spec is not None and name in self.placed:
            raise self.error(f"output '{name}' is written by key (hawk.scatter({name})[k] = v) and cannot also "
                             "be assigned per lane: use two outputs")
        if spec is not None and v.reduced is None and v.kind != ("i" if spec.integer else "f"):
            v = self.sem.to_int(v) if spec.integer else self.sem.to_float(v)
        if spec is not None:
            v = self.as_stored(name, v)
        self.env[name] = v

    def aug_assign(self, s: ast.AugAssign):
        if isinstance(s.target, ast.Subscript):
            base = self.expr(s.target.value)
            if isinstance(base, R.Scatter):
                if not isinstance(s.op, ast.Add):
                    raise self.error("a scatter adds with += or stores with =; there is no by-key "
                                     f"{type(s.op).__name__.lower()} yet", s)
                self.scatter(base, s.target.slice, s.value, "add", s)
                return
            if isinstance(s.target.value, ast.Call) and self.is_all_samples(s.target.value.func):
                raise self.error(retired.ALL_SAMPLES, s)
            raise self.error("a subscript update is not supported: accumulate by key with "
                             "hawk.scatter(sink)[key] += v")
        if not isinstance(s.target, ast.Name):
            raise self.error("only plain names can be updated with an augmented assignment")
        op = _BINOPS.get(type(s.op))
        if op is None:
            raise self.error(f"operator {type(s.op).__name__} is not supported")
        cur = self.expr(ast.Name(id=s.target.id, ctx=ast.Load(), lineno=s.lineno, col_offset=s.col_offset))
        self.bind(s.target, self.sem.binop(op, self.value(cur, s.target), self.value(self.expr(s.value), s.value)), s)

    def return_stmt(self, s: ast.Return):
        if self.frames:
            self.func_return(s)
            return
        if self.sig.returns is None:
            raise self.error("the kernel returns a value but has no return annotation: add -> Scalar "
                             "(or Vector[n], Matrix[r, c]) to the def line", s)
        if s.value is None:
            raise self.error("return needs a value here", s)
        if isinstance(s.value, ast.Tuple):
            raise self.error(f"a kernel returns one value ({self.sig.returns.describe()} here), not "
                             f"{len(s.value.elts)}: give each further result a Mutable[...] parameter and assign "
                             "it in the body (e.g. `total: Mutable[Scalar]` and `total = hawk.sum(x)`)", s.value)
        v = self.value(self.expr(s.value), s.value)
        self.emit_output("result", self.sig.returns.shape, v, s)
        self.returned = True

    # ---- control flow -----------------------------------------------------------------------------
    def if_stmt(self, s: ast.If):
        c = self.value(self.expr(s.test), s.test)
        if c.shape:
            raise self.error("an if condition must be one truth value, not a vector: combine it with "
                             "m.land/m.lor or use m.where for each component", s.test)
        c = self.sem.to_kind(c, "b") if c.kind == "b" else self.sem.compare("!=", c, const(0))
        if c.is_const:  # a condition known at compile time picks its branch now
            self.block(s.body if c.value else s.orelse)
            return
        before = dict(self.env)
        dry = scf.IfOp(c.value, [], has_else=True)
        envs, rets = [], []
        self.nesting.append("if")
        for blk, stmts in ((dry.then_block, s.body), (dry.else_block, s.orelse)):
            self.env, self.returned = dict(before), False
            with ir.InsertionPoint(blk):
                self.block(stmts)
            envs.append(self.env)
            rets.append(self.returned)
        self.nesting.pop()
        self.env, self.returned = dict(before), all(rets)
        merged = []
        # a func's if whose branches both return: only the returned value leaves it
        names = [RET] if self.returned else sorted(set(envs[0]) | set(envs[1]))
        for name in names:
            a, b = envs[0].get(name), envs[1].get(name)
            if a is before.get(name) and b is before.get(name):
                continue
            if a is None or b is None or isinstance(a, R.Undefined) or isinstance(b, R.Undefined):
                self.env[name] = R.Undefined(f"'{name}' is assigned in only one branch of the if at line "
                                             f"{self.src.first_line + s.lineno - 1}; assign it before the if "
                                             "or in both branches")
                continue
            what = "the returned value" if name == RET else f"'{name}'"
            if a.reduced is not None or b.reduced is not None:
                raise self.error(f"{what} holds a reduction in one branch of an if: reduce at the top level and "
                                 "fold the condition into where=", s)
            kind = "f" if "f" in (a.kind, b.kind) else ("i" if "i" in (a.kind, b.kind) else "b")
            if a.shape != b.shape:
                raise self.error(f"{what} has shape {a.shape} in one branch and {b.shape} in the other", s)
            merged.append((name, kind, a.shape))
        branch_vals = []
        for blk, env in zip((dry.then_block, dry.else_block), envs, strict=True):
            with ir.InsertionPoint(blk):
                branch_vals.append([self.sem.mlir(self.sem.to_kind(env[n], k)) for n, k, _ in merged])
        new = scf.IfOp(c.value, [self.sem.type_of(k, sh) for _, k, sh in merged], has_else=True)
        for src, dst, vals in zip((dry.then_block, dry.else_block), (new.then_block, new.else_block),
                                  branch_vals, strict=True):
            with ir.InsertionPoint(dst):
                y = scf.YieldOp(vals)
            for op in list(src.operations):
                op.move_before(y)
        dry.operation.erase()
        for k, (name, kind, shape) in enumerate(merged):
            self.env[name] = HVal(new.results[k], kind, shape)

    def for_stmt(self, s: ast.For):
        if s.orelse:
            raise self.error("for/else is not supported: remove the else")
        if not isinstance(s.target, ast.Name):
            raise self.error("a for loop binds one name: for k in range(n)")
        it = s.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and not it.keywords and 1 <= len(it.args) <= 3):
            raise self.error("a kernel loops only over range(...): write for k in range(n) "
                             "(or range(a, b), range(a, b, step))", s)
        args = [self.range_bound(a) for a in it.args]
        start, stop, step = (const(0), args[0], const(1)) if len(args) == 1 else \
            (args[0], args[1], args[2] if len(args) == 3 else const(1))
        if not step.is_const or step.value == 0:
            raise self.error("the step of range(...) must be a nonzero constant", s)
        st = step.value
        span = self.sem.binop("-", stop, start)
        trips = self.sem.binop("//", self.sem.binop("+", span, const(st - (1 if st > 0 else -1))), const(st))
        trips = self.sem.minmax("max", trips, const(0))
        assigned = sorted({t.id for n in ast.walk(s) for t in _store_targets(n)})
        for n in assigned:  # a Mutable output updated in the loop starts from its current value
            spec = self.plane_spec(n)
            if spec is not None and spec.kind == "output" and n not in self.env:
                self.env[n] = self.read(R.OutRef(spec))
        carried = [n for n in assigned if n != s.target.id and isinstance(self.env.get(n), HVal)]
        for n in carried:
            if self.env[n].reduced is not None:
                raise self.error(f"'{n}' holds a reduction and is updated in a loop: reduce after the loop", s)
        init = [self.sem.mlir(self.env[n]) for n in carried]
        index = ir.IndexType.get()
        to_index = create("arith.index_cast", [self.sem.mlir(trips)], [index]).result
        zero = create("arith.constant", [], [index], {"value": ir.IntegerAttr.get(index, 0)}).result
        one = create("arith.constant", [], [index], {"value": ir.IntegerAttr.get(index, 1)}).result
        loop = scf.ForOp(zero, to_index, one, init)
        before = dict(self.env)
        kinds = {n: (self.env[n].kind, self.env[n].shape) for n in carried}
        with ir.InsertionPoint(loop.body):
            iv = create("arith.index_cast", [loop.induction_variable], [self.sem.i64]).result
            k = self.sem.binop("+", start, self.sem.binop("*", HVal(iv, "i"), step))
            for n, a in zip(carried, loop.inner_iter_args, strict=True):
                self.env[n] = HVal(a, *kinds[n])
            self.env[s.target.id] = k
            self.nesting.append("for")
            self.block(s.body)
            self.nesting.pop()
            outs = []
            for n in carried:
                v = self.env[n]
                if isinstance(v, R.Undefined):
                    raise self.error(v.why, s)
                kind, shape = kinds[n]
                if v.shape != shape or (v.kind == "f" and kind != "f"):
                    raise self.error(f"'{n}' changes type inside the loop (from {kind}{shape} to {v.kind}{v.shape}):"
                                     f" initialise it with the type it gets, e.g. {n} = 0.0", s)
                outs.append(self.sem.mlir(self.sem.to_kind(v, kind)))
            scf.YieldOp(outs)
        self.env = before
        for j, n in enumerate(carried):
            self.env[n] = HVal(loop.results[j], *kinds[n])
        for n in assigned:
            if n not in carried:
                self.env[n] = R.Undefined(f"'{n}' is first assigned inside the for loop at line "
                                          f"{self.src.first_line + s.lineno - 1}; assign it before the loop to use "
                                          "it after")

    def range_bound(self, node: ast.expr) -> HVal:
        """One argument of range(...): an integer scalar, as in Python (a float is refused, never truncated)."""
        v = self.value(self.expr(node), node)
        src = ast.unparse(node)
        if v.shape:
            raise self.error(f"range(...) takes integer scalars, and '{src}' has shape {v.shape}", node)
        if v.kind == "f":
            raise self.error(f"range(...) takes integers, and '{src}' is a float: write range(int({src})) to "
                             "truncate it toward zero (or use an integer)", node)
        return self.sem.to_int(v)

    # ---- expressions ------------------------------------------------------------------------------
    def value(self, v, node: ast.AST | None = None) -> HVal:
        """Coerce what an expression gave into a lane value."""
        if isinstance(v, HVal):
            return v
        if isinstance(v, (R.PlaneRef, R.OutRef, R.ParamRef)):
            return self.read(v)
        if isinstance(v, (bool, int, float)):
            return const(v)
        raise self.error(f"{self.describe(v)} is not a lane value here", node)

    def describe(self, v) -> str:
        if isinstance(v, (R.SinkRef,)):
            return f"sink '{v.spec.name}'"
        if isinstance(v, R.TableRef):
            return f"table '{v.spec.name}' (read it with .at(...))"
        if isinstance(v, R.GridRef):
            return f"grid '{v.spec.name}' (use its axes, e.g. {v.spec.name}.{v.spec.axes[0].label})"
        if isinstance(v, pytypes.ModuleType):
            return f"module {v.__name__}"
        if isinstance(v, tuple):
            return f"a tuple of {len(v)} values"
        if isinstance(v, R.Method):
            return f"the method {v.base_src}.{v.name} (call it: {v.base_src}.{v.name}(...))"
        if isinstance(v, R.AxisView):
            return f"the axis view .{v.axis} (pick one with .{v.axis}[k])"
        if isinstance(v, R.Scatter):
            return f"hawk.scatter({v.sink.spec.name}) (write into it: hawk.scatter({v.sink.spec.name})[key] += v)"
        tag = getattr(v, "_hawk_builtin", None)
        if tag is not None:
            where = "hawk.math" if tag[0] == "math" else "hawk"
            return f"the function {where}.{tag[1]} (call it)"
        if callable(v):
            return f"the function {getattr(v, '__name__', '?')} (call it)"
        return repr(v)

    def expr(self, e: ast.expr):
        prev, self._node = self._node, e
        try:
            with self.loc(e):
                return self._expr(e)
        except SemanticError as exc:
            raise self.error(str(exc), e) from None
        finally:
            self._node = prev

    def _expr(self, e: ast.expr):
        if isinstance(e, ast.Constant):
            if isinstance(e.value, (bool, int, float)):
                return const(e.value)
            if isinstance(e.value, str):
                return e.value
            raise self.error(f"the constant {e.value!r} cannot be used in a kernel")
        if isinstance(e, ast.Name):
            return self.name(e)
        if isinstance(e, ast.Tuple):
            return tuple(self.expr(x) for x in e.elts)
        if isinstance(e, ast.BinOp):
            op = _BINOPS.get(type(e.op))
            if op is None:
                raise self.error(f"operator {type(e.op).__name__} is not supported")
            if op == "@":
                raise self.error("matrix products are not supported yet")
            a, b = self.value(self.expr(e.left), e.left), self.value(self.expr(e.right), e.right)
            if op in ("&", "|", "^") and "b" in (a.kind, b.kind):
                if op == "^":
                    return self.sem.compare("!=", self.sem.to_kind(a, "b"), self.sem.to_kind(b, "b"))
                return self.sem.logic("and" if op == "&" else "or", a, b)
            return self.sem.binop(op, a, b)
        if isinstance(e, ast.UnaryOp):
            v = self.value(self.expr(e.operand), e.operand)
            if isinstance(e.op, ast.USub):
                return self.sem.neg(v)
            if isinstance(e.op, ast.UAdd):
                return v
            if isinstance(e.op, (ast.Not, ast.Invert)):
                if isinstance(e.op, ast.Invert) and v.kind != "b":
                    raise self.error("~ is the logical not of a comparison here; integers have no ~")
                return self.sem.lnot(v)
        if isinstance(e, ast.BoolOp):
            vals = [self.value(self.expr(x), x) for x in e.values]
            r = vals[0]
            for v in vals[1:]:
                r = self.sem.logic("and" if isinstance(e.op, ast.And) else "or", r, v)
            return r
        if isinstance(e, ast.Compare):
            left = self.value(self.expr(e.left), e.left)
            result = None
            for op, right_node in zip(e.ops, e.comparators, strict=True):
                if type(op) not in _CMPOPS:
                    raise self.error(f"comparison {type(op).__name__} is not supported")
                right = self.value(self.expr(right_node), right_node)
                c = self.sem.compare(_CMPOPS[type(op)], left, right)
                result = c if result is None else self.sem.logic("and", result, c)
                left = right
            return result
        if isinstance(e, ast.IfExp):
            c = self.value(self.expr(e.test), e.test)
            return self.sem.select(c, self.value(self.expr(e.body), e.body), self.value(self.expr(e.orelse), e.orelse))
        if isinstance(e, ast.Attribute):
            return self.attribute(e)
        if isinstance(e, ast.Subscript):
            return self.subscript(e)
        if isinstance(e, ast.Call):
            return self.call(e)
        raise self.error(f"{type(e).__name__} expressions are not supported in a kernel body")

    def name(self, e: ast.Name):
        n = e.id
        if n in self.env:
            v = self.env[n]
            if isinstance(v, R.Undefined):
                raise self.error(v.why)
            return v
        spec = self.plane_spec(n)
        if spec is not None:
            return {"lane": R.PlaneRef, "index": R.PlaneRef, "output": R.OutRef, "sink": R.SinkRef,
                    "table": R.TableRef, "grid": R.GridRef, "param": R.ParamRef}[spec.kind](spec)
        for space in (self.src.closure, self.src.globals):
            if n in space:
                return self.python_value(n, space[n])
        if hasattr(builtins, n):
            return getattr(builtins, n)
        if self.frames:
            raise self.error(f"name '{n}' is not defined in this func: assign it before use, or make "
                             "it a parameter (a func sees its arguments, its own names and module constants, not "
                             "the kernel's planes)")
        raise self.error(f"name '{n}' is not defined: assign it before use, or pass it as a plane (Param for a "
                         "run-wide number)")

    def python_value(self, n: str, v):
        if isinstance(v, (bool, int, float)):
            return const(v)
        if hasattr(v, "__float__") and type(v).__module__ == "numpy":
            return const(v.item())
        if isinstance(v, (pytypes.ModuleType, pytypes.FunctionType, pytypes.BuiltinFunctionType, str, tuple)) \
                or callable(v):
            return v
        raise self.error(f"'{n}' is a {type(v).__name__}; a kernel can use Python numbers, hawk.math and its "
                         "planes only: pass arrays as planes")

    def read(self, ref) -> HVal:
        """This lane's value of an input plane, parameter or output."""
        spec = ref.spec
        if isinstance(ref, R.OutRef) and spec.name in self.env:
            return self.env[spec.name]
        if isinstance(ref, R.OutRef):
            if spec.name in self.placed:
                raise self.error(f"output '{spec.name}' is written by key (hawk.scatter), so its lane value is not "
                                 "this lane's: read the array as an input plane instead")
            self.out_reads.add(spec.name)
        if isinstance(ref, R.ParamRef):
            return HVal(create("hawk.param", [self.plane_arg(spec.name)], [self.sem.ftype]).result, "f")
        if spec.integer_plane:
            raw = create("hawk.load", [self.plane_arg(spec.name)], [self.itypes[spec.name]]).result
            if self.itypes[spec.name] != self.sem.i64:
                raw = create("arith.extsi", [raw], [self.sem.i64]).result
            return HVal(raw, "i")
        return self.read_float_output(spec)


def _store_targets(n: ast.AST):
    if isinstance(n, (ast.Assign,)):
        for t in n.targets:
            yield from _names(t)
    elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
        yield from _names(n.target)
    elif isinstance(n, ast.For):
        yield from _names(n.target)


def _names(t: ast.AST):
    if isinstance(t, ast.Name):
        yield t
    elif isinstance(t, ast.Tuple):
        for x in t.elts:
            yield from _names(x)
