"""Keyed scans, hawk.scan(x, by=key, keys=n): per-key running totals in lane order, and order="key" (the fold
over (key, lane) pairs: with x = 1 and exclusive=True, each lane's position in a stable sort by key), against
Python loops and np.argsort(kind="stable"), with the bits contract of docs/semantics.md ("Keyed scans"): the
fold's bits step by step (per-block per-key totals, offsets keys outer and blocks inner, then each block's lanes;
one block in lane order: the left-to-right fold per key), any size the same bits at every thread count and
on spirv; integer scans are exact; key -1 leaves a lane out; other keys outside 0..n-1 refuse the run."""

import numpy as np
import pytest
from conftest import bt_run, bt_run_on, bt_target_missing

import eagle
import hawk
import hawk.math as m
from hawk import Index, Mutable, Scalar
from hawk.abi.layout import SCAN_BLOCK

NK = 7


@hawk.kernel
def per_key(x: Scalar, k: Index, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = hawk.scan(x, by=k, keys=NK)
    z = hawk.scan(x, by=k, keys=NK, exclusive=True)


@hawk.kernel
def key_order(x: Scalar, k: Index, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = hawk.scan(x, by=k, keys=NK, order="key")
    z = hawk.scan(x, by=k, keys=NK, order="key", exclusive=True)


@hawk.kernel
def ranks(k: Index, pos: Mutable[Index], count: Mutable[Index]):
    pos = hawk.scan(1, by=k, keys=NK, order="key", exclusive=True)  # a stable counting sort's destination
    count = hawk.scan(k >= 0, by=k, keys=NK)  # a truth value counts 0/1


@hawk.kernel
def int_ops(k: Index, a: Mutable[Index], lo: Mutable[Index], hi: Mutable[Index]):
    v = (k * 1000003) % 977 - 400  # computed int64 values
    key = (k // 3) % NK  # a computed key
    a = hawk.scan(v, by=key, keys=NK, exclusive=True)
    lo = hawk.scan(v, by=key, keys=NK, op=m.min)
    hi = hawk.scan(v, by=key, keys=NK, op=m.max, order="key")


@hawk.kernel
def digits(k: Index, dest: Mutable[Index]):
    d = k & 255  # an 8-bit digit: a radix sort pass's destinations
    dest = hawk.scan(1, by=d, keys=256, order="key", exclusive=True)


@hawk.kernel
def float_minmax(x: Scalar, k: Index, lo: Mutable[Scalar], hi: Mutable[Scalar]):
    lo = hawk.scan(x, by=k, keys=NK, op=m.min)
    hi = hawk.scan(x, by=k, keys=NK, op=m.max, exclusive=True)


IDENT = {"add": -0.0, "mul": 1.0, "min": np.inf, "max": -np.inf}
INT_IDENT = {"add": 0, "mul": 1, "min": (1 << 63) - 1, "max": -(1 << 63)}
FOLD = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "min": np.minimum, "max": np.maximum}


def _ref(x, k, op="add", order="lane", exclusive=False, ident=-0.0):
    """The keyed scan by a Python loop: lane order per key, or over lanes sorted stably by key."""
    n = len(x)
    out = np.empty_like(x)
    lanes = range(n) if order == "lane" else np.argsort(np.where(k < 0, 1 << 40, k), kind="stable")
    run, carry = {}, ident
    for i in lanes:
        if k[i] < 0:
            out[i] = ident
            continue
        prev = run.get(k[i], ident) if order == "lane" else carry
        new = FOLD[op](prev, x[i])
        out[i] = prev if exclusive else new
        if order == "lane":
            run[k[i]] = new
        else:
            carry = new
    return out


def _contract(x, k, op="add", order="lane", exclusive=False, ident=-0.0):
    """The bits contract step by step: per-block per-key totals from the identity; offsets folded keys outer,
    blocks inner (restarting at every key for order="lane"); each block's lanes folded from its offsets."""
    n, nk = len(x), NK
    nb = max(1, -(-n // SCAN_BLOCK))
    tot = [[ident] * nk for _ in range(nb)]
    for i in range(n):
        if k[i] >= 0:
            b = i // SCAN_BLOCK
            tot[b][k[i]] = FOLD[op](tot[b][k[i]], x[i])
    off = [[ident] * nk for _ in range(nb)]
    run = ident
    for key in range(nk):
        run = ident if order == "lane" else run
        for b in range(nb):
            off[b][key], run = run, FOLD[op](run, tot[b][key])
    out = np.empty_like(x)
    for i in range(n):
        if k[i] < 0:
            out[i] = ident
            continue
        row = off[i // SCAN_BLOCK]
        new = FOLD[op](row[k[i]], x[i])
        out[i], row[k[i]] = (row[k[i]] if exclusive else new), new
    return out


def _planes(n, seed, missing=0.1):
    rng = np.random.default_rng(seed)
    k = rng.integers(0, NK, n).astype(np.int32)
    k[rng.random(n) < missing] = -1
    return rng.standard_normal(n), k


def _bits(a) -> bytes:
    return np.asarray(a).tobytes()


@pytest.mark.parametrize("n", [1, 100, SCAN_BLOCK])
def test_lane_order_one_block_is_the_loops_bits(n):
    x, k = _planes(n, 1)
    out = bt_run(per_key, x=x, k=k)
    assert _bits(out["y"]) == _bits(_ref(x, k))
    assert _bits(out["z"]) == _bits(_ref(x, k, exclusive=True))


@pytest.mark.parametrize("n", [3000, SCAN_BLOCK + 1, 5 * SCAN_BLOCK + 77])
def test_the_contracts_bits_and_close_to_the_loop(n):
    x, k = _planes(n, 3)
    out = bt_run(per_key, x=x, k=k)
    assert _bits(out["y"]) == _bits(_contract(x, k))
    assert _bits(out["z"]) == _bits(_contract(x, k, exclusive=True))
    np.testing.assert_allclose(out["y"], _ref(x, k), rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(out["z"], _ref(x, k, exclusive=True), rtol=1e-12, atol=1e-11)
    out = bt_run(key_order, x=x, k=k)
    assert _bits(out["y"]) == _bits(_contract(x, k, order="key"))
    assert _bits(out["z"]) == _bits(_contract(x, k, order="key", exclusive=True))
    np.testing.assert_allclose(out["y"], _ref(x, k, order="key"), rtol=1e-12, atol=1e-10)
    assert out["z"][k < 0].tobytes() == np.full((k < 0).sum(), -0.0).tobytes()  # key -1: the identity


@pytest.mark.parametrize("n", [10, SCAN_BLOCK, 6 * SCAN_BLOCK + 5])
def test_key_order_positions_are_a_stable_sort(n):
    _, k = _planes(n, 4)
    out = bt_run(ranks, k=k)
    keep = k >= 0
    order = np.argsort(np.where(keep, k, NK), kind="stable")
    want = np.empty(n, np.int64)
    want[order] = np.arange(n)
    assert out["pos"].dtype == np.int64
    assert np.array_equal(out["pos"][keep], want[keep])  # the kept lanes land on 0..kept-1, stably
    assert np.all(out["pos"][~keep] == 0)
    assert np.array_equal(out["count"], _ref(np.ones(n, np.int64), k, ident=0))


@hawk.kernel
def per_key_prod(x: Scalar, k: Index, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = hawk.scan(x, op=m.mul, by=k, keys=NK)
    z = hawk.scan(x, op=m.mul, by=k, keys=NK, order="key", exclusive=True)


@pytest.mark.parametrize("n", [100, 5 * SCAN_BLOCK + 77])
def test_running_products_per_key_follow_the_contract(n):
    x, k = _planes(n, 7)
    x = 1.0 + 0.01 * x
    out = bt_run(per_key_prod, x=x, k=k)
    assert _bits(out["y"]) == _bits(_contract(x, k, op="mul", ident=1.0))
    assert _bits(out["z"]) == _bits(_contract(x, k, op="mul", order="key", exclusive=True, ident=1.0))
    np.testing.assert_allclose(out["y"], _ref(x, k, op="mul", ident=1.0), rtol=1e-12)
    if n <= SCAN_BLOCK:
        assert _bits(out["y"]) == _bits(_ref(x, k, op="mul", ident=1.0))


def test_integer_scans_are_exact():
    n = 7 * SCAN_BLOCK + 300
    k = np.random.default_rng(5).integers(0, 1 << 20, n).astype(np.int64)
    out = bt_run(int_ops, k=k)
    v = (k * 1000003) % 977 - 400
    key = (k // 3) % NK
    assert np.array_equal(out["a"], _ref(v, key, exclusive=True, ident=0))
    assert np.array_equal(out["lo"], _ref(v, key, op="min", ident=INT_IDENT["min"]))
    assert np.array_equal(out["hi"], _ref(v, key, op="max", order="key", ident=INT_IDENT["max"]))


def test_radix_digit_destinations():
    n = 3 * SCAN_BLOCK + 11
    k = np.random.default_rng(6).integers(0, 1 << 30, n).astype(np.int32)
    dest = bt_run(digits, k=k)
    want = np.empty(n, np.int64)
    want[np.argsort(k & 255, kind="stable")] = np.arange(n)
    assert np.array_equal(dest, want)


def test_float_min_max_follow_numpy():
    x, k = _planes(2 * SCAN_BLOCK + 9, 7)
    x[::97] = np.nan
    out = bt_run(float_minmax, x=x, k=k)
    assert _bits(out["lo"]) == _bits(_ref(x, k, op="min", ident=np.inf))
    assert _bits(out["hi"]) == _bits(_ref(x, k, op="max", exclusive=True, ident=-np.inf))


@pytest.mark.parametrize("kernel", [per_key, key_order, int_ops])
def test_same_bits_at_every_thread_count(kernel):
    x, k = _planes(9 * SCAN_BLOCK + 5, 8)
    planes = {"x": x, "k": k}
    names = {p.name for p in kernel.signature.planes}
    planes = {n: v for n, v in planes.items() if n in names}
    results = []
    for t in (1, 2, 3, 4):
        plan = eagle.deploy(kernel, threads=t, min_chunk=SCAN_BLOCK)
        out = plan.run(**{n: v.copy() for n, v in planes.items()})
        if t > 1:
            assert max(plan.last_chunks) > 1, f"threads={t}: ran {plan.last_chunks} chunk(s)"
        results.append({n: _bits(v) for n, v in out.items()})
    assert all(r == results[0] for r in results[1:])


@pytest.mark.parametrize("kernel", [per_key, key_order, int_ops, digits])
def test_spirv_gives_the_hosts_bits(kernel):
    why = bt_target_missing("spirv")
    if why:
        pytest.skip(why)
    x, k = _planes(5 * SCAN_BLOCK + 33, 9)
    planes = {"x": x, "k": k}
    names = {p.name for p in kernel.signature.planes}
    planes = {n: v for n, v in planes.items() if n in names}
    host = bt_run(kernel, **{n: v.copy() for n, v in planes.items()})
    dev = bt_run_on("spirv", kernel, **{n: v.copy() for n, v in planes.items()})
    host = host if isinstance(host, dict) else {"dest": host}
    dev = dev if isinstance(dev, dict) else {"dest": dev}
    for name in host:
        assert _bits(host[name]) == _bits(dev[name]), name


@pytest.mark.parametrize("target", ["host", "spirv"])
def test_a_key_outside_refuses_the_run(target):
    if bt_target_missing(target):
        pytest.skip(bt_target_missing(target))
    x, k = _planes(2 * SCAN_BLOCK, 10)
    k[5000] = NK
    with pytest.raises(eagle.InputError, match=r"per_key.*keys=7.*outside 0\.\.6 \(first bad key: 7\)"):
        bt_run_on(target, per_key, x=x, k=k)
    k[5000], k[6000] = -1, -2
    with pytest.raises(eagle.InputError, match=r"first bad key: -2"):
        bt_run_on(target, per_key, x=x, k=k)


@pytest.mark.parametrize("target", ["host", "spirv"])
def test_a_refused_keyed_scan_leaves_the_callers_outputs_untouched(target):
    if bt_target_missing(target):
        pytest.skip(bt_target_missing(target))
    x, k = _planes(2 * SCAN_BLOCK, 10)
    k[7000] = NK  # found by the first stage, after the block totals were formed
    y, z = np.full(x.size, 7.5), np.full(x.size, -3.25)
    before = (y.copy(), z.copy(), x.copy(), k.copy())
    with pytest.raises(eagle.InputError, match=r"first bad key: 7"):
        bt_run_on(target, per_key, x=x, k=k, y=y, z=z)
    for got, want in zip((y, z, x, k), before, strict=True):
        assert got.tobytes() == want.tobytes()


@hawk.kernel
def beside_up(x: Scalar, k: Index, o: Mutable[Scalar], y: Mutable[Scalar]):
    o = x * 2.0  # (written by the keyed scan's own stage, which then finds the bad key)
    y = hawk.scan(x, by=k, keys=NK)


@hawk.kernel
def beside_down(x: Scalar, k: Index, o: Mutable[Scalar], y: Mutable[Scalar]):
    o = x * 2.0
    y = hawk.scan(x, by=k, keys=NK, reverse=True)


@pytest.mark.parametrize("kernel", [beside_up, beside_down], ids=["forward", "reversed"])
def test_a_refused_keyed_scan_leaves_an_output_of_its_own_stage_untouched(kernel):
    """A per-lane output written in the stage that finds a bad key (before: written, then the run refused)."""
    x, k = _planes(SCAN_BLOCK + 40, 27)
    k[100] = NK + 1
    o, y = np.full(x.size, 7.5), np.full(x.size, -3.25)
    for threads in (1, 3):
        with pytest.raises(eagle.InputError, match=rf"first bad key: {NK + 1}"):
            eagle.deploy(kernel, threads=threads, min_chunk=1024).run(x=x, k=k, o=o, y=y)
        assert np.all(o == 7.5) and np.all(y == -3.25)


def test_refusals():
    with pytest.raises(hawk.KernelError, match="not reset=") as exc:
        @hawk.kernel
        def with_reset(x: Scalar, k: Index, y: Mutable[Scalar]):
            y = hawk.scan(x, by=k, keys=4, reset=x > 0.0)
    assert "test_scan_keyed.py" in str(exc.value)  # at the user's line
    with pytest.raises(hawk.KernelError, match="needs both by="):
        @hawk.kernel
        def no_keys(x: Scalar, k: Index, y: Mutable[Scalar]):
            y = hawk.scan(x, by=k)
    with pytest.raises(hawk.KernelError, match=r"1\.\.4096; got 5000"):
        @hawk.kernel
        def too_many(x: Scalar, k: Index, y: Mutable[Scalar]):
            y = hawk.scan(x, by=k, keys=5000)
    with pytest.raises(hawk.KernelError, match="keys= takes a constant integer"):
        @hawk.kernel
        def run_time_keys(x: Scalar, k: Index, y: Mutable[Scalar]):
            y = hawk.scan(x, by=k, keys=k)
    with pytest.raises(hawk.KernelError, match="order= takes"):
        @hawk.kernel
        def bad_order(x: Scalar, k: Index, y: Mutable[Scalar]):
            y = hawk.scan(x, by=k, keys=4, order="slot")
    with pytest.raises(hawk.KernelError, match="one integer key per lane"):
        @hawk.kernel
        def float_key(x: Scalar, k: Index, y: Mutable[Scalar]):
            y = hawk.scan(x, by=x * 2.0, keys=4)
    with pytest.raises(hawk.KernelError, match="hoist it"):
        @hawk.kernel
        def in_if(x: Scalar, k: Index, y: Mutable[Scalar]):
            y = 0.0
            if x > 0.0:
                y = hawk.scan(x, by=k, keys=4)


@hawk.kernel
def per_key_down(x: Scalar, k: Index, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = hawk.scan(x, by=k, keys=NK, reverse=True)
    z = hawk.scan(x, by=k, keys=NK, reverse=True, exclusive=True)


def _down(x, k, exclusive: bool) -> np.ndarray:
    """Each key's lanes folded from the last down, one by one (a key -1 lane: the identity)."""
    out, run = np.full(x.size, -0.0), {}
    for i in range(x.size - 1, -1, -1):
        if k[i] < 0:
            continue
        prev = run.get(int(k[i]), -0.0)
        run[int(k[i])] = prev + x[i]
        out[i] = prev if exclusive else prev + x[i]
    return out


@pytest.mark.parametrize("n", [0, 1, 3 * SCAN_BLOCK + 5])
def test_reverse_keyed_scan_folds_each_key_from_the_last_lane_down(n):
    """reverse=True with by=: each key's lanes from the last down, as one sequential fold in the finish (the
    reverse scan's form): bit for bit at any size, on every thread count and on spirv."""
    x, k = _planes(n, 21)
    want = {"y": _down(x, k, False), "z": _down(x, k, True)}
    for threads in (1, 3):
        plan = eagle.deploy(per_key_down, threads=threads, min_chunk=1024)
        got = plan.run(x=x, k=k)
        for name in want:
            assert np.asarray(got[name]).tobytes() == want[name].tobytes(), (name, threads)
    if n and not bt_target_missing("spirv"):
        got = bt_run_on("spirv", per_key_down, x=x, k=k)
        assert all(np.asarray(got[o]).tobytes() == want[o].tobytes() for o in want)


@hawk.kernel
def down_extremes(x: Scalar, j: Index, k: Index, hi: Mutable[Scalar], lo: Mutable[Index]):
    hi = hawk.scan(x, by=k, keys=NK, op=m.max, reverse=True)
    lo = hawk.scan(j, by=k, keys=NK, op=m.min, reverse=True, exclusive=True)


def test_reverse_keyed_min_max_scans_float_and_integer():
    x, k = _planes(SCAN_BLOCK + 9, 25)
    x[::7] = np.nan  # (np.maximum's rule: a NaN, once met, stays)
    j = np.random.default_rng(26).integers(-1000, 1000, x.size)
    got = eagle.deploy(down_extremes, threads=3, min_chunk=1024).run(x=x, j=j, k=k, lo=np.zeros(x.size, np.int64))
    top = np.iinfo(np.int64).max
    hi, lo, run_hi, run_lo = np.full(x.size, -np.inf), np.full(x.size, top), {}, {}
    for i in range(x.size - 1, -1, -1):
        key = int(k[i])
        if key < 0:
            continue
        run_hi[key] = np.maximum(run_hi.get(key, -np.inf), x[i])
        hi[i] = run_hi[key]
        lo[i] = run_lo.get(key, top)
        run_lo[key] = min(lo[i], int(j[i]))
    assert np.asarray(got["hi"]).tobytes() == hi.tobytes()
    assert np.asarray(got["lo"]).tolist() == lo.tolist()


def test_reverse_keyed_scan_refuses_a_bad_key_and_order_key():
    x, k = _planes(40, 22)
    k[17] = NK + 2
    with pytest.raises(eagle.InputError, match=rf"key outside 0..{NK - 1} \(first bad key: {NK + 2}\)"):
        eagle.deploy(per_key_down).run(x=x, k=k)
    with pytest.raises(hawk.KernelError, match='order="key" runs forwards only'):
        @hawk.kernel
        def down_by_key(x: Scalar, k: Index, y: Mutable[Scalar]):
            y = hawk.scan(x, by=k, keys=4, order="key", reverse=True)


@hawk.kernel
def keyed_grad(x: Scalar, k: Index, y: Mutable[Scalar], z: Mutable[Scalar]):
    y = hawk.scan(x * x, by=k, keys=NK)
    z = hawk.scan(m.sin(x), by=k, keys=NK, reverse=True, exclusive=True)


def test_gradient_of_keyed_add_scans():
    """A keyed add scan's adjoint is the keyed scan of its cotangent by the same keys in the other lane order:
    dx_i = 2 x_i * (sum of dy_j over the lanes j >= i of i's key) + cos x_i * (sum of dz_j over j < i); a key -1
    lane gets zero. The same bits on 1 and 3 threads (the adjoint's scans really split)."""
    n = 2 * SCAN_BLOCK + 77
    x, k = _planes(n, 23)
    rng = np.random.default_rng(24)
    cy, cz = rng.standard_normal(n), rng.standard_normal(n)
    want = np.zeros(n)
    for key in range(NK):
        at = np.flatnonzero(k == key)
        after = np.cumsum(cy[at][::-1])[::-1]
        before = np.concatenate([[0.0], np.cumsum(cz[at])[:-1]])
        want[at] = 2 * x[at] * after + np.cos(x[at]) * before
    got = []
    for threads in (1, 3):
        plan = eagle.deploy(keyed_grad, threads=threads, min_chunk=1024)
        got.append(np.array(plan.reverse({"y": cy, "z": cz}, x=x, k=k)["x"], copy=True))
        if threads == 3:
            assert max(plan.last_reverse_chunks) > 1
    assert np.allclose(got[0], want, rtol=1e-12, atol=1e-12)
    assert got[0].tobytes() == got[1].tobytes()
    assert np.all(got[0][k < 0] == 0.0)


@hawk.kernel
def grid_keyed(g: hawk.Grid["row", "col":30], x: Scalar, y: Mutable[Scalar]):
    y = hawk.scan(x, by=g.col % 4, keys=4)  # in the grid's flat (row-major) lane order


def test_grid_lanes_in_flat_order_and_no_lanes():
    x = np.random.default_rng(13).standard_normal((300, 30))
    got = np.asarray(eagle.deploy(grid_keyed, threads=2, min_chunk=SCAN_BLOCK).run(x=x))
    flat_keys = np.tile(np.arange(30) % 4, 300)
    assert got.tobytes() == _contract(x.reshape(-1), flat_keys).reshape(300, 30).tobytes()
    out = bt_run(per_key, x=np.zeros(0), k=np.zeros(0, np.int32))
    assert out["y"].shape == out["z"].shape == (0,)


@hawk.kernel
def read_in_two_stages(x: Scalar, k: Index, y: Mutable[Scalar]):
    c = hawk.scan(x, by=k, keys=NK)
    y = c - hawk.sum(c)  # the scan is applied in the stage of the sum and again in the one after it


def test_a_scan_read_in_two_later_stages():
    x, k = _planes(3 * SCAN_BLOCK + 1, 14)
    x = np.round(x * 8) / 8  # sums exact in float64: the check does not depend on the sum's order
    c = _contract(x, k)
    got = bt_run(read_in_two_stages, x=x, k=k)
    assert np.array_equal(got, c - c.sum())


def test_bundle_artifact_gives_the_same_bits(tmp_path):
    import hawk.artifact

    hawk.artifact.build_bundle([per_key, ranks], tmp_path, targets=("host",))
    x, k = _planes(3 * SCAN_BLOCK + 7, 12)
    got = hawk.run(hawk.load(tmp_path, "per_key"), x=x, k=k)
    want = bt_run(per_key, x=x, k=k)
    for name in ("y", "z"):
        assert np.asarray(got[name]).tobytes() == want[name].tobytes()
    got = hawk.run(hawk.load(tmp_path, "ranks"), k=k)
    assert np.array_equal(np.asarray(got["pos"]), bt_run(ranks, k=k)["pos"])
