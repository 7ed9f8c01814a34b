"""Side effects inside a `for` that a later stage recomputes for the values it yields run once.

A split kernel's later stage runs again the per-lane ops it needs (hawk/passes/stages.py). A `for` that
scatters and also yields a value read after a total was kept by its own stage for the scatter and pulled into
the later stage for the value, scatter included: every scatter of it ran twice (found by tests/fuzz_reverse.py,
seed 4445 case 32, where the reverse of such a loop beside a max returned twice the gradient). Each effect now
belongs to the stage of its op's level alone. (A scatter may not sit inside an `if`.)
"""

import numpy as np

import eagle
import hawk
import hawk.math as m
from hawk import Index, Mutable, Scalar

SLOTS = 8


@hawk.kernel
def loop_scatter_value(x: Scalar, k: Index, acc: Mutable["slot":SLOTS]) -> Scalar:
    t = 0.0
    for j in range(3):
        hawk.scatter(acc)[k] += x * m.to_float(j + 1)
        t += x
    return t - hawk.max(x)


@hawk.kernel
def loop_beside_a_max(x: Scalar, y: Scalar, k: Index, total: Mutable[Scalar]) -> Scalar:
    t = 0.0
    for j in range(3, 1, -1):
        t += m.max(y.at(k) + x, m.to_float(j))
    total = hawk.max(x)
    return t


def _data(n=40):
    rng = np.random.default_rng(4445)
    return rng.normal(size=n) * 3.0 + 2.0, rng.integers(0, SLOTS, n)


def test_a_loop_that_scatters_and_yields_a_value_read_after_a_total(target):
    x, k = _data()
    assert len(loop_scatter_value.stages()) == 2
    out = eagle.deploy(loop_scatter_value, target=target).run(x=x, k=k, acc=np.zeros(SLOTS))
    want = np.zeros(SLOTS)
    np.add.at(want, k, 6.0 * x)  # x * (1 + 2 + 3)
    np.testing.assert_allclose(np.asarray(out["acc"]), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(out["result"]), 3.0 * x - x.max(), rtol=1e-12)


def test_the_reverse_of_a_loop_of_reads_beside_a_max():
    # the adjoint recomputes max(x) for the total's gradient (a stage before the rest): the loop's `.at` adjoint
    # scatters into grad_y, and its carried sum (x's gradient) is read after that max
    x, k = _data(37)
    y = np.random.default_rng(1).normal(size=37) * 3.0
    ct = np.random.default_rng(2).normal(size=37)
    plan = eagle.deploy(loop_beside_a_max)
    for ct_total in (0.0, 1.5):
        g = plan.reverse({"result": ct, "total": np.full(1, ct_total)}, x=x, y=y, k=k)
        v = y[k] + x
        sel = (v > 3.0).astype(float) + (v > 2.0)
        want_y = np.zeros(37)
        np.add.at(want_y, k, ct * sel)
        want_x = ct * sel + np.where(x == x.max(), ct_total, 0.0)
        np.testing.assert_allclose(np.asarray(g["y"]), want_y, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.asarray(g["x"]), want_x, rtol=1e-12, atol=1e-12)
