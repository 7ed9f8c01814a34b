"""The reverse through outputs written by key (`hawk.scatter(out)[k] = v` into a Mutable[Scalar] output): each
lane that stores gets the cotangent at its position (a key of -1: zero), a passed array's content the cotangent
where no lane stored; a position stored twice kept an unspecified store's value, so its gradient is refused by
name. Checked against NumPy's gradient worked by hand, central finite differences, the same computation stored
into a sink (bitwise: distinct positions make the sink's "last lane wins" rule moot), several thread counts
(really split), spirv, a bound launch, torch's autograd through eagle.torch, jax.grad through eagle.jax and a
Warp tape."""

import numpy as np
import pytest
from conftest import bt_grads_spirv_bits, bt_grads_split_bits, bt_same_bits

import eagle
import hawk
import hawk.math as m
from eagle.errors import InputError
from hawk import Grid, Index, Mutable, Param, Scalar

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:torch.jit")  # (torch.compile's own)

N = 3_000
SLOTS = N + 11  # the passed arrays and the sink twin: longer than the lanes (positions nobody stores keep content)
SMALL = 64  # min_chunk: N lanes take several chunks


@hawk.kernel
def rk_place(key: Index, x: Scalar, w: Param, out: Mutable[Scalar], tot: Mutable[Scalar]):
    hawk.scatter(out)[key] = x * x * w - x
    tot = hawk.sum(x * w, policy="ordered")


@hawk.kernel
def rk_place_sink(key: Index, x: Scalar, w: Param, out: Mutable["slot":SLOTS], tot: Mutable[Scalar]):
    hawk.scatter(out)[key] = x * x * w - x  # (the same body into a sink: its reverse is the reference)
    tot = hawk.sum(x * w, policy="ordered")


@hawk.kernel
def rk_compact(x: Scalar, out: Mutable[Scalar], ids: Mutable[Index]):
    keep = x > 0.0
    at = m.where(keep, hawk.scan(m.where(keep, 1, 0)) - 1, -1)  # positions computed in the kernel (a scan)
    hawk.scatter(out)[at] = m.sin(x) * x
    hawk.scatter(ids)[at] = m.index(x * 4.0, 4)  # (an integer output beside: no cotangent)


@hawk.kernel
def rk_transpose(lane: Grid["r", "c":7], u: Scalar, k: Param, out: Mutable[Scalar]):
    hawk.scatter(out)[lane.c * lane.extent("r") + lane.r] = u * k


@hawk.kernel
def rk_stencil(lane: Grid["r", "c":7], u: Scalar, out: Mutable[Scalar]):
    s = u.at(c=lane.c - 1) + u * 2.0 + u.at(c=lane.c + 1)  # (a stencil: its gradient takes the scatter adjoint)
    hawk.scatter(out)[lane.c * lane.extent("r") + lane.r] = s * s


@hawk.kernel
def rk_two(key: Index, x: Scalar, out: Mutable[Scalar]):
    hawk.scatter(out)[key] = x * 3.0
    hawk.scatter(out)[m.where(key < 0, -1, key + 1)] = x * x  # (two statements: positions key and key + 1)


@hawk.kernel
def rk_loop(key: Index, x: Scalar, out: Mutable[Scalar]):
    s = x
    for _ in range(2):
        s = s * x
    hawk.scatter(out)[key] = s


@hawk.kernel
def rk_loop_store(key: Index, x: Scalar, out: Mutable[Scalar]):
    for j in range(2):
        hawk.scatter(out)[m.where(key < 0, -1, key * 2 + j)] = x * j


def _data(seed=0, n=N, dtype=np.float64):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.5, 1.5, n).astype(dtype)
    key = rng.permutation(SLOTS)[:n].astype(np.int32)
    key[rng.random(n) < 0.1] = -1  # lanes that store nothing
    ct = {"out": rng.normal(size=SLOTS).astype(dtype), "tot": np.array([0.7], dtype)}
    return x, key, ct


def _by_hand(x, key, ct, w):
    """d/dx and d/dw of sum(ct_out[key] * (x*x*w - x)) + ct_tot * sum(x * w), in float64."""
    x = x.astype(np.float64)
    c = np.where(key >= 0, ct["out"].astype(np.float64)[np.maximum(key, 0)], 0.0)
    t = float(ct["tot"][0])
    return c * (2.0 * x * w - 1.0) + t * w, np.sum(c * x * x) + t * np.sum(x)


def test_gradients_by_hand_and_bitwise_the_sink_twin():
    x, key, ct = _data()
    w = 0.8
    got = eagle.deploy(rk_place).reverse(ct, ("x", "w"), x=x, key=key, w=w, out=np.zeros(SLOTS))
    dx, dw = _by_hand(x, key, ct, w)
    np.testing.assert_allclose(np.asarray(got["x"]), dx, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(np.asarray(got["w"])[0], dw, rtol=1e-12)
    twin = eagle.deploy(rk_place_sink).reverse(ct, x=x, key=key, w=w)
    bt_same_bits(got, twin, "keyed vs sink")
    lanes = np.where(key < N, key, -1).astype(np.int32)  # the output left out: N positions (the lane shape)
    ctn = {"out": ct["out"][:N], "tot": ct["tot"]}
    got = eagle.deploy(rk_place).reverse(ctn, x=x, key=lanes, w=w)
    assert sorted(got) == ["w", "x"]  # (no array passed: no gradient of its content)
    np.testing.assert_allclose(np.asarray(got["x"]), _by_hand(x, lanes, ctn, w)[0], rtol=1e-13, atol=1e-14)
    with pytest.raises(InputError, match=r"plane 'key' of kernel 'rk_place': holds key \d+, outside output plane "
                                         r"'out' \(3000 values"):  # (the forward's own check, named as the forward)
        eagle.deploy(rk_place).reverse(ctn, x=x, key=key, w=w)


def test_finite_differences():
    rng = np.random.default_rng(1)
    x, ct = rng.uniform(-1.5, 1.5, 40), {"out": rng.normal(size=40), "tot": np.array([0.7])}
    key = rng.permutation(40).astype(np.int32)
    key[::6] = -1
    w, h = 1.3, 1e-6
    plan = eagle.deploy(rk_place)

    def loss(xv, wv):
        r = plan.run(x=xv, key=key, w=wv)
        return float(np.dot(np.asarray(r["out"]), ct["out"]) + ct["tot"][0] * np.asarray(r["tot"])[0])

    got = plan.reverse(ct, x=x, key=key, w=w)
    for i in range(0, 40, 3):
        up, down = x.copy(), x.copy()
        up[i] += h
        down[i] -= h
        fd = (loss(up, w) - loss(down, w)) / (2 * h)
        assert abs(np.asarray(got["x"])[i] - fd) <= 1e-6 * max(1.0, abs(fd)), (i, np.asarray(got["x"])[i], fd)
    fd = (loss(x, w + h) - loss(x, w - h)) / (2 * h)
    assert abs(np.asarray(got["w"])[0] - fd) <= 1e-6 * max(1.0, abs(fd))


def test_a_passed_array_s_content_gets_the_cotangent_where_no_lane_stored():
    x, key, ct = _data(seed=3)
    prior = np.random.default_rng(4).normal(size=SLOTS)
    plan = eagle.deploy(rk_place)
    got = plan.reverse(ct, x=x, key=key, w=0.5, out=prior.copy())
    stored = np.zeros(SLOTS, bool)
    stored[key[key >= 0]] = True
    assert sorted(got) == ["out", "w", "x"]
    bt_same_bits(got["out"], np.where(stored, 0.0, ct["out"]), "prior content")
    alone = plan.reverse(ct, "out", x=x, key=key, w=0.5, out=prior.copy())  # wrt= the content alone
    assert sorted(alone) == ["out"]
    bt_same_bits(alone["out"], got["out"], "wrt='out'")
    twin = eagle.deploy(rk_place_sink).reverse(ct, x=x, key=key, w=0.5, out=prior.copy())
    bt_same_bits(got, twin, "keyed vs sink, content passed")
    with pytest.raises(InputError, match=r"kernel 'rk_place': reverse: the cotangent of 'out' must hold one value "
                                         r"per position of its array \(3011\)"):
        plan.reverse({"out": np.ones(N)}, x=x, key=key, w=0.5, out=prior.copy())


def test_same_bits_on_every_thread_count_really_split():
    x, key, ct = _data(seed=5)
    want = None
    for threads in (1, 2, 4):
        plan = eagle.deploy(rk_place, threads=threads, min_chunk=SMALL)
        got = {k: np.asarray(v).copy() for k, v in plan.reverse(ct, x=x, key=key, w=0.9,
                                                                 out=np.zeros(SLOTS)).items()}
        assert (max(plan.last_reverse_chunks) > 1) == (threads > 1), (threads, plan.last_reverse_chunks)
        if want is None:
            want = got
        bt_same_bits(got, want, f"threads={threads}")


@pytest.mark.parametrize("threads", [1, 3])
def test_a_position_stored_twice_is_refused_by_name(threads):
    """Even when the two stores sit in different chunks (lanes 5 and N - 5), and when two statements of one
    kernel meet at a position; the caller's arrays are left as they were."""
    x, key, ct = _data(seed=6)
    key[key == 17] = -1
    key[N - 5] = key[5] = 17
    plan = eagle.deploy(rk_place, threads=threads, min_chunk=SMALL)
    prior = np.ones(SLOTS)
    keep = (x.copy(), key.copy())
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'rk_place': reverse: 1 position\(s\) of this "
                                         r"output, written by key, were stored more than once \(first: position 17, "
                                         r"2 stores\).*not specified.*store into a sink"):
        plan.reverse(ct, x=x, key=key, w=0.9, out=prior)
    assert np.array_equal(prior, np.ones(SLOTS)) and np.array_equal(x, keep[0]) and np.array_equal(key, keep[1])
    k = np.arange(0, 2 * 50, 2, dtype=np.int32)
    k[10] = k[9] + 1  # lane 9's second store (k + 1) meets lane 10's first
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'rk_two'.*position 19, 2 stores"):
        eagle.deploy(rk_two).reverse({"out": np.ones(100)}, x=np.ones(50), key=k, out=np.zeros(100))


def test_two_statements_into_one_output():
    rng = np.random.default_rng(7)
    k = np.arange(0, 60, 3, dtype=np.int32)
    k[4] = -1
    x, ct = rng.normal(size=20), rng.normal(size=60)
    got = eagle.deploy(rk_two).reverse({"out": ct}, x=x, key=k, out=np.zeros(60))
    c0 = np.where(k >= 0, ct[np.maximum(k, 0)], 0.0)
    c1 = np.where(k >= 0, ct[np.maximum(k + 1, 0)], 0.0)
    np.testing.assert_allclose(np.asarray(got["x"]), 3.0 * c0 + 2.0 * x * c1, rtol=1e-14)
    stored = np.zeros(60, bool)
    stored[np.r_[k[k >= 0], k[k >= 0] + 1]] = True
    bt_same_bits(got["out"], np.where(stored, 0.0, ct), "content")


def test_positions_computed_by_a_scan_beside_an_integer_output():
    rng = np.random.default_rng(8)
    x = rng.normal(size=20_000)
    plan = eagle.deploy(rk_compact, threads=2, min_chunk=SMALL)
    r = plan.run(x=x)
    kept = x[x > 0]
    np.testing.assert_allclose(np.asarray(r["out"])[:kept.size], np.sin(kept) * kept, rtol=1e-15)
    ct = rng.normal(size=x.size)
    got = plan.reverse({"out": ct}, x=x)
    at = np.cumsum(x > 0) - 1
    want = np.where(x > 0, ct[np.maximum(at, 0)] * (np.cos(x) * x + np.sin(x)), 0.0)
    np.testing.assert_allclose(np.asarray(got["x"]), want, rtol=1e-13, atol=1e-15)
    assert max(plan.last_reverse_chunks) > 1
    one = eagle.deploy(rk_compact, threads=1).reverse({"out": ct}, x=x)
    bt_same_bits(got, one, "scan positions, 2 threads vs 1")


def test_a_grid_kernel_s_transpose():
    rng = np.random.default_rng(9)
    u, k = rng.normal(size=(11, 7)), 1.7
    ct = rng.normal(size=77)
    got = eagle.deploy(rk_transpose).reverse({"out": ct}, u=u, k=k)
    pos = np.arange(7)[None, :] * 11 + np.arange(11)[:, None]
    np.testing.assert_allclose(np.asarray(got["u"]), ct[pos] * k, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(got["k"])[0], np.sum(ct[pos] * u), rtol=1e-13)


def test_a_stencil_written_by_key():
    rng = np.random.default_rng(21)
    u, ct = rng.normal(size=(11, 7)), rng.normal(size=77)
    got = eagle.deploy(rk_stencil).reverse({"out": ct}, u=u)
    pad = np.pad(u, ((0, 0), (1, 1)), mode="edge")  # (reads past the edge clamp to it)
    s = pad[:, :-2] + 2.0 * u + pad[:, 2:]
    g = ct[np.arange(7)[None, :] * 11 + np.arange(11)[:, None]] * 2.0 * s  # d out / d s at each lane
    want = 2.0 * g
    want[:, 1:] += g[:, :-1]  # lane c reads c + 1: u[c + 1] gets g[c]
    want[:, -1] += g[:, -1]  # (the last column's read of c + 1 clamps to itself)
    want[:, :-1] += g[:, 1:]
    want[:, 0] += g[:, 0]
    np.testing.assert_allclose(np.asarray(got["u"]), want, rtol=1e-13, atol=1e-14)


def test_float32():
    x, key, ct = _data(seed=10, dtype=np.float32)
    got = eagle.deploy(rk_place).reverse(ct, ("x", "w"), x=x, key=key, w=0.8, out=np.zeros(SLOTS, np.float32))
    assert np.asarray(got["x"]).dtype == np.float32
    twin = eagle.deploy(rk_place_sink).reverse(ct, x=x, key=key, w=0.8)
    bt_same_bits({k: got[k] for k in ("x", "w")}, {k: twin[k] for k in ("x", "w")}, "float32 keyed vs sink")
    dx, _ = _by_hand(x, key, ct, np.float32(0.8))
    np.testing.assert_allclose(np.asarray(got["x"]), dx, rtol=2e-6, atol=1e-6)


def test_a_bound_launch_and_a_loop_before_the_store():
    x, key, ct = _data(seed=11)
    launch = eagle.deploy(rk_place).bind(x=x, key=key, w=0.6, out=np.zeros(SLOTS))
    launch()
    a = {k: np.asarray(v).copy() for k, v in launch.reverse(ct).items()}
    b = eagle.deploy(rk_place).reverse(ct, x=x, key=key, w=0.6, out=np.zeros(SLOTS))
    bt_same_bits(a, b, "bound launch")
    ct3 = np.random.default_rng(12).normal(size=SLOTS)
    got = eagle.deploy(rk_loop).reverse({"out": ct3}, x=x, key=key, out=np.zeros(SLOTS))
    np.testing.assert_allclose(np.asarray(got["x"]), np.where(key >= 0, ct3[np.maximum(key, 0)] * 3 * x * x, 0.0),
                               rtol=1e-14, atol=1e-300)


def test_same_bits_on_the_gpu_target_as_on_the_host(target):
    if target == "host":
        pytest.skip("the host is the reference")
    x, key, ct = _data(seed=13)
    want = eagle.deploy(rk_place).reverse(ct, x=x, key=key, w=0.9, out=np.zeros(SLOTS))
    got = eagle.deploy(rk_place, target=target).reverse(ct, x=x, key=key, w=0.9, out=np.zeros(SLOTS))
    bt_same_bits(got, want, f"on {target}")
    key[3] = key[2000]
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'rk_place'.*stored more than once"):
        eagle.deploy(rk_place, target=target).reverse(ct, x=x, key=key, w=0.9, out=np.zeros(SLOTS))


def test_stores_by_key_inside_a_loop():
    """Each pass of the loop stores at its own position: the lane gets each position's cotangent times that pass's
    derivative (j); a passed array's content the cotangent where no pass stored; a position two passes (or two
    lanes) store into is refused as outside loops."""
    rng = np.random.default_rng(5)
    key = rng.permutation(40)[:30].astype(np.int32)
    key[::7] = -1
    x, ct = rng.normal(size=30), rng.normal(size=81)
    got = eagle.deploy(rk_loop_store).reverse({"out": ct}, x=x, key=key, out=np.zeros(81))
    pos = np.where(key >= 0, 2 * key + 1, 0)
    np.testing.assert_array_equal(np.asarray(got["x"]), np.where(key >= 0, ct[pos], 0.0))
    stored = np.zeros(81, bool)
    stored[np.concatenate([2 * key[key >= 0], 2 * key[key >= 0] + 1])] = True
    np.testing.assert_array_equal(np.asarray(got["out"]), np.where(stored, 0.0, ct))
    key[1] = key[2]
    out, keep = np.full(81, 3.0), (x.copy(), key.copy(), ct.copy())
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'rk_loop_store'.*stored more than once"):
        eagle.deploy(rk_loop_store).reverse({"out": ct}, x=x, key=key, out=out)
    np.testing.assert_array_equal(out, np.full(81, 3.0))  # the refused run left every passed array as it was
    for a, b in zip((x, key, ct), keep, strict=True):
        np.testing.assert_array_equal(a, b)


def test_stores_by_key_inside_a_loop_same_bits_on_threads_and_spirv():
    rng = np.random.default_rng(6)
    key = rng.permutation(N).astype(np.int32)
    key[rng.random(N) < 0.1] = -1
    planes = dict(x=rng.normal(size=N), key=key, out=np.zeros(2 * N))
    bt_grads_split_bits(rk_loop_store, {"out": rng.normal(size=2 * N)}, planes, SMALL, "loop stores by key")
    bt_grads_spirv_bits(rk_loop_store, {"out": rng.normal(size=2 * N)}, planes, "loop stores by key")


def test_refusals_by_name():
    with pytest.raises(ValueError, match=r"kernel 'rk_place': output plane 'out' is written by key.*pass "
                                         r"reverse_positions=\{'out': n\}"):
        hawk.artifact.build(rk_place, "/nonexistent-never-written", reverse=True)
    with pytest.raises(ValueError, match=r"reverse_positions= names 'tot', which is not a float output it writes by "
                                         r"key \(those: \['out'\]\)"):
        hawk.artifact.build(rk_place, "/nonexistent-never-written", reverse=True, reverse_positions={"tot": 3})


def test_an_artifact_s_reverse_built_for_the_array_s_length(tmp_path):
    """hawk.artifact.build(..., reverse=True, reverse_positions={"out": n}): the loaded reverse gives
    plan.reverse's bits (the winners kernel's counts included), and refuses another length or a repeated position
    by name."""
    import hawk.artifact
    from hawk.artifact.cli import main

    hawk.artifact.build(rk_place, tmp_path, reverse=True, reverse_positions={"out": SLOTS})
    x, key, ct = _data(seed=22)
    prior = np.random.default_rng(23).normal(size=SLOTS)
    want = eagle.deploy(rk_place).reverse(ct, x=x, key=key, w=0.4, out=prior.copy())
    art = hawk.load(tmp_path, "rk_place", threads=2, min_chunk=SMALL)
    got = art.reverse(ct, x=x, key=key, w=0.4, out=prior.copy())
    bt_same_bits(got, {k: np.asarray(v) for k, v in want.items()}, "artifact")
    with pytest.raises(InputError, match=r"kernel 'rk_place': reverse: this artifact's reverse was built for outputs "
                                         r"written by key of lengths \{'out': 3011\}, this run's are \{'out': 3000\}: "
                                         r"rebuild it with reverse_positions=\{'out': 3000\}"):
        art.reverse({"out": ct["out"][:N]}, x=x, key=np.where(key < N, key, -1).astype(np.int32), w=0.4)
    key[key == 9] = -1
    key[4] = key[2999] = 9
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'rk_place': reverse: 1 position\(s\).*stored more "
                                         r"than once \(first: position 9, 2 stores\)"):
        art.reverse(ct, x=x, key=key, w=0.4, out=prior.copy())
    assert main(["build", "--reverse", "--reverse-positions", f"out={SLOTS}", "--out", str(tmp_path / "cli"),
                 f"{__file__}:rk_place"]) == 0
    got = hawk.load(tmp_path / "cli", "rk_place").reverse(ct, x=x, key=np.where(key == 9, -1, key).astype(np.int32),
                                                          w=0.4, out=prior.copy())
    assert sorted(got) == ["out", "w", "x"]


def test_torch_autograd_bitwise_plan_reverse_and_gradcheck():
    torch = pytest.importorskip("torch")
    import eagle.torch

    x, key, ct = _data(seed=14, n=N)
    f = eagle.torch.wrap(rk_place)
    xt = torch.from_numpy(x.copy()).requires_grad_()
    wt = torch.tensor(0.9, dtype=torch.float64, requires_grad=True)
    cto = ct["out"][:N]
    key = np.where(key < N, key, -1).astype(np.int32)  # (positions inside the lane-shaped result)
    r = f(key=torch.from_numpy(key), x=xt, w=wt)
    ((r["out"] * torch.from_numpy(cto)).sum() + 0.7 * r["tot"].sum()).backward()
    want = eagle.deploy(rk_place).reverse({"out": cto, "tot": np.array([0.7])}, x=x, key=key, w=0.9)
    bt_same_bits({"x": xt.grad.numpy(), "w": wt.grad.reshape(1).numpy()}, {"x": want["x"], "w": want["w"]},
                 "torch backward")
    def loss(v):  # (the same under torch.compile, with no graph break: the reverse is a custom op)
        r = f(key=torch.from_numpy(key), x=v, w=0.9)
        return (r["out"] * torch.from_numpy(cto)).sum() + 0.7 * r["tot"].sum()

    # aot_eager: Dynamo and AOT autograd trace the op and its backward as inductor would (test_bridge_torch's
    # inductor case covers inductor's own code generation, 35 s of a cold compile that this test spent too)
    g, = torch.autograd.grad(torch.compile(loss, fullgraph=True, backend="aot_eager")(xt), [xt])
    bt_same_bits(g.numpy(), np.asarray(want["x"]), "torch.compile backward")
    k = torch.from_numpy(np.random.default_rng(15).permutation(12).astype(np.int32))
    k[3] = -1
    xs = torch.from_numpy(np.random.default_rng(16).normal(size=12)).requires_grad_()
    assert torch.autograd.gradcheck(lambda v: f(key=k, x=v, w=1.1)["out"], (xs,))
    k[5] = k[6]
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'rk_place'.*stored more than once"):
        f(key=k, x=xs, w=1.1)["out"].sum().backward()


def test_jax_grad_under_jit_bitwise_plan_reverse_and_the_refusal_inside_the_compiled_backward():
    """The backward runs the winners kernel's counts through eagle/call_plan.c's check, which fails the call with
    plan.reverse's words when a position was stored twice (the values are only known as the compiled code runs)."""
    jax = pytest.importorskip("jax")
    import eagle.jax

    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    x, key, ct = _data(seed=17)
    f = eagle.jax.wrap(rk_place)
    prior = np.random.default_rng(18).normal(size=SLOTS)

    def loss(v, w, out):
        r = f(key=key, x=v, w=w, out=out)
        return jnp.sum(r["out"] * ct["out"]) + 0.7 * r["tot"][0]

    got = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(jnp.asarray(x), 0.9, jnp.asarray(prior))
    want = eagle.deploy(rk_place).reverse(ct, x=x, key=key, w=0.9, out=prior.copy())
    bt_same_bits({"x": np.asarray(got[0]), "w": np.asarray(got[1]).reshape(1), "out": np.asarray(got[2])},
                 {n: np.asarray(v) for n, v in want.items()}, "jax.grad")
    lanes = np.where(key < N, key, -1).astype(np.int32)  # the output left out: the lane shape
    g = jax.grad(lambda v: jnp.sum(f(key=lanes, x=v, w=0.9)["out"] * ct["out"][:N]))(jnp.asarray(x))
    bt_same_bits(np.asarray(g), np.asarray(eagle.deploy(rk_place).reverse(
        {"out": ct["out"][:N]}, x=x, key=lanes, w=0.9)["x"]), "jax.grad, output left out")
    xs = jnp.asarray(np.random.default_rng(19).normal(size=(3, N)))  # vmap of grad: a launch per row
    gs = jax.vmap(jax.grad(lambda v: jnp.sum(f(key=lanes, x=v, w=0.9)["out"] * ct["out"][:N])))(xs)
    for i in range(3):
        bt_same_bits(np.asarray(gs[i]), np.asarray(eagle.deploy(rk_place).reverse(
            {"out": ct["out"][:N]}, x=np.asarray(xs[i]), key=lanes, w=0.9)["x"]), f"vmap of grad, row {i}")
    lanes[lanes == 11] = -1
    lanes[7] = lanes[N - 3] = 11
    with pytest.raises(Exception, match=r"plane 'out' of kernel 'rk_place': reverse: \d+ position\(s\) of this "
                                        r"output, written by key, were stored more than once \(first: position "
                                        r"\d+, 2 stores\)"):
        jax.block_until_ready(jax.jit(jax.grad(lambda v: jnp.sum(f(key=lanes, x=v, w=0.9)["out"])))(
            jnp.asarray(x)))


def test_warp_tape_bitwise_plan_reverse():
    wp = pytest.importorskip("warp")
    import eagle.warp

    wp.config.quiet = True
    wp.init()
    x, key, ct = _data(seed=20)
    lanes = np.where(key < N, key, -1).astype(np.int32)
    xs = wp.array(x, dtype=wp.float64, device="cpu", requires_grad=True)
    tape = wp.Tape()
    with tape:
        r = eagle.warp.wrap(rk_place)(key=wp.array(lanes, dtype=wp.int32, device="cpu"), x=xs, w=0.5)
    tape.backward(grads={r["out"]: wp.array(ct["out"][:N], dtype=wp.float64, device="cpu")})
    want = eagle.deploy(rk_place).reverse({"out": ct["out"][:N]}, x=x, key=lanes, w=0.5)["x"]
    bt_same_bits(xs.grad.numpy(), np.asarray(want), "warp tape")
