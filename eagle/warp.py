"""eagle.warp: a hawk kernel called with Warp arrays.

    f = eagle.warp.wrap(kernel, target="host", **deploy_options)
    out = f(x=x, w=w, scale=0.5)   # wp.arrays (or NumPy arrays, numbers) by name, as Plan.run takes them

Arrays are read and written where they lie: a CPU `wp.array` is handed to `Plan.run` as a NumPy view of its memory
(`.numpy()`, no copy), results come back as `wp.array`s over eagle's result buffers (`copy=False`), and an output
or sink the caller passes is written in place and handed back as the very same `wp.array`. Split kernels run
their stages in sequence. Arrays on a CUDA device are refused by name (the host target reads host memory; device
memory waits for the C-level launch runner). Under an active `wp.Tape`, a call whose inputs require gradients
records itself (`Tape.record_func`); its backward runs `plan.reverse` with the results' gradient arrays as
cotangents and adds the gradients into the inputs' `.grad` (as Warp's own adjoints accumulate). The inputs are
kept as they were at the call (Warp's tape would read their current values: Warp issue #1350). See
docs/bridges.md.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from eagle.interop import refuse_device

MAX_DIMS = 4  # the most dimensions a wp.array has


def wrap(kernel, target: str = "host", **options) -> WarpKernel:
    """`kernel` deployed on `target` (options as eagle.deploy takes them), called with Warp arrays."""
    return WarpKernel(kernel, target, **options)


def active_tape():
    """The wp.Tape being recorded now, or None (Warp keeps it on its runtime; there is no public getter)."""
    runtime = getattr(getattr(getattr(wp, "_src", None), "context", None), "runtime", None)
    return getattr(runtime, "tape", None)


class WarpKernel:
    """A deployed kernel called with `wp.array`s: `f(**planes)` returns what Plan.run returns, as `wp.array`s."""

    def __init__(self, kernel, target: str = "host", **options):
        import eagle

        self.plan = eagle.deploy(kernel, target=target, **options)
        self.name = kernel.name

    def __repr__(self) -> str:
        return f"<eagle.warp kernel {self.name} target={self.plan.target}>"

    def __call__(self, **planes):
        host = {n: self._host(n, v) for n, v in planes.items()}
        grads = [v for v in planes.values() if isinstance(v, wp.array) and v.requires_grad]
        tape = active_tape() if grads else None
        # the planes as they are before the run: a passed output the body reads before assigning it is written in
        # place, and the reverse must read its initial contents
        kept = {n: (np.array(v, copy=True) if isinstance(v, np.ndarray) else v) for n, v in host.items()} \
            if tape is not None else {}
        out = self.plan.run(**host)
        results = out if isinstance(out, dict) else {None: out}
        wrapped = {n: self._result(n, a, planes, host, tape is not None) for n, a in results.items()}
        if tape is not None:
            outs = {n: a for n, a in wrapped.items() if a.requires_grad and all(a is not g for g in grads)}
            wants = {n: v for n, v in planes.items() if isinstance(v, wp.array) and v.requires_grad}

            def backward(outs=outs, kept=kept, wants=wants):
                self._backward(outs, kept, wants)

            backward.__self__ = self  # (the tape's record says whose it is)
            tape.record_func(backward=backward, arrays=grads + list(outs.values()))
        return wrapped[None] if None in wrapped else wrapped

    def _host(self, name: str, v):
        """A plane for Plan.run: a CPU wp.array as a NumPy view of its memory; anything else as it is."""
        if not isinstance(v, wp.array):
            return v
        if not v.device.is_cpu:
            raise refuse_device(v, name, self.name, str(v.device))
        return v.numpy()  # the same memory, writable (outputs and sinks are written through it)

    def _result(self, name, a, planes, host, grad: bool):
        """A result as a wp.array: the caller's own array when the run wrote into it, else a view of eagle's."""
        data = np.asarray(a)
        for n, v in planes.items():
            if isinstance(v, wp.array) and host[n] is data:
                return v
        if data.ndim > MAX_DIMS:
            raise ValueError(f"eagle.warp: kernel '{self.name}': result '{name}' has {data.ndim} dimensions "
                             f"{data.shape}, more than a wp.array holds ({MAX_DIMS}); use eagle.deploy(...).run")
        return wp.array(data, dtype=wp.dtype_from_numpy(data.dtype), copy=False, device="cpu", requires_grad=grad)

    def _backward(self, outs: dict, kept: dict, wants: dict) -> None:
        """The recorded call's adjoint: cotangents from the results' .grad arrays, gradients added into the
        inputs' .grad arrays (float inputs only: keys and extents have none)."""
        cot = {n: np.ascontiguousarray(a.grad.numpy()) for n, a in outs.items() if a.grad is not None}
        if not cot:
            return
        sig = self.plan.kernel.signature
        wrt = tuple(n for n in wants if sig.get(n) is not None and sig.get(n).kind in ("lane", "table", "param"))
        if not wrt:
            return
        got = self.plan.reverse(cot if None not in cot else cot[None], wrt=wrt, **kept)
        for n in wrt:
            g = wants[n].grad
            if g is None:
                continue
            view = g.numpy()
            view += np.asarray(got[n]).reshape(view.shape).astype(view.dtype, copy=False)
