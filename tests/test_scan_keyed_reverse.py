"""Gradients of keyed min/max scans and of add scans in key order (docs/reverse.md, "Scans").

A keyed running max or min (order="lane") is the unkeyed one on each key's lanes, so its gradient is checked
against the unkeyed rule's reference (tests/test_scan_reverse.py: a lane's cotangent split equally between the
lanes of its plateau that hold the extreme) applied to each key's lanes, in every mode and direction, with key -1
lanes getting nothing; an add scan in key order against g summed over the lanes after each one in (key, lane)
order, and against central finite differences; a running product in key order against jax.grad of jnp.cumprod
over the lanes sorted by key, zeros included. The same bits on every thread count (runs that really split)
and on spirv; a key-order min/max scan is refused at its line."""

import numpy as np
import pytest
from conftest import bt_grads_spirv_bits, bt_grads_split_bits, bt_reverse_refused, bt_stages_assemble
from test_scan_reverse import _extreme_grad, _mirrored

import eagle
import hawk
import hawk.math as m
from hawk import Index, Mutable, Scalar
from hawk.abi.layout import SCAN_BLOCK

KEYS = 5


@hawk.kernel
def k_max(x: Scalar, k: Index) -> Scalar:
    return hawk.scan(x * x, by=k, keys=5, op=m.max)


@hawk.kernel
def k_min_rev(x: Scalar, k: Index) -> Scalar:
    return hawk.scan(x, by=k, keys=5, op=m.min, reverse=True)


@hawk.kernel
def k_max_before(x: Scalar, k: Index) -> Scalar:
    y = hawk.scan(x * x, by=k, keys=5, op=m.max, exclusive=True)
    return m.where(m.isinf(y), 0.0, y)  # (a key's first lane holds the identity, -inf)


@hawk.kernel
def k_min_after(x: Scalar, k: Index) -> Scalar:
    y = hawk.scan(x, by=k, keys=5, op=m.min, exclusive=True, reverse=True)
    return m.where(m.isinf(y), 0.0, y)


@hawk.kernel
def k_sorted(x: Scalar, k: Index, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = hawk.scan(x * x, by=k, keys=5, order="key")
    z = hawk.scan(x, by=k, keys=5, order="key", exclusive=True)


def _data(seed: int, n: int):
    rng = np.random.default_rng(seed)
    x = np.round(rng.standard_normal(n) * 4) / 4  # many ties (x * x too)
    k = rng.integers(-1, KEYS, n).astype(np.int32)
    return x, k, rng.standard_normal(n)


def _per_key(x, k, ct, rule, better, exclusive=False):
    """`rule` (the unkeyed reference: _extreme_grad, _mirrored) on each key's lanes, one segment each."""
    g = np.zeros_like(x)
    for key in range(KEYS):
        idx = np.flatnonzero(k == key)
        if idx.size:
            flags = np.zeros(idx.size, bool)
            flags[0] = True
            g[idx] = rule(x[idx], ct[idx], flags, better, exclusive=exclusive)
    return g


def _after_in_key_order(k, ct, exclusive):
    """Each lane's share of an add scan in key order: ct summed over the lanes at or after it (exclusive: after
    it) in (key, lane) order; a key -1 lane gets 0."""
    order = np.flatnonzero(k >= 0)
    order = order[np.argsort(k[order], kind="stable")]
    suffix = np.cumsum(ct[order][::-1])[::-1]
    g = np.zeros(k.size)
    g[order] = suffix - (ct[order] if exclusive else 0.0)
    return g


def _max(a, b):
    return a > b


def _min(a, b):
    return a < b


@pytest.mark.parametrize("n", [1, 7, 600, 2 * SCAN_BLOCK + 11])
def test_keyed_running_max_and_min_split_ties_equally(n):
    x, k, ct = _data(n, n)
    g = np.asarray(eagle.deploy(k_max).reverse(ct, x=x, k=k)["x"])
    assert np.allclose(g, 2 * x * _per_key(x * x, k, ct, _extreme_grad, _max), rtol=1e-12, atol=1e-12)
    g = np.asarray(eagle.deploy(k_min_rev).reverse(ct, x=x, k=k)["x"])
    assert np.allclose(g, _per_key(x, k, ct, _mirrored, _min), rtol=1e-12, atol=1e-12)
    assert not g[k < 0].any()


@pytest.mark.parametrize("n", [2, 600, SCAN_BLOCK + 3])
def test_keyed_exclusive_extreme_scans(n):
    """An exclusive keyed scan's value is the inclusive one at its key's lane before (reverse=True: after); a
    key's first (last) lane holds the identity, whose cotangent goes nowhere (the kernels zero it anyway)."""
    x, k, ct = _data(n + 1, n)
    g = np.asarray(eagle.deploy(k_max_before).reverse(ct, x=x, k=k)["x"])
    want = 2 * x * _per_key(x * x, k, ct, _extreme_grad, _max, exclusive=True)
    assert np.allclose(g, want, rtol=1e-12, atol=1e-12)
    g = np.asarray(eagle.deploy(k_min_after).reverse(ct, x=x, k=k)["x"])
    assert np.allclose(g, _per_key(x, k, ct, _mirrored, _min, exclusive=True), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [1, 9, 3 * SCAN_BLOCK + 5])
def test_add_scans_in_key_order(n):
    rng = np.random.default_rng(n)
    x, cy, cz = rng.standard_normal((3, n))
    k = rng.integers(-1, KEYS, n).astype(np.int32)
    g = np.asarray(eagle.deploy(k_sorted).reverse({"y": cy, "z": cz}, x=x, k=k)["x"])
    want = 2 * x * _after_in_key_order(k, cy, False) + _after_in_key_order(k, cz, True)
    assert np.allclose(g, want, rtol=1e-11, atol=1e-11)


@hawk.kernel
def k_sorted_prod(x: Scalar, k: Index, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = hawk.scan(x, by=k, keys=5, op=m.mul, order="key")
    z = hawk.scan(x, by=k, keys=5, op=m.mul, order="key", exclusive=True)


@hawk.kernel
def k_sorted_prod_one(x: Scalar, k: Index) -> Scalar:
    return hawk.scan(x, by=k, keys=5, op=m.mul, order="key")  # (k_sorted_prod's adjoint binds more buffers than
    # lavapipe gives a shader: 34 of 32)


@pytest.mark.parametrize("zeros", [0, 1, 2])
def test_running_products_in_key_order_against_jax(zeros):
    """A running product over (key, lane) order is jnp.cumprod over the lanes sorted stably by key (key -1 lanes
    left out): torch.cumprod's rule with the key-order sums, exact zeros included (one zero: the lanes before it
    and the zero itself get shares; two: nothing after the first)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    rng = np.random.default_rng(40 + zeros)
    n = 300
    x = 1.0 + 0.05 * rng.standard_normal(n)
    k = rng.integers(-1, KEYS, n).astype(np.int32)
    x[rng.choice(np.flatnonzero(k >= 0), zeros, replace=False)] = 0.0
    cy, cz = rng.standard_normal((2, n))
    g = np.asarray(eagle.deploy(k_sorted_prod).reverse({"y": cy, "z": cz}, x=x, k=k)["x"])
    order = np.flatnonzero(k >= 0)
    order = order[np.argsort(k[order], kind="stable")]

    def loss(v):
        p = jnp.cumprod(v[order])
        return jnp.sum(cy[order] * p) + jnp.sum(cz[order] * jnp.concatenate([jnp.ones(1), p[:-1]]))

    want = np.asarray(jax.grad(loss)(jnp.asarray(x)))
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12 * np.max(np.abs(want)))
    assert not g[k < 0].any()


def test_add_scans_in_key_order_against_finite_differences():
    rng = np.random.default_rng(5)
    n = 40
    x, cy, cz = rng.standard_normal((3, n))
    k = rng.integers(-1, KEYS, n).astype(np.int32)
    plan = eagle.deploy(k_sorted)
    g = np.asarray(plan.reverse({"y": cy, "z": cz}, x=x, k=k)["x"])

    def loss(v):
        out = plan.run(x=v, k=k)
        return float(np.dot(cy, out["y"]) + np.dot(cz, out["z"]))

    h = 1e-6
    fd = np.array([(loss(x + h * e) - loss(x - h * e)) / (2 * h) for e in np.eye(n)])
    assert np.allclose(g, fd, rtol=1e-6, atol=1e-6)


_CASES = {
    "max": lambda rng, n: (k_max, rng.standard_normal(n), {"x": np.round(rng.standard_normal(n) * 4) / 4,
                                                           "k": rng.integers(-1, KEYS, n).astype(np.int32)}),
    "min_after": lambda rng, n: (k_min_after, rng.standard_normal(n),
                                 {"x": np.round(rng.standard_normal(n) * 4) / 4,
                                  "k": rng.integers(-1, KEYS, n).astype(np.int32)}),
    "key_order": lambda rng, n: (k_sorted, {"y": rng.standard_normal(n), "z": rng.standard_normal(n)},
                                 {"x": rng.standard_normal(n), "k": rng.integers(-1, KEYS, n).astype(np.int32)}),
    "key_order_prod": lambda rng, n: (k_sorted_prod_one, rng.standard_normal(n),
                                      {"x": 1.0 + 1e-4 * rng.standard_normal(n),
                                       "k": rng.integers(-1, KEYS, n).astype(np.int32)}),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_same_bits_on_every_thread_count(case):
    kernel, ct, planes = _CASES[case](np.random.default_rng(12), 5 * SCAN_BLOCK + 5)
    bt_grads_split_bits(kernel, ct, planes, SCAN_BLOCK, case)


@pytest.mark.parametrize("case", sorted(_CASES))
def test_spirv_has_the_hosts_bits(case):
    kernel, ct, planes = _CASES[case](np.random.default_rng(13), 2 * SCAN_BLOCK + 11)
    bt_grads_spirv_bits(kernel, ct, planes, case)


def test_key_order_extreme_scans_are_refused_at_their_line():
    @hawk.kernel
    def sorted_max(x: Scalar, k: Index, y: Mutable[Scalar]):
        y = hawk.scan(x, by=k, keys=4, op=m.max, order="key")  # @key_order_max

    msg = bt_reverse_refused(__file__, sorted_max, np.ones(10), "# @key_order_max", x=np.arange(10.0),
                             k=(np.arange(10) % 4).astype(np.int32))
    assert 'order="key" only with op=m.add or m.mul (op=m.max in key order' in msg


def test_adjoints_build_for_nvvm_and_rocdl():
    """The adjoints (keyed scans by funcs folded in the finish, key-order scans) assemble with ptxas and link with
    ld.lld, every stage (spirv runs them above)."""
    from hawk.reverse import adjoint

    for kernel in (k_max_before, k_sorted, k_sorted_prod_one):
        adj, _ = adjoint(kernel, ("x",), None)
        bt_stages_assemble(adj, adj.spec_for("float64", {}))
