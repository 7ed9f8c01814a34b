"""hawk.scan(x, reverse=True) and gradients through scans (docs/semantics.md "Scans", docs/reverse.md "Scans").

The reverse scan against np.cumsum of the reversed array (bit for bit at every size: one sequential fold in the
stage's finish), exclusive and segmented forms against a Python loop, integers exact; gradients of add scans
(inclusive, exclusive, segmented, reversed, beside a mean) against jax.grad of the same jax.numpy code
(jnp.cumsum), a NumPy reference and central finite differences; the same gradient bits at every thread count
(runs that really split) and on spirv; the JAX and torch bridges' gradients."""

import numpy as np
import pytest
from conftest import (
    bt_grads_spirv_bits,
    bt_grads_split_bits,
    bt_run,
    bt_run_on,
    bt_stages_assemble,
    bt_target_missing,
)

import eagle
import hawk
import hawk.math as m
from hawk import Index, Mutable, Scalar
from hawk.abi.layout import SCAN_BLOCK


@hawk.kernel
def rscan(x: Scalar, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = hawk.scan(x, reverse=True)
    z = hawk.scan(x, reverse=True, exclusive=True)


@hawk.kernel
def rscan_seg(x: Scalar, start: Scalar, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = hawk.scan(x, reverse=True, reset=start > 0.5)
    z = hawk.scan(x, reverse=True, reset=start > 0.5, exclusive=True)


@hawk.kernel
def rscan_int(k: Index, y: Mutable[Index], z: Mutable[Index]):
    y = hawk.scan(k * 1000003, reverse=True)  # int64, wrapping
    z = hawk.scan(k, reverse=True, op=m.max)


@hawk.kernel
def both_ways(x: Scalar, y: Mutable[Scalar]):
    y = hawk.scan(x) - hawk.scan(x, reverse=True, exclusive=True)  # both orders in one stage


# ---- kernels we take gradients of ----------------------------------------------------------------------------
@hawk.kernel
def sum_sq(x: Scalar, t: Mutable[Scalar]):
    c = hawk.scan(x)
    t = hawk.sum(c * c, policy="ordered")


@hawk.kernel
def weighted(x: Scalar, w: Scalar) -> Scalar:
    return hawk.scan(x * w)


@hawk.kernel
def excl_sq(x: Scalar) -> Scalar:
    return hawk.scan(x * x, exclusive=True)


@hawk.kernel
def seg(x: Scalar, start: Scalar, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = hawk.scan(x * x, reset=start > 0.5)
    z = hawk.scan(x, reset=start > 0.5, exclusive=True)


@hawk.kernel
def centred(x: Scalar) -> Scalar:
    return hawk.scan(x - hawk.mean(x))  # two stages before the scan is read: the mean, then the block totals


@hawk.kernel
def suffix(x: Scalar, t: Mutable[Scalar]):
    s = hawk.scan(x * x, reverse=True)  # its adjoint is a forward scan
    t = hawk.sum(s * x, policy="ordered")


@hawk.kernel
def counted(x: Scalar, k: Index) -> Scalar:
    c = hawk.scan(k, op=m.max)  # an integer scan: no gradient flows through it, none is refused
    return x * m.to_float(c) + hawk.scan(x)


def _loop(x, flags, excl, ident):
    """A scan from the last lane down, segments starting at flagged lanes (the forward's segments)."""
    out = np.empty_like(x)
    run, cut = ident, True
    for i in range(x.size - 1, -1, -1):
        prev = ident if cut else run
        run = prev + x[i]
        out[i] = prev if excl else run
        cut = bool(flags[i])
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 9, SCAN_BLOCK, 3 * SCAN_BLOCK + 17])
def test_reverse_scan_is_cumsum_of_the_reversed_array_bitwise(n, dtype):
    x = np.random.default_rng(n).standard_normal(n).astype(dtype)
    out = bt_run(rscan, x=x)
    want = np.cumsum(x[::-1], dtype=dtype)[::-1]
    assert out["y"].dtype == dtype and out["y"].tobytes() == want.tobytes()
    ex = out["z"]
    assert ex[-1] == 0.0 and np.signbit(ex[-1])  # the identity of add, -0.0
    assert ex[:-1].tobytes() == want[1:].tobytes()


def test_segmented_reverse_scan_against_a_python_loop():
    rng = np.random.default_rng(1)
    n = 2 * SCAN_BLOCK + 77
    x = rng.standard_normal(n)
    start = (rng.random(n) < 0.002).astype(np.float64)
    start[[0, 5, SCAN_BLOCK, SCAN_BLOCK + 1, n - 1]] = 1.0
    out = bt_run(rscan_seg, x=x, start=start)
    assert out["y"].tobytes() == _loop(x, start, False, -0.0).tobytes()
    assert out["z"].tobytes() == _loop(x, start, True, -0.0).tobytes()


def test_integer_reverse_scans_are_exact():
    k = np.random.default_rng(2).integers(-(2 ** 31), 2 ** 31 - 1, 2 * SCAN_BLOCK + 5).astype(np.int64)
    out = bt_run(rscan_int, k=k)
    with np.errstate(over="ignore"):
        assert np.array_equal(out["y"], np.cumsum((k * 1000003)[::-1])[::-1])
    assert np.array_equal(out["z"], np.maximum.accumulate(k[::-1])[::-1])


def test_forward_and_reverse_scans_in_one_stage():
    x = np.random.default_rng(3).standard_normal(1000)
    want = np.cumsum(x) - np.concatenate([np.cumsum(x[::-1])[::-1][1:], [0.0]])
    assert bt_run(both_ways, x=x).tobytes() == want.tobytes()


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_reverse_scan_same_bits_at_every_thread_count(threads):
    rng = np.random.default_rng(4)
    n = 9 * SCAN_BLOCK + 5
    x, start = rng.standard_normal(n), (rng.random(n) < 0.001).astype(np.float64)
    plan = eagle.deploy(rscan_seg, threads=threads, min_chunk=SCAN_BLOCK)
    out = plan.run(x=x, start=start)
    if threads > 1:
        assert max(plan.last_chunks) > 1, f"threads={threads}: ran {plan.last_chunks} chunk(s)"
    assert np.asarray(out["y"]).tobytes() == _loop(x, start, False, -0.0).tobytes()


def test_reverse_keyword_takes_a_constant():
    def k(x: Scalar, y: Mutable[Scalar]):
        y = hawk.scan(x, reverse=x > 0.0)  # @rev_not_const

    with pytest.raises(hawk.KernelError, match="reverse= takes True or False") as exc:
        hawk.kernel(k)
    assert "test_scan_reverse.py:" in str(exc.value)


# ---- gradients ------------------------------------------------------------------------------------------------
def _suffix(a):
    return np.cumsum(a[::-1])[::-1]


def _fd(kernel, ct, planes, name, lanes, h=1e-6):
    """Central finite differences of sum(ct * run(planes)) with respect to planes[name] at `lanes`."""
    def f(p):
        out = bt_run(kernel, **p)
        if isinstance(ct, dict) and not isinstance(out, dict):
            out = {next(iter(ct)): out}
        if isinstance(out, dict):
            return sum(float(np.sum(np.asarray(ct[k]) * out[k])) for k in ct)
        return float(np.sum(ct * out))

    got = []
    for i in lanes:
        up, dn = dict(planes), dict(planes)
        up[name], dn[name] = planes[name].copy(), planes[name].copy()
        up[name][i] += h
        dn[name][i] -= h
        got.append((f(up) - f(dn)) / (2 * h))
    return np.array(got)


def test_gradient_of_a_sum_of_squares_of_a_scan():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    x = np.random.default_rng(5).standard_normal(3 * SCAN_BLOCK + 9)
    g = np.asarray(eagle.deploy(sum_sq).reverse(1.0, x=x)["x"])
    want = np.asarray(jax.grad(lambda v: jnp.sum(jnp.cumsum(v) ** 2))(x))
    assert np.allclose(g, want, rtol=1e-11, atol=1e-9)
    small = x[:40].copy()
    g = np.asarray(eagle.deploy(sum_sq).reverse(1.0, x=small)["x"])
    lanes = list(range(0, 40, 7))
    assert np.allclose(g[lanes], _fd(sum_sq, {"t": np.ones(1)}, {"x": small}, "x", lanes), rtol=1e-6)


def test_gradient_of_a_per_lane_scan_against_jax_vjp():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    rng = np.random.default_rng(6)
    n = 2 * SCAN_BLOCK + 3
    x, w, ct = rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(n)
    g = eagle.deploy(weighted).reverse(ct, x=x, w=w)
    _, vjp = jax.vjp(lambda a, b: jnp.cumsum(a * b), x, w)
    gx, gw = vjp(ct)
    assert np.allclose(np.asarray(g["x"]), np.asarray(gx), rtol=1e-12, atol=1e-11)
    assert np.allclose(np.asarray(g["w"]), np.asarray(gw), rtol=1e-12, atol=1e-11)
    # the suffix sum of the cotangent, bit for bit (one sequential fold)
    assert np.asarray(g["x"]).tobytes() == (_suffix(ct) * w).tobytes()


def test_gradient_of_an_exclusive_scan():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    rng = np.random.default_rng(7)
    x, ct = rng.standard_normal(500), rng.standard_normal(500)
    g = np.asarray(eagle.deploy(excl_sq).reverse(ct, x=x)["x"])
    _, vjp = jax.vjp(lambda a: jnp.concatenate([jnp.zeros(1), jnp.cumsum(a * a)[:-1]]), x)
    assert np.allclose(g, np.asarray(vjp(ct)[0]), rtol=1e-12, atol=1e-12)
    assert g[-1] == 0.0  # the last lane reaches no later lane
    fd = _fd(excl_sq, ct, {"x": x}, "x", [0, 17, 250, 499])
    assert np.allclose(g[[0, 17, 250, 499]], fd, rtol=1e-5, atol=1e-5)  # (h = 1e-6 over sums of ~50)


def test_gradient_of_a_segmented_scan_stops_at_segment_ends():
    rng = np.random.default_rng(8)
    n = SCAN_BLOCK + 300
    x, start = rng.standard_normal(n), (rng.random(n) < 0.01).astype(np.float64)
    start[[0, 1, 200]] = 1.0
    cy, cz = rng.standard_normal(n), rng.standard_normal(n)
    g = np.asarray(eagle.deploy(seg).reverse({"y": cy, "z": cz}, x=x, start=start)["x"])
    seg_id = np.cumsum(start > 0.5)
    want = np.empty(n)
    for s in np.unique(seg_id):  # within each segment: suffix sums (inclusive for y, exclusive for z)
        idx = np.nonzero(seg_id == s)[0]
        inc = _suffix(cy[idx])
        exc = np.concatenate([_suffix(cz[idx])[1:], [0.0]])
        want[idx] = 2 * x[idx] * inc + exc
    assert np.allclose(g, want, rtol=1e-12, atol=1e-11)
    lanes = [0, 1, 150, 199, 200, 201]
    small = {"x": x[:300].copy(), "start": start[:300].copy()}
    gs = np.asarray(eagle.deploy(seg).reverse({"y": cy[:300], "z": cz[:300]}, **small)["x"])
    fd = _fd(seg, {"y": cy[:300], "z": cz[:300]}, small, "x", lanes)
    assert np.allclose(gs[lanes], fd, rtol=1e-5, atol=1e-5)


def test_gradient_of_a_scan_after_a_mean():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    rng = np.random.default_rng(9)
    n = 2 * SCAN_BLOCK + 31
    x, ct = rng.standard_normal(n), rng.standard_normal(n)
    assert centred.stage_count >= 3
    g = np.asarray(eagle.deploy(centred).reverse(ct, x=x)["x"])
    _, vjp = jax.vjp(lambda a: jnp.cumsum(a - jnp.mean(a)), x)
    assert np.allclose(g, np.asarray(vjp(ct)[0]), rtol=1e-10, atol=1e-9)


def test_gradient_of_a_reverse_scan_is_a_forward_scan():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    x = np.random.default_rng(10).standard_normal(SCAN_BLOCK + 7)
    g = np.asarray(eagle.deploy(suffix).reverse(1.0, x=x)["x"])
    want = jax.grad(lambda a: jnp.sum(jnp.cumsum((a * a)[::-1])[::-1] * a))(x)
    assert np.allclose(g, np.asarray(want), rtol=1e-11, atol=1e-9)


def test_integer_scans_carry_no_gradient():
    rng = np.random.default_rng(11)
    x, k = rng.standard_normal(300), rng.integers(0, 50, 300).astype(np.int32)
    ct = rng.standard_normal(300)
    g = np.asarray(eagle.deploy(counted).reverse(ct, x=x, k=k)["x"])
    assert np.allclose(g, ct * np.maximum.accumulate(k) + _suffix(ct), rtol=1e-13, atol=1e-12)


_GRAD_CASES = {
    "sum_sq": lambda rng, n: (sum_sq, 1.0, {"x": rng.standard_normal(n)}),
    "seg": lambda rng, n: (seg, {"y": rng.standard_normal(n), "z": rng.standard_normal(n)},
                           {"x": rng.standard_normal(n), "start": (rng.random(n) < 0.001).astype(np.float64)}),
    "centred": lambda rng, n: (centred, rng.standard_normal(n), {"x": rng.standard_normal(n)}),
    "suffix": lambda rng, n: (suffix, 1.0, {"x": rng.standard_normal(n)}),
    "running_max": lambda rng, n: (running_max, rng.standard_normal(n),
                                   {"x": np.round(rng.standard_normal(n) * 4) / 4,
                                    "start": (rng.random(n) < 0.001).astype(np.float64)}),
    "before_max": lambda rng, n: (before_max, rng.standard_normal(n),
                                  {"x": np.round(rng.standard_normal(n) * 4) / 4,
                                   "start": (rng.random(n) < 0.001).astype(np.float64)}),
    "after_min": lambda rng, n: (after_min, rng.standard_normal(n),
                                 {"x": np.round(rng.standard_normal(n) * 4) / 4,
                                  "start": (rng.random(n) < 0.001).astype(np.float64)}),
}


@pytest.mark.parametrize("case", sorted(_GRAD_CASES))
def test_gradients_same_bits_on_every_thread_count(case):
    kernel, ct, planes = _GRAD_CASES[case](np.random.default_rng(12), 9 * SCAN_BLOCK + 5)
    bt_grads_split_bits(kernel, ct, planes, SCAN_BLOCK, case)


@pytest.mark.parametrize("case", sorted(_GRAD_CASES))
def test_spirv_gradients_have_the_hosts_bits(case):
    kernel, ct, planes = _GRAD_CASES[case](np.random.default_rng(13), 3 * SCAN_BLOCK + 11)
    bt_grads_spirv_bits(kernel, ct, planes, case)


def test_spirv_reverse_scan_has_the_hosts_bits():
    why = bt_target_missing("spirv")
    if why:
        pytest.skip(why)
    rng = np.random.default_rng(14)
    n = 3 * SCAN_BLOCK + 11
    planes = {"x": rng.standard_normal(n), "start": (rng.random(n) < 0.001).astype(np.float64)}
    host, dev = bt_run(rscan_seg, **planes), bt_run_on("spirv", rscan_seg, **planes)
    for k in ("y", "z"):
        assert dev[k].tobytes() == host[k].tobytes(), k
    k = rng.integers(-1000, 1000, n).astype(np.int32)
    host, dev = bt_run(rscan_int, k=k), bt_run_on("spirv", rscan_int, k=k)
    assert all(np.asarray(dev[c]).tobytes() == np.asarray(host[c]).tobytes() for c in ("y", "z"))


# ---- the bridges ----------------------------------------------------------------------------------------------
def test_jax_bridge_grad_of_a_scan_kernel():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    import eagle.jax

    x = np.random.default_rng(15).standard_normal(SCAN_BLOCK + 100)
    f = eagle.jax.wrap(sum_sq)
    ours = jax.grad(lambda v: f(x=v)[0])(x)
    theirs = jax.grad(lambda v: jnp.sum(jnp.cumsum(v) ** 2))(x)
    assert np.allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-11, atol=1e-9)
    want = eagle.deploy(sum_sq).reverse(np.ones(1), x=x)["x"]
    assert np.asarray(ours).tobytes() == np.asarray(want).tobytes()


def test_torch_bridge_backward_of_a_scan_kernel():
    torch = pytest.importorskip("torch")
    import eagle.torch

    rng = np.random.default_rng(16)
    n = SCAN_BLOCK + 50
    x, w, ct = (torch.from_numpy(rng.standard_normal(n)) for _ in range(3))
    a, b = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    (eagle.torch.wrap(weighted)(x=a, w=b) * ct).sum().backward()
    c, d = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    (torch.cumsum(c * d, 0) * ct).sum().backward()
    assert torch.allclose(a.grad, c.grad, rtol=1e-12, atol=1e-11)
    assert torch.allclose(b.grad, d.grad, rtol=1e-12, atol=1e-11)


def test_adjoints_build_for_nvvm_and_rocdl():
    """The adjoint kernels (forward scans, reverse scans, the finish's folds) assemble with ptxas and link with
    ld.lld, every stage (tests/test_gpu_compile.py builds the module-level kernels above)."""
    from hawk.reverse import adjoint

    for kernel, wrt in ((sum_sq, ("x",)), (seg, ("x",)), (suffix, ("x",))):
        adj, _ = adjoint(kernel, wrt, None)
        assert bt_stages_assemble(adj, adj.spec_for("float64", {}), "sm_90") >= 2


@hawk.kernel
def running_max(x: Scalar, start: Scalar) -> Scalar:
    return hawk.scan(x * x, op=m.max, reset=start > 0.5)


@hawk.kernel
def running_min(x: Scalar) -> Scalar:
    return hawk.scan(x, op=m.min)


def _extreme_grad(x, ct, flags, better, exclusive=False):
    """Lane j's cotangent split equally between the lanes i <= j of its segment with x[i] == y[j] (exclusive:
    i < j, and a segment's first lane, its value the identity, gives nothing)."""
    g = np.zeros_like(x)
    seg_first = 0
    for j in range(x.size):
        if flags[j]:
            seg_first = j
        lanes = np.arange(seg_first, j + (0 if exclusive else 1))
        if not lanes.size:
            continue
        best = lanes[0]
        for i in lanes:
            if better(x[i], x[best]):
                best = i
        ties = lanes[x[lanes] == x[best]]
        g[ties] += ct[j] / ties.size
    return g


def test_gradient_of_a_running_max_splits_ties_equally():
    rng = np.random.default_rng(17)
    n = 600
    x = np.round(rng.standard_normal(n) * 4) / 4  # many ties (x * x too)
    start = (rng.random(n) < 0.02).astype(np.float64)
    ct = rng.standard_normal(n)
    g = np.asarray(eagle.deploy(running_max).reverse(ct, x=x, start=start)["x"])
    want = 2 * x * _extreme_grad(x * x, ct, start > 0.5, lambda a, b: a > b)
    assert np.allclose(g, want, rtol=1e-12, atol=1e-12)
    xm = np.round(rng.standard_normal(2 * SCAN_BLOCK + 3) * 8) / 8
    ctm = rng.standard_normal(xm.size)
    g = np.asarray(eagle.deploy(running_min).reverse(ctm, x=xm)["x"])
    assert np.allclose(g, _extreme_grad(xm, ctm, np.zeros(xm.size, bool), lambda a, b: a < b), rtol=1e-11)


@hawk.kernel
def suffix_max(x: Scalar, start: Scalar) -> Scalar:
    return hawk.scan(x * x, op=m.max, reverse=True, reset=start > 0.5)


@hawk.kernel
def suffix_min(x: Scalar) -> Scalar:
    return hawk.scan(x, op=m.min, reverse=True)


def _mirrored(x, ct, flags, better, exclusive=False):
    """The reverse scan's rule through the forward one's reference: lanes and segments mirrored (a segment's
    first lane, flagged, becomes its last)."""
    starts = np.flatnonzero(np.r_[True, flags[1:]])
    mirrored_flags = np.zeros(x.size, bool)
    mirrored_flags[x.size - 1 - (np.r_[starts[1:], x.size] - 1)] = True
    return _extreme_grad(x[::-1], ct[::-1], mirrored_flags, better, exclusive)[::-1]


@pytest.mark.parametrize("threads", [1, 3])
def test_gradient_of_a_reverse_running_max_splits_ties_equally(threads):
    """reverse=True: lane j's cotangent goes to the lanes i >= j of its segment with x[i] == y[j], split equally;
    the same bits on every thread count (the adjoint's scans split into chunks of whole blocks)."""
    rng = np.random.default_rng(27)
    n = 3 * SCAN_BLOCK + 11
    x = np.round(rng.standard_normal(n) * 4) / 4  # many ties (x * x too)
    start = (rng.random(n) < 0.002).astype(np.float64)
    ct = rng.standard_normal(n)
    plan = eagle.deploy(suffix_max, threads=threads, min_chunk=SCAN_BLOCK)
    g = np.asarray(plan.reverse(ct, x=x, start=start)["x"])
    want = 2 * x * _mirrored(x * x, ct, start > 0.5, lambda a, b: a > b)
    assert np.allclose(g, want, rtol=1e-12, atol=1e-12)
    if threads > 1:
        assert max(plan.last_reverse_chunks) > 1
        one = np.asarray(eagle.deploy(suffix_max, threads=1).reverse(ct, x=x, start=start)["x"])
        assert g.tobytes() == one.tobytes()
    xm = np.round(rng.standard_normal(SCAN_BLOCK + 3) * 8) / 8
    ctm = rng.standard_normal(xm.size)
    g = np.asarray(eagle.deploy(suffix_min, threads=threads).reverse(ctm, x=xm)["x"])
    assert np.allclose(g, _mirrored(xm, ctm, np.zeros(xm.size, bool), lambda a, b: a < b), rtol=1e-11)


def test_gradient_of_a_reverse_running_max_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)

    x, ct = np.random.default_rng(28).standard_normal((2, 700))  # no ties
    g = np.asarray(eagle.deploy(suffix_min).reverse(ct, x=x)["x"])
    _, vjp = jax.vjp(lambda a: jax.lax.cummin(a, reverse=True), x)
    assert np.allclose(g, np.asarray(vjp(ct)[0]), rtol=1e-13, atol=1e-13)


def test_gradient_of_a_running_min_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)

    x, ct = np.random.default_rng(18).standard_normal((2, 700))  # no ties
    g = np.asarray(eagle.deploy(running_min).reverse(ct, x=x)["x"])
    _, vjp = jax.vjp(lambda a: jax.lax.cummin(a), x)
    assert np.allclose(g, np.asarray(vjp(ct)[0]), rtol=1e-13, atol=1e-13)


def test_artifact_reverse_of_a_scan_kernel_has_plan_reverses_bits(tmp_path):
    import hawk.artifact

    hawk.artifact.build_bundle([seg], tmp_path, reverse=True)  # the adjoint's reverse scans: "rscan" buffers
    rng = np.random.default_rng(19)
    n = 2 * SCAN_BLOCK + 9
    planes = {"x": rng.standard_normal(n), "start": (rng.random(n) < 0.001).astype(np.float64)}
    ct = {"y": rng.standard_normal(n), "z": rng.standard_normal(n)}
    got = hawk.load(tmp_path, "seg").reverse(ct, **planes)
    want = eagle.deploy(seg).reverse(ct, **planes)
    assert np.asarray(got["x"]).tobytes() == np.asarray(want["x"]).tobytes()


@hawk.kernel
def grid_rscan(g: hawk.Grid["row", "col":50], x: Scalar, y: Mutable[Scalar]):
    y = hawk.scan(x, reverse=True)  # in the grid's flat (row-major) lane order, from the last lane down


@pytest.mark.parametrize("threads", [1, 3])
def test_grid_reverse_scan_in_flat_order(threads):
    x = np.random.default_rng(20).standard_normal((301, 50))
    y = np.asarray(eagle.deploy(grid_rscan, threads=threads, min_chunk=SCAN_BLOCK).run(x=x))
    assert y.ravel().tobytes() == np.cumsum(x.ravel()[::-1])[::-1].tobytes()


def test_no_lanes_and_one_lane():
    out = bt_run(rscan, x=np.zeros(0))
    assert out["y"].shape == (0,) and out["z"].shape == (0,)
    out = bt_run(rscan, x=np.array([2.5]))
    assert out["y"].tobytes() == np.array([2.5]).tobytes() and out["z"].tobytes() == np.array([-0.0]).tobytes()


@hawk.kernel
def before_max(x: Scalar, start: Scalar) -> Scalar:
    return hawk.scan(x * x, op=m.max, exclusive=True, reset=start > 0.5)


@hawk.kernel
def after_min(x: Scalar, start: Scalar) -> Scalar:
    return hawk.scan(x, op=m.min, exclusive=True, reverse=True, reset=start > 0.5)


@hawk.kernel
def grid_before_min(g: hawk.Grid["row", "col":7], x: Scalar) -> Scalar:
    y = hawk.scan(x, op=m.min, exclusive=True)  # (flat lane order: a row's first lane follows the row before's last)
    return m.where(m.isinf(y), 0.0, y) * x


@pytest.mark.parametrize("n", [1, 2, 3, 600, 2 * SCAN_BLOCK + 11])
def test_gradients_of_exclusive_extreme_scans_split_ties_equally(n):
    """An exclusive min/max scan's value is the inclusive one a lane back (reverse=True: a lane on): the rule of
    the inclusive scan with the cotangent moved over by one lane, across blocks, segments and odd lengths."""
    rng = np.random.default_rng(n)
    x = np.round(rng.standard_normal(n) * 4) / 4  # many ties (x * x too)
    start = (rng.random(n) < 0.02).astype(np.float64)
    ct = rng.standard_normal(n)
    flags = (start > 0.5) | (np.arange(n) == 0)
    g = np.asarray(eagle.deploy(before_max).reverse(ct, x=x, start=start)["x"])
    want = 2 * x * _extreme_grad(x * x, ct, flags, lambda a, b: a > b, exclusive=True)
    assert np.allclose(g, want, rtol=1e-12, atol=1e-12)
    g = np.asarray(eagle.deploy(after_min).reverse(ct, x=x, start=start)["x"])
    assert np.allclose(g, _mirrored(x, ct, flags, lambda a, b: a < b, exclusive=True), rtol=1e-12, atol=1e-12)


def test_gradient_of_an_exclusive_scan_over_a_grid_in_flat_order():
    rng = np.random.default_rng(29)
    x = np.round(rng.standard_normal((301, 7)) * 4) / 4
    ct = rng.standard_normal(x.shape)
    y = np.r_[np.inf, np.minimum.accumulate(x.ravel())[:-1]]
    g = np.asarray(eagle.deploy(grid_before_min, threads=3, min_chunk=SCAN_BLOCK).reverse(ct, x=x)["x"])
    want = _extreme_grad(x.ravel(), (ct * x).ravel(), np.zeros(x.size, bool), lambda a, b: a < b, True) + \
        np.where(np.isinf(y), 0.0, (ct.ravel() * y))
    assert np.allclose(g.ravel(), want, rtol=1e-12, atol=1e-12)


def test_gradients_of_exclusive_extreme_scans_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    x, ct = np.random.default_rng(30).standard_normal((2, 700))  # no ties
    start = np.zeros(700)
    g = np.asarray(eagle.deploy(before_max).reverse(ct, x=x, start=start)["x"])
    _, vjp = jax.vjp(lambda a: jnp.concatenate([jnp.array([-jnp.inf]), jax.lax.cummax(a * a)[:-1]]), x)
    assert np.allclose(g, np.asarray(vjp(ct)[0]), rtol=1e-13, atol=1e-13)
    g = np.asarray(eagle.deploy(after_min).reverse(ct, x=x, start=start)["x"])
    _, vjp = jax.vjp(lambda a: jnp.concatenate([jax.lax.cummin(a, reverse=True)[1:], jnp.array([jnp.inf])]), x)
    assert np.allclose(g, np.asarray(vjp(ct)[0]), rtol=1e-13, atol=1e-13)


@hawk.kernel
def cdf(x: Scalar) -> Scalar:
    c = hawk.scan(x * x, reverse=True)
    return c / hawk.sum(c)  # the reverse scan is read in two later stages: under the sum, and for the division


def test_reverse_scan_read_in_two_later_stages_and_its_gradient():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    rng = np.random.default_rng(21)
    x, ct = rng.standard_normal((2, SCAN_BLOCK + 40))
    c = _suffix(x * x)
    assert np.allclose(bt_run(cdf, x=x), c / c.sum(), rtol=1e-13)

    def ref(a):
        s = jnp.cumsum((a * a)[::-1])[::-1]
        return s / jnp.sum(s)

    g = np.asarray(eagle.deploy(cdf).reverse(ct, x=x)["x"])
    assert np.allclose(g, np.asarray(jax.vjp(ref, x)[1](ct)[0]), rtol=1e-10, atol=1e-12)
