"""Infinities and NaN through every sum policy: IEEE addition's answer, whatever the compensation does.

A compensated step keeps the rounding error of s + x in a correction; once s + x is infinite or NaN there is no
rounding error to keep (inf - inf would make the correction, and so the result, NaN), so the correction is left
as it was. Found by the front-end fuzzer (tests/test_fuzz.py, tag compensated_inf).
"""

import numpy as np
import pytest

import eagle
import hawk
from hawk import Index, Mutable, Scalar, Vector

POLICIES = ("auto", "plain", "compensated", "ordered")  # "plain" is a scatter's only (sums take the other three)
CASES = {
    "inf term": [np.inf, 1.0, 2.0],
    "-inf term": [3.0, -np.inf, 1.0],
    "overflowing total": [1e308, 1e308, 1.0],
    "negative overflow": [-1e308, -1e308],
    "inf and -inf": [np.inf, 1.0, -np.inf],
    "nan term": [1.0, np.nan, 2.0],
}


def _kernels(policy):
    sum_policy = "auto" if policy == "plain" else policy

    @hawk.kernel
    def total(x: Scalar, t: Mutable[Scalar]):
        t = hawk.sum(x, policy=sum_policy)

    @hawk.kernel
    def binned(x: Scalar, key: Index, acc: Mutable["slot":3]):
        hawk.scatter(acc, policy=policy)[key] += x

    @hawk.kernel
    def pairs(v: Vector[2], t: Mutable[Vector[2]]):
        t = hawk.sum(v, policy=sum_policy)

    return total, binned, pairs


def _expect(xs):
    with np.errstate(over="ignore", invalid="ignore"):
        return np.sum(np.asarray(xs, dtype=np.float64))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_special_values_follow_ieee_addition(target, policy, case):
    total, binned, pairs = _kernels(policy)
    xs = np.asarray(CASES[case], dtype=np.float64)
    want = _expect(xs)
    got = eagle.deploy(total, target=target).run(x=xs)
    np.testing.assert_equal(np.asarray(got)[0], want)
    keys = np.ones(xs.size, dtype=np.int64)
    acc = np.asarray(eagle.deploy(binned, target=target).run(x=xs, key=keys))
    np.testing.assert_equal(acc, [0.0, want, 0.0])
    v = np.stack([xs, np.arange(xs.size, dtype=np.float64)])
    got = eagle.deploy(pairs, target=target).run(v=v)
    np.testing.assert_equal(np.asarray(got["t_0"]).reshape(-1)[0], want)
    np.testing.assert_equal(np.asarray(got["t_1"]).reshape(-1)[0], float(xs.size * (xs.size - 1) // 2))


# ---- whole blocks: the chains of a compensated sum over every lane ------------------------------------------
# On the host a block of 1024 lanes runs eight chains of Knuth's TwoSum with no test for infinities (an
# overflowing chain leaves a NaN correction); the finish takes an inf or NaN sum alone. These rows put the
# specials inside whole blocks, across chunks.
LONG = 4096 + 37
TOP = float(np.finfo(np.float64).max)


def _long(fill, **at):
    xs = np.full(LONG, fill, dtype=np.float64)
    for k, v in at.items():
        xs[int(k[1:])] = v
    return xs


LONG_CASES = {
    "every chain overflows": _long(TOP / 3),
    "every chain overflows below": _long(-TOP / 3),
    "one chain overflows": _long(1.0, i1500=TOP, i1508=TOP),
    "inf in a block": _long(0.5, i1500=np.inf),
    "inf and -inf in two blocks": _long(0.5, i100=np.inf, i3000=-np.inf),
    "overflow and -inf": _long(TOP / 3, i3000=-np.inf),
    "nan in a block": _long(0.5, i2049=np.nan),
}


@hawk.kernel
def sv_long_total(x: Scalar, t: Mutable[Scalar]):
    t = hawk.sum(x, policy="compensated")


@hawk.kernel
def sv_long_mean(x: Scalar) -> Scalar:
    return hawk.mean(x, policy="compensated")


@pytest.mark.parametrize("case", sorted(LONG_CASES))
def test_compensated_chains_over_whole_blocks_follow_ieee_addition(case):
    from exact_families import split_runs

    xs = LONG_CASES[case]
    want = _expect(xs)
    for threads, out in split_runs(sv_long_total, "host", threads=[1, 2], min_chunk=2048, x=xs):
        np.testing.assert_equal(out[0], want, err_msg=f"{case}, threads={threads}")
    for threads, out in split_runs(sv_long_mean, "host", threads=[1, 2], min_chunk=2048, x=xs):
        np.testing.assert_equal(out.reshape(-1)[0], want / LONG, err_msg=f"{case} (mean), threads={threads}")
