"""eagle.torch: a hawk kernel as a PyTorch operator.

    f = eagle.torch.wrap(kernel, target="host", **deploy_options)
    out = f(x=x, w=w, scale=0.5)   # planes by name, as Plan.run takes them; a tensor, or a dict of tensors by name

Each wrapped kernel is a `torch.library` custom op (`eagle::<kernel>_<n>`) with a fake-tensor registration (the
output shapes come from eagle.bridge, the binder's own shape rules, so torch.compile traces it without running it,
with symbolic sizes) and an autograd registration whose backward is `plan.reverse` (the adjoint kernel: exact,
deterministic gradients). When the caller passes outputs or sinks to be written in place, a second op
(`..._inplace`) declares them in `mutates_args` (no gradients through it: torch refuses autograd formulas for ops
that mutate). Split kernels run their stages in sequence inside the one op.

The op's CPU implementation keeps, per set of shapes, a run prepared once (eagle/prepared.py): a call reads the
tensors' data pointers, allocates the result tensors and fires every stage in one foreign call (eagle/call_plan.c),
which is what keeps its cost near an empty custom op's (benchmarks/torch_overhead.py). An eager call whose inputs
are all CPU tensors skips the general argument handling (`_eager`). What the prepared path cannot take (a GPU
target, a non-contiguous tensor, a Param that is not one float) goes through `Plan.run` on the tensors' memory.
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
from eagle.bridge import Shaped, check_dtypes, result_names, result_shapes
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
_TORCH = {np.dtype(v): k for k, v in _NUMPY.items()}  # a result's NumPy dtype -> its tensor's


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
        self.ints = frozenset(p.name for p in sig.planes if p.integer)  # integer outputs: no cotangent
        self._calls: dict = {}  # the prepared path per set of shapes (_FastCall), or None: Plan.run
        self._native = self.plan.device is None and native.library() is not None
        base = f"{kernel.name}_{next(_COUNT)}"
        self.op = self._define(base, inplace=False)
        floats = {p.name for p in sig.planes if p.kind in ("lane", "table", "param")}
        self.grad_inputs = [n for n in self.inputs if n in floats]
        self.rop = None  # (no float input, e.g. keys alone: nothing to differentiate, no backward to register)
        if self.grad_inputs:
            self.rop = self._define_reverse(f"{base}_reverse")
            self.op.register_autograd(self._backward, setup_context=self._setup)
        self._op = getattr(self.op, "_opoverload", self.op)  # what CustomOpDef.__call__ calls
        self._plain_order = self.inputs + self.grid
        self._plain, self._plain_grid = frozenset(self.inputs), frozenset(self._plain_order)
        self._floats: dict = {}
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
        fast = self._fast(values, inplace)
        if fast is not None:
            return fast
        planes = {}
        for name, v in zip(self._args(inplace), values, strict=True):
            if v is None:
                continue
            if name in self.mutable:  # written in place: the binder takes the very NumPy view of the tensor
                planes[name] = as_host_array(v.detach(), name, self.name)
            else:
                planes[name] = v.detach() if isinstance(v, Tensor) else v
        check_dtypes(self.plan, {n: Shaped(tuple(v.shape), _numpy_dtype(v.dtype, n, self.plan.binder)
                                           if isinstance(v, Tensor) else v.dtype)
                                 for n, v in planes.items() if n not in self.params and n not in self.grid})
        skip = self._aliased(planes)  # (above: one float dtype, as the fast path and torch.compile's fake keep)
        out = self.plan.run(**planes)
        results = out if isinstance(out, dict) else {self.names[0]: out}
        outs = tuple(_placeholder(results[n]) if n in skip else _tensor(results[n]) for n in self.names)
        return outs[0] if len(outs) == 1 else outs

    def _fast(self, values: tuple, inplace: bool):
        """The op's results from a prepared run (a _FastCall per set of shapes), or None when the values need
        Plan.run's full path. The key is read straight off the tensors: shapes, dtypes, grid extents."""
        if not self._native:
            return None
        key = [inplace]
        for v in values:
            if v is None or type(v) is int:
                key.append(v)
            elif isinstance(v, Tensor) and v.is_cpu and v.is_contiguous():
                key.append((v.shape, v.dtype))
            else:
                return None
        key = tuple(key)
        call = self._calls.get(key)
        if call is None:
            if len(self._calls) > 64:
                self._calls.clear()
            call = self._calls[key] = self._fast_call(values, inplace)
        return None if call is None else call(values)

    def _fast_call(self, values: tuple, inplace: bool) -> _FastCall | None:
        """A prepared run for these values' shapes, or None when they need Plan.run (a Param that is not one float,
        a dtype the prepared path does not read)."""
        arrays, params, grid = {}, {}, {}
        for name, v in zip(self._args(inplace), values, strict=True):
            if v is None:
                continue
            if name in self.grid:
                grid[name] = int(v)
            elif name in self.params:
                if v.numel() != 1 or not v.dtype.is_floating_point:
                    return None  # the binder says what is wrong with it
                params[name] = v
            elif v.dtype in _NUMPY:
                arrays[name] = v
            else:
                return None
        passed = tuple(sorted(n for n in arrays if n in self.mutable))
        shaped = {n: Shaped(tuple(a.shape), _NUMPY[a.dtype]) for n, a in arrays.items()}
        run = PreparedRun(self.plan, shaped, dict.fromkeys(params), grid, passed,
                          [p.name for p in self.plan.kernel.signature.planes])
        return _FastCall(run, self._args(inplace), self.names, passed, self.params, values)

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
        device = next((v.device for v in values if isinstance(v, Tensor)), torch.device("cpu"))
        outs = tuple(torch.empty(0 if n in res.aliased else shape, dtype=_TORCH[res.dtypes[n]], device=device)
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
               for n, c in zip(self.names, cts, strict=True) if c is not None and n not in self.ints}
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
        if not torch.compiler.is_compiling():
            out = self._eager(planes)
            if out is not None:
                return out
        return self._call(planes)

    def _eager(self, planes: dict):
        """The common eager call in few steps: every input a CPU tensor (a Param may be a float), no output or sink
        passed. None for anything else, which _call handles (and traces, under torch.compile)."""
        keys = planes.keys()
        if keys != self._plain and keys != self._plain_grid:
            return None
        args = []
        for n in self._plain_order:
            v = planes.get(n)
            if isinstance(v, Tensor):  # (an nn.Parameter too)
                if not v.is_cpu:
                    return None
            elif type(v) is float and n in self.params:
                last = self._floats.get(n)
                if last is None or last[0] is not v:  # the same float object: its 0-d tensor is reused
                    last = self._floats[n] = (v, torch.tensor(v, dtype=torch.float64))
                v = last[1]
            elif n not in self.grid:
                return None
            args.append(v)
        outs = self._op(*args)
        return outs if len(self.names) == 1 else dict(zip(self.names, outs, strict=True))

    def _call(self, planes: dict):
        """Any call: checks the planes (the binder's messages), turns them into tensors and picks the op."""
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


class _FastCall:
    """One op call on a run prepared for these shapes: the values' data pointers (operands, then fresh result
    tensors) go to the native call plan in one foreign call; no NumPy, no dicts per call. A result that fills its
    buffer is allocated in its own shape (`empty_like` of a one-element template: cheaper than `torch.empty`); a
    vector cell's components, which share one buffer, are copied out."""

    def __init__(self, run: PreparedRun, args: list[str], names: tuple[str, ...], passed: tuple[str, ...],
                 params: frozenset, values: tuple):
        self.run = run
        pos = {n: k for k, n in enumerate(args)}
        fdt = torch.float64 if run.dtype == np.float64 else torch.float32
        # per operand: its position in values, and the float dtype to convert a Param to (None: read it in place)
        self.operands = [(pos[n], fdt if n in params and values[pos[n]].dtype != fdt else None)
                         for n in run.operands]
        self.convert = any(c is not None for _, c in self.operands)
        self.positions = [k for k, _ in self.operands]
        alias = {j: i for i, j in run.aliases.items()}  # result buffer j is operand i (a passed output or sink)
        users: dict[int, list] = {}
        for name, (j, off, shape) in run.picks.items():
            users.setdefault(j, []).append((name, off, tuple(shape)))
        self.allocs = []  # per result buffer: a template to allocate like, or the operand position it aliases
        whole = {}
        for j, (shape, dtype) in enumerate(run.rets):
            if j in alias:
                self.allocs.append(self.operands[alias[j]][0])
                continue
            used = users.get(j, [])
            one = len(used) == 1 and used[0][1] == 0 and math.prod(used[0][2]) == shape[0]
            self.allocs.append(_template(used[0][2] if one else shape, _TORCH[np.dtype(dtype)]))
            if one:
                whole[used[0][0]] = j
        # per result name (the op's return order): ("whole", j), ("slice", j, off, shape) or ("passed", position)
        self.outs = []
        for name in names:
            j, off, shape = run.picks[name]
            if name in passed:
                self.outs.append(("passed", self.allocs[j]))
            elif name in whole:
                self.outs.append(("whole", j))
            else:
                self.outs.append(("slice", j, off, tuple(shape)))
        self.single = len(names) == 1
        # the common case: every result a fresh tensor of its own, in the op's order, no Param to convert
        self.plain = not self.convert and not alias and [o[:2] for o in self.outs] == [("whole", j) for j in
                                                                                        range(len(self.allocs))]
        run.native_plan()

    def __call__(self, values: tuple):
        if self.plain:
            rets = [torch.empty_like(t) for t in self.allocs]
            self.run.run_native([values[k].data_ptr() for k in self.positions] + [t.data_ptr() for t in rets])
            return rets[0] if self.single else tuple(rets)
        if self.convert:  # a Param in another float dtype: one converted value, alive during the call
            vals = list(values)
            for k, c in self.operands:
                if c is not None:
                    vals[k] = vals[k].to(c)
        else:
            vals = values
        rets = [vals[t] if type(t) is int else torch.empty_like(t) for t in self.allocs]
        self.run.run_native([vals[k].data_ptr() for k in self.positions] + [t.data_ptr() for t in rets])
        outs = []
        for o in self.outs:
            if o[0] == "whole":
                outs.append(rets[o[1]])
            elif o[0] == "passed":
                outs.append(torch.empty(0, dtype=values[o[1]].dtype))
            else:
                _, j, off, shape = o
                outs.append(rets[j][off:off + math.prod(shape)].reshape(shape).clone())
        return outs[0] if self.single else tuple(outs)


def _template(shape: tuple, dtype: torch.dtype) -> Tensor:
    """A one-element tensor seen as `shape` (stride 0), whose `empty_like` is a fresh contiguous tensor."""
    t = torch.empty((), dtype=dtype).expand(shape)
    if not torch.empty_like(t).is_contiguous():  # (empty_like of an overlapping tensor is contiguous)
        raise RuntimeError(f"eagle.torch: empty_like of a stride-0 tensor of shape {shape} is not contiguous")
    return t


def _tensor(a) -> Tensor:
    """A result as a tensor over eagle's buffer; a view (a cell's component) is copied, since an operator's outputs
    may not share memory with each other."""
    a = np.asarray(a)
    return torch.from_numpy(a if a.base is None else a.copy())


def _placeholder(a) -> Tensor:
    """What the in-place op returns for a result written into the caller's tensor: nothing, in its dtype."""
    return torch.empty(0, dtype=_TORCH[np.asarray(a).dtype])


def _numpy_dtype(dtype: torch.dtype, name: str, binder) -> np.dtype:
    np_dtype = _NUMPY.get(dtype)
    if np_dtype is None:
        raise binder.fail(name, f"holds {dtype}, which eagle does not take: pass float32 or float64 values "
                                f"(int32 or int64 keys for an Index plane)")
    return np.dtype(np_dtype)
