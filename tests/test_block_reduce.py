"""Block reductions: a sum, mean, max or min over the trailing Grid axes (fixed extents, at most
hawk.passes.stages.BLOCK_LANES lanes per kept slot) read later in the same body runs inside one launch.

What is checked:

* the rule (docs/semantics.md "Block reductions"): such kernels have ONE stage (Kernel.stage_count, kernel.stages(),
  the hawk.block_reduce op in the stage's IR, the artifact sidecar's stages), and reads that do not qualify
  (leading or middle axes, too many lanes per slot, a total over every lane, a vector payload) still split;
* results against NumPy: row normalisation x / sum(x over "col"), x - mean over a trailing axis, softmax over a
  trailing axis with max and sum, several kept axes, masks (an empty slot: mean NaN, max -inf), a user cell that
  is also read, a block reduction beside a total over every lane (2 stages), float32;
* the policy's contract: ordered sums are the exact sum rounded once (math.fsum per slot), the same bits at host
  thread counts 1..4 (chunking forced small and checked to split) and on spirv; max/min exact (NaN wins, zero
  signs); compensated and auto within their bounds;
* base=/count= on a single-stage block kernel: slots at the range's edges fold only the lanes that run;
* GPU forms: the "blocks" workgroup form (one span, no ordered sum, nothing else across lanes; several rounds per
  workgroup past MAX_GROUPS) or the chunk form; artifacts; plan.reverse through a softmax; sharded runs (whole-row
  slots taken, a cut slot refused).

Every kernel here is also built for nvvm and rocdl by tests/test_gpu_compile.py (run it with -k br_).
"""

import math

import numpy as np
import pytest
from conftest import bt_run_same_bits, bt_same_bits

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Mutable, Scalar, Vector
from hawk.passes.stages import BLOCK_LANES

COLS = 16


# ============================================================================================ kernels


@hawk.kernel
def br_rownorm(lane: Grid["row", "col":COLS], x: Scalar, z: Mutable[Scalar]):
    z = x / hawk.sum(x, over="col")


@hawk.kernel
def br_centre(lane: Grid["row", "col":10], x: Scalar, z: Mutable[Scalar]):
    z = x - hawk.mean(x, over=-1)


@hawk.kernel
def br_softmax(lane: Grid["row", "col":COLS], x: Scalar, z: Mutable[Scalar]):
    top = hawk.max(x, over="col")
    ex = m.exp(x - top)
    z = ex / hawk.sum(ex, over="col")


@hawk.kernel
def br_softmax_ord(lane: Grid["row", "col":COLS], x: Scalar, z: Mutable[Scalar]):
    top = hawk.max(x, over="col")
    ex = m.exp(x - top)
    z = ex / hawk.sum(ex, over="col", policy="ordered")


@hawk.kernel
def br_centre_ord(lane: Grid["row", "col":10], x: Scalar, z: Mutable[Scalar]):
    z = x - hawk.mean(x, over="col", policy="ordered")


@hawk.kernel
def br_kept2(lane: Grid["a", "b":3, "c":4, "d":5], x: Scalar, z: Mutable[Scalar]):
    z = x / hawk.sum(x, over=("c", "d"), policy="ordered") + hawk.max(x, over="d")


@hawk.kernel
def br_span(lane: Grid["row", "col":10], x: Scalar, z: Mutable[Scalar]):
    lo = hawk.min(x, over="col")
    z = (x - lo) / (hawk.max(x, over="col") - lo)


@hawk.kernel
def br_ends(lane: Grid["row", "col":10], x: Scalar, hi: Mutable[Scalar], lo: Mutable[Scalar]):
    hi = m.where(x > 1e300, x, hawk.max(x, over="col"))  # every lane of a row gets the row's max
    lo = m.where(x > 1e300, x, hawk.min(x, over="col"))


@hawk.kernel
def br_masked(lane: Grid["row", "col":8], x: Scalar, avg: Mutable[Scalar], top: Mutable[Scalar],
              tot: Mutable[Scalar]):
    avg = x - hawk.mean(x, over="col", where=x > 0.5)
    top = x - hawk.max(x, over="col", where=x > 0.5)
    tot = x * hawk.sum(x, over="col", where=x > 0.5, policy="compensated")


@hawk.kernel
def br_cell(lane: Grid["row", "col":COLS], x: Scalar, tot: Mutable[Scalar], z: Mutable[Scalar]):
    tot = hawk.sum(x, over="col", policy="ordered")
    z = x / tot


@hawk.kernel
def br_with_total(lane: Grid["row", "col":COLS], x: Scalar, z: Mutable[Scalar]):
    d = x - hawk.mean(x, over="col")
    z = d / hawk.sum(d * d, policy="ordered")


@hawk.kernel
def br_chain(lane: Grid["row", "col":12], x: Scalar, z: Mutable[Scalar]):
    mu = hawk.mean(x, over="col", policy="ordered")
    d = x - mu
    var = hawk.mean(d * d, over="col", policy="ordered")
    z = d / m.sqrt(var)


@hawk.kernel
def br_mixed(lane: Grid["row", "col":8], x: Scalar, z: Mutable[Scalar], tot: Mutable[Scalar]):
    z = x - hawk.max(x, over="col")  # a block max beside a compensated sum over every lane: one stage
    tot = hawk.sum(x, policy="compensated")


# reads that stay stage boundaries
@hawk.kernel
def br_leading(lane: Grid["row", "col":COLS], x: Scalar, z: Mutable[Scalar]):
    z = x / hawk.sum(x, over="row")


@hawk.kernel
def br_middle(lane: Grid["a", "b":4, "c":5], x: Scalar, z: Mutable[Scalar]):
    z = x / hawk.sum(x, over="b")


@hawk.kernel
def br_too_wide(lane: Grid["row", "col":BLOCK_LANES + 1], x: Scalar, z: Mutable[Scalar]):
    z = x / hawk.sum(x, over="col")


@hawk.kernel
def br_every_lane(lane: Grid["row", "col":COLS], x: Scalar, z: Mutable[Scalar]):
    z = x / hawk.sum(x)


@hawk.kernel
def br_vector(lane: Grid["row", "col":COLS], v: Vector[2], z: Mutable[Vector[2]]):
    z = v / hawk.sum(v, over="col")


# ============================================================================================ helpers


def _rows(n, cols, seed, lo=0.5, hi=2.0, dtype=np.float64):
    return np.random.default_rng(seed).uniform(lo, hi, size=(n, cols)).astype(dtype)


def _run(target, kernel, threads=None, **planes):
    """Run on `target`; with `threads`, in small chunks (min_chunk=1024), checked to split when threads > 1."""
    plan = eagle.deploy(kernel, target=target, threads=threads, min_chunk=1024 if threads else None)
    out = plan.run(**planes)
    assert not threads or threads == 1 or min(plan.last_chunks) > 1, f"threads={threads}: {plan.last_chunks}"
    return {k: np.asarray(v) for k, v in out.items()} if isinstance(out, dict) else np.asarray(out)


def _fsum_rows(x):
    """The exact sum of each row, rounded once (math.fsum), in x's dtype."""
    flat = x.reshape(x.shape[0], -1).astype(np.float64)
    return np.array([math.fsum(r) for r in flat]).astype(x.dtype)


# ============================================================================================ the rule


@pytest.mark.parametrize("kernel", [br_rownorm, br_centre, br_softmax, br_softmax_ord, br_centre_ord, br_kept2,
                                    br_span, br_masked, br_cell, br_chain])
def test_a_block_reduction_read_in_the_body_is_one_stage(kernel):
    assert kernel.stage_count == 1
    (st,) = kernel.stages()
    assert st.cells_in == () and st.cells_out == ()
    ir_text = kernel.stage_text(kernel.default_spec(), 0).text
    assert "hawk.block_reduce" in ir_text and "hawk.cut_read" not in ir_text


@pytest.mark.parametrize("kernel", [br_leading, br_middle, br_too_wide, br_every_lane, br_vector])
def test_reads_that_do_not_qualify_stay_stage_boundaries(kernel):
    assert kernel.stage_count == 2
    assert kernel.stages()[0].cells_out == ("cut0",)
    assert all("hawk.block_reduce" not in kernel.stage_text(kernel.default_spec(), k).text for k in range(2))


def test_a_block_reduction_beside_a_total_over_every_lane_splits_once():
    """The total over every lane is a boundary; the block mean is recomputed in both stages."""
    assert br_with_total.stage_count == 2
    for k in range(2):
        assert "hawk.block_reduce" in br_with_total.stage_text(br_with_total.default_spec(), k).text


def test_a_user_cell_keeps_its_reduction_and_the_read_takes_a_block_reduce():
    text = br_cell.stage_text(br_cell.default_spec(), 0).text
    assert '"hawk.reduce"' in text and '"hawk.block_reduce"' in text


def test_the_layout_aligns_chunks_on_whole_slots():
    lay = br_kept2.layout(br_kept2.default_spec())
    assert lay.block_span == 20 and lay.parallel_span() % 20 == 0
    lay = br_softmax.layout(br_softmax.default_spec())
    assert lay.block_span == COLS and not lay.reductions


# ============================================================================================ values vs NumPy


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_normalisation(target, dtype):
    x = _rows(3001, COLS, 1, dtype=dtype)
    z = _run(target, br_rownorm, x=x)
    assert z.dtype == dtype
    np.testing.assert_allclose(z, x / x.sum(axis=1, keepdims=True), rtol=1e-13 if dtype == np.float64 else 2e-6)


def test_centre_over_the_trailing_axis(target):
    x = _rows(2503, 10, 2, -3.0, 5.0)
    np.testing.assert_allclose(_run(target, br_centre, x=x), x - x.mean(axis=1, keepdims=True), atol=1e-13)


@pytest.mark.parametrize("kernel", [br_softmax, br_softmax_ord])
def test_softmax_over_the_trailing_axis(target, kernel):
    x = np.random.default_rng(3).normal(0.0, 4.0, size=(4099, COLS))
    x[5, :] = 700.0  # exp would overflow without the max
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(_run(target, kernel, x=x), e / e.sum(axis=1, keepdims=True), rtol=1e-13)


def test_several_kept_axes(target):
    x = np.random.default_rng(4).uniform(0.5, 2.0, size=(37, 3, 4, 5))
    want = x / x.sum(axis=(2, 3), keepdims=True) + x.max(axis=3, keepdims=True)
    np.testing.assert_allclose(_run(target, br_kept2, x=x), want, rtol=1e-13)


def test_min_and_max_in_one_kernel(target):
    x = _rows(1000, 10, 5, -1.0, 1.0)
    lo, hi = x.min(axis=1, keepdims=True), x.max(axis=1, keepdims=True)
    np.testing.assert_allclose(_run(target, br_span, x=x), (x - lo) / (hi - lo), rtol=1e-13)


def test_masks_and_empty_slots(target):
    x = _rows(600, 8, 6, 0.0, 1.0)
    x[7, :] = 0.25  # no lane kept: mean NaN, max -inf, sum 0
    keep = x > 0.5
    cnt = keep.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(keep, x, 0.0).sum(axis=1, keepdims=True) / cnt
    top = np.where(keep, x, -np.inf).max(axis=1, keepdims=True)
    tot = np.where(keep, x, 0.0).sum(axis=1, keepdims=True)
    out = _run(target, br_masked, x=x)
    np.testing.assert_allclose(out["avg"], x - mean, rtol=1e-13, atol=1e-15)
    assert np.isnan(out["avg"][7]).all() and np.isposinf(out["top"][7]).all()
    np.testing.assert_array_equal(out["top"], x - top)  # max is exact
    np.testing.assert_allclose(out["tot"], x * tot, rtol=1e-14)
    assert (out["tot"][7] == 0.0).all()


def test_a_user_cell_that_is_also_read(target):
    x = _rows(777, COLS, 7)
    out = _run(target, br_cell, x=x)
    assert sorted(out) == ["tot", "z"]
    bt_same_bits(out["tot"], _fsum_rows(x))
    bt_same_bits(out["z"], x / out["tot"][:, None])  # the read and the cell are the same exact sums


def test_beside_a_total_over_every_lane(target):
    x = _rows(1500, COLS, 8, -1.0, 3.0)
    d = x - x.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(_run(target, br_with_total, x=x), d / (d * d).sum(), rtol=1e-12, atol=1e-20)


def test_a_block_max_beside_a_sum_over_every_lane(target):
    """Block reductions do not count against "one operation per kernel"; the stage's compensated sum keeps its
    blocked loop shape inside each tile (tiles start on ordered blocks), at any thread count."""
    assert br_mixed.stage_count == 1
    x = np.random.default_rng(18).normal(size=(5000, 8))
    for threads in (1, 3):
        out = _run(target, br_mixed, threads=threads, x=x)
        bt_same_bits(out["z"], x - x.max(axis=1, keepdims=True))
        assert abs(out["tot"][0] - math.fsum(x.ravel())) <= 4 * np.finfo(float).eps * np.abs(x).sum()


def test_a_chain_of_block_reductions(target):
    x = _rows(2000, 12, 9, -2.0, 2.0)
    d = x - x.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(_run(target, br_chain, x=x), d / np.sqrt((d * d).mean(axis=1, keepdims=True)),
                               rtol=1e-12)


# ============================================================================================ bits


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ordered_is_the_exact_sum_rounded_once(dtype):
    rng = np.random.default_rng(10)
    x = (rng.normal(size=(3000, 10)) * 10.0 ** rng.integers(-8, 9, size=(3000, 10))).astype(dtype)
    z = _run("host", br_centre_ord, x=x)
    if dtype == np.float64:
        bt_same_bits(z, x - _fsum_rows(x)[:, None] / dtype(10))
    else:  # the float32 rounding straight from the exact value (no float64 rounding in between)
        from fractions import Fraction

        exact = [float(np.float32(sum((Fraction(float(v)) for v in r), Fraction(0)))) for r in x[:50]]
        bt_same_bits(z[:50], x[:50] - (np.array(exact, dtype=dtype) / dtype(10))[:, None])


@pytest.mark.parametrize("kernel", [br_centre_ord, br_softmax_ord, br_span, br_kept2, br_chain])
def test_same_bits_at_every_thread_count(kernel):
    shape = {br_kept2: (1001, 3, 4, 5)}.get(kernel, (6001, 12 if kernel is br_chain else
                                                     COLS if kernel is br_softmax_ord else 10))
    x = np.random.default_rng(11).normal(size=shape)
    one = _run("host", kernel, threads=1, x=x)
    for threads in (2, 3, 4):
        bt_same_bits(_run("host", kernel, threads=threads, x=x), one, f"{kernel.name} threads={threads}")


@pytest.mark.parametrize("kernel", [br_centre_ord, br_chain, br_span, br_kept2, br_cell])
def test_spirv_gives_the_hosts_bits(target, kernel):
    """Ordered sums, max, min and correctly rounded arithmetic (not m.exp: its last bit may differ by target)."""
    shape = {br_kept2: (301, 3, 4, 5)}.get(kernel, (2001, {br_cell: COLS, br_chain: 12}.get(kernel, 10)))
    x = np.random.default_rng(12).normal(size=shape)
    if kernel is br_cell:
        x = np.abs(x) + 0.5
    bt_run_same_bits(target, kernel, x=x)


def test_max_and_min_keep_nan_and_zero_signs(target):
    x = _rows(64, 10, 13, -1.0, 1.0)
    x[3, 4] = np.nan
    x[9, :] = 0.0
    x[9, 5] = -0.0
    out = _run(target, br_ends, x=x)
    rows = np.arange(64) != 9  # (NumPy's min of 0.0 and -0.0 is whichever comes first)
    bt_same_bits(out["hi"][rows], np.repeat(np.max(x, axis=1, keepdims=True), 10, axis=1)[rows])  # NaN wins
    bt_same_bits(out["lo"][rows], np.repeat(np.min(x, axis=1, keepdims=True), 10, axis=1)[rows])
    assert np.isnan(out["hi"][3]).all() and np.isnan(out["lo"][3]).all()
    assert not np.signbit(out["hi"][9]).any() and np.signbit(out["lo"][9]).all()  # max(0, -0) = 0, min = -0


def test_base_and_count_fold_only_the_lanes_that_run(target):
    x = _rows(20, COLS, 14)
    lo, n = 3 * COLS + 5, 4 * COLS  # starts and ends inside a row
    z = np.asarray(eagle.deploy(br_rownorm, target=target).run(x=x, base=lo, count=n)).ravel()
    flat = x.ravel()
    want = np.zeros_like(flat)
    for lane in range(lo, lo + n):
        r = lane // COLS
        inside = flat[max(r * COLS, lo):min(r * COLS + COLS, lo + n)]
        want[lane] = flat[lane] / inside.sum()
    np.testing.assert_allclose(z, want, rtol=1e-14)


def test_workgroups_that_run_several_rounds(target):
    """More rows than GPU workgroups (MAX_GROUPS): each workgroup of the blocks form runs several rounds."""
    x = _rows(4 * 66000 + 7, COLS, 17)
    np.testing.assert_allclose(_run(target, br_rownorm, x=x), x / x.sum(axis=1, keepdims=True), rtol=1e-13)


def test_the_artifact_sidecar_has_one_stage_and_runs(tmp_path):
    import json

    (path,) = hawk.artifact.build_bundle([br_softmax_ord], tmp_path)
    sc = json.loads(path.read_text())
    assert [(s["kernel"], s["cells_in"], s["cells_out"]) for s in sc["stages"]] == [("br_softmax_ord", [], [])]
    assert [b["layout"]["blocks"] for b in sc["builds"]] == [[[COLS, "max", "auto"], [COLS, "sum", "ordered"]]]
    x = np.random.default_rng(15).normal(size=(999, COLS))
    bt_same_bits(np.asarray(hawk.run(hawk.load(tmp_path, "br_softmax_ord"), x=x)),
                 np.asarray(eagle.deploy(br_softmax_ord).run(x=x)))


def test_sharded_runs_take_whole_row_slots_and_refuse_cut_ones_by_name():
    from eagle.distributed.stages import check_shardable

    plan, spec = eagle.deploy(br_softmax), br_softmax.default_spec()
    assert not check_shardable(plan, spec, "jax", row=COLS).global_lanes  # shards of whole rows: each slot on one
    with pytest.raises(eagle.InputError, match=r"kernel 'br_softmax': a block hawk\.max over .*run unsharded"):
        check_shardable(plan, spec, "jax", row=COLS + 1)  # (a row that a slot does not divide)


def test_the_reverse_of_a_softmax_is_its_gradient():
    """plan.reverse through block reductions: d/dx sum(ct * softmax(x)) = s * (ct - sum(ct * s)) per row."""
    rng = np.random.default_rng(16)
    x, ct = rng.normal(size=(300, COLS)), rng.normal(size=(300, COLS))
    g = np.asarray(eagle.deploy(br_softmax).reverse({"z": ct}, x=x)["x"])
    e = np.exp(x - x.max(axis=1, keepdims=True))
    s = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(g, s * (ct - (ct * s).sum(axis=1, keepdims=True)), rtol=1e-10, atol=1e-15)


def test_the_adjoint_keeps_block_reductions_in_one_launch():
    """The adjoint is split into stages by the forward's rule: the softmax's recomputed row max and row sum, and
    the row sum of the cotangent shares, are block reductions (one stage), not cells between stages."""
    assert br_softmax.stage_count == 1
    adj = br_softmax.adjoint(("x",), None, ())[0]
    assert adj.stage_count == 1, adj.stage_count


def test_gpu_forms_and_grid():
    """Block reductions of one span, none ordered, nothing else across lanes: the "blocks" form (workgroups);
    otherwise the chunk form, where a thread runs whole slots as a host chunk does."""
    from eagle.targets.device import plan_grid
    from hawk.abi.layout import WORKGROUP, block_round, gpu_form

    forms = {k.name: gpu_form(k.layout(k.default_spec()), 8) for k in (br_softmax, br_span, br_masked, br_rownorm,
                                                                       br_softmax_ord, br_kept2, br_cell, br_chain)}
    assert forms == {"br_softmax": "blocks", "br_span": "blocks", "br_masked": "blocks", "br_rownorm": "blocks",
                     "br_softmax_ord": "chunks", "br_kept2": "chunks", "br_cell": "chunks", "br_chain": "chunks"}
    lay = br_softmax.layout(br_softmax.default_spec())
    assert block_round(lay) == WORKGROUP // COLS * COLS
    grid = plan_grid(lay, 1000 * COLS, 8, (1000, COLS))
    assert grid.form == "blocks" and grid.block == WORKGROUP and grid.span % block_round(lay) == 0
    assert grid.span * grid.groups >= 1000 * COLS
    chunks = plan_grid(br_kept2.layout(br_kept2.default_spec()), 70 * 60, 8, (70, 3, 4, 5))
    assert chunks.form == "chunks" and chunks.span % 20 == 0
