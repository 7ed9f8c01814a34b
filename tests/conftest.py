"""Shared helpers for the test suite.

Behaviour-test helpers are prefixed ``bt_`` (import them with ``from conftest import bt_run``).
"""

from __future__ import annotations

import math

import numpy as np


def bt_run(kernel, **planes):
    """Deploy ``kernel`` for the host and run it: one output comes back as an ndarray, several as a dict."""
    import eagle

    out = eagle.deploy(kernel).run(**planes)
    if isinstance(out, dict):
        return {name: np.asarray(value) for name, value in out.items()}
    return np.asarray(out)


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
