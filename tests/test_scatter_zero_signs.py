"""The sign of a zero in plain and compensated (`auto`) scatters: a slot ends as IEEE addition in any order leaves
it, so `-0.0` exactly when its prior content and every term added into it are `-0.0` (`-0.0 + -0.0` is `-0.0`;
`+0.0` with either sign, or `x + -x`, is `+0.0`), and a slot no lane adds into keeps its bits. NumPy's
`np.add.at`, torch's `index_add_` and Warp's atomics do the same. Until 2026-12-07 every such slot ended `+0.0`:
the chunks' private copies and the companions started at `+0.0` and were added into every slot at the finish.
(Ordered scatters round the exact sum, whose zero is `+0.0`: docs/ordered.md.)

Each route is checked on every target: keys in any order and sorted ones (long runs added side by side, short
ones lane by lane), a small sink and one past the private-copy limit, Vector payloads (a wide one too), keys -1
computed in the body, a scatter in a second stage, a sink also stored into, one thread (one chunk) and two with
runs cut into several chunks; then bound launches (the copies reset each launch), slot ranges (the companion
folded by the native executor, or in NumPy) and a built artifact's run.
"""

import numpy as np
import pytest
from conftest import bt_same_bits

import eagle
import eagle.native
import hawk
import hawk.math as m
from hawk import Index, Mutable, Scalar, Sorted, Vector
from hawk.abi.layout import COPY_SLOTS_ENV

SMALL, LARGE = 7, 70_000  # (LARGE: past hawk.abi.layout.PRIVATE_SLOTS)


@hawk.kernel
def zs_plain(key: Index, x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def zs_auto(key: Index, x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc)[key] += x


@hawk.kernel
def zs_sorted_plain(key: Sorted[Index], x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def zs_sorted_auto(key: Sorted[Index], x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc)[key] += x


@hawk.kernel
def zs_large_plain(key: Index, x: Scalar, acc: Mutable["slot":70_000]):
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def zs_large_auto(key: Index, x: Scalar, acc: Mutable["slot":70_000]):
    hawk.scatter(acc)[key] += x


@hawk.kernel
def zs_vec_auto(key: Index, v: Vector[2], acc: Mutable["slot":7]):
    hawk.scatter(acc)[key] += v


@hawk.kernel
def zs_sorted_vec_plain(key: Sorted[Index], v: Vector[2], acc: Mutable["slot":7]):
    hawk.scatter(acc, policy="plain")[key] += v


@hawk.kernel
def zs_large_sorted_plain(key: Sorted[Index], x: Scalar, acc: Mutable["slot":70_000]):
    hawk.scatter(acc, policy="plain")[key] += x  # (runs of about eight lanes: one by one)


@hawk.kernel
def zs_large_sorted_auto(key: Sorted[Index], x: Scalar, acc: Mutable["slot":70_000]):
    hawk.scatter(acc)[key] += x


@hawk.kernel
def zs_wide_vec_auto(key: Index, v: Vector[12], acc: Mutable["slot":7]):
    hawk.scatter(acc)[key] += v  # (past host_emit.WIDE_PAYLOAD: loops over components)


@hawk.kernel
def zs_skip_plain(key: Index, x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc, policy="plain")[m.where(key % 3 != 1, key, -1)] += x  # (key -1: adds nothing, not +0.0)


@hawk.kernel
def zs_split_auto(key: Index, x: Scalar, acc: Mutable["slot":7]):
    hawk.scatter(acc)[key] += x * (1.0 + hawk.max(x))  # (a second stage: x * 1.0 is x, its sign kept)


@hawk.kernel
def zs_mixed(key: Index, x: Scalar, acc: Mutable["slot":70_000]):
    hawk.scatter(acc)[m.where(key > LARGE, key, -1)] = x  # (a sink stored into too; by no lane here)
    hawk.scatter(acc, policy="plain")[key] += x


SCALAR = [zs_plain, zs_auto, zs_sorted_plain, zs_sorted_auto, zs_large_plain, zs_large_auto,
          zs_large_sorted_plain, zs_large_sorted_auto, zs_skip_plain, zs_split_auto, zs_mixed]


def _zeros(rng, n: int, negative: float) -> np.ndarray:
    """n zeros, each -0.0 with probability `negative`."""
    return np.where(rng.uniform(size=n) < negative, -0.0, 0.0)


def _case(rng, kernel, dtype, n: int | None = None):
    """Keys (sorted for a Sorted plane; some -1), terms, and a prior sink (a Vector payload's component first):
    slot 0 gets only -0.0 terms, slot 1 only +0.0, slot 2 both, the last slot none (its prior kept); every other
    slot at random. `n` lanes: by default enough for a sink past the copy limit to run in several chunks (at
    least two lanes a slot each)."""
    slots = LARGE if "large" in kernel.name or "mixed" in kernel.name else SMALL
    n = n or (600_000 if slots == LARGE else 20_000)
    key = rng.integers(-1, slots - 1, size=n)  # (never the last slot)
    key[: n // 8] = 0
    key[n // 8: n // 4] = 1
    key[n // 4: n // 2] = 2
    if "sorted" in kernel.name:
        key = np.sort(key)
    width = 12 if "wide" in kernel.name else 2 if "vec" in kernel.name else 1
    x = _zeros(rng, width * n, 0.9).reshape(width, n)
    x[:, key == 0] = -0.0
    x[:, key == 1] = 0.0
    both = np.flatnonzero(key == 2)
    x[:, both[:2]] = [-0.0, 0.0]
    prior = _zeros(rng, width * slots, 0.5).reshape(width, slots)
    prior[:, 0] = -0.0
    prior[:, -1] = -0.0
    if width == 1:
        x, prior = x[0], prior[0]
    return key.astype(np.int64), x.astype(dtype), prior.astype(dtype)


def _expected(kernel, key, x, prior) -> np.ndarray:
    """Each slot's IEEE result (per component): -0.0 when its prior and all its terms are -0.0, else +0.0."""
    x, prior = np.atleast_2d(x), np.atleast_2d(prior)
    negative = np.signbit(prior)
    keep = (key >= 0) & ((key % 3 != 1) if "skip" in kernel.name else True)
    for c in range(prior.shape[0]):
        np.logical_and.at(negative[c], key[keep], np.signbit(x[c, keep]))
    return np.where(negative, -0.0, 0.0).astype(prior.dtype).reshape(prior.shape if prior.shape[0] > 1 else -1)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel", SCALAR + [zs_vec_auto, zs_sorted_vec_plain, zs_wide_vec_auto], ids=lambda k: k.name)
def test_zero_signs_follow_ieee(target, kernel, dtype):
    rng = np.random.default_rng(sum(map(ord, kernel.name)))
    key, x, prior = _case(rng, kernel, dtype)
    want = _expected(kernel, key, x, prior)
    plane = "v" if "vec" in kernel.name else "x"
    for threads in (1, 2):
        plan = eagle.deploy(kernel, target=target, threads=threads, min_chunk=4096)
        acc = prior.copy()
        got = np.asarray(plan.run(key=key, **{plane: x}, acc=acc))
        if threads > 1:
            assert max(plan.last_chunks) > 1, f"{kernel.name}: ran {plan.last_chunks} chunk(s)"
        bt_same_bits(got, want, f"{kernel.name} {np.dtype(dtype).name} threads={threads}")
        bt_same_bits(acc, want, f"{kernel.name}: the passed sink")


@pytest.mark.parametrize("kernel", [zs_plain, zs_sorted_auto], ids=lambda k: k.name)
def test_a_bound_launch_starts_each_launch_afresh(kernel):
    """The copies a bound launch resets between launches start at -0.0 again (a second launch of all -0.0 terms
    into a -0.0 sink keeps it -0.0)."""
    key = np.sort(np.repeat(np.arange(SMALL - 1), 500)).astype(np.int64)
    x = np.full(key.size, -0.0)
    acc = np.full(SMALL, -0.0)
    bound = eagle.deploy(kernel, threads=2, min_chunk=1024).bind(key=key, x=x, acc=acc)
    for _ in range(3):
        bound.launch()
        bt_same_bits(acc, np.full(SMALL, -0.0), f"{kernel.name}: a bound launch")


@pytest.mark.parametrize("native", ["1", "0"])
@pytest.mark.parametrize("kernel", [zs_large_plain, zs_large_auto, zs_large_sorted_auto], ids=lambda k: k.name)
def test_zero_signs_in_slot_ranges(monkeypatch, kernel, native):
    """A sink too large for copies (here: past a copy limit of 1024 slots) runs in slot ranges, its companion
    folded into it by the native executor (or, without it, in NumPy) by ranges of slots."""
    monkeypatch.setenv(COPY_SLOTS_ENV, "1024")
    monkeypatch.setenv("EAGLE_NATIVE", native)
    monkeypatch.setattr(eagle.native, "_STATE", {})
    rng = np.random.default_rng(68_001)
    key, x, prior = _case(rng, kernel, np.float64, 200_000)
    want = _expected(kernel, key, x, prior)
    assert kernel.layout(kernel.spec_for("float64", {})).slot_ranges(), "not a slot-range stage"
    plan = eagle.deploy(kernel, threads=2, min_chunk=4096)
    bt_same_bits(np.asarray(plan.run(key=key, x=x, acc=prior.copy())), want, f"{kernel.name} in slot ranges")


@pytest.mark.parametrize("kernel", [zs_auto, zs_large_plain], ids=lambda k: k.name)
def test_an_artifact_run_keeps_the_signs(tmp_path, kernel):
    """hawk.run of a built artifact fills its copies as Plan.run does."""
    import hawk.artifact

    key, x, prior = _case(np.random.default_rng(68_002), kernel, np.float64)
    hawk.artifact.build(kernel, str(tmp_path), index_dtypes={"key": "int64"})
    got = hawk.run(hawk.load(str(tmp_path), kernel.name), key=key, x=x, acc=prior.copy())
    bt_same_bits(np.asarray(got), _expected(kernel, key, x, prior), f"{kernel.name}: an artifact")
