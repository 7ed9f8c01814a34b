"""eagle.torch: a hawk kernel as a torch.library custom op, checked against Plan.run.

Pinned here: the forward of every plane kind (Grid, Scalar, Vector, Index, Table, Param, a passed sink) and of a
split kernel gives Plan.run's very bits (ordered cells included); results are tensors, one or a dict by name; a
passed sink is written in place and handed back as the caller's tensor; bad inputs raise Plan.run's own error;
`torch.library.opcheck` passes (schema, fake tensors, AOT dispatch with dynamic shapes on plain inputs; the
autograd registration on inputs that require grad); torch.compile(fullgraph=True) traces the op without a graph
break or a recompile across dynamic sizes; the prepared per-shape path is safe from several threads. Gradients
come from plan.reverse through a backward custom op: they match torch's own autograd of the same computation
written in torch, pass gradcheck (float64), carry the reverse's very bits (a kernel storing into a sink with
`= v` included: only the winning lane gets a slot's cotangent), and run under torch.compile; outputs written in
place refuse gradients by name.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import eagle  # noqa: E402
import eagle.torch  # noqa: E402
import hawk  # noqa: E402
import hawk.math as hawk_math  # noqa: E402
from eagle import InputError  # noqa: E402
from hawk import Grid, Index, Mutable, Param, Scalar, Table, Vector  # noqa: E402

FORWARD_TESTS = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")
# torch's own modules warn on import under torch.compile (torch.jit.script_method): not this suite's to fix
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:torch.jit")


@hawk.kernel
def tb_all(lane: Grid["row", "col":5], x: Scalar, v: Vector[3], key: Index, t: Table["col":5], s: Param,
           acc: Mutable["slot":4], y: Mutable[Scalar], total: Mutable[Scalar]):
    hawk.scatter(acc)[key] += x
    y = s * x * t.at(col=lane.col) + v[0] - v[2]
    total = hawk.sum(x * v[1], policy="ordered")


@hawk.kernel
def tb_axpy(x: Scalar, w: Scalar, s: Param) -> Scalar:
    return s * x + w


@hawk.kernel
def tb_split(v: Vector[3], tot: Mutable[Vector[3]], z: Mutable[Vector[3]]):
    tot = hawk.sum(v, policy="ordered")
    z = v / tot


@hawk.kernel
def tb_ramp(lane: Grid["row", "col":4], s: Param) -> Scalar:
    return s * (lane.row * 4 + lane.col)


def _planes(rows=3, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return dict(x=rng.normal(size=(rows, 5)).astype(dtype), v=rng.normal(size=(3, rows, 5)).astype(dtype),
                key=rng.integers(0, 4, size=(rows, 5)), t=rng.normal(size=5).astype(dtype), s=0.5)


def _torch(planes):
    return {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v) for k, v in planes.items()}


def _same_bits(got, want):
    """Tensors (or a dict of them) against Plan.run's eagle.Arrays, bit for bit."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want)
        for k in want:
            _same_bits(got[k], want[k])
        return
    assert isinstance(got, torch.Tensor)
    w = np.asarray(want)
    g = got.detach().numpy()
    assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_plane_kind_gives_plan_runs_bits(dtype):
    planes = _planes(dtype=dtype)
    want = eagle.deploy(tb_all).run(**planes)
    got = eagle.torch.wrap(tb_all)(**_torch(planes))
    _same_bits(got, want)
    assert got["y"].dtype == (torch.float64 if dtype == np.float64 else torch.float32)


def test_a_passed_sink_is_written_in_place_and_handed_back():
    planes = _planes()
    f = eagle.torch.wrap(tb_all)
    start = np.arange(4.0)
    want = eagle.deploy(tb_all).run(**planes, acc=start.copy())
    acc = torch.from_numpy(start.copy())
    ptr = acc.data_ptr()
    got = f(**_torch(planes), acc=acc)
    assert got["acc"] is acc and acc.data_ptr() == ptr
    _same_bits(got, want)
    y = torch.zeros(3, 5, dtype=torch.float64)  # a per-lane output passed too (two mutated planes)
    got = f(**_torch(planes), acc=torch.from_numpy(start.copy()), y=y)
    assert got["y"] is y
    _same_bits(got, want)


def test_single_output_and_numbers():
    x, w = np.linspace(-1.0, 2.0, 11), np.ones(11)
    want = eagle.deploy(tb_axpy).run(x=x, w=w, s=0.25)
    f = eagle.torch.wrap(tb_axpy)
    _same_bits(f(x=torch.from_numpy(x), w=torch.from_numpy(w), s=0.25), want)
    _same_bits(f(x=x, w=w, s=torch.tensor(0.25, dtype=torch.float64)), want)  # NumPy arrays, a 0-d tensor Param


@hawk.kernel
def tb_decay(x: Scalar, y: Mutable[Scalar], tot: Mutable[Scalar]):
    y = y * 0.5 + x  # reads y before assigning it: zeros when the caller leaves y out
    tot = hawk.sum(y, policy="ordered")


def test_an_omitted_output_read_before_assigned_starts_at_zero_at_every_call():
    """As Plan.run: an output the caller leaves out holds zeros when the body reads it, at every call (the
    prepared path hands the stages a fresh, uninitialized result buffer each time, which the first stage zeroes)."""
    f = eagle.torch.wrap(tb_decay)
    for i in range(12):
        x = torch.full((50_000,), float(i + 1), dtype=torch.float64)
        got = f(x=x)
        assert torch.equal(got["y"], x), i
        _same_bits(got, eagle.deploy(tb_decay).run(x=x.numpy()))


def test_the_prepared_path_per_shape_with_params_strides_and_threads():
    """The op's prepared path (a call plan per set of shapes, the tensors' addresses swapped in) against Plan.run:
    a Param that changes call after call (a float; a float64 0-d tensor into a float32 run), an nn.Parameter, a
    non-contiguous tensor (Plan.run's path), a size change, fresh result tensors per call, and several threads
    calling at once."""
    import threading

    f, plan = eagle.torch.wrap(tb_axpy), eagle.deploy(tb_axpy)
    rng = np.random.default_rng(20)
    x, w = rng.normal(size=64), rng.normal(size=64)
    for s in (0.25, 0.5, -3.0, 0.25):
        _same_bits(f(x=torch.from_numpy(x), w=torch.from_numpy(w), s=s), plan.run(x=x, w=w, s=s))
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    _same_bits(f(x=torch.from_numpy(x32), w=torch.from_numpy(w32), s=torch.tensor(0.1, dtype=torch.float64)),
               plan.run(x=x32, w=w32, s=0.1))
    p = torch.nn.Parameter(torch.from_numpy(x.copy()))  # a tensor subclass, requiring grad
    _same_bits(f(x=p, w=torch.from_numpy(w), s=0.5), plan.run(x=x, w=w, s=0.5))
    f(x=p, w=torch.from_numpy(w), s=0.5).sum().backward()
    assert p.grad.numpy().tobytes() == np.full(64, 0.5).tobytes()
    strided = torch.from_numpy(rng.normal(size=128))[::2]
    _same_bits(f(x=strided, w=torch.from_numpy(w), s=0.5), plan.run(x=strided.numpy(), w=w, s=0.5))
    _same_bits(f(x=torch.from_numpy(x[:30]), w=torch.from_numpy(w[:30]), s=0.5), plan.run(x=x[:30], w=w[:30], s=0.5))
    xt, wt = torch.from_numpy(x), torch.from_numpy(w)
    a, b = f(x=xt, w=wt, s=1.0), f(x=xt, w=wt, s=2.0)
    assert a.data_ptr() != b.data_ptr() and a.numpy().tobytes() != b.numpy().tobytes()
    xs = [rng.normal(size=64) for _ in range(4)]
    wants = [np.asarray(plan.run(x=xk, w=w, s=0.5)).tobytes() for xk in xs]
    bad = []

    def work(k):
        xt, wt = torch.from_numpy(xs[k]), torch.from_numpy(w)
        for _ in range(300):
            if f(x=xt, w=wt, s=0.5).numpy().tobytes() != wants[k]:
                bad.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_split_kernel_runs_its_stages_with_the_same_bits():
    v = np.random.default_rng(3).normal(size=(3, 40))
    assert tb_split.stage_count == 2
    want = eagle.deploy(tb_split).run(v=v)
    got = eagle.torch.wrap(tb_split)(v=torch.from_numpy(v))
    _same_bits(got, want)
    assert sorted(got) == ["tot_0", "tot_1", "tot_2", "z"]


def test_grid_extent_by_label():
    want = eagle.deploy(tb_ramp).run(row=3, s=2.0)
    _same_bits(eagle.torch.wrap(tb_ramp)(row=3, s=2.0), want)


@pytest.mark.parametrize("change", [
    {"x": np.ones((3, 5), dtype=np.int64)},  # wrong dtype
    {"v": np.ones((2, 3, 5))},  # wrong shape
    {"t": np.ones(4)},  # a table of the wrong shape
    {"key": np.zeros((3, 5))},  # float keys
    {"nope": np.ones(3)},  # unknown plane
    {"s": np.ones(2)},  # a Param that is not one number
])
def test_bad_inputs_raise_plan_runs_error(change):
    planes = {**_planes(), **change}
    with pytest.raises(InputError) as want:
        eagle.deploy(tb_all).run(**planes)
    with pytest.raises(InputError) as got:
        eagle.torch.wrap(tb_all)(**_torch(planes))
    assert str(got.value) == str(want.value)


def test_a_missing_plane_and_a_device_array_raise_plan_runs_error():
    planes = _planes()
    del planes["t"]
    with pytest.raises(InputError) as want:
        eagle.deploy(tb_all).run(**planes)
    with pytest.raises(InputError) as got:
        eagle.torch.wrap(tb_all)(**_torch(planes))
    assert str(got.value) == str(want.value) and "'t'" in str(got.value)

    class OnCuda:  # what a CUDA tensor or array looks like through DLPack (this machine may have no CUDA)
        def __dlpack__(self, **kw):
            raise AssertionError("never read")

        def __dlpack_device__(self):
            return (2, 0)

    planes = {**_planes(), "x": OnCuda()}
    with pytest.raises(InputError) as want:
        eagle.deploy(tb_all).run(**planes)
    with pytest.raises(InputError) as got:
        eagle.torch.wrap(tb_all)(**_torch(planes))
    assert str(got.value) == str(want.value) and "cuda:0" in str(got.value) and "plane 'x'" in str(got.value)


def test_opcheck_single_dict_split_and_inplace():
    x, w = torch.linspace(0.0, 1.0, 9, dtype=torch.float64), torch.ones(9, dtype=torch.float64)
    s = torch.tensor(0.5, dtype=torch.float64)
    f = eagle.torch.wrap(tb_axpy)
    assert torch.library.opcheck(f.op, (x, w, s), test_utils=FORWARD_TESTS)
    # the autograd registration check needs inputs that require grad (it does not run the backward)
    torch.library.opcheck(f.op, (x.clone().requires_grad_(), w, s), test_utils="test_autograd_registration")
    g = eagle.torch.wrap(tb_all)
    args = [torch.from_numpy(v) if isinstance(v, np.ndarray) else torch.tensor(v, dtype=torch.float64)
            for v in _planes().values()]
    torch.library.opcheck(g.op, tuple(args), test_utils=FORWARD_TESTS)
    grad_args = [a.clone().requires_grad_() if a.is_floating_point() else a for a in args]
    torch.library.opcheck(g.op, tuple(grad_args), test_utils="test_autograd_registration")
    acc = torch.zeros(4, dtype=torch.float64)  # the in-place op, a sink passed
    torch.library.opcheck(g.op_inplace, (*args, None, acc, None, None), test_utils=FORWARD_TESTS)
    torch.library.opcheck(g.op_inplace, (*grad_args, None, acc, None, None), test_utils="test_autograd_registration")
    h = eagle.torch.wrap(tb_split)
    v = torch.from_numpy(np.random.default_rng(5).normal(size=(3, 12)))
    torch.library.opcheck(h.op, (v,), test_utils=FORWARD_TESTS)
    torch.library.opcheck(h.op, (v.clone().requires_grad_(),), test_utils="test_autograd_registration")


@hawk.kernel
def tb_loss(x: Scalar, w: Scalar, s: Param, total: Mutable[Scalar]):
    total = hawk.sum(s * hawk_math.sin(x) * w * w, policy="ordered")


@hawk.kernel
def tb_centre(x: Scalar) -> Scalar:
    return x - hawk.mean(x)


@hawk.kernel
def tb_hist(key: Index, x: Scalar, acc: Mutable["bin":6]):
    hawk.scatter(acc, policy="ordered")[key] += x * x


@hawk.kernel
def tb_stencil(g: Grid["r", "c":6], u: Scalar, k: Param) -> Scalar:
    return k * (u.at(g.r, g.c + 1) - 2.0 * u + u.at(g.r, g.c - 1))


def _grad_cases(rng):
    """(wrapped kernel, planes, names that require grad, the same computation in torch)."""
    x, w = torch.from_numpy(rng.normal(size=40)), torch.from_numpy(rng.normal(size=40))
    key = torch.from_numpy(rng.integers(-1, 6, size=40).astype(np.int32))
    u = torch.from_numpy(rng.normal(size=(5, 6)))

    def hist_torch(p):
        keep = p["key"] >= 0
        return torch.zeros(6, dtype=torch.float64).index_add(0, p["key"][keep].long(), p["x"][keep] ** 2)

    def stencil_torch(p):
        uu = p["u"]
        right = torch.cat([uu[:, 1:], uu[:, -1:]], 1)  # .at clamps to the grid's edge
        left = torch.cat([uu[:, :1], uu[:, :-1]], 1)
        return p["k"] * (right - 2.0 * uu + left)

    return [
        (tb_loss, dict(x=x, w=w, s=torch.tensor(0.7, dtype=torch.float64)), ("x", "w", "s"),
         lambda p: (p["s"] * torch.sin(p["x"]) * p["w"] ** 2).sum().reshape(1)),
        (tb_centre, dict(x=x), ("x",), lambda p: p["x"] - p["x"].mean()),
        (tb_hist, dict(key=key, x=x), ("x",), hist_torch),
        (tb_stencil, dict(u=u, k=torch.tensor(0.3, dtype=torch.float64)), ("u", "k"), stencil_torch),
    ]


@pytest.mark.parametrize("case", range(4))
def test_gradients_match_torch_autograd_and_gradcheck(case):
    kernel, planes, names, in_torch = _grad_cases(np.random.default_rng(case))[case]
    f = eagle.torch.wrap(kernel)

    def run(*vals):
        return f(**{**planes, **dict(zip(names, vals, strict=True))})

    leaves = [planes[n].clone().requires_grad_() for n in names]
    assert torch.autograd.gradcheck(run, tuple(leaves), eps=1e-6, atol=1e-7, rtol=1e-6)
    ct = torch.from_numpy(np.random.default_rng(9).normal(size=tuple(run(*leaves).shape)))
    ours = torch.autograd.grad(run(*leaves), leaves, ct)
    ref_leaves = [planes[n].clone().requires_grad_() for n in names]
    theirs = torch.autograd.grad(in_torch({**planes, **dict(zip(names, ref_leaves, strict=True))}), ref_leaves, ct)
    for n, a, b in zip(names, ours, theirs, strict=True):
        assert a.shape == planes[n].shape and a.dtype == planes[n].dtype
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12), n
    # the gradients are the reverse's: plan.reverse's very bits
    want = eagle.deploy(kernel).reverse(
        ct.numpy(), **{k: (v.item() if v.dim() == 0 else v.numpy()) for k, v in planes.items()})
    for n, a in zip(names, ours, strict=True):
        assert a.numpy().tobytes() == np.asarray(want[n]).reshape(a.shape).tobytes(), n


def test_opcheck_with_the_backward_op():
    kernel, planes, names, _ = _grad_cases(np.random.default_rng(1))[0]
    f = eagle.torch.wrap(kernel)
    args = [planes[n].clone().requires_grad_() if n in names else planes[n] for n in f._args(False)]
    assert torch.library.opcheck(f.op, tuple(args))  # all four checks, the AOT one tracing the backward op
    ct = torch.ones(1, dtype=torch.float64)
    torch.library.opcheck(f.rop, (*[planes[n] for n in f._args(False)], ct), test_utils=FORWARD_TESTS)


def test_backward_under_compile_and_integer_planes_get_none():
    f = eagle.torch.wrap(tb_hist)
    rng = np.random.default_rng(4)
    key = torch.from_numpy(rng.integers(0, 6, size=30).astype(np.int32))
    x = torch.from_numpy(rng.normal(size=30)).requires_grad_()

    @torch.compile(fullgraph=True, backend="aot_eager")
    def loss(x):
        return (f(key=key, x=x) ** 2).sum()

    loss(x).backward()
    x2 = x.detach().clone().requires_grad_()
    (f(key=key, x=x2) ** 2).sum().backward()
    assert x.grad.numpy().tobytes() == x2.grad.numpy().tobytes()


def test_gradients_do_not_flow_through_written_in_place_outputs():
    acc = torch.zeros(4, dtype=torch.float64)
    planes = _torch(_planes())
    planes["x"] = planes["x"].clone().requires_grad_()
    res = eagle.torch.wrap(tb_all)(**planes, acc=acc)
    with pytest.raises(RuntimeError, match="written in place"):
        res["y"].sum().backward()


def test_compile_fullgraph_without_recompiles_across_dynamic_sizes():
    from torch._dynamo.utils import counters

    f = eagle.torch.wrap(tb_split)
    torch.compiler.reset()
    counters.clear()

    @torch.compile(fullgraph=True, backend="aot_eager")
    def step(v):
        out = f(v=v)
        return out["z"] * 2.0, out["tot_1"]

    for n in (7, 9, 12):
        v = torch.from_numpy(np.random.default_rng(n).normal(size=(3, n)))
        if n == 7:
            torch._dynamo.mark_dynamic(v, 1)
        z, tot = step(v)
        want = eagle.deploy(tb_split).run(v=v.numpy())
        assert z.numpy().tobytes() == (np.asarray(want["z"]) * 2.0).tobytes()
        assert tot.numpy().tobytes() == np.asarray(want["tot_1"]).tobytes()
    assert counters["stats"]["unique_graphs"] == 1


@pytest.mark.slow
def test_compile_with_inductor_every_plane_kind():
    g = eagle.torch.wrap(tb_all)
    torch.compiler.reset()

    @torch.compile(fullgraph=True, dynamic=True)
    def step(planes):
        out = g(**planes)
        return out["y"] + 1.0, out["total"], out["acc"]

    for rows in (3, 4):
        planes = _planes(rows=rows, seed=rows)
        y, total, acc = step(_torch(planes))
        want = eagle.deploy(tb_all).run(**planes)
        assert np.array_equal(y.numpy(), np.asarray(want["y"]) + 1.0)
        assert total.numpy().tobytes() == np.asarray(want["total"]).tobytes()  # ordered: the same bits
        assert acc.numpy().tobytes() == np.asarray(want["acc"]).tobytes()


def test_compile_with_a_passed_sink_writes_it_in_place():
    g = eagle.torch.wrap(tb_all)
    torch.compiler.reset()

    @torch.compile(fullgraph=True, backend="aot_eager")
    def step(planes, acc):
        out = g(**planes, acc=acc)
        return out["y"] * 2.0, out["acc"]

    planes = _planes()
    want = eagle.deploy(tb_all).run(**planes, acc=np.ones(4))
    acc = torch.ones(4, dtype=torch.float64)
    y, got = step(_torch(planes), acc)
    assert acc.numpy().tobytes() == np.asarray(want["acc"]).tobytes() and got.data_ptr() == acc.data_ptr()
    assert y.numpy().tobytes() == (np.asarray(want["y"]) * 2.0).tobytes()


@hawk.kernel
def tb_store(key: Index, x: Scalar, s: Param, acc: Mutable["bin":6]):
    hawk.scatter(acc)[key] = s * x * x


def test_gradients_of_a_store_kernel_are_the_reverses_with_winners():
    """`= v` into a sink: only the lane that won a slot (the last in lane order) gets its cotangent back."""
    rng = np.random.default_rng(16)
    x = torch.from_numpy(rng.normal(size=40))
    key = torch.from_numpy(rng.integers(-1, 6, size=40).astype(np.int32))
    s = torch.tensor(0.7, dtype=torch.float64)
    f = eagle.torch.wrap(tb_store)
    leaves = (x.clone().requires_grad_(), s.clone().requires_grad_())
    assert torch.autograd.gradcheck(lambda x, s: f(key=key, x=x, s=s), leaves, eps=1e-6, atol=1e-7, rtol=1e-6)
    ct = torch.from_numpy(rng.normal(size=6))
    gx, gs = torch.autograd.grad(f(key=key, x=leaves[0], s=leaves[1]), leaves, ct)
    want = eagle.deploy(tb_store).reverse(ct.numpy(), key=key.numpy(), x=x.numpy(), s=0.7)
    assert gx.numpy().tobytes() == np.asarray(want["x"]).tobytes()
    assert gs.numpy().tobytes() == np.asarray(want["s"]).reshape(()).tobytes()
    won = {int(k): lane for lane, k in enumerate(key.numpy()) if k >= 0}  # the last lane per slot
    by_hand = np.zeros(40)
    for slot, lane in won.items():
        by_hand[lane] = ct[slot].item() * 2.0 * 0.7 * x[lane].item()
    assert np.allclose(gx.numpy(), by_hand, rtol=1e-14, atol=0)


@hawk.kernel
def tb_count_keys(key: Index, acc: Mutable["slot":4]):
    hawk.scatter(acc)[key] += 1.0


def test_a_kernel_without_float_inputs_has_no_backward_to_define():
    """Keys alone (no float input): nothing to differentiate. Its reverse op once failed to define (an empty
    tuple schema); the op runs eager and compiled, and passes opcheck."""
    f = eagle.torch.wrap(tb_count_keys)
    key = torch.tensor([0, 1, 1, 3, -1])
    want = np.asarray(eagle.deploy(tb_count_keys).run(key=key.numpy()))
    assert np.array_equal(f(key=key).numpy(), want) and want.tolist() == [1.0, 2.0, 0.0, 1.0]
    assert np.array_equal(torch.compile(lambda k: f(key=k), fullgraph=True)(key).numpy(), want)
    torch.library.opcheck(f.op, (key,))
