"""Plane scatter stores: `hawk.scatter(out)[k] = v` into a Mutable[Scalar] or Mutable[Index] output plane.

Each lane writes its value at flat position k of the caller's array (any length; an omitted one has the lane
count). Key -1 writes nothing, positions nobody writes keep their content, and any other key outside the array is
refused with an InputError naming the kernel and the plane, before launch for keys read straight from an Index
plane and as the kernel runs otherwise; a refused run leaves the caller's arrays untouched. Results are compared
with NumPy fancy-index assignment (keys made distinct, so which duplicate wins never matters), on the host with
1..4 threads and small chunks, and on spirv (lavapipe).
"""

import numpy as np
import pytest
from conftest import bt_target_missing

import eagle
import hawk
from eagle.errors import InputError
from hawk import Index, Mutable, Scalar
from hawk.errors import KernelError


@hawk.kernel
def ps_permute(x: Scalar, k: Index, out: Mutable[Scalar]):
    hawk.scatter(out)[k] = x


@hawk.kernel
def ps_permute_int(v: Index, k: Index, out: Mutable[Index]):
    hawk.scatter(out)[k] = v


@hawk.kernel
def ps_shifted(x: Scalar, k: Index, out: Mutable[Scalar]):
    hawk.scatter(out)[k + 1] = x * 2.0  # a key computed in the kernel: checked as the run goes


@hawk.kernel
def ps_compact(x: Scalar, out: Mutable[Index]):
    hawk.scatter(out)[int(x)] = int(x) * 3 + 1


@hawk.kernel
def ps_staged(x: Scalar, k: Index, out: Mutable[Scalar]):
    hawk.scatter(out)[k - 1] = x - hawk.mean(x)  # stored by the later stage, keys computed


def _targets():
    return ["host"] + ([] if bt_target_missing("spirv") else ["spirv"])


def _keys(rng, n, m, drop=0.1):
    """n distinct positions in [0, m) (some lanes -1)."""
    k = rng.permutation(m)[:n].astype(np.int64)
    k[rng.random(n) < drop] = -1
    return k


def _want(out, k, v):
    w = out.copy()
    ok = k >= 0
    w[k[ok]] = v[ok]
    return w


@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("kdt", [np.int32, np.int64])
def test_permute_float_matches_numpy(target, kdt):
    rng = np.random.default_rng(1)
    n, m = 5000, 7001
    x, k = rng.standard_normal(n), _keys(rng, n, m).astype(kdt)
    out = np.full(m, np.nan)
    want = _want(out, k.astype(np.int64), x)
    eagle.deploy(ps_permute, target=target).run(x=x, k=k, out=out)
    np.testing.assert_array_equal(out, want)  # positions nobody writes keep their NaN


@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("odt", [np.int32, np.int64])
def test_permute_int_matches_numpy(target, odt):
    rng = np.random.default_rng(2)
    n, m = 3000, 3000
    v = rng.integers(-2**40, 2**40, n)
    k = _keys(rng, n, m)
    out = np.full(m, 5, dtype=odt)
    want = _want(out, k, v.astype(odt))  # an int32 plane keeps the low 32 bits, as astype
    eagle.deploy(ps_permute_int, target=target).run(v=v, k=k, out=out)
    assert out.dtype == odt
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_threads_give_the_same_array(threads):
    rng = np.random.default_rng(3)
    n = 200_000
    x, k = rng.standard_normal(n), rng.permutation(n)
    plan = eagle.deploy(ps_permute, threads=threads, min_chunk=1000)
    out = plan.run(x=x, k=k)
    if threads > 1:
        assert max(plan.last_chunks) > 1, f"ran {plan.last_chunks} chunk(s)"  # the lanes really split
    want = np.empty(n)
    want[k] = x
    np.testing.assert_array_equal(out, want)
    out2 = np.zeros(n)
    plan.run(x=x, k=k, out=out2)
    np.testing.assert_array_equal(out2, want)


def test_omitted_output_has_the_lane_count():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    got = eagle.deploy(ps_permute).run(x=x, k=np.array([3, -1, 0, 1]))
    np.testing.assert_array_equal(got, [3.0, 4.0, 0.0, 1.0])
    got = eagle.deploy(ps_permute_int).run(v=np.array([7, 8, 9]), k=np.array([2, 0, -1]))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, [8, 0, 7])


@pytest.mark.parametrize("target", _targets())
def test_computed_keys(target):
    x = np.array([1.0, 2.0, 3.0, 4.0])
    out = np.full(6, -1.0)
    eagle.deploy(ps_shifted, target=target).run(x=x, k=np.array([0, -2, 4, 2]), out=out)
    np.testing.assert_array_equal(out, [-1.0, 2.0, -1.0, 8.0, -1.0, 6.0])
    o = np.zeros(10, dtype=np.int32)
    eagle.deploy(ps_compact, target=target).run(x=np.array([9.7, 2.2, 5.0, -1.0]), out=o)
    np.testing.assert_array_equal(o, [0, 0, 7, 0, 0, 16, 0, 0, 0, 28])


@pytest.mark.parametrize("target", _targets())
def test_key_outside_is_refused_and_array_untouched(target):
    x = np.array([1.0, 2.0, 3.0])
    out = np.arange(4.0)
    with pytest.raises(InputError, match=r"plane 'k' of kernel 'ps_permute'.*key 4.*output plane 'out'"):
        eagle.deploy(ps_permute, target=target).run(x=x, k=np.array([0, 4, 1]), out=out)
    np.testing.assert_array_equal(out, np.arange(4.0))
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'ps_shifted'.*first bad key: 7"):
        eagle.deploy(ps_shifted, target=target).run(x=x, k=np.array([0, 6, 1]), out=out)
    np.testing.assert_array_equal(out, np.arange(4.0))  # staged: nothing reached the caller's array
    o = np.full(3, 9, dtype=np.int64)
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'ps_compact'.*first bad key: -5"):
        eagle.deploy(ps_compact, target=target).run(x=np.array([1.0, -5.0]), out=o)
    np.testing.assert_array_equal(o, [9, 9, 9])


def test_dtype_refusals():
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'ps_permute_int'.*int32 or int64.*float64"):
        eagle.deploy(ps_permute_int).run(v=np.array([1]), k=np.array([0]), out=np.zeros(3))
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'ps_permute'.*float"):
        eagle.deploy(ps_permute).run(x=np.array([1.0]), k=np.array([0]), out=np.zeros(3, dtype=np.int64))


def _build(fn):
    return hawk.kernel(fn).mlir()


def test_add_into_an_output_plane_is_refused():
    def k(x: Scalar, i: Index, out: Mutable[Scalar]):
        hawk.scatter(out)[i] += x

    with pytest.raises(KernelError, match=r"output plane takes stores.*sink"):
        _build(k)


def test_mixing_lane_writes_and_scatters_is_refused():
    def a(x: Scalar, i: Index, out: Mutable[Scalar]):
        out = x
        hawk.scatter(out)[i] = x

    def b(x: Scalar, i: Index, out: Mutable[Scalar]):
        hawk.scatter(out)[i] = x
        out = x

    def c(x: Scalar, i: Index, out: Mutable[Scalar]):
        hawk.scatter(out)[i] = x + out

    for fn in (a, b, c):
        with pytest.raises(KernelError, match=r"output 'out'"):
            _build(fn)


def test_vector_output_and_two_keys_are_refused():
    from hawk import Vector

    def v(x: Scalar, i: Index, out: Mutable[Vector[2]]):
        hawk.scatter(out)[i] = x

    def two(x: Scalar, i: Index, out: Mutable[Scalar]):
        hawk.scatter(out)[i, i] = x

    def cond(x: Scalar, i: Index, out: Mutable[Scalar]):
        if x > 0.0:
            hawk.scatter(out)[i] = x

    with pytest.raises(KernelError, match=r"Mutable\[Scalar\] or Mutable\[Index\]"):
        _build(v)
    with pytest.raises(KernelError, match=r"one flat position"):
        _build(two)
    with pytest.raises(KernelError, match=r"inside an if"):
        _build(cond)


def test_reverse_gathers_the_cotangent_and_refuses_a_repeated_position_by_name():
    """More in tests/test_reverse_keyed.py."""
    got = eagle.deploy(ps_permute).reverse({"out": np.array([1.0, 2.0, 3.0])}, x=np.ones(3), k=np.array([2, 0, 1]))
    assert np.array_equal(np.asarray(got["x"]), [3.0, 1.0, 2.0])
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'ps_permute'.*stored more than once"):
        eagle.deploy(ps_permute).reverse({"out": np.ones(3)}, x=np.ones(3), k=np.array([2, 0, 2]))


@pytest.mark.parametrize("bridge", ["jax", "torch"])
def test_bridges_run_it_as_plan_run_does(bridge):
    """One device's bridges hand the plane back as Plan.run does (tests/test_bridge_int_outputs.py has more; their
    sharded runs: tests/test_dist_jax.py, tests/test_dist_torch.py)."""
    mod = pytest.importorskip(f"eagle.{bridge}")
    x, k = np.arange(1.0, 4.0, dtype=np.float32), np.array([2, 0, 1], dtype=np.int32)
    want = np.asarray(eagle.deploy(ps_permute).run(x=x, k=k))
    got = mod.wrap(ps_permute)(x=x, k=k)
    assert np.asarray(got).tobytes() == want.tobytes()


def test_artifact_round_trip(tmp_path):
    hawk.artifact.build(ps_shifted, tmp_path, index_dtypes={"k": "int64"})
    art = hawk.load(tmp_path, "ps_shifted")
    out = np.full(5, -1.0)
    hawk.run(art, x=np.array([1.0, 2.0]), k=np.array([3, 0]), out=out)
    np.testing.assert_array_equal(out, [-1.0, 4.0, -1.0, -1.0, 2.0])
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'ps_shifted'.*first bad key: 5"):
        hawk.run(art, x=np.array([1.0]), k=np.array([4]), out=out)
    np.testing.assert_array_equal(out, [-1.0, 4.0, -1.0, -1.0, 2.0])


@pytest.mark.parametrize("target", _targets())
def test_a_later_stage_stores_by_key(target):
    x = np.array([1.0, 2.0, 6.0])
    out = np.full(4, 9.0)
    plan = eagle.deploy(ps_staged, target=target)
    assert ps_staged.stage_count == 2
    plan.run(x=x, k=np.array([2, 0, 4]), out=out)
    np.testing.assert_array_equal(out, [9.0, -2.0, 9.0, 3.0])
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'ps_staged'.*first bad key: 4"):
        plan.run(x=x, k=np.array([5, 0, 4]), out=out)
    np.testing.assert_array_equal(out, [9.0, -2.0, 9.0, 3.0])


def test_the_ir_is_a_store_with_a_key():
    """hawk.store takes an optional i64 key (IRDL): the front end's IR parses back; two keys or an i32 key do not."""
    from mlir import ir

    from hawk.ir.dialect import new_context

    text = ps_permute.mlir()
    line = next(ln for ln in text.splitlines() if '"hawk.store"' in ln)
    assert line.strip().endswith(', f64, i64) -> ()'), line
    with new_context():
        assert str(ir.Module.parse(text)) == str(ir.Module.parse(str(ir.Module.parse(text))))
    call, types = line.split(" : ")
    two = text.replace(line, f"{call[:-1]}, %1) : {types.replace('i64) -> ()', 'i64, i64) -> ()')}")
    narrow = text.replace(line, f"{call[:-5]}, %0) : {types.replace('i64) -> ()', 'i32) -> ()')}")
    for bad in (two, narrow):
        assert bad != text
        with new_context(), pytest.raises(Exception, match="hawk.store"):
            ir.Module.parse(bad)


@hawk.kernel
def ps_twice(x: Scalar, k: Index, out: Mutable[Index]):
    for i in range(2):  # each pass is its own store (a for over range may hold scatters)
        hawk.scatter(out)[2 * k + i] = x * 10.0 + float(i)


@pytest.mark.parametrize("target", _targets())
def test_stores_in_a_loop(target):
    x = np.array([0.5, 1.25, -2.0])
    k = np.array([2, 0, 1])
    out = np.full(7, -9, dtype=np.int32)
    eagle.deploy(ps_twice, target=target).run(x=x, k=k, out=out)
    want = np.full(7, -9, dtype=np.int32)
    for i in range(2):
        want[2 * k + i] = (x * 10.0 + i).astype(np.int32)
    np.testing.assert_array_equal(out, want)


# ---- on the host an output plane stored by computed keys is written in place, a copy saved first: a refusal puts
# the copy back, in the stage that refuses and in every stage before it

@hawk.kernel
def ps_early_late(x: Scalar, k: Index, out: Mutable[Scalar], late: Mutable[Scalar]):
    hawk.scatter(out)[k + 1] = x * 2.0  # stage 0
    hawk.scatter(late)[k - 1] = x - hawk.mean(x)  # stage 1, after the mean


@pytest.mark.parametrize("target", _targets())
def test_a_later_stage_refusing_puts_back_what_an_earlier_stage_stored(target):
    x = np.array([1.0, 2.0, 6.0])
    out, late = np.full(5, 9.0), np.full(5, 7.0)
    plan = eagle.deploy(ps_early_late, target=target)
    assert ps_early_late.stage_count == 2
    plan.run(x=x, k=np.array([1, 2, 3]), out=out, late=late)
    np.testing.assert_array_equal(out, [9.0, 9.0, 2.0, 4.0, 12.0])
    np.testing.assert_array_equal(late, [-2.0, -1.0, 3.0, 7.0, 7.0])
    out_before, late_before = out.copy(), late.copy()
    for _ in range(2):  # the second time through the plan's reused (rebound) stages
        with pytest.raises(InputError, match=r"plane 'late' of kernel 'ps_early_late'.*first bad key: -2"):
            plan.run(x=x, k=np.array([1, 2, -1]), out=out, late=late)  # stage 0 stores (12.0 at 0), stage 1 refuses
        assert out.tobytes() == out_before.tobytes() and late.tobytes() == late_before.tobytes()


@pytest.mark.parametrize("executor", ["native", "python"])
@pytest.mark.parametrize("threads", [1, 3])
def test_a_refusal_after_many_in_place_stores_leaves_the_array_bit_for_bit(monkeypatch, executor, threads):
    import eagle.native

    monkeypatch.setenv("EAGLE_NATIVE", "1" if executor == "native" else "0")
    monkeypatch.setattr(eagle.native, "_STATE", {})
    rng = np.random.default_rng(12)
    n = 60_000
    x, k = rng.standard_normal(n), rng.permutation(n)
    plan = eagle.deploy(ps_shifted, threads=threads, min_chunk=1000)
    out = rng.standard_normal(n + 1)
    want = out.copy()
    want[k + 1] = x * 2.0
    plan.run(x=x, k=k, out=out)
    np.testing.assert_array_equal(out, want)
    assert plan.last_executor == (executor,)
    assert threads == 1 or plan.last_chunks[0] > 1, plan.last_chunks  # the lanes really split
    bad = k.copy()
    bad[n // 2] = n  # key n + 1: outside; every other lane stores into the caller's array
    for arr in (out, rng.standard_normal(n + 1)):  # the same array again, then another one (rebound stages)
        before = arr.copy()
        with pytest.raises(InputError, match=rf"plane 'out' of kernel 'ps_shifted'.*first bad key: {n + 1}"):
            plan.run(x=x, k=bad, out=arr)
        assert arr.tobytes() == before.tobytes()
    assert plan._runs.hits >= 1
    fresh = np.zeros(n + 1)
    plan.run(x=x, k=k, out=fresh)  # after the refusals, a good run with reused stages still stores everything
    want = np.zeros(n + 1)
    want[k + 1] = x * 2.0
    np.testing.assert_array_equal(fresh, want)


def test_a_bound_launch_refusing_keeps_its_last_results():
    o = np.full(8, -3, dtype=np.int32)
    bound = eagle.deploy(ps_compact).bind(x=np.array([1.0, 4.0, 6.0]), out=o)
    bound.launch()
    np.testing.assert_array_equal(o, [-3, 4, -3, -3, 13, -3, 19, -3])
    bound.inputs["x"][1] = 8.0  # key 8: outside
    with pytest.raises(InputError, match=r"plane 'out' of kernel 'ps_compact'.*first bad key: 8"):
        bound.launch()
    np.testing.assert_array_equal(o, [-3, 4, -3, -3, 13, -3, 19, -3])
    bound.inputs["x"][1] = 7.0
    bound.launch()
    np.testing.assert_array_equal(o, [-3, 4, -3, -3, 13, -3, 19, 22])


@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("bad", [-2.0**62, 2.0**62, -2.0])
def test_far_computed_keys_are_refused_and_minus_one_skipped(target, bad):
    o = np.full(4, 9, dtype=np.int64)  # lanes with key -1 store nothing; a far key on either side is refused
    with pytest.raises(InputError, match=rf"plane 'out' of kernel 'ps_compact'.*first bad key: {int(bad)}"):
        eagle.deploy(ps_compact, target=target).run(x=np.array([-1.0, 2.0, bad, -1.0]), out=o)
    np.testing.assert_array_equal(o, [9, 9, 9, 9])
    eagle.deploy(ps_compact, target=target).run(x=np.array([-1.0, 2.0, -1.0, 0.0]), out=o)
    np.testing.assert_array_equal(o, [1, 9, 7, 9])
