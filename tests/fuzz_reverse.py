"""The reverse fuzzer: the gradients of the front-end fuzzer's kernels (tests/fuzz_kernels.py) against central
finite differences of the same kernels' compiled forward runs (tests/test_fuzz.py runs it).

For each generated kernel that must run (`expect == "match"`), a random cotangent `ct` is drawn for every output
and `plan.reverse(ct)` gives the gradient `g` of every float input. Then, one input at a time, a random direction
`d` over that input is drawn and the directional derivative `sum(g * d)` is compared with
`sum(ct * (F(+h) - F(-h))) / 2h`, where `F(t) = forward(input + t d)`. The forward is the compiled kernel itself,
whose values the front-end fuzzer checks against NumPy, so a mismatch is the reverse's.

The generated kernels are not smooth everywhere (floor, comparisons, `m.index`, keys). A direction is only judged
when the difference quotient is stable: the central quotients at `h` and `h / 4` agree to STABLE of the
derivative's scale and the one-sided ones at `h / 4` to KINK, give or take what the outputs' own rounding (their
spacing, weighted by the cotangent) moves a quotient by. Otherwise the point sits on a kink or a jump within the
step, or on a kink itself (`abs`, `clamp` or `copysign` at an input of exactly 0.0, where the central quotient
averages two slopes and the reverse picks one), and the direction is counted as "rough", as it is when gradient
and quotient differ but that rounding is too coarse to tell them apart. The planes' special values (NaN, inf,
1e300, subnormals, exact zeros) are replaced by ordinary draws first, input components whose gradient is not
finite are left out of the direction, and output components beyond BIG (or not finite) get a zero cotangent.

With HAWK_FUZZ_REVERSE_RANGE=1 the forward is a launch bound to a lane range instead, `plan.bind(base=, count=,
...)` over the middle half of the lanes, and the gradients are its `bound.reverse(ct)` (eagle/reverse_range.py:
the slices' reverse, or the adjoint run over the range's lanes); a kernel that runs in stages takes no range and
is skipped.

A kernel the reverse refuses must be refused by name (`eagle.InputError` or `hawk.KernelError`, with the
kernel's name in the message); anything else is a failure. Run as a script, like tests/fuzz_kernels.py:

    python tests/fuzz_reverse.py --seed 7 --start 0 --count 50 --dir /tmp/fz    # one JSON line per case
"""

from __future__ import annotations

import os
import sys

import fuzz_kernels as fk
import numpy as np

H = 1e-5  # the larger step, relative to the input's scale (components are O(1): normal and uniform draws)
STABLE = 1e-6  # quotients at h and h/4 this close (relative to the derivative's scale): the point is smooth
TOL = 2e-6  # the gradient's directional derivative this close to the quotient at h/4 (same scale)
KINK = 1e-3  # one-sided quotients this far apart (relative to the scale): the point sits on a kink
BIG = 1e12  # output components this large (or not finite) get a zero cotangent: their rounding hides the step

__all__ = ["check_reverse"]


def _tame(v, rng):
    """A copy of a plane with its special values (NaN, inf, 1e300, subnormals, and exact zeros: the forward
    fuzzer's) replaced by ordinary draws: a difference quotient cannot follow a gradient through a value that
    swallows the step, nor through a zero where a mask holds only at the point itself (`m.pow(p, x) >= c` with a
    negative p is true at x = 0.0 alone: the lane adds its x there, a derivative of 1 that no step can see)."""
    if not isinstance(v, np.ndarray) or v.dtype.kind != "f":
        return v.copy() if isinstance(v, np.ndarray) else v
    wild = ~np.isfinite(v) | (np.abs(v) > 1e6) | (np.abs(v) < 1e-300)
    return np.where(wild, rng.normal(size=v.shape), v)


def _change(up: dict, down: dict, ct: dict) -> float:
    """sum(ct * (up - down)) over every output, differenced component by component (a large output beside a
    small one would swallow the small one's change in a sum of ct * out); a zero cotangent adds nothing."""
    total = 0.0
    for name, c in ct.items():
        diff = up[name].reshape(c.shape) - down[name].reshape(c.shape)
        total += float(np.sum(np.where(c == 0.0, 0.0, c * diff)))
    return total


def check_reverse(c, workdir: str, target: str = "host") -> dict:
    """Differentiate case `c` and judge its gradients against difference quotients, one input at a time."""
    import eagle
    import hawk

    out = fk.record(c)
    rng = np.random.default_rng([c.seed, c.index, 7])
    ranged = os.environ.get("HAWK_FUZZ_REVERSE_RANGE") == "1"
    try:
        kernel = fk.load_kernel(c, os.path.join(workdir, f"{c.name}.py"))
        plan = eagle.deploy(kernel, target=target)
        planes = {k: _tame(v, rng) for k, v in c.planes.items()}
        span: dict = {}
        if ranged:
            lanes = plan.binder.bind(fk.fresh(planes)).lanes
            if kernel.stage_count > 1 or lanes < 4:
                return {**out, "status": "skipped", "why": "a lane range runs single-stage kernels of 4 lanes or more"}
            from eagle.reverse import forward_of
            from eagle.reverse_range import by_slices

            span = {"base": lanes // 4, "count": lanes // 2}
            out["range"] = [span["base"], span["base"] + span["count"]]
            out["way"] = "slices" if by_slices(kernel, forward_of(plan).keyed) else "span"

        def forward(p: dict) -> dict:
            return fk.named(plan.bind(**span, **fk.fresh(p)).launch() if span else plan.run(**fk.fresh(p)), c)

        outs = forward(planes)
        ct = {k: np.where(np.abs(v) < BIG, rng.normal(size=v.shape), 0.0) for k, v in outs.items()}
        arg = ct if len(ct) > 1 else next(iter(ct.values()))
        before = fk.fresh(planes)
        got = plan.bind(**span, **planes).reverse(arg) if span else plan.reverse(arg, **planes)
        grads = {k: np.asarray(v, dtype=np.float64) for k, v in got.items()}
    except Exception as exc:  # a refusal by name, or a bug
        return fk.raised(c, exc, (eagle.InputError, hawk.KernelError))
    for k, v in before.items():  # the reverse reads the planes, never writes them
        if isinstance(v, np.ndarray) and not np.array_equal(v, planes[k], equal_nan=True):
            return {**out, "status": "fail", "why": f"the reverse changed the caller's '{k}'"}
    judged, rough, notes = [], [], []
    # the smallest change of the weighted outputs the forward can show (a huge output swallows a small change)
    grain = sum(float(np.sum(np.where(np.isfinite(o), np.abs(ct[k]) * np.spacing(np.abs(o).reshape(ct[k].shape)),
                                      0.0))) for k, o in outs.items())
    for name, g in sorted(grads.items()):
        base = np.asarray(planes[name], dtype=np.float64)
        g = g.reshape(base.shape)
        ok = np.isfinite(g)
        if not np.all(ok):
            notes.append(f"{name}: {int(np.sum(~ok))} non-finite")
        d = np.where(ok, rng.normal(size=base.shape), 0.0)
        if not np.any(d):
            continue
        ad = float(np.sum(np.where(d == 0.0, 0.0, g * d)))
        scale = float(np.sum(np.where(d == 0.0, 0.0, np.abs(g * d))))

        def at(t: float, name=name, base=base, d=d) -> dict:
            moved = dict(planes)
            moved[name] = float((base + t * d).reshape(())) if np.ndim(c.planes[name]) == 0 else base + t * d
            return forward(moved)

        h4 = H / 4
        up, down = at(h4), at(-h4)
        q1, q4 = _change(at(H), at(-H), ct) / (2.0 * H), _change(up, down, ct) / (2.0 * h4)
        ahead, behind = _change(up, outs, ct) / h4, _change(outs, down, ct) / h4  # one-sided: a kink at the point
        size, noise = scale + abs(q4), 10.0 * grain / (H / 2)  # noise: what the outputs' rounding moves q4 by
        if not all(np.isfinite([q1, q4, ahead, behind])) or abs(q1 - q4) > STABLE * size + noise or \
                abs(ahead - behind) > KINK * size + 2.0 * noise:
            rough.append(name)  # a kink or a jump within the step (or at the point itself: abs(0.0))
            continue
        if abs(ad - q4) > TOL * size + noise:
            # the forward rounds too coarsely here to tell; or the quotients agree only next to a huge gradient,
            # not with each other (a float `%` of a value whose spacing exceeds the divisor: its result jumps
            # within any step, while its derivative, 1, times the dividend's is as large as the dividend)
            if noise > 1e-3 * size or abs(q1 - q4) > KINK * max(abs(q1), abs(q4)) + 2.0 * noise:
                rough.append(name)
                continue
            return {**out, "status": "fail",
                    "why": f"d/d{name}: the reverse gives {ad!r}, difference quotients {q4!r} (h/4), {q1!r} (h); "
                           f"scale {scale:.3g}"}
        judged.append(name)
    status = "ok" if judged else "rough"
    return {**out, "status": status, "why": f"judged {judged}, rough {rough}" + (f"; {notes}" if notes else "")}


if __name__ == "__main__":
    sys.exit(fk.run_cases(check_reverse, __doc__))
