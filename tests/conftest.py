"""Shared helpers for the test suite.

Behaviour-test helpers are prefixed ``bt_`` (import them with ``from conftest import bt_run``).
"""

from __future__ import annotations

import functools
import math
import os

import numpy as np
import pytest

# The targets a test may run on through the `target` fixture. A GPU target whose runtime or device is missing
# skips with the reason (pytest -ra prints it); spirv runs on Mesa's lavapipe where there is no GPU.
BT_TARGETS = ("host", "spirv")


def bt_run(kernel, **planes):
    """Deploy ``kernel`` for the host and run it: one output comes back as an ndarray, several as a dict."""
    return bt_run_on("host", kernel, **planes)


def bt_run_on(target, kernel, **planes):
    """Deploy ``kernel`` for ``target`` and run it: one output comes back as an ndarray, several as a dict."""
    import eagle

    out = eagle.deploy(kernel, target=target).run(**planes)
    if isinstance(out, dict):
        return {name: np.asarray(value) for name, value in out.items()}
    return np.asarray(out)


@functools.cache
def bt_target_missing(name: str) -> str | None:
    """Why ``name`` cannot run here (its runtime or device is missing), or None when it can."""
    if name == "host":
        return None
    from eagle import RuntimeMissing
    from eagle.targets import gpu_target

    try:
        gpu_target(name).runtime()
    except (RuntimeMissing, ImportError) as exc:
        return str(exc)
    return None


def bt_spirv_missing(why: str) -> None:
    """Skip a test that needs Vulkan (lavapipe) or spirv-val, saying why; under CI (CI=true) fail instead: every CI
    machine has lavapipe (scripts/setup.sh installs it), so its absence is a broken setup, never a skip."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run the spirv target on lavapipe, but {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture(params=BT_TARGETS)
def target(request):
    """Each target a test should pass on: "host", then "spirv" (skipped, saying why, without a Vulkan device; a
    failure under CI)."""
    why = bt_target_missing(request.param)
    if why:
        bt_spirv_missing(f"target '{request.param}' cannot run here: {why}")
    return request.param


def bt_same_bits(got, want, what=""):
    """The same bits in two results (arrays, or dicts of arrays by name): -0.0 and +0.0 differ; a NaN matches a NaN
    in the same place (its payload may differ between targets)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), f"{what}: outputs {sorted(got)} != {sorted(want)}"
        for name in want:
            bt_same_bits(got[name], want[name], f"{what} {name}".strip())
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape, f"{what}: {g.dtype}{g.shape} != {w.dtype}{w.shape}"
    if g.dtype.kind == "f":
        both_nan = np.isnan(g) & np.isnan(w)
        g, w = np.where(both_nan, 0, g), np.where(both_nan, 0, w)
    if g.tobytes() != w.tobytes():
        bad = np.flatnonzero(g.ravel().view(f"u{g.itemsize}") != w.ravel().view(f"u{w.itemsize}"))
        raise AssertionError(f"{what}: bits differ at {bad.size} of {g.size} place(s), first {bad[:4].tolist()}: "
                             f"got {g.ravel()[bad[:4]].tolist()} want {w.ravel()[bad[:4]].tolist()}")


def bt_run_same_bits(target, kernel, **planes):
    """Run ``kernel`` on ``target`` (as bt_run_on); off the host, run it on the host too, on copies of the planes (so
    that passed sinks start equal), and require the same bits. For results the contract fixes bit for bit across
    targets: policy="ordered" sums, max/min, exact arithmetic."""
    host = None
    if target != "host":
        host = bt_run_on("host", kernel, **{k: (v.copy() if isinstance(v, np.ndarray) else v)
                                            for k, v in planes.items()})
    got = bt_run_on(target, kernel, **planes)
    if host is not None:
        bt_same_bits(got, host, f"kernel '{kernel.name}' on {target} vs host")
    return got


def bt_sum_ulps(got, terms, eps=None):
    """The error of ``got`` against math.fsum(terms), in units of eps * sum(|term|)."""
    t = np.asarray(terms)
    if eps is None:
        eps = float(np.finfo(t.dtype).eps)
    t = t.astype(np.float64).ravel()
    exact = math.fsum(t.tolist())
    scale = math.fsum(np.abs(t).tolist())
    err = abs(float(got) - exact)
    if scale == 0.0:
        return 0.0 if err == 0.0 else math.inf
    return err / (eps * scale)


def bt_sum_k(n, dtype):
    """The tolerance used for a plain (uncompensated) sum of ``n`` terms, in eps * sum(|term|).

    f64: 1e-12 * sum(|term|); f32: a few eps plus 2 * sqrt(n) eps (a sequential or tree sum stays inside).
    """
    if np.dtype(dtype) == np.float64:
        return 1e-12 / float(np.finfo(np.float64).eps)
    return 4.0 + 2.0 * math.sqrt(n)


def bt_close(got, want, rtol=1e-14):
    """assert_allclose with an absolute floor scaled to the data (rtol * max|want|)."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != expected {want.shape}"
    finite = want[np.isfinite(want)]
    scale = float(np.max(np.abs(finite))) if finite.size else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(scale, 1e-300))


def bt_ordered_sum(terms, dtype=None, mask=None):
    """The "ordered" sum of docs/ordered.md, written out independently of hawk, in the terms' dtype (or `dtype`):
    blocks of 1024 lanes, 8 strict chains per block from -0.0 (lane i feeds chain i % 8; a lane masked out adds
    nothing, as a -0.0 term would), a fixed tree over the chains, then the block partials paired level by level.
    No lanes give +0.0."""
    t = np.asarray(terms, dtype=dtype)
    dt = t.dtype.type
    if mask is not None:
        t = np.where(np.asarray(mask, dtype=bool), t, dt(-0.0))
    if t.size == 0:
        return dt(0.0)
    nblocks = -(-t.size // 1024)
    padded = np.full(nblocks * 1024, -0.0, dtype=t.dtype)
    padded[:t.size] = t
    rows = padded.reshape(nblocks, 128, 8)
    c = np.full((nblocks, 8), -0.0, dtype=t.dtype)
    for r in range(128):  # every block's chains at once, each strictly in lane order
        c = c + rows[:, r, :]
    parts = list(((c[:, 0] + c[:, 1]) + (c[:, 2] + c[:, 3])) + ((c[:, 4] + c[:, 5]) + (c[:, 6] + c[:, 7])))
    while len(parts) > 1:
        nxt = [dt(parts[i] + parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return dt(parts[0])
