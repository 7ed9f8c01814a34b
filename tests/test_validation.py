"""Run-time input checks of eagle: every bad input is an `eagle.InputError` (a ValueError) naming the kernel
and the plane (or extent, or sink) at fault, raised before anything is written. And the caller's inputs are
never written, whatever their layout.

Every test runs on each target of conftest.BT_TARGETS (the `target` fixture); off the host, each error message
must be word for word the host's for the same inputs.
"""

import contextlib
import functools
import re

import numpy as np
import pytest

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar, Table, Vector

RNG = np.random.default_rng(20240607)


@contextlib.contextmanager
def _raises(kernel: str, *names: str, any_of: tuple[str, ...] = ()):
    """An eagle.InputError (a ValueError) naming `kernel`, every one of `names` and one of `any_of`."""
    with pytest.raises(eagle.InputError) as info:
        yield info
    err, msg = info.value, str(info.value)
    assert isinstance(err, ValueError), type(err)
    for word in (kernel, *names):
        assert re.search(rf"\b{re.escape(word)}\b", msg), f"{word!r} not named in: {msg}"
    if any_of:
        assert any(re.search(rf"\b{re.escape(w)}\b", msg) for w in any_of), f"none of {any_of} in: {msg}"


def _refused(target, plan, kernel: str, *names: str, any_of: tuple[str, ...] = (), **planes):
    """`plan(target).run(**planes)` raises the eagle.InputError `_raises` wants; on a target other than the host the
    message is word for word the one the host gives for the same planes (validation does not depend on the target)."""
    with _raises(kernel, *names, any_of=any_of) as info:
        plan(target).run(**planes)
    if target != "host":
        with pytest.raises(eagle.InputError) as host:
            plan("host").run(**planes)
        assert str(info.value) == str(host.value), f"{target}: {info.value}\nhost: {host.value}"


# --- kernels, built once ----------------------------------------------------------------------------------


@functools.cache
def _mix(target):
    @hawk.kernel
    def vk_mix(wgt: Scalar, vel: Vector[3]) -> Scalar:
        return wgt * vel.sum()

    return eagle.deploy(vk_mix, target=target)


@functools.cache
def _gather(target):
    @hawk.kernel
    def vk_gather(src: Scalar, pick: Index) -> Scalar:
        return src.at(pick) * 2.0

    return eagle.deploy(vk_gather, target=target)


@functools.cache
def _grid(target):
    @hawk.kernel
    def vk_grid(lane: Grid["row", "col":4], u: Scalar) -> Scalar:
        return u * 3.0

    return eagle.deploy(vk_grid, target=target)


@functools.cache
def _grid_no_plane(target):
    @hawk.kernel
    def vk_grid_tab(lane: Grid["row", "col":4], tab: Table["col":4]) -> Scalar:
        return tab.at(col=lane.col) * 2.0

    return eagle.deploy(vk_grid_tab, target=target)


@functools.cache
def _put(target):
    @hawk.kernel
    def vk_put(slot_key: Index, wgt: Scalar, bins: Mutable["bin":6]):
        hawk.scatter(bins)[slot_key] += wgt

    return eagle.deploy(vk_put, target=target)


@functools.cache
def _put_computed(target):
    @hawk.kernel
    def vk_put_twice(slot_key: Index, wgt: Scalar, bins: Mutable["bin":6]):
        hawk.scatter(bins)[slot_key * 2] += wgt

    return eagle.deploy(vk_put_twice, target=target)


@functools.cache
def _param(target):
    @hawk.kernel
    def vk_param(wgt: Scalar, gain: Param) -> Scalar:
        return wgt * gain

    return eagle.deploy(vk_param, target=target)


@functools.cache
def _table(target):
    @hawk.kernel
    def vk_table(wgt: Scalar, coef: Table["slot":3]) -> Scalar:
        return wgt * coef.at(slot=1)

    return eagle.deploy(vk_table, target=target)


def _planes(n=9, dtype=np.float64):
    return {"wgt": RNG.normal(size=n).astype(dtype), "vel": RNG.normal(size=(3, n)).astype(dtype)}


# --- the error type ----------------------------------------------------------------------------------------


def test_input_error_is_a_value_error():
    assert issubclass(eagle.InputError, ValueError)


def test_good_run_for_reference(target):
    p = _planes()
    got = np.asarray(_mix(target).run(**p))
    np.testing.assert_allclose(got, p["wgt"] * p["vel"].sum(axis=0), rtol=1e-12, atol=1e-12)


# --- planes: presence, names, shapes, lane counts ---------------------------------------------------------


def test_missing_plane(target):
    p = _planes()
    del p["vel"]
    _refused(target, _mix, "vk_mix", "vel", **p)


def test_unknown_plane_name(target):
    _refused(target, _mix, "vk_mix", "velocity_typo", **_planes(), velocity_typo=np.zeros(9))


def test_vector_plane_with_wrong_leading_extent(target):
    p = _planes()
    p["vel"] = RNG.normal(size=(2, 9))
    _refused(target, _mix, "vk_mix", "vel", **p)


def test_vector_plane_given_one_dimensional_array(target):
    p = _planes()
    p["vel"] = RNG.normal(size=9)
    _refused(target, _mix, "vk_mix", "vel", **p)


def test_planes_disagree_on_lane_count(target):
    p = _planes()
    p["vel"] = RNG.normal(size=(3, 12))
    _refused(target, _mix, "vk_mix", any_of=("wgt", "vel"), **p)


def test_index_and_scalar_planes_disagree_on_lane_count(target):
    _refused(target, _gather, "vk_gather", any_of=("src", "pick"), src=np.arange(6.0),
             pick=np.arange(5, dtype=np.int32))


# --- dtypes ------------------------------------------------------------------------------------------------


def test_int_array_for_scalar_plane(target):
    p = _planes()
    p["wgt"] = np.arange(9, dtype=np.int64)
    _refused(target, _mix, "vk_mix", "wgt", **p)


def test_float_array_for_index_plane(target):
    _refused(target, _gather, "vk_gather", "pick", src=np.arange(6.0), pick=np.array([5.0, 4, 3, 2, 1, 0]))


def test_int16_index_plane(target):
    _refused(target, _gather, "vk_gather", "pick", src=np.arange(6.0), pick=np.arange(6, dtype=np.int16))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_index_plane_int32_and_int64_accepted(target, dtype):
    src = np.arange(6.0) + 0.25
    pick = np.array([5, 0, 3, 3, 1, 2], dtype=dtype)
    np.testing.assert_array_equal(np.asarray(_gather(target).run(src=src, pick=pick)), src[pick] * 2.0)


def test_mixed_float32_and_float64_planes_promote(target):
    p = _planes()
    p["wgt"] = p["wgt"].astype(np.float32)  # beside float64 vel: the run is float64 (tests/test_mixed_floats.py)
    got = np.asarray(_mix(target).run(**p))
    want = np.asarray(_mix(target).run(wgt=p["wgt"].astype(np.float64), vel=p["vel"]))
    assert got.dtype == np.float64 and got.tobytes() == want.tobytes()


def test_float32_run_is_accepted(target):
    p = _planes(dtype=np.float32)
    got = np.asarray(_mix(target).run(**p))
    np.testing.assert_allclose(got, p["wgt"] * p["vel"].sum(axis=0), rtol=1e-5, atol=1e-6)


# --- Grid extents ------------------------------------------------------------------------------------------


def test_grid_extent_inferred_and_bound(target):
    u = RNG.normal(size=(3, 4))
    np.testing.assert_allclose(np.asarray(_grid(target).run(u=u)), u * 3.0, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(_grid(target).run(u=u, row=3)), u * 3.0, rtol=1e-12)


def test_grid_extent_contradicts_array(target):
    _refused(target, _grid, "vk_grid", "row", u=RNG.normal(size=(3, 4)), row=5)


def test_fixed_grid_extent_mismatch(target):
    _refused(target, _grid, "vk_grid", "u", u=RNG.normal(size=(3, 5)))


def test_missing_runtime_extent_that_cannot_be_inferred(target):
    tab = np.array([1.0, -2.0, 0.5, 4.0])
    _refused(target, _grid_no_plane, "vk_grid_tab", "row", tab=tab)
    got = np.asarray(_grid_no_plane(target).run(tab=tab, row=2))
    np.testing.assert_array_equal(got, np.broadcast_to(tab * 2.0, (2, 4)))


# --- scatter keys and sinks --------------------------------------------------------------------------------


def test_scatter_good_run_adds_onto_passed_sink(target):
    key = np.array([0, 5, 5, 2, 0], dtype=np.int32)
    wgt = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    bins = np.full(6, 10.0)
    _put(target).run(slot_key=key, wgt=wgt, bins=bins)
    np.testing.assert_allclose(bins, [16.0, 10.0, 14.0, 10.0, 10.0, 15.0], rtol=1e-12)


def test_index_key_out_of_range_leaves_passed_sink_unchanged(target):
    key = np.array([0, 1, 6, 2], dtype=np.int32)
    wgt = np.ones(4)
    bins = np.arange(6.0) + 0.5
    before = bins.copy()
    _refused(target, _put, "vk_put", "bins", slot_key=key, wgt=wgt, bins=bins)
    np.testing.assert_array_equal(bins, before)


def test_index_key_out_of_range_with_omitted_sink(target):
    _refused(target, _put, "vk_put", "bins", slot_key=np.array([3, 9], dtype=np.int64), wgt=np.ones(2))


def test_computed_key_out_of_range(target):
    key = np.arange(6, dtype=np.int32)  # key * 2 reaches 10, outside the 6 bins
    _refused(target, _put_computed, "vk_put_twice", "bins", slot_key=key, wgt=np.ones(6))


def test_computed_key_in_range_is_accepted(target):
    key = np.array([0, 1, 2, 1], dtype=np.int32)
    got = np.asarray(_put_computed(target).run(slot_key=key, wgt=np.array([1.0, 2.0, 3.0, 4.0])))
    np.testing.assert_allclose(got, [1.0, 0.0, 6.0, 0.0, 3.0, 0.0], rtol=1e-12)


@pytest.mark.parametrize(
    "bins",
    [
        np.zeros(6, dtype=np.float32),
        np.zeros(6, dtype=np.int64),
        np.zeros(7),
        np.zeros((6, 1)),
        np.zeros(12)[::2],
    ],
    ids=["float32", "int64", "too-long", "2-d", "non-contiguous"],
)
def test_passed_sink_with_wrong_dtype_shape_or_layout(target, bins):
    before = bins.copy()
    _refused(target, _put, "vk_put", "bins", slot_key=np.array([0, 1], dtype=np.int32), wgt=np.ones(2), bins=bins)
    np.testing.assert_array_equal(bins, before)


# --- Param and Table ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("gain", [2.5, np.float64(2.5), np.array(2.5), np.array([2.5])], ids=str)
def test_param_forms_accepted(target, gain):
    wgt = np.arange(5.0)
    np.testing.assert_allclose(np.asarray(_param(target).run(wgt=wgt, gain=gain)), wgt * 2.5, rtol=1e-12)


def test_param_given_array_of_size_two(target):
    _refused(target, _param, "vk_param", "gain", wgt=np.arange(5.0), gain=np.array([2.5, 1.0]))


def test_table_with_wrong_shape(target):
    _refused(target, _table, "vk_table", "coef", wgt=np.arange(5.0), coef=np.array([1.0, 2.0, 3.0, 4.0]))


def test_table_good_run(target):
    wgt = np.arange(5.0)
    got = np.asarray(_table(target).run(wgt=wgt, coef=np.array([1.0, -3.0, 7.0])))
    np.testing.assert_allclose(got, wgt * -3.0, rtol=1e-12)


# --- the caller's arrays are never written -----------------------------------------------------------------


def _run_and_check_untouched(plan, expect, **planes):
    copies = {k: np.array(v, copy=True) for k, v in planes.items() if isinstance(v, np.ndarray)}
    got = np.asarray(plan.run(**planes))
    for k, c in copies.items():
        np.testing.assert_array_equal(planes[k], c, err_msg=f"input {k!r} was modified")
    np.testing.assert_allclose(got, expect, rtol=1e-5 if got.dtype == np.float32 else 1e-12, atol=1e-6)
    return got


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_inputs_not_modified_contiguous(target, dtype):
    p = _planes(n=17, dtype=dtype)
    _run_and_check_untouched(_mix(target), p["wgt"] * p["vel"].sum(axis=0), **p)


def test_inputs_not_modified_and_non_contiguous_inputs_work(target):
    big = RNG.normal(size=40)
    wide = RNG.normal(size=(3, 60))
    wgt, vel = big[::2], wide[:, ::3]  # strided views: (20,) and (3, 20)
    assert not wgt.flags.c_contiguous and not vel.flags.c_contiguous
    big0, wide0 = big.copy(), wide.copy()
    _run_and_check_untouched(_mix(target), wgt * vel.sum(axis=0), wgt=wgt, vel=vel)
    np.testing.assert_array_equal(big, big0)
    np.testing.assert_array_equal(wide, wide0)


def test_fortran_ordered_vector_plane_works(target):
    vel = np.asfortranarray(RNG.normal(size=(3, 11)))
    wgt = RNG.normal(size=11)
    _run_and_check_untouched(_mix(target), wgt * vel.sum(axis=0), wgt=wgt, vel=vel)


def test_reversed_and_strided_index_plane_works(target):
    src_base = RNG.normal(size=16)
    src = src_base[::2]  # 8 lanes, strided
    pick_base = np.arange(16, dtype=np.int64) % 8
    pick = pick_base[::-2]  # 8 lanes, negative stride
    _run_and_check_untouched(_gather(target), src[pick] * 2.0, src=src, pick=pick)


def test_grid_plane_transposed_view_works(target):
    base = RNG.normal(size=(4, 3))
    u = base.T  # (3, 4), not C-contiguous
    _run_and_check_untouched(_grid(target), u * 3.0, u=u)


def test_scatter_inputs_not_modified(target):
    key_base = np.array([5, 0, 1, 0, 2, 3, 4, 5, 1, 0], dtype=np.int32)
    key, wgt = key_base[::2], np.linspace(0.5, 3.0, 10)[::2]
    copies = key_base.copy(), wgt.copy()
    got = np.asarray(_put(target).run(slot_key=key, wgt=wgt))
    np.testing.assert_array_equal(key_base, copies[0])
    np.testing.assert_array_equal(wgt, copies[1])
    np.testing.assert_allclose(got, np.bincount(key, wgt, minlength=6), rtol=1e-12)


def test_param_and_table_arrays_not_modified(target):
    gain = np.array([1.5])
    coef = np.array([0.0, 2.0, 4.0])
    wgt = np.arange(4.0)
    _run_and_check_untouched(_param(target), wgt * 1.5, wgt=wgt, gain=gain)
    _run_and_check_untouched(_table(target), wgt * 2.0, wgt=wgt, coef=coef)


# --- aliasing: an array the run writes that is also one it reads ------------------------------------------


@functools.cache
def _reverse(target):
    @hawk.kernel
    def vk_reverse(src: Scalar, pick: Index, out: Mutable[Scalar]):
        out = src.at(pick) * 2.0

    return eagle.deploy(vk_reverse, target=target)


@functools.cache
def _affine(target):
    @hawk.kernel
    def vk_affine(src: Scalar, out: Mutable[Scalar]):
        out = src * 2.0 + 1.0

    return eagle.deploy(vk_affine, target=target)


@functools.cache
def _affine_vec(target):
    @hawk.kernel
    def vk_affine_vec(vel: Vector[3], out: Mutable[Vector[3]]):
        out = vel * 0.5 - 3.0

    return eagle.deploy(vk_affine_vec, target=target)


@functools.cache
def _table_out(target):
    @hawk.kernel
    def vk_table_out(pick: Index, coef: Table["slot":5], out: Mutable[Scalar]):
        out = coef.at(slot=4 - pick) + 0.25

    return eagle.deploy(vk_table_out, target=target)


@functools.cache
def _put_self(target):
    @hawk.kernel
    def vk_put_self(slot_key: Index, wgt: Scalar, bins: Mutable["bin":6]):
        hawk.scatter(bins)[slot_key] += wgt * 10.0

    return eagle.deploy(vk_put_self, target=target)


@functools.cache
def _share(target):
    @hawk.kernel
    def vk_share(src: Scalar, out: Mutable[Scalar]):
        out = src / hawk.sum(src)

    return eagle.deploy(vk_share, target=target)


@functools.cache
def _two_out(target):
    @hawk.kernel
    def vk_two_out(src: Scalar, lo: Mutable[Scalar], hi: Mutable[Scalar]):
        lo = src - 1.0
        hi = src + 1.0

    return eagle.deploy(vk_two_out, target=target)


@functools.cache
def _total(target):
    @hawk.kernel
    def vk_total(src: Scalar, total: Mutable[Scalar]):
        total = hawk.sum(src)

    return eagle.deploy(vk_total, target=target)


def test_at_read_of_the_array_the_run_writes(target):
    src = RNG.normal(size=8)
    want = src[::-1] * 2.0
    pick = np.arange(7, -1, -1, dtype=np.int32)
    got = _reverse(target).run(src=src, pick=pick, out=src)
    np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(src, want)  # the output was written in place, from the input as it was before


def test_at_read_of_a_shifted_view_of_the_output(target):
    buf = RNG.normal(size=9)
    src, out = buf[:-1], buf[1:]  # overlapping, one lane apart
    want = src[np.arange(8) ^ 1] * 2.0
    got = _reverse(target).run(src=src, pick=(np.arange(8) ^ 1).astype(np.int64), out=out)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_lane_local_input_updated_in_place(target):
    src = RNG.normal(size=11)
    want = src * 2.0 + 1.0
    got = _affine(target).run(src=src, out=src)
    np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(src, want)
    if target == "host":  # read and written in place: the bound input is the caller's own memory, not a copy
        bound = _affine(target).bind(src=src, out=src)
        assert np.shares_memory(bound.inputs["src"], src)


def test_lane_local_input_overlapping_output_by_one_lane(target):
    buf = RNG.normal(size=12)
    src, out = buf[:-1], buf[1:]
    want = src * 2.0 + 1.0
    got = _affine(target).run(src=src, out=out)
    np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(buf[1:], want)


def test_vector_lane_local_input_updated_in_place(target):
    vel = RNG.normal(size=(3, 7))
    want = vel * 0.5 - 3.0
    _affine_vec(target).run(vel=vel, out=vel)
    np.testing.assert_array_equal(vel, want)


def test_table_that_is_the_output(target):
    coef = RNG.normal(size=5)
    want = coef[::-1] + 0.25
    got = _table_out(target).run(pick=np.arange(5, dtype=np.int32), coef=coef, out=coef)
    np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(coef, want)


def test_sink_that_is_an_input(target):
    bins = RNG.normal(size=6)
    start = bins.copy()
    key = np.array([5, 4, 3, 2, 1, 0], dtype=np.int32)
    _put_self(target).run(slot_key=key, wgt=bins, bins=bins)
    want = start.copy()
    np.add.at(want, key, start * 10.0)  # every lane adds its value from before the launch
    np.testing.assert_allclose(bins, want, rtol=1e-14)


def test_split_kernel_output_that_is_its_input(target):
    src = RNG.uniform(1.0, 2.0, size=10)
    want = src / src.sum()
    _share(target).run(src=src, out=src)
    np.testing.assert_allclose(src, want, rtol=1e-13)


def test_cell_output_that_is_an_input(target):
    src = RNG.normal(size=6)
    want = src.sum()
    _total(target).run(src=src, total=src[2:3])
    assert abs(src[2] - want) <= 1e-13 * np.abs(src).sum()


def test_two_outputs_sharing_memory_are_refused(target):
    buf = np.zeros(8)
    _refused(target, _two_out, "vk_two_out", "lo", "hi", src=np.ones(8), lo=buf, hi=buf)
    np.testing.assert_array_equal(buf, 0.0)


# --- huge Grid extents -------------------------------------------------------------------------------------


@functools.cache
def _wide(target):
    @hawk.kernel
    def vk_wide(lane: Grid["row", "col":4], out: Mutable[Vector[2]]):
        out = m.vec(lane.row, lane.col)

    return eagle.deploy(vk_wide, target=target)


@functools.cache
def _wide_sum(target):
    @hawk.kernel
    def vk_wide_sum(lane: Grid["row", "col":4], total: Mutable[Scalar]):
        total = hawk.sum(1.0, where=lane.col > 1)

    return eagle.deploy(vk_wide_sum, target=target)


def test_grid_extent_larger_than_memory_is_refused_before_allocating(target):
    with _raises("vk_wide", "row") as info:
        _wide(target).run(row=2 ** 40)
    msg = str(info.value)
    assert "bytes" in msg and str(2 ** 40 * 4 * 2 * 8) in msg, msg


def test_grid_extent_overflowing_lane_indices_is_refused(target):
    with _raises("vk_wide_sum", "row", any_of=("64-bit",)):
        _wide_sum(target).run(row=2 ** 62)


def test_grid_extent_that_fits_still_runs(target):
    got = np.asarray(_wide(target).run(row=3))
    np.testing.assert_array_equal(got, np.stack([np.repeat(np.arange(3.0), 4).reshape(3, 4),
                                                 np.tile(np.arange(4.0), (3, 1))]))


# --- read-only arrays the run would write ------------------------------------------------------------------


def _read_only(a):
    a.flags.writeable = False
    return a


def test_read_only_cell_output_is_refused(target):
    cell = _read_only(np.zeros(1))
    _refused(target, _total, "vk_total", "total", any_of=("read-only",), src=np.ones(4), total=cell)


def test_read_only_lane_output_is_refused(target):
    out = _read_only(np.zeros(4))
    _refused(target, _affine, "vk_affine", "out", any_of=("read-only",), src=np.ones(4), out=out)


def test_read_only_sink_is_refused(target):
    bins = _read_only(np.full(6, 2.0))
    _refused(target, _put, "vk_put", "bins", any_of=("read-only",), slot_key=np.array([0, 1], dtype=np.int32),
             wgt=np.ones(2), bins=bins)
    np.testing.assert_array_equal(bins, 2.0)


def test_read_only_inputs_are_fine(target):
    src = _read_only(RNG.normal(size=5))
    np.testing.assert_array_equal(np.asarray(_affine(target).run(src=src)), src * 2.0 + 1.0)
