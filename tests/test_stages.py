"""Kernels that read a reduced value later in their body: split into stages, one launch each.

What is checked:

* the split itself: stage names (<k>, <k>_2, <k>_3), stage_count, the cells each stage reads and writes
  (kernel.stages()), and each stage's hawk IR (kernel.mlir(stage=k)): a `hawk.cut_read` per cell it reads,
  only the ops it needs, per-lane values computed again in the stage that needs them;
* results against NumPy for totals, means, variances, vector payloads, masks, a Grid, a total stored to a user
  cell and read later, several totals, a total read inside an `if` and a `for`, float64 and float32;
* an internal cut cell is never handed back, a user cell always is (and is written in place when passed);
* policy="ordered" totals read later give the same bits whatever the thread count, and the host's bits on every
  target;
* base=/count=: refused on a split kernel (eagle.InputError: it runs over every lane); on a single-stage
  kernel only lanes [base, base + count) run (outputs elsewhere zero, or untouched when passed in), and a
  range outside the lanes is refused.

Every test that runs a kernel runs on each target of conftest.BT_TARGETS (the `target` fixture) with the same
expectations; the IR tests are target-independent.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import bt_same_bits

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar, Vector

ROOT = Path(__file__).resolve().parents[1]
DTYPES = [np.float64, np.float32]
TICKS = 16
MANY = 3 * 65536 + 4321  # enough lanes for three host threads to each take a chunk


def _rtol(dtype):
    return 1e-12 if np.dtype(dtype) == np.float64 else 2e-5


def _positive(n, dtype, seed):
    return np.random.default_rng(seed).uniform(0.5, 2.0, size=n).astype(dtype)


def _normal(n, dtype, seed):
    return np.random.default_rng(seed).normal(1.5, 3.0, size=n).astype(dtype)


def _np(out):
    if isinstance(out, dict):
        return {k: np.asarray(v) for k, v in out.items()}
    return np.asarray(out)


def _run(target, kernel, threads=None, **planes):
    """Run on `target`; with `threads`, in small chunks (min_chunk=1024), checked to split when threads > 1."""
    plan = eagle.deploy(kernel, target=target, threads=threads, min_chunk=1024 if threads else None)
    out = _np(plan.run(**planes))
    assert not threads or threads == 1 or min(plan.last_chunks) > 1, f"threads={threads}: {plan.last_chunks}"
    return out


# ============================================================================================ kernels


@hawk.kernel
def st_share(x: Scalar, z: Mutable[Scalar]):
    z = x / hawk.sum(x)


@hawk.kernel
def st_standardize(x: Scalar, z: Mutable[Scalar]):
    mu = hawk.mean(x)
    d = x - mu
    var = hawk.mean(d * d)
    z = d / m.sqrt(var)


@hawk.kernel
def st_vshare(v: Vector[3], z: Mutable[Vector[3]]):
    z = v / hawk.sum(v)


@hawk.kernel
def st_masked_share(x: Scalar, z: Mutable[Scalar]):
    t = hawk.sum(x, where=x > 0.0)
    z = m.where(x > 0.0, x / t, 0.0)


@hawk.kernel
def st_grid_share(lane: Grid["band", "tick":TICKS], x: Scalar, z: Mutable[Scalar]):
    z = x / hawk.sum(x)


@hawk.kernel
def st_keep(x: Scalar, total: Mutable[Scalar], z: Mutable[Scalar]):
    total = hawk.sum(x)
    z = x / total


@hawk.kernel
def st_vkeep(v: Vector[3], tot: Mutable[Vector[3]], z: Mutable[Vector[3]]):
    tot = hawk.sum(v)
    z = v / tot


@hawk.kernel
def st_pick(x: Scalar, y: Scalar, z: Mutable[Scalar]):
    w = m.exp(y)
    t = hawk.sum(x * x)
    z = w * x / t


@hawk.kernel
def st_mixed(key: Index, x: Scalar, y: Mutable[Scalar], total: Mutable[Scalar], counts: Mutable["k":5],
             z: Mutable[Scalar]):
    y = 2.0 * x
    hawk.scatter(counts)[key] += 1.0
    total = hawk.sum(x)
    z = x / hawk.mean(x)


@hawk.kernel
def st_above(x: Scalar, hi: Mutable[Scalar]):
    mu = hawk.mean(x)
    hi = hawk.sum(x, where=x > mu)


@hawk.kernel
def st_two_totals(x: Scalar, z: Mutable[Scalar]):
    z = (x - hawk.mean(x)) / hawk.sum(x * x)


@hawk.kernel
def st_twice(x: Scalar, z: Mutable[Scalar]):
    t = hawk.sum(x)
    u = hawk.sum(x / t * x)
    z = x / t / u


@hawk.kernel
def st_branch(x: Scalar, z: Mutable[Scalar]):
    mu = hawk.mean(x)
    if x > mu:
        z = x - mu
    else:
        z = 0.0


@hawk.kernel
def st_loop(x: Scalar, z: Mutable[Scalar]):
    t = hawk.sum(x)
    acc = 0.0
    for _ in range(3):
        acc = acc + x / t
    z = acc


@hawk.kernel
def st_scaled_peak(x: Scalar, s: Param, z: Mutable[Scalar]):
    z = s * x / hawk.max(x)


@hawk.kernel
def st_ret(x: Scalar) -> Scalar:
    return x / hawk.sum(x)


@hawk.kernel
def st_ordered_keep(x: Scalar, total: Mutable[Scalar], z: Mutable[Scalar]):
    total = hawk.sum(x, policy="ordered")
    z = x / total


@hawk.kernel
def st_ordered_centre(x: Scalar, z: Mutable[Scalar]):
    z = x - hawk.mean(x, policy="ordered")


@hawk.kernel
def st_single(key: Index, x: Scalar, acc: Mutable["slot":4], total: Mutable[Scalar], y: Mutable[Scalar]):
    hawk.scatter(acc)[key] += x
    total = hawk.sum(x)
    y = 2.0 * x


# ============================================================================================ the split


def _layout(kernel):
    return [(s.name, s.cells_in, s.cells_out) for s in kernel.stages()]


def test_stage_names_and_cells_of_a_two_stage_kernel():
    assert st_share.stage_count == 2
    assert _layout(st_share) == [("st_share", (), ("cut0",)), ("st_share_2", ("cut0",), ())]


def test_three_stages_for_mean_then_variance_then_output():
    assert st_standardize.stage_count == 3
    assert _layout(st_standardize) == [
        ("st_standardize", (), ("cut0",)),
        ("st_standardize_2", ("cut0",), ("cut1",)),
        ("st_standardize_3", ("cut0", "cut1"), ()),
    ]
    assert _layout(st_twice) == [
        ("st_twice", (), ("cut0",)),
        ("st_twice_2", ("cut0",), ("cut1",)),
        ("st_twice_3", ("cut0", "cut1"), ()),
    ]


def test_two_totals_read_in_one_later_stage():
    assert _layout(st_two_totals) == [("st_two_totals", (), ("cut0", "cut1")),
                                      ("st_two_totals_2", ("cut0", "cut1"), ())]


def test_a_kernel_that_reads_no_total_has_one_stage():
    assert st_single.stage_count == 1
    (only,) = st_single.stages()
    assert (only.name, only.cells_in, only.cells_out) == ("st_single", (), ())
    assert "hawk.cut_read" not in st_single.mlir(stage=0)


def test_a_stored_total_read_later_is_the_users_cell_not_an_internal_one():
    assert _layout(st_keep) == [("st_keep", (), ("total",)), ("st_keep_2", ("total",), ())]
    assert _layout(st_vkeep) == [("st_vkeep", (), ("tot",)), ("st_vkeep_2", ("tot",), ())]


def test_which_stage_writes_which_output():
    assert [sorted(s.owns) for s in st_share.stages()] == [[], ["z"]]
    assert [sorted(s.owns) for s in st_mixed.stages()] == [["counts", "total", "y"], ["z"]]
    assert [sorted(s.owns) for s in st_ret.stages()] == [[], ["result"]]


def _count(text, needle):
    return text.count(needle)


def _uses(text: str) -> set[str]:
    """What a stage's hawk ops name, as "op:name" ("cut_read:name@axes" with the kept axes), read through the
    dialect's accessors from the parsed stage."""
    from mlir import ir

    from hawk.ir import access, new_context

    out = set()
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        ops = []
        module.operation.walk(lambda op: (ops.append(op), ir.WalkResult.ADVANCE)[1])
        for op in ops:
            short = op.name[5:] if op.name.startswith("hawk.") else None
            if short in ("load", "param", "at", "store"):
                out.add(f"{short}:{access.plane_name(op)}")
            elif short == "scatter":
                out.add(f"scatter:{access.sink_name(op)}")
            elif short == "cell":
                out.add(f"cell:{access.cell_name(op)}")
            elif short == "cut_read":
                out.add(f"cut_read:{access.cell_name(op)}@{','.join(access.coord_axes(op))}")
    return out


@pytest.mark.parametrize("kernel", [st_share, st_standardize, st_twice, st_two_totals, st_keep, st_mixed, st_pick,
                                    st_above, st_vshare, st_masked_share])
def test_each_stage_ir_reads_its_cells_with_cut_read(kernel):
    for k, st in enumerate(kernel.stages()):
        text = kernel.mlir(stage=k)
        assert f"func.func @{st.name}(" in text
        assert _count(text, '"hawk.cut_read"') == len(st.cells_in)
        for cell in st.cells_in:
            assert f"cut_read:{cell}@" in _uses(text)
        for cell in st.cells_out:
            assert f"cell:{cell}" in _uses(text)


def test_stage_ir_holds_only_the_ops_it_needs():
    first, second = st_share.mlir(stage=0), st_share.mlir(stage=1)
    assert '"hawk.reduce"' in first and '"hawk.store"' not in first
    assert '"hawk.reduce"' not in second and '"hawk.store"' in second and "arith.divf" in second
    # the per-lane value x is loaded again in the stage that divides by the total
    assert "load:x" in _uses(second)

    # exp(y) only feeds the output: it is not computed (y not even loaded) while the total is formed
    first, second = st_pick.mlir(stage=0), st_pick.mlir(stage=1)
    assert "math.exp" not in first and "load:y" not in _uses(first)
    assert "math.exp" in second and "load:y" in _uses(second) and '"hawk.reduce"' not in second


def test_stage_ir_of_three_stages():
    s1, s2, s3 = (st_standardize.mlir(stage=k) for k in range(3))
    assert _count(s1, '"hawk.reduce"') == 1 and "arith.subf" not in s1 and "math.sqrt" not in s1
    # the centred value x - mean is recomputed in stage 2 (for the variance) and in stage 3 (for the output)
    assert _count(s2, '"hawk.reduce"') == 1 and "arith.subf" in s2 and "math.sqrt" not in s2
    assert '"hawk.store"' not in s2
    assert '"hawk.reduce"' not in s3 and "arith.subf" in s3 and "math.sqrt" in s3 and '"hawk.store"' in s3


def test_stage_zero_keeps_side_effects_that_need_no_total():
    first, second = st_mixed.mlir(stage=0), st_mixed.mlir(stage=1)
    assert {"scatter:counts", "store:y", "cell:total", "cell:cut0"} <= _uses(first)
    assert {"scatter:counts", "store:y"}.isdisjoint(_uses(second)) and "store:z" in _uses(second)


def test_the_last_stage_may_end_in_a_cell():
    s1, s2 = st_above.mlir(stage=0), st_above.mlir(stage=1)
    assert "cell:cut0" in _uses(s1) and "cell:hi" not in _uses(s1)
    assert "cut_read:cut0@" in _uses(s2) and "cell:hi" in _uses(s2)


def test_the_mlir_of_a_float32_stage_is_float32():
    text = st_share.mlir(dtype="float32", stage=1)
    assert "f32" in text and "f64" not in text


# ============================================================================================ results


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 7, 1000, 70_001])
def test_normalise_by_the_total(target, n, dtype):
    x = _positive(n, dtype, 100 + n)
    z = _run(target, st_share, x=x)
    assert z.shape == (n,) and z.dtype == dtype
    np.testing.assert_allclose(z, x / x.astype(np.float64).sum(), rtol=_rtol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [2, 1000, 70_001])
def test_centre_by_the_mean_then_scale_by_the_std(target, n, dtype):
    x = _normal(n, dtype, 200 + n)
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean()) / x64.std()
    z = _run(target, st_standardize, x=x)
    assert z.dtype == dtype
    np.testing.assert_allclose(z, want, rtol=_rtol(dtype) * 10, atol=_rtol(dtype) * 10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_payload_total_read_later(target, dtype):
    v = np.random.default_rng(301).uniform(0.5, 2.0, size=(3, 500)).astype(dtype)
    z = _run(target, st_vshare, v=v)
    assert z.shape == (3, 500) and z.dtype == dtype
    np.testing.assert_allclose(z, v / v.astype(np.float64).sum(axis=1, keepdims=True), rtol=_rtol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_total_read_later(target, dtype):
    x = np.random.default_rng(302).normal(size=2000).astype(dtype)
    pos = x > 0
    want = np.where(pos, x / x[pos].astype(np.float64).sum(), 0.0)
    z = _run(target, st_masked_share, x=x)
    np.testing.assert_allclose(z, want, rtol=_rtol(dtype), atol=0)
    assert np.all(z[~pos] == 0.0)


def test_total_over_every_lane_of_a_grid_read_later(target):
    x = np.random.default_rng(303).uniform(1.0, 2.0, size=(5, TICKS))
    z = _run(target, st_grid_share, x=x)
    assert z.shape == (5, TICKS)
    np.testing.assert_allclose(z, x / x.sum(), rtol=1e-12)


KEPT_ROW_CHILD = """
import numpy as np, eagle, hawk
from hawk import Grid, Mutable, Scalar

x = np.random.default_rng(304).uniform(1.0, 2.0, size=(3, TICKS))
want = x / x.sum(axis=1, keepdims=True)


def verdict(label, define, pick):
    try:
        kernel = define()
        out = eagle.deploy(kernel, target=TARGET).run(x=x)
    except hawk.KernelError as exc:
        print(label, "REFUSED", exc)
        return
    z = np.asarray(pick(out))
    ok = np.allclose(z, want, rtol=1e-12)
    print(label, "OK" if ok else "WRONG, max error per row " + str(np.abs(z - want).max(axis=1).tolist()))


def internal():
    @hawk.kernel
    def st_row_share(lane: Grid["band", "tick":TICKS], x: Scalar, z: Mutable[Scalar]):
        z = x / hawk.sum(x, over="tick")
    return st_row_share


def user_cell():
    @hawk.kernel
    def st_row_keep(lane: Grid["band", "tick":TICKS], x: Scalar, tot: Mutable[Scalar], z: Mutable[Scalar]):
        tot = hawk.sum(x, over="tick")
        z = x / tot
    return st_row_keep


verdict("internal", internal, lambda out: out)
verdict("user-cell", user_cell, lambda out: out["z"])
"""


def test_a_total_kept_per_row_read_later_is_right_or_refused(target, tmp_path):
    """hawk.sum(x, over="tick") keeps the 'band' axis: each lane should divide by its own row's total (or the
    kernel should be refused when it is read). Both as an internal cell and as a user cell.

    Run in a child process: a wrong buffer size for the kept cell could corrupt the heap of this one.
    """
    script = tmp_path / "row_share.py"  # a file, so that hawk can read the kernels' source
    script.write_text(KEPT_ROW_CHILD.replace("TICKS", str(TICKS)).replace("TARGET", repr(target)))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    out = r.stdout.strip()
    assert r.returncode == 0, f"child process failed (rc={r.returncode}): {out}\n{r.stderr[-2000:]}"
    lines = out.splitlines()
    assert len(lines) == 2 and all(line.split()[1] in ("OK", "REFUSED") for line in lines), out


@pytest.mark.parametrize("dtype", DTYPES)
def test_total_stored_to_a_user_cell_and_read_later(target, dtype):
    x = _positive(3000, dtype, 305)
    out = _run(target, st_keep, x=x)
    assert sorted(out) == ["total", "z"]  # the user's cell comes back; no internal cell does
    assert out["total"].shape == (1,) and out["total"].dtype == dtype
    np.testing.assert_allclose(out["total"][0], x.astype(np.float64).sum(), rtol=_rtol(dtype))
    # z is divided by exactly the total handed back
    np.testing.assert_array_equal(out["z"], x / out["total"][0])


def test_a_passed_user_cell_is_written_in_place(target):
    x = _positive(500, np.float64, 306)
    cell = np.full(1, 123.0)
    out = eagle.deploy(st_keep, target=target).run(x=x, total=cell)
    assert cell[0] == np.asarray(out["total"])[0]
    np.testing.assert_allclose(cell[0], x.sum(), rtol=1e-13)
    np.testing.assert_array_equal(np.asarray(out["z"]), x / cell[0])


def test_vector_user_cell_read_later(target):
    v = np.random.default_rng(307).uniform(0.5, 2.0, size=(3, 400))
    out = _run(target, st_vkeep, v=v)
    assert sorted(out) == ["tot_0", "tot_1", "tot_2", "z"]
    for k in range(3):
        np.testing.assert_allclose(out[f"tot_{k}"], [v[k].sum()], rtol=1e-13)
    np.testing.assert_allclose(out["z"], v / v.sum(axis=1, keepdims=True), rtol=1e-12)
    given = np.zeros(3)
    eagle.deploy(st_vkeep, target=target).run(v=v, tot=given)
    np.testing.assert_allclose(given, v.sum(axis=1), rtol=1e-13)


def test_internal_cells_are_never_handed_back(target):
    x = _positive(100, np.float64, 308)
    for kernel, want in [(st_share, None), (st_standardize, None), (st_mixed, ["counts", "total", "y", "z"]),
                         (st_above, None), (st_ret, None)]:
        planes = {"x": x}
        if kernel is st_mixed:
            planes["key"] = (np.arange(100) % 5).astype(np.int32)
        out = eagle.deploy(kernel, target=target).run(**planes)
        if want is None:
            assert isinstance(out, eagle.Array)  # one output: no cutN alongside it
        else:
            assert sorted(out) == want


def test_side_effects_of_the_first_stage_and_a_later_output(target):
    n = 1000
    x = _positive(n, np.float64, 309)
    key = (np.arange(n) % 5).astype(np.int64)
    out = _run(target, st_mixed, key=key, x=x)
    np.testing.assert_array_equal(out["y"], 2.0 * x)
    np.testing.assert_array_equal(out["counts"], np.full(5, n / 5))
    np.testing.assert_allclose(out["total"], [x.sum()], rtol=1e-13)
    np.testing.assert_allclose(out["z"], x / x.mean(), rtol=1e-12)


def test_a_total_feeding_a_masked_reduction_into_a_cell(target):
    x = _normal(5000, np.float64, 310)
    hi = _run(target, st_above, x=x)
    assert hi.shape == (1,)
    np.testing.assert_allclose(hi[0], x[x > x.mean()].sum(), rtol=1e-12)


def test_two_totals_and_a_total_read_at_two_levels(target):
    x = _positive(777, np.float64, 311)
    np.testing.assert_allclose(_run(target, st_two_totals, x=x), (x - x.mean()) / (x * x).sum(), rtol=1e-11)
    t = x.sum()
    np.testing.assert_allclose(_run(target, st_twice, x=x), x / t / (x / t * x).sum(), rtol=1e-12)


def test_total_read_inside_an_if_and_a_for(target):
    x = _normal(999, np.float64, 312)
    mu = x.mean()
    np.testing.assert_allclose(_run(target, st_branch, x=x), np.where(x > mu, x - mu, 0.0), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(_run(target, st_loop, x=x), 3.0 * (x / x.sum()), rtol=1e-12)


def test_a_peak_read_later_with_a_param(target):
    x = _normal(640, np.float64, 313)
    np.testing.assert_array_equal(_run(target, st_scaled_peak, x=x, s=3.0), 3.0 * x / x.max())


def test_a_returned_value_that_reads_a_total(target):
    x = _positive(321, np.float64, 314)
    np.testing.assert_allclose(_run(target, st_ret, x=x), x / x.sum(), rtol=1e-13)


def test_repeated_runs_of_a_split_kernel_agree(target):
    x = _positive(20_000, np.float64, 315)
    plan = eagle.deploy(st_standardize, target=target)
    first = np.asarray(plan.run(x=x)).copy()
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(plan.run(x=x)), first)


# ============================================================================================ ordered


@pytest.mark.parametrize("dtype", DTYPES)
def test_ordered_total_read_later_has_the_same_bits_on_every_thread_count(target, dtype):
    x = _normal(MANY, dtype, 400)
    runs = [_run(target, st_ordered_keep, threads=t, x=x) for t in (1, 2, 3)]
    for r in runs[1:]:
        assert r["total"].tobytes() == runs[0]["total"].tobytes()
        assert r["z"].tobytes() == runs[0]["z"].tobytes()
    # and the total is the ordered sum eagle.reduce gives, so z is x divided by exactly that
    ref = np.zeros(1, dtype)
    eagle.reduce(x, ref, policy="ordered").launch()
    assert runs[0]["total"].tobytes() == ref.tobytes()
    assert runs[0]["z"].tobytes() == (x / ref[0]).tobytes()
    bt_same_bits(runs[0], _run("host", st_ordered_keep, x=x), f"{target} vs host")


@pytest.mark.parametrize("dtype", DTYPES)
def test_ordered_mean_read_later_has_the_same_bits_on_every_thread_count(target, dtype):
    x = _normal(MANY, dtype, 401)
    runs = [_run(target, st_ordered_centre, threads=t, x=x) for t in (1, 2, 3)]
    for r in runs[1:]:
        assert r.tobytes() == runs[0].tobytes()
    ref = np.zeros(1, dtype)
    eagle.reduce(x, ref, policy="ordered").launch()
    assert runs[0].tobytes() == (x - ref[0] / dtype(MANY)).tobytes()
    bt_same_bits(runs[0], _run("host", st_ordered_centre, x=x), f"{target} vs host")


# ============================================================================================ base= / count=


@pytest.mark.parametrize("kw", [dict(base=0), dict(count=5), dict(base=2, count=3), dict(base=0, count=100)])
def test_base_and_count_are_refused_on_a_split_kernel(target, kw):
    x = _positive(100, np.float64, 500)
    with pytest.raises(eagle.InputError) as err:
        eagle.deploy(st_share, target=target).run(x=x, **kw)
    msg = str(err.value)
    assert "st_share" in msg and "runs over every lane" in msg and "2 stages" in msg
    with pytest.raises(eagle.InputError, match="runs over every lane"):
        eagle.deploy(st_standardize, target=target).bind(x=x, **kw)


def test_base_and_count_on_a_single_stage_kernel_run_only_those_lanes(target):
    n = 12
    x = np.arange(1.0, n + 1.0)
    key = (np.arange(n) % 4).astype(np.int64)
    out = _run(target, st_single, key=key, x=x, base=3, count=5)
    lanes = np.arange(3, 8)
    want_y = np.zeros(n)
    want_y[lanes] = 2.0 * x[lanes]
    np.testing.assert_array_equal(out["y"], want_y)  # lanes not run are zero when the output was not passed
    assert out["total"][0] == x[lanes].sum()
    np.testing.assert_array_equal(out["acc"], np.bincount(key[lanes], weights=x[lanes], minlength=4))


def test_base_and_count_leave_a_passed_output_untouched_outside_the_range(target):
    n = 12
    x = np.arange(1.0, n + 1.0)
    key = (np.arange(n) % 4).astype(np.int64)
    y = np.full(n, -7.0)
    acc = np.full(4, 10.0)
    eagle.deploy(st_single, target=target).run(key=key, x=x, y=y, acc=acc, base=8)
    want = np.full(n, -7.0)
    want[8:] = 2.0 * x[8:]
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(acc, 10.0 + np.bincount(key[8:], weights=x[8:], minlength=4))


def test_count_alone_starts_at_lane_zero_and_count_zero_runs_nothing(target):
    x = np.arange(1.0, 11.0)
    key = np.zeros(10, dtype=np.int32)
    out = _run(target, st_single, key=key, x=x, count=4)
    np.testing.assert_array_equal(out["y"], np.r_[2.0 * x[:4], np.zeros(6)])
    out = _run(target, st_single, key=key, x=x, base=5, count=0)
    np.testing.assert_array_equal(out["y"], np.zeros(10))
    assert out["total"][0] == 0.0


@pytest.mark.parametrize("kw", [dict(base=-1), dict(count=-1), dict(base=11), dict(count=11),
                                dict(base=6, count=5), dict(base=-2, count=3)])
def test_base_and_count_outside_the_lanes_are_refused(target, kw):
    x = np.arange(1.0, 11.0)
    key = np.zeros(10, dtype=np.int32)
    y = np.full(10, 5.0)
    with pytest.raises(eagle.InputError) as err:
        eagle.deploy(st_single, target=target).run(key=key, x=x, y=y, **kw)
    assert "st_single" in str(err.value) and "10 lanes" in str(err.value)
    np.testing.assert_array_equal(y, np.full(10, 5.0))  # nothing written


# ============================================================================================ name clashes


def test_a_per_lane_output_named_like_an_internal_cell(target):
    """An internal cut cell must not collide with a user plane that happens to be called 'cut0'."""

    @hawk.kernel
    def st_clash_lane(x: Scalar, cut0: Mutable[Scalar]):
        cut0 = x / hawk.sum(x)

    x = _positive(50, np.float64, 600)
    np.testing.assert_allclose(_run(target, st_clash_lane, x=x), x / x.sum(), rtol=1e-13)


def test_a_user_cell_named_like_an_internal_cell(target):
    @hawk.kernel
    def st_clash_cell(x: Scalar, cut0: Mutable[Scalar], z: Mutable[Scalar]):
        cut0 = hawk.sum(x)
        z = x / hawk.mean(x)

    x = _positive(50, np.float64, 601)
    out = _run(target, st_clash_cell, x=x)
    np.testing.assert_allclose(out["z"], x / x.mean(), rtol=1e-13)
    np.testing.assert_allclose(out["cut0"], [x.sum()], rtol=1e-13)  # the user's sum, not the internal mean
