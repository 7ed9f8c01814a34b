"""The exact accumulator of policy="ordered" in MLIR: deposit a term, combine accumulators, round once.

The format is hawk/exact.py's (its Python functions are the reference these steps are tested against):
`words` int64 words per accumulator, limbs of 32-bit digits from 2**BASE upwards, then counts of +inf, -inf
and NaN terms. Deposits are integer adds only, so their order never matters: chunks, threads, workgroups and
targets may split the terms any way and the accumulator ends the same. Deposits are branch-free (a special
term adds 1 into its count word, a masked-out lane adds zeros) and run on every target; the rounding uses
only integer and float64 arithmetic and runs in the host finish.

In host code each step is a private function of the module, made once per module, format and buffer type and
called where it is needed (`noinline`, hidden): they sit on the rare paths (large terms, flushes, the finish's
rounding), and written inline at every site, they made an ordered kernel's code several times an "auto" one's,
and its compile time with it. Device code (inside a gpu.module) keeps them inline.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import func, memref, scf

from hawk.exact import FORMATS
from hawk.ir.build import create
from hawk.passes.host_emit import Emit

_EQ, _NE, _SLT, _SGT, _UGT = 0, 1, 2, 4, 8
_M32 = 0xFFFFFFFF


def fmt(t: ir.Type) -> str:
    """The hawk.exact format name of a float type."""
    return "float64" if isinstance(t, ir.F64Type) else "float32"


def words_of(t: ir.Type) -> int:
    return FORMATS[fmt(t)][3] + 5


def _host_module() -> ir.Operation | None:
    """The builtin.module the insertion point sits in when it is host code (None inside a gpu.module: device
    code keeps every step inline, as a Vulkan shader's logical pointers cannot be passed to calls)."""
    op = ir.InsertionPoint.current.block.owner
    while op is not None:
        name = op.name
        if name == "gpu.module":
            return None
        if name == "builtin.module":
            return op
        op = op.parent
    return None


def _dyn(t: ir.Type) -> ir.Type:
    """A 1-D memref type with its extent made dynamic (layout and memory space kept)."""
    mt = ir.MemRefType(t)
    return ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], mt.element_type, mt.layout, mt.memory_space)


def _outlined(e: Emit, name: str, args: list[ir.Value], results: list[ir.Type], body: Callable) -> list[ir.Value]:
    """Call `body(e, *args)` through a private function of the host module, made once per module and name (the
    steps of an exact accumulator are long and appear at many sites: inline, they were most of an ordered
    kernel's compile time); in device code, emit `body` inline. Memref arguments are passed with a dynamic
    extent."""
    module = _host_module()
    if module is None:
        out = body(e, *args)
        return [] if out is None else [out]
    args = [memref.cast(_dyn(a.type), a) if isinstance(a.type, ir.MemRefType) and a.type != _dyn(a.type) else a
            for a in args]
    types = [a.type for a in args]
    sym = name + "_" + "_".join(_mangle(t) for t in types)
    table = ir.SymbolTable(module)
    if sym not in table:
        with ir.InsertionPoint(module.regions[0].blocks[0]):  # (after the kernel's functions)
            f = func.FuncOp(sym, (types, results), visibility="private")
            f.attributes["passthrough"] = ir.ArrayAttr.get([ir.StringAttr.get("noinline")])
            f.attributes["visibility_"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)  # hidden
            block = f.add_entry_block()
            with ir.InsertionPoint(block):
                out = body(Emit(e.f), *block.arguments)
                func.ReturnOp([] if out is None else [out])
    call = func.CallOp(results, ir.FlatSymbolRefAttr.get(sym), args)
    return list(call.results)


def _mangle(t: ir.Type) -> str:
    if isinstance(t, ir.MemRefType):
        mt = ir.MemRefType(t)
        return "m" + _mangle(mt.element_type) + ("" if mt.memory_space is None else f"s{mt.memory_space}")
    return str(t).replace("<", "").replace(">", "").replace(" ", "")


def deposit(e: Emit, buf: ir.Value, base: ir.Value, x: ir.Value, live: ir.Value | None = None,
            atomic: bool = False) -> None:
    """Add the term x (a scalar of its float type) into the accumulator at word `base` of the i64 buffer `buf`;
    `live` (i1) false adds nothing; `atomic` uses atomic adds (an accumulator shared by threads)."""
    live = e.c(1, e.i1) if live is None else live  # (one helper for both: a select more per deposit)
    _outlined(e, "__hawk_deposit" + ("_atomic" if atomic else ""), [buf, base, x, live], [],
              lambda e, b, i, v, w: _deposit(e, b, i, v, w, atomic))


def _deposit(e: Emit, buf: ir.Value, base: ir.Value, x: ir.Value, live: ir.Value | None = None,
             atomic: bool = False) -> None:
    """Add the term x (a scalar of its float type) into the accumulator at word `base` of the i64 buffer `buf`;
    `live` (i1) false adds nothing; `atomic` uses atomic adds (an accumulator shared by threads)."""
    p_bits, e_bits, _, nl = FORMATS[fmt(x.type)]
    i64 = e.i64
    fb = p_bits - 1
    if isinstance(x.type, ir.F64Type):
        b = e.op("arith.bitcast", x, t=i64)
        sign_at = 63
    else:
        b = e.op("arith.extui", e.op("arith.bitcast", x, t=ir.IntegerType.get_signless(32)), t=i64)
        sign_at = 31

    def k64(v: int) -> ir.Value:
        return e.c(v, i64)

    emask = (1 << e_bits) - 1
    ef = e.op("arith.andi", e.op("arith.shrui", b, k64(fb)), k64(emask))
    frac = e.op("arith.andi", b, k64((1 << fb) - 1))
    neg = e.cmpi(_NE, e.op("arith.andi", e.op("arith.shrui", b, k64(sign_at)), k64(1)), k64(0))
    normal = e.cmpi(_NE, ef, k64(0))
    mant = e.op("arith.ori", frac, e.select(normal, k64(1 << fb), k64(0)))
    p = e.select(normal, e.op("arith.subi", ef, k64(1)), k64(0))
    k = e.op("arith.shrui", p, k64(5))
    s = e.op("arith.andi", p, k64(31))
    lo = e.op("arith.andi", e.op("arith.shli", mant, s), k64(_M32))
    t = e.op("arith.shrui", mant, e.op("arith.subi", k64(32), s))
    mid = e.op("arith.andi", t, k64(_M32))
    hi = e.op("arith.shrui", t, k64(32))
    special = e.cmpi(_EQ, ef, k64(emask))
    kind = e.select(e.cmpi(_NE, frac, k64(0)), k64(2), e.select(neg, k64(1), k64(0)))
    k = e.select(special, e.op("arith.addi", k64(nl), kind), k)
    flip = e.op("arith.andi", neg, e.op("arith.xori", special, e.c(1, e.i1)))
    pieces = []
    for j, v in enumerate((lo, mid, hi)):
        v = e.select(flip, e.op("arith.subi", k64(0), v), v)
        v = e.select(special, k64(1 if j == 0 else 0), v)
        if live is not None:
            v = e.select(live, v, k64(0))
        pieces.append(v)
    at = e.add_i(base, e.to_index(k))
    for j, v in enumerate(pieces):
        where = e.add_i(at, e.c(j)) if j else at
        if atomic:
            kind_attr = ir.IntegerAttr.get(i64, 1)  # arith::AtomicRMWKind::addi
            create("memref.atomic_rmw", [v, buf, where], [i64], {"kind": kind_attr})
        else:
            e.store(e.op("arith.addi", e.load(buf, where), v), buf, where)


def f32_parts(e: Emit, v: ir.Value) -> list[ir.Value]:
    """A float64 value that is a sum of float32 terms below 2**127 (so a multiple of 2**-149 with at most 53
    bits) as three float32 values whose exact sum it is: the nearest float32, the nearest to what is left, the
    rest (each subtraction exact). An infinity is itself and two zeros (inf - inf would be a NaN); a NaN gives
    NaNs. Scalars or vectors."""
    f32 = ir.F32Type.get()
    t = ir.VectorType.get(ir.VectorType(v.type).shape, f32) if isinstance(v.type, ir.VectorType) else f32
    zero = e.cf(0.0, v.type)
    out, rest = [], v
    for _ in range(3):
        part = e.op("arith.truncf", rest, t=t)
        out.append(part)
        wide = e.op("arith.extf", part, t=v.type)
        rest = e.select(e.cmpf(1, wide, rest), zero, e.op("arith.subf", rest, wide))  # oeq: all of it taken
    return out


def past_f32(e: Emit, v: ir.Value) -> ir.Value:
    """Per entry of a float64 scalar or vector: whether |v| >= 2**127 or v is NaN, where f32_parts would not be
    exact (a float32 kernel's float64 pairs and chain sums are kept below it)."""
    limit = e.cf(2.0 ** 127, v.type)
    return e.cmpf(10, e.abs(v), limit)  # uge


def deposit_as(e: Emit, buf: ir.Value, base: ir.Value, x: ir.Value, t: ir.Type, live: ir.Value | None = None,
               atomic: bool = False) -> None:
    """deposit() into an accumulator of type t's format: a float64 x into a float32 one as its f32_parts (x a
    sum of float32 terms below 2**127: a float32 kernel's float64 pairs and chain sums)."""
    for part in [x] if x.type == t else f32_parts(e, x):
        deposit(e, buf, base, part, live, atomic=atomic)


def normalize(e: Emit, buf: ir.Value, base: ir.Value, nl: int) -> None:
    """Propagate carries in place: limbs 0..nl-2 become digits in [0, 2**32), the top limb keeps the sign."""
    _outlined(e, f"__hawk_normalize{nl}", [buf, base], [], lambda e, b, i: _normalize(e, b, i, nl))


def _normalize(e: Emit, buf: ir.Value, base: ir.Value, nl: int) -> None:
    i64 = e.i64
    loop = scf.ForOp(e.c(0), e.c(nl - 1), e.c(1), [e.c(0, i64)])
    with ir.InsertionPoint(loop.body):
        at = e.add_i(base, loop.induction_variable)
        v = e.op("arith.addi", e.load(buf, at), loop.inner_iter_args[0])
        e.store(e.op("arith.andi", v, e.c(_M32, i64)), buf, at)
        scf.YieldOp([e.op("arith.shrsi", v, e.c(32, i64))])
    top = e.add_i(base, e.c(nl - 1))
    e.store(e.op("arith.addi", e.load(buf, top), loop.results[0]), buf, top)


def accumulate(e: Emit, dst: ir.Value, dbase: ir.Value, src: ir.Value, sbase: ir.Value, t: ir.Type) -> None:
    """dst += src for two accumulators of float type t (src is normalised first, so a total of up to 2**31
    accumulators keeps every limb exact)."""
    nl = FORMATS[fmt(t)][3]
    normalize(e, src, sbase, nl)
    loop = scf.ForOp(e.c(0), e.c(nl + 5), e.c(1), [])
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        a, b = e.add_i(dbase, i), e.add_i(sbase, i)
        e.store(e.op("arith.addi", e.load(dst, a), e.load(src, b)), dst, a)
        scf.YieldOp([])


def clear(e: Emit, buf: ir.Value, base: ir.Value, t: ir.Type) -> None:
    """Set an accumulator to zero."""
    loop = scf.ForOp(e.c(0), e.c(words_of(t)), e.c(1), [])
    with ir.InsertionPoint(loop.body):
        e.store(e.c(0, e.i64), buf, e.add_i(base, loop.induction_variable))
        scf.YieldOp([])


def _pow2(e: Emit, k: ir.Value) -> ir.Value:
    """2.0**k as a float64, for k (i64) in the normal range [-1022, 1023]."""
    bits = e.op("arith.shli", e.op("arith.addi", k, e.c(1023, e.i64)), e.c(52, e.i64))
    return e.op("arith.bitcast", bits, t=e.f64)


def round_acc(e: Emit, buf: ir.Value, base: ir.Value, t: ir.Type) -> ir.Value:
    """The accumulator's exact value rounded once to nearest-even in float type t (float32 directly, never
    through a float64 rounding): +0.0 for zero, inf of its sign beyond the largest finite value, NaN when a NaN
    or both infinities were counted. Leaves the accumulator normalised (and negated when negative)."""
    return _outlined(e, f"__hawk_round_{fmt(t)}", [buf, base], [t], lambda e, b, i: _round_acc(e, b, i, t))[0]


def _round_acc(e: Emit, buf: ir.Value, base: ir.Value, t: ir.Type) -> ir.Value:
    p_bits, _, exp_base, nl = FORMATS[fmt(t)]
    i64, f64 = e.i64, e.f64

    def k64(v: int) -> ir.Value:
        return e.c(v, i64)

    normalize(e, buf, base, nl)
    negv = e.cmpi(_SLT, e.load(buf, e.add_i(base, e.c(nl - 1))), k64(0))
    flip = scf.ForOp(e.c(0), e.c(nl), e.c(1), [])
    with ir.InsertionPoint(flip.body):
        at = e.add_i(base, flip.induction_variable)
        v = e.load(buf, at)
        e.store(e.select(negv, e.op("arith.subi", k64(0), v), v), buf, at)
        scf.YieldOp([])
    normalize(e, buf, base, nl)
    find = scf.ForOp(e.c(0), e.c(nl), e.c(1), [k64(-1)])
    with ir.InsertionPoint(find.body):
        i = find.induction_variable
        nz = e.cmpi(_NE, e.load(buf, e.add_i(base, i)), k64(0))
        scf.YieldOp([e.select(nz, e.to_i64(i), find.inner_iter_args[0])])
    h = find.results[0]
    zero = e.cmpi(_SLT, h, k64(0))

    def limb_at(d: int) -> ir.Value:  # limb h - d, or 0 below limb 0
        j = e.op("arith.subi", h, k64(d))
        ok = e.cmpi(_SGT, j, k64(-1))
        v = e.load(buf, e.add_i(base, e.to_index(e.select(ok, j, k64(0)))))
        return e.select(ok, v, k64(0))

    w2 = e.select(zero, k64(1), limb_at(0))
    w1, w0 = limb_at(1), limb_at(2)
    below = scf.ForOp(e.c(0), e.c(nl), e.c(1), [k64(0)])
    with ir.InsertionPoint(below.body):
        i = e.to_i64(below.induction_variable)
        under = e.cmpi(_SLT, i, e.op("arith.subi", h, k64(2)))
        v = e.load(buf, e.add_i(base, below.induction_variable))
        scf.YieldOp([e.op("arith.ori", below.inner_iter_args[0], e.select(under, v, k64(0)))])
    # bits of w2 (1..32), read off its float64 exponent (w2 < 2**32 converts exactly)
    w2f = e.op("arith.bitcast", e.op("arith.uitofp", w2, t=f64), t=i64)
    nbits = e.op("arith.subi", e.op("arith.shrui", w2f, k64(52)), k64(1022))
    top = e.op("arith.ori", e.op("arith.shli", w2, e.op("arith.subi", k64(64), nbits)),
               e.op("arith.ori", e.op("arith.shli", w1, e.op("arith.subi", k64(32), nbits)),
                    e.op("arith.shrui", w0, nbits)))
    lost = e.op("arith.andi", w0, e.op("arith.subi", e.op("arith.shli", k64(1), nbits), k64(1)))
    sticky = e.cmpi(_NE, e.op("arith.ori", below.results[0], lost), k64(0))
    msb = e.op("arith.addi", e.op("arith.shli", h, k64(5)), e.op("arith.subi", nbits, k64(1)))
    keep = e.op("arith.maxsi", e.op("arith.subi", msb, k64(p_bits - 1)), k64(0))
    r = e.op("arith.subi", k64(63), e.op("arith.subi", msb, keep))  # 64 - kept bits
    mant = e.op("arith.shrui", top, r)
    rem = e.op("arith.andi", top, e.op("arith.subi", e.op("arith.shli", k64(1), r), k64(1)))
    half = e.op("arith.shli", k64(1), e.op("arith.subi", r, k64(1)))
    odd = e.cmpi(_NE, e.op("arith.andi", mant, k64(1)), k64(0))
    tie = e.op("arith.andi", e.cmpi(_EQ, rem, half), e.op("arith.ori", sticky, odd))
    up = e.op("arith.ori", e.cmpi(_UGT, rem, half), tie)
    mant = e.op("arith.addi", mant, e.op("arith.extui", up, t=i64))
    scale = e.op("arith.addi", keep, k64(exp_base))
    tiny = e.cmpi(_SLT, scale, k64(-1000))  # float64 subnormals: scale in two exact steps
    v = e.op("arith.uitofp", mant, t=f64)
    v = e.op("arith.mulf", v, _pow2(e, e.select(tiny, e.op("arith.addi", scale, k64(200)), scale)))
    v = e.op("arith.mulf", v, e.select(tiny, e.cf(2.0 ** -200, f64), e.cf(1.0, f64)))
    v = e.select(negv, e.op("arith.negf", v), v)
    v = e.select(zero, e.cf(0.0, f64), v)
    pinf = e.cmpi(_SGT, e.load(buf, e.add_i(base, e.c(nl))), k64(0))
    ninf = e.cmpi(_SGT, e.load(buf, e.add_i(base, e.c(nl + 1))), k64(0))
    nan = e.op("arith.ori", e.cmpi(_SGT, e.load(buf, e.add_i(base, e.c(nl + 2))), k64(0)),
               e.op("arith.andi", pinf, ninf))
    v = e.select(pinf, e.cf(float("inf"), f64), v)
    v = e.select(ninf, e.cf(float("-inf"), f64), v)
    v = e.select(nan, e.cf(float("nan"), f64), v)
    return v if isinstance(t, ir.F64Type) else e.op("arith.truncf", v, t=t)
