"""Ordered chains whose exactness the CPU's inexact flag proves (host, x86-64: Spec.sae, Spec.mxcsr).

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
compares, widening, negation, abs) and whose reductions are all ordered sums over every lane kept in chains
(ordered_chains); `nested_eligible` one whose reductions are all ordered row totals in chains (nested_chains),
`tiles_eligible` one whose column totals walk in tiles (column_tiles). Every TwoSum of such a stage rounds
silently (Emit.silent, hawk/passes/sae_emit.py), a block's merge into the pairs among them. The chunk's start
clears the flag (`clear`: writing MXCSR costs tens of nanoseconds, so only when it is set), as do a retry and
a lost merge, which round on purpose. MXCSR is read by inline assembly that takes a value computed from every
chain's sums (and clobbers memory), so no chain step can be scheduled after the read. A flag that some other
code set in the window only sends a block to its retry: the result never depends on it.

Without AVX-512F (x86-64 with AVX and FMA: Spec.mxcsr; `loud`) no add can round silently, so no step may mean
to round. float32 chains need no change: their one add is exact or raises the flag. A float64 term is cut on
the block's grid 2**g instead of going through a Fast2Sum (grid_step): r = x * 2**-g rounded to an integer by
vroundpd with its inexact exception suppressed, the one rounding, which raises nothing; the high adds r and
the low x - r * 2**g (an FMA, exact). Five flops a group, where the range check's Fast2Sum took eight vector
ops; GRID_CHAINS chains, each a vector of highs and one of lows, fill AVX2's sixteen registers without a
spill. The grid g is the biased chains' (M's ulp, from the same guess), and the a-posteriori check makes the
chains exact over 38 binades or more under the largest term, where the range's floor allowed 37 at most. A
block's merge into the chunk's pairs rounds (plain TwoSums), so MXCSR is written back after it as the chunk's
start left it (`restore`: on an AMD EPYC, Zen 3, a few nanoseconds a block of 1024 lanes). Rows (nested_eligible)
take the same route; their pairs' TwoSums round too, so each row starts by restoring MXCSR. Column tiles keep the
range without AVX-512F. Ordered scatters read the same flags through save_clean, restore and raised
(grid_scatters.py).
"""

from __future__ import annotations

from mlir import ir

from hawk.ir.build import create
from hawk.passes import exact_emit, sae_emit

FLAG_CHAINS = 32  # chains of a block, side by side in four 512-bit vectors of float64
GRID_CHAINS = 16  # ... of float64 terms cut on a grid without AVX-512F: four 256-bit vectors of highs, four of lows
PE = 0x20  # MXCSR's precision (inexact) flag
IE = 0x01  # ... invalid-operation flag (inf - inf)
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
    """Whether this stage's ordered chains may rest on the inexact flag: the host on x86-64 (with AVX-512F, or with
    AVX and FMA: Spec.sae, Spec.mxcsr), every reduction an ordered sum or mean over every lane kept in chains,
    no sink, scan or fold, and a body whose every op is in _EXACT (hawk.reduce and hawk.cell hand values on)."""
    if cx.target != "host" or not (cx.sae or cx.mxcsr) or not cx.n_terms or cx.runs or cx.n_scans or cx.folds:
        return False
    if cx.lay.sinks or any(r.kept or r.policy != "ordered" for r in cx.lay.reductions):
        return False
    if not all(a.pairs for a in cx.full):
        return False
    return _rounds_nothing(body)


def begin(cx, eligible: bool) -> None:
    """Whether this stage's chains read the flag (cx.flagged, from one of the `*eligible` rules); if they do,
    the chunk's start clears the flag, and with AVX-512F (cx.sae) its TwoSums round silently (Emit.silent)."""
    cx.flagged = eligible
    cx.e.silent = eligible and cx.sae
    if loud(cx):
        save_clean(cx)
    elif eligible:
        clear(cx)


def save_clean(cx, mask: int = PE) -> None:
    """Clear the flags in `mask` (clear) and keep MXCSR as it then is, for restore. (A flag an earlier op of the
    thread left set, the invalid one after a NaN, say, would otherwise read as this chunk's.)"""
    clear(cx, mask)
    where, _ = _word(cx, "mxcsr-clean")
    _asm("stmxcsr ($0)", [where], "r,~{memory}")


def loud(cx) -> bool:
    """Whether this stage's chains read the flag without AVX-512's silent adds (x86-64 with AVX and FMA but not
    AVX-512F, or $HAWK_NO_SILENT_ADDS=1): float64 terms are cut on a grid (grid_step), and the TwoSums that merge a
    block into the chunk's pairs raise the flag, which `restore` clears after them."""
    return cx.flagged and not cx.sae


def chains(cx) -> int:
    """Chains of a flagged block: FLAG_CHAINS, but GRID_CHAINS for float64 terms cut on a grid without AVX-512F
    (two vectors a chain, high and low: 32 of them filled AVX2's sixteen registers)."""
    return GRID_CHAINS if loud(cx) and isinstance(cx.e.f, ir.F64Type) else FLAG_CHAINS


def grid(cx, bias: ir.Value, t: ir.Type | None = None) -> tuple[ir.Value, ir.Value]:
    """(2**-g, -2**g), as vectors of type `t` (like `bias` when None), for a block whose bias is M = 1.5 * 2**p (a
    float64 scalar, or a vector of equal entries: ordered_chains' guess, nested_chains' per row): the grid
    g = p - 52 (M's ulp: the grid a biased chain's Fast2Sum rounds to), raised to -1022 so that both are normal
    (p keeps 2**-g within float64's range: ordered_chains.P_RANGE, nested_chains.F64_P). Built from one entry and
    broadcast: one register each, where one per vector of chains spilled."""
    e = cx.e
    m = bias if not isinstance(bias.type, ir.VectorType) else create(
        "vector.extract", [bias], [e.f64], {"static_position": ir.DenseI64ArrayAttr.get([0]),
                                             "dynamic_position": []}).result
    field = e.op("arith.andi", e.op("arith.shrui", e.op("arith.bitcast", m, t=e.i64), e.c(52, e.i64)),
                 e.c(0x7FF, e.i64))
    g = e.op("arith.maxsi", e.op("arith.subi", field, e.c(52, e.i64)), e.c(1, e.i64))  # (biased: g + 1023)
    inv, _, neg = powers(cx, g)
    return tuple(create("vector.broadcast", [v], [t or bias.type]).result for v in (inv, neg))


def powers(cx, g: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(2**-g, 2**g, -2**g), float64 scalars, for g given biased (g + 1023, an i64 in [1, 2045]: all three
    normal), built from their bits."""
    e = cx.e
    inv = e.op("arith.shli", e.op("arith.subi", e.c(2046, e.i64), g), e.c(52, e.i64))
    pos = e.op("arith.shli", g, e.c(52, e.i64))
    neg = e.op("arith.ori", pos, e.c(-(1 << 63), e.i64))
    return tuple(e.op("arith.bitcast", v, t=e.f64) for v in (inv, pos, neg))


def cut(cx, x: ir.Value, inv: ir.Value, neg: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Terms x (float64, scalar or vector) cut on the grid 2**g (`inv`, `neg`: 2**-g and -2**g, like x):
    (r, x - r * 2**g) with r = x * 2**-g rounded to an integer without raising the flag (roundeven, which x86
    does with its inexact exception suppressed: vroundpd $8, never a libm call). The scaling and the FMA are
    exact unless they raise the flag."""
    e = cx.e
    r = create("llvm.intr.roundeven", [e.op("arith.mulf", x, inv)], [x.type]).result
    return r, create("llvm.intr.fma", [r, neg, x], [x.type]).result


def grid_high(cx, high: ir.Value, key) -> ir.Value:
    """A block's grid highs (grid_step's integers) as the values they stand for: times 2**g, the grid at
    cx.grids[key] (exact: a power of two, normal results)."""
    return cx.e.op("arith.mulf", high, cx.e.op("arith.negf", cx.grids[key][1]))


def grid_step(cx, hi: ir.Value, lo: ir.Value, x: ir.Value, inv: ir.Value, neg: ir.Value) -> tuple[ir.Value, ir.Value]:
    """float64 terms x into a chain's (high, low) where no step means to round, on the block's grid 2**g (`inv`
    and `neg`: 2**-g and -2**g, from grid): r = x * 2**-g rounded to an integer without raising the flag
    (roundeven, which x86 does with its inexact exception suppressed: vroundpd $8), which the high adds up, and
    x - r * 2**g (one FMA: exact, the low bits of x), which the low adds up. The scaling by a power of two is
    exact unless it overflows or leaves the normal range, which raises the flag. While no add rounds,
    2**g * high + low is exactly the chain's terms, whatever their magnitudes; when one does, the flag is raised.
    With g set from the largest term of an earlier block (2**43 times its grid, at most), 64 terms' integers stay
    within 2**49 and their remainders (each at most half the grid) within 2**(g+5), which the low holds exactly
    when every term is a multiple of 2**(g+5-53): 38 binades under the largest term. An inf or NaN term makes
    the low NaN."""
    r, rest = cut(cx, x, inv, neg)
    return cx.e.add(hi, r), cx.e.add(lo, rest)


def nested_eligible(cx, body: ir.Block, kept: list, chained: list) -> bool:
    """The same for a stage under the nested driver (nested_chains): rows of chains (`chained` not empty), every
    reduction an ordered sum or mean kept in pairs (reduce_kept.nested_pairs) over the trailing axes, nothing
    over every lane, no sink, scan or fold, and a body that rounds nothing."""
    from hawk.passes.lower import reduce_kept  # (it builds on lower's modules)

    if cx.target != "host" or not (cx.sae or cx.mxcsr) or not chained or cx.full or cx.runs or cx.n_scans \
            or cx.folds:
        return False
    if cx.lay.sinks or not all(r in kept and reduce_kept.nested_pairs(r) for r in cx.lay.reductions):
        return False
    return _rounds_nothing(body)


def tiles_eligible(cx, body: ir.Block) -> bool:
    """The same for a stage whose column sums walk in tiles (column_tiles.wanted: every reduction an ordered kept
    total in the column shape's pairs, no loop state, a body that writes nothing): the host on x86-64 with
    AVX-512F and a body that rounds nothing."""
    return cx.target == "host" and cx.sae and not cx.folds and _rounds_nothing(body)


def _rounds_nothing(body: ir.Block) -> bool:
    """Whether every op of the body (nested ones too) is in _EXACT."""
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


# ---- the flag ----------------------------------------------------------------------------------------------

def _word(cx, tag: str = "mxcsr") -> tuple[ir.Value, ir.Value]:
    """A 4-byte buffer that MXCSR is stored through: (its address as an i64, the asm's operand; the buffer)."""
    e = cx.e
    buf = cx.temp(1, ir.IntegerType.get_signless(32), tag=tag)
    return e.op("arith.index_cast", e.address(buf), t=e.i64), buf


def _asm(text: str, operands: list[ir.Value], constraints: str) -> None:
    create("llvm.inline_asm", operands, [], {"asm_string": ir.StringAttr.get(text),
                                             "constraints": ir.StringAttr.get(constraints),
                                             "has_side_effects": ir.UnitAttr.get()})


def fold(cx, v: ir.Value) -> ir.Value:
    """A block's float64 vector of chain sums added into 8 by plain adds (sae_emit.fold: checked by the flag like
    every chain step), and on to 4 (one 256-bit vector) without AVX-512F: then its merge into the chunk's pairs
    runs on one register instead of two."""
    v = sae_emit.fold(cx.e, v)
    while loud(cx) and ir.VectorType(v.type).shape[0] > 4:
        n = ir.VectorType(v.type).shape[0] // 2
        v = cx.e.add(cx.e.shuffle(v, v, list(range(n))), cx.e.shuffle(v, v, list(range(n, 2 * n))))
    return v


def lost(cx, sums: list[ir.Value], out: ir.Value | None, checked: list[ir.Value] | None = None) -> ir.Value:
    """Whether a block's chains lost a bit (an i1): MXCSR's inexact flag is set, or a chain's sum in `sums`
    (float64 vectors or scalars: biased chains' high less M and low, grid chains' high times 2**g and low,
    windowed chains' sums) is not finite, or, in a float32 kernel, reaches 2**127 (the values the block hands
    on, to its pairs or as float32 parts to an exact accumulator, must be: exact_emit.past_f32; without a window
    nothing else bounds them), or `out` (a vector of i1, or None) says so. The flag is read after every one of
    `sums` is computed: the read's asm takes their bits ORed together. `checked`: the sums held against
    infinities and NaNs (all of them when None)."""
    e = cx.e
    flag = None
    alike: dict = {}  # (the sums' bits ORed by shape first, then each shape's vector reduced)
    for v in sums:
        vector = isinstance(v.type, ir.VectorType)
        b = e.op("arith.bitcast", v, t=ir.VectorType.get(ir.VectorType(v.type).shape, e.i64) if vector else e.i64)
        alike[str(b.type)] = e.op("arith.ori", alike[str(b.type)], b) if str(b.type) in alike else b
    dep = None
    for b in alike.values():
        if isinstance(b.type, ir.VectorType):
            b = create("vector.reduction", [b], [e.i64], {"kind": ir.Attribute.parse("#vector.kind<or>")}).result
        dep = b if dep is None else e.op("arith.ori", dep, b)
    for v in sums if checked is None else checked:
        vector = isinstance(v.type, ir.VectorType)
        if isinstance(e.f, ir.F32Type):  # (|v| >= 2**127, an inf or a NaN)
            nan = exact_emit.past_f32(e, v)
        else:  # (inf - inf and NaN: not finite)
            nan = e.cmpf(_UNE, e.op("arith.subf", v, v), e.cf(0.0, v.type))
        nan = e.any_of(nan) if vector else nan
        flag = nan if flag is None else e.op("arith.ori", flag, nan)
    where, buf = _word(cx)
    _asm("stmxcsr ($0)", [where, dep], "r,r,~{memory}")
    word = e.load(buf, e.c(0))
    flag = e.op("arith.ori", flag, e.cmpi(1, e.op("arith.andi", word, e.c(PE, word.type)), e.c(0, word.type)))
    return flag if out is None else e.op("arith.ori", flag, e.any_of(out))


def restore(cx) -> None:
    """MXCSR as the chunk's start left it, the inexact flag clear (begin saved it), written without reading it
    first: after a merge whose TwoSums rounded (loud), when the flag is always set, a read and a test less than
    clear's."""
    where, _ = _word(cx, "mxcsr-clean")
    _asm("ldmxcsr ($0)", [where], "r,~{memory}")


def raised(cx, mask: int) -> ir.Value:
    """Whether any of MXCSR's flags in `mask` is set (an i1). The read clobbers memory: every store before it
    (and so the flops whose results they store) stays before it."""
    e = cx.e
    where, buf = _word(cx)
    _asm("stmxcsr ($0)", [where], "r,~{memory}")
    word = e.load(buf, e.c(0))
    return e.cmpi(1, e.op("arith.andi", word, e.c(mask, word.type)), e.c(0, word.type))


def clear(cx, mask: int = PE) -> None:
    """Clear MXCSR's flags in `mask` (the inexact flag) if any is set (a write of MXCSR is slow: skipped when there
    is nothing to clear). Memory is clobbered, so the stores of what rounded before it stay before it."""
    where, _ = _word(cx)
    _asm(f"stmxcsr ($0)\n\ttestl $${mask}, ($0)\n\tjz 1f\n\tandl $${~mask}, ($0)\n\tldmxcsr ($0)\n1:", [where],
         "r,~{memory},~{flags}")
