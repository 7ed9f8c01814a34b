"""Per-call overhead of an eagle.jax call inside `jax.jit` on a one-lane kernel (issue #15's target: < 5 us over a
jitted function that does the same work in jax.numpy).

    .venv/bin/python -m benchmarks.jax_overhead [--calls 3000] [--rounds 15] [--clock cpu|wall] [--json FILE]

Times, per call of a jitted function on a 1-lane float64 array, each followed by `block_until_ready`: the same
work in jax.numpy (`x + 1`, `sum(x)`: the baseline, what any jitted call costs), the hawk kernel through
`eagle.jax.wrap` (an XLA FFI custom call whose C handler fires the prepared stages: no Python on the call path),
and, for scale, Warp's `jax_kernel` (an XLA FFI call too) where this Warp and this machine can run it (CPU
devices: it says why not when it cannot), and a bound launch on a NumPy array. Kernels: `x + 1` (one per-lane
output) and `sum(x)` (one cell, the kernel's finish included). Each round times every implementation once, in an
order rotated by one per round; the table gives the median over rounds, the overhead over the jax.numpy baseline
(the median of the per-round differences) and the ratio to it. Every result is checked first. A measurement, not a
test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from benchmarks.timing import CLOCKS, add_per_call_options, per_call_overheads, print_per_call

TARGET_US = 5.0


def _warp_map():
    """A jitted Warp `jax_kernel` computing x + 1 on one lane, or the reason it cannot run here."""
    try:
        import warp as wp

        wp.config.quiet = True
        wp.init()

        @wp.kernel
        def add_one(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
            i = wp.tid()
            y[i] = x[i] + wp.float64(1.0)

        import jax

        f = jax.jit(wp.jax_kernel(add_one))
        x = jax.numpy.ones(1, dtype=jax.numpy.float64)
        got = f(x)
        got = got[0] if isinstance(got, (list, tuple)) else got
        if np.asarray(got).tolist() != [2.0]:
            return f"Warp's jax_kernel gave {np.asarray(got)} for 1 + 1"
        return lambda: jax.block_until_ready(f(x))
    except Exception as exc:  # noqa: BLE001 (any failure is reported as why it was left out)
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


def implementations(kernel, with_warp: bool = True) -> tuple[dict, dict]:
    """(name -> a no-argument call, name -> why it was left out); each call is checked once before it is timed."""
    import jax
    import jax.numpy as jnp

    import eagle
    import eagle.jax
    from benchmarks import kernels as K

    jax.config.update("jax_enable_x64", True)
    x = jnp.ones(1, dtype=jnp.float64)
    xn = np.ones(1)
    is_map = kernel is K.tiny_map
    native = jax.jit(lambda v: v + 1.0) if is_map else jax.jit(lambda v: jnp.sum(v).reshape(1))
    f = eagle.jax.wrap(kernel)
    bridged = jax.jit(lambda v: f(x=v))
    bound = eagle.deploy(kernel).bind(x=xn)
    want = [2.0] if is_map else [1.0]
    for call in (native, bridged):
        assert np.asarray(call(x)).reshape(-1).tolist() == want, kernel.name
    assert np.asarray(bound.launch()).reshape(-1).tolist() == want
    impls = {"jax.numpy in jax.jit": lambda: native(x).block_until_ready(),
             "eagle.jax in jax.jit": lambda: bridged(x).block_until_ready(),
             "bound launch (NumPy)": bound.launch}
    skipped = {}
    if is_map and with_warp:
        w = _warp_map()
        if callable(w):
            impls["warp jax_kernel in jax.jit"] = w
        else:
            skipped["warp jax_kernel in jax.jit"] = w
    return impls, skipped


def measure(kernel, calls: int, rounds: int, clock: str = "cpu", with_warp: bool = True) -> tuple[dict, dict]:
    """(per_call_overheads' rows against the jax.numpy baseline, {name: why it was left out})."""
    impls, skipped = implementations(kernel, with_warp)
    return per_call_overheads(impls, "jax.numpy in jax.jit", calls, rounds, CLOCKS[clock]), skipped


def main(argv: list[str] | None = None) -> None:
    from benchmarks import kernels as K

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_per_call_options(p, 3000)
    p.add_argument("--no-warp", action="store_true", help="leave Warp's jax_kernel out")
    a = p.parse_args(argv)
    out = {"load_before": os.getloadavg()[0], "cores": os.cpu_count(), "clock": a.clock, "kernels": {}}
    for kernel in (K.tiny_map, K.tiny_sum):
        rows, skipped = measure(kernel, a.calls, a.rounds, a.clock, not a.no_warp)
        out["kernels"][kernel.name] = {"rows": rows, "skipped": skipped}
        print_per_call(f"{kernel.name}, one lane, float64: median over {a.rounds} rounds of {a.calls} calls "
                       f"({a.clock} time)", rows, "jax.numpy")
        for n, why in skipped.items():
            print(f"{n} left out: {why}")
    out["load_after"] = os.getloadavg()[0]
    over = max(k["rows"]["eagle.jax in jax.jit"]["over_us"] for k in out["kernels"].values())
    print(f"\neagle.jax inside jax.jit over the same work in jax.numpy: {over:.2f} us (target < {TARGET_US:.0f} us); "
          f"load average {out['load_before']:.1f} -> {out['load_after']:.1f} on {out['cores']} cores")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
