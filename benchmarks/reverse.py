"""The reverse's benchmark (#13): gradients of an elementwise kernel, a 5-point stencil, a 3 x 3 convolution (its
reads in two `for` loops: the gather form through unrolled loops) and a histogram loss, as a ratio to the forward
run and to jax.grad of the same jax.numpy code on the CPU.

    .venv/bin/python -m benchmarks.reverse [--sizes 1e6,1e7] [--cases elementwise,stencil,conv,histogram]
                                           [--rounds 3] [--repeats 5] [--json out.json]

Each measurement is its own process (`--worker`), as in the suite's isolated mode (benchmarks/isolated.py): it
imports one source (hawk or jax), builds the seeded inputs, warms up, checks the result against NumPy (the
gradient written out by hand, relative 1e-9), and times samples with benchmarks.timing (start-up and compiles are
not timed). Workers run one at a time, in rounds whose order rotates. Implementations:

- hawk `forward` (plan.run), `forward_bound` (plan.bind(...).launch()), `reverse` (plan.reverse: binds and
  prepares the adjoint's launch on every call) and `reverse_bound` (plan.bind(...).reverse: prepared once);
  and `jax_grad` (jit of jax.grad through `eagle.jax.wrap(kernel)`: what a JAX program pays for the gradient);
- jax `forward` (jit of the function) and `grad` (jit of jax.grad of sum(cotangent x output)).

Ratios reported per case: reverse_bound / forward_bound (target <= 3), hawk reverse_bound / jax grad (target
<= 1) and the bridge's gradient / jax grad, from the medians over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CASES = ("elementwise", "stencil", "conv", "histogram")
COLS = 1000  # the stencil's grid columns
BINS = 64
IMPLS = (("hawk", "forward"), ("hawk", "forward_bound"), ("hawk", "reverse"), ("hawk", "reverse_bound"),
         ("hawk", "jax_grad"), ("jax", "forward"), ("jax", "grad"))


# ---- inputs and the NumPy reference ------------------------------------------------------------------------
def inputs(case: str, n: int) -> tuple[dict, object]:
    """(planes, cotangent), seeded."""
    rng = np.random.default_rng(13)
    if case == "elementwise":
        return {"x": rng.normal(size=n), "w": rng.normal(size=n), "a": 0.7}, rng.normal(size=n)
    if case == "stencil":
        rows = max(3, n // COLS)
        return {"u": rng.normal(size=(rows, COLS)), "k": 0.3}, rng.normal(size=(rows, COLS))
    if case == "conv":
        rows = max(3, n // COLS)
        return {"u": rng.normal(size=(rows, COLS)), "w": rng.normal(size=(3, 3)) / 3.0}, rng.normal(size=(rows, COLS))
    return {"x": rng.uniform(size=n), "w": rng.normal(size=n)}, rng.normal(size=BINS)


def _lap(u: np.ndarray) -> np.ndarray:
    p = np.pad(u, 1, mode="edge")
    return p[2:, 1:-1] + p[:-2, 1:-1] + p[1:-1, 2:] + p[1:-1, :-2] - 4.0 * u


def reference(case: str, planes: dict, ct) -> tuple[np.ndarray, dict]:
    """(forward output, gradients) in NumPy, the derivatives written out by hand."""
    if case == "elementwise":
        x, w, a = planes["x"], planes["w"], planes["a"]
        e, t = np.exp(-x * x), np.tanh(w * x)
        y = np.sin(x) * w + a * e + t
        return y, {"x": ct * (np.cos(x) * w - 2.0 * a * x * e + w * (1 - t * t)),
                   "w": ct * (np.sin(x) + x * (1 - t * t)), "a": np.array([np.sum(ct * e)])}
    if case == "stencil":
        u, k = planes["u"], planes["k"]
        lap = _lap(u)
        s = ct * np.cos(lap * k)
        g = s * k
        gu = -4.0 * g
        gu[1:] += g[:-1]  # u.at(r + 1), clamped at the last row
        gu[-1] += g[-1]
        gu[:-1] += g[1:]  # u.at(r - 1)
        gu[0] += g[0]
        gu[:, 1:] += g[:, :-1]  # u.at(c + 1)
        gu[:, -1] += g[:, -1]
        gu[:, :-1] += g[:, 1:]  # u.at(c - 1)
        gu[:, 0] += g[:, 0]
        return np.sin(lap * k), {"u": gu, "k": np.array([np.sum(s * lap)])}
    if case == "conv":
        u, w = planes["u"], planes["w"]
        rows, cols = u.shape
        p = np.pad(u, 1, mode="edge")  # (reads past an edge are clamped: the edge's value)
        acc = sum(w[i, j] * p[i:i + rows, j:j + cols] for i in range(3) for j in range(3))
        g = 2.0 * ct * acc
        gp = np.zeros_like(p)
        for i in range(3):
            for j in range(3):
                gp[i:i + rows, j:j + cols] += w[i, j] * g
        gp[1, :] += gp[0, :]  # the pad's cotangent back onto the edges it copied
        gp[-2, :] += gp[-1, :]
        gp[:, 1] += gp[:, 0]
        gp[:, -2] += gp[:, -1]
        gw = np.array([[np.sum(g * p[i:i + rows, j:j + cols]) for j in range(3)] for i in range(3)])
        return acc * acc, {"u": gp[1:-1, 1:-1], "w": gw}
    x, w = planes["x"], planes["w"]
    bins = np.clip(np.floor(x * BINS).astype(np.int64), 0, BINS - 1)
    v = w * w * np.exp(x)
    return np.bincount(bins, v, BINS), {"x": ct[bins] * v, "w": ct[bins] * 2.0 * w * np.exp(x)}


# ---- the implementations -----------------------------------------------------------------------------------
def hawk_impls(case: str, planes: dict, ct) -> dict:
    import eagle
    import hawk
    import hawk.math as m
    from hawk import Grid, Mutable, Param, Scalar, Table

    if case == "elementwise":
        @hawk.kernel
        def rb_elementwise(x: Scalar, w: Scalar, a: Param) -> Scalar:
            return m.sin(x) * w + a * m.exp(-x * x) + m.tanh(w * x)
        kernel = rb_elementwise
    elif case == "stencil":
        @hawk.kernel
        def rb_stencil(g: Grid["r", "c":COLS], u: Scalar, k: Param) -> Scalar:  # noqa: UP037
            lap = u.at(r=g.r + 1) + u.at(r=g.r - 1) + u.at(c=g.c + 1) + u.at(c=g.c - 1) - 4.0 * u
            return m.sin(lap * k)
        kernel = rb_stencil
    elif case == "conv":
        @hawk.kernel
        def rb_conv(g: Grid["r", "c":COLS], u: Scalar, w: Table["i":3, "j":3]) -> Scalar:  # noqa: UP037
            acc = 0.0
            for i in range(3):
                for j in range(3):
                    acc = acc + w.at(i=i, j=j) * u.at(r=g.r + i - 1, c=g.c + j - 1)
            return acc * acc
        kernel = rb_conv
    else:
        @hawk.kernel
        def rb_histogram(x: Scalar, w: Scalar, h: Mutable["bin":BINS]):  # noqa: UP037
            hawk.scatter(h)[m.index(x * float(BINS), BINS)] += w * w * m.exp(x)
        kernel = rb_histogram
    plan = eagle.deploy(kernel)
    bound = plan.bind(**planes)

    def bridge_grad() -> dict:
        return _bridge_grad(kernel, planes, ct)

    def grads(g: dict) -> dict:
        return {k: np.asarray(v) for k, v in g.items()}

    return {"forward": lambda: np.asarray(plan.run(**planes)),
            "forward_bound": lambda: np.asarray(bound.launch()),
            "reverse": lambda: grads(plan.reverse(ct, **planes)),
            "reverse_bound": lambda: grads(bound.reverse(ct)),
            "jax_grad": lambda: bridge_grad()}


_BRIDGE: dict = {}


def _bridge_grad(kernel, planes: dict, ct):
    """jit(jax.grad) of sum(ct * eagle.jax.wrap(kernel)(**planes)) over every plane (built on the first call)."""
    if not _BRIDGE:
        import jax
        import jax.numpy as jnp

        import eagle.jax

        jax.config.update("jax_enable_x64", True)
        f = eagle.jax.wrap(kernel)
        names = sorted(planes)
        args = [jnp.asarray(planes[k]) for k in names]
        ctj = jnp.asarray(ct)
        loss = lambda *v: jnp.sum(ctj * f(**dict(zip(names, v, strict=True))))  # noqa: E731
        _BRIDGE.update(grad=jax.jit(jax.grad(loss, argnums=tuple(range(len(names))))), names=names, args=args)
    out = _BRIDGE["grad"](*_BRIDGE["args"])
    return {k: np.atleast_1d(np.asarray(v)) for k, v in zip(_BRIDGE["names"], out, strict=True)}


def jax_impls(case: str, planes: dict, ct) -> dict:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    names = sorted(planes)
    args = [jnp.asarray(planes[k]) for k in names]
    ctj = jnp.asarray(ct)

    def f(*vals):
        p = dict(zip(names, vals, strict=True))
        if case == "elementwise":
            x, w = p["x"], p["w"]
            return jnp.sin(x) * w + p["a"] * jnp.exp(-x * x) + jnp.tanh(w * x)
        if case == "stencil":
            u = p["u"]
            q = jnp.pad(u, 1, mode="edge")
            lap = q[2:, 1:-1] + q[:-2, 1:-1] + q[1:-1, 2:] + q[1:-1, :-2] - 4.0 * u
            return jnp.sin(lap * p["k"])
        if case == "conv":
            u, w = p["u"], p["w"]
            q = jnp.pad(u, 1, mode="edge")
            acc = sum(w[i, j] * q[i:i + u.shape[0], j:j + u.shape[1]] for i in range(3) for j in range(3))
            return acc * acc
        x, w = p["x"], p["w"]
        bins = jnp.clip(jnp.floor(x * BINS).astype(jnp.int32), 0, BINS - 1)
        return jnp.zeros(BINS, x.dtype).at[bins].add(w * w * jnp.exp(x))

    fwd = jax.jit(f)
    grad = jax.jit(jax.grad(lambda *v: jnp.sum(ctj * f(*v)), argnums=tuple(range(len(names)))))

    def run_grad() -> dict:
        out = grad(*args)
        jax.block_until_ready(out)
        return {k: np.atleast_1d(np.asarray(v)) for k, v in zip(names, out, strict=True)}

    return {"forward": lambda: np.asarray(fwd(*args).block_until_ready()), "grad": run_grad}


def check(case: str, impl: str, got, want_y, want_g: dict) -> None:
    if isinstance(got, dict):
        for k, g in want_g.items():
            np.testing.assert_allclose(np.asarray(got[k]).reshape(g.shape), g, rtol=1e-9, atol=1e-9,
                                       err_msg=f"{case} {impl}: gradient of {k}")
    else:
        np.testing.assert_allclose(np.asarray(got).reshape(want_y.shape), want_y, rtol=1e-9, atol=1e-9,
                                   err_msg=f"{case} {impl}: forward")


# ---- one measurement in this process -----------------------------------------------------------------------
def worker(a: argparse.Namespace) -> dict:
    from benchmarks.timing import measure

    t0 = time.perf_counter()
    n = int(float(a.size))
    planes, ct = inputs(a.case, n)
    want_y, want_g = reference(a.case, planes, ct)
    impls = (hawk_impls if a.source == "hawk" else jax_impls)(a.case, planes, ct)
    call = impls[a.impl]
    setup = time.perf_counter() - t0
    t = measure(call, a.repeats, a.min_time, lambda v: check(a.case, a.impl, v, want_y, want_g))
    return {"pid": os.getpid(), "case": a.case, "n": n, "source": a.source, "impl": a.impl, "ok": True,
            "median_s": t.median_s, "min_s": t.min_s, "samples_s": t.samples_s, "first_call_s": t.first_call_s,
            "setup_s": setup}


def call_worker(case: str, n: int, source: str, impl: str, a: argparse.Namespace) -> dict:
    from benchmarks.worker import MARK

    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "benchmarks.reverse", "--worker", "--case", case, "--size", str(n), "--source",
           source, "--impl", impl, "--repeats", str(a.repeats), "--min-time", str(a.min_time)]
    try:
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=a.worker_timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"ran past {a.worker_timeout} s"}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith(MARK)]
    if r.returncode != 0 or not lines:
        tail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-2:]
        return {"ok": False, "error": f"status {r.returncode}: {' | '.join(tail)[:300]}"}
    return json.loads(lines[-1][len(MARK):])


def run_case(case: str, n: int, a: argparse.Namespace) -> dict:
    times: dict[str, list[float]] = {f"{s}.{i}": [] for s, i in IMPLS}
    errors: dict[str, str] = {}
    for r in range(a.rounds):
        order = IMPLS[r % len(IMPLS):] + IMPLS[:r % len(IMPLS)]
        for source, impl in order:
            key = f"{source}.{impl}"
            if key in errors:
                continue
            res = call_worker(case, n, source, impl, a)
            if res["ok"]:
                times[key].append(res["median_s"])
            else:
                errors[key] = res["error"]
            print(f"  {case} {n:.0e} {key}: {res.get('median_s', float('nan')) * 1e3:.2f} ms"
                  f"{'' if res['ok'] else '  FAILED ' + res['error']}", file=sys.stderr, flush=True)
    med = {k: statistics.median(v) for k, v in times.items() if v}

    def ratio(x: str, y: str) -> float | None:
        return med[x] / med[y] if x in med and y in med else None

    return {"case": case, "n": n, "median_s": med, "errors": errors,
            "reverse_over_forward": ratio("hawk.reverse_bound", "hawk.forward_bound"),
            "reverse_call_over_forward_call": ratio("hawk.reverse", "hawk.forward"),
            "reverse_over_jax_grad": ratio("hawk.reverse_bound", "jax.grad"),
            "bridge_grad_over_jax_grad": ratio("hawk.jax_grad", "jax.grad"),
            "jax_grad_over_jax_forward": ratio("jax.grad", "jax.forward")}


def table(rows: list[dict]) -> str:
    def ms(r, k):
        v = r["median_s"].get(k)
        return "failed" if v is None else f"{v * 1e3:.1f}"

    def x(v):
        return "-" if v is None else f"{v:.2f}"

    out = ["| case | lanes | fwd bound ms | rev bound ms | rev / fwd | plan.reverse / plan.run | jax fwd ms | "
           "jax.grad ms | rev / jax.grad | eagle.jax grad ms | eagle.jax grad / jax.grad |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['case']} | {r['n']:.0e} | {ms(r, 'hawk.forward_bound')} | {ms(r, 'hawk.reverse_bound')} | "
                   f"{x(r['reverse_over_forward'])} | {x(r['reverse_call_over_forward_call'])} | "
                   f"{ms(r, 'jax.forward')} | {ms(r, 'jax.grad')} | {x(r['reverse_over_jax_grad'])} | "
                   f"{ms(r, 'hawk.jax_grad')} | {x(r.get('bridge_grad_over_jax_grad'))} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.reverse", description=__doc__.split("\n")[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--case", choices=CASES)
    p.add_argument("--size", default="1e6")
    p.add_argument("--source", choices=("hawk", "jax"))
    p.add_argument("--impl")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--sizes", default="1e6,1e7")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--min-time", type=float, default=0.2)
    p.add_argument("--worker-timeout", type=float, default=600.0)
    p.add_argument("--json", help="write the results here")
    a = p.parse_args(argv)
    if a.worker:
        from benchmarks.worker import emit

        emit(worker(a))
        return 0
    rows = [run_case(c, int(float(n)), a) for n in a.sizes.split(",") for c in a.cases.split(",")]
    print(table(rows))
    for r in rows:
        for k, e in r["errors"].items():
            print(f"{r['case']} {r['n']:.0e} {k}: {e}")
    if a.json:
        Path(a.json).write_text(json.dumps({"cpus": os.cpu_count(), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
