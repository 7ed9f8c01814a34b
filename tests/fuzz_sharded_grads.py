"""The sharded gradient fuzzer: the front-end fuzzer's kernels (tests/fuzz_kernels.py) differentiated through a
call split over 4 JAX CPU devices (`jax.grad` under `jax.jit`, the lane planes carrying a `NamedSharding`; even
cases through `eagle.jax.wrap(kernel, partition=True)`, odd ones through `eagle.jax.wrap(kernel, axis_name="d")`
inside `jax.shard_map`), every gradient compared bit for bit with the one-device `plan.reverse` (tests/test_fuzz.py
runs it).

The loss is `sum(ct * output)` over the float outputs, with a random cotangent `ct` per output, so JAX hands the
kernel's backward exactly `ct`, as `plan.reverse(ct)` is given it. The adjoint sums in the ordered policy and
recomputes the forward's sums ordered, so its gradients promise the same bits on every split (docs/reverse.md,
docs/distributed.md). Planes as tests/fuzz_sharded.py's (20,000 lanes, 3,000 rows of a Grid), their special values
replaced by ordinary draws (a NaN's payload is not a promise). A kernel whose gradient a sharded call refuses must
be refused by name, and one plan.reverse refuses is skipped; anything else is a failure.

    python tests/fuzz_sharded_grads.py --seed 7 --start 0 --count 50 --dir /tmp/fz    # one JSON line per case
"""

from __future__ import annotations

import os
import sys
import warnings

if "device_count" not in os.environ.get("XLA_FLAGS", ""):  # 4 CPU devices, before JAX starts (other flags kept)
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4".strip()

import fuzz_kernels as fk  # noqa: E402
import numpy as np  # noqa: E402
from fuzz_reverse import _tame  # noqa: E402
from fuzz_sharded import SHARDS, _planes, lane_specs, mismatch  # noqa: E402

__all__ = ["check_sharded_grads"]

def _ct_of(name: str, cts: dict):
    """The cotangent of a JAX result: an output's own, or component i of a Vector cell's (`<cell>_<i>`)."""
    if name in cts:
        return cts[name]
    base, _, i = name.rpartition("_")
    return cts[base][int(i)] if base in cts and i.isdigit() else None


def _sharded_grads(kernel, plan, planes: dict, cts: dict, wrt: list[str], how: str) -> dict:
    """The gradients of `sum(ct * output)` through the call split over SHARDS devices: `how` "partition"
    (partition=True under jit) or "shard_map" (axis_name= inside jax.shard_map: per-lane outputs and row results
    sharded, cells replicated)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import eagle.jax

    jax.config.update("jax_enable_x64", True)
    mesh = jax.make_mesh((SHARDS,), ("d",), devices=jax.devices()[:SHARDS])
    spec = lane_specs()
    arrays = {k: jax.device_put(np.asarray(v), NamedSharding(mesh, spec.get(k, P()))) for k, v in planes.items()
              if isinstance(v, np.ndarray) or k in wrt}
    fixed = {k: v for k, v in planes.items() if k not in arrays}
    names = sorted(arrays)
    if how == "partition":
        f = eagle.jax.wrap(kernel, partition=True)
    else:
        f = _shard_mapped(kernel, plan, mesh, arrays, names, fixed, spec, next(iter(cts)))
        fixed = {}

    def loss(diff, rest):
        res = f(**diff, **rest, **fixed)
        res = res if isinstance(res, dict) else {next(iter(cts)): res}
        total = jnp.float64(0.0)
        for k, r in res.items():
            c = _ct_of(k, cts)
            if c is not None and jnp.issubdtype(r.dtype, jnp.floating):
                total = total + (r * jnp.asarray(c, dtype=r.dtype).reshape(r.shape)).sum()
        return total

    diff = {k: arrays[k] for k in names if k in wrt}
    rest = {k: arrays[k] for k in names if k not in wrt}
    return {k: np.asarray(v) for k, v in jax.jit(jax.grad(loss))(diff, rest).items()}


def _shard_mapped(kernel, plan, mesh, arrays: dict, names: list[str], fixed: dict, spec: dict, result: str):
    """The kernel inside jax.shard_map over `mesh` as a function of the planes by name: each shard's grid is its
    rows; results that are each shard's own lanes (per-lane outputs, row results) come back sharded along their
    leading lane axis, the others (cells, sinks) replicated. `result`: the name of a lone result."""
    import jax
    from fuzz_ranks import _own_rows
    from jax.sharding import PartitionSpec as P

    import eagle.jax

    local = {k: v // SHARDS if k == "row" else v for k, v in fixed.items()}
    dims = 2 if "row" in fixed else 1
    own = _own_rows(plan, dims)

    def shard_shape(k: str, a):  # (a lane plane's leading lane axis: after a Vector's components)
        shape = list(a.shape)
        if k in spec:
            shape[a.ndim - dims] //= SHARDS
        return jax.ShapeDtypeStruct(tuple(shape), a.dtype)

    one = eagle.jax.wrap(kernel)
    shapes = jax.eval_shape(lambda a: one(**a, **local), {k: shard_shape(k, a) for k, a in arrays.items()})
    single = not isinstance(shapes, dict)
    shapes = {result: shapes} if single else shapes

    def out_spec(name: str, a) -> P:
        base = name if name in own else name.rpartition("_")[0]
        return P(*([None] * (a.ndim - own[base])), "d") if base in own else P()

    outs = {k: out_spec(k, a) for k, a in shapes.items()}
    g = eagle.jax.wrap(kernel, axis_name="d")
    mapped = jax.shard_map(lambda *a: g(**dict(zip(names, a, strict=True)), **local), mesh=mesh,
                           in_specs=tuple(spec.get(k, P()) for k in names),
                           out_specs=next(iter(outs.values())) if single else outs)
    return lambda **a: mapped(*[a[k] for k in names])


def reverse_reference(c, path: str, salt: int):
    """Case `c` differentiated on one device: (kernel, plan, planes, cotangents, plan.reverse's gradients, wrt), or the
    record to report instead (skipped, or a failure). Planes as tests/fuzz_sharded.py's, tamed, and a start for each
    output written by key (random floats, integer zeros); shared with tests/fuzz_ranks_grads.py."""
    import eagle
    import hawk
    from eagle.bridge import keyed_outputs

    out = fk.record(c)
    if "p" not in c.planes:  # (the Vector[1024] cases)
        return {**out, "status": "skipped", "why": "wide vector case"}
    rng = np.random.default_rng([c.seed, c.index, salt])
    planes = {k: _tame(v, rng) for k, v in _planes(c, rng).items()}
    try:
        kernel = fk.load_kernel(c, path)
        plan = eagle.deploy(kernel)
        outs = fk.named(plan.run(**fk.fresh(planes)), c)
        cts = {k: rng.normal(size=v.shape) for k, v in outs.items() if v.dtype.kind == "f"}
        if not cts:
            return {**out, "status": "skipped", "why": "no float output"}
        for k in sorted(keyed_outputs(plan)):  # written by key: a start that sharded calls pass whole (its
            # positions), a float one differentiated like a sink's prior content
            v = outs[k]
            planes[k] = rng.normal(size=v.shape) if v.dtype.kind == "f" else np.zeros(v.shape, v.dtype)
        want = {k: np.asarray(v) for k, v in plan.reverse(cts, **fk.fresh(planes)).items()}
    except (eagle.InputError, hawk.KernelError) as exc:  # (keys outside a sink on these planes, as in the forward)
        if c.name in str(exc) and fk.known_refusal(exc, (fk.KEYS_OUTSIDE,)):
            return {**out, "status": "skipped", "why": f"refused on one device: {str(exc)[:150]}"}
        return fk.raised(c, exc)
    except Exception as exc:
        return fk.raised(c, exc)
    wrt = sorted(k for k in want if k in planes)
    if not wrt:
        return {**out, "status": "skipped", "why": "no gradient"}
    return kernel, plan, planes, cts, want, wrt


def check_sharded_grads(c, workdir: str, target: str = "host") -> dict:
    """Differentiate case `c` on one device (plan.reverse) and through SHARDS JAX devices; compare the bits."""
    import eagle

    ref = reverse_reference(c, os.path.join(workdir, f"{c.name}.py"), 23)
    if isinstance(ref, dict):
        return ref
    kernel, plan, planes, cts, want, wrt = ref
    out = fk.record(c)
    how = "partition" if c.index % 2 == 0 else "shard_map"
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            got = _sharded_grads(kernel, plan, fk.fresh(planes), cts, wrt, how)
    except Exception as exc:
        return fk.raised(c, exc, (eagle.InputError,))
    gathered = [str(w.message) for w in said if "runs unsharded" in str(w.message)]
    for name in wrt:
        g = got[name].reshape(np.shape(want[name])).astype(want[name].dtype)
        why = mismatch(f"d/d{name}", g, want[name], f"{SHARDS} shards")
        if why:
            return {**out, "status": "fail", "why": f"{how}: {why}"}
    where = "gathered" if gathered else f"on {SHARDS} shards ({how})"
    return {**out, "status": "ok", "why": f"d/d{wrt} the same bits {where}"}


if __name__ == "__main__":
    sys.exit(fk.run_cases(check_sharded_grads, __doc__))
