"""The three GPU launch forms (hawk.abi.layout.gpu_form): which stages take which, how the grid is planned, and, run on
spirv (lavapipe), that each form gives the host's bits where the contract promises bits (ordered sums: the exact
sum rounded once, which every stage with one gets in the chunk form), and NumPy's values elsewhere, across
workgroup boundaries and base=/count= ranges."""

import math
import re

import numpy as np
import pytest
from conftest import bt_ordered_sum, bt_run_on, bt_same_bits, bt_target_missing

import eagle
import hawk
from eagle.targets.device import EXACT_BUDGET, MAX_GROUPS, PRIVATE_BUDGET, device_copy_values, plan_grid
from hawk import Grid, Index, Mutable, Scalar, Vector
from hawk.abi.layout import GROUP_ALIGN, WORKGROUP, gpu_form
from hawk.exact import words as exact_words


@hawk.kernel
def gf_energy(x: Scalar, e: Mutable[Scalar], c: Mutable[Scalar], big: Mutable[Scalar]):
    e = hawk.sum(x * x, policy="ordered")
    c = hawk.mean(x, policy="compensated")
    big = hawk.sum(x, where=x > 0.5)


@hawk.kernel
def gf_tree(x: Scalar, c: Mutable[Scalar], big: Mutable[Scalar], sq: Mutable[Scalar]):
    c = hawk.mean(x, policy="compensated")
    big = hawk.sum(x, where=x > 0.5)
    sq = hawk.sum(x * x)


@hawk.kernel
def gf_lowest(x: Scalar, y: Mutable[Scalar]) -> Scalar:
    y = x - 1.0
    return hawk.min(x, where=x > -2.0)


@hawk.kernel
def gf_pair(v: Vector[2]) -> Vector[2]:
    return hawk.mean(v, policy="ordered", where=v[0] > 0.0)


@hawk.kernel
def gf_row_means(g: Grid["row", "col":45], x: Scalar, total: Mutable[Scalar]) -> Scalar:
    total = hawk.sum(x, policy="compensated")
    return hawk.mean(x * 3.0, over="col", policy="ordered")


@hawk.kernel
def gf_row_means_comp(g: Grid["row", "col":45], x: Scalar, total: Mutable[Scalar]) -> Scalar:
    total = hawk.sum(x, policy="compensated")
    return hawk.mean(x * 3.0, over="col", policy="compensated")


@hawk.kernel
def gf_col_sums(g: Grid["row", "col":6, "k":7], x: Scalar) -> Scalar:
    return hawk.sum(x, over="row", policy="ordered", where=x < 1.5)


@hawk.kernel
def gf_col_comp(g: Grid["row", "col":33], x: Scalar) -> Scalar:
    return hawk.sum(x, over="row", policy="compensated")


@hawk.kernel
def gf_col_max(g: Grid["row", "col":33], x: Scalar) -> Scalar:
    return hawk.max(x, over="row")


@hawk.kernel
def gf_histogram(k: Index, x: Scalar, bins: Mutable["bin":16]):
    hawk.scatter(bins)[k] += x


@hawk.kernel
def gf_middle(g: Grid["row", "col":4, "k":5], x: Scalar) -> Scalar:
    return hawk.sum(x, over=("row", "k"))


@hawk.kernel
def gf_middle_ordered(g: Grid["row", "col":4, "k":5], x: Scalar) -> Scalar:
    return hawk.mean(x, over=("row", "k"), policy="ordered", where=x > -1.0)


@hawk.kernel
def gf_ordered_rows_and_total(g: Grid["row", "col":8], x: Scalar, t: Mutable[Scalar]) -> Scalar:
    t = hawk.sum(x, policy="ordered")
    return hawk.sum(x, over="col")


def _layout(kernel):
    return kernel.layout(kernel.default_spec(), 0)


@pytest.mark.parametrize("kernel, form", [
    (gf_tree, "tree"), (gf_lowest, "tree"),
    (gf_row_means_comp, "slots"), (gf_col_comp, "slots"), (gf_col_max, "slots"),
    (gf_histogram, "chunks"),  # a sink: privatised per chunk
    (gf_middle, "slots"),  # kept axes neither leading nor trailing: coordinates counted per slot
    # ordered sums, over every lane or keeping axes: each thread deposits into exact accumulators
    (gf_energy, "chunks"), (gf_pair, "chunks"), (gf_row_means, "chunks"), (gf_col_sums, "chunks"),
    (gf_middle_ordered, "chunks"), (gf_ordered_rows_and_total, "chunks"),
], ids=lambda v: getattr(v, "name", v))
def test_each_stage_gets_its_form(kernel, form):
    assert gpu_form(_layout(kernel), 8) == form


def test_the_tree_lowering_refuses_ordered_sums_and_sinks():
    from hawk.passes.lower_gpu_tree import TreeLowering

    for kernel, what in ((gf_energy, "'e'"), (gf_row_means, "'result'"), (gf_histogram, "'bins'")):
        with pytest.raises(ValueError, match=f"tree forms take neither sinks nor ordered sums.*{what}"):
            TreeLowering(None, _layout(kernel), None, {})


def test_tree_grid_spans_are_aligned_and_fit_the_group_limit():
    lay = _layout(gf_tree)
    for n in (1, 1023, 1024, 1025, 10**6 + 7, 10**8 + 3):
        g = plan_grid(lay, n, 8, (n,))
        assert g.form == "tree" and g.block == WORKGROUP and g.span % GROUP_ALIGN == 0
        assert g.chunks == g.groups <= MAX_GROUPS and (g.chunks - 1) * g.span < n <= g.chunks * g.span


def test_slots_grid_has_a_thread_per_kept_slot():
    g = plan_grid(_layout(gf_row_means_comp), 1000 * 45, 8, (1000, 45))
    assert (g.form, g.groups, g.block, g.span) == ("slots", math.ceil(1000 / WORKGROUP), WORKGROUP, 45)
    g = plan_grid(_layout(gf_middle), 500 * 20, 8, (500, 4, 5))
    assert (g.groups, g.span) == (1, 2500)  # 4 kept slots: one workgroup, 500 x 5 lanes each


@hawk.kernel
def gf_store_and_ordered(key: Index, x: Scalar, last: Mutable["slot":10], tot: Mutable["slot":20]):
    hawk.scatter(last)[key] = x
    hawk.scatter(tot, policy="ordered")[key] += x


def test_copy_values_count_what_grows_with_the_chunks():
    # host threads and GPU chunks are capped by what their private copies hold together
    assert _layout(gf_histogram).copy_values() == 2 * 16  # "auto" on a scatter is compensated: pairs
    # a stored slot and its mark; an ordered slot's (high, low) pair on the host, none on a GPU, whose threads add
    # every term into the slot's shared exact accumulator
    lay = _layout(gf_store_and_ordered)
    assert lay.copy_values() == 2 * 10 + 2 * 20 and device_copy_values(lay) == 2 * 10
    assert _layout(gf_col_max).copy_values() == 33  # a kept cell's copy
    assert _layout(gf_col_means).copy_values() == 18  # a mean's sums and counts


def test_private_sink_copies_fit_their_budget():
    lay = _layout(gf_histogram)  # 16 slots, compensated: a private copy of (sum, correction) pairs per chunk
    g = plan_grid(lay, 10**6, 8, (10**6,))
    assert g.form == "chunks" and 256 < g.chunks <= PRIVATE_BUDGET // 32 and g.chunks * g.span >= 10**6


@hawk.kernel
def gf_wide_ordered(v: Vector[64]) -> Vector[64]:
    return hawk.sum(v, policy="ordered")


def test_exact_accumulators_of_the_threads_fit_their_budget():
    """Each chunk-form thread keeps exact accumulators (72 words a float64 component, 16 a float32 one) for the
    ordered sums over every lane: the threads are capped so that they all fit EXACT_BUDGET words."""
    for fbytes, dtype in ((8, "float64"), (4, "float32")):
        lay = _layout(gf_wide_ordered)
        width = lay.exact_width(dtype)
        assert width == 64 * exact_words(dtype)
        for n in (10**3, 10**6, 10**8 + 7):
            g = plan_grid(lay, n, fbytes, (n,))
            assert g.form == "chunks" and g.chunks * width <= EXACT_BUDGET and g.chunks * g.span >= n, (n, g)
        assert plan_grid(lay, 10**8, fbytes, (10**8,)).chunks >= EXACT_BUDGET // width - 1  # as many as fit


def _spirv():
    why = bt_target_missing("spirv")
    if why:
        pytest.skip(f"target 'spirv' cannot run here: {why}")


SIZES = (1, 63, 64, 65, 1023, 1024, 1025, 64 * 1024 + 5, 300_001)


@pytest.mark.parametrize("n", SIZES)
def test_tree_form_matches_numpy(n):
    _spirv()
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n) * np.exp(rng.uniform(-20, 20, n))
    assert plan_grid(_layout(gf_tree), n, 8, (n,)).form == "tree"
    dev = bt_run_on("spirv", gf_tree, x=x)
    eps = np.finfo(float).eps
    assert math.isclose(dev["c"][0], math.fsum(x) / n, rel_tol=0, abs_tol=2 * eps * np.abs(x).sum() / n)
    np.testing.assert_allclose(dev["big"], x[x > 0.5].sum(), rtol=1e-12)
    np.testing.assert_allclose(dev["sq"], (x * x).sum(), rtol=1e-12)
    low = bt_run_on("spirv", gf_lowest, x=x)
    bt_same_bits(low, bt_run_on("host", gf_lowest, x=x), "min and per-lane output")


@pytest.mark.parametrize("n", SIZES)
def test_ordered_sums_in_the_chunk_form_are_exact_and_the_hosts_bits(n):
    _spirv()
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n) * np.exp(rng.uniform(-20, 20, n))
    grid = plan_grid(_layout(gf_energy), n, 8, (n,))
    assert grid.form == "chunks" and (n < 2048 or grid.chunks > 1), grid  # the lanes really split over threads
    host = bt_run_on("host", gf_energy, x=x)
    dev = bt_run_on("spirv", gf_energy, x=x)
    bt_same_bits(dev["e"], host["e"], f"ordered sum of squares, n={n}")
    assert dev["e"][0] == bt_ordered_sum(x * x), "the exact sum of the squares, rounded once"
    eps = np.finfo(float).eps
    assert math.isclose(dev["c"][0], math.fsum(x) / n, rel_tol=0, abs_tol=2 * eps * np.abs(x).sum() / n)
    np.testing.assert_allclose(dev["big"], x[x > 0.5].sum(), rtol=1e-12)


@pytest.mark.parametrize("n", (5, 2049, 70_001))
def test_vector_ordered_mean(n):
    _spirv()
    v = np.random.default_rng(7).standard_normal((2, n))
    got = bt_run_on("spirv", gf_pair, v=v)
    bt_same_bits(got, bt_run_on("host", gf_pair, v=v), "ordered masked vector mean")
    keep = v[0] > 0
    want = [bt_ordered_sum(v[c], mask=keep) / keep.sum() for c in range(2)]  # the exact sum, divided once
    bt_same_bits(got, np.array(want), "the exact sums divided by the count")


@pytest.mark.parametrize("base, count", [(0, 1), (3, 1500), (1000, 2100), (4095, 4097)])
def test_lane_ranges(base, count):
    _spirv()
    x = np.random.default_rng(base).uniform(-1, 1, 9000)

    def run(kernel, t):
        out = eagle.deploy(kernel, target=t).run(base=base, count=count, x=x)
        return {k: np.asarray(v) for k, v in out.items()}

    host, dev = run(gf_energy, "host"), run(gf_energy, "spirv")
    part = x[base:base + count]
    bt_same_bits(dev["e"], host["e"], f"ordered sum over lanes [{base}, {base + count})")
    assert dev["e"][0] == bt_ordered_sum(part * part)
    np.testing.assert_allclose(dev["c"], part.mean(), rtol=1e-12)
    tree = run(gf_tree, "spirv")
    np.testing.assert_allclose(tree["c"], part.mean(), rtol=1e-12)
    np.testing.assert_allclose(tree["sq"], (part * part).sum(), rtol=1e-12)


@pytest.mark.parametrize("rows", (1, 64, 65, 3001))
def test_ordered_kept_axis_sums_are_exact_and_the_hosts_bits(rows):
    _spirv()
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 45)) * 10.0 ** rng.integers(-8, 8, (rows, 45))
    dev, host = bt_run_on("spirv", gf_row_means, x=x), bt_run_on("host", gf_row_means, x=x)
    bt_same_bits(dev["result"], host["result"], "ordered row means")
    bt_same_bits(dev["result"], np.array([bt_ordered_sum(x[r] * 3.0) / 45 for r in range(rows)]), "exact row means")
    assert math.isclose(dev["total"][0], math.fsum(x.ravel()), rel_tol=1e-15, abs_tol=1e-12)
    y = rng.uniform(-1, 2, (rows, 6, 7))
    got = bt_run_on("spirv", gf_col_sums, x=y)
    bt_same_bits(got, bt_run_on("host", gf_col_sums, x=y), "ordered masked column sums")
    bt_same_bits(got, np.array([[bt_ordered_sum(y[:, c, k], mask=y[:, c, k] < 1.5) for k in range(7)]
                                for c in range(6)]), "exact masked column sums")


@pytest.mark.parametrize("rows", (1, 64, 65, 3001))
def test_slots_form_matches_numpy(rows):
    _spirv()
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 45)) * 10.0 ** rng.integers(-8, 8, (rows, 45))
    dev = bt_run_on("spirv", gf_row_means_comp, x=x)
    want = np.array([math.fsum(r) for r in x * 3.0]) / 45
    np.testing.assert_allclose(dev["result"], want, rtol=4 * np.finfo(float).eps, atol=1e-300)
    assert math.isclose(dev["total"][0], math.fsum(x.ravel()), rel_tol=1e-15, abs_tol=1e-12)
    z = rng.standard_normal((rows, 33))
    bt_same_bits(bt_run_on("spirv", gf_col_max, x=z), z.max(axis=0), "column max")
    comp = bt_run_on("spirv", gf_col_comp, x=z)
    want = np.array([math.fsum(z[:, c]) for c in range(33)])
    np.testing.assert_allclose(comp, want, rtol=0, atol=4 * np.finfo(float).eps * np.abs(z).sum(axis=0).max())


@pytest.mark.parametrize("rows", (1, 70, 1500))
def test_slots_form_with_middle_kept_axes(rows):
    _spirv()
    x = np.random.default_rng(rows).standard_normal((rows, 4, 5))
    got = bt_run_on("spirv", gf_middle, x=x)
    np.testing.assert_allclose(got, x.sum(axis=(0, 2)), rtol=1e-12)
    got = bt_run_on("spirv", gf_middle_ordered, x=x)
    bt_same_bits(got, bt_run_on("host", gf_middle_ordered, x=x), "ordered")
    keep = x > -1.0
    want = [bt_ordered_sum(x[:, c, :], mask=keep[:, c, :]) / keep[:, c, :].sum() for c in range(4)]
    bt_same_bits(got, np.array(want), "exact masked means over rows and k")


def test_chunk_form_still_runs_scatters():
    _spirv()
    rng = np.random.default_rng(3)
    k = rng.integers(0, 16, 5000).astype(np.int32)
    x = rng.standard_normal(5000)
    got = bt_run_on("spirv", gf_histogram, k=k, x=x)
    np.testing.assert_allclose(got, np.bincount(k, weights=x, minlength=16), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ subgroup shuffles

def test_wave64_needs_no_shared_memory_tree():
    from hawk.targets.rocdl import RocdlTarget

    assert (RocdlTarget("gfx90a").subgroup, RocdlTarget("gfx1100").subgroup) == (64, 32)
    gpu = gf_lowest.lowered_gpu(gf_lowest.default_spec(), 0, 64).gpu_module
    assert len(re.findall(r"gpu.shuffle\s+xor", gpu)) == 6 and "gpu.barrier" not in gpu  # min: 6 levels


def test_spirv_subgroup_option_is_checked():
    from hawk.targets.spirv import SpirvTarget

    with pytest.raises(ValueError, match="subgroup=3"):
        SpirvTarget(subgroup=3)
    assert "subgroup=8" in SpirvTarget(subgroup=8).options and "subgroup" not in SpirvTarget().options


def _device_subgroup() -> int:
    _spirv()
    from eagle.targets.vulkan_runtime import VulkanRuntime

    rt = VulkanRuntime.shared()
    if not rt.subgroup_shuffles or 64 % rt.subgroup_size:
        pytest.skip(f"device {rt.device_name} has no subgroup shuffles that divide a workgroup of 64")
    return rt.subgroup_size


@pytest.mark.parametrize("n", (1, 100, 4099, 200_001))
def test_spirv_with_the_device_subgroup_size(n):
    size = _device_subgroup()
    rng = np.random.default_rng(n + 5)
    x = rng.standard_normal(n) * 1e3
    dev = {k: np.asarray(v) for k, v in eagle.deploy(gf_tree, target="spirv", subgroup=size).run(x=x).items()}
    np.testing.assert_allclose(dev["c"], x.mean(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dev["big"], x[x > 0.5].sum(), rtol=1e-12)
    np.testing.assert_allclose(dev["sq"], (x * x).sum(), rtol=1e-12)
    low = eagle.deploy(gf_lowest, target="spirv", subgroup=size).run(x=x)
    bt_same_bits({k: np.asarray(v) for k, v in low.items()}, bt_run_on("host", gf_lowest, x=x), "min")


def test_spirv_subgroup_from_the_device():
    size = _device_subgroup()
    assert eagle.Plan(gf_lowest, "spirv", subgroup="device").device.subgroup == size
    x = np.random.default_rng(4).standard_normal(5000)
    got = eagle.deploy(gf_lowest, target="spirv", subgroup="device").run(x=x)
    bt_same_bits({k: np.asarray(v) for k, v in got.items()}, bt_run_on("host", gf_lowest, x=x), "min")


def test_spirv_refuses_a_subgroup_size_the_device_does_not_run():
    size = _device_subgroup()
    other = 32 if size != 32 else 16
    with pytest.raises(RuntimeError, match=f"compiled with subgroup={other}.*deploy with subgroup={size}"):
        eagle.deploy(gf_lowest, target="spirv", subgroup=other).run(x=np.ones(10))


# ------------------------------------------------------------------ float atomics for large plain sinks


@hawk.kernel
def gf_wide_histogram(k: Index, x: Scalar, bins: Mutable["bin":100_000]):
    hawk.scatter(bins, policy="plain")[k] += x


def test_large_plain_sinks_use_float_atomics_where_the_target_has_them():
    lay = _layout(gf_wide_histogram)
    assert lay.atomic_sinks() == ["bins"]  # 100000 slots: atomics where the target has them, else private copies
    assert lay.fixed_chunks() and 1 < plan_grid(lay, 10**6, 8, (10**6,)).chunks < 1000  # spirv: a copy a thread
    assert plan_grid(lay, 10**6, 8, (10**6,), atomics=True).chunks > 1000  # nvvm, rocdl: spread over threads
    spec = gf_wide_histogram.default_spec()
    assert "memref.atomic_rmw addf" in gf_wide_histogram.lowered_gpu(spec, 0, 32, True).gpu_module
    assert "atomic_rmw" not in gf_wide_histogram.lowered_gpu(spec, 0, 32, False).gpu_module
    from hawk.targets.nvvm import NvvmTarget

    ptx = NvvmTarget("sm_90").compile(gf_wide_histogram.lowered_gpu(spec, 0, 32, True).gpu_module).decode()
    assert re.search(r"atom\.global\.add\.f64|red\.global\.add\.f64", ptx)
    for kernel in (gf_histogram, gf_energy):  # small sinks stay private; sums have no sinks
        assert kernel.layout(kernel.default_spec(), 0).atomic_sinks() == []


def test_large_plain_sink_on_spirv_still_adds_every_lane():
    _spirv()
    rng = np.random.default_rng(11)
    k = rng.integers(0, 100_000, 50_000).astype(np.int32)
    x = rng.standard_normal(50_000)
    got = bt_run_on("spirv", gf_wide_histogram, k=k, x=x)
    np.testing.assert_allclose(got, np.bincount(k, weights=x, minlength=100_000), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ private copies of kept cells


@hawk.kernel
def gf_col_min_and_low(g: Grid["row", "col":7, "k":3], x: Scalar, low: Mutable[Scalar]) -> Scalar:
    low = hawk.min(x)
    return hawk.min(x, over="row", where=x > -1.0)


def test_kept_cells_off_the_leading_axes_get_a_copy_per_chunk():
    # compensated sums a (sum, correction) pair per slot and chunk; ordered ones exact accumulators, a copy per
    # chunk while few (the column sums' 42 slots) and one shared copy when the kept axis is the unbounded leading
    # one (the row means)
    for kernel, private in ((gf_col_max, ["result"]), (gf_col_sums, ["result"]), (gf_col_comp, ["result"]),
                            (gf_middle, ["result"]), (gf_row_means, [])):
        lay = _layout(kernel)
        assert lay.private_cells() == private, kernel.name
        if private:
            assert lay.parallel_span() == 1  # so host threads and GPU chunks may split the rows anywhere


@hawk.kernel
def gf_col_means(g: Grid["row", "col":9], x: Scalar) -> Scalar:
    return hawk.mean(x, over="row", where=x > -0.5)


SMALL_CHUNK = 1024  # min_chunk for the thread-count tests: small runs split into several host chunks


def _host_runs(kernel, **planes) -> list:
    """The host's results at 1, 2 and 3 threads, in small chunks; a run with threads > 1 must really split."""
    runs = []
    for threads in (1, 2, 3):
        plan = eagle.deploy(kernel, threads=threads, min_chunk=SMALL_CHUNK)
        out = plan.run(**planes)
        assert threads == 1 or min(plan.last_chunks) > 1, f"{kernel.name} threads={threads}: {plan.last_chunks}"
        runs.append({k: np.asarray(v) for k, v in out.items()} if isinstance(out, dict) else np.asarray(out))
    return runs


def _slots_run(kernel, slots: int, **planes):
    """A run on spirv, whose grid gives every kept slot a GPU thread of its own (host threads play no part)."""
    _spirv()
    x = planes["x"]
    grid = plan_grid(_layout(kernel), x.size, 8, x.shape)
    assert grid.form == "slots" and grid.block * grid.groups >= slots and grid.span * slots == x.size, grid
    return bt_run_on("spirv", kernel, **planes)


def test_kept_mean_copies_carry_their_counts():
    assert _layout(gf_col_means).private == {"result": 18}  # 9 sums, then 9 counts, per copy
    x = np.random.default_rng(5).standard_normal((30_000, 9))
    want = np.array([x[:, c][x[:, c] > -0.5].mean() for c in range(9)])
    for threads, got in enumerate(_host_runs(gf_col_means, x=x), 1):
        np.testing.assert_allclose(got, want, rtol=1e-10, err_msg=f"threads={threads}")
    np.testing.assert_allclose(_slots_run(gf_col_means, 9, x=x), want, rtol=1e-10)


def test_kept_cell_copies_give_the_same_bits_at_every_thread_count():
    x = np.random.default_rng(21).standard_normal((40_000, 7, 3))
    want = np.where(x > -1.0, x, np.inf).min(axis=0)
    for threads, out in enumerate(_host_runs(gf_col_min_and_low, x=x), 1):
        np.testing.assert_array_equal(out["result"], want, err_msg=f"threads={threads}")
        assert out["low"][0] == x.min(), threads
    out = _slots_run(gf_col_min_and_low, 21, x=x)
    np.testing.assert_array_equal(out["result"], want)
    assert out["low"][0] == x.min()


def test_the_host_finish_is_the_same_for_every_gpu_variant():
    # gpu_finish reuses whichever variant (subgroup width, atomics) a target already lowered: that is only right
    # while the variants' finishes are one and the same
    for kernel in (gf_energy, gf_wide_histogram, gf_col_means):
        spec = kernel.default_spec()
        finishes = {kernel.lowered_gpu(spec, 0, sg, at).finish_llvm_ir for sg in (0, 32, 64) for at in (False, True)}
        assert len(finishes) == 1 and kernel.gpu_finish(spec, 0) in finishes
