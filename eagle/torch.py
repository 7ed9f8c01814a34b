"""eagle.torch: a hawk kernel as a PyTorch operator.

    f = eagle.torch.wrap(kernel, target="host", **deploy_options)
    out = f(x=x, w=w, scale=0.5)   # planes by name, as Plan.run takes them; a tensor, or a dict of tensors by name

Each wrapped kernel is a `torch.library` custom op (`eagle::<kernel>_<n>`) with a fake-tensor registration (the
output shapes come from eagle.bridge, the binder's own shape rules, so torch.compile traces it without running it,
with symbolic sizes) and an autograd registration whose backward is `plan.reverse` (the adjoint kernel: exact,
deterministic gradients). When the caller passes outputs or sinks to be written in place, a second op
(`..._inplace`) declares them in `mutates_args` (no gradients through it: torch refuses autograd formulas for ops
that mutate). The op runs `Plan.run` on the tensors' memory (DLPack, no copy when the layout allows) and hands back
tensors over eagle's result buffers (torch.from_numpy, no copy); split kernels run their stages in sequence inside
the one op.
"""

from __future__ import annotations

import itertools
import keyword
import math
import numbers
from typing import Optional  # noqa: F401  (used by the generated op signatures)

import numpy as np
import torch
from torch import Tensor  # noqa: F401

from eagle import native
from eagle.bridge import Shaped, result_names, result_shapes
from eagle.errors import InputError
from eagle.interop import HOST_DEVICES, as_host_array, dlpack_device, refuse_device
from eagle.prepared import PreparedRun

NO_INPLACE_GRAD = ("gradients do not flow through outputs or sinks written in place: leave them out (the results "
                   "come back as new tensors) when you need gradients")
_COUNT = itertools.count()
_SCHEMA_RESERVED = {"self", "out"}  # names a torch schema gives a meaning of its own
_NUMPY = {torch.float64: np.float64, torch.float32: np.float32, torch.float16: np.float16, torch.int64: np.int64,
          torch.int32: np.int32, torch.int16: np.int16, torch.int8: np.int8, torch.uint8: np.uint8,
          torch.bool: np.bool_}


def wrap(kernel, target: str = "host", group=None, **options) -> TorchKernel:
    """`kernel` as a PyTorch operator deployed on `target` (options as eagle.deploy takes them). With `group` (a
    torch.distributed process group, e.g. `torch.distributed.group.WORLD`), each rank passes its shard of the
    lanes and cells and sinks are combined across the group (eagle/distributed/torch_shard.py)."""
    return TorchKernel(kernel, target, group=group, **options)


class TorchKernel:
    """A deployed kernel called with tensors: `f(**planes)` returns what Plan.run returns, as tensors.
    `op` is the custom op, `op_inplace` the one that writes passed outputs and sinks (None when there are none)."""

    def __init__(self, kernel, target: str = "host", group=None, **options):
        import eagle

        self.group = group
        self.plan = eagle.deploy(kernel, target=target, **options)
        self.name = kernel.name
        sig, b = kernel.signature, self.plan.binder
        self.inputs = [p.name for p in sig.planes if p.kind in ("lane", "index", "table", "param")]
        self.params = frozenset(p.name for p in sig.planes if p.kind == "param")
        self.grid = [b.axes[0].label] if sig.grid is not None and b.axes[0].extent is None else []
        self.mutable = [p.name for p in sig.planes if p.kind in ("output", "sink")]
        self.names, self.own = result_names(self.plan)
        self._prepared: dict = {}
        base = f"{kernel.name}_{next(_COUNT)}"
        self.op = self._define(base, inplace=False)
        floats = {p.name for p in sig.planes if p.kind in ("lane", "table", "param")}
        self.grad_inputs = [n for n in self.inputs if n in floats]
        self.rop = self._define_reverse(f"{base}_reverse")
        self.op.register_autograd(self._backward, setup_context=self._setup)
        self.op_inplace = None
        if self.mutable:
            self.op_inplace = self._define(f"{base}_inplace", inplace=True)
            # torch.library.register_autograd refuses ops that mutate (a formula could not see the writes); the
            # autograd kernel every custom op has reads this hook at backward time, so the error below is ours.
            if hasattr(self.op_inplace, "_backward_fn"):
                self.op_inplace._backward_fn = self._no_backward

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
        """The op's CPU (and any device's) implementation: a run prepared once per shape (eagle/prepared.py) with
        the tensors' memory swapped in, or Plan.run where that cannot be (a GPU target, no native executor)."""
        planes = {}
        for name, v in zip(self._args(inplace), values, strict=True):
            if v is None:
                continue
            if name in self.mutable:  # written in place: the binder takes the very NumPy view of the tensor
                planes[name] = as_host_array(v.detach(), name, self.name)
            else:
                planes[name] = v.detach() if isinstance(v, Tensor) else v
        skip = self._aliased(planes)
        fast = self._fast(planes)
        if fast is not None:
            outs = tuple(torch.empty(0, dtype=fast[n].dtype) if n in skip else fast[n] for n in self.names)
            return outs[0] if len(outs) == 1 else outs
        out = self.plan.run(**planes)
        results = out if isinstance(out, dict) else {self.names[0]: out}
        outs = tuple(_placeholder(results[n]) if n in skip else _tensor(results[n]) for n in self.names)
        return outs[0] if len(outs) == 1 else outs

    def _fast(self, planes: dict) -> dict | None:
        """The results as tensors from a prepared run, or None when the planes need Plan.run's full path."""
        if self.plan.device is not None or native.library() is None:
            return None
        arrays, params, grid = {}, {}, {}
        for name, v in planes.items():
            if name in self.grid:
                grid[name] = int(v)
            elif name in self.params:
                if not isinstance(v, (int, float, np.floating)) and not (isinstance(v, Tensor) and v.numel() == 1
                                                                         and v.dtype.is_floating_point):
                    return None  # the binder says what is wrong with it
                params[name] = float(v.item() if isinstance(v, Tensor) else v)
            elif isinstance(v, Tensor) and v.device.type == "cpu" and v.dtype in _NUMPY and v.is_contiguous():
                arrays[name] = v.numpy()
            elif isinstance(v, np.ndarray) and v.flags.c_contiguous:
                arrays[name] = v
            else:
                return None
        passed = tuple(sorted(n for n in arrays if n in self.mutable))
        key = (tuple((n, a.shape, a.dtype.str) for n, a in sorted(arrays.items())), tuple(sorted(params)),
               tuple(sorted(grid.items())), passed)
        run = self._prepared.get(key)
        if run is None:
            if len(self._prepared) > 64:
                self._prepared.clear()
            shaped = {n: Shaped(a.shape, a.dtype) for n, a in arrays.items()}
            run = self._prepared[key] = PreparedRun(self.plan, shaped, dict.fromkeys(params), grid, passed,
                                                    [p.name for p in self.plan.kernel.signature.planes])
        fdt = run.dtype
        keep = [np.array([params[n]], dtype=fdt) for n in run.operands if n in params]  # alive during the call
        kept = iter(keep)
        addrs = [(arrays[n].ctypes.data if n in arrays else next(kept).ctypes.data) for n in run.operands]
        rets = [torch.empty(shape, dtype=torch.float64 if dtype == np.float64 else torch.float32)
                for shape, dtype in run.rets]
        addrs += [t.data_ptr() for t in rets]
        for i, j in run.aliases.items():  # a passed output or sink is its own result
            addrs[len(run.operands) + j] = addrs[i]
        run.run_native(addrs)
        out = {}
        for name, (j, off, shape) in run.picks.items():
            if name in passed:
                out[name] = torch.from_numpy(arrays[name])
                continue
            size = math.prod(shape)
            whole = off == 0 and size == rets[j].numel()
            out[name] = rets[j].reshape(shape) if whole else rets[j][off:off + size].reshape(shape).clone()
        return out

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

    # ---- gradients: the reverse ------------------------------------------------------------------------------
    def _define_reverse(self, opname: str):
        """The backward as a custom op of its own (so torch.compile's AOT autograd traces it like the forward):
        the forward's planes and one cotangent per result in, one gradient per float input out (plan.reverse)."""
        args = self._args(False)
        cts = [f"ct{k}" for k in range(len(self.names))]
        names = [f"a{k}" for k in range(len(args))]
        params = [f"{a}: Optional[int] = None" if n in self.grid else f"{a}: Tensor" for a, n in zip(names, args,
                                                                                                   strict=True)]
        params += [f"{c}: Optional[Tensor] = None" for c in cts]
        ret = f"tuple[{', '.join(['Tensor'] * len(self.grad_inputs))}]" if len(self.grad_inputs) != 1 else "Tensor"
        values = f"({', '.join(names)},), ({', '.join(cts)},)"
        src = "".join(f"def {fn}({', '.join(params)}) -> {ret}:\n    return {call}({values})\n"
                      for fn, call in ((opname, "_eagle_rev"), ("_eagle_rev_fake_fn", "_eagle_rev_fake")))
        scope = {"Tensor": Tensor, "Optional": Optional, "_eagle_rev": self._reverse, "_eagle_rev_fake": self._rfake}
        exec(src, scope)  # noqa: S102 - a signature of generated names
        op = torch.library.custom_op(f"eagle::{opname}", scope[opname], mutates_args=())
        op.register_fake(scope["_eagle_rev_fake_fn"])
        return op

    def _reverse(self, values: tuple, cts: tuple):
        """plan.reverse on the tensors' memory: the gradients of the float inputs, shaped and typed like them."""
        planes = {}
        for name, v in zip(self._args(False), values, strict=True):
            if name in self.grid:
                if v is not None:
                    planes[name] = v
            else:
                planes[name] = as_host_array(v.detach(), name, self.name) if v.dim() else v.detach().item()
        cot = {n: np.ascontiguousarray(as_host_array(c.detach(), n, self.name))
               for n, c in zip(self.names, cts, strict=True) if c is not None}
        got = self.plan.reverse(cot if len(self.names) > 1 else cot[self.names[0]], **planes)
        given = dict(zip(self._args(False), values, strict=True))
        outs = tuple(torch.from_numpy(np.array(np.asarray(got[n]), copy=True)).to(given[n].dtype)
                     .reshape(given[n].shape) for n in self.grad_inputs)
        return outs[0] if len(outs) == 1 else outs

    def _rfake(self, values: tuple, cts: tuple):
        given = dict(zip(self._args(False), values, strict=True))
        outs = tuple(torch.empty_like(given[n]) for n in self.grad_inputs)
        return outs[0] if len(outs) == 1 else outs

    def _setup(self, ctx, inputs, output) -> None:
        ctx.save_for_backward(*[v for v in inputs if isinstance(v, Tensor)])
        ctx.extents = [(isinstance(v, Tensor), None if isinstance(v, Tensor) else v) for v in inputs]

    def _backward(self, ctx, *grads):
        """Gradients of the float inputs through the reverse op, the cotangents being the incoming gradients (a
        result torch gives no gradient for has a zero cotangent); integer planes and grid extents get None."""
        saved = iter(ctx.saved_tensors)
        values = [next(saved) if tensor else v for tensor, v in ctx.extents]
        if all(g is None for g in grads) or not self.grad_inputs:
            return tuple(None for _ in values)
        got = self.rop(*values, *grads)
        got = dict(zip(self.grad_inputs, (got,) if len(self.grad_inputs) == 1 else got, strict=True))
        return tuple(got.get(n) for n in self._args(False))

    def _no_backward(self, ctx, *grads):
        raise RuntimeError(f"eagle.torch: kernel '{self.name}': {NO_INPLACE_GRAD}")

    def _aliased(self, passed) -> frozenset[str]:
        return frozenset(n for n in passed if n in self.own)

    # ---- the call ---------------------------------------------------------------------------------------------
    def __call__(self, **planes):
        if self.group is not None:  # each rank's shard, combined across the group: eagle/distributed/torch_shard.py
            from eagle.distributed.torch_shard import sharded_call

            return sharded_call(self, self.group, planes)
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
