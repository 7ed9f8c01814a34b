"""DLPack capsules over device memory eagle owns: what `DeviceArray.__dlpack__` hands a CUDA consumer
(torch.from_dlpack, CuPy, JAX) for an array on 'nvvm'.

A capsule is the classic, unversioned kind ("dltensor", a DLManagedTensor: dlpack.h 0.8): the memory is not
copied, the array (and so its buffer) stays alive until the consumer calls the tensor's deleter, or until the
capsule is collected unconsumed. Only CUDA memory is exported this way; a Vulkan buffer (DLPack's kDLVulkan) has
no consumer among the frameworks, so a 'spirv' array refuses (eagle/array.py).
"""

from __future__ import annotations

import ctypes

import numpy as np

KDL_CUDA = 2
_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}  # kDLInt, kDLUInt, kDLFloat, kDLBool
_NAME = b"dltensor"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

_LIVE: dict[int, tuple] = {}  # managed tensor address -> (the struct, its shape array, the exporting array)


@_DELETER
def _delete(managed) -> None:
    _LIVE.pop(ctypes.addressof(managed.contents), None)


_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _capi(name: str, restype, *argtypes):
    """A private prototype of a C-API function (ctypes.pythonapi's attributes are shared with every other user of
    them in the process, who may set other argtypes)."""
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_new = _capi("PyCapsule_New", ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, _DESTRUCTOR)
_is_valid = _capi("PyCapsule_IsValid", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
_pointer = _capi("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)


@_DESTRUCTOR
def _unconsumed(capsule) -> None:
    """A capsule collected while still named "dltensor" was never consumed: release the tensor ourselves."""
    if _is_valid(capsule, _NAME):
        _LIVE.pop(_pointer(capsule, _NAME), None)


def capsule(ptr: int, shape: tuple[int, ...], dtype: np.dtype, device: tuple[int, int], owner) -> object:
    """A DLPack capsule over `ptr` (C-contiguous `shape` of `dtype` on DLPack `device`), keeping `owner` alive."""
    dtype = np.dtype(dtype)
    if dtype.kind not in _CODES:
        raise BufferError(f"DLPack export: dtype {dtype} has no DLPack type here")
    dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
    m = DLManagedTensor()
    m.dl_tensor = DLTensor(ctypes.c_void_p(int(ptr)), DLDevice(*device), len(shape),
                           DLDataType(_CODES[dtype.kind], 8 * dtype.itemsize, 1), dims, None, 0)
    m.manager_ctx, m.deleter = None, _delete
    at = ctypes.addressof(m)
    _LIVE[at] = (m, dims, owner)
    return _new(at, _NAME, _unconsumed)
