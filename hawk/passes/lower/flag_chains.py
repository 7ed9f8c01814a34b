"""Ordered chains whose exactness the CPU's inexact flag proves (host, x86-64 with AVX-512F: Spec.sae).

ordered_chains proves a block's chain steps exact before the fact: every term must lie in a range that makes
them exact, and keeping the range (an integer max and min of the terms' bits) costs four vector ops a group
beside the chains' four flops. On a CPU whose adds can round without raising any flag (AVX-512's embedded
rounding, {rn-sae}) the steps can prove it themselves: the one add that is meant to round, the Fast2Sum's
`s = high + x`, rounds silently, and every other step (`s - high`, `x - (s - high)`, the low's add; a float32
chain's one add) raises MXCSR's sticky inexact flag exactly when it rounds. While none of them rounds,
`s + (x - (s - high)) = high + x` and the low's adds are exact, so by induction over a block's steps its highs
and lows hold M plus its terms exactly, whatever their magnitudes. A block whose flag is set at its end (or
whose sums are not finite) retries as a block out of range does. A group then costs the four flops (float32:
widen and add) and FLAG_CHAINS chains (four vectors) hide the adds' latency.

The flag is the thread's, so it proves something only where nothing else rounds between the chunk's start
and a block's end: `eligible` takes a stage whose lane body does no floating-point arithmetic (loads, selects,
compares, widening, negation, abs) and whose reductions are all ordered sums over every lane kept in chains;
a block's merge into the chunk's pairs rounds silently too (`two_sum`). The chunk's start clears the flag
(`clear`: writing MXCSR costs tens of nanoseconds, so only when it is set), as do a retry and a lost merge,
which round on purpose. MXCSR is read by inline assembly that takes a value computed from every chain's sums
(and clobbers memory), so no chain step can be scheduled after the read. A flag that some other code set in
the window only sends a block to its retry: the result never depends on it.
"""

from __future__ import annotations

from mlir import ir

from hawk.ir.build import create

FLAG_CHAINS = 32  # chains of a block, side by side in four 512-bit vectors of float64
PE = 0x20  # MXCSR's precision (inexact) flag
_SAE = 8  # the rounding operand of AVX-512's arithmetic intrinsics: to nearest, suppress all exceptions
_UNE = 13  # arith.cmpf "une"
# the body's ops that never round (nor, but for a signalling NaN, raise any flag)
_EXACT = frozenset({
    "hawk.lane", "hawk.extent", "hawk.load", "hawk.param", "hawk.at", "hawk.cut_read", "hawk.reduce", "hawk.cell",
    "arith.constant", "arith.select", "arith.cmpf", "arith.cmpi", "arith.negf", "arith.extf", "arith.bitcast",
    "arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.divui", "arith.remsi", "arith.remui",
    "arith.andi", "arith.ori", "arith.xori", "arith.shli", "arith.shrsi", "arith.shrui", "arith.index_cast",
    "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci", "arith.maxsi", "arith.minsi", "arith.maxui",
    "arith.minui", "arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf", "math.absf",
    "math.copysign", "scf.if", "scf.for", "scf.yield", "vector.extract", "vector.insert", "vector.from_elements",
    "vector.broadcast", "vector.shape_cast"})


def eligible(cx, body: ir.Block) -> bool:
    """Whether this stage's ordered chains may rest on the inexact flag: the host on x86-64 with AVX-512F, every
    reduction an ordered sum or mean over every lane kept in chains, no sink, scan or fold, and a body whose
    every op is in _EXACT (hawk.reduce and hawk.cell hand values on)."""
    if cx.target != "host" or not cx.sae or not cx.n_terms or cx.runs or cx.n_scans or cx.folds:
        return False
    if cx.lay.sinks or any(r.kept or r.policy != "ordered" for r in cx.lay.reductions):
        return False
    if not all(a.pairs for a in cx.full):
        return False
    found = []

    def visit(op):
        if op.name not in _EXACT:
            found.append(op.name)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    for op in body.operations:
        if op.name != "func.return":
            op.operation.walk(visit)
    return not found


# ---- rounding without flags --------------------------------------------------------------------------------

def _pieces(e, v: ir.Value) -> list[ir.Value]:
    n = ir.VectorType(v.type).shape[0]
    return [v] if n == 8 else [e.shuffle(v, v, list(range(k, k + 8))) for k in range(0, n, 8)]


def _joined(e, parts: list[ir.Value]) -> ir.Value:
    while len(parts) > 1:
        n = ir.VectorType(parts[0].type).shape[0]
        parts = [e.shuffle(a, b, list(range(2 * n))) for a, b in zip(parts[::2], parts[1::2], strict=True)]
    return parts[0]


def _silent(e, name: str, a: ir.Value, b: ir.Value) -> ir.Value:
    """a + b (name "add") or a - b ("sub") rounded to nearest without raising any flag: float64 vectors of a
    multiple of 8 entries, by AVX-512's intrinsic with embedded rounding, 8 at a time."""
    rounding = e.c(_SAE, ir.IntegerType.get_signless(32))
    piece = ir.VectorType.get([8], e.f64)
    out = [create("llvm.call_intrinsic", [x, y, rounding], [piece],
                  {"intrin": ir.StringAttr.get(f"llvm.x86.avx512.{name}.pd.512"),
                   "op_bundle_sizes": ir.DenseI32ArrayAttr.get([]),
                   "operandSegmentSizes": ir.DenseI32ArrayAttr.get([3, 0])}).result
           for x, y in zip(_pieces(e, a), _pieces(e, b), strict=True)]
    return _joined(e, out)


def fold(e, v: ir.Value) -> ir.Value:
    """A float64 vector of 8k entries added into 8 (entry j + 8i into j) by plain adds, checked by the flag like
    the chains' own steps: a block's 32 chain sums become 8 before they go into the chunk's pairs, so the
    merge's silent TwoSums run on one vector instead of four."""
    parts = _pieces(e, v)
    while len(parts) > 1:
        parts = [e.add(a, b) for a, b in zip(parts[::2], parts[1::2], strict=True)]
    return parts[0]


def add(e, a: ir.Value, b: ir.Value) -> ir.Value:
    """fl(a + b) without raising the inexact flag (the biased chains' Fast2Sum: ordered_chains._biased_step)."""
    return _silent(e, "add", a, b)


def two_sum(e, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Emit.two_sum with every step rounded silently (float64 vectors of a multiple of 8 entries): the same
    values, and the flag left as it was."""
    s = _silent(e, "add", a, b)
    bb = _silent(e, "sub", s, a)
    err = _silent(e, "add", _silent(e, "sub", a, _silent(e, "sub", s, bb)), _silent(e, "sub", b, bb))
    return s, err


# ---- the flag ----------------------------------------------------------------------------------------------

def _word(cx) -> tuple[ir.Value, ir.Value]:
    """A 4-byte buffer that MXCSR is stored through: (its address as an i64, the asm's operand; the buffer)."""
    e = cx.e
    buf = cx.temp(1, ir.IntegerType.get_signless(32), tag="mxcsr")
    return e.op("arith.index_cast", e.address(buf), t=e.i64), buf


def _asm(text: str, operands: list[ir.Value], constraints: str) -> None:
    create("llvm.inline_asm", operands, [], {"asm_string": ir.StringAttr.get(text),
                                             "constraints": ir.StringAttr.get(constraints),
                                             "has_side_effects": ir.UnitAttr.get()})


def lost(cx, sums: list[ir.Value], out: ir.Value | None) -> ir.Value:
    """Whether a block's chains lost a bit (an i1): MXCSR's inexact flag is set, or a chain's sum in `sums`
    (float64 vectors: biased chains' high less M and low, windowed chains' sums) is not finite, or `out` (a
    vector of i1, or None) says so. The flag is read after every one of `sums` is computed: the read's asm
    takes their bits ORed together."""
    e = cx.e
    bits = bad = zero = None
    for v in sums:
        t = ir.VectorType.get(ir.VectorType(v.type).shape, e.i64)
        b = e.op("arith.bitcast", v, t=t)
        bits = b if bits is None else e.op("arith.ori", bits, b)
        if zero is None:
            zero = e.splat(0.0, v.type)
        nan = e.cmpf(_UNE, e.op("arith.subf", v, v), zero)  # (inf - inf and NaN: not finite)
        bad = nan if bad is None else e.op("arith.ori", bad, nan)
    dep = create("vector.reduction", [bits], [e.i64], {"kind": ir.Attribute.parse("#vector.kind<or>")}).result
    where, buf = _word(cx)
    _asm("stmxcsr ($0)", [where, dep], "r,r,~{memory}")
    word = e.load(buf, e.c(0))
    flag = e.cmpi(1, e.op("arith.andi", word, e.c(PE, word.type)), e.c(0, word.type))  # ne
    flag = e.op("arith.ori", flag, e.any_of(bad))
    return flag if out is None else e.op("arith.ori", flag, e.any_of(out))


def clear(cx) -> None:
    """Clear MXCSR's inexact flag if it is set (a write of MXCSR is slow: skipped when there is nothing to
    clear). Memory is clobbered, so the stores of what rounded before it stay before it."""
    where, _ = _word(cx)
    _asm("stmxcsr ($0)\n\ttestl $$32, ($0)\n\tjz 1f\n\tandl $$-33, ($0)\n\tldmxcsr ($0)\n1:", [where],
         "r,~{memory},~{flags}")
