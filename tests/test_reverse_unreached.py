"""Gradients that no cotangent reaches come back as zeros shaped like their inputs.

A Vector plane read with `.at` gets its gradient through a sink whose payload the scatters into it set; when the
plane's values only reach comparisons (a mask, a branch), no scatter was made and the sink had scalar slots, so
the door failed reshaping it ("cannot reshape array of size 6 into shape (3,6)"; found by tests/fuzz_reverse.py,
case 5:49)."""

import numpy as np
from test_reverse import check_fd, grads_of

import eagle
import hawk
import hawk.math as m
from hawk import Index, Param, Scalar, Table, Vector

RNG = np.random.default_rng(49)


@hawk.kernel
def vector_in_a_mask(x: Scalar, v: Vector[3], k: Index) -> Scalar:
    t = v.at(k).sum()
    return m.where(x > t, 1.0, 0.0) * x + x * x


@hawk.kernel
def vector_in_a_branch(x: Scalar, v: Vector[3], tb: Table["slot":4], a: Param) -> Scalar:
    if v.at(2)[1] > tb.at(slot=1) + a:
        y = x * 2.0
    else:
        y = m.sin(x)
    return y


def test_a_vector_plane_only_compared_gets_zeros_of_its_shape():
    n = 7
    x, ct = RNG.normal(size=n), RNG.normal(size=n)
    v, k = RNG.normal(size=(3, n)), RNG.integers(0, n, size=n)
    plan = eagle.deploy(vector_in_a_mask)
    g = grads_of(plan, ct, x=x, v=v, k=k)
    assert g["v"].shape == (3, n)
    np.testing.assert_array_equal(g["v"], np.zeros((3, n)))
    t = v[:, k].sum(axis=0)
    np.testing.assert_allclose(g["x"], ct * (np.where(x > t, 1.0, 0.0) + 2.0 * x), rtol=1e-14)
    check_fd(plan, {"result": ct}, g, {"x": x, "v": v, "k": k})


def test_planes_only_in_a_branch_condition_get_zeros():
    n = 5
    x, ct = RNG.normal(size=n), RNG.normal(size=n)
    v, tb = RNG.normal(size=(3, n)), RNG.normal(size=4)
    plan = eagle.deploy(vector_in_a_branch)
    g = grads_of(plan, ct, x=x, v=v, tb=tb, a=0.3)
    assert g["v"].shape == (3, n) and g["tb"].shape == (4,) and g["a"].shape == (1,)
    for name in ("v", "tb", "a"):
        np.testing.assert_array_equal(g[name], np.zeros_like(g[name]))
    taken = v[1, 2] > tb[1] + 0.3
    np.testing.assert_allclose(g["x"], ct * (2.0 if taken else np.cos(x)), rtol=1e-14)
