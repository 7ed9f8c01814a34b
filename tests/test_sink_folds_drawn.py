"""Drawn cases for the ways a sink's copies reach it (the fuzzers' sinks have 7 bins, so they never reach these):
sinks of 1,000 to 300,000 slots, on either side of hawk.abi.layout.SIDE_BY_SIDE (a compensated sink's pairs side
by side or sums then corrections) and PRIVATE_SLOTS (the executor folds the copies: densely, by the run's keys,
or a compensated sink's one copy straight into the sink), 100 to 700,000 lanes, plain / `auto` / compensated,
float64 and float32, scalar and Vector[2] terms, int32 and int64 keys with repeats and -1, 1 to 3 threads. Each
result must have the bits of the compiled finish (the executor's fold off), of a second run (from the copies
the first one's fold refilled), and, for a sink past PRIVATE_SLOTS (fixed chunks), of the Python pool's run.
Case `i` of seed `s` comes from np.random.default_rng([s, i]) alone; HAWK_FUZZ_SEED picks the seed
(tests/test_fuzz.py's default) and HAWK_SINK_FOLD_COUNT the number of cases."""

import importlib
import os
import sys
import textwrap

import numpy as np
import pytest
from conftest import bt_executor, bt_same_bits

import eagle
import eagle.native
import eagle.native.folds
from hawk.abi.layout import PRIVATE_SLOTS

SEED = int(os.environ.get("HAWK_FUZZ_SEED", "20261201"))
COUNT = int(os.environ.get("HAWK_SINK_FOLD_COUNT", "16"))
SLOTS = (1000, 2048, 2049, 5000, 40_000, 65_537, 100_000, 300_000)
LANES = (100, 3000, 20_000, 200_000, 700_000)


def _case(i: int, where):
    rng = np.random.default_rng([SEED, 7_000 + i])
    slots, lanes = int(rng.choice(SLOTS)), int(rng.choice(LANES))
    policy = str(rng.choice(["plain", "auto", "compensated"]))
    dtype, key_dtype = np.dtype(rng.choice(["float64", "float32"])), np.dtype(rng.choice(["int32", "int64"]))
    threads, vec = int(rng.integers(1, 4)), bool(rng.random() < 0.2)
    name = f"sf_{SEED}_{i}"
    where.joinpath(f"{name}.py").write_text(textwrap.dedent(f"""
        import hawk
        from hawk import Index, Mutable, Scalar, Vector

        @hawk.kernel
        def {name}(key: Index, x: {"Vector[2]" if vec else "Scalar"}, acc: Mutable["slot":{slots}]):
            hawk.scatter(acc{"" if policy == "auto" else f", policy={policy!r}"})[key] += x * 0.75
        """))
    kernel = getattr(importlib.import_module(name), name)
    shape = (2, lanes) if vec else lanes
    key = rng.integers(-1, slots, lanes)
    key[: lanes // 10] = key[lanes // 10: lanes // 5]  # (repeated keys)
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 7, shape)).astype(dtype)
    prior_shape = (2, slots) if vec else slots
    prior = np.where(rng.random(prior_shape) < 0.3, -0.0, rng.standard_normal(prior_shape)).astype(dtype)
    what = f"case {SEED}:{i}: {policy} {slots} slots{' x 2' if vec else ''}, {lanes} lanes, {dtype.name}, " \
           f"{key_dtype.name} keys, {threads} thread(s)"
    return kernel, {"key": key.astype(key_dtype), "x": x}, prior, threads, slots, what


@pytest.fixture
def drawn_kernels(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith(f"sf_{SEED}_")]:
        del sys.modules[name]


@pytest.mark.parametrize("i", range(COUNT))
def test_every_fold_gives_the_compiled_finishs_bits(drawn_kernels, monkeypatch, i):
    if eagle.native.library() is None:
        pytest.skip(f"no native executor here: {eagle.native.unavailable_reason()}")
    kernel, planes, prior, threads, slots, what = _case(i, drawn_kernels)
    got = {}
    for native, parallel in (("1", True), ("1", False), ("0", True)):
        bt_executor(monkeypatch, native, parallel)
        plan = eagle.deploy(kernel, threads=threads)
        got[native, parallel] = np.asarray(plan.run(**planes, acc=prior.copy())).copy()
        if (native, parallel) == ("1", True):  # (again, from the copies the first run's fold refilled)
            bt_same_bits(np.asarray(plan.run(**planes, acc=prior.copy())), got["1", True], f"{what}: a second run")
    bt_same_bits(got["1", True], got["1", False], f"{what}: the executor's folds against the compiled finish")
    if slots > PRIVATE_SLOTS:  # (fixed chunks: the Python pool splits alike)
        bt_same_bits(got["0", True], got["1", False], f"{what}: the Python pool against the executor")
