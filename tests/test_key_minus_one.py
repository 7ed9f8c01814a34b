"""Key -1 adds and stores nothing under every sink policy; any other key outside the sink is still refused.

For each policy (plain, compensated, auto, ordered) and each form a scatter takes (keys computed in the body,
keys read from an Index plane, sorted runs, 2-D keys, stores), the result is compared with NumPy's `np.add.at`
over the lanes whose keys are valid. Terms are small multiples of 1/4, so every policy's sum is exact and the
comparison is bitwise. Host runs use 1 and 3 threads (flat and private-copy drivers); spirv runs the GPU chunk
form.
"""

import numpy as np
import pytest
from conftest import bt_target_missing

import eagle
import hawk
from hawk import Index, Mutable, Scalar, Sorted, Vector

POLICIES = ("plain", "compensated", "auto", "ordered")
N = 6001


@hawk.kernel
def km_plain(key: Index, x: Scalar, acc: Mutable["slot":9]):
    hawk.scatter(acc, policy="plain")[key - 1] += x


@hawk.kernel
def km_comp(key: Index, x: Scalar, acc: Mutable["slot":9]):
    hawk.scatter(acc, policy="compensated")[key - 1] += x


@hawk.kernel
def km_auto(key: Index, x: Scalar, acc: Mutable["slot":9]):
    hawk.scatter(acc, policy="auto")[key - 1] += x


@hawk.kernel
def km_ord(key: Index, x: Scalar, acc: Mutable["slot":9]):
    hawk.scatter(acc, policy="ordered")[key - 1] += x


@hawk.kernel
def ki_plain(key: Index, x: Scalar, acc: Mutable["slot":9]):
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def ki_comp(key: Index, x: Scalar, acc: Mutable["slot":9]):
    hawk.scatter(acc, policy="compensated")[key] += x


@hawk.kernel
def ki_auto(key: Index, x: Scalar, acc: Mutable["slot":9]):
    hawk.scatter(acc, policy="auto")[key] += x


@hawk.kernel
def ki_ord(key: Index, x: Scalar, acc: Mutable["slot":9]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def ks_plain(key: Sorted[Index], x: Scalar, acc: Mutable["slot":9]):
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def ks_comp(key: Sorted[Index], x: Scalar, acc: Mutable["slot":9]):
    hawk.scatter(acc, policy="compensated")[key] += x


@hawk.kernel
def ks_auto(key: Sorted[Index], x: Scalar, acc: Mutable["slot":9]):
    hawk.scatter(acc, policy="auto")[key] += x


@hawk.kernel
def ks_ord(key: Sorted[Index], x: Scalar, acc: Mutable["slot":9]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def kt_plain(r: Index, c: Index, x: Scalar, tab: Mutable["ra":3, "ca":4]):
    hawk.scatter(tab, policy="plain")[r - 1, c] += x


@hawk.kernel
def kt_comp(r: Index, c: Index, x: Scalar, tab: Mutable["ra":3, "ca":4]):
    hawk.scatter(tab, policy="compensated")[r - 1, c] += x


@hawk.kernel
def kv_auto(key: Index, v: Vector[2], acc: Mutable["slot":9]):
    hawk.scatter(acc)[key - 1] += v


@hawk.kernel
def k_store(key: Index, x: Scalar, buf: Mutable["slot":9]):
    hawk.scatter(buf)[key - 1] = x


@hawk.kernel
def k_store_index(key: Index, x: Scalar, buf: Mutable["slot":9]):
    hawk.scatter(buf)[key] = x


COMPUTED = dict(zip(POLICIES, (km_plain, km_comp, km_auto, km_ord), strict=True))
FROM_INDEX = dict(zip(POLICIES, (ki_plain, ki_comp, ki_auto, ki_ord), strict=True))
SORTED = dict(zip(POLICIES, (ks_plain, ks_comp, ks_auto, ks_ord), strict=True))


def _targets():
    out = [("host", 1), ("host", 3)]
    return out + ([] if bt_target_missing("spirv") else [("spirv", None)])


def _run(kernel, target, threads, **planes):
    # several host threads: chunks of >= 500 lanes, so each chunk adds into its own private copy of the sink
    opts = {"threads": threads, "min_chunk": 500} if target == "host" else {}
    plan = eagle.deploy(kernel, target=target, **opts)
    out = np.asarray(plan.run(**planes))
    if target == "host" and threads > 1:  # the private-copy path really ran
        assert max(plan.last_chunks) > 1, f"{kernel.name}: one chunk ({plan.last_chunks})"
    return out


def _terms(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-64, 64, size=n) * 0.25  # exact under any order of adds


def _add_at(prior: np.ndarray, keys: np.ndarray, x: np.ndarray) -> np.ndarray:
    want = np.array(prior, copy=True)
    ok = keys >= 0
    np.add.at(want, keys[ok], x[..., ok].T if x.ndim > 1 else x[ok])
    return want


@pytest.mark.parametrize("policy", POLICIES)
def test_computed_key_minus_one_adds_nothing(policy):
    rng = np.random.default_rng(31)
    key = rng.integers(0, 10, size=N).astype(np.int32)  # the kernel scatters to key - 1: 0 becomes -1
    x = _terms(N, 32)
    want = _add_at(np.zeros(9), key - 1, x)
    assert (key == 0).sum() > 100
    for target, threads in _targets():
        got = _run(COMPUTED[policy], target, threads, key=key, x=x)
        np.testing.assert_array_equal(got, want, err_msg=f"{policy} on {target}, threads={threads}")


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("sorted_keys", [False, True], ids=["Index", "Sorted"])
def test_index_plane_key_minus_one_adds_nothing(policy, sorted_keys):
    rng = np.random.default_rng(41)
    key = rng.integers(-1, 9, size=N).astype(np.int64)
    if sorted_keys:
        key = np.sort(key)
    x = _terms(N, 42)
    prior = np.linspace(-2.0, 2.0, 9)
    want = _add_at(prior, key, x)
    kernel = (SORTED if sorted_keys else FROM_INDEX)[policy]
    for target, threads in _targets():
        sink = prior.copy()
        _run(kernel, target, threads, key=key, x=x, acc=sink)
        np.testing.assert_array_equal(sink, want, err_msg=f"{policy} on {target}, threads={threads}")


@pytest.mark.parametrize("kernel", [kt_plain, kt_comp], ids=["plain", "compensated"])
def test_minus_one_on_either_axis_of_a_2d_key(kernel):
    rng = np.random.default_rng(51)
    r = rng.integers(0, 4, size=N).astype(np.int32)  # r - 1 == -1: nothing
    c = rng.integers(-1, 4, size=N).astype(np.int32)  # c == -1: nothing
    x = _terms(N, 52)
    ok = (r > 0) & (c >= 0)
    want = np.zeros((3, 4))
    np.add.at(want, (r[ok] - 1, c[ok]), x[ok])
    for target, threads in _targets():
        got = _run(kernel, target, threads, r=r, c=c, x=x)
        np.testing.assert_array_equal(got, want, err_msg=f"{kernel.name} on {target}, threads={threads}")


def test_vector_payload_key_minus_one_adds_nothing():
    rng = np.random.default_rng(61)
    key = rng.integers(0, 10, size=N).astype(np.int32)
    v = np.stack([_terms(N, 62), _terms(N, 63)])
    want = np.zeros((9, 2))
    ok = key > 0
    np.add.at(want, key[ok] - 1, v[:, ok].T)
    for target, threads in _targets():
        got = _run(kv_auto, target, threads, key=key, v=v)
        np.testing.assert_array_equal(got.reshape(2, 9), want.T, err_msg=f"{target}, threads={threads}")


@pytest.mark.parametrize("kernel", [k_store, k_store_index], ids=["computed", "Index"])
def test_store_with_key_minus_one_stores_nothing(kernel):
    rng = np.random.default_rng(71)
    key = rng.integers(0, 10, size=N).astype(np.int32)
    if kernel is k_store_index:
        key = key - 1  # the plane holds the -1s itself
    slot = key - 1 if kernel is k_store else key
    x = _terms(N, 72)
    prior = np.full(9, 7.5)
    want = prior.copy()
    for i in np.flatnonzero(slot >= 0):
        want[slot[i]] = x[i]  # the last lane (in lane order) that stored a slot gives it
    for target, threads in _targets():
        buf = prior.copy()
        _run(kernel, target, threads, key=key, x=x, buf=buf)
        np.testing.assert_array_equal(buf, want, err_msg=f"{kernel.name} on {target}, threads={threads}")


@pytest.mark.parametrize("policy", POLICIES)
def test_other_keys_outside_are_still_refused_by_name(policy):
    x = np.ones(5)
    for target, threads in _targets():
        # computed in the body: key - 1 == -2 is reported by the kernel itself (the #err buffer)
        with pytest.raises(eagle.InputError, match=r"sink 'acc'.*first bad key: -2\b"):
            _run(COMPUTED[policy], target, threads, key=np.array([1, -1, 3, 0, 2], dtype=np.int32), x=x)
        with pytest.raises(eagle.InputError, match=r"sink 'acc'.*first bad key: 9\b"):
            _run(COMPUTED[policy], target, threads, key=np.array([1, 10, 3, 0, 2], dtype=np.int32), x=x)
        # read from an Index plane: checked before the run, naming the plane and the sink
        with pytest.raises(eagle.InputError, match=r"'key'.*holds key -2, outside sink 'acc'"):
            _run(FROM_INDEX[policy], target, threads, key=np.array([1, -2, 3, 0, -1], dtype=np.int32), x=x)
        with pytest.raises(eagle.InputError, match=r"'key'.*holds key 9, outside sink 'acc'"):
            _run(FROM_INDEX[policy], target, threads, key=np.array([1, 9, -1, 0, 2], dtype=np.int32), x=x)
