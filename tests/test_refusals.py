"""Kernels hawk refuses, and the few look-alikes it must accept.

Every refusal is a `hawk.KernelError` raised when `@hawk.kernel` reads the function (or, for a retired
module attribute such as `hawk.all_samples`, when the attribute is touched). Its message starts with
``file:line:`` of the offending source line, names the kernel and spells out what to write instead.

The offending line of each kernel is tagged with a trailing ``# @<tag>`` comment; `_line(tag)` finds it in
this file, so the expected line numbers survive edits above them.
"""

import pathlib
import re

import numpy as np
import pytest

import eagle
import hawk
from hawk import Index, Mutable, Scalar, Vector

_SOURCE = pathlib.Path(__file__).read_text().splitlines()


def _line(tag: str) -> int:
    """The 1-based line number of the single source line ending in ``# @<tag>``."""
    hits = [i + 1 for i, text in enumerate(_SOURCE) if text.rstrip().endswith(f"# @{tag}")]
    assert len(hits) == 1, f"tag {tag!r} found on lines {hits}"
    return hits[0]


def _check(excinfo, tags, kernel: str | None, *needles: str) -> str:
    """Assert the refusal's type, location prefix, kernel name and replacement text; return the message."""
    exc = excinfo.value
    msg = str(exc)
    assert isinstance(exc, hawk.KernelError), f"{type(exc).__name__}: {msg}"
    tags = (tags,) if isinstance(tags, str) else tuple(tags)
    prefixes = tuple(f"{__file__}:{_line(t)}:" for t in tags)
    assert msg.startswith(prefixes), f"expected the message to start with one of {prefixes}, got: {msg}"
    if kernel is not None:
        assert re.search(rf"\b{re.escape(kernel)}\b", msg), f"kernel {kernel!r} not named in: {msg}"
    for needle in needles:
        assert needle in msg, f"{needle!r} not in: {msg}"
    return msg


# --- retired module attributes: refused on access ----------------------------------------------------------


def test_all_samples_attribute_is_refused():
    with pytest.raises(hawk.KernelError) as excinfo:
        hawk.all_samples  # noqa: B018  # @attr_all_samples
    _check(excinfo, "attr_all_samples", None, "hawk.sum(x)", "hawk.scatter(", "u.at(i)", "where=")


def test_accum_attribute_is_refused():
    with pytest.raises(hawk.KernelError) as excinfo:
        hawk.Accum  # noqa: B018  # @attr_accum
    _check(excinfo, "attr_accum", None, "Mutable[", "hawk.scatter(")


def test_reduce_attribute_is_refused():
    with pytest.raises(hawk.KernelError) as excinfo:
        hawk.Reduce  # noqa: B018  # @attr_reduce
    _check(excinfo, "attr_reduce", None, "hawk.sum(")


def test_retired_attribute_is_also_an_attribute_error():
    # hasattr/getattr with a default must behave as for any missing attribute
    assert getattr(hawk, "all_samples", "absent") == "absent"
    assert getattr(hawk, "Accum", "absent") == "absent"
    assert getattr(hawk, "Reduce", "absent") == "absent"


# --- retired forms inside a kernel body --------------------------------------------------------------------


def test_all_samples_sum():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_as_sum(x: Scalar, y: Mutable[Scalar]):
            y = hawk.all_samples(x).sum()  # @as_sum

    _check(excinfo, "as_sum", "rf_as_sum", "hawk.sum(x)")


def test_all_samples_max():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_as_max(x: Scalar, y: Mutable[Scalar]):
            y = hawk.all_samples(x).max()  # @as_max

    # the generic all_samples message ("... hawk.sum(x) (likewise hawk.max/min/mean ...") is enough here
    _check(excinfo, "as_max", "rf_as_max", "hawk.max")


def test_all_samples_masked_sum():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_as_masked(x: Scalar, y: Mutable[Scalar]):
            mask = x > 0.5
            y = hawk.all_samples(x)[mask].sum()  # @as_masked

    _check(excinfo, "as_masked", "rf_as_masked", "hawk.sum(x, where=mask)")


def test_all_samples_sum_over_samples_axis():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_as_axis(x: Scalar, y: Mutable[Scalar]):
            y = hawk.all_samples(x).sum(axis="samples")  # @as_axis

    _check(excinfo, "as_axis", "rf_as_axis", "hawk.sum(x)")


def test_all_samples_matrix_row_sum():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_as_row(mx: hawk.Matrix[2, 3], y: Mutable[Vector[3]]):
            y = hawk.all_samples(mx).rows[0].sum()  # @as_row

    msg = _check(excinfo, "as_row", "rf_as_row", "hawk.sum(")
    assert re.search(r"hawk\.sum\(\w+\.rows\[0\]\)", msg), msg


def test_all_samples_read_at_lane():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_as_read(u: Scalar, i: Index, y: Mutable[Scalar]):
            y = hawk.all_samples(u)[i]  # @as_read

    _check(excinfo, "as_read", "rf_as_read", "u.at(i)")


def test_all_samples_keyed_add():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_as_add(key: Index, v: Scalar, y: Mutable["bin":4]):
            hawk.all_samples(y)[key] += v  # @as_add

    _check(excinfo, "as_add", "rf_as_add", "hawk.scatter(y)[key] += v")


def test_all_samples_keyed_store():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_as_store(key: Index, v: Scalar, y: Mutable["bin":4]):
            hawk.all_samples(y)[key] = v  # @as_store

    _check(excinfo, "as_store", "rf_as_store", "hawk.scatter(y)[key] = v")


def test_all_samples_masked_store():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_as_mstore(v: Scalar, y: Mutable[Scalar]):
            y = v * 0.5
            mask = v > 1.0
            hawk.all_samples(y)[mask] = v  # @as_mstore

    _check(excinfo, "as_mstore", "rf_as_mstore", "m.where(mask, v, y)")


def test_accum_annotation():
    # annotations are evaluated when the def runs, so the retired name is refused on access there
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_accum(key: Index, v: Scalar, y: hawk.Accum["bin":4]):  # @ann_accum
            y.add(v, at=key)

    _check(excinfo, "ann_accum", None, "Mutable[", "hawk.scatter(")


def test_reduce_annotation():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_reduce(v: Scalar, y: hawk.Reduce[Scalar]):  # @ann_reduce
            y.contribute(v)

    _check(excinfo, "ann_reduce", None, "hawk.sum(")


def test_add_at():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_add_at(key: Index, v: Scalar, y: Mutable["bin":4]):
            y.add(v, at=key)  # @add_at

    _check(excinfo, "add_at", "rf_add_at", "hawk.scatter(y)[key] += v")


def test_contribute():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_contribute(v: Scalar, y: Mutable[Scalar]):
            y.contribute(v)  # @contribute

    _check(excinfo, "contribute", "rf_contribute", "y = hawk.sum(v)")


def test_write_at():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_write_at(key: Index, v: Scalar, y: Mutable["bin":4]):
            y.write(v, at=key)  # @write_at

    _check(excinfo, "write_at", "rf_write_at", "hawk.scatter(y)[key] = v")


def test_sum_of_one_lanes_scalar():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_own_sum(x: Scalar, y: Mutable[Scalar]):
            y = x.sum()  # @own_sum

    _check(excinfo, "own_sum", "rf_own_sum", "hawk.sum(x)")


def test_sum_over_samples_axis():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_samples_axis(x: Vector[3], y: Mutable[Scalar]):
            y = x.sum(axis="samples")  # @samples_axis

    _check(excinfo, "samples_axis", "rf_samples_axis", "hawk.sum(x", "over=")


# --- where a cross-lane operation may sit ------------------------------------------------------------------


def test_reduction_inside_if():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_sum_in_if(x: Scalar, y: Mutable[Scalar]):
            if x > 0.0:  # @sum_in_if_at_if
                y = hawk.sum(x)  # @sum_in_if

    # the kernel the contract itself shows: the reduction-in-a-branch message, not a partial-assignment one
    _check(excinfo, ("sum_in_if", "sum_in_if_at_if"), "rf_sum_in_if", "where=")


def test_reduction_inside_if_assigned_in_both_branches():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_sum_in_if_else(x: Scalar, y: Mutable[Scalar]):
            if x > 0.0:  # @sum_in_if_else_at_if
                y = hawk.sum(x)  # @sum_in_if_else
            else:
                y = hawk.sum(x * 0.0)

    _check(excinfo, ("sum_in_if_else", "sum_in_if_else_at_if"), "rf_sum_in_if_else", "where=")


def test_reduction_inside_for():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_sum_in_for(x: Scalar, y: Mutable[Scalar]):
            for j in range(3):  # @sum_in_for_at_for
                y = hawk.sum(x * j)  # @sum_in_for

    _check(excinfo, ("sum_in_for", "sum_in_for_at_for"), "rf_sum_in_for", "where=")


def test_scatter_inside_if():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_scatter_in_if(key: Index, v: Scalar, y: Mutable["bin":4]):
            if v > 0.0:  # @scatter_in_if_at_if
                hawk.scatter(y)[key] += v  # @scatter_in_if

    _check(excinfo, ("scatter_in_if", "scatter_in_if_at_if"), "rf_scatter_in_if", "m.where(", "0.0")


def test_scatter_inside_for_over_range_is_accepted():
    @hawk.kernel
    def ok_scatter_in_for(v: Scalar, y: Mutable["bin":4]):
        for j in range(3):
            hawk.scatter(y)[j] += v

    v = np.linspace(-1.0, 2.0, 37)
    got = np.asarray(eagle.deploy(ok_scatter_in_for).run(v=v))
    np.testing.assert_allclose(got, [v.sum(), v.sum(), v.sum(), 0.0], rtol=1e-12, atol=1e-12)


def test_two_reduction_operations_are_refused():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_sum_and_max(x: Scalar, total: Mutable[Scalar], top: Mutable[Scalar]):
            total = hawk.sum(x)  # @two_ops_first
            top = hawk.max(x)  # @two_ops_second

    msg = _check(excinfo, ("two_ops_second", "two_ops_first"), "rf_sum_and_max", "hawk.max")
    assert "split" in msg.lower() or "of its own" in msg, msg


def test_sum_and_mean_together_are_accepted():
    @hawk.kernel
    def ok_sum_and_mean(x: Scalar, total: Mutable[Scalar], avg: Mutable[Scalar]):
        total = hawk.sum(x)
        avg = hawk.mean(x, where=x > 0.0)

    x = np.random.default_rng(11).normal(size=53)
    out = eagle.deploy(ok_sum_and_mean).run(x=x)
    assert sorted(out) == ["avg", "total"]
    np.testing.assert_allclose(np.asarray(out["total"]), [x.sum()], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(out["avg"]), [x[x > 0.0].mean()], rtol=1e-12)


def test_at_of_a_computed_value():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_at_computed(x: Scalar, i: Index, y: Mutable[Scalar]):
            doubled = x * 2.0
            y = doubled.at(i)  # @at_computed

    msg = _check(excinfo, "at_computed", "rf_at_computed", "doubled")
    assert "input" in msg.lower(), msg


def test_at_of_a_plane_the_launch_writes():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_at_written(x: Scalar, i: Index, state: Mutable[Scalar], y: Mutable[Scalar]):
            y = state.at(i)  # @at_written
            state = x * 2.0

    msg = _check(excinfo, "at_written", "rf_at_written", "state")
    assert "input" in msg.lower() or "writes" in msg.lower(), msg


def test_at_of_an_input_plane_is_accepted():
    @hawk.kernel
    def ok_at_input(x: Scalar, i: Index, y: Mutable[Scalar]):
        y = x.at(i) + 1.0

    x = np.arange(5.0) * 3.0
    i = np.array([4, 0, 2, 2, 1], dtype=np.int64)
    np.testing.assert_array_equal(np.asarray(eagle.deploy(ok_at_input).run(x=x, i=i)), x[i] + 1.0)


# --- general kernel errors ---------------------------------------------------------------------------------


def test_unknown_name():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_unknown(x: Scalar) -> Scalar:
            return x + no_such_value_anywhere  # noqa: F821  # @unknown

    _check(excinfo, "unknown", "rf_unknown", "no_such_value_anywhere")


def test_while_statement():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_while(x: Scalar) -> Scalar:
            y = x
            while y > 1.0:  # @while
                y = y * 0.5
            return y

    _check(excinfo, "while", "rf_while", "while")


def test_unsupported_annotation():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_bad_annotation(x: Scalar, blob: dict) -> Scalar:  # @bad_annotation
            return x

    _check(excinfo, "bad_annotation", "rf_bad_annotation", "blob")


def test_return_inside_if():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_return_in_if(x: Scalar) -> Scalar:
            if x > 0.0:
                return x  # @return_in_if
            return 0.0 * x

    _check(excinfo, "return_in_if", "rf_return_in_if", "return")


def test_returning_a_tuple_says_to_use_mutable_parameters():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_two_results(x: Scalar) -> Scalar:
            return hawk.sum(x), hawk.max(x)  # @two_results

    _check(excinfo, "two_results", "rf_two_results", "returns one value (Scalar here), not 2",
           "Mutable[...] parameter", "total = hawk.sum(x)")


def test_a_tuple_used_as_a_value_is_described_as_one():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_pair_value(x: Scalar) -> Scalar:
            pair = (x, x)  # @pair_value
            return pair

    _check(excinfo, "pair_value", "rf_pair_value", "cannot assign a tuple of 2 values to 'pair'")


# --- range arguments, constant limits and operators on floats ----------------------------------------------


def test_range_of_a_float_constant_is_refused():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_range_float(x: Scalar) -> Scalar:
            t = 0.0 * x
            for _k in range(2.5):  # @range_float
                t = t + x
            return t

    _check(excinfo, "range_float", "rf_range_float", "range(...) takes integers", "range(int(2.5))")


def test_range_of_a_float_lane_value_or_param_is_refused():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_range_lane(x: Scalar) -> Scalar:
            t = 0.0 * x
            for _k in range(1, x * 2.0):  # @range_lane
                t = t + x
            return t

    _check(excinfo, "range_lane", "rf_range_lane", "'x * 2.0' is a float", "range(int(x * 2.0))")
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_range_param(x: Scalar, n: hawk.Param) -> Scalar:
            t = 0.0 * x
            for _k in range(n):  # @range_param
                t = t + x
            return t

    _check(excinfo, "range_param", "rf_range_param", "range(int(n))")


def test_range_of_an_integer_lane_value_is_accepted():
    @hawk.kernel
    def ok_range_int(x: Scalar, i: Index) -> Scalar:
        t = 0.0 * x
        for _k in range(i):
            t = t + x
        return t

    x, i = np.arange(5.0), np.arange(5)
    np.testing.assert_array_equal(np.asarray(eagle.deploy(ok_range_int).run(x=x, i=i)), x * i)


_HUGE = {"pow_int": ("big_pow_int", ("2 ** 70", "int64")),
         "pow_huge": ("big_pow_huge", ("10 ** 400", "int64", "1e30")),
         "pow_float": ("big_pow_float", ("2.0 ** 10000", "float range")),
         "literal": ("big_literal", ("18446744073709551616", "int64")),
         "range_huge": ("big_range", ("10 ** 30", "int64")),
         "sum_over": ("big_sum", ("9223372036854775807 + 1 = 9223372036854775808", "int64"))}


@pytest.mark.parametrize("case", sorted(_HUGE))
def test_huge_constants_are_kernel_errors_naming_the_value_and_the_range(case):
    with pytest.raises(hawk.KernelError) as excinfo:
        if case == "pow_int":

            @hawk.kernel
            def rf_big(x: Scalar) -> Scalar:
                return x + (2 ** 70) // 3  # @big_pow_int

        elif case == "pow_huge":

            @hawk.kernel
            def rf_big(x: Scalar) -> Scalar:
                return x * 10 ** 400  # @big_pow_huge

        elif case == "pow_float":

            @hawk.kernel
            def rf_big(x: Scalar) -> Scalar:
                return x * 2.0 ** 10000  # @big_pow_float

        elif case == "literal":

            @hawk.kernel
            def rf_big(x: Scalar) -> Scalar:
                return x + 18446744073709551616  # @big_literal

        elif case == "range_huge":

            @hawk.kernel
            def rf_big(x: Scalar) -> Scalar:
                t = 0.0 * x
                for _k in range(10 ** 30):  # @big_range
                    t = t + x
                return t

        else:

            @hawk.kernel
            def rf_big(x: Scalar) -> Scalar:
                return x + (9223372036854775807 + 1)  # @big_sum

    tag, needles = _HUGE[case]
    _check(excinfo, tag, "rf_big", *needles)


def test_bitwise_operator_on_floats_is_a_kernel_error():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_float_and(x: Scalar) -> Scalar:
            return x & 3  # @float_and

    _check(excinfo, "float_and", "rf_float_and", "operator & takes integers")


def test_scalar_passed_to_dot_is_a_kernel_error():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_dot_scalar(x: Scalar) -> Scalar:
            return hawk.math.dot(x, x)  # @dot_scalar

    _check(excinfo, "dot_scalar", "rf_dot_scalar", "m.vec")


# --- retired forms: the user's own names, and `from hawk import` --------------------------------------------


def test_all_samples_keyed_add_rewrite_uses_the_users_names():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_as_names(slot: Index, w: Scalar, counts: Mutable["bin":4]):
            hawk.all_samples(counts)[slot] += w * 2.0  # @as_names

    msg = _check(excinfo, "as_names", "rf_as_names",
                 "hawk.all_samples(counts)[slot] += w * 2.0 is hawk.scatter(counts)[slot] += w * 2.0")
    assert "+= v" not in msg and "[key]" not in msg, msg


def test_all_samples_keyed_store_rewrite_uses_the_users_names():
    with pytest.raises(hawk.KernelError) as excinfo:

        @hawk.kernel
        def rf_as_store_names(slot: Index, w: Scalar, counts: Mutable["bin":4]):
            hawk.all_samples(counts)[slot] = w  # @as_store_names

    msg = _check(excinfo, "as_store_names", "rf_as_store_names", "hawk.scatter(counts)[slot] = w",
                 "counts = m.where(slot, w, counts)")
    assert "(mask" not in msg and "[key]" not in msg and "= v" not in msg, msg


@pytest.mark.parametrize("name", ["Accum", "Reduce", "all_samples"])
def test_from_hawk_import_of_a_retired_name_gives_its_rewrite(name):
    with pytest.raises(hawk.KernelError) as attr:
        getattr(hawk, name)
    with pytest.raises(ImportError) as imp:
        exec(f"from hawk import {name}", {})
    from hawk.errors import RetiredImportError

    assert isinstance(imp.value, RetiredImportError), repr(imp.value)
    assert imp.value.text == attr.value.text, (imp.value.text, attr.value.text)
    assert str(imp.value).startswith("<string>:1: ")
