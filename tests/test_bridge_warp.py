"""eagle.warp: a hawk kernel called with wp.arrays, checked against Plan.run.

Pinned here: every plane kind (Grid, Scalar, Vector, Index, Table, Param, a passed sink) and a split kernel give
Plan.run's very bits as wp.arrays; results are wp.arrays over eagle's own buffers, and passed outputs and sinks are
the caller's arrays (the same objects and data pointers), written in place; bad inputs raise Plan.run's own error;
under a wp.Tape, a call whose inputs require grad records itself, Warp kernels and hawk kernels alternate in one
taped forward, and tape.backward() runs the reverse between Warp's own adjoints.
"""

import numpy as np
import pytest

wp = pytest.importorskip("warp")

import eagle  # noqa: E402
import eagle.warp  # noqa: E402
import hawk  # noqa: E402
from eagle import InputError  # noqa: E402
from hawk import Grid, Index, Mutable, Param, Scalar, Table, Vector  # noqa: E402

wp.config.quiet = True


@hawk.kernel
def wb_all(lane: Grid["row", "col":5], x: Scalar, v: Vector[3], key: Index, t: Table["col":5], s: Param,
           acc: Mutable["slot":4], y: Mutable[Scalar], total: Mutable[Scalar]):
    hawk.scatter(acc)[key] += x
    y = s * x * t.at(col=lane.col) + v[0] - v[2]
    total = hawk.sum(x * v[1], policy="ordered")


@hawk.kernel
def wb_split(v: Vector[3], tot: Mutable[Vector[3]], z: Mutable[Vector[3]]):
    tot = hawk.sum(v, policy="ordered")
    z = v / tot


@hawk.kernel
def wb_scale(x: Scalar, s: Param) -> Scalar:
    return s * x


@hawk.kernel
def wb_decay(x: Scalar, y: Mutable[Scalar], tot: Mutable[Scalar]):
    y = y * 0.5 + x * x  # (reads y's initial contents: written in place, so the tape keeps them as they were)
    tot = hawk.sum(y * x, policy="ordered")


def _planes(rows=3, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return dict(x=rng.normal(size=(rows, 5)).astype(dtype), v=rng.normal(size=(3, rows, 5)).astype(dtype),
                key=rng.integers(0, 4, size=(rows, 5)), t=rng.normal(size=5).astype(dtype), s=0.5)


def _warp(planes, requires_grad=False):
    return {k: (wp.array(v, dtype=wp.dtype_from_numpy(v.dtype), device="cpu",
                         requires_grad=requires_grad and v.dtype.kind == "f")
                if isinstance(v, np.ndarray) else v) for k, v in planes.items()}


def _same_bits(got, want):
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want)
        for k in want:
            _same_bits(got[k], want[k])
        return
    assert isinstance(got, wp.array)
    g, w = got.numpy(), np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_plane_kind_gives_plan_runs_bits(dtype):
    planes = _planes(dtype=dtype)
    _same_bits(eagle.warp.wrap(wb_all)(**_warp(planes)), eagle.deploy(wb_all).run(**planes))


def test_passed_arrays_are_written_in_place_without_copies():
    planes = _planes()
    start = np.arange(4.0)
    want = eagle.deploy(wb_all).run(**planes, acc=start.copy())
    acc = wp.array(start, dtype=wp.float64, device="cpu")
    y = wp.zeros((3, 5), dtype=wp.float64, device="cpu")
    ptrs = (acc.ptr, y.ptr)
    got = eagle.warp.wrap(wb_all)(**_warp(planes), acc=acc, y=y)
    assert got["acc"] is acc and got["y"] is y and (acc.ptr, y.ptr) == ptrs
    _same_bits(got, want)
    assert got["total"].ptr == got["total"].numpy().ctypes.data  # a wp.array over eagle's own buffer


def test_inputs_are_read_where_they_lie():
    # a lane-local input that is also the output array: updated in place, so the run read the wp.array's memory
    x = wp.array(np.linspace(1.0, 2.0, 6), dtype=wp.float64, device="cpu")

    @hawk.kernel
    def wb_twice(x: Scalar, y: Mutable[Scalar]):
        y = 2.0 * x

    out = eagle.warp.wrap(wb_twice)(x=x, y=x)
    assert out is x and np.array_equal(x.numpy(), 2.0 * np.linspace(1.0, 2.0, 6))


def test_split_kernel_runs_its_stages_with_the_same_bits():
    v = np.random.default_rng(3).normal(size=(3, 40))
    got = eagle.warp.wrap(wb_split)(v=wp.array(v, dtype=wp.float64, device="cpu"))
    _same_bits(got, eagle.deploy(wb_split).run(v=v))


@pytest.mark.parametrize("change", [
    {"x": np.ones((3, 5), dtype=np.int64)},  # wrong dtype
    {"v": np.ones((2, 3, 5))},  # wrong shape
    {"nope": np.ones(3)},  # unknown plane
])
def test_bad_inputs_raise_plan_runs_error(change):
    planes = {**_planes(), **change}
    with pytest.raises(InputError) as want:
        eagle.deploy(wb_all).run(**planes)
    with pytest.raises(InputError) as got:
        eagle.warp.wrap(wb_all)(**_warp(planes))
    assert str(got.value) == str(want.value)


@pytest.mark.skipif(not wp.is_cuda_available(), reason="no CUDA device for Warp here")
def test_a_cuda_array_is_refused_by_name():
    x = wp.array(np.ones(4), dtype=wp.float64, device="cuda:0")
    with pytest.raises(InputError, match="plane 'x' of kernel 'wb_scale'.*cuda:0.*host memory"):
        eagle.warp.wrap(wb_scale)(x=x, s=1.0)


@wp.kernel
def _square(a: wp.array(dtype=wp.float64), b: wp.array(dtype=wp.float64)):
    i = wp.tid()
    b[i] = a[i] * a[i]


def test_a_taped_pipeline_alternates_warp_and_hawk_and_back():
    x0 = np.linspace(-1.0, 1.0, 8)
    x = wp.array(x0, dtype=wp.float64, device="cpu", requires_grad=True)
    sq = wp.zeros(8, dtype=wp.float64, device="cpu", requires_grad=True)
    out = wp.zeros(8, dtype=wp.float64, device="cpu", requires_grad=True)
    f = eagle.warp.wrap(wb_scale)
    tape = wp.Tape()
    with tape:
        wp.launch(_square, dim=8, inputs=[x, sq], device="cpu")
        mid = f(x=sq, s=3.0)
        wp.launch(_square, dim=8, inputs=[mid, out], device="cpu")
    assert mid.requires_grad and any(callable(rec) and getattr(rec, "__self__", None) is f for rec in tape.launches)
    mid0 = 3.0 * (x0 * x0)
    assert np.array_equal(mid.numpy(), mid0) and np.array_equal(out.numpy(), mid0 * mid0)
    tape.backward(grads={out: wp.ones(8, dtype=wp.float64, device="cpu")})
    # out = (3 x^2)^2 = 9 x^4: d out / dx = 36 x^3, through Warp's adjoints and the reverse between them
    assert np.allclose(x.grad.numpy(), 36.0 * x0 ** 3, rtol=1e-14, atol=1e-15)
    want = np.asarray(eagle.deploy(wb_scale).reverse(2.0 * mid0, x=x0 * x0, s=3.0)["x"])  # the hawk step's adjoint
    assert x.grad.numpy().tobytes() == (2.0 * (x0 * want)).tobytes()  # Warp's square adjoint: g*a + g*a
    # without a tape (or without inputs that require grad) nothing is recorded and results carry no gradient
    plain = f(x=wp.array(x0, dtype=wp.float64, device="cpu"), s=3.0)
    assert not plain.requires_grad and np.array_equal(plain.numpy(), 3.0 * x0)


def test_the_tape_keeps_a_passed_outputs_initial_contents():
    """A passed output the body reads before assigning it is written in place by the call; the recorded
    backward reads its contents as they were at the call, so x's gradient is d tot/dx = 0.5 y0 + 3 x^2."""
    x0, y0 = np.linspace(-1.0, 1.0, 8), np.linspace(2.0, 3.0, 8)
    x = wp.array(x0, dtype=wp.float64, device="cpu", requires_grad=True)
    y = wp.array(y0, dtype=wp.float64, device="cpu")
    f = eagle.warp.wrap(wb_decay)
    tape = wp.Tape()
    with tape:
        out = f(x=x, y=y)
    assert out["y"] is y and np.array_equal(y.numpy(), y0 * 0.5 + x0 * x0)  # written in place
    tape.backward(grads={out["tot"]: wp.ones(1, dtype=wp.float64, device="cpu")})
    want = np.asarray(eagle.deploy(wb_decay).reverse({"tot": 1.0}, wrt=("x",), x=x0, y=y0)["x"])
    assert x.grad.numpy().tobytes() == want.tobytes()
    assert np.allclose(want, 0.5 * y0 + 3.0 * x0 * x0, rtol=1e-15)
