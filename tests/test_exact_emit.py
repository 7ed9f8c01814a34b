"""The compiled exact accumulator (hawk/passes/exact_emit.py) against its Python reference (hawk/exact.py).

Deposit, combine and round are compiled on their own (no kernel around them) and run on adversarial terms:
the compiled accumulator must hold the very integers the reference holds, and the rounded value must equal the
exact sum rounded once (a Fraction), for float64 and float32, including ties, subnormals, overflow and the
special values.
"""

import ctypes
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from hawk import exact

mlir = pytest.importorskip("mlir")
from mlir import ir, passmanager  # noqa: E402
from mlir.dialects import func, scf  # noqa: E402
from mlir.execution_engine import ExecutionEngine  # noqa: E402
from mlir.runtime import get_ranked_memref_descriptor  # noqa: E402

from hawk.passes import exact_emit  # noqa: E402
from hawk.passes.host_emit import Emit  # noqa: E402
from hawk.passes.pipeline import LLVM_PIPELINE  # noqa: E402

_ENGINES: dict = {}


def _engine(dtype: str):
    """deposit_all(terms, live, acc): deposits every live term into accumulator 0 (odd lanes into accumulator 1,
    then combined into 0, so combine is exercised); round(acc, out): out[0] = the rounded value."""
    if dtype in _ENGINES:
        return _ENGINES[dtype]
    ctx = ir.Context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        ft = ir.F64Type.get() if dtype == "float64" else ir.F32Type.get()
        e = Emit(ft)
        dyn = ir.ShapedType.get_dynamic_size()
        fbuf = ir.MemRefType.get([dyn], ft)
        ibuf = ir.MemRefType.get([dyn], e.i64)
        w = exact.words(dtype)
        with ir.InsertionPoint(module.body):
            dep = func.FuncOp("deposit_all", ([fbuf, ibuf, ibuf], []))
            dep.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            with ir.InsertionPoint(dep.add_entry_block()):
                xs, live, acc = dep.arguments
                loop = scf.ForOp(e.c(0), e.dim(xs), e.c(1), [])
                with ir.InsertionPoint(loop.body):
                    i = loop.induction_variable
                    which = e.mul_i(e.op("arith.remui", i, e.c(2)), e.c(w))
                    on = e.cmpi(1, e.load(live, i), e.c(0, e.i64))
                    exact_emit.deposit(e, acc, which, e.load(xs, i), on)
                    scf.YieldOp([])
                exact_emit.accumulate(e, acc, e.c(0), acc, e.c(w), ft)
                func.ReturnOp([])
            rnd = func.FuncOp("round", ([ibuf, fbuf], []))
            rnd.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            with ir.InsertionPoint(rnd.add_entry_block()):
                acc, out = rnd.arguments
                e.store(exact_emit.round_acc(e, acc, e.c(0), ft), out, e.c(0))
                func.ReturnOp([])
        assert module.operation.verify()
        passmanager.PassManager.parse(LLVM_PIPELINE).run(module.operation)
        eng = ExecutionEngine(module, opt_level=2)
    _ENGINES[dtype] = (ctx, eng)
    return _ENGINES[dtype]


def _ptr(a: np.ndarray):
    return ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(a)))


def run_exact(terms, dtype: str = "float64", live=None) -> tuple[float, np.ndarray]:
    _, eng = _engine(dtype)
    xs = np.ascontiguousarray(np.asarray(terms, dtype=dtype).reshape(-1))
    on = np.ones(xs.size, np.int64) if live is None else np.asarray(live, np.int64)
    acc = np.zeros(2 * exact.words(dtype), np.int64)
    eng.invoke("deposit_all", _ptr(xs), _ptr(on), _ptr(acc))
    got = acc[:exact.words(dtype)].copy()
    out = np.zeros(1, dtype=dtype)
    eng.invoke("round", _ptr(acc), _ptr(out))
    return float(out[0]), got


def reference(terms, dtype: str, live=None) -> tuple[float, list[int]]:
    acc = [0] * exact.words(dtype)
    for k, x in enumerate(terms):
        if live is None or live[k]:
            exact.deposit(acc, float(x), dtype)
    return exact.round_exact(acc, dtype), acc


def _same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _normalised(acc, dtype: str) -> list[int]:
    """The accumulator's value as (limb integer, special counts): what combine may not change."""
    nl = exact.limbs(dtype)
    return [sum(int(v) << (32 * k) for k, v in enumerate(acc[:nl]))] + [int(v) for v in acc[nl:nl + 3]]


def _family(rng: random.Random, dtype: str, n: int) -> list[float]:
    big = 300 if dtype == "float64" else 37
    tiny = 5e-324 if dtype == "float64" else 1.401298464324817e-45
    kind = rng.randrange(7)
    if kind == 0:  # cancellation: pairs that cancel up to small residues
        xs = []
        for _ in range(n // 2):
            b = rng.uniform(1, 2) * 10.0 ** rng.randint(0, big // 2)
            xs += [b, rng.uniform(-1e-3, 1e-3) - b]
        return xs
    if kind == 1:  # huge dynamic range
        return [rng.choice([-1, 1]) * rng.uniform(1, 10) * 10.0 ** rng.randint(-big, big - 1) for _ in range(n)]
    if kind == 2:  # subnormals and zeros
        return [tiny * rng.randint(-1000, 1000) * rng.choice([1, 0.5, 3]) for _ in range(n)] + [0.0, -0.0]
    if kind == 3:  # long runs of equal values
        return [rng.choice([0.1, -0.3, 1e-8])] * n
    if kind == 4:  # near overflow, cancelling
        m = np.finfo(dtype).max
        return [float(m), float(m), -float(m)] + [rng.uniform(-1, 1) for _ in range(n)]
    if kind == 5:  # ties: 1 + half an ulp, and 1 + half an ulp + a tiny bit
        eps = float(np.finfo(dtype).eps)
        return [1.0, eps / 2] + ([tiny] if rng.random() < 0.5 else []) + [-1.0, 1.0]
    return [rng.gauss(0, 1) * 10.0 ** rng.randint(-5, 5) for _ in range(n)]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_compiled_accumulator_matches_the_reference(dtype):
    rng = random.Random(7)
    np_t = np.dtype(dtype).type
    for trial in range(300):
        terms = [float(np_t(x)) for x in _family(rng, dtype, rng.randint(0, 40))]
        if dtype == "float32":
            terms = [x for x in terms if math.isfinite(x)]
        rng.shuffle(terms)
        live = [rng.random() < 0.9 for _ in terms]
        got, acc = run_exact(terms, dtype, live)
        want, racc = reference(terms, dtype, live)
        assert _same(got, want), (trial, terms, got, want)
        exact_sum = sum((Fraction(x) for x, on in zip(terms, live, strict=True) if on), Fraction(0))
        assert _same(got, exact.round_fraction(exact_sum, dtype) if all(map(math.isfinite, terms)) else want)
        assert _normalised(acc, dtype) == _normalised(racc, dtype)


def test_float64_agrees_with_fsum_and_survives_intermediate_overflow():
    rng = np.random.default_rng(3)
    xs = rng.normal(size=5000) * 10.0 ** rng.uniform(-200, 200, 5000)
    assert _same(run_exact(xs)[0], math.fsum(xs))
    assert run_exact([1e308, 1e308, -1e308])[0] == 1e308  # math.fsum raises here
    assert run_exact([1e308, 1e308])[0] == math.inf
    assert run_exact([-1e308, -1e308])[0] == -math.inf


def test_special_values():
    inf, nan = math.inf, math.nan
    assert math.isnan(run_exact([1.0, nan])[0])
    assert math.isnan(run_exact([inf, -inf])[0])
    assert run_exact([inf, 1.0, inf])[0] == inf
    assert run_exact([-inf, 5.0])[0] == -inf
    assert run_exact([inf, 2.0], "float32")[0] == inf
    zero = run_exact([-0.0, -0.0])[0]
    assert zero == 0.0 and math.copysign(1.0, zero) == 1.0  # a zero result is +0.0
    assert math.copysign(1.0, run_exact([1.5, -1.5])[0]) == 1.0
    assert math.copysign(1.0, run_exact([])[0]) == 1.0


def test_float32_rounds_once_not_through_float64():
    # 1 + 2**-24 + 2**-60: rounded to float64 it is 1 + 2**-24 (a float32 tie, which goes to even: 1.0);
    # rounded once it is just above the tie, so 1 + 2**-23.
    terms = [1.0, 2.0 ** -24, 2.0 ** -60]
    got = run_exact(terms, "float32")[0]
    assert got == 1.0 + 2.0 ** -23
    assert float(np.float32(math.fsum(terms))) == 1.0  # what double rounding would give
