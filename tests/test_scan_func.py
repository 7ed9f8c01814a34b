"""hawk.scan(x, op=f) with a @hawk.func operator: one fold in lane order (reverse=True: from the last lane down),
as `itertools.accumulate(x, f)` computes it, bit for bit at every size, thread count and target, with segments
(reset=), per key (by=), exclusive scans from identity=, Vector and Matrix values, artifacts, and the refusals at
the user's line (docs/semantics.md, "Scans by a func"; their gradients: test_scan_func_reverse.py)."""

import numpy as np
import pytest
from conftest import bt_gpu_builds, bt_run, bt_run_same_bits, bt_same_bits

import eagle
import hawk
import hawk.math as m
from hawk import Matrix, Mutable, Scalar
from hawk.abi.layout import SCAN_BLOCK


@hawk.func
def ema(a, b):
    return 0.9 * a + 0.1 * b  # neither associative nor commutative


@hawk.func
def drop(a, b):
    return a - b  # x0 - x1 - x2 ...


@hawk.func
def hypot_run(a, b):
    return m.sqrt(a * a + b * b)


@hawk.func
def then(p, q):
    return m.vec(q[0] * p[0], q[0] * p[1] + q[1])  # affine maps h -> a * h + b as (a, b): p, then q


@hawk.func
def matprod(p, q):
    return m.mat(m.vec(p[0][0] * q[0][0] + p[0][1] * q[1][0], p[0][0] * q[0][1] + p[0][1] * q[1][1]),
                 m.vec(p[1][0] * q[0][0] + p[1][1] * q[1][0], p[1][0] * q[0][1] + p[1][1] * q[1][1]))


@hawk.kernel
def recurrence(a: Scalar, b: Scalar, start: Scalar, h: Mutable[Scalar], back: Mutable[Scalar]):
    h = hawk.scan(m.vec(a, b), op=then)[1]  # h[i] = a[i] * h[i - 1] + b[i], h[0] = b[0]
    r = hawk.scan(m.vec(a, b), op=then, reverse=True, exclusive=True, identity=0.5, reset=start > 0.5)
    back = r[0] - r[1]


@hawk.kernel
def products(u: Matrix[2, 2], p: Mutable[Matrix[2, 2]]):
    p = hawk.scan(u, op=matprod)  # running matrix products, left to right: u0 @ u1 @ ...


@hawk.kernel
def keyed(x: Scalar, key: hawk.Index, y: Mutable[Scalar], z: Mutable[Scalar], w: Mutable[Scalar]):
    y = hawk.scan(x, op=ema, by=key, keys=5)  # each key's lanes in lane order; key -1 left out
    z = hawk.scan(x, op=drop, by=key, keys=5, exclusive=True, identity=7.0, reverse=True)
    w = hawk.scan(m.vec(0.5 + 0.0 * x, x), op=then, by=key, keys=5)[1]


@hawk.kernel
def four_modes(x: Scalar, y: Mutable[Scalar], ye: Mutable[Scalar], r: Mutable[Scalar], re: Mutable[Scalar]):
    y = hawk.scan(x, op=ema)
    ye = hawk.scan(x, op=ema, exclusive=True, identity=-1.0)
    r = hawk.scan(x, op=ema, reverse=True)
    re = hawk.scan(x, op=ema, exclusive=True, reverse=True, identity=2.0)


@hawk.kernel
def segments(x: Scalar, start: Scalar, y: Mutable[Scalar], ye: Mutable[Scalar], r: Mutable[Scalar],
             re: Mutable[Scalar]):
    s = start > 0.5
    y = hawk.scan(x, op=drop, reset=s)
    ye = hawk.scan(x, op=drop, reset=s, exclusive=True, identity=0.0)
    r = hawk.scan(x, op=drop, reset=s, reverse=True)
    re = hawk.scan(x, op=drop, reset=s, reverse=True, exclusive=True, identity=0.0)


@hawk.kernel
def norms_after_a_mean(x: Scalar, y: Mutable[Scalar], t: Mutable[Scalar]):
    h = hawk.scan(x - hawk.mean(x), op=hypot_run)  # three stages: the mean, the lanes, the fold
    y = 2.0 * h
    t = hawk.sum(h, policy="ordered")


def _py(f, dtype):
    """The func's arithmetic in NumPy scalars of the run's dtype (float32 rounds each op as the kernel does)."""
    c = {k: dtype(v) for k, v in (("a", 0.9), ("b", 0.1))}
    return {"ema": lambda a, b: c["a"] * a + c["b"] * b,
            "drop": lambda a, b: a - b,
            "hypot": lambda a, b: np.sqrt(a * a + b * b)}[f]


def _ref(x, f, reset=None, exclusive=False, reverse=False, identity=0.0):
    """The scan as a Python loop: a run's first lane takes x as it is; exclusive values lag one lane, starting
    from the identity; reverse=True runs the same from the last lane down, segments being the forward's (a
    flagged lane is its segment's first)."""
    n = len(x)
    order = range(n - 1, -1, -1) if reverse else range(n)
    out = np.empty_like(x)
    run = None
    for i in order:
        starts = run is None or (reset is not None and (reset[i] if not reverse else (i + 1 < n and reset[i + 1])))
        before = x.dtype.type(identity) if starts else run
        run = x[i] if starts else f(run, x[i])
        out[i] = before if exclusive else run
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 7, SCAN_BLOCK + 1, 3 * SCAN_BLOCK + 5])
def test_four_modes_are_the_python_fold_bit_for_bit(n, dtype):
    x = np.random.default_rng(n).standard_normal(n).astype(dtype)
    out = bt_run(four_modes, x=x)
    f = _py("ema", dtype)
    bt_same_bits(out["y"], _ref(x, f))
    bt_same_bits(out["ye"], _ref(x, f, exclusive=True, identity=-1.0))
    bt_same_bits(out["r"], _ref(x, f, reverse=True))
    bt_same_bits(out["re"], _ref(x, f, exclusive=True, reverse=True, identity=2.0))
    assert out["y"].dtype == dtype


def test_the_inclusive_scan_is_itertools_accumulate():
    import itertools

    x = np.random.default_rng(3).standard_normal(2000)
    got = bt_run(four_modes, x=x)["y"]
    assert got.tobytes() == np.array(list(itertools.accumulate(x, lambda a, b: 0.9 * a + 0.1 * b))).tobytes()


@pytest.mark.parametrize("n", [9, 2 * SCAN_BLOCK + 17])
def test_segments_against_a_python_loop(n):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(n)
    start = (rng.random(n) < 0.05).astype(np.float64)
    start[0] = 1.0 if n > 100 else 0.0
    start[n // 2] = 1.0
    start[-1] = 1.0  # a segment of one lane at the end
    out = bt_run(segments, x=x, start=start)
    f, s = _py("drop", np.float64), start > 0.5
    bt_same_bits(out["y"], _ref(x, f, s))
    bt_same_bits(out["ye"], _ref(x, f, s, exclusive=True))
    bt_same_bits(out["r"], _ref(x, f, s, reverse=True))
    bt_same_bits(out["re"], _ref(x, f, s, exclusive=True, reverse=True))


def _then(p, q):
    return np.array([q[0] * p[0], q[0] * p[1] + q[1]])


@pytest.mark.parametrize("n", [5, 3 * SCAN_BLOCK + 1])
def test_a_linear_recurrence_as_a_scan_of_affine_maps(n):
    rng = np.random.default_rng(11)
    a, b = rng.uniform(0.5, 1.0, n), rng.standard_normal(n)
    start = (rng.random(n) < 0.01).astype(np.float64)
    out = bt_run(recurrence, a=a, b=b, start=start)
    h = np.empty(n)
    h[0] = b[0]
    for i in range(1, n):
        h[i] = a[i] * h[i - 1] + b[i]
    bt_same_bits(out["h"], h)
    pairs = np.stack([a, b], axis=1)
    r = _ref_rows(pairs, _then, start > 0.5, exclusive=True, reverse=True, identity=0.5)
    bt_same_bits(out["back"], r[:, 0] - r[:, 1])


def _ref_rows(x, f, reset=None, exclusive=False, reverse=False, identity=0.0):
    """_ref for values of several components (a row each)."""
    n = len(x)
    out = np.empty_like(x)
    run = None
    for i in (range(n - 1, -1, -1) if reverse else range(n)):
        starts = run is None or (reset is not None and (reset[i] if not reverse else (i + 1 < n and reset[i + 1])))
        before = np.full(x.shape[1:], identity) if starts else run
        run = x[i] if starts else f(run, x[i])
        out[i] = before if exclusive else run
    return out


def test_running_matrix_products_keep_their_order():
    rng = np.random.default_rng(12)
    n = SCAN_BLOCK + 300
    perms = np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]])
    u = perms[rng.integers(0, 2, n)] * rng.choice([-1.0, 1.0], (n, 2, 1))  # signed permutations: exact products
    got = bt_run(products, u=np.ascontiguousarray(u.transpose(1, 2, 0)))  # (payload first, lanes last)
    want = _ref_rows(u, _matprod)
    bt_same_bits(np.ascontiguousarray(got.transpose(2, 0, 1)), want)
    assert not np.array_equal(want, _ref_rows(u, lambda p, q: _matprod(q, p)))  # the order shows


def _matprod(p, q):
    """matprod's arithmetic (np.matmul may order its adds, or start from +0.0, otherwise)."""
    return np.array([[p[0][0] * q[0][0] + p[0][1] * q[1][0], p[0][0] * q[0][1] + p[0][1] * q[1][1]],
                     [p[1][0] * q[0][0] + p[1][1] * q[1][0], p[1][0] * q[0][1] + p[1][1] * q[1][1]]])


def _ref_keyed(x, key, f, exclusive=False, reverse=False, identity=0.0):
    """Each key's lanes folded in lane order (reverse: from the last down); key -1: the identity, left out."""
    out = np.empty_like(x)
    runs: dict = {}
    for i in (range(len(x) - 1, -1, -1) if reverse else range(len(x))):
        k = int(key[i])
        if k < 0:
            out[i] = identity
            continue
        run = runs.get(k)
        before = np.full(x.shape[1:], identity) if run is None else run
        runs[k] = run = x[i] if run is None else f(run, x[i])
        out[i] = before if exclusive else run
    return out


@pytest.mark.parametrize("n", [12, 2 * SCAN_BLOCK + 3])
def test_keyed_scans_by_a_func(n):
    rng = np.random.default_rng(n)
    x, key = rng.standard_normal(n), rng.integers(-1, 5, n).astype(np.int32)
    out = bt_run(keyed, x=x, key=key)
    bt_same_bits(out["y"], _ref_keyed(x, key, _py("ema", np.float64)))
    bt_same_bits(out["z"], _ref_keyed(x, key, _py("drop", np.float64), exclusive=True, reverse=True, identity=7.0))
    pairs = np.stack([np.full(n, 0.5), x], 1)
    bt_same_bits(out["w"], _ref_keyed(pairs, key, lambda p, q: np.array([q[0] * p[0], q[0] * p[1] + q[1]]))[:, 1])


def test_a_keyed_scan_by_a_func_refuses_a_key_past_its_keys():
    x, key = np.ones(10), np.arange(10, dtype=np.int32)
    y = np.zeros(10)
    with pytest.raises(eagle.InputError, match="keyed"):
        eagle.deploy(keyed).run(x=x, key=key, y=y)
    assert not y.any()


def test_a_scan_of_a_value_after_a_total_feeds_a_sum():
    x = np.random.default_rng(7).standard_normal(5000)
    out = bt_run(norms_after_a_mean, x=x)
    mean = np.float64(x.sum()) / len(x)  # (within the contract's bound: the check below allows for it)
    h = _ref(x - mean, _py("hypot", np.float64))
    assert np.allclose(out["y"], 2.0 * h, rtol=1e-12)
    got_h = out["y"] / 2.0
    import math

    assert out["t"] == math.fsum(got_h)  # the ordered sum of the scan's own values: exact


_PLANES = {"x": lambda rng, n: rng.standard_normal(n), "start": lambda rng, n: (rng.random(n) < 0.001) * 1.0,
           "a": lambda rng, n: rng.uniform(0.5, 1.0, n), "b": lambda rng, n: rng.standard_normal(n),
           "u": lambda rng, n: rng.standard_normal((2, 2, n)),
           "key": lambda rng, n: rng.integers(-1, 5, n).astype(np.int32)}


def _planes(kernel, rng, n: int) -> dict:
    """Random planes of n lanes for the kernel's inputs."""
    return {p.name: _PLANES[p.name](rng, n) for p in kernel.signature.planes if p.name in _PLANES}


@pytest.mark.parametrize("kernel", [four_modes, segments, recurrence, products, keyed])
def test_same_bits_at_every_thread_count(kernel):
    planes = _planes(kernel, np.random.default_rng(8), 9 * SCAN_BLOCK + 5)
    results = []
    for t in (1, 2, 3):
        plan = eagle.deploy(kernel, threads=t, min_chunk=SCAN_BLOCK)
        out = plan.run(**{k: v.copy() for k, v in planes.items()})
        if t > 1:
            assert max(plan.last_chunks) > 1, f"threads={t}: ran {plan.last_chunks} chunk(s)"
        out = out if isinstance(out, dict) else {"p": out}
        results.append({k: np.asarray(v).tobytes() for k, v in out.items()})
    assert all(r == results[0] for r in results[1:])


@pytest.mark.parametrize("kernel", [four_modes, segments, recurrence, products, keyed])
def test_every_target_gives_the_hosts_bits(target, kernel):
    bt_run_same_bits(target, kernel, **_planes(kernel, np.random.default_rng(9), 2 * SCAN_BLOCK + 33))


@pytest.mark.parametrize("gpu", ["nvvm", "rocdl"])
def test_the_stages_build_for_the_other_gpu_targets(gpu):
    """Without the GPU's runtime each kernel compiles (PTX / AMD code objects), then raises RuntimeMissing; with
    one, the results are the host's bits (the fold runs in the finish on the host for every target)."""
    for kernel in (segments, recurrence, keyed):
        bt_gpu_builds(gpu, kernel, _planes(kernel, np.random.default_rng(14), SCAN_BLOCK + 9))


@pytest.mark.parametrize("kernel", [segments, recurrence, products, keyed])
def test_bundle_artifact_gives_the_same_bits(tmp_path, kernel):
    import hawk.artifact

    hawk.artifact.build_bundle([kernel], tmp_path, targets=("host",))
    planes = _planes(kernel, np.random.default_rng(13), SCAN_BLOCK + 7)
    got = hawk.run(hawk.load(tmp_path, kernel.name), **planes)
    want = bt_run(kernel, **planes)
    if isinstance(want, dict):
        got = {k: np.asarray(v) for k, v in got.items()}
    bt_same_bits(np.asarray(got) if not isinstance(got, dict) else got, want)


def test_no_lanes_and_one_lane():
    out = bt_run(four_modes, x=np.zeros(0))
    assert all(v.shape == (0,) for v in out.values())
    out = bt_run(four_modes, x=np.array([2.5]))
    assert (out["y"][0], out["ye"][0], out["r"][0], out["re"][0]) == (2.5, -1.0, 2.5, 2.0)


def _refusal(src_line: str, fn) -> str:
    with pytest.raises(hawk.KernelError) as exc:
        hawk.kernel(fn)
    msg = str(exc.value)
    lines = [i for i, ln in enumerate(open(__file__).read().splitlines(), 1) if src_line in ln]
    assert f"{__file__.rsplit('/', 1)[-1]}:{lines[0]}:" in msg, msg
    return msg


def test_an_exclusive_scan_without_identity_is_refused():
    def k(x: Scalar, y: Mutable[Scalar]):
        y = hawk.scan(x, op=ema, exclusive=True)  # @no_identity

    assert "needs identity=" in _refusal("# @no_identity", k)


def test_identity_with_a_builtin_and_a_non_constant_identity_are_refused():
    def k(x: Scalar, y: Mutable[Scalar]):
        y = hawk.scan(x, op=m.mul, identity=1.0)  # @builtin_identity

    assert "identity= is for a @hawk.func" in _refusal("# @builtin_identity", k)

    def k2(x: Scalar, y: Mutable[Scalar]):
        y = hawk.scan(x, op=ema, exclusive=True, identity=x)  # @lane_identity

    assert "constant number" in _refusal("# @lane_identity", k2)


def test_a_func_scan_of_integers_or_in_key_order_is_refused():
    def k(x: Scalar, y: Mutable[Scalar]):
        y = m.to_float(hawk.scan(x > 0.0, op=ema))  # @bool_scan

    assert "m.to_float" in _refusal("# @bool_scan", k)

    def k2(x: Scalar, key: hawk.Index, y: Mutable[Scalar]):
        y = hawk.scan(x, op=ema, by=key, keys=4, order="key")  # @keyed_func

    assert "order=\"lane\"" in _refusal("# @keyed_func", k2)


def test_a_func_of_the_wrong_arity_or_shape_is_refused():
    @hawk.func
    def one(a):
        return a

    def k(x: Scalar, y: Mutable[Scalar]):
        y = hawk.scan(x, op=one)  # @arity

    assert "cannot be the operator of hawk.scan" in _refusal("# @arity", k)

    @hawk.func
    def spread(a, b):
        return m.vec(a, b)

    def k2(x: Scalar, y: Mutable[Scalar]):
        y = hawk.scan(x, op=spread)  # @shape

    assert "of hawk.scan gets two values of shape ()" in _refusal("# @shape", k2)
