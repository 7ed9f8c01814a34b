"""`@hawk.func`: helpers that kernel bodies and other funcs call on lane values, inlined at each call.

Results are checked against NumPy (on every target of the `target` fixture where the test takes it); refusals
are checked for their type, their ``file:line:`` (tagged with a trailing ``# @<tag>`` comment, found by `_line`),
the func and kernel they name and the rewrite they suggest. The cache tests edit a func's module on disk and
check that every kernel calling it gets a new key and the new result.
"""

import importlib.util
import math
import pathlib
import sys
import textwrap

import numpy as np
import pytest
from conftest import bt_close, bt_run, bt_run_on, bt_spirv_missing, bt_target_missing

import hawk
import hawk.math as m
from hawk import Index, Matrix, Mutable, Scalar, Table, Vector

_SOURCE = pathlib.Path(__file__).read_text().splitlines()
N = 101
SHIFT = 0.25  # a module constant read by a func (keyed like a kernel's)


def _line(tag: str) -> int:
    hits = [i + 1 for i, text in enumerate(_SOURCE) if text.rstrip().endswith(f"# @{tag}")]
    assert len(hits) == 1, f"tag {tag!r} found on lines {hits}"
    return hits[0]


def _refused(excinfo, tag: str, *needles: str) -> str:
    msg = str(excinfo.value)
    assert isinstance(excinfo.value, hawk.KernelError), f"{type(excinfo.value).__name__}: {msg}"
    assert msg.startswith(f"{__file__}:{_line(tag)}:"), f"expected line of @{tag}, got: {msg}"
    for needle in needles:
        assert needle in msg, f"{needle!r} not in: {msg}"
    return msg


def _x(seed: int, dtype=np.float64, n: int = N) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-3.0, 3.0, size=n).astype(dtype)


# ------------------------------------------------------------------ funcs used by the kernels below


@hawk.func
def poly(a, b=1.0, *, c=0.5):
    """a*a*b + c + SHIFT, with local names."""
    sq = a * a
    return sq * b + c + SHIFT


@hawk.func
def clip_soft(a, lo=-1.0, hi=1.0):
    if a < lo:
        return lo + m.atan(a - lo)
    elif a > hi:
        return hi + m.atan(a - hi)
    return a


@hawk.func
def nested(a):
    return poly(clip_soft(a), 2.0) - clip_soft(poly(a, c=-1.0), hi=2.0)


@hawk.func
def tri(n):
    """0 + 1 + ... + (n - 1), in a for loop: an integer for an integer n."""
    s = n * 0
    for k in range(n):
        s += k
    return s


@hawk.func
def scale(v, s):
    return v * s + s


@hawk.func
def positive(a):
    return a > 0.0


@hawk.func
def bucket(a, n):
    return m.index((a + 3.0) * (n / 6.0), n)


@hawk.func
def weight(a):
    return m.sqrt(m.abs(a)) + 1.0


# ------------------------------------------------------------------ results against NumPy


def _poly(a, b=1.0, c=0.5):
    return a * a * b + c + SHIFT


def _clip_soft(a, lo=-1.0, hi=1.0):
    return np.where(a < lo, lo + np.arctan(a - lo), np.where(a > hi, hi + np.arctan(a - hi), a))


@hawk.kernel
def f_calls(x: Scalar, y: Scalar, p: Mutable[Scalar], q: Mutable[Scalar], r: Mutable[Scalar],
            s: Mutable[Scalar]):
    p = poly(x)
    q = poly(x, y, c=y * 2.0) + poly(b=2.0, a=y)
    r = clip_soft(x * 2.0) + clip_soft(y, hi=0.5, lo=-0.5)
    s = nested(x)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_calls_keywords_defaults_nested(target, dtype):
    x, y = _x(1, dtype), _x(2, dtype)
    out = bt_run_on(target, f_calls, x=x, y=y)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    rtol = 1e-13 if dtype == np.float64 else 2e-5
    bt_close(out["p"], _poly(x64), rtol=rtol)
    bt_close(out["q"], _poly(x64, y64, c=y64 * 2.0) + _poly(y64, 2.0), rtol=rtol)
    bt_close(out["r"], _clip_soft(x64 * 2.0) + _clip_soft(y64, lo=-0.5, hi=0.5), rtol=rtol)
    bt_close(out["s"], _poly(_clip_soft(x64), 2.0) - _clip_soft(_poly(x64, c=-1.0), hi=2.0), rtol=rtol)


@hawk.kernel
def f_kinds(x: Scalar, n: Index, v: Vector[3], fl: Mutable[Scalar], it: Mutable[Scalar], cst: Mutable[Scalar],
            vec: Mutable[Vector[3]], dot: Mutable[Scalar]):
    fl = scale(x, 0.5)
    it = scale(n, 3) + tri(n)  # integer arithmetic throughout, converted to float when stored
    cst = tri(5) + x * 0.0
    vec = scale(v, x)
    dot = m.dot(scale(v, 2.0), v)


def test_one_func_at_float_int_and_vector_arguments():
    x = _x(3)
    n = np.random.default_rng(4).integers(0, 20, size=N).astype(np.int64)
    v = np.random.default_rng(5).uniform(-2.0, 2.0, size=(3, N))
    out = bt_run(f_kinds, x=x, n=n, v=v)
    bt_close(out["fl"], x * 0.5 + 0.5)
    np.testing.assert_array_equal(out["it"], (n * 3 + 3 + n * (n - 1) // 2).astype(np.float64))
    np.testing.assert_array_equal(out["cst"], np.full(N, 10.0))
    bt_close(out["vec"], v * x + x)
    bt_close(out["dot"], ((v * 2.0 + 2.0) * v).sum(axis=0))


@hawk.kernel
def f_masked(x: Scalar, hist: Mutable["bin":6], pos: Mutable[Scalar]) -> Scalar:  # noqa: F821
    hawk.scatter(hist)[bucket(x, 6)] += weight(x)
    pos = hawk.sum(weight(x), where=positive(x) & positive(x + 1.0))
    return hawk.mean(x, where=positive(-x))


def test_func_in_where_mask_and_scatter_key_and_value():
    x = _x(6)
    out = bt_run(f_masked, x=x)
    keys = np.clip(np.floor((x + 3.0) * 1.0), 0, 5).astype(int)
    want = np.zeros(6)
    np.add.at(want, keys, np.sqrt(np.abs(x)) + 1.0)
    bt_close(out["hist"], want, rtol=1e-13)
    bt_close(out["pos"], [np.sum((np.sqrt(np.abs(x)) + 1.0)[x > 0.0])], rtol=1e-13)
    bt_close(out["result"], [np.mean(x[x < 0.0])], rtol=1e-13)


@hawk.kernel
def f_first(x: Scalar, y: Mutable[Scalar]):
    y = clip_soft(x) * 2.0


@hawk.kernel
def f_second(x: Scalar, t: Mutable[Scalar]):
    t = hawk.sum(clip_soft(x, lo=-2.0), policy="ordered")


def test_func_used_in_two_kernels():
    x = _x(7)
    bt_close(bt_run(f_first, x=x), _clip_soft(x) * 2.0)
    bt_close(bt_run(f_second, x=x), [np.sum(_clip_soft(x, lo=-2.0))], rtol=1e-13)


def test_local_funcs_builtins_and_matrix_arguments():
    @hawk.func
    def inner(a):
        return abs(a) + min(a, 0.5)

    @hawk.func
    def outer(mm, a):
        return mm * 2.0 + inner(a)

    @hawk.kernel
    def f_local(x: Scalar, mm: Matrix[2, 2], y: Mutable[Matrix[2, 2]], z: Mutable[Scalar]):
        y = outer(mm, x)
        z = inner(x)

    x = _x(11)
    mm = np.random.default_rng(12).uniform(-1.0, 1.0, size=(4, N))
    out = bt_run(f_local, x=x, mm=mm)
    want = np.abs(x) + np.minimum(x, 0.5)
    np.testing.assert_array_equal(out["z"], want)
    np.testing.assert_array_equal(out["y"].reshape(4, N), mm * 2.0 + want)


@hawk.func
def step(a, t):
    """Early returns: a nested if that returns on one path only, then code that runs on the others."""
    if a > t:
        if a > 2.0 * t:
            return 2.0
        y = 1.0
    else:
        y = -1.0
    return y * 0.5


@hawk.kernel
def f_flow(x: Scalar, once: Mutable[Scalar], summed: Mutable[Scalar], branch: Mutable[Scalar]):
    once = step(x, 1.0)
    summed = 0.0
    for k in range(1, 4):
        summed += step(x, k * 0.5)
    branch = x
    if x < 0.0:
        branch = step(-x, 0.5) * 10.0


def _step(a, t):
    return np.where(a > t, np.where(a > 2.0 * t, 2.0, 0.5), -0.5)


def test_early_returns_and_calls_inside_kernel_if_and_for(target):
    x = _x(9)
    out = bt_run_on(target, f_flow, x=x)
    np.testing.assert_array_equal(out["once"], _step(x, 1.0))
    np.testing.assert_array_equal(out["summed"], _step(x, 0.5) + _step(x, 1.0) + _step(x, 1.5))
    np.testing.assert_array_equal(out["branch"], np.where(x < 0.0, _step(-x, 0.5) * 10.0, x))


@hawk.func
def soft(a):
    return m.erf(a)


@hawk.kernel
def f_spirv_erf(x: Scalar, y: Mutable[Scalar]):
    y = soft(x) + 1.0  # @spirv_erf


def test_a_target_refusal_inside_a_func_points_at_the_calling_line(monkeypatch, tmp_path):
    # spirv computes every math function the front end makes, so erf is taken off its lists here
    # (as in tests/test_target_refusals.py), with a disk cache of the test's own so that the kernel is compiled
    import hawk.targets.spirv as spirv_target
    import hawk.targets.spirv_math as spirv_math

    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    monkeypatch.setenv("HAWK_CACHE_DIR", str(tmp_path))
    with monkeypatch.context() as patch:
        patch.setattr(spirv_math, "F64_MORE", tuple(f for f in spirv_math.F64_MORE if f != "erf"))
        patch.setattr(spirv_math, "F32_FUNCS", tuple(f for f in spirv_math.F32_FUNCS if f != "erf"))
        patch.setattr(spirv_target, "NO_SPIRV", spirv_target.NO_SPIRV | {"erf"})
        with pytest.raises(hawk.KernelError) as excinfo:
            bt_run_on("spirv", f_spirv_erf, x=_x(10))
    _refused(excinfo, "spirv_erf", "kernel 'f_spirv_erf'", "hawk.math.erf on float64")
    x = _x(10)
    bt_close(bt_run_on("spirv", f_spirv_erf, x=x), np.array([math.erf(v) for v in x.tolist()]) + 1.0, rtol=1e-15)


# ------------------------------------------------------------------ calling from Python


def test_calling_a_func_from_python_is_refused_and_wrapped_runs_plain_python():
    with pytest.raises(TypeError) as excinfo:
        poly(2.0)  # @pycall
    msg = str(excinfo.value)
    assert msg.startswith(f"{__file__}:{_line('pycall')}:") and "func 'poly'" in msg and "__wrapped__" in msg
    assert poly.__wrapped__(2.0, 3.0, c=1.0) == 2.0 * 2.0 * 3.0 + 1.0 + SHIFT
    assert "poly(a, b=1.0, *, c=0.5)" in repr(poly)


# ------------------------------------------------------------------ refusals


@hawk.func
def f_self(a):
    return f_self(a - 1.0)  # @self_call


@hawk.func
def f_ping(a):
    return f_pong(a) + 1.0


@hawk.func
def f_pong(a):
    return f_ping(a * 0.5)  # @pong_call


def test_direct_recursion_is_refused_with_the_cycle():
    with pytest.raises(hawk.KernelError) as excinfo:
        @hawk.kernel
        def k_self(x: Scalar, y: Mutable[Scalar]):
            y = f_self(x)  # @self_site
    _refused(excinfo, "self_call", "func 'f_self'", "recursion", "(f_self -> f_self)", "for loop",
             f"called from kernel 'k_self' at {__file__}:{_line('self_site')}")


def test_mutual_recursion_is_refused_with_the_cycle():
    with pytest.raises(hawk.KernelError) as excinfo:
        @hawk.kernel
        def k_ping(x: Scalar, y: Mutable[Scalar]):
            y = f_ping(x) * 2.0  # @ping_site
    _refused(excinfo, "pong_call", "func 'f_pong'", "(f_ping -> f_pong -> f_ping)",
             f"called from func 'f_ping' at {__file__}:", f"from kernel 'k_ping' at {__file__}:{_line('ping_site')}")


@hawk.func
def f_reduces(a):
    return a - hawk.mean(a)  # @in_reduce


@hawk.func
def f_scatters(a):
    hawk.scatter(a)[0] += 1.0  # @in_scatter
    return a


@hawk.func
def f_reads_other_lane(a):
    return a.at(0)  # @in_at


@hawk.func
def f_reads_plane(a):
    return a + x  # noqa: F821  (x is the kernel plane, unseen in a func)  # @in_plane


@pytest.mark.parametrize("fn, tag, needles", [
    (f_reduces, "in_reduce", ("hawk.mean cannot be used inside a func", "lane-local", "reduce in the kernel")),
    (f_scatters, "in_scatter", ("hawk.scatter cannot be used inside a func", "lane-local", "scatter in the kernel")),
    (f_reads_other_lane, "in_at", ("a.at(...) cannot be used inside a func", "lane-local")),
    (f_reads_plane, "in_plane", ("name 'x' is not defined in this func", "make it a parameter")),
])
def test_cross_lane_work_and_planes_are_refused_inside_a_func(fn, tag, needles):
    with pytest.raises(hawk.KernelError) as excinfo:
        @hawk.kernel
        def k_lane_local(x: Scalar, y: Mutable[Scalar]):
            y = fn(x)
    _refused(excinfo, tag, f"func '{fn.__name__}'", *needles, "called from kernel 'k_lane_local'")


def test_wrong_arity_unknown_keyword_and_twice_given_are_refused_at_the_call():
    with pytest.raises(hawk.KernelError) as excinfo:
        @hawk.kernel
        def k_many(x: Scalar, y: Mutable[Scalar]):
            y = poly(x, x, x)  # @too_many
    _refused(excinfo, "too_many", "kernel 'k_many'", "func 'poly' takes 2 positional arguments but this call gives 3",
             "poly(a, b=1.0, *, c=0.5)")
    with pytest.raises(hawk.KernelError) as excinfo:
        @hawk.kernel
        def k_few(x: Scalar, y: Mutable[Scalar]):
            y = scale(x)  # @too_few
    _refused(excinfo, "too_few", "func 'scale' needs a value for 's'", "scale(v, s)")
    with pytest.raises(hawk.KernelError) as excinfo:
        @hawk.kernel
        def k_kw(x: Scalar, y: Mutable[Scalar]):
            y = poly(x, d=1.0)  # @bad_kw
    _refused(excinfo, "bad_kw", "func 'poly' has no parameter 'd'")
    with pytest.raises(hawk.KernelError) as excinfo:
        @hawk.kernel
        def k_twice(x: Scalar, y: Mutable[Scalar]):
            y = poly(x, a=1.0)  # @twice
    _refused(excinfo, "twice", "func 'poly' gets 'a' twice")


def _plain_helper(a):
    return a + 1.0


def test_plain_python_function_points_at_hawk_func():
    with pytest.raises(hawk.KernelError) as excinfo:
        @hawk.kernel
        def k_plain(x: Scalar, y: Mutable[Scalar]):
            y = _plain_helper(x)  # @plain
    _refused(excinfo, "plain", "kernel 'k_plain'", "calling '_plain_helper' is not supported", "@hawk.func")


@hawk.func
def f_loop_return(a, n):
    for k in range(n):
        if a > k:
            return a  # @loop_return
    return a * 0.0


@hawk.func
def f_some_paths(a):  # @some_paths
    if a > 0.0:
        return a


@hawk.func
def f_pair(a):
    return a, a  # @pair


@hawk.func
def f_bad_range(a):
    s = 0.0
    for k in range(a):  # @bad_range
        s += k
    return s


@pytest.mark.parametrize("fn, args, tag, needles", [
    (f_loop_return, "x, 3", "loop_return", ("return inside a for loop", "return it once after the loop")),
    (f_some_paths, "x", "some_paths", ("does not return a value on every path",)),
    (f_pair, "x", "pair", ("this returns 2 values; a func returns one value",)),
    (f_bad_range, "x", "bad_range", ("range(...) takes integers, and 'a' is a float", "range(int(a))")),
])
def test_func_body_errors_point_at_the_func_line_and_the_calling_line(fn, args, tag, needles):
    ns = {"hawk": hawk, "Scalar": Scalar, "Mutable": Mutable, fn.__name__: fn}
    src = f"@hawk.kernel\ndef k_body(x: Scalar, y: Mutable[Scalar]):\n    y = {fn.__name__}({args})\n"
    path = pathlib.Path(__file__).with_name("_funcs_generated_kernel.py")
    with pytest.raises(hawk.KernelError) as excinfo:
        _exec_file(path, src, ns)
    _refused(excinfo, tag, f"func '{fn.__name__}'", *needles, f"called from kernel 'k_body' at {path}:3")


def _exec_file(path: pathlib.Path, src: str, ns: dict) -> None:
    """Run `src` as if it were the file `path` (so inspect finds the kernel's source there)."""
    import linecache

    lines = src.splitlines(keepends=True)
    linecache.cache[str(path)] = (len(src), None, lines, str(path))
    try:
        exec(compile(src, str(path), "exec"), ns)
    finally:
        linecache.cache.pop(str(path), None)


def test_non_lane_arguments_and_bad_defaults_are_refused():
    with pytest.raises(hawk.KernelError) as excinfo:
        @hawk.kernel
        def k_table(x: Scalar, t: Table["i":4], y: Mutable[Scalar]):  # noqa: F821
            y = scale(t, x)  # @table_arg
    _refused(excinfo, "table_arg", "func 'scale' takes lane values, and 't' is table 't'")
    with pytest.raises(hawk.KernelError) as excinfo:
        @hawk.func
        def f_default(a, b="fast"):  # @bad_default
            return a
    _refused(excinfo, "bad_default", "func 'f_default'", "the default of 'b' is 'fast'", "Python number")


# ------------------------------------------------------------------ the cache key


_MODULE = """
import hawk
from hawk import Mutable, Scalar

OFFSET = {offset}


@hawk.func
def bump(a):
    return a * {factor} + OFFSET


@hawk.kernel
def k_bump(x: Scalar, y: Mutable[Scalar]):
    y = bump(x)


@hawk.kernel
def k_bump_twice(x: Scalar, y: Mutable[Scalar]):
    y = bump(bump(x))
"""


def _load(path: pathlib.Path, factor: str, offset: str):
    """(Re)write the module at `path` and import it afresh under one name."""
    path.write_text(textwrap.dedent(_MODULE.format(factor=factor, offset=offset)))
    sys.modules.pop("hawk_funcs_edit", None)
    spec = importlib.util.spec_from_file_location("hawk_funcs_edit", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_editing_a_func_or_its_constant_changes_every_calling_kernels_key(tmp_path):
    path = tmp_path / "hawk_funcs_edit.py"
    x = _x(8)
    a = _load(path, "2.0", "1.0")
    assert _load(path, "2.0", "1.0").k_bump._info_key == a.k_bump._info_key  # the same text: the same key
    bt_close(bt_run(a.k_bump, x=x), x * 2.0 + 1.0)
    b = _load(path, "3.0", "1.0")  # the func's body edited, the kernels not
    assert b.k_bump._info_key != a.k_bump._info_key
    assert b.k_bump_twice._info_key != a.k_bump_twice._info_key
    bt_close(bt_run(b.k_bump, x=x), x * 3.0 + 1.0)
    bt_close(bt_run(b.k_bump_twice, x=x), (x * 3.0 + 1.0) * 3.0 + 1.0)
    c = _load(path, "3.0", "-4.5")  # a module constant the func reads
    assert c.k_bump._info_key != b.k_bump._info_key
    bt_close(bt_run(c.k_bump, x=x), x * 3.0 - 4.5)
