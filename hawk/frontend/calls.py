"""Calls, attributes and subscripts in a kernel body: hawk reductions and scatters, hawk.math, `.at`,
`.sum(axis=)`, `.rows/.columns/.components`, lane coordinates, and the refusals of retired forms."""

from __future__ import annotations

import ast
import builtins
import math as pymath
import types as pytypes

import numpy as np

from hawk.frontend import refs as R
from hawk.frontend import retired
from hawk.frontend.funcs import Func
from hawk.frontend.reduce import custom_reduce
from hawk.frontend.scan import scan_call
from hawk.frontend.values import HVal, const
from hawk.ir.build import create, strs
from hawk.ir.types import of_value, parts
from hawk.passes.analysis import key_source
from hawk.passes.verify import SCATTER_IN_IF, reduction_nested

_PY_MATH = {pymath.sqrt: "sqrt", pymath.exp: "exp", pymath.log: "log", pymath.sin: "sin", pymath.cos: "cos",
            pymath.tan: "tan", pymath.tanh: "tanh", pymath.floor: "floor", pymath.ceil: "ceil",
            pymath.atan2: "atan2", pymath.fabs: "abs", pymath.erf: "erf", pymath.log2: "log2",
            pymath.log10: "log10", np.sqrt: "sqrt", np.exp: "exp", np.log: "log", np.sin: "sin", np.cos: "cos",
            np.tanh: "tanh", np.floor: "floor", np.abs: "abs", np.minimum: "min", np.maximum: "max",
            np.where: "where", np.clip: "clamp", builtins.abs: "abs", builtins.min: "min", builtins.max: "max",
            builtins.float: "to_float", builtins.int: "to_int", builtins.round: "round"}
_UNARY = {"sqrt": "sqrt", "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10",
          "log1p": "log1p", "expm1": "expm1", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin",
          "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "erf": "erf",
          "floor": "floor", "ceil": "ceil", "round": "roundeven", "trunc": "trunc", "rsqrt": "rsqrt"}
_REDUCTIONS = ("sum", "mean", "max", "min")
_POLICIES = ("auto", "compensated", "plain", "ordered")


class CallsMixin:
    """Mixed into KernelBuilder; relies on its expr/value/read/error/sem."""

    # ---- attributes and subscripts ---------------------------------------------------------------
    def is_all_samples(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "all_samples"

    def attribute(self, e: ast.Attribute):
        if e.attr in retired.MODULE_NAMES:
            base = self.expr(e.value)
            if isinstance(base, pytypes.ModuleType) and base.__name__.startswith("hawk"):
                raise self.error(retired.MODULE_NAMES[e.attr])
        base = self.expr(e.value)
        src = ast.unparse(e.value)
        if isinstance(base, R.GridRef):
            labels = [a.label for a in base.spec.axes]
            if e.attr == "extent" and e.attr not in labels:
                return R.Method(base, "extent", src)
            if e.attr not in labels:
                raise self.error(f"grid '{base.spec.name}' has axes {labels}; there is no axis '{e.attr}'")
            return HVal(create("hawk.lane", [], [self.sem.i64], {"axis": e.attr}).result, "i")
        if isinstance(base, pytypes.ModuleType):
            if not hasattr(base, e.attr):
                raise self.error(f"module {base.__name__} has no '{e.attr}'")
            return self.python_value(f"{base.__name__}.{e.attr}", getattr(base, e.attr))
        if e.attr in ("rows", "columns", "components"):
            return R.AxisView(self.value(base, e.value), e.attr)
        if e.attr in ("at", "sum", "add", "contribute", "write", "max", "min", "mean"):
            return R.Method(base, e.attr, src)
        if isinstance(base, HVal) and e.attr in ("shape",):
            return base.shape
        raise self.error(f"'{src}' has no attribute '{e.attr}' in a kernel")

    def subscript(self, e: ast.Subscript):
        base = self.expr(e.value)
        if isinstance(base, R.Scatter):
            raise self.error("a scatter is written hawk.scatter(sink)[key] += v or hawk.scatter(sink)[key] = v; "
                             "it cannot be read")
        if isinstance(e.value, ast.Call) and self.is_all_samples(e.value.func):
            raise self.error(retired.ALL_SAMPLES)
        pos = self.static_positions(e.slice)
        if isinstance(base, R.AxisView):
            v = base.base
            if len(pos) != 1:
                raise self.error(f".{base.axis}[k] takes one position")
            if base.axis == "components":
                if len(v.shape) != 1:
                    raise self.error(".components[k] is for a vector value; a matrix has .rows[i] and .columns[j]")
                return self.sem.component(v, pos)
            if len(v.shape) != 2:
                raise self.error(f".{base.axis}[k] is for a matrix value; a vector has .components[k]")
            return self.sem.component(v, pos) if base.axis == "rows" else self.sem.column(v, pos[0])
        if isinstance(base, tuple):
            if len(pos) != 1 or not -len(base) <= pos[0] < len(base):
                raise self.error("tuple index out of range")
            return base[pos[0]]
        v = self.value(base, e.value)
        if not v.shape:
            raise self.error(f"'{ast.unparse(e.value)}' is a scalar lane value and cannot be indexed; another lane's "
                             f"value of an input plane is {ast.unparse(e.value)}.at(i)")
        return self.sem.component(v, pos)

    def static_positions(self, node: ast.expr) -> tuple[int, ...]:
        v = self.expr(node)
        items = v if isinstance(v, tuple) else (v,)
        out = []
        for it in items:
            if not (isinstance(it, HVal) and it.is_const and it.kind == "i"):
                raise self.error("a component position must be a constant integer (a vector's own axes are fixed "
                                 "at compile time)")
            out.append(int(it.value))
        return tuple(out)

    # ---- calls ---------------------------------------------------------------------------------
    def call(self, e: ast.Call):
        if self.is_all_samples(e.func):
            raise self.error(retired.ALL_SAMPLES)
        f = self.expr(e.func)
        if isinstance(f, R.Method):
            return self.method(f, e)
        if isinstance(f, Func):
            return self.func_call(f, e)
        tag = getattr(f, "_hawk_builtin", None)
        if tag is None:
            try:
                tag = ("math", _PY_MATH[f]) if f in _PY_MATH else None
            except TypeError:
                tag = None
        if tag is None:
            what = getattr(f, "__name__", ast.unparse(e.func))
            if what == "range":
                raise self.error("range(...) is only allowed as the iterable of a for loop")
            raise self.error(f"calling '{what}' is not supported in a kernel body: use hawk.math functions "
                             "(import hawk.math as m) and hawk reductions; to call a helper of your own, decorate "
                             f"it with @hawk.func (def {what}(...) under @hawk.func)")
        space, name = tag
        if space == "math":
            return self.math_call(name, e)
        if space == "reduce" and name == "reduce":  # an operator of the user's: hawk/frontend/reduce.py
            return custom_reduce(self, e)
        if space == "reduce":
            return self.reduction(name, e)
        if space == "scatter":
            return self.scatter_call(e)
        if space == "scan":  # a running total over lanes: hawk/frontend/scan.py
            return scan_call(self, e)
        raise self.error(f"hawk.{name} cannot be used inside a kernel body")

    def args(self, e: ast.Call) -> list[HVal]:
        if e.keywords:
            raise self.error(f"{ast.unparse(e.func)} takes no keyword arguments")
        return [self.value(self.expr(a), a) for a in e.args]

    def math_call(self, name: str, e: ast.Call):
        def need(n):
            if len(e.args) != n or e.keywords:
                raise self.error(f"{ast.unparse(e.func)} takes {n} argument{'s' if n != 1 else ''}")
            return self.args(e)

        s = self.sem
        if name == "vec":
            return s.vec(self.args(e))
        if name == "mat":
            return s.mat(self.args(e))
        if name in _UNARY:
            (a,) = need(1)
            if name == "rsqrt":
                return s.binop("/", const(1.0), s.unary_math("sqrt", a))
            return s.unary_math(_UNARY[name], a)
        if name == "abs":
            return s.abs(*need(1))
        if name in ("min", "max"):
            vals = self.args(e)
            if len(vals) < 2:
                raise self.error(f"{ast.unparse(e.func)} of lane values takes two or more arguments; the "
                                 f"{name} over lanes is hawk.{name}(x)")
            r = vals[0]
            for v in vals[1:]:
                r = s.minmax(name, r, v)
            return r
        if name in ("where", "select"):
            return s.select(*need(3))
        if name in ("add", "mul"):  # (also operators of hawk.reduce)
            return s.binop("+" if name == "add" else "*", *need(2))
        if name == "land":
            return s.logic("and", *need(2))
        if name == "lor":
            return s.logic("or", *need(2))
        if name == "lnot":
            return s.lnot(*need(1))
        if name == "index":  # n counts slots: an integer of at least 1, as range(...) takes integers
            x, n = need(2)
            src = ast.unparse(e.args[1])
            if n.kind == "f" or n.shape:
                raise self.error(f"m.index(x, n) takes the number of slots n as an integer, and '{src}' is "
                                 f"{'a float' if not n.shape else f'of shape {n.shape}'}: write m.index(x, int({src}))"
                                 " to truncate it toward zero (or use an integer)")
            if n.is_const and n.value < 1:
                got = src if src == str(n.value) else f"{src} = {n.value}"
                raise self.error(f"m.index(x, n) maps x to a slot 0..n-1, so n must be at least 1, got {got}")
            return s.index(x, n)
        if name == "clamp":
            x, lo, hi = need(3)
            return s.minmax("min", s.minmax("max", x, lo), hi)
        if name == "pow":
            return s.power(*need(2))
        if name == "atan2":
            return s.binary_math("atan2", *need(2))
        if name == "copysign":
            a, b = s.unify(*need(2), "f")
            return s.wrap(s.copysign(s.mlir(a), s.mlir(b), a.shape), "f", a.shape)
        if name == "hypot":  # as np.hypot: no overflow or underflow on the way, inf beats NaN
            a, b = s.unify(*need(2), "f")
            a, b = s.abs(a), s.abs(b)
            hi, lo = s.minmax("max", a, b), s.minmax("min", a, b)
            t = s.binop("/", lo, hi)
            r = s.binop("*", hi, s.unary_math("sqrt", s.binop("+", const(1.0), s.binop("*", t, t))))
            r = s.select(s.compare("==", hi, const(0.0)), const(0.0), r)
            inf = s.logic("or", s.compare("==", a, const(float("inf"))), s.compare("==", b, const(float("inf"))))
            return s.select(inf, const(float("inf")), r)
        if name == "fma":
            a, b, c = need(3)
            a, b = s.unify(a, b, "f")
            a, c = s.unify(a, c, "f")
            b, _ = s.unify(b, c, "f")
            x = s.mlir(a)
            return s.wrap(create("math.fma", [x, s.mlir(b), s.mlir(c)], [x.type]).result, "f", a.shape)
        if name == "sign":  # as np.sign: -1, 0 or 1 in the value's own kind; NaN stays NaN
            (a,) = need(1)
            kind = "i" if a.kind != "f" else "f"
            pos = s.to_kind(s.compare(">", a, const(0)), kind)
            neg = s.to_kind(s.compare("<", a, const(0)), kind)
            r = s.binop("-", pos, neg)
            return s.select(s.compare("!=", a, a), a, r) if kind == "f" else r
        if name == "isnan":
            (a,) = need(1)
            return s.compare("!=", a, a)
        if name in ("isinf", "isfinite"):
            (a,) = need(1)
            big = s.compare("==", s.abs(s.to_float(a)), const(float("inf")))
            return big if name == "isinf" else s.lnot(s.logic("or", big, s.compare("!=", a, a)))
        if name == "dot":
            a, b = need(2)
            return s.fold(s.binop("*", a, b), None)
        if name == "norm":
            (a,) = need(1)
            return s.unary_math("sqrt", s.fold(s.binop("*", a, a), None))
        if name == "to_float":
            return s.to_float(*need(1))
        if name == "to_int":
            (a,) = need(1)
            return s.to_int(s.unary_math("trunc", a) if a.kind == "f" else a)
        raise self.error(f"hawk.math.{name} is not available")

    # ---- methods ----------------------------------------------------------------------------------
    def method(self, f: R.Method, e: ast.Call):
        base, name, src = f.base, f.name, f.base_src
        if name == "contribute":
            raise self.error(retired.CONTRIBUTE.format(name=src))
        if name == "add":
            raise self.error(retired.ADD_AT.format(name=src))
        if name == "write":
            raise self.error(retired.WRITE_AT.format(name=src))
        if name == "at":
            self.lane_local(f"{src}.at(...)", "read other lanes in the kernel and pass the value in")
            return self.at(base, src, e)
        if name == "sum":
            return self.own_sum(base, src, e)
        if name == "extent" and isinstance(base, R.GridRef):
            return self.extent(base, src, e)
        raise self.error(f"{src}.{name}() is not a lane operation: the {name} over lanes is hawk.{name}({src})")

    def extent(self, grid: R.GridRef, src: str, e: ast.Call) -> HVal:
        """`lane.extent("row")` (or a position, `lane.extent(0)`, `-1` the fastest axis): the run's extent of a
        Grid axis as an integer, the same on every lane. A fixed extent ("col":N) is the constant N; a run-time
        one (the first axis) is read at run time (hawk.extent: the whole grid's, on a sharded run too)."""
        axes = grid.spec.axes
        labels = [a.label for a in axes]
        how = f"{src}.extent(\"{labels[0]}\")" + (f" or {src}.extent(0)" if len(labels) == 1 else "")
        if e.keywords or len(e.args) != 1:
            raise self.error(f"{src}.extent(...) takes one axis, by label or position: e.g. {how}")
        which = self.expr(e.args[0])
        if isinstance(which, HVal) and which.is_const and which.kind == "i" and not which.shape:
            which = int(which.value)
        if isinstance(which, bool) or not isinstance(which, (str, int)):
            raise self.error(f"{src}.extent(...) takes an axis label (a string) or a constant position; "
                             f"write e.g. {how}")
        if isinstance(which, int):
            if not -len(axes) <= which < len(axes):
                raise self.error(f"grid '{grid.spec.name}' has {len(axes)} axis(es) {labels}: position {which} is "
                                 f"outside; write e.g. {how}")
            axis = axes[which]
        elif which in labels:
            axis = axes[labels.index(which)]
        else:
            raise self.error(f"grid '{grid.spec.name}' has axes {labels}; there is no axis {which!r}: write e.g. "
                             f"{how}")
        if axis.extent is not None:
            return HVal(int(axis.extent), "i")
        return HVal(create("hawk.extent", [], [self.sem.i64], {"axis": axis.label}).result, "i")

    def own_sum(self, base, src: str, e: ast.Call):
        axis = None
        for kw in e.keywords:
            if kw.arg != "axis":
                raise self.error(f"{src}.sum() takes only axis=")
            axis = self.expr(kw.value)
        if e.args:
            raise self.error(f"{src}.sum() takes axis= by name, e.g. {src}.sum(axis=\"rows\")")
        if axis == "samples":
            raise self.error(retired.SAMPLES_AXIS.format(expr=src))
        v = self.value(base, e.func)
        if not v.shape:
            raise self.error(retired.OWN_SUM.format(expr=src))
        if axis is not None and not isinstance(axis, str):
            raise self.error(f"{src}.sum(axis=...) takes the name of the value's own axis: "
                             "\"components\", \"rows\" or \"columns\"")
        return self.sem.fold(v, axis)

    def at(self, base, src: str, e: ast.Call):
        if isinstance(base, R.TableRef):
            axes = [a.label for a in base.spec.axes]
            if e.args:
                raise self.error(f"table '{src}' is read by axis name: {src}.at(" +
                                 ", ".join(f"{a}=..." for a in axes) + ")")
            given = {kw.arg: kw for kw in e.keywords}
            missing = [a for a in axes if a not in given]
            extra = [k for k in given if k not in axes]
            if missing or extra:
                raise self.error(f"table '{src}' has axes {axes}: name each once in {src}.at(...)" +
                                 (f"; missing {missing}" if missing else "") + (f"; unknown {extra}" if extra else ""))
            coords = [self.key_int(self.expr(given[a].value), given[a].value) for a in axes]
            r = create("hawk.at", [self.plane_arg(base.spec.name), *coords], [self.sem.ftype],
                       {"axes": strs(axes)}).result
            return HVal(r, "f")
        if isinstance(base, R.OutRef) or isinstance(base, R.SinkRef):
            raise self.error(f"'{src}' is a plane this launch writes; .at reads inputs as they were before the "
                             "launch, so only an input plane can be read at another lane")
        if not isinstance(base, R.PlaneRef):
            inputs = [p.name for p in self.sig.planes if p.kind == "lane"]
            example = f"{inputs[0]}.at(i)" if inputs else "x.at(i) of an input plane x"
            raise self.error(f"'{src}' is a value this kernel computes; only an input plane can be read at another "
                             f"lane: call .at on the input plane itself (e.g. {example}) and compute from that")
        spec = base.spec
        axes = [a.label for a in self.sig.lane_axes()]
        if e.args and e.keywords:
            raise self.error(f"{src}.at(...) takes a lane index or axis names, not both")
        if e.args:
            if len(e.args) == 1:
                labels, coords = ["#"], [self.key_int(self.expr(e.args[0]), e.args[0])]
            elif len(e.args) == len(axes):
                labels, coords = axes, [self.key_int(self.expr(a), a) for a in e.args]
            else:
                raise self.error(f"{src}.at(...) takes one lane index or one coordinate per lane axis {axes}")
        else:
            given = {kw.arg: kw.value for kw in e.keywords}
            extra = [k for k in given if k not in axes]
            if extra:
                raise self.error(f"'{src}' has lane axes {axes}; there is no axis {extra[0]!r}")
            labels = axes
            coords = [self.key_int(self.expr(given[a]), given[a]) if a in given else
                      create("hawk.lane", [], [self.sem.i64], {"axis": a}).result for a in axes]
        if spec.kind == "index":
            t = self.itypes[spec.name]
            r = create("hawk.at", [self.plane_arg(spec.name), *coords], [t], {"axes": strs(labels)}).result
            if t != self.sem.i64:
                r = create("arith.extsi", [r], [self.sem.i64]).result
            return HVal(r, "i")
        t = self.sem.type_of("f", spec.payload.shape)
        r = create("hawk.at", [self.plane_arg(spec.name), *coords], [t], {"axes": strs(labels)}).result
        return HVal(r, "f", spec.payload.shape)

    def key_int(self, v, node) -> object:
        h = self.value(v, node)
        if h.kind != "i" or h.shape:
            raise self.error(f"'{ast.unparse(node)}' must be an integer lane index or coordinate; convert a float "
                             "with m.index(x, n) or int(x)", node)
        return self.sem.mlir(h)

    # ---- reductions and scatters -------------------------------------------------------------------
    def reduction(self, kind: str, e: ast.Call):
        self.lane_local(f"hawk.{kind}", "reduce in the kernel and pass the result in as an argument")
        if self.nesting:
            raise self.error(reduction_nested(kind, self.nesting[-1]))
        if len(e.args) != 1:
            raise self.error(f"hawk.{kind} takes one value: hawk.{kind}(x, where=mask, over=axes)")
        kw = {k.arg: k.value for k in e.keywords}
        bad = [k for k in kw if k not in ("where", "over", "policy")]
        if bad:
            raise self.error(f"hawk.{kind} takes where=, over= and policy=, not {bad[0]}=")
        v = self.value(self.expr(e.args[0]), e.args[0])
        if v.reduced is not None:
            raise self.error(f"hawk.{kind} of a value that is already reduced over lanes has nothing to combine")
        v = self.sem.to_float(v)
        policy = self.expr(kw["policy"]) if "policy" in kw else "auto"
        if not isinstance(policy, str) or policy not in _POLICIES:
            raise self.error(f"policy= is one of {list(_POLICIES)}, not {_shown(policy, kw['policy'])}")
        if policy == "plain" and kind in ("sum", "mean"):
            raise self.error("policy=\"plain\" is for scatters; a sum over lanes takes \"auto\", \"compensated\" "
                             "or \"ordered\"")
        over = self.over(self.expr(kw["over"]) if "over" in kw else None, kind)
        operands = [self.sem.mlir(v) if not v.is_const else self.sem.mlir(v)]
        if "where" in kw:
            m = self.value(self.expr(kw["where"]), kw["where"])
            if m.kind != "b" or m.shape:
                raise self.error(f"where= takes one truth value per lane, e.g. where=x > 0.0 (got "
                                 f"{ast.unparse(kw['where'])})")
            operands.append(self.sem.mlir(m))
        r = create("hawk.reduce", operands, [operands[0].type],
                   {"kind": kind, "over": strs(over), "policy": policy}).result
        kept = tuple(a.label for a in self.sig.lane_axes() if a.label not in over)
        return HVal(r, "f", v.shape, reduced=(kind, kept))

    def over(self, spec, kind: str) -> list[str]:
        axes = [a.label for a in self.sig.lane_axes()]
        if spec is None:
            return axes
        items = spec if isinstance(spec, tuple) else (spec,)
        out = []
        for it in items:
            if isinstance(it, HVal) and it.is_const and it.kind == "i":
                k = int(it.value)
                if not -len(axes) <= k < len(axes):
                    raise self.error(f"over={k} is outside the lane axes {axes}")
                out.append(axes[k])
            elif isinstance(it, str):
                if it not in axes:
                    raise self.error(f"over={it!r} is not a lane axis; the lane axes are {axes}")
                out.append(it)
            else:
                raise self.error("over= takes an axis label, a position or a tuple of them")
        if len(set(out)) != len(out):
            raise self.error(f"over= names an axis twice: {out}")
        return [a for a in axes if a in out]

    def scatter_call(self, e: ast.Call) -> R.Scatter:
        self.lane_local("hawk.scatter", "scatter in the kernel; a func can compute the key and the value")
        if len(e.args) != 1:
            raise self.error("hawk.scatter takes the sink: hawk.scatter(sink)[key] += v")
        arg = e.args[0]
        spec = self.plane_spec(arg.id) if isinstance(arg, ast.Name) else None
        if spec is not None and spec.kind == "output" and arg.id in self.env:
            raise self.error(f"output '{arg.id}' is assigned per lane and cannot also be written by key "
                             "(hawk.scatter): use two outputs")
        sink = self.expr(arg)
        if isinstance(sink, R.OutRef) and sink.spec.payload.shape:
            raise self.error(f"hawk.scatter into output '{sink.spec.name}' takes a Mutable[Scalar] or "
                             f"Mutable[Index] output plane, not {sink.spec.describe()}")
        if not isinstance(sink, (R.SinkRef, R.OutRef)):
            raise self.error(f"hawk.scatter needs a sink declared Mutable[\"axis\":n] or an output plane "
                             f"(Mutable[Scalar], Mutable[Index]); '{ast.unparse(e.args[0])}' is not one")
        policy = "auto"
        for kw in e.keywords:
            if kw.arg != "policy":
                raise self.error(f"hawk.scatter takes policy=, not {kw.arg}=")
            policy = self.expr(kw.value)
            if not isinstance(policy, str) or policy not in _POLICIES:
                raise self.error(f"policy= is one of {list(_POLICIES)}, not {_shown(policy, kw.value)}")
        return R.Scatter(sink, policy)

    def scatter(self, sc: R.Scatter, key_node: ast.expr, value_node: ast.expr, mode: str, node: ast.stmt):
        if "if" in self.nesting:
            raise self.error(SCATTER_IN_IF, node)
        if isinstance(sc.sink, R.OutRef):
            return self.place(sc, key_node, value_node, mode, node)
        spec = sc.sink.spec
        key = self.expr(key_node)
        keys = key if isinstance(key, tuple) else (key,)
        if len(keys) != len(spec.axes):
            raise self.error(f"sink '{spec.name}' has {len(spec.axes)} axes "
                             f"{[a.label for a in spec.axes]}: give one key per axis", node)
        ks = [self.key_int(k, key_node) for k in keys]
        v = self.value(self.expr(value_node), value_node)
        if v.reduced is not None:
            raise self.error("scatter of a reduced value: scatter per-lane values and let the sink add them", node)
        v = self.sem.to_float(v)
        if v.is_const:
            v = HVal(self.sem.mlir(v), "f")
        sink = self.plane_arg(spec.name)
        if v.shape != parts(sink.type).shape and spec.name not in self.scatter_payloads:  # the first scatter
            sink.set_type(of_value("sink", v.value.type, parts(sink.type).axes))
        create("hawk.scatter", [sink, v.value, *ks], [], {"mode": mode, "policy": sc.policy})
        prev = self.scatter_payloads.get(spec.name)
        if prev is not None and prev != v.shape:
            raise self.error(f"sink '{spec.name}' gets values of shapes {prev} and {v.shape}", node)
        self.scatter_payloads[spec.name] = v.shape


    def place(self, sc: R.Scatter, key_node: ast.expr, value_node: ast.expr, mode: str, node: ast.stmt):
        """`hawk.scatter(out)[k] = v` into an output plane: v at flat position k of the caller's array (a
        hawk.store with a key). Key -1 writes nothing; other keys outside the array are refused."""
        spec = sc.sink.spec
        name = spec.name
        if mode != "set":
            raise self.error(f"hawk.scatter({name})[k] += v: an output plane takes stores (= v) only; add into a "
                             f"sink instead (declare it Mutable[\"slot\":n] and write hawk.scatter(sink)[k] += v)",
                             node)
        if sc.policy != "auto":
            raise self.error(f"hawk.scatter({name}, policy=...): a store into an output plane has no policy; "
                             "drop policy=", node)
        key = self.expr(key_node)
        if isinstance(key, tuple):
            raise self.error(f"hawk.scatter({name})[k]: an output plane takes one flat position k, not "
                             f"{len(key)} keys", node)
        k = self.key_int(key, key_node)
        v = self.value(self.expr(value_node), value_node)
        if v.reduced is not None:
            raise self.error(f"hawk.scatter({name})[k] = v of a reduced value: store per-lane values", node)
        if v.shape:
            raise self.error(f"hawk.scatter({name})[k] = v takes one number per lane, got a value of shape "
                             f"{v.shape}", node)
        if name in self.env or name in self.out_reads or self.outputs.get(name) in ("lane", "cell"):
            raise self.error(f"output '{name}' is assigned or read per lane and cannot also be written by key "
                             "(hawk.scatter): use two outputs", node)
        if spec.integer:
            value = self.sem.mlir(self.sem.to_int(v))
            if self.itypes[name] != self.sem.i64:
                value = create("arith.trunci", [value], [self.itypes[name]]).result
        else:
            value = self.own_float(name, self.sem.mlir(self.sem.to_float(v)))  # (an output of its own float type)
        arg = self.plane_arg(name)
        create("hawk.store", [arg, value, k], [])
        self.placed.add(name)
        checked = key_source(k) is not None and self.sig.get(key_source(k)).kind == "index"
        if self.outputs.get(name) != "scatter-run":  # a key computed in the kernel is checked as the run goes
            self.outputs[name] = "scatter" if checked else "scatter-run"


def _shown(value, node: ast.AST) -> str:
    """How a refused argument is quoted: a string by its value (`'fast'`), anything else as the user wrote it."""
    return repr(value) if isinstance(value, str) else ast.unparse(node)
