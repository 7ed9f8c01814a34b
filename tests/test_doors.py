"""The doors into a deployed kernel besides run(): plan.bind(...).launch(), eagle.reduce, eagle.Graph and the
step loops simulate / until_done.

Behaviour pinned here (what a launch does on repeat):

* `plan.bind(**planes)` checks and allocates once; each `launch()` gives the same results as `run` would;
* `launch()` hands back the bound result buffers themselves (the same objects every launch, overwritten):
  copy a result to keep it past the next launch;
* cells start fresh at every launch, and so does a sink the caller did not pass; a sink the caller passed
  is written in place and keeps accumulating, launch after launch (the same as calling run with it again);
* an input passed contiguous with the run's dtype is read where it lies, so changing it in place is seen
  by the next launch (`launch.inputs` exposes those buffers; a Param is a one-element buffer there); an
  input that had to be converted is a private copy, changed only through `launch.inputs`;
* `simulate(steps, carry={out: in})` / `until_done(done, carry=...)` step a single-stage kernel with the
  state in private copies: the caller's arrays are never written; a split kernel is refused by name.

Every test that deploys a kernel runs on each target of conftest.BT_TARGETS (the `target` fixture) with the same
expectations; eagle.reduce runs on the host, so an ordered kernel total on any target must equal its bits.
"""

import numpy as np
import pytest
from conftest import bt_ordered_sum

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar

DTYPES = [np.float64, np.float32]


def _np(out):
    if isinstance(out, dict):
        return {k: np.array(v, copy=True) for k, v in out.items()}
    return np.array(out, copy=True)


def _same(a, b):
    """Bitwise equality of two results (dicts of arrays or arrays)."""
    if isinstance(a, dict):
        assert sorted(a) == sorted(b)
        for k in a:
            assert np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes(), k
    else:
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


# ============================================================================================ kernels


@hawk.kernel
def dr_square(x: Scalar, s: Param, y: Mutable[Scalar]):
    y = s * x * x


@hawk.kernel
def dr_hist(key: Index, x: Scalar, acc: Mutable["slot":4], total: Mutable[Scalar], y: Mutable[Scalar]):
    hawk.scatter(acc)[key] += x
    total = hawk.sum(x)
    y = 2.0 * x


@hawk.kernel
def dr_norm(x: Scalar, total: Mutable[Scalar], z: Mutable[Scalar]):
    total = hawk.sum(x, policy="ordered")
    z = x / total


@hawk.kernel
def dr_weights(key: Index, x: Scalar, acc: Mutable["slot":4]):
    hawk.scatter(acc)[key] += x / hawk.sum(x)


@hawk.kernel
def dr_energy(x: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(x * x, policy="ordered")


@hawk.kernel
def dr_ordered_sum(x: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(x, policy="ordered")


@hawk.kernel
def dr_share(x: Scalar, z: Mutable[Scalar]):
    z = x / hawk.sum(x)


@hawk.kernel
def dr_standardize(x: Scalar, z: Mutable[Scalar]):
    d = x - hawk.mean(x)
    z = d / m.sqrt(hawk.mean(d * d))


@hawk.kernel
def dr_heat(lane: Grid["cell"], u: Scalar, kappa: Param, ncell: Param, u_next: Mutable[Scalar]):
    """One explicit step of 1-D heat diffusion; the two end cells hold their temperature."""
    i = lane.cell
    if m.land(i > 0, i < ncell - 1.0):
        u_next = u + kappa * (u.at(cell=i - 1) + u.at(cell=i + 1) - 2.0 * u)
    else:
        u_next = u


@hawk.kernel
def dr_fall(y: Scalar, v: Scalar, dt: Param, y_next: Mutable[Scalar], v_next: Mutable[Scalar],
            landed: Mutable[Scalar]):
    """Particles falling under gravity onto the floor y = 0; `landed` is 1 once every particle is down."""
    vn = v - 9.81 * dt
    yn = m.max(y + vn * dt, 0.0)
    y_next = yn
    v_next = m.where(yn > 0.0, vn, 0.0)
    landed = hawk.min(m.where(yn > 0.0, 0.0, 1.0))


def _heat_ref(u, kappa, steps):
    u = u.copy()
    for _ in range(steps):
        nxt = u.copy()
        nxt[1:-1] = u[1:-1] + kappa * (u[:-2] + u[2:] - 2.0 * u[1:-1])
        u = nxt
    return u


def _fall_ref(y, v, dt):
    """The NumPy loop: (y, v, steps) once every particle has landed."""
    steps = 0
    while True:
        steps += 1
        vn = v - 9.81 * dt
        y = np.maximum(y + vn * dt, 0.0)
        v = np.where(y > 0.0, vn, 0.0)
        if np.all(y <= 0.0):
            return y, v, steps


def _hist_planes(n=64, seed=0):
    rng = np.random.default_rng(seed)
    return dict(key=rng.integers(0, 4, size=n).astype(np.int64), x=rng.normal(size=n))


# ============================================================================================ bind / launch


def test_bound_launch_matches_run_single_stage(target):
    planes = _hist_planes(1000, 1)
    plan = eagle.deploy(dr_hist, target=target)
    want = _np(plan.run(**planes))
    bound = plan.bind(**planes)
    assert "dr_hist" in repr(bound) and "stages=1" in repr(bound)
    _same(_np(bound.launch()), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_bound_launch_matches_run_multi_stage(target, dtype):
    x = np.random.default_rng(2).uniform(1.0, 2.0, 5000).astype(dtype)
    plan = eagle.deploy(dr_norm, target=target)
    bound = plan.bind(x=x)
    assert "stages=2" in repr(bound)
    _same(_np(bound.launch()), _np(plan.run(x=x)))

    planes = _hist_planes(3000, 3)
    planes["x"] = np.abs(planes["x"]).astype(dtype) + dtype(1.0)
    plan = eagle.deploy(dr_weights, target=target)
    got = _np(plan.bind(**planes).launch())
    np.testing.assert_allclose(got, _np(plan.run(**planes)), rtol=1e-12 if dtype == np.float64 else 1e-5)
    want = np.bincount(planes["key"], weights=planes["x"] / planes["x"].astype(np.float64).sum(), minlength=4)
    np.testing.assert_allclose(got, want, rtol=1e-12 if dtype == np.float64 else 1e-5)


def test_bound_launch_of_a_three_stage_kernel(target):
    x = np.random.default_rng(4).normal(2.0, 3.0, 2000)
    plan = eagle.deploy(dr_standardize, target=target)
    bound = plan.bind(x=x)
    _same(_np(bound.launch()), _np(plan.run(x=x)))
    np.testing.assert_allclose(np.asarray(bound.launch()), (x - x.mean()) / x.std(), rtol=1e-11, atol=1e-12)


def test_repeated_launches_give_the_same_results_cells_and_omitted_sinks_start_fresh(target):
    planes = _hist_planes(500, 5)
    bound = eagle.deploy(dr_hist, target=target).bind(**planes)
    first = _np(bound.launch())
    for _ in range(3):
        _same(_np(bound.launch()), first)  # the cell does not add up, the sink restarts at zero
    np.testing.assert_allclose(first["acc"], np.bincount(planes["key"], weights=planes["x"], minlength=4),
                               rtol=1e-12, atol=1e-12)

    x = np.random.default_rng(6).uniform(1.0, 2.0, 3000)
    bound = eagle.deploy(dr_norm, target=target).bind(x=x)
    first = _np(bound.launch())
    for _ in range(3):
        _same(_np(bound.launch()), first)

    bound = eagle.deploy(dr_weights, target=target).bind(**_hist_planes(400, 7) | {"x": x[:400]})
    first = _np(bound.launch())
    for _ in range(2):
        _same(_np(bound.launch()), first)


def test_a_passed_sink_accumulates_across_launches(target):
    planes = _hist_planes(300, 8)
    h = np.bincount(planes["key"], weights=planes["x"], minlength=4)
    acc = np.ones(4)
    bound = eagle.deploy(dr_hist, target=target).bind(**planes, acc=acc)
    for k in range(1, 4):
        out = bound.launch()
        np.testing.assert_allclose(acc, 1.0 + k * h, rtol=1e-12, atol=1e-12)
        assert np.shares_memory(np.asarray(out["acc"]), acc)


def test_a_passed_sink_of_a_split_kernel_accumulates_across_launches(target):
    planes = _hist_planes(300, 9)
    planes["x"] = np.abs(planes["x"]) + 1.0
    w = np.bincount(planes["key"], weights=planes["x"] / planes["x"].sum(), minlength=4)
    acc = np.zeros(4)
    bound = eagle.deploy(dr_weights, target=target).bind(**planes, acc=acc)
    for k in range(1, 4):
        bound.launch()
        np.testing.assert_allclose(acc, k * w, rtol=1e-12)


def test_a_passed_cell_is_overwritten_not_accumulated(target):
    x = np.random.default_rng(10).uniform(1.0, 2.0, 2000)
    cell = np.full(1, 99.0)
    bound = eagle.deploy(dr_norm, target=target).bind(x=x, total=cell)
    bound.launch()
    once = cell.copy()
    bound.launch()
    assert cell.tobytes() == once.tobytes()
    assert cell[0] == bt_ordered_sum(x)


def test_launch_hands_back_the_bound_buffers_every_time(target):
    x = np.random.default_rng(11).normal(size=100)
    bound = eagle.deploy(dr_square, target=target).bind(x=x, s=1.0)
    r1 = bound.launch()
    r2 = bound.launch()
    assert r1 is r2 and isinstance(r1, eagle.Array)
    assert bound() is r1  # calling the bound launch is launch()


def test_changing_a_bound_input_in_place_is_seen_by_the_next_launch(target):
    x = np.random.default_rng(12).normal(size=256)
    bound = eagle.deploy(dr_square, target=target).bind(x=x, s=1.0)
    assert np.shares_memory(bound.inputs["x"], x)  # contiguous float64: read where it lies
    np.testing.assert_array_equal(np.asarray(bound.launch()), x * x)
    x[:] = np.arange(256.0)
    np.testing.assert_array_equal(np.asarray(bound.launch()), np.arange(256.0) ** 2)
    bound.inputs["s"][0] = 3.0  # a Param is a one-element buffer
    np.testing.assert_array_equal(np.asarray(bound.launch()), 3.0 * np.arange(256.0) ** 2)


def test_changing_a_bound_input_of_a_split_kernel_in_place(target):
    x = np.random.default_rng(13).uniform(1.0, 2.0, 4000)
    bound = eagle.deploy(dr_norm, target=target).bind(x=x)
    bound.launch()
    x *= 2.0
    out = _np(bound.launch())
    assert out["total"][0] == bt_ordered_sum(x)
    np.testing.assert_array_equal(out["z"], x / out["total"][0])


def test_a_converted_input_is_a_private_copy(target):
    base = np.random.default_rng(14).normal(size=64)
    strided = base[::2]  # not contiguous: copied when bound
    bound = eagle.deploy(dr_square, target=target).bind(x=strided, s=1.0)
    assert not np.shares_memory(bound.inputs["x"], base)
    want = strided * strided
    strided[:] = 0.0
    np.testing.assert_array_equal(np.asarray(bound.launch()), want)  # the caller's change is not seen
    bound.inputs["x"][:] = 2.0
    np.testing.assert_array_equal(np.asarray(bound.launch()), np.full(32, 4.0))
    np.testing.assert_array_equal(strided, np.zeros(32))  # and the caller's array is never written


def test_bind_with_base_and_count_on_a_single_stage_kernel(target):
    x = np.arange(1.0, 11.0)
    bound = eagle.deploy(dr_square, target=target).bind(x=x, s=1.0, base=4, count=3)
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(bound.launch()), np.r_[np.zeros(4), x[4:7] ** 2, np.zeros(3)])


def test_bind_refuses_base_and_count_on_a_split_kernel(target):
    with pytest.raises(eagle.InputError, match="runs over every lane"):
        eagle.deploy(dr_norm, target=target).bind(x=np.ones(10), count=5)


def test_ordered_bound_launches_agree_across_thread_counts(target):
    x = np.random.default_rng(15).normal(size=3 * 65536 + 99)
    bounds = [eagle.deploy(dr_norm, target=target, threads=t, min_chunk=1024).bind(x=x) for t in (1, 2, 3)]
    assert all(max(b.chunks) > 1 for b in bounds[1:]), [b.chunks for b in bounds]  # small chunks: a real split
    outs = [_np(b.launch()) for b in bounds]
    for o in outs[1:]:
        _same(o, outs[0])
    _same(outs[0], _np(eagle.deploy(dr_norm).bind(x=x).launch()))  # and the host's bits on every target


# ============================================================================================ eagle.reduce


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 1000, 1029, 100_003])
def test_ordered_reduce_matches_an_ordered_kernel_sum_bit_for_bit(target, n, dtype):
    rng = np.random.default_rng(20 + n)
    x = (rng.normal(size=n) * 10.0 ** rng.integers(-5, 6, size=n)).astype(dtype)
    terms = x * x
    out = np.zeros(1, dtype)
    node = eagle.reduce(terms, out, policy="ordered")
    assert "ordered" in repr(node)
    got = node.launch()
    assert got is out
    kernel_total = np.asarray(eagle.deploy(dr_energy, target=target).run(x=x))
    assert out.tobytes() == kernel_total.tobytes()
    assert out[0] == bt_ordered_sum(terms)
    for _ in range(2):  # repeated launches: the same bits
        node.launch()
        assert out.tobytes() == kernel_total.tobytes()


@pytest.mark.parametrize("policy", ["auto", "compensated", "ordered"])
def test_reduce_policies_are_close_to_the_exact_sum(policy):
    x = np.random.default_rng(30).normal(size=10_000)
    out = np.zeros(1)
    eagle.reduce(x, out, policy=policy).launch()
    np.testing.assert_allclose(out[0], np.sum(x, dtype=np.float64), rtol=1e-12, atol=1e-12)


def test_reduce_defaults_to_auto():
    assert "auto" in repr(eagle.reduce(np.ones(8), np.zeros(1)))


@pytest.mark.parametrize("policy", ["auto", "ordered"])
def test_reduce_of_rows_into_one_entry_per_row(policy):
    vals = np.random.default_rng(31).normal(size=(5, 3000))
    out = np.zeros(5)
    eagle.reduce(vals, out, policy=policy).launch()
    np.testing.assert_allclose(out, vals.sum(axis=1), rtol=1e-12, atol=1e-12)
    if policy == "ordered":
        for k in range(5):
            one = np.zeros(1)
            eagle.reduce(vals[k], one, policy="ordered").launch()
            assert one[0] == out[k] == bt_ordered_sum(vals[k])


def test_reduce_float32_and_python_lists():
    x = np.random.default_rng(32).normal(size=777).astype(np.float32)
    out = np.zeros(1, np.float32)
    eagle.reduce(x, out, policy="ordered").launch()
    assert out.dtype == np.float32 and out[0] == bt_ordered_sum(x)
    out64 = np.zeros(1)
    eagle.reduce([1.0, 2.0, 3.5], out64).launch()
    assert out64[0] == 6.5


def test_reduce_sees_values_changed_in_place():
    v = np.arange(10.0)
    out = np.zeros(1)
    node = eagle.reduce(v, out, policy="ordered")
    assert node.launch()[0] == 45.0
    v[:] = 1.0
    assert node.launch()[0] == 10.0


@pytest.mark.parametrize("values, out, fragment", [
    (np.arange(10), np.zeros(1), "float32 or float64"),
    (np.ones(10), np.zeros(1, np.float32), "C-contiguous float64"),
    (np.ones(10), [0.0], "C-contiguous float64"),
    (np.ones(10), np.zeros(2), "2 entries"),
    (np.ones((3, 10)), np.zeros(2), "3 sum(s)"),
    (np.ones((3, 10)), np.zeros(6)[::2], "C-contiguous"),
])
def test_reduce_errors(values, out, fragment):
    with pytest.raises(eagle.InputError) as err:
        eagle.reduce(values, out)
    assert "eagle.reduce" in str(err.value) and fragment in str(err.value)


@pytest.mark.parametrize("policy", ["plain", "fast", ""])
def test_reduce_refuses_unknown_policies(policy):
    with pytest.raises(eagle.InputError, match="policy="):
        eagle.reduce(np.ones(4), np.zeros(1), policy=policy)


# ============================================================================================ eagle.Graph


def test_graph_of_a_reduce_and_a_bound_kernel_returns_results_by_name(target):
    x = np.random.default_rng(40).uniform(1.0, 2.0, 3000)
    out = np.zeros(1)
    graph = (eagle.Graph()
             .add_node(eagle.reduce(x, out, policy="ordered"), name="sum")
             .add_node(eagle.deploy(dr_norm, target=target).bind(x=x), name="norm")
             .build())
    assert "sum" in repr(graph) and "norm" in repr(graph)
    first = graph.launch()
    assert list(first) == ["sum", "norm"]
    assert first["sum"] is out
    norm = _np(first["norm"])
    assert out.tobytes() == norm["total"].tobytes()  # the ordered reduce and the ordered kernel cell agree
    np.testing.assert_array_equal(norm["z"], x / out[0])
    again = graph.launch()
    assert again["sum"].tobytes() == out.tobytes()
    _same(_np(again["norm"]), norm)


def test_graph_nodes_run_in_order_so_a_reduce_can_read_a_kernel_output(target):
    x = np.random.default_rng(41).normal(size=5000)
    bound = eagle.deploy(dr_square, target=target).bind(x=x, s=1.0)
    energy = np.zeros(1)
    graph = eagle.Graph().add_node(bound, name="square").add_node(
        eagle.reduce(bound.results, energy, policy="ordered"), name="energy").build()
    assert graph.launch()["energy"][0] == bt_ordered_sum(x * x)
    bound.inputs["s"][0] = 0.5
    assert graph.launch()["energy"][0] == bt_ordered_sum(0.5 * x * x)


def test_graph_names_unnamed_nodes():
    graph = eagle.Graph().add_node(eagle.reduce(np.ones(3), np.zeros(1))).add_node(
        eagle.reduce(np.ones(4), np.zeros(1))).build()
    got = graph.launch()
    assert list(got) == ["node0", "node1"]
    assert got["node0"][0] == 3.0 and got["node1"][0] == 4.0


def test_graph_refuses_a_duplicate_name():
    g = eagle.Graph().add_node(eagle.reduce(np.ones(3), np.zeros(1)), name="a")
    with pytest.raises(ValueError, match="'a'"):
        g.add_node(eagle.reduce(np.ones(3), np.zeros(1)), name="a")


@pytest.mark.parametrize("thing", [1, "reduce", None, eagle.deploy(dr_square), dr_square])
def test_graph_refuses_a_non_node(thing):
    with pytest.raises(TypeError, match="launch"):
        eagle.Graph().add_node(thing, name="x")


def test_an_empty_graph_is_refused():
    with pytest.raises(ValueError, match="empty"):
        eagle.Graph().build()


# ============================================================================================ simulate


@pytest.mark.parametrize("dtype", DTYPES)
def test_simulate_heat_diffusion_matches_a_numpy_loop(target, dtype):
    n, steps, kappa = 64, 150, 0.25
    u0 = np.zeros(n, dtype)
    u0[0], u0[n // 2] = 0.5, 1.0
    keep = u0.copy()
    got = eagle.deploy(dr_heat, target=target).simulate(steps, carry={"u_next": "u"}, u=u0, kappa=kappa, ncell=float(n))
    got = np.asarray(got)
    assert got.dtype == dtype and got.shape == (n,)
    want = _heat_ref(u0.astype(np.float64), kappa, steps)
    np.testing.assert_allclose(got, want, rtol=1e-12 if dtype == np.float64 else 1e-5, atol=1e-7)
    np.testing.assert_array_equal(u0, keep)  # the caller's state is not stepped in place


def test_simulate_one_step_is_one_run(target):
    u0 = np.random.default_rng(50).uniform(size=32)
    plan = eagle.deploy(dr_heat, target=target)
    _same(_np(plan.simulate(1, carry={"u_next": "u"}, u=u0, kappa=0.1, ncell=32.0)),
          _np(plan.run(u=u0, kappa=0.1, ncell=32.0)))


def test_simulate_without_carry_repeats_the_same_step(target):
    u0 = np.random.default_rng(51).uniform(size=32)
    plan = eagle.deploy(dr_heat, target=target)
    _same(_np(plan.simulate(5, u=u0, kappa=0.1, ncell=32.0)), _np(plan.run(u=u0, kappa=0.1, ncell=32.0)))


def test_simulate_particles_with_two_carried_planes(target):
    y0 = np.array([1.0, 5.0, 0.2, 10.0, 3.0])
    v0 = np.array([0.0, 1.0, 0.0, -2.0, 0.5])
    keep_y, keep_v = y0.copy(), v0.copy()
    dt, steps = 0.01, 40
    out = _np(eagle.deploy(dr_fall, target=target).simulate(steps, carry={"y_next": "y", "v_next": "v"}, y=y0, v=v0,
                                                            dt=dt))
    y, v = y0.copy(), v0.copy()
    for _ in range(steps):
        vn = v - 9.81 * dt
        y = np.maximum(y + vn * dt, 0.0)
        v = np.where(y > 0.0, vn, 0.0)
    np.testing.assert_allclose(out["y_next"], y, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out["v_next"], v, rtol=1e-12, atol=1e-14)
    assert out["landed"][0] == float(np.all(y <= 0.0))
    np.testing.assert_array_equal(y0, keep_y)
    np.testing.assert_array_equal(v0, keep_v)


def test_simulate_needs_at_least_one_step(target):
    with pytest.raises(eagle.InputError, match="steps"):
        eagle.deploy(dr_heat, target=target).simulate(0, carry={"u_next": "u"}, u=np.zeros(8), kappa=0.1, ncell=8.0)


# ============================================================================================ until_done


def test_until_done_with_a_cell_name(target):
    y0 = np.array([1.0, 5.0, 0.2, 10.0])
    v0 = np.zeros(4)
    keep = y0.copy()
    res, steps = eagle.deploy(dr_fall, target=target).until_done("landed", carry={"y_next": "y", "v_next": "v"},
                                                  y=y0, v=v0, dt=0.01)
    want_y, want_v, want_steps = _fall_ref(y0, v0, 0.01)
    assert steps == want_steps
    out = _np(res)
    assert out["landed"][0] == 1.0
    np.testing.assert_array_equal(out["y_next"], want_y)
    np.testing.assert_array_equal(out["v_next"], want_v)
    np.testing.assert_array_equal(y0, keep)


def test_until_done_refuses_a_name_of_many_values():
    y0 = np.array([1.0, 5.0, 0.2, 10.0])
    with pytest.raises(eagle.InputError, match=r"'y_next' holds 4 values, not one: done= names a cell"):
        eagle.deploy(dr_fall).until_done("y_next", carry={"y_next": "y", "v_next": "v"}, y=y0, v=np.zeros(4),
                                         dt=0.01)


def test_until_done_with_a_callable(target):
    n, kappa = 40, 0.25
    u0 = np.zeros(n)
    u0[n // 2] = 1.0

    def cooled(result):
        return np.asarray(result)[n // 2] < 0.2

    res, steps = eagle.deploy(dr_heat, target=target).until_done(cooled, carry={"u_next": "u"}, u=u0, kappa=kappa,
                                                  ncell=float(n))
    u, want = u0.copy(), 0
    while True:
        want += 1
        u = _heat_ref(u, kappa, 1)
        if u[n // 2] < 0.2:
            break
    assert steps == want and steps > 1
    np.testing.assert_allclose(np.asarray(res), u, rtol=1e-12, atol=1e-15)


def test_until_done_raises_when_max_steps_pass(target):
    with pytest.raises(eagle.InputError, match="max_steps=10"):
        eagle.deploy(dr_fall, target=target).until_done("landed", carry={"y_next": "y", "v_next": "v"},
                                         y=np.array([10.0]), v=np.zeros(1), dt=0.01, max_steps=10)


def test_until_done_refuses_an_unknown_output_name(target):
    with pytest.raises(eagle.InputError, match="'nothing'"):
        eagle.deploy(dr_fall, target=target).until_done("nothing", y=np.ones(3), v=np.zeros(3), dt=0.01)


# ============================================================================================ refusals


@pytest.mark.parametrize("kernel, stages", [(dr_share, 2), (dr_norm, 2), (dr_standardize, 3)])
def test_step_loops_refuse_a_split_kernel_by_name(target, kernel, stages):
    x = np.random.default_rng(60).uniform(1.0, 2.0, 16)
    plan = eagle.deploy(kernel, target=target)
    with pytest.raises(eagle.InputError) as err:
        plan.simulate(3, x=x)
    assert str(err.value).startswith(f"'{kernel.name}' runs in {stages} stages; simulate runs single-stage kernels")
    with pytest.raises(eagle.InputError) as err:
        plan.until_done(lambda r: True, x=x)
    assert str(err.value).startswith(f"'{kernel.name}' runs in {stages} stages; until_done runs single-stage "
                                     "kernels")


@pytest.mark.parametrize("carry, fragment", [
    ({"y": "y"}, "'y' is not an output"),
    ({"nothing": "y"}, "'nothing' is not an output"),
    ({"y_next": "dt"}, "'dt' is not a per-lane input plane"),
    ({"y_next": "nothing"}, "'nothing' is not a per-lane input plane"),
    ({"y_next": "y_next"}, "'y_next' is not a per-lane input plane"),
])
def test_carry_must_name_an_output_and_a_per_lane_input(target, carry, fragment):
    y = np.ones(4)
    for door in ("simulate", "until_done"):
        with pytest.raises(eagle.InputError) as err:
            if door == "simulate":
                eagle.deploy(dr_fall, target=target).simulate(2, carry=carry, y=y, v=np.zeros(4), dt=0.01)
            else:
                eagle.deploy(dr_fall, target=target).until_done("landed", carry=carry, y=y, v=np.zeros(4), dt=0.01)
        assert fragment in str(err.value) and "dr_fall" in str(err.value)
    np.testing.assert_array_equal(y, np.ones(4))


def test_carry_of_a_cell_into_a_per_lane_plane_is_refused(target):
    """`landed` is one value for the run, `y` has a value per lane: copying one into the other is a shape
    mismatch, not a broadcast."""
    with pytest.raises(eagle.InputError, match="landed"):
        eagle.deploy(dr_fall, target=target).simulate(2, carry={"landed": "y"}, y=np.ones(4), v=np.zeros(4), dt=0.01)
