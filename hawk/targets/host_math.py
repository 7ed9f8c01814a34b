"""Transcendental math on the host as straight-line arith code that LLVM's loop vectorizer can widen.

The upstream lowering turns `math.exp` and friends into calls of libm's scalar functions, and a call the vectorizer
has no vector form for keeps the whole lane loop one lane at a time (a row softmax, `m.sin(x) + m.exp(-x * x)`).
The `expand-math` pass replaces them, before the lane loop reaches LLVM, by branch-free code (both sides computed,
one selected) of arith ops:
  exp, exp2, log, log2, log10, and sin, cos, tan up to |x| = 2^19 pi: the SPIR-V target's code
        (hawk/targets/spirv_math.py, after fdlibm), so those give the same bits on the host and on spirv;
  sin, cos, tan beyond 2^19 pi: a Payne-Hanek reduction (192 bits of 2/pi, 64-bit integer products) in a "far"
        function the lane calls with its near result; the function has vector forms (announced to LLVM through the
        `vector-function-abi-variant` attribute) that return the near results at once unless a lane is far, so the
        loop stays vectorized and pays for the long reduction only where it is needed;
  expm1: fdlibm's (x = k ln2 + r, a rational correction in r, the result rebuilt per range of k);
  tanh:  fdlibm's: x below 2^-28, -t/(t+2) with t = expm1(-2|x|) below 1, 1 - 2/(expm1(2|x|)+2) up to 22,
        then +-1, with x's sign (tanh(-0.0) = -0.0).
float64 errors in ulps of the correctly rounded value, as promised in docs/semantics.md and measured by
tests/test_host_math.py against mpmath (wide ranges, huge trigonometric arguments, subnormal results): exp, log,
expm1, sin, cos <= 1; exp2 <= 1.5; log2, log10 <= 2; tan, tanh <= 2.5. NaN, infinities, overflow, underflow and
signed zeros follow IEEE. float32 calls run the float64 code and round once (within 1 ulp of the correctly rounded
float32). The code is a fixed function of the argument: its bits never depend on thread count or chunking.
"""

from __future__ import annotations

from mlir import ir

from hawk.ir.build import create
from hawk.targets import spirv_math as sm
from hawk.targets.spirv_math import _B

FUNCS = ("exp", "exp2", "log", "log2", "log10", "expm1", "tanh", "sin", "cos", "tan")
TRIG = ("sin", "cos", "tan")

# fdlibm's s_expm1.c
EXPM1_Q = (-3.33333333333331316428e-02, 1.58730158725481460165e-03, -7.93650757867487942473e-05,
           4.00821782732936239552e-06, -2.01099218183624371326e-07)
EXPM1_HI = 7.09782712893383973096e+02  # above: inf
EXPM1_LO = -38.816242111356935  # -56 ln 2: below, -1 is the rounded result (fdlibm's threshold)


def _scale(b: _B, y, k):
    """y * 2^k for an integer k in [-1100, 1100], in two exact steps (a subnormal result rounds once)."""
    k1 = b.shr(k, 1)
    k2 = b.isub(k, k1)
    return b.mul(b.mul(y, b.real(b.shl(b.iadd(k1, 1023), 52))), b.real(b.shl(b.iadd(k2, 1023), 52)))


def expm1(b: _B, x):
    """e^x - 1 (fdlibm's expm1: below 2^-54 it is x, beyond the thresholds inf or -1, NaN stays NaN)."""
    nan = b.fcmp("uno", x, x)
    xc = b.sel(nan, 0.0, b.sel(b.fcmp("ogt", x, 710.0), 710.0, b.sel(b.fcmp("olt", x, -40.0), -40.0, x)))
    ax = b.absf(xc)
    # argument reduction: k = 0 for |x| <= ln2/2, else x = k ln2 + r (hi - lo, c the rounding of hi - lo)
    near = b.fcmp("ole", ax, 0.34657359027997264)
    kf = b.sel(near, 0.0, b.roundeven(b.mul(xc, sm.INV_LN2)))
    hi = b.sub(xc, b.mul(kf, sm.LN2_HI))
    lo = b.mul(kf, sm.LN2_LO)
    r = b.sub(hi, lo)
    c = b.sub(b.sub(hi, r), lo)
    k = b.to_int(kf)
    hfx = b.mul(0.5, r)
    hxs = b.mul(r, hfx)
    r1 = b.add(1.0, b.mul(hxs, b.poly(hxs, list(EXPM1_Q))))
    t = b.sub(3.0, b.mul(r1, hfx))
    e = b.mul(hxs, b.div(b.sub(r1, t), b.sub(6.0, b.mul(r, t))))
    k0 = b.sub(r, b.sub(b.mul(r, e), hxs))  # k == 0
    e = b.sub(b.sub(b.mul(r, b.sub(e, c)), c), hxs)
    km1 = b.sub(b.mul(0.5, b.sub(r, e)), 0.5)  # k == -1
    k1 = b.sel(b.fcmp("olt", r, -0.25), b.mul(-2.0, b.sub(e, b.add(r, 0.5))),
               b.add(1.0, b.mul(2.0, b.sub(r, e))))  # k == 1
    wide = b.sub(_scale(b, b.sub(1.0, b.sub(e, r)), k), 1.0)  # k <= -2 or k > 56
    # 2 <= k < 20: (1 - 2^-k) - (e - r), scaled; 20 <= k <= 56: (r - (e + 2^-k)) + 1, scaled
    kk = b.sel(b.icmp("sgt", k, 56), 56, b.sel(b.icmp("slt", k, 0), 0, k))
    two_mk = b.real(b.shl(b.isub(1023, kk), 52))
    mid_lo = _scale(b, b.sub(b.sub(1.0, two_mk), b.sub(e, r)), kk)
    mid_hi = _scale(b, b.add(b.sub(r, b.add(e, two_mk)), 1.0), kk)
    mid = b.sel(b.icmp("slt", k, 20), mid_lo, mid_hi)
    out = b.sel(b.lor(b.icmp("sle", k, -2), b.icmp("sgt", k, 56)), wide, mid)
    out = b.sel(b.icmp("eq", k, 1), k1, out)
    out = b.sel(b.icmp("eq", k, -1), km1, out)
    out = b.sel(b.icmp("eq", k, 0), k0, out)
    out = b.sel(b.fcmp("olt", b.absf(x), 5.551115123125783e-17), x, out)  # 2^-54: x itself (and -0.0)
    out = b.sel(b.fcmp("ogt", x, EXPM1_HI), float("inf"), out)
    out = b.sel(b.fcmp("olt", x, EXPM1_LO), -1.0, out)
    return b.sel(nan, b.add(x, x), out)


def tanh(b: _B, x):
    """fdlibm's tanh on |x|, the sign copied from x."""
    ax = b.absf(x)
    small = b.fcmp("olt", ax, 1.0)
    a = b.sel(b.fcmp("ogt", ax, 22.0), 22.0, b.sel(b.fcmp("uno", x, x), 0.0, ax))
    t = expm1(b, b.mul(b.sel(small, -2.0, 2.0), a))
    z = b.sel(small, b.div(b.neg(t), b.add(t, 2.0)), b.sub(1.0, b.div(2.0, b.add(t, 2.0))))
    z = b.sel(b.fcmp("oge", ax, 22.0), 1.0, z)  # also inf
    z = b.real(b.ior(b.bits(z), b.iand(b.bits(x), -(1 << 63))))  # z >= 0: x's sign bit put on it
    z = b.sel(b.fcmp("olt", ax, 3.725290298461914e-09), x, z)  # 2^-28: x itself
    return b.sel(b.fcmp("uno", x, x), b.add(x, x), z)


# 2/pi in 64-bit words, its bits from 2^-1 on (fdlibm's ipio2 as whole words): tests/test_host_math.py checks them
# against mpmath. The module's table puts a zero word first, so that a window may start before the binary point.
TWO_OVER_PI = (0xA2F9836E4E441529, 0xFC2757D1F534DDC0, 0xDB6295993C439041, 0xFE5163ABDEBBC561, 0xB7246E3A424DD2E0,
               0x06492EEA09D1921C, 0xFE1DEB1CB129A73E, 0xE88235F52EBB4484, 0xE99C7026B45F7E41, 0x3991D639835339F4,
               0x9C845F8BBDF9283B, 0x1FF897FFDE05980F, 0xEF2F118B5A0A6D1F, 0x6D367ECF27CB09B7, 0x4F463F669E5FEA2D,
               0x7527BAC7EBE5F17B, 0x3D0739F78A5292EA, 0x6BFB5FB11F8D5D08, 0x56033046FC7B6BAB)
TABLE = "__hawk_two_over_pi"
PIO2_HI, PIO2_LO = 1.5707963267948966, 6.123233995736766e-17


def _table(module: ir.Module) -> None:
    """The words of 2/pi as a private constant global of `module` (once)."""
    for op in module.body.operations:
        if op.operation.name == "memref.global" and ir.StringAttr(op.attributes["sym_name"]).value == TABLE:
            return
    words = [0, *TWO_OVER_PI]
    signed = ", ".join(str(w - (1 << 64) if w >= 1 << 63 else w) for w in words)
    glob = ir.Operation.parse(f'memref.global "private" constant @{TABLE} : memref<{len(words)}xi64> = '
                              f"dense<[{signed}]> {{alignment = 64 : i64}}")
    ir.InsertionPoint.at_block_begin(module.body).insert(glob)


class _BI(_B):
    """_B with the unsigned and wide integer ops the far reduction needs."""

    def shru(self, a, n):
        return self.op("arith.shrui", [self._i(a), self._i(n)], self.i)

    def ult(self, a, b):
        return self.op("arith.cmpi", [self._i(a), self._i(b)], self.b,
                       {"predicate": ir.IntegerAttr.get(self.i, 6)})

    def mul_wide(self, a, b):
        """(low, high) 64-bit halves of the unsigned 128-bit product."""
        op = create("arith.mului_extended", [a, b], [self.i, self.i])
        return op.results[0], op.results[1]

    def word(self, j):
        idx = ir.IndexType.get()
        table = self.op("memref.get_global", [], ir.MemRefType.get([len(TWO_OVER_PI) + 1], self.i),
                        {"name": ir.FlatSymbolRefAttr.get(TABLE)})
        return create("memref.load", [table, self.op("arith.index_cast", [j], idx)], [self.i]).result


def _split(v: float) -> tuple[float, float]:
    """Veltkamp's split of a double into two halves of 26 bits each: v = hi + lo exactly."""
    c = 134217729.0 * v
    hi = c - (c - v)
    return hi, v - hi


PIO2_SPLIT = _split(PIO2_HI)


def _product_error(b: _B, a, p):
    """a * PIO2_HI - p exactly, for p = fl(a * PIO2_HI) (Dekker's product: no fused multiply-add, which the libm
    lowering would turn into a call)."""
    c = b.mul(a, 134217729.0)
    ah = b.sub(c, b.sub(c, a))
    al = b.sub(a, ah)
    bh, bl = PIO2_SPLIT
    return b.add(b.add(b.add(b.sub(b.mul(ah, bh), p), b.mul(ah, bl)), b.mul(al, bh)), b.mul(al, bl))


def _two_sum(b: _B, a, c):
    s = b.add(a, c)
    bb = b.sub(s, a)
    return s, b.add(b.sub(a, b.sub(s, bb)), b.sub(c, bb))


def reduce_far(b: _BI, x):
    """(n mod 4, y0, y1) with x = n pi/2 + y0 + y1, for any finite x (Payne and Hanek): x = M 2^E with M < 2^53;
    192 bits of 2/pi from weight 2^(1-E) on give M 2^E 2/pi mod 4 as a 128-bit fixed-point number (2 integer
    bits; error below 2^-125, while a double's distance to a multiple of pi/2 is above 2^-62 relative to pi/2),
    whose fraction, centred in [-1/2, 1/2), times pi/2 in double-double is y0 + y1. Straight-line code: every
    lane computes it, the caller keeps it where the three-part reduction is not exact."""
    bits = b.iand(b.bits(x), (1 << 63) - 1)
    e = b.shr(bits, 52)
    m = b.ior(b.iand(bits, (1 << 52) - 1), 1 << 52)
    # the window starts at string position s0 = E + 62 (E = e - 1075, clamped: lanes it does not fit are not used)
    s0 = b.iadd(b.sel(b.icmp("slt", e, 1043), 1043, b.sel(b.icmp("sgt", e, 2047), 2047, e)), 62 - 1075)
    j = b.shr(s0, 6)
    sh = b.iand(s0, 63)
    t = [b.word(b.iadd(j, k)) for k in range(4)]

    def window(hi, lo):  # (hi << sh) | (lo >> (64 - sh)), sh = 0 included
        return b.ior(b.shl(hi, sh), b.shru(b.shru(lo, 1), b.isub(63, sh)))

    w0, w1, w2 = window(t[0], t[1]), window(t[1], t[2]), window(t[2], t[3])
    lo0, _ = b.mul_wide(m, w0)
    lo1, hi1 = b.mul_wide(m, w1)
    _, hi2 = b.mul_wide(m, w2)
    low = b.iadd(lo1, hi2)
    high = b.iadd(b.iadd(lo0, hi1), b.op("arith.extui", [b.ult(low, lo1)], b.i))
    frac = b.shl(high, 2)  # signed: the fraction centred in [-1/2, 1/2) in units of 2^-64
    n = b.iand(b.iadd(b.shru(high, 62), b.shru(frac, 63)), 3)
    top = b.mul(b.to_real(b.shr(frac, 32)), 2.0 ** -32)
    mid = b.mul(b.op("arith.uitofp", [b.iand(frac, 0xFFFFFFFF)], b.f), 2.0 ** -64)
    f0, f1 = _two_sum(b, top, mid)
    below = b.add(b.mul(b.op("arith.uitofp", [b.shru(low, 32)], b.f), 2.0 ** -94),
                  b.mul(b.op("arith.uitofp", [b.iand(low, 0xFFFFFFFF)], b.f), 2.0 ** -126))
    f0, f1 = _two_sum(b, f0, b.add(f1, below))
    p = b.mul(f0, PIO2_HI)
    err = _product_error(b, f0, p)
    tail = b.add(err, b.add(b.mul(f0, PIO2_LO), b.mul(f1, PIO2_HI)))
    y0 = b.add(p, tail)
    y1 = b.sub(tail, b.sub(y0, p))
    neg = b.icmp("slt", b.bits(x), 0)
    return b.sel(neg, b.iand(b.isub(4, n), 3), n), b.sel(neg, b.neg(y0), y0), b.sel(neg, b.neg(y1), y1)


def _trig(b: _B, x, fn: str, n, y0, y1):
    """sin, cos or tan of x from its reduction x = n pi/2 + y0 + y1 (fdlibm's kernels on [-pi/4, pi/4])."""
    s, c = sm._ksin(b, y0, y1), sm._kcos(b, y0, y1)
    if fn == "tan":
        odd = b.icmp("eq", b.iand(n, 1), 1)
        out = b.sel(odd, b.div(b.neg(c), s), b.div(s, c))
    else:
        pick = [s, c, b.neg(s), b.neg(c)] if fn == "sin" else [c, b.neg(s), b.neg(c), s]
        out = b.sel(b.icmp("eq", n, 1), pick[1], pick[0])
        out = b.sel(b.icmp("eq", n, 2), pick[2], out)
        out = b.sel(b.icmp("eq", n, 3), pick[3], out)
    tiny = b.fcmp("olt", b.absf(x), 7.450580596923828e-09)  # 2^-27: sin, tan x = x, cos x = 1 (-0 stays -0)
    out = b.sel(tiny, b.c(1.0) if fn == "cos" else x, out)
    bad = b.lor(b.fcmp("uno", x, x), b.fcmp("oeq", b.absf(x), float("inf")))
    return b.sel(bad, b.sub(x, x), out)


VFS = (2, 4, 8, 16)  # the vector widths the far functions come in (float64 lanes; float32 loops run float64 code)
MEMORY_NONE = ("#llvm.memory_effects<other = none, argMem = none, inaccessibleMem = none, errnoMem = none, "
               "targetMem0 = none, targetMem1 = none>")


def _far_name(fn: str) -> str:
    return f"__hawk_{fn}_far"


def _far_test(v: str, t: str, i1: str) -> str:
    """MLIR text: %far = finite and beyond TRIG_LIMIT, for the value %v of type t (f64 or a vector of it)."""
    splat = (lambda c: c) if t == "f64" else (lambda c: f"dense<{c}>")
    return (f"    %lim = arith.constant {splat(repr(sm.TRIG_LIMIT))} : {t}\n"
            f"    %inf = arith.constant {splat('0x7FF0000000000000')} : {t}\n"
            f"    %a = math.absf {v} : {t}\n"
            f"    %f1 = arith.cmpf ogt, %a, %lim : {t}\n"
            f"    %f2 = arith.cmpf olt, %a, %inf : {t}\n"
            f"    %far = arith.andi %f1, %f2 : {i1}\n")


def _far_functions(module: ir.Module, fn: str) -> None:
    """`fn`'s far function (x, y) -> y where |x| <= TRIG_LIMIT, else fn(x) through the Payne-Hanek reduction,
    and its vector forms, which call it one lane at a time only where some lane is far. The lane loop calls it
    on every lane with its three-part result; LLVM's vectorizer finds the vector forms by the scalar function's
    `vector-function-abi-variant` attribute, so the loop stays vectorized while the rare far lanes are redone."""
    name = _far_name(fn)
    if any(op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == name
           for op in module.body.operations):
        return
    variants = ",".join(f"_ZGV_LLVM_N{n}vv_{name}({name}_v{n})" for n in VFS)
    # the vector forms call {name}_lane, not {name}: calls of {name} would be turned back into the vector form
    text = (f'func.func @{name}(%x: f64, %y: f64) -> f64 attributes {{passthrough = ["noinline", "nounwind", '
            f'"willreturn", ["vector-function-abi-variant", "{variants}"]], memory_effects = {MEMORY_NONE}}} {{\n'
            f"    %r = func.call @{name}_lane(%x, %y) : (f64, f64) -> f64\n    return %r : f64\n  }}\n"
            f'  func.func @{name}_lane(%x: f64, %y: f64) -> f64 attributes {{passthrough = ["noinline", "nounwind", '
            f'"willreturn"], memory_effects = {MEMORY_NONE}}} {{\n'
            + _far_test("%x", "f64", "i1") +
            "    %r = scf.if %far -> f64 {\n      scf.yield %x : f64\n    } else {\n      scf.yield %y : f64\n    }\n"
            "    return %r : f64\n  }\n")
    for n in VFS:
        t = f"vector<{n}xf64>"
        lanes = "".join(f"      %x{k} = vector.extract %x[{k}] : f64 from {t}\n"
                        f"      %y{k} = vector.extract %y[{k}] : f64 from {t}\n"
                        f"      %z{k} = func.call @{name}_lane(%x{k}, %y{k}) : (f64, f64) -> f64\n"
                        f"      %v{k + 1} = vector.insert %z{k}, %v{k} [{k}] : f64 into {t}\n" for k in range(n))
        text += (f"  func.func @{name}_v{n}(%x: {t}, %y: {t}) -> {t} attributes {{passthrough = [\"nounwind\"], "
                 f"memory_effects = {MEMORY_NONE}}} {{\n" + _far_test("%x", t, f"vector<{n}xi1>") +
                 f"    %any = vector.reduction <or>, %far : vector<{n}xi1> into i1\n"
                 f"    %r = scf.if %any -> {t} {{\n      %v0 = arith.addf %y, %y : {t}\n" + lanes +
                 f"      scf.yield %v{n} : {t}\n    }} else {{\n      scf.yield %y : {t}\n    }}\n"
                 f"    return %r : {t}\n  }}\n")
    parsed = ir.Module.parse("module {\n  " + text + "}\n")
    funcs = list(parsed.body.operations)
    with ir.InsertionPoint(module.body):
        for op in funcs:
            ir.InsertionPoint.current.insert(op.operation.detach_from_parent())
    scalar = funcs[1]
    then_yield = scalar.regions[0].blocks[0].operations[6].regions[0].blocks[0].operations[0]
    with ir.InsertionPoint(then_yield), then_yield.location:
        b = _BI()
        x = scalar.regions[0].blocks[0].arguments[0]
        then_yield.operands[0] = _trig(b, x, fn, *reduce_far(b, x))
    for op in funcs[2:]:  # %v0 = y + y was a placeholder start: the lanes are inserted into y itself
        block = op.regions[0].blocks[0].operations[7].regions[0].blocks[0]
        first = block.operations[0]
        first.results[0].replace_all_uses_with(op.regions[0].blocks[0].arguments[1])
        first.erase()


def trig(b: _B, x, fn: str):
    """sin, cos or tan in the lane: the three-part reduction (exact for |x| <= TRIG_LIMIT), then the far function,
    which keeps that result except where |x| is beyond."""
    n, y0, y1, _ = sm._reduce(b, x)
    near = _trig(b, x, fn, n, y0, y1)
    return create("func.call", [x, near], [b.f], {"callee": ir.FlatSymbolRefAttr.get(_far_name(fn))}).result


def _f64(b: _B, fn: str, x):
    if fn in TRIG:
        return trig(b, x, fn)
    if fn == "exp":
        return sm.exp(b, x)
    if fn == "exp2":
        return sm.exp2(b, x)
    if fn == "log":
        return sm.log(b, x)
    if fn == "log2":
        return sm._scaled_log(b, x, sm.INV_LN2, sm.INV_LN2_TAIL)
    if fn == "log10":
        return sm._scaled_log(b, x, sm.INV_LN10, sm.INV_LN10_TAIL)
    return {"expm1": expm1, "tanh": tanh}[fn](b, x)


def expand_math(module: ir.Module) -> int:
    """Replace every FUNCS op on a float64 or float32 scalar in `module` by the code above; returns how many."""
    ops = []

    def visit(op):
        if op.name.startswith("math.") and op.name[5:] in FUNCS and len(op.results) == 1 \
                and isinstance(op.results[0].type, (ir.F64Type, ir.F32Type)):
            ops.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for fn in sorted({op.name[5:] for op in ops} & set(TRIG)):
        _table(module)
        _far_functions(module, fn)
    for op in ops:
        fn, t = op.name[5:], op.results[0].type
        with ir.InsertionPoint(op), op.location:
            b = _BI()
            x = op.operands[0]
            if isinstance(t, ir.F64Type):
                out = _f64(b, fn, x)
            else:
                out = b.op("arith.truncf", [_f64(b, fn, b.op("arith.extf", [x], b.f))], t)
        op.results[0].replace_all_uses_with(out)
        op.erase()
    return len(ops)
