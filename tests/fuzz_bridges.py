"""The bridge fuzzer: the front-end fuzzer's kernels (tests/fuzz_kernels.py) called through `eagle.torch.wrap` and
`eagle.jax.wrap`, each result against `eagle.deploy(kernel).run(...)` bit for bit, and each gradient (torch's
autograd, `jax.vjp`) against `plan.reverse` bit for bit (tests/test_fuzz.py runs it).

The generated signatures vary (Grid axes with a run-time extent, Index planes of two widths, a Vector[3] plane,
a Table, a Param, Mutable outputs and sinks passed with contents, vector results, several outputs), and the
bridges' prepared call paths patch framework memory into stage buffers: a wrong offset or a dropped output shows
as different bits. Kernels whose outputs are passed in (a Mutable per-lane output, a sink) take torch's in-place
op, which has no autograd (no gradients asked of torch there), and JAX's aliased operands, whose gradients (the
initial contents' too: a Mutable output's is read by the body) must be plan.reverse's. Every other case leaves
its Mutable output out instead, which must then start at zero in both bridges as in Plan.run (their result
buffers hold anything at first). A refusal must name the kernel (`eagle.InputError`); any other exception fails.

    python tests/fuzz_bridges.py --seed 7 --start 0 --count 50 --dir /tmp/fz    # one JSON line per case
"""

from __future__ import annotations

import os
import sys

import fuzz_kernels as fk
import numpy as np

__all__ = ["check_bridges"]


def _diff(name: str, got: dict, want: dict) -> str | None:
    if sorted(got) != sorted(want):
        return f"{name}: results {sorted(got)}, Plan.run's {sorted(want)}"
    for k in want:
        a, b = np.asarray(want[k]), np.asarray(got[k])
        if a.shape != b.shape or a.dtype != b.dtype or a.tobytes() != b.tobytes():
            return f"{name}: '{k}' differs from Plan.run's ({b.dtype}{b.shape} vs {a.dtype}{a.shape})"
    return None


def _torch(kernel, planes: dict, c, want: dict, grads: dict | None, ct: dict):
    import torch

    import eagle.torch

    f = eagle.torch.wrap(kernel)
    wrt = set(grads or ())
    args = {}
    for k, v in planes.items():
        if isinstance(v, np.ndarray):
            t = torch.from_numpy(v.copy())
            args[k] = t.requires_grad_(True) if k in wrt else t
        elif k in wrt:
            args[k] = torch.tensor(v, dtype=torch.float64, requires_grad=True)
        else:
            args[k] = v
    res = f(**args)
    outs = res if isinstance(res, dict) else {next(iter(c.want)): res}
    why = _diff("torch", {k: v.detach().numpy() for k, v in outs.items()}, want)
    if why or grads is None:
        return why
    names = sorted(outs)
    gs = torch.autograd.grad([outs[k] for k in names], [args[k] for k in sorted(wrt)],
                             [torch.from_numpy(np.ascontiguousarray(ct[k])).reshape(outs[k].shape) for k in names],
                             allow_unused=True)
    for k, g in zip(sorted(wrt), gs, strict=True):
        want_g = np.asarray(grads[k]).reshape(np.shape(planes[k]))
        got_g = np.zeros_like(want_g) if g is None else g.numpy().reshape(want_g.shape)
        if got_g.tobytes() != want_g.tobytes():
            return f"torch: the gradient of '{k}' differs from plan.reverse's"
    return None


def _jax(kernel, planes: dict, c, want: dict, grads: dict | None, ct: dict):
    import jax
    import jax.numpy as jnp

    import eagle.jax

    jax.config.update("jax_enable_x64", True)
    f = eagle.jax.wrap(kernel)
    res = f(**{k: (jnp.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in planes.items()})
    why = _diff("jax", fk.named(res, c), want)
    if why or grads is None:
        return why
    wrt = sorted(grads)
    fixed = {k: v for k, v in planes.items() if k not in wrt}

    def fn(*xs):
        return f(**fixed, **{k: (jnp.asarray(x) if np.ndim(planes[k]) else x) for k, x in zip(wrt, xs, strict=True)})

    out, vjp = jax.vjp(fn, *[jnp.asarray(planes[k], dtype=jnp.float64) for k in wrt])
    cts = {k: jnp.asarray(ct[k]).reshape(np.shape(v)) for k, v in fk.named(out, c).items()}
    gs = vjp(cts if isinstance(out, dict) else next(iter(cts.values())))
    for k, g in zip(wrt, gs, strict=True):
        want_g = np.asarray(grads[k]).reshape(np.shape(planes[k]))
        if np.asarray(g).reshape(want_g.shape).tobytes() != want_g.tobytes():
            return f"jax: the gradient of '{k}' differs from plan.reverse's"
    return None


def check_bridges(c, workdir: str, target: str = "host") -> dict:
    """Run case `c` through both bridges; compare results and gradients with Plan.run and plan.reverse."""
    import eagle
    import hawk

    out = fk.record(c)
    rng = np.random.default_rng([c.seed, c.index, 13])
    planes = fk.fresh(c.planes)
    if "out" in planes and c.index % 2:  # every other case leaves its Mutable output out: zeros, as in Plan.run
        del planes["out"]
    try:
        kernel = fk.load_kernel(c, os.path.join(workdir, f"{c.name}.py"))
        plan = eagle.deploy(kernel)
        want = fk.named(plan.run(**fk.fresh(planes)), c)
        ct = {k: rng.normal(size=v.shape) for k, v in want.items()}
        passed_out = any(k in planes for k in ("out", "bins"))
        grads = None  # (an integer output takes no cotangent, and here it is the kernel's only result)
        if all(v.dtype.kind == "f" for v in want.values()):
            try:
                grads = {k: np.asarray(v) for k, v in
                         plan.reverse(ct if len(ct) > 1 else next(iter(ct.values())), **planes).items()}
            except (eagle.InputError, hawk.KernelError):
                grads = None  # refused by the reverse itself (tests/fuzz_reverse.py judges those)
        for bridge in (_torch, _jax):  # (torch's in-place op, for passed outputs, has no autograd)
            why = bridge(kernel, planes, c, want, None if passed_out and bridge is _torch else grads, ct)
            if why:
                return {**out, "status": "fail", "why": why}
    except Exception as exc:  # a refusal by name, or a bug
        return fk.raised(c, exc, (eagle.InputError,))
    return {**out, "status": "ok", "why": "results" + (" and gradients" if grads else "") + " bit for bit"}


if __name__ == "__main__":
    sys.exit(fk.run_cases(check_bridges, __doc__))
