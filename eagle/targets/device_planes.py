"""Planes that already live on a GPU target's device: bound where they lie, never copied through the host.

`bind(owner, planes)` is what a run, a bound launch and an artifact's run call on a GPU target instead of their
binder's `bind`. A plane given as device memory of the owner's target -- an eagle.DeviceArray on it, or on
'nvvm' a CUDA array of a framework (`__cuda_array_interface__`: torch, CuPy, Numba, Warp; a JAX array on a GPU
through `unsafe_buffer_pointer`) -- is handed to the binder as a host stand-in of its shape and dtype (np.empty:
no memory is touched), and the Bound gets `device`: plane name -> device buffer, which DeviceStage binds in the
stand-in's place. The binder's checks (names, shapes, dtypes, extents) run on the stand-ins; an Index plane used
directly as a key is copied to the host for its range check (`fetch_keys`: one counted transfer per bind). A
per-lane output given as a device array is written in place. Device memory of another target, and device arrays
as cells, sinks, Params or Tables, are refused by plane and kernel (docs/devices.md).
"""

from __future__ import annotations

import os

import numpy as np

from eagle.errors import InputError

_DEVICE_KINDS = ("lane", "index")  # the planes a device array may be: per-lane inputs and keys, and outputs
_OUT_MODES = ("lane", "scatter", "scatter-run")  # outputs stored per lane or by key (written in place)


def _fail(kernel: str, name: str, msg: str) -> InputError:
    return InputError(f"plane '{name}' of kernel '{kernel}': {msg}")


def foreign_cuda(v) -> tuple[int, tuple[int, ...], np.dtype, tuple | None] | None:
    """(device pointer, shape, dtype, strides in bytes or None) of a framework's CUDA array, else None."""
    cai = None
    try:
        cai = getattr(v, "__cuda_array_interface__", None)
    except (AttributeError, RuntimeError):  # torch raises for a tensor that requires grad
        if hasattr(v, "detach"):
            cai = getattr(v.detach(), "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0]), tuple(cai["shape"]), np.dtype(cai["typestr"]), cai.get("strides")
    dev = getattr(v, "__dlpack_device__", None)
    if dev is not None and hasattr(v, "unsafe_buffer_pointer") and callable(dev) and dev()[0] == 2:  # JAX, GPU
        return int(v.unsafe_buffer_pointer()), tuple(v.shape), np.dtype(v.dtype), None
    return None


def _device_of(v) -> str | None:
    """The device a plane's value lives on when it is device memory eagle can bind: a target name, else None."""
    from eagle.array import DeviceArray

    if isinstance(v, DeviceArray):
        return v.device
    if isinstance(v, (int, float, list, tuple)):
        return None
    return "nvvm" if foreign_cuda(v) is not None else None


def bind(owner, planes: dict):
    """`owner.binder.bind(planes)` with device planes bound where they lie (see the module docstring). `owner`:
    a Plan or a loaded artifact on a GPU target (its `binder`, `target` and `runtime()`)."""
    found = {n: d for n, v in planes.items() if not isinstance(v, np.ndarray) and (d := _device_of(v)) is not None}
    if not found:
        return owner.binder.bind(planes)
    binder, kernel, target = owner.binder, owner.binder.name, owner.target
    rt = owner.runtime()
    host, buffers = dict(planes), {}
    for name, where in found.items():
        v, p = planes[name], binder.sig.get(name)
        if where != target:
            what = "an eagle.Array" if where != "nvvm" or hasattr(v, "buffer") else \
                f"a {type(v).__module__.split('.')[0]}.{type(v).__name__} in CUDA memory"
            raise _fail(kernel, name, f"is {what} on device '{where}', but this plan runs on '{target}': copy it "
                                      f"with eagle.asarray(a, device='{target}') (or to the host), or deploy the "
                                      f"kernel with target='{where}'")
        lane_output = p is not None and p.kind == "output" and binder.outputs.get(name, "cell") in _OUT_MODES
        if p is None or (p.kind not in _DEVICE_KINDS and not lane_output):
            what = "not a plane of it" if p is None else \
                f"{'an' if p.kind[0] in 'aeiou' else 'a'} {p.kind} plane"
            raise _fail(kernel, name, f"is device memory, but it is {what}; device arrays are taken as per-lane "
                                      "input planes, Index keys and per-lane outputs (stored per lane or by key) "
                                      "only: pass cells and sinks as host arrays or leave them out")
        buf, shape, dtype = _buffer(rt, v, kernel, name)
        stand = np.empty(shape, dtype)
        host[name], buffers[name] = stand, (buf, stand)
    b = binder.bind(host)
    for name, (_, stand) in buffers.items():
        a = b.arrays[name] if name in b.arrays else b.given[name]
        if a.size and a.__array_interface__["data"][0] != stand.__array_interface__["data"][0]:
            if stand.dtype.kind == "f" and a.dtype != stand.dtype:  # a float32 plane of a promoted float64 run
                raise _fail(kernel, name, f"is a {stand.dtype} device array, but this run computes in {a.dtype} "
                                          f"(a float32 input beside a float64 one is promoted, and a device array "
                                          f"is read as it is, never converted): put it on the device as {a.dtype} "
                                          f"(eagle.algorithms.copy converts into a {a.dtype} device array there), "
                                          f"or pass the other float inputs as {stand.dtype}")
            raise _fail(kernel, name, f"is a device array of {stand.dtype} {stand.shape}, but this run reads "
                                      f"{a.dtype} values laid out flat; a device array is read as it is: convert it "
                                      f"before it goes to the device")
    b.device = {name: buf for name, (buf, _) in buffers.items()}
    return b


def fetch_keys(b, layout, runtime) -> None:
    """Copy to the host stand-in, once per bind, each device Index plane `layout` uses directly as a key of a sink
    or an output (what the binder's range check reads: one counted "index" transfer each). Index planes read
    only as values or by `.at` are never copied (unless $HAWK_CHECK_SORTED asks for every Index plane's order
    to be checked on the host)."""
    done = b.device.setdefault("#keys", set()) if b.device else None
    if done is None:
        return
    every = os.environ.get("HAWK_CHECK_SORTED", "") not in ("", "0")
    for name in (b.arrays if every else layout.index_keys):
        buf = b.device.get(name)
        if buf is not None and name not in done:
            stand = b.arrays[name]
            if stand.size:
                runtime.download(buf, stand, "index")
            done.add(name)


def _buffer(rt, v, kernel: str, name: str):
    """(device buffer, shape, dtype) of a device plane value for runtime `rt`."""
    from eagle.array import DeviceArray

    if isinstance(v, DeviceArray):
        if getattr(v.buffer, "runtime", rt) is not rt and rt.target == "spirv":
            raise _fail(kernel, name, "is a device array of another Vulkan runtime than this plan's")
        return v.buffer, v.shape, v.dtype
    ptr, shape, dtype, strides = foreign_cuda(v)
    if strides is not None and tuple(strides) != _c_strides(shape, dtype.itemsize):
        raise _fail(kernel, name, f"is a CUDA array with strides {tuple(strides)}: a device plane is read in place "
                                  "and must be C-contiguous (torch: x.contiguous())")
    return rt.lend(ptr, int(np.prod(shape)) * dtype.itemsize, v), shape, dtype


def lent_cuda(v, rt):
    """A DeviceArray on 'nvvm' over a framework's C-contiguous CUDA array `v` (its memory, lent), or None when
    `v` is not one. eagle.asarray(v, device="nvvm") calls it."""
    from eagle.array import DeviceArray

    found = foreign_cuda(v)
    if found is None:
        return None
    ptr, shape, dtype, strides = found
    if strides is not None and tuple(strides) != _c_strides(shape, dtype.itemsize):
        raise ValueError(f"eagle.asarray: a CUDA array with strides {tuple(strides)} is not C-contiguous; make it "
                         "contiguous first (torch: x.contiguous())")
    return DeviceArray(rt.lend(ptr, int(np.prod(shape)) * dtype.itemsize, v), shape, dtype, "nvvm")


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    out, step = [], itemsize
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))
