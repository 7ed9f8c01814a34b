"""The sharded fuzzer: the front-end fuzzer's kernels (tests/fuzz_kernels.py) on 20,000 lanes (3,000 rows of a
Grid) split over 4 JAX CPU devices (`eagle.jax.wrap(kernel, partition=True)` under `jax.jit`, the lane planes
carrying a `NamedSharding`), every output that promises bits compared bit for bit with the one-device Plan.run
(tests/test_fuzz.py runs it).

What promises bits whatever the split is what promises them across threads (tests/fuzz_threads.py `promised`):
per-lane outputs computed without a non-ordered total, max/min, ordered sums, means and scatters, `=` stores,
scans. A sharded run takes no passed per-lane output, so `out` is left out of both runs (it starts at zero); a
sink's prior content is passed to both. A kernel the sharded path cannot run (a `.at` read that can reach any
lane) runs as one call over the gathered lanes under `jax.jit`, with a warning naming the kernel (why it cannot be
sharded); anything else is a failure.

    python tests/fuzz_sharded.py --seed 7 --start 0 --count 50 --dir /tmp/fz    # one JSON line per case
"""

from __future__ import annotations

import os
import sys
import warnings

if "device_count" not in os.environ.get("XLA_FLAGS", ""):  # 4 CPU devices, before JAX starts (other flags kept)
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4".strip()

import fuzz_kernels as fk  # noqa: E402
import numpy as np  # noqa: E402
from fuzz_threads import big_planes, loose, near, promised  # noqa: E402

SHARDS = 4
ROWS, LANES = 3000, 20000  # every shard an equal run (JAX shards evenly): 750 rows, 5000 lanes

__all__ = ["check_sharded"]

LANE_PLANES = ("x", "y", "k", "kb", "ks", "v")  # the cases' per-lane planes (v: Vector[3], its components
# first; ks: a Sorted[Index] plane, only some cases')


def _planes(c, rng) -> dict:
    """tests/fuzz_threads.py's planes, cut to ROWS rows (LANES lanes), without a passed per-lane output."""
    d = big_planes(c, rng)
    d.pop("out", None)
    n = ROWS if "row" in c.planes else LANES
    for k in ("x", "y", "k", "kb", "ks"):
        if k in d:
            d[k] = d[k][:n]
    d["k"] = d["k"] % (n * (d["x"][0].size if d["x"].ndim > 1 else 1))  # (a lane index of the cut planes)
    d["v"] = d["v"][:, :n]
    if "row" in d:
        d["row"] = ROWS
    return d


def lane_specs() -> dict:
    """Each per-lane plane's PartitionSpec: split along its leading lane axis over mesh axis "d"."""
    from jax.sharding import PartitionSpec as P

    return {k: P(None, "d") if k == "v" else P("d") for k in LANE_PLANES}


def _sharded(kernel, planes: dict) -> dict:
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle.jax

    jax.config.update("jax_enable_x64", True)
    mesh = jax.make_mesh((SHARDS,), ("d",), devices=jax.devices()[:SHARDS])
    lane = lane_specs()
    arrays = {k: jax.device_put(v, NamedSharding(mesh, lane.get(k, P()))) for k, v in planes.items()
              if isinstance(v, np.ndarray)}
    fixed = {k: v for k, v in planes.items() if not isinstance(v, np.ndarray)}
    f = eagle.jax.wrap(kernel, partition=True)
    names = sorted(arrays)
    got = jax.jit(lambda *a: f(**dict(zip(names, a, strict=True)), **fixed))(*[arrays[k] for k in names])
    return got


def reference(c, path: str):
    """Case `c` on one device: (kernel, plan, planes, promised outputs, results), or the record to report instead
    (no bits promised, its keys refused on these planes, a failure). Shared with tests/fuzz_ranks.py."""
    import eagle

    out = fk.record(c)
    keep = promised(c) if "p" in c.planes else set()  # (not the Vector[1024] cases)
    if not keep and not (loose(c) if "p" in c.planes else set()):
        return {**out, "status": "skipped", "why": "no bits promised"}
    planes = _planes(c, np.random.default_rng([c.seed, c.index, 17]))
    try:
        kernel = fk.load_kernel(c, path)
        plan = eagle.deploy(kernel)
        return kernel, plan, planes, keep, fk.named(plan.run(**fk.fresh(planes)), c)
    except eagle.InputError as exc:  # keys outside the sink on these planes: refused by name, as on the case's
        if c.name in str(exc) and fk.known_refusal(exc, (fk.KEYS_OUTSIDE,)):
            return {**out, "status": "skipped", "why": "refused on one device"}
        return {**out, "status": "fail", "why": f"InputError: {exc}"}
    except Exception as exc:
        return fk.raised(c, exc)


def mismatch(name: str, got, want, split: str) -> str | None:
    """Why output `name` of the split run (`split` says how it was split) differs from the one-device run's, if
    it does: shape, dtype or any bit."""
    g, w = np.asarray(got), np.asarray(want)
    if g.shape == w.shape and g.dtype == w.dtype and g.tobytes() == w.tobytes():
        return None
    return (f"{name}: {split} give {g.dtype}{g.shape} {g.reshape(-1)[:3].tolist()}..., one device {w.dtype}{w.shape} "
            f"{w.reshape(-1)[:3].tolist()}...")


def check_sharded(c, workdir: str, target: str = "host") -> dict:
    """Run case `c` on one device and over SHARDS JAX devices; compare the promised outputs' bits."""
    ref = reference(c, os.path.join(workdir, f"{c.name}.py"))
    if isinstance(ref, dict):
        return ref
    kernel, _, planes, keep, want = ref
    out = fk.record(c)
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            got = fk.named(_sharded(kernel, fk.fresh(planes)), c)
    except Exception as exc:
        return fk.raised(c, exc)
    gathered = [str(w.message) for w in said if "runs unsharded" in str(w.message)]
    if gathered and c.name not in gathered[0]:
        return {**out, "status": "fail", "why": f"a warning not naming the kernel: {gathered[0]}"}
    for name in sorted(keep | loose(c)):
        why = (mismatch if name in keep else near)(name, got[name], want[name], f"{SHARDS} shards")
        if why:
            return {**out, "status": "fail", "why": why}
    how = "gathered (refused sharded: " + gathered[0][:200] + ")" if gathered else f"on {SHARDS} shards"
    return {**out, "status": "ok", "why": f"{sorted(keep)} the same bits {how}, {sorted(loose(c))} to rounding"}


if __name__ == "__main__":
    sys.exit(fk.run_cases(check_sharded, __doc__))
