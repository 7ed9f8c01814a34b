"""Array interop: any DLPack producer or NumPy-like object as a plane, read where it lies when the layout allows.

`as_host_array` is what the binder calls for a plane that is not already a NumPy array. It reads
  * a DLPack producer (`__dlpack__` + `__dlpack_device__`: torch tensors, Warp and JAX arrays, eagle.Array, ...)
    through `np.from_dlpack`: no copy, whatever its strides;
  * anything else NumPy reads (`__array_interface__`, `__array__`, an object with `.numpy()`, a list) through
    `np.asarray`: no copy when the object exposes its memory.
Memory the CPU cannot read (a CUDA or ROCm device array, anything only exposing `__cuda_array_interface__`, an
eagle.Array on a GPU target) is refused by plane and kernel with what to write instead; a plan on a GPU target reads
device arrays of its own device in place (eagle/targets/device_planes.py, docs/devices.md). The binder itself
copies afterwards when the run needs it: an input that is not C-contiguous or not of the run's float dtype, a Table
that is not contiguous, a Param (always one fresh value). docs/bridges.md lists it all.
"""

from __future__ import annotations

import numpy as np

from eagle.errors import InputError

# DLPack device types (dlpack.h, DLDeviceType) and the ones whose memory the CPU reads directly.
DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi", 10: "rocm",
                11: "rocm_host", 12: "ext_dev", 13: "cuda_managed", 14: "oneapi", 15: "webgpu", 16: "hexagon"}
HOST_DEVICES = frozenset({1, 3, 11})  # CPU memory, and pinned host memory of CUDA and ROCm


def _fail(name: str, kernel: str, msg: str) -> InputError:
    return InputError(f"plane '{name}' of kernel '{kernel}': {msg}")


def dlpack_device(obj) -> tuple[int, int] | None:
    """(device type, device id) of a DLPack producer, or None for an object that is not one."""
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is None or not hasattr(obj, "__dlpack__"):
        return None
    kind, index = dev()
    return int(kind), int(index)


def refuse_device(obj, name: str, kernel: str, where: str) -> InputError:
    """The error for an array whose memory the host cannot read (`where`: its device, in words)."""
    what = f"{type(obj).__module__.split('.')[0]}.{type(obj).__name__}"
    return _fail(name, kernel, f"is a {what} on {where}, but this run reads host memory: pass a CPU array instead "
                               f"(torch: tensor.cpu(); Warp: wp.clone(a, device='cpu'); JAX: jax.device_get(a))")


def as_host_array(obj, name: str, kernel: str) -> np.ndarray:
    """`obj` as a NumPy array over the same memory when the layout allows (see the module docstring): DLPack first,
    then NumPy's own protocols. Refuses device memory clearly by plane `name` and `kernel`."""
    if isinstance(obj, np.ndarray):
        return obj
    from eagle.array import DeviceArray

    if isinstance(obj, DeviceArray):  # eagle's own device memory: say how to run there, or copy on purpose
        raise _fail(name, kernel, f"is an eagle.Array on device '{obj.device}', but this run reads host memory: "
                                  f"deploy the kernel with target='{obj.device}' to read it where it lies, or pass "
                                  f"a.numpy() (a copy to the host)")
    dev = dlpack_device(obj)
    if dev is not None:
        if dev[0] not in HOST_DEVICES:
            where = f"{DEVICE_NAMES.get(dev[0], f'device type {dev[0]}')}:{dev[1]}"
            raise refuse_device(obj, name, kernel, where)
        if getattr(obj, "requires_grad", False) and hasattr(obj, "detach"):
            obj = obj.detach()  # a tensor that records gradients refuses DLPack export; the data is the same
        try:
            return np.from_dlpack(obj)
        except (BufferError, RuntimeError, TypeError, ValueError) as exc:
            dtype = getattr(obj, "dtype", "its dtype")
            raise _fail(name, kernel, f"cannot be read as a NumPy array ({dtype}: {exc}); pass float32 or float64 "
                                      f"values (int32 or int64 keys for an Index plane)") from None
    if hasattr(obj, "__cuda_array_interface__") and not hasattr(obj, "__array_interface__"):
        raise refuse_device(obj, name, kernel, "a CUDA device")
    return np.asarray(getattr(obj, "numpy", lambda: obj)())
