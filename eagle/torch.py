"""eagle.torch: a hawk kernel as a PyTorch operator.

    f = eagle.torch.wrap(kernel, target="host", **deploy_options)
    out = f(x=x, w=w, scale=0.5)   # planes by name, as Plan.run takes them; a tensor, or a dict of tensors by name

Each wrapped kernel is a `torch.library` custom op (`eagle::<kernel>_<n>`) with a fake-tensor registration (the
output shapes come from eagle.bridge, the binder's own shape rules, so torch.compile traces it without running it,
with symbolic sizes) and an autograd registration. When the caller passes outputs or sinks to be written in place,
a second op (`..._inplace`) declares them in `mutates_args`. The op runs `Plan.run` on the tensors' memory (DLPack,
no copy when the layout allows) and hands back tensors over eagle's result buffers (torch.from_numpy, no copy);
split kernels run their stages in sequence inside the one op. Gradients wait for the reverse: see docs/bridges.md.
"""

from __future__ import annotations

import itertools
import keyword
import numbers
from typing import Optional  # noqa: F401  (used by the generated op signatures)

import numpy as np
import torch
from torch import Tensor  # noqa: F401

from eagle.bridge import Shaped, result_names, result_shapes
from eagle.errors import InputError
from eagle.interop import HOST_DEVICES, as_host_array, dlpack_device, refuse_device

NOT_YET = "gradients arrive with plan.reverse, which is not built yet"
_COUNT = itertools.count()
_SCHEMA_RESERVED = {"self", "out"}  # names a torch schema gives a meaning of its own
_NUMPY = {torch.float64: np.float64, torch.float32: np.float32, torch.float16: np.float16, torch.int64: np.int64,
          torch.int32: np.int32, torch.int16: np.int16, torch.int8: np.int8, torch.uint8: np.uint8,
          torch.bool: np.bool_}


def wrap(kernel, target: str = "host", **options) -> TorchKernel:
    """`kernel` as a PyTorch operator deployed on `target` (options as eagle.deploy takes them)."""
    return TorchKernel(kernel, target, **options)


class TorchKernel:
    """A deployed kernel called with tensors: `f(**planes)` returns what Plan.run returns, as tensors.
    `op` is the custom op, `op_inplace` the one that writes passed outputs and sinks (None when there are none)."""

    def __init__(self, kernel, target: str = "host", **options):
        import eagle

        self.plan = eagle.deploy(kernel, target=target, **options)
        self.name = kernel.name
        sig, b = kernel.signature, self.plan.binder
        self.inputs = [p.name for p in sig.planes if p.kind in ("lane", "index", "table", "param")]
        self.params = frozenset(p.name for p in sig.planes if p.kind == "param")
        self.grid = [b.axes[0].label] if sig.grid is not None and b.axes[0].extent is None else []
        self.mutable = [p.name for p in sig.planes if p.kind in ("output", "sink")]
        self.names, self.own = result_names(self.plan)
        base = f"{kernel.name}_{next(_COUNT)}"
        self.op = self._define(base, inplace=False)
        self.op.register_autograd(self._backward)
        self.op_inplace = None
        if self.mutable:
            self.op_inplace = self._define(f"{base}_inplace", inplace=True)
            # torch.library.register_autograd refuses ops that mutate (a formula could not see the writes); the
            # autograd kernel every custom op has reads this hook at backward time, so the error below is ours.
            if hasattr(self.op_inplace, "_backward_fn"):
                self.op_inplace._backward_fn = self._backward

    def __repr__(self) -> str:
        return f"<eagle.torch kernel {self.name} ({self.op._qualname}) target={self.plan.target}>"

    # ---- the operator -------------------------------------------------------------------------------------
    def _args(self, inplace: bool) -> list[str]:
        return self.inputs + self.grid + (self.mutable if inplace else [])

    def _define(self, opname: str, inplace: bool):
        """A custom op whose schema lists the kernel's planes: tensors, the free grid extent as `int?` and, for
        the in-place op, each output or sink as a mutated `Tensor?`. It returns every result in name order; in
        the in-place op a result written into a passed tensor is an empty placeholder (a mutating custom op may not
        return what it mutates; the call hands back the caller's tensor instead)."""
        args = self._args(inplace)
        safe = {n: (f"{n}_" if n in _SCHEMA_RESERVED or keyword.iskeyword(n) else n) for n in args}
        params = []
        for n in args:
            kind = "Optional[int] = None" if n in self.grid else "Optional[Tensor] = None" if n in self.mutable \
                else "Tensor"
            params.append(f"{safe[n]}: {kind}")
        ret = "Tensor" if len(self.names) == 1 else f"tuple[{', '.join(['Tensor'] * len(self.names))}]"
        values = f"({', '.join(safe[n] for n in args)},)"
        src = "".join(f"def {fn}({', '.join(params)}) -> {ret}:\n    return {call}({values}, {inplace})\n"
                      for fn, call in ((opname, "_eagle_run"), ("_eagle_fake_fn", "_eagle_fake")))
        scope = {"Tensor": Tensor, "Optional": Optional, "_eagle_run": self._run, "_eagle_fake": self._fake}
        exec(src, scope)  # noqa: S102 - a signature built from the kernel's plane names, which are identifiers
        mutated = [safe[n] for n in self.mutable] if inplace else []
        op = torch.library.custom_op(f"eagle::{opname}", scope[opname], mutates_args=mutated)
        op.register_fake(scope["_eagle_fake_fn"])
        return op

    def _run(self, values: tuple, inplace: bool):
        """The op's CPU (and any device's) implementation: Plan.run on the tensors' memory."""
        planes = {}
        for name, v in zip(self._args(inplace), values, strict=True):
            if v is None:
                continue
            if name in self.mutable:  # written in place: the binder takes the very NumPy view of the tensor
                planes[name] = as_host_array(v.detach(), name, self.name)
            else:
                planes[name] = v.detach() if isinstance(v, Tensor) else v
        out = self.plan.run(**planes)
        results = out if isinstance(out, dict) else {self.names[0]: out}
        skip = self._aliased(planes)
        outs = tuple(_placeholder(results[n]) if n in skip else _tensor(results[n]) for n in self.names)
        return outs[0] if len(outs) == 1 else outs

    def _fake(self, values: tuple, inplace: bool):
        """Output tensors with the shapes and dtype the run would give (fake or meta tensors; sizes may be
        symbolic)."""
        shaped, grid, passed = {}, {}, set()
        for name, v in zip(self._args(inplace), values, strict=True):
            if v is None or name in self.params:
                continue
            if name in self.grid:
                grid[name] = v
                continue
            shaped[name] = Shaped(v.shape, _numpy_dtype(v.dtype, name, self.plan.binder))
            if name in self.mutable:
                passed.add(name)
        res = result_shapes(self.plan, shaped, grid, frozenset(passed))
        dtype = torch.float64 if res.dtype == np.float64 else torch.float32
        device = next((v.device for v in values if isinstance(v, Tensor)), torch.device("cpu"))
        outs = tuple(torch.empty(0 if n in res.aliased else shape, dtype=dtype, device=device)
                     for n, shape in res.shapes.items())
        return outs[0] if len(outs) == 1 else outs

    def _backward(self, ctx, *grads):
        raise NotImplementedError(f"eagle.torch: kernel '{self.name}': {NOT_YET}. Run the forward under "
                                  f"torch.no_grad() (or pass detached tensors) until then.")

    def _aliased(self, passed) -> frozenset[str]:
        return frozenset(n for n in passed if n in self.own)

    # ---- the call ---------------------------------------------------------------------------------------------
    def __call__(self, **planes):
        for arg in ("base", "count"):
            if arg in planes:
                raise TypeError(f"eagle.torch: kernel '{self.name}': {arg}= is Plan.run's; a bridge runs every lane "
                                f"(slice the tensors instead)")
        known = set(self.inputs) | set(self.grid) | set(self.mutable)
        if any(n not in known for n in planes) or any(n not in planes for n in self.inputs):
            self._plan_error(planes)  # the binder's own message for an unknown or missing plane
        passed = [n for n in self.mutable if planes.get(n) is not None]
        try:
            args = [self._tensor(n, planes[n]) for n in self.inputs] + [planes.get(n) for n in self.grid]
            if passed:
                args += [self._tensor(n, planes[n]) if n in passed else None for n in self.mutable]
        except InputError:
            raise
        except (TypeError, ValueError, RuntimeError):
            self._plan_error(planes)  # what Plan.run says of a value torch cannot take
            raise
        outs = (self.op_inplace if passed else self.op)(*args)
        outs = (outs,) if len(self.names) == 1 else outs
        given = self._aliased(passed)
        res = {n: (planes[n] if n in given else t) for n, t in zip(self.names, outs, strict=True)}
        return res[self.names[0]] if len(self.names) == 1 else res

    def _tensor(self, name: str, v) -> Tensor:
        """A plane as a tensor over the same memory where it can be (numbers for Params become 0-d tensors)."""
        if isinstance(v, Tensor):
            if v.device.type not in ("cpu", "meta"):
                raise refuse_device(v, name, self.name, str(v.device))
            return v
        if name in self.params and isinstance(v, numbers.Number) and not isinstance(v, np.ndarray):
            dtype = torch.float64 if isinstance(v, (float, np.floating)) else None
            return torch.tensor(v, dtype=dtype)
        if isinstance(v, np.ndarray):
            return torch.from_numpy(v)
        dev = dlpack_device(v)
        if dev is not None:  # a Warp array, an eagle.Array...: read through DLPack where it lies
            if dev[0] not in HOST_DEVICES:
                as_host_array(v, name, self.name)  # raises the refusal Plan.run gives
            return torch.from_dlpack(v)
        return torch.from_numpy(np.asarray(v))

    def _plan_error(self, planes: dict) -> None:
        """Raise what Plan.run raises for these planes (tensors read as NumPy arrays); refuse by name if it does
        not."""
        host = {n: (as_host_array(v.detach(), n, self.name) if isinstance(v, Tensor) else v)
                for n, v in planes.items()}
        self.plan.run(**host)
        raise InputError(f"kernel '{self.name}': eagle.torch cannot pass these planes to its operator "
                         f"({sorted(planes)})")


def _tensor(a) -> Tensor:
    """A result as a tensor over eagle's buffer; a view (a cell's component) is copied, since an operator's outputs
    may not share memory with each other."""
    a = np.asarray(a)
    return torch.from_numpy(a if a.base is None else a.copy())


def _placeholder(a) -> Tensor:
    """What the in-place op returns for a result written into the caller's tensor: nothing, in its dtype."""
    return torch.empty(0, dtype=torch.float32 if np.asarray(a).dtype == np.float32 else torch.float64)


def _numpy_dtype(dtype: torch.dtype, name: str, binder) -> np.dtype:
    np_dtype = _NUMPY.get(dtype)
    if np_dtype is None:
        raise binder.fail(name, f"holds {dtype}, which eagle does not take: pass float32 or float64 values "
                                f"(int32 or int64 keys for an Index plane)")
    return np.dtype(np_dtype)
