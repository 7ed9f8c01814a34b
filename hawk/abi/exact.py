"""The exact accumulator's format as the runtime sizes it: words per accumulator, limbs, with no MLIR in it.

policy="ordered" keeps each exact sum in `words(dtype)` int64 words: LIMBS signed 32-bit-spaced limbs, the lowest
weighted 2**BASE (the dtype's smallest subnormal), then SPECIAL words counting +inf, -inf and NaN terms (two
spare). The launcher allocates accumulators from these counts; the compiler emits code for the same format
(hawk/passes/exact_emit.py), and hawk/exact.py holds the Python reference of deposit, combine and rounding.
"""

from __future__ import annotations

# dtype -> (significand bits incl. the hidden one, exponent field bits, BASE, LIMBS)
FORMATS = {"float64": (53, 11, -1074, 67), "float32": (24, 8, -149, 11)}
DIGIT = 32
SPECIAL = 5  # +inf, -inf, NaN counts and two spare words


def words(dtype: str) -> int:
    """int64 words of one accumulator for terms of this dtype."""
    return FORMATS[str(dtype)][3] + SPECIAL


def limbs(dtype: str) -> int:
    """The limbs of one accumulator (the words before the special counts)."""
    return FORMATS[str(dtype)][3]
