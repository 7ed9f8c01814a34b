"""Integer `//` and `%` by a constant divisor: the cheaper forms (an arithmetic shift and a mask for a power of two,
an unsigned division of x, or of ~x where x < 0, for other positive constants; the floor division for a negative
one) give NumPy's floor_divide and remainder bit for bit on edge values (INT64_MIN, -1, 0, 1, INT64_MAX,
multiples of the divisor and their neighbours, the multiples nearest the int64 ends) and on random int64s, on
every target (host, spirv on lavapipe; tests/test_gpu_compile.py builds these kernels for nvvm and rocdl).
See docs/semantics.md, "Arithmetic that matches NumPy"."""

from __future__ import annotations

import numpy as np
from conftest import bt_run_on

import hawk
import hawk.math as m
from hawk import Index, Mutable, Vector

LO, HI = -(2**63), 2**63 - 1
DIVISORS = (1, 2, 3, 6, 7, 16, 1 << 20, 2**62, HI, -3, -16, -(2**62))


@hawk.kernel
def idc_positive(k: Index, q1: Mutable[Index], r1: Mutable[Index], q2: Mutable[Index], r2: Mutable[Index],
                 q3: Mutable[Index], r3: Mutable[Index], q7: Mutable[Index], r7: Mutable[Index],
                 q16: Mutable[Index], r16: Mutable[Index], q20: Mutable[Index], r20: Mutable[Index],
                 q62: Mutable[Index], r62: Mutable[Index], q6: Mutable[Index], r6: Mutable[Index],
                 qmax: Mutable[Index], rmax: Mutable[Index]):
    q1 = k // 1
    r1 = k % 1
    q2 = k // 2
    r2 = k % 2
    q3 = k // 3
    r3 = k % 3
    q7 = k // 7
    r7 = k % 7
    q16 = k // 16
    r16 = k % 16
    q20 = k // 2**20
    r20 = k % 2**20
    q62 = k // 2**62
    r62 = k % 2**62
    q6 = k // 6
    r6 = k % 6
    qmax = k // 9223372036854775807
    rmax = k % 9223372036854775807


@hawk.kernel
def idc_negative(k: Index, qn3: Mutable[Index], rn3: Mutable[Index], qn16: Mutable[Index], rn16: Mutable[Index],
                 qn62: Mutable[Index], rn62: Mutable[Index]):
    qn3 = k // -3
    rn3 = k % -3
    qn16 = k // -16
    rn16 = k % -16
    qn62 = k // -(2**62)
    rn62 = k % -(2**62)


@hawk.kernel
def idc_chain(k: Index, lo: Index, d: Mutable[Index], e: Mutable[Index]):
    # the radix sort's digit of a shifted key, and a chain mixing quotients and remainders of several divisors
    d = (k - lo) // 3 % 16
    e = (k // 7 + k % 1000003) // 2**40 - k % 16 * 5 + k // -7


@hawk.kernel
def idc_vector(v: Vector[3], a: Mutable[Vector[3]], b: Mutable[Vector[3]]):
    a = m.to_float(m.to_int(v) // 3) + m.to_float(m.to_int(v) % 16) * 1000.0
    b = m.to_float(m.to_int(v) // 8) + m.to_float(m.to_int(v) % 7) * 1000.0


_NAMES = {1: "1", 2: "2", 3: "3", 6: "6", 7: "7", 16: "16", 1 << 20: "20", 2**62: "62", HI: "max", -3: "n3",
          -16: "n16", -(2**62): "n62"}


def edge_values(seed: int = 7) -> np.ndarray:
    """The int64 ends and their neighbours, small values, each divisor's multiples (near 0, near the ends, and a
    few in between) and their neighbours, then random values over the whole int64 range and near zero."""
    vals = {LO, LO + 1, LO + 2, -2, -1, 0, 1, 2, HI - 1, HI}
    for d in {abs(d) for d in DIVISORS}:
        for mult in (0, 1, 2, 3, 5, -1, -2, -3, -5, 12345, -12345, LO // d, LO // d + 1, HI // d, HI // d - 1,
                     (LO // d) // 2, (HI // d) // 3):
            for e in (-2, -1, 0, 1, 2):
                v = mult * d + e
                if LO <= v <= HI:
                    vals.add(v)
    rng = np.random.default_rng(seed)
    edges = np.array(sorted(vals), dtype=np.int64)
    wide = rng.integers(LO, HI, 20000, dtype=np.int64, endpoint=True)
    small = rng.integers(-5000, 5000, 4000, dtype=np.int64)
    return np.concatenate([edges, wide, small])


def _check(got: dict, k: np.ndarray, divisors, what: str) -> None:
    for d in divisors:
        for op, name, fn in (("//", "q", np.floor_divide), ("%", "r", np.remainder)):
            want = fn(k, np.int64(d))
            g = np.asarray(got[name + _NAMES[d]])
            assert g.dtype == np.int64, (what, d, g.dtype)
            bad = np.flatnonzero(g != want)
            assert bad.size == 0, (f"{what}: k {op} {d} differs from NumPy at {bad.size} place(s)",
                                   k[bad[:4]].tolist(), g[bad[:4]].tolist(), want[bad[:4]].tolist())


def test_floor_division_and_remainder_by_positive_constants_match_numpy(target):
    k = edge_values()
    got = bt_run_on(target, idc_positive, k=k)
    _check(got, k, [d for d in DIVISORS if d > 0], f"idc_positive on {target}")


def test_floor_division_and_remainder_by_negative_constants_match_numpy(target):
    k = edge_values(8)
    got = bt_run_on(target, idc_negative, k=k)
    _check(got, k, [d for d in DIVISORS if d < 0], f"idc_negative on {target}")


def test_chained_constant_divisions_match_numpy(target):
    k = edge_values(9)
    lo = np.random.default_rng(10).integers(-(2**40), 2**40, k.size)
    got = bt_run_on(target, idc_chain, k=k, lo=lo)
    with np.errstate(over="ignore"):
        want_d = (k - lo) // 3 % 16
        want_e = (k // 7 + k % 1000003) // 2**40 - k % 16 * 5 + k // -7
    np.testing.assert_array_equal(got["d"], want_d)
    np.testing.assert_array_equal(got["e"], want_e)


def test_constant_divisions_of_integer_vector_values(target):
    rng = np.random.default_rng(11)
    v = rng.integers(-10**6, 10**6, (3, 300)).astype(np.float64)
    v[:, :5] = [[-17.0, -16.0, -1.0, 0.0, 15.0]] * 3
    got = bt_run_on(target, idc_vector, v=v)
    i = v.astype(np.int64)
    np.testing.assert_array_equal(got["a"], (i // 3) + (i % 16) * 1000.0)
    np.testing.assert_array_equal(got["b"], (i // 8) + (i % 7) * 1000.0)


def test_the_cheaper_forms_are_what_the_kernel_holds():
    """A power of two becomes a shift and a mask, another positive constant an unsigned division, a negative one
    keeps the floor division; none of the positive ones needs arith.floordivsi."""
    text = idc_positive.mlir()
    assert "arith.floordivsi" not in text and "arith.divsi" not in text, text
    assert text.count("arith.shrsi") >= 4 and "arith.andi" in text and "arith.divui" in text, text
    assert "arith.floordivsi" in idc_negative.mlir()
