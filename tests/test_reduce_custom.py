"""`hawk.reduce(op, x, ...)`: folds over lanes with an operator of the user's (a @hawk.func) or a built-in.

The combine order is fixed (docs/semantics.md, "Custom reductions"), so results are checked bit for bit against a
Python fold in that order (`_fold_whole`, `_fold_slots`), with operators that are neither associative nor
commutative, over thread counts 1..4 with small chunks (the split checked through plan.last_chunks) and on spirv;
built-ins against NumPy and math.fsum. Refusals are checked for their type, their ``file:line:`` (a trailing
``# @<tag>`` comment) and what they name.
"""

import math
import pathlib

import numpy as np
import pytest
from conftest import bt_run_on, bt_same_bits

import eagle
import hawk
import hawk.math as m
from eagle.errors import InputError
from hawk import Grid, Matrix, Mutable, Scalar, Vector
from hawk.abi.layout import ORDERED_BLOCK

_SOURCE = pathlib.Path(__file__).read_text().splitlines()
N = 5 * ORDERED_BLOCK + 333  # six blocks, the last one partial
ROWS, COLS = 20, 256


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


def _x(seed: int, n: int = N, dtype=np.float64) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2.0, 2.0, size=n).astype(dtype)


def _fold(op, values):
    acc = None
    for v in values:
        acc = v if acc is None else op(acc, v)
    return acc


def _fold_whole(op, values, mask=None):
    """The documented order over every lane: each block of ORDERED_BLOCK lanes folded in lane order (masked lanes
    left out), then the non-empty blocks' results folded in block order. None for an empty slice."""
    parts = []
    for s in range(0, len(values), ORDERED_BLOCK):
        keep = [v for k, v in enumerate(values[s:s + ORDERED_BLOCK]) if mask is None or mask[s + k]]
        if keep:
            parts.append(_fold(op, keep))
    return _fold(op, parts)


def _fold_slots(op, grid, axis):
    """Keeping axes: each kept slot's lanes folded in lane order (`grid`: rows x cols; `axis`: the reduced one)."""
    g = grid if axis == 1 else grid.T
    return np.array([_fold(op, list(row)) for row in g])


def _value(out, name):
    return np.asarray(out[name] if isinstance(out, dict) else out)


# ------------------------------------------------------------------ operators


@hawk.func
def half_then_add(a, b):  # neither associative nor commutative
    return a * 0.5 + b


@hawk.func
def pick_larger_abs(a, b):  # non-commutative on ties: the running value wins
    if abs(b) > abs(a):
        return b
    return a


@hawk.func
def lerp(a, b, t=0.25):
    return a + (b - a) * t


def _half_then_add(a, b):
    return a * 0.5 + b


def _lerp(a, b):
    return a + (b - a) * 0.25


# ------------------------------------------------------------------ kernels


@hawk.kernel
def k_half(x: Scalar, out: Mutable[Scalar]):
    out = hawk.reduce(half_then_add, x)


@hawk.kernel
def k_masked(x: Scalar) -> Scalar:
    return hawk.reduce(lerp, x, where=x > 1.5)


@hawk.kernel
def k_abs(x: Scalar) -> Scalar:
    return hawk.reduce(pick_larger_abs, x * 3.0)


@hawk.kernel
def k_add(x: Scalar) -> Scalar:
    return hawk.reduce(m.add, x)


@hawk.kernel
def k_builtins(x: Scalar, p: Mutable[Scalar], q: Mutable[Scalar]):  # two folds in one kernel
    p = hawk.reduce(m.mul, x)
    q = hawk.reduce(half_then_add, x, where=x > 0.0)


@hawk.kernel
def k_max(x: Scalar) -> Scalar:
    return hawk.reduce(m.max, x, where=x < 1.0)


@hawk.kernel
def k_min(x: Scalar) -> Scalar:
    return hawk.reduce(min, x)


@hawk.kernel
def k_all(x: Scalar) -> Scalar:
    return hawk.reduce(m.land, x > -1.9)


@hawk.kernel
def k_any(x: Scalar) -> Scalar:
    return hawk.reduce(m.lor, x > 1.999)


@hawk.kernel
def k_vec(v: Vector[3]) -> Vector[3]:
    return hawk.reduce(half_then_add, v * 2.0)


@hawk.kernel
def k_mat(a: Matrix[2, 2]) -> Matrix[2, 2]:
    return hawk.reduce(lerp, a, where=a.rows[0].components[0] > 0.0)


@hawk.kernel
def k_rows(lane: Grid["row", "col":COLS], x: Scalar) -> Scalar:  # noqa: F821
    return hawk.reduce(half_then_add, x, over="col")


@hawk.kernel
def k_cols(lane: Grid["row", "col":COLS], x: Scalar) -> Scalar:  # noqa: F821
    return hawk.reduce(lerp, x, over="row")


@hawk.kernel
def k_rows_vec(lane: Grid["row", "col":COLS], v: Vector[2]) -> Vector[2]:  # noqa: F821
    return hawk.reduce(lerp, v, over="col", where=v.components[0] > -1.0)


@hawk.kernel
def k_empty_ident(x: Scalar) -> Scalar:
    return hawk.reduce(half_then_add, x, where=x > 100.0, identity=-7.5)


@hawk.kernel
def k_empty(x: Scalar) -> Scalar:
    return hawk.reduce(half_then_add, x, where=x > 100.0)


@hawk.kernel
def k_slot_empty(lane: Grid["row", "col":50], x: Scalar, out: Mutable[Scalar]):  # noqa: F821
    out = hawk.reduce(lerp, x, over="col", where=x > 1.9)


@hawk.kernel
def k_staged(x: Scalar) -> Scalar:
    return x - hawk.reduce(lerp, x)


# ------------------------------------------------------------------ whole folds: bits in the documented order


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_non_associative_same_bits_every_split(threads):
    x = _x(1)
    plan = eagle.deploy(k_half, threads=threads, min_chunk=1)
    got = _value(plan.run(x=x), "out")
    assert got.shape == (1,)
    assert (plan.last_chunks[0] > 1) == (threads > 1), plan.last_chunks
    want = _fold_whole(_half_then_add, x.tolist())
    assert got[0].tobytes() == np.float64(want).tobytes(), (got[0], want)
    y = x[::-1].copy()  # the plan again (its buffers reused): the fold's state starts afresh
    again = _value(plan.run(x=y), "out")
    assert again[0].tobytes() == np.float64(_fold_whole(_half_then_add, y.tolist())).tobytes()


@pytest.mark.parametrize("threads", [1, 4])
def test_masked_and_non_commutative(threads):
    x = _x(2)
    plan = eagle.deploy(k_masked, threads=threads, min_chunk=1)
    got = _value(plan.run(x=x), "result")
    want = _fold_whole(_lerp, x.tolist(), x > 1.5)
    assert got[0].tobytes() == np.float64(want).tobytes()
    plan = eagle.deploy(k_abs, threads=threads, min_chunk=1)
    got = _value(plan.run(x=x), "result")
    want = _fold_whole(lambda a, b: b if abs(b) > abs(a) else a, (x * 3.0).tolist())
    assert got[0] == want


def test_float32_rounds_each_step():
    x = _x(3, dtype=np.float32)
    got = _value(eagle.deploy(k_half, threads=3, min_chunk=1).run(x=x), "out")
    want = _fold_whole(lambda a, b: np.float32(np.float32(a * np.float32(0.5)) + b), list(x))
    assert got.dtype == np.float32 and got[0].tobytes() == np.float32(want).tobytes()


def test_builtins_against_numpy():
    x = 1.0 + _x(4) / 4000.0  # a product that stays finite
    assert _value(eagle.deploy(k_add, threads=4, min_chunk=1).run(x=x), "result")[0] == math.fsum(x.tolist())
    out = eagle.deploy(k_builtins, threads=4, min_chunk=1).run(x=x)  # m.add is the exact sum
    p = _value(out, "p")[0]
    assert p == _fold_whole(lambda a, b: a * b, x.tolist())
    assert _value(out, "q")[0] == _fold_whole(_half_then_add, x.tolist(), x > 0.0)
    np.testing.assert_allclose(p, np.prod(x), rtol=1e-12)
    y = _x(5)
    assert _value(eagle.deploy(k_max).run(x=y), "result")[0] == np.max(y[y < 1.0])
    assert _value(eagle.deploy(k_min).run(x=y), "result")[0] == np.min(y)
    assert _value(eagle.deploy(k_all).run(x=y), "result")[0] == float(np.all(y > -1.9))
    assert _value(eagle.deploy(k_any).run(x=y), "result")[0] == float(np.any(y > 1.999))
    z = np.full(10, -1.95)
    assert _value(eagle.deploy(k_all).run(x=z), "result")[0] == 0.0


def test_vector_and_matrix_payloads():
    v = np.random.default_rng(6).normal(size=(3, N))  # payload first, lanes last
    got = _value(eagle.deploy(k_vec, threads=4, min_chunk=1).run(v=v), "result")
    want = _fold_whole(lambda a, b: a * 0.5 + b, list((v * 2.0).T))
    assert got.reshape(-1).tobytes() == np.asarray(want).tobytes()
    a = np.random.default_rng(7).normal(size=(2, 2, N))
    got = _value(eagle.deploy(k_mat, threads=2, min_chunk=1).run(a=a), "result")
    want = _fold_whole(_lerp, list(np.moveaxis(a, -1, 0)), a[0, 0] > 0.0)
    assert got.reshape(-1).tobytes() == np.asarray(want).reshape(-1).tobytes()


# ------------------------------------------------------------------ over= axes


@pytest.mark.parametrize("threads", [1, 3])
def test_kept_axes_fold_each_slot_in_lane_order(threads):
    x = np.random.default_rng(8).normal(size=(ROWS, COLS))
    plan = eagle.deploy(k_rows, threads=threads, min_chunk=1)
    got = _value(plan.run(x=x), "result")
    assert got.shape == (ROWS,)
    assert (plan.last_chunks[0] > 1) == (threads > 1)
    bt_same_bits(got, _fold_slots(_half_then_add, x, 1))
    got = _value(eagle.deploy(k_cols, threads=threads, min_chunk=1).run(x=x), "result")
    assert got.shape == (COLS,)
    bt_same_bits(got, _fold_slots(_lerp, x, 0))


def test_kept_axes_vector_payload(target):
    v = np.random.default_rng(17).normal(size=(2, ROWS, COLS))  # payload first
    got = bt_run_on(target, k_rows_vec, v=v)
    assert got.shape == (2, ROWS)
    want = [_fold(_lerp, [v[:, r, c] for c in range(COLS) if v[0, r, c] > -1.0]) for r in range(ROWS)]
    bt_same_bits(got, np.asarray(want).T)


# ------------------------------------------------------------------ empty slices


def test_empty_slice_takes_the_identity():
    got = _value(eagle.deploy(k_empty_ident).run(x=_x(9)), "result")
    assert got[0] == -7.5


def test_empty_slice_without_identity_refused_at_run_time():
    x = _x(10)
    with pytest.raises(InputError) as exc:
        eagle.deploy(k_empty, threads=2, min_chunk=1).run(x=x)
    msg = str(exc.value)
    assert "k_empty" in msg and "hawk.reduce" in msg and "identity=" in msg and "where=" in msg
    x2 = np.random.default_rng(11).normal(size=(ROWS, 50))
    x2[3] = 0.0  # row 3 has no lane above 1.9
    x2[:, 7] = 2.5
    x2[3, :] = 0.0
    before = x2.copy()
    out = np.full(ROWS, 42.0)
    with pytest.raises(InputError) as exc:
        eagle.deploy(k_slot_empty).run(x=x2, out=out)
    assert "slot 3" in str(exc.value) and "'out'" in str(exc.value) and "k_slot_empty" in str(exc.value)
    assert (out == 42.0).all() and (x2 == before).all()  # a refused run leaves the caller's arrays alone


def test_bound_launches_and_lane_ranges():
    x = _x(16)
    plan = eagle.deploy(k_masked, threads=2, min_chunk=1)
    bound = plan.bind(x=x)
    want = np.float64(_fold_whole(_lerp, x.tolist(), x > 1.5))
    for _ in range(3):  # every launch starts from zeroed fold state
        assert _value(bound.launch(), "result")[0].tobytes() == want.tobytes()
    got = _value(plan.run(base=1500, count=2100, x=x), "result")  # blocks still counted from lane 0
    mask = np.zeros(N, bool)
    mask[1500:3600] = x[1500:3600] > 1.5
    assert got[0] == _fold_whole(_lerp, x.tolist(), mask)


def test_staged_read_of_a_fold():
    x = _x(12, n=3000)
    got = _value(eagle.deploy(k_staged, threads=2, min_chunk=1).run(x=x), "result")
    want = _fold_whole(_lerp, x.tolist())
    bt_same_bits(got, x - want)


# ------------------------------------------------------------------ spirv: the same bits as the host


def test_same_bits_on_gpu(target):
    x = _x(13)
    for kern in (k_half, k_masked, k_builtins, k_add):
        host = eagle.deploy(kern, threads=3, min_chunk=1).run(x=x)
        plan = eagle.deploy(kern, target=target)
        got = plan.run(x=x)
        if target != "host" and kern is not k_add:  # a thread per block of lanes, met in the host finish
            assert plan.last_chunks[0] == -(-N // ORDERED_BLOCK), plan.last_chunks
        bt_same_bits({k: np.asarray(v) for k, v in got.items()} if isinstance(got, dict) else np.asarray(got),
                     {k: np.asarray(v) for k, v in host.items()} if isinstance(host, dict) else np.asarray(host),
                     f"{kern.name} on {target}")
    g = np.random.default_rng(14).normal(size=(ROWS, COLS))
    bt_same_bits(bt_run_on(target, k_rows, x=g), _fold_slots(_half_then_add, g, 1))
    bt_same_bits(bt_run_on(target, k_cols, x=g), _fold_slots(_lerp, g, 0))
    v = np.random.default_rng(15).normal(size=(3, N))
    bt_same_bits(bt_run_on(target, k_vec, v=v).reshape(-1),
                 np.asarray(_fold_whole(lambda a, b: a * 0.5 + b, list((v * 2.0).T))))


# ------------------------------------------------------------------ refusals at the line


@hawk.func
def again(a, b):
    return again(b, a)  # @recurse


@hawk.func
def three(a, b, c):
    return a + b + c


@hawk.func
def to_vec(a, b):
    return m.vec(a, b)


def plain(a, b):
    return a + b


def test_recursion_through_the_operator():
    with pytest.raises(hawk.KernelError) as exc:
        @hawk.kernel
        def k_rec(x: Scalar) -> Scalar:
            return hawk.reduce(again, x)
    _refused(exc, "recurse", "recursion", "again -> again", "k_rec")


def test_wrong_arity():
    with pytest.raises(hawk.KernelError) as exc:
        @hawk.kernel
        def k_three(x: Scalar) -> Scalar:
            return hawk.reduce(three, x)  # @arity
    _refused(exc, "arity", "three(a, b, c)", "two values", "k_three")


def test_not_an_operator():
    with pytest.raises(hawk.KernelError) as exc:
        @hawk.kernel
        def k_plain(x: Scalar) -> Scalar:
            return hawk.reduce(plain, x)  # @plain
    _refused(exc, "plain", "'plain'", "@hawk.func", "m.mul", "k_plain")
    with pytest.raises(hawk.KernelError) as exc:
        @hawk.kernel
        def k_sqrt(x: Scalar) -> Scalar:
            return hawk.reduce(m.sqrt, x)  # @sqrt
    _refused(exc, "sqrt", "'sqrt'", "k_sqrt")


def test_other_refusals():
    with pytest.raises(hawk.KernelError) as exc:
        @hawk.kernel
        def k_shape(x: Scalar) -> Scalar:
            return hawk.reduce(to_vec, x)  # @shape
    _refused(exc, "shape", "to_vec", "shape (2,)", "k_shape")
    with pytest.raises(hawk.KernelError) as exc:
        @hawk.kernel
        def k_ident(x: Scalar) -> Scalar:
            return hawk.reduce(m.mul, x, identity=2.0)  # @ident
    _refused(exc, "ident", "own identity", "k_ident")
    with pytest.raises(hawk.KernelError) as exc:
        @hawk.kernel
        def k_land(x: Scalar) -> Scalar:
            return hawk.reduce(m.land, x)  # @land
    _refused(exc, "land", "truth values", "k_land")
    with pytest.raises(hawk.KernelError) as exc:
        @hawk.kernel
        def k_nested(x: Scalar) -> Scalar:
            y = 0.0
            if x > 0.0:
                y = hawk.reduce(lerp, x)  # @nested
            return y
    _refused(exc, "nested", "may not sit inside", "k_nested")
    with pytest.raises(hawk.KernelError) as exc:
        @hawk.kernel
        def k_mixed(x: Scalar, a: Mutable[Scalar], b: Mutable[Scalar]):
            a = hawk.sum(x)
            b = hawk.reduce(lerp, x)  # @mixed
    _refused(exc, "mixed", "already reduces with hawk.sum", "put hawk.reduce in a kernel of its own", "k_mixed")


def test_a_fold_builds_into_an_artifact_with_the_same_bits(tmp_path):
    import hawk.artifact

    @hawk.func
    def half_then_add(a, b):
        return a * 0.5 + b

    @hawk.kernel
    def art_fold(x: Scalar, t: Mutable[Scalar]):
        t = hawk.reduce(half_then_add, x)

    hawk.artifact.build(art_fold, tmp_path)
    x = np.random.default_rng(0).normal(size=5000)
    got = hawk.run(hawk.load(tmp_path, "art_fold", threads=3, min_chunk=1024), x=x)
    got = got["t"] if isinstance(got, dict) else got
    assert np.asarray(got).tobytes() == np.asarray(eagle.deploy(art_fold).run(x=x)).tobytes()
