"""The expression grammar of the front-end fuzzer (tests/fuzz_kernels.py): lane expressions drawn at random,
each written as hawk source and evaluated with NumPy at once.

An `E` carries its source, its NumPy value on the case's planes, its kind and an error scale: how far the
roundings of its inputs and steps can move it (sums of magnitudes, scaled by derivatives for functions). The
runner accepts a float result within a small multiple of that scale of NumPy's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

N = 37  # lanes of a plain kernel
ROWS, COLS = 5, 6  # lanes of a Grid kernel
BINS = 7
VECTOR_SCATTERS = 0.2  # the share of scatters whose payload is a Vector[2] (fuzz_kernels.Gen.scatter)
TABLE = 5

# classes of bugs found before (all fixed; each has its own tests): a case that may hit one carries its tag, shown
# in failure reports, so a regression names its class; HAWK_FUZZ_SKIP leaves tagged cases out while a fix is under way
KNOWN = ("float_floordiv_mod", "int_div_zero", "sign_nan", "copysign", "range_float", "huge_const", "key_minus1",
         "vector_1024", "compensated_inf")


@dataclass
class E:
    """An expression: its source, its value on this case's planes, its kind ('f', 'i', 'b') and, for floats,
    an error scale (what one rounding of each input and step can move it by, before the relative factor)."""

    src: str
    val: np.ndarray
    kind: str
    mag: np.ndarray | None = None
    const: bool = False  # a Python constant the front end folds (a constant division by zero is refused)
    fuzzy: np.ndarray | None = None  # lanes within rounding of a jump (floor, a comparison...): not compared
    exact: bool = False  # a float read or chosen as it is (no rounding on the way): it sits on no jump's edge

    @property
    def sure(self) -> bool:
        """Whether hawk computes exactly NumPy's value (an integer, or an exact float)."""
        return self.kind != "f" or self.exact


@dataclass
class Case:
    seed: int
    index: int
    name: str
    source: str
    planes: dict
    expect: str  # "match" | "kernel_error" | "input_error"
    want: dict = field(default_factory=dict)  # output -> (values, error scale or None if exact, fuzzy or None)
    line: int | None = None  # the line a kernel_error must point at
    tags: set = field(default_factory=set)
    what: str = ""


REL = 1e-9  # relative tolerance of a float result, against its error scale


def union(*items) -> np.ndarray | None:
    """The fuzzy lanes of several expressions (or masks) together; None when there are none."""
    out = None
    for it in items:
        f = it.fuzzy if isinstance(it, E) else it
        if f is not None:
            out = f.copy() if out is None else (out | f)
    return out


def near(dist, scale) -> np.ndarray:
    """Lanes whose distance to a jump is within the error scale: one rounding there can land on either side."""
    with np.errstate(all="ignore"):
        return np.nan_to_num(np.asarray(dist, dtype=np.float64), nan=np.inf) < REL * np.nan_to_num(scale, nan=0.0)


def absf(v) -> np.ndarray:
    """|v| as float64 (the error scale of a value read as it is)."""
    return np.abs(np.asarray(v, dtype=np.float64))


class Grammar:
    """Draws expressions over one case's planes. Each is built with its NumPy value, so the reference follows
    NumPy's semantics by construction (floor division, NaN propagation, IEEE inf)."""

    def __init__(self, seed: int, index: int):
        self.rng = np.random.default_rng([seed, index])
        self.seed, self.index = seed, index
        self.tags: set[str] = set()
        self.grid = False
        self.lines: list[str] = []
        self.tmp = 0
        self.locals: dict[str, E] = {}
        # @hawk.func helpers: their defs (each complete before the next, so a nested one comes first), how deep
        # the drawing is inside them, and their own random stream: the kernel's draws do not move, so a seed's
        # kernels keep their shape, now with some of their expressions passed through funcs
        self.funcs: list[str] = []
        self.in_func = self.nfunc = 0
        self.frng = np.random.default_rng([seed, index, 0xF])

    # ---- data ------------------------------------------------------------------------------------------
    def planes(self):
        r = self.rng
        shape = (ROWS, COLS) if self.grid else (N,)
        x = r.normal(size=shape) * 2.0
        y = r.uniform(-3.0, 3.0, size=shape)
        if r.random() < 0.3:  # special values
            flat = x.reshape(-1)
            for v in r.choice([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e300, 5e-324], size=3):
                flat[r.integers(flat.size)] = v
        k = r.integers(0, N if not self.grid else ROWS * COLS, size=shape).astype(np.int64)
        kb = r.integers(0, BINS, size=shape).astype(np.int32)
        p = float(np.round(r.normal() * 3.0, 3))
        self.data = {"x": x, "y": y, "k": k, "kb": kb, "p": p}
        self.shape = shape
        self.env = {"x": E("x", x, "f", absf(x), exact=True), "y": E("y", y, "f", absf(y), exact=True),
                    "k": E("k", k, "i"), "kb": E("kb", kb.astype(np.int64), "i"),
                    "p": E("p", np.full(shape, p), "f", np.full(shape, abs(p)), exact=True)}
        self.data["v"] = r.normal(size=(3, *shape))  # a Vector[3] plane: payload first, lanes last
        self.data["tb"] = r.normal(size=TABLE)  # a Table["slot":TABLE]
        if self.grid:
            rr, cc = np.meshgrid(np.arange(ROWS), np.arange(COLS), indexing="ij")
            self.env["lane.row"] = E("lane.row", rr.astype(np.int64), "i")
            self.env["lane.col"] = E("lane.col", cc.astype(np.int64), "i")

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    # ---- expressions -----------------------------------------------------------------------------------
    def fconst(self) -> E:
        r = self.rng.random()
        if r < 0.04:
            self.tags.add("huge_const")
            v = self.pick([1e308 * 10, 1.7e308, 1e300])
            src = "(1e308 * 10.0)" if v == math.inf else repr(v)  # (parenthesised: `y * 1e308 * 10.0` is finite)
        elif r < 0.08:
            v = self.pick([0.0, -0.0, 1e-300, math.pi])
            src = {math.pi: "m.pi"}.get(v, repr(v))
        else:
            v = float(self.pick([0.5, 2.0, -1.25, 3.0, 0.1, 7.5, -4.0, 1.0]))
            src = repr(v)
        return E(src, np.full(self.shape, v), "f", np.full(self.shape, abs(v)), True, exact=True)

    def iconst(self, lo=-9, hi=9) -> E:
        v = int(self.rng.integers(lo, hi + 1))
        return E(str(v) if v >= 0 else f"({v})", np.full(self.shape, v, dtype=np.int64), "i", None, True)

    def leaf_f(self) -> E:
        names = [n for n in self.locals if self.locals[n].kind == "f"]
        r = self.rng.random()
        if names and r < 0.3:
            n = self.pick(names)
            return self.locals[n]
        if r < 0.75:
            return self.env[self.pick(["x", "y", "p", "x"])]
        return self.fconst()

    def leaf_i(self) -> E:
        names = [n for n in self.locals if self.locals[n].kind == "i"]
        r = self.rng.random()
        if names and r < 0.25:
            return self.locals[self.pick(names)]
        if r < 0.6:
            pool = ["k", "kb"] + (["lane.row", "lane.col"] if self.grid else [])
            return self.env[self.pick(pool)]
        return self.iconst()

    def num(self, d: int) -> E:
        return self.f(d) if self.rng.random() < 0.7 else self.i(d)

    FUNC_P = (0.05, 0.2)  # the chance that a drawn float expression (depth >= 1) is passed through a fresh func,
    # in a kernel's body and in a func's (a func calling a func)

    def f(self, d: int) -> E:
        e = self._f(d)
        if d > 0 and self.in_func < 2 and self.frng.random() < self.FUNC_P[self.in_func]:
            return self.func_call(e, d)
        return e

    def func_call(self, a: E, d: int) -> E:
        """`a` passed to a fresh `@hawk.func hN(a, b, j)` with a float `b` and an integer `j` drawn here (or `j`
        left to a default); the body is drawn from this grammar over the parameters alone (no plane, no .at, no
        kernel local), perhaps with a local of its own, perhaps calling a func of its own. Arguments go by
        position or by keyword. All of it from the funcs' own stream."""
        main, self.rng = self.rng, self.frng
        name = f"h{self.nfunc}"
        self.nfunc += 1
        try:
            b = self.f(d - 1)
            default = self.rng.random() < 0.2
            j = self.iconst() if default else self.i(d - 1)
            saved = (self.env, self.locals, self.grid)
            self.in_func += 1
            self.env = {"x": self._param("a", a), "y": self._param("b", b), "p": self._param("a", a),
                        "k": self._param("j", j), "kb": self._param("j", j)}
            self.locals, self.grid = {}, False
            try:
                body = []
                if self.rng.random() < 0.4:
                    u = self.f(max(d - 1, 0))
                    body.append(f"    u = {u.src}")
                    self.locals["u"] = E("u", u.val, u.kind, u.mag, u.const, u.fuzzy, u.exact)
                r = self.f(max(d - 1, 0))
                body.append(f"    return {r.src}")
            finally:
                self.in_func -= 1
                self.env, self.locals, self.grid = saved
            params = f"a, b, j={j.src}" if default else "a, b, j"
            self.funcs.append(f"@hawk.func\ndef {name}({params}):\n" + "\n".join(body) + "\n\n\n")
            form = self.rng.random()
            rest = "" if default else (f", j={j.src}" if form < 0.5 else f", {j.src}")
            call = (f"{name}({a.src}, b={b.src}{rest})" if form < 0.3 else
                    f"{name}({a.src}, {b.src}{rest})" if form < 0.5 or default else
                    f"{name}(j={j.src}, b={b.src}, a={a.src})")
        finally:
            self.rng = main
        return E(call, r.val, r.kind, r.mag, r.const, r.fuzzy, r.exact)

    @staticmethod
    def _param(name: str, e: E) -> E:
        """A func's parameter: the argument's value, error scale and fuzzy lanes under the parameter's name (a
        constant argument stays a constant: the front end inlines the body at the call)."""
        return E(name, e.val, e.kind, e.mag, e.const, e.fuzzy, e.exact)

    def _f(self, d: int) -> E:
        if d <= 0:
            return self.leaf_f()
        r = self.rng.random()
        if r < 0.32:
            a, b = self.num(d - 1), self.num(d - 1)
            if a.kind == "i" and b.kind == "i":
                a = self.f(d - 1)
            return self.arith(self.pick(["+", "-", "*", "/", "+", "*"]), a, b)
        if r < 0.47:
            return self.unary(self.f(d - 1))
        if r < 0.55:
            return self.binary(self.f(d - 1), self.num(d - 1))
        if r < 0.62:
            c, a, b = self.b(d - 1), self.num(d - 1), self.f(d - 1)
            return self.select(c, a, b, self.pick(["where", "ifexp"]))
        if r < 0.69:
            return self.at_read(d) if not self.in_func else self.leaf_f()  # (a func reads no plane)
        if r < 0.73:
            a = self.f(d - 1)
            c = int(self.rng.integers(0, 4))
            with np.errstate(all="ignore"):
                if a.const and not np.all(np.isfinite(a.val ** c)):
                    c = 1  # Python refuses to fold a constant power that overflows; not what is tested here
                v = a.val ** c
                mag = (c * absf(a.val) ** max(c - 1, 0) * a.mag + absf(v)) if c else np.zeros(self.shape)
            return E(f"({a.src}) ** {c}", v, "f", mag, a.const, a.fuzzy)
        if r < 0.77:
            a = self.f(d - 1)
            return E(f"-({a.src})", -a.val, "f", a.mag, a.const, a.fuzzy, a.exact)
        if r < 0.80:  # float // and %: NumPy's (and Python's) floor division and modulo
            self.tags.add("float_floordiv_mod")
            a, b = self.f(d - 1), self.f(d - 1)
            if a.const and b.const:
                b = self.env["x"]
            op = self.pick(["//", "%"])
            with np.errstate(all="ignore"):
                v = np.floor_divide(a.val, b.val) if op == "//" else np.mod(a.val, b.val)
                q = a.val / b.val
                jump = None if a.exact and b.exact else \
                    near(np.abs(q - np.round(q)), absf(q) + (a.mag + absf(q) * b.mag) / absf(b.val))
            return E(f"(({a.src}) {op} ({b.src}))", v, "f", absf(v) + a.mag + b.mag, False, union(a, b, jump))
        if r < 0.86:
            i = self.i(d - 1)
            return E(f"m.to_float({i.src})", i.val.astype(np.float64), "f", absf(i.val), i.const, i.fuzzy, True)
        if r < 0.92:
            return self.in_lane_vector(d) if self.rng.random() < 0.5 or self.in_func else self.payload_read(d)
        return self.leaf_f()

    def payload_read(self, d: int) -> E:
        """A read of the Vector[3] plane (here, or at another lane) or of the table, folded to a scalar."""
        v, r = self.data["v"], self.rng.random()
        if r < 0.3 and self.grid and self.rng.random() < 0.5:
            return self.vector_neighbour()
        if r < 0.3:
            j = self.index_expr(d)
            at = v.reshape(3, -1)[:, j.val]
            return E(f"v.at({j.src}).sum()", at.sum(axis=0), "f", np.abs(at).sum(axis=0), False, j.fuzzy)
        if r < 0.5:
            return E("m.dot(v, v)", (v * v).sum(axis=0), "f", 2 * (v * v).sum(axis=0))
        if r < 0.7:
            j = int(self.rng.integers(3))
            return E(f"v.components[{j}]", v[j], "f", np.abs(v[j]), exact=True)
        a = self.i(max(d - 1, 0))
        slot = np.mod(a.val, TABLE)
        val = self.data["tb"][slot]
        return E(f"tb.at(slot=({a.src}) % {TABLE})", val, "f", np.abs(val), False, a.fuzzy, True)

    def in_lane_vector(self, d: int) -> E:
        """A vector built in the lane and folded back to a scalar: .sum(), m.dot, m.norm or .components[j]."""
        n = int(self.rng.integers(2, 4))
        items = [self.f(d - 1) for _ in range(n)]
        vals = np.stack([a.val for a in items])
        mags = np.stack([a.mag for a in items])
        vec = f"m.vec({', '.join(a.src for a in items)})"
        fz = union(*items)
        form = self.pick(["sum", "dot", "norm", "component"])
        with np.errstate(all="ignore"):
            if form == "sum":
                return E(f"{vec}.sum()", vals.sum(axis=0), "f", mags.sum(axis=0), False, fz)
            if form == "dot":
                mag = (2 * mags * np.abs(vals)).sum(axis=0)
                return E(f"m.dot({vec}, {vec})", (vals * vals).sum(axis=0), "f", mag, False, fz)
            if form == "norm":
                v = np.sqrt((vals * vals).sum(axis=0))
                return E(f"m.norm({vec})", v, "f", mags.sum(axis=0) + v, False, fz)
        j = int(self.rng.integers(n))
        return E(f"{vec}.components[{j}]", vals[j], "f", mags[j], False, items[j].fuzzy, items[j].sure)

    def i(self, d: int) -> E:
        if d <= 0:
            return self.leaf_i()
        r = self.rng.random()
        if r < 0.35:
            a, b = self.i(d - 1), self.i(d - 1)
            op = self.pick(["+", "-", "*"])
            if op == "*" and (np.max(np.abs(a.val)) > 1e5 or np.max(np.abs(b.val)) > 1e5):
                op = "+"
            v = {"+": a.val + b.val, "-": a.val - b.val, "*": a.val * b.val}[op]
            return E(f"({a.src} {op} {b.src})", v, "i", None, a.const and b.const, union(a, b))
        if r < 0.5:
            a = self.i(d - 1)
            if self.rng.random() < 0.1:
                b = self.i(d - 1)  # a divisor that may be zero
            else:
                b = self.iconst(1, 9) if self.rng.random() < 0.6 else self.iconst(-9, -1)
            if a.const and b.const and np.any(b.val == 0):  # refused by the front end: not what is tested here
                b = self.iconst(1, 9)
            if np.any(b.val == 0):
                self.tags.add("int_div_zero")
            op = self.pick(["//", "%"])
            with np.errstate(all="ignore"):
                v = np.floor_divide(a.val, b.val) if op == "//" else np.mod(a.val, b.val)
            return E(f"({a.src} {op} {b.src})", v, "i", None, a.const and b.const, union(a, b))
        if r < 0.6:
            a, n = self.f(d - 1), int(self.rng.integers(1, 20))
            with np.errstate(all="ignore"):
                v = np.where(np.isnan(a.val), 0, np.clip(np.floor(a.val), 0, n - 1)).astype(np.int64)
            return E(f"m.index({a.src}, {n})", v, "i", None, False, union(a, self.jump_int(a)))
        if r < 0.68:
            a, b = self.i(d - 1), self.i(d - 1)
            fn = self.pick(["min", "max"])
            v = getattr(np, fn + "imum")(a.val, b.val)
            return E(f"m.{fn}({a.src}, {b.src})", v, "i", None, a.const and b.const, union(a, b))
        if r < 0.73:
            a = self.i(d - 1)
            return E(f"m.abs({a.src})", np.abs(a.val), "i", None, False, a.fuzzy)
        if r < 0.8:
            c, a, b = self.b(d - 1), self.i(d - 1), self.i(d - 1)
            return self.select(c, a, b, "where")
        if r < 0.86 and not self.in_func:
            j = self.index_expr(d)
            return E(f"k.at({j.src})", self.data["k"].reshape(-1)[j.val], "i", None, False, j.fuzzy)
        return self.leaf_i()

    def b(self, d: int) -> E:
        r = self.rng.random()
        if d <= 0 or r < 0.55:
            a, b = self.num(max(d - 1, 0)), self.num(max(d - 1, 0))
            op = self.pick(["<", "<=", ">", ">=", "==", "!="])
            with np.errstate(all="ignore"):
                v = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
                     "!=": np.not_equal}[op](a.val, b.val)
            jump = None
            if not (a.sure and b.sure) and a.src != b.src:
                am = a.mag if a.mag is not None else absf(a.val)
                bm = b.mag if b.mag is not None else absf(b.val)
                jump = near(absf(a.val - b.val.astype(np.float64)), am + bm + absf(a.val) + absf(b.val))
            return E(f"({a.src} {op} {b.src})", v, "b", None, False, union(a, b, jump))
        if r < 0.75:
            a, b = self.b(d - 1), self.b(d - 1)
            form = self.pick(["land", "lor", "and", "or", "&", "|"])
            conj = form in ("land", "and", "&")
            v = np.logical_and(a.val, b.val) if conj else np.logical_or(a.val, b.val)
            src = f"m.{form}({a.src}, {b.src})" if form in ("land", "lor") else f"({a.src} {form} {b.src})"
            return E(src, v, "b", None, False, union(a, b))
        if r < 0.85:
            a = self.b(d - 1)
            src = self.pick([f"m.lnot({a.src})", f"(not {a.src})"])
            return E(src, np.logical_not(a.val), "b", None, False, a.fuzzy)
        a = self.f(d - 1)
        fn = self.pick(["isnan", "isinf", "isfinite"])
        return E(f"m.{fn}({a.src})", getattr(np, fn)(a.val), "b", None, False, a.fuzzy)

    def arith(self, op: str, a: E, b: E) -> E:
        if op == "/" and a.const and b.const:
            op = "*"  # a constant quotient is folded, and a constant division by zero refused: not tested here
        am = a.mag if a.mag is not None else absf(a.val)
        bm = b.mag if b.mag is not None else absf(b.val)
        av, bv = a.val.astype(np.float64), b.val.astype(np.float64)
        with np.errstate(all="ignore"):
            if op == "+":
                v, mag = av + bv, am + bm
            elif op == "-":
                v, mag = av - bv, am + bm
            elif op == "*":
                v, mag = av * bv, am * bm
            else:
                v = av / bv
                mag = (am + absf(v) * bm) / absf(bv)
        jump = near(absf(bv), bm) if op == "/" and not b.sure else None  # a divisor that may be zero or not
        return E(f"({a.src} {op} {b.src})", v, "f", mag, a.const and b.const, union(a, b, jump))

    _UNARY = {"sqrt": (np.sqrt, lambda a, v: 0.5 / np.sqrt(np.abs(a))), "exp": (np.exp, lambda a, v: np.abs(v)),
              "log": (np.log, lambda a, v: 1.0 / np.abs(a)), "sin": (np.sin, lambda a, v: 1.0),
              "cos": (np.cos, lambda a, v: 1.0), "tanh": (np.tanh, lambda a, v: 1.0),
              "atan": (np.arctan, lambda a, v: 1.0), "abs": (np.abs, lambda a, v: 1.0),
              "floor": (np.floor, lambda a, v: 0.0), "ceil": (np.ceil, lambda a, v: 0.0),
              "trunc": (np.trunc, lambda a, v: 0.0), "round": (np.round, lambda a, v: 0.0),
              "log1p": (np.log1p, lambda a, v: 1.0 / np.abs(1.0 + a)), "expm1": (np.expm1, lambda a, v: np.exp(a)),
              "exp2": (np.exp2, lambda a, v: np.abs(v)), "log2": (np.log2, lambda a, v: 1.5 / np.abs(a)),
              "log10": (np.log10, lambda a, v: 0.5 / np.abs(a)),
              "erf": (np.vectorize(math.erf, otypes=[float]), lambda a, v: 1.2),
              "sign": (np.sign, lambda a, v: 0.0)}

    def unary(self, a: E) -> E:
        name = self.pick(list(self._UNARY))
        fn, deriv = self._UNARY[name]
        if name == "sign" and np.any(np.isnan(a.val)):
            self.tags.add("sign_nan")
        with np.errstate(all="ignore"):
            v = fn(a.val)
            mag = np.abs(deriv(a.val, v)) * a.mag + absf(v)
            scale = a.mag + absf(a.val)
            if a.exact:
                jump = None
            elif name in ("floor", "ceil", "trunc"):
                jump = near(np.abs(a.val - np.round(a.val)), scale)
            elif name == "round":
                jump = near(np.abs(np.abs(a.val - np.floor(a.val)) - 0.5), scale)
            elif name in ("sign", "sqrt", "log", "log2", "log10"):
                jump = near(absf(a.val), scale)  # a sign, or the edge of the domain
            elif name == "log1p":
                jump = near(absf(a.val + 1.0), scale)
            else:
                jump = None
        return E(f"m.{name}({a.src})", v, "f", mag, False, union(a, jump), a.exact and name in ("abs", "sign"))

    def jump_int(self, a: E) -> np.ndarray:
        """Lanes where floor(a) (in m.index) may land on either side of an integer."""
        if a.sure:
            return np.zeros(self.shape, bool)
        with np.errstate(all="ignore"):
            return near(np.abs(a.val - np.round(a.val)), a.mag + absf(a.val))

    def binary(self, a: E, b: E) -> E:
        name = self.pick(["min", "max", "atan2", "hypot", "pow", "copysign", "fma", "clamp"])
        am = a.mag
        bm = b.mag if b.mag is not None else absf(b.val)
        bv = b.val.astype(np.float64)
        fz = union(a, b)
        with np.errstate(all="ignore"):
            if name in ("min", "max"):
                v = (np.minimum if name == "min" else np.maximum)(a.val, bv)
                return E(f"m.{name}({a.src}, {b.src})", v, "f", np.maximum(am, bm), a.const and b.const, fz,
                         a.sure and b.sure)
            if name == "atan2":
                v = np.arctan2(a.val, bv)
                mag = (am + bm) / (absf(a.val) + absf(bv)) + absf(v)
                jump = None if b.sure else near(absf(bv), bm)
                return E(f"m.atan2({a.src}, {b.src})", v, "f", mag, False, union(fz, jump))
            if name == "hypot":
                v = np.hypot(a.val, bv)
                return E(f"m.hypot({a.src}, {b.src})", v, "f", am + bm + absf(v), False, fz)
            if name == "pow":
                v = np.power(a.val, bv)
                mag = absf(v) * (absf(bv) * am / absf(a.val) + bm * np.abs(np.log(absf(a.val))) + 1.0)
                jump = None if a.sure else near(absf(a.val), am)
                return E(f"m.pow({a.src}, {b.src})", v, "f", mag, False, union(fz, jump))
            if name == "copysign":
                self.tags.add("copysign")
                v = np.copysign(a.val, bv)
                jump = None if b.sure else near(absf(bv), bm)
                if not b.exact:  # a NaN an operation made: its sign is the target's (docs/semantics.md)
                    jump = union(jump, np.isnan(np.broadcast_to(np.asarray(bv, dtype=np.float64), np.shape(v))))
                return E(f"m.copysign({a.src}, {b.src})", v, "f", am, False, union(fz, jump), a.sure and b.sure)
            if name == "fma":
                c = self.leaf_f()
                v = a.val * bv + c.val
                return E(f"m.fma({a.src}, {b.src}, {c.src})", v, "f", am * bm + c.mag, False, union(fz, c))
            lo = float(self.pick([-2.0, -0.5, 0.0]))
            hi = lo + float(self.pick([0.5, 1.0, 3.0]))
            v = np.minimum(np.maximum(a.val, lo), hi)
            return E(f"m.clamp({a.src}, {lo!r}, {hi!r})", v, "f", am, a.const, a.fuzzy, a.sure)

    def select(self, c: E, a: E, b: E, form: str) -> E:
        kind = "f" if "f" in (a.kind, b.kind) else "i"
        v = np.where(c.val, a.val, b.val)
        mag = None
        if kind == "f":
            v = v.astype(np.float64)
            mag = np.where(c.val, a.mag if a.mag is not None else absf(a.val), b.mag if b.mag is not None
                           else absf(b.val))
        src = f"m.where({c.src}, {a.src}, {b.src})" if form == "where" else f"({a.src} if {c.src} else {b.src})"
        return E(src, v, kind, mag, False, union(c, a, b), a.sure and b.sure)

    def index_expr(self, d: int) -> E:
        """An integer lane index in [0, lanes): .at outside the lanes is undefined, so never drawn."""
        lanes = N if not self.grid else ROWS * COLS
        r = self.rng.random()
        if r < 0.3:
            return self.env["k"]
        if r < 0.65:
            a = self.i(max(d - 1, 0))
            return E(f"(({a.src}) % {lanes})", np.mod(a.val, lanes), "i", None, False, a.fuzzy)
        a = self.f(max(d - 1, 0))
        with np.errstate(all="ignore"):
            v = np.where(np.isnan(a.val), 0, np.clip(np.floor(a.val), 0, lanes - 1)).astype(np.int64)
        return E(f"m.index({a.src}, {lanes})", v, "i", None, False, union(a, self.jump_int(a)))

    def edge_clamped(self, dr: int) -> str:
        """A neighbour row clamped to the grid: to its last row as a constant (the generator's grid only: a
        sharded run, over more rows, refuses the read by name) or as `lane.extent("row") - 1` (any grid: a
        stencil, which runs sharded with halos and whose gradient takes the gather form)."""
        if self.rng.random() < 0.5:
            return f"m.clamp(lane.row + {dr}, 0, {ROWS - 1})"
        return f"m.clamp(lane.row + {dr}, 0, lane.extent(\"row\") - 1)"

    def vector_neighbour(self) -> E:
        """A neighbour's vector on a grid, at clamped constant offsets (a Vector stencil: its gradient takes the
        gather form), one component or their sum."""
        v = self.data["v"]
        dr, dc = int(self.rng.integers(-1, 2)), int(self.rng.integers(-1, 2))
        rr = np.clip(self.env["lane.row"].val + dr, 0, ROWS - 1)
        cc = np.clip(self.env["lane.col"].val + dc, 0, COLS - 1)
        at = v[:, rr, cc]
        src = f"v.at(row={self.edge_clamped(dr)}, col=m.clamp(lane.col + {dc}, 0, {COLS - 1}))"
        if self.rng.random() < 0.5:
            j = int(self.rng.integers(3))
            return E(f"{src}[{j}]", at[j], "f", np.abs(at[j]), exact=True)
        return E(f"{src}.sum()", at.sum(axis=0), "f", np.abs(at).sum(axis=0))

    def at_read(self, d: int) -> E:
        plane = self.pick(["x", "y"])
        flat = self.data[plane].reshape(-1)
        if self.grid and not self.in_func and self.rng.random() < 0.4:
            return self.vector_neighbour()
        if self.grid and self.rng.random() < 0.6:
            dr, dc = int(self.rng.integers(-1, 2)), int(self.rng.integers(-1, 2))
            rr = np.clip(self.env["lane.row"].val + dr, 0, ROWS - 1)
            cc = np.clip(self.env["lane.col"].val + dc, 0, COLS - 1)
            v = self.data[plane][rr, cc]
            src = f"{plane}.at(row={self.edge_clamped(dr)}, col=m.clamp(lane.col + {dc}, 0, {COLS - 1}))"
            return E(src, v, "f", absf(v), exact=True)
        j = self.index_expr(d)
        v = flat[j.val]
        return E(f"{plane}.at({j.src})", v, "f", absf(v), False, j.fuzzy, True)
