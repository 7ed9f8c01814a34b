"""DLPack export of device arrays (eagle/dlpack.py): an array on 'nvvm' hands out a kDLCUDA capsule over its memory
(no copy), released by the consumer's deleter or when collected unconsumed. The capsule is built and read back here
without a GPU (a stand-in buffer whose address is never dereferenced); a framework consuming it needs CUDA and
skips without it. A 'spirv' array's refusal is tested in tests/test_device_buffers.py."""

import ctypes
import gc

import numpy as np
import pytest

from eagle import dlpack
from eagle.array import DeviceArray


class _Runtime:
    def __init__(self):
        self.syncs = 0

    def synchronize(self):
        self.syncs += 1


class _Buffer:
    def __init__(self, ptr):
        self.ptr, self.runtime, self.nbytes = ptr, _Runtime(), 0


_get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer",
                                                                              ctypes.pythonapi))
_rename = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", ctypes.pythonapi))


def _fake(shape=(3, 5), dtype=np.float32) -> DeviceArray:
    return DeviceArray(_Buffer(0x7F0000001000), shape, dtype, "nvvm")


def test_an_nvvm_array_exports_a_cuda_capsule_over_its_memory_and_the_deleter_releases_it():
    a = _fake()
    cap = a.__dlpack__(stream=7)
    assert a.buffer.runtime.syncs == 1  # the data is ready on any stream before the consumer sees it
    m = ctypes.cast(_get(cap, b"dltensor"), ctypes.POINTER(dlpack.DLManagedTensor)).contents
    t = m.dl_tensor
    assert (t.data, t.device.device_type, t.device.device_id, t.ndim) == (0x7F0000001000, 2, 0, 2)
    assert [t.shape[0], t.shape[1]] == [3, 5] and not t.strides and t.byte_offset == 0
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (2, 32, 1)
    assert a.__dlpack_device__() == (2, 0)
    assert len(dlpack._LIVE) == 1
    assert _rename(cap, b"used_dltensor") == 0  # what a consumer does, then it calls the deleter when done
    m.deleter(ctypes.pointer(m))
    assert not dlpack._LIVE
    del cap
    gc.collect()
    assert not dlpack._LIVE


def test_an_unconsumed_capsule_releases_the_array_when_collected_and_bad_requests_are_refused():
    a = _fake((4,), np.int64)
    cap = a.__dlpack__()
    assert len(dlpack._LIVE) == 1
    del cap
    gc.collect()
    assert not dlpack._LIVE
    with pytest.raises(BufferError, match="never copies"):
        a.__dlpack__(copy=True)
    with pytest.raises(BufferError, match=r"lives on \(2, 0\), not \(1, 0\)"):
        a.__dlpack__(dl_device=(1, 0))
    with pytest.raises(BufferError, match="float16|complex64"):
        DeviceArray(_Buffer(1), (2,), np.complex64, "nvvm").__dlpack__()


def test_torch_reads_an_nvvm_array_through_dlpack():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA (torch.from_dlpack of a kDLCUDA capsule); the GPU check bundle runs it")
    import eagle

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = eagle.asarray(x, device="nvvm")
    t = torch.from_dlpack(d)
    assert t.is_cuda and t.shape == (3, 4) and np.array_equal(t.cpu().numpy(), x)
