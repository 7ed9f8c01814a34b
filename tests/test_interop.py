"""Array interop: eagle.Array exports DLPack, and Plan.run takes any DLPack producer or NumPy-like object as a plane.

Pinned here: eagle.Array goes to torch / NumPy / Warp through DLPack over the same memory (and np.asarray still
gives the very array); a torch tensor or a Warp array is read where it lies when its layout is the run's (a bound
launch sees changes made to the tensor in place); a non-contiguous producer is copied and gives the same result;
a tensor that records gradients is accepted; device memory, a CUDA-only object and a dtype NumPy cannot read are
refused by plane and kernel, saying what to pass instead.
"""

import numpy as np
import pytest

import eagle
import hawk
from eagle import InputError
from eagle.interop import as_host_array
from hawk import Mutable, Scalar

torch = pytest.importorskip("torch")


@hawk.kernel
def io_scale(x: Scalar, w: Scalar, y: Mutable[Scalar]):
    y = 3.0 * x + w


class _OnDevice:
    """What a CUDA array looks like through DLPack (the machine running the suite may have no GPU)."""

    def __init__(self, kind=2):
        self.kind = kind

    def __dlpack__(self, **kw):
        raise AssertionError("device memory must not be read")

    def __dlpack_device__(self):
        return (self.kind, 1)


class _CudaOnly:
    __cuda_array_interface__ = {"shape": (4,), "typestr": "<f8", "data": (0, False), "version": 3}


def test_an_eagle_array_exports_dlpack_over_its_memory():
    out = eagle.deploy(io_scale).run(x=np.arange(5.0), w=np.ones(5))
    data = np.asarray(out)
    assert data is out.numpy()  # NumPy still gets the very array, not a view of it
    assert out.__dlpack_device__() == (1, 0)
    t = torch.from_dlpack(out)
    assert t.data_ptr() == data.ctypes.data and t.numpy().tobytes() == data.tobytes()
    n = np.from_dlpack(out)
    assert n.ctypes.data == data.ctypes.data
    again = eagle.deploy(io_scale).run(x=out, w=t)  # results feed a run directly
    assert np.array_equal(np.asarray(again), 3.0 * data + data)


def test_torch_and_warp_planes_are_read_where_they_lie():
    x = torch.linspace(0.0, 1.0, 7, dtype=torch.float64)
    w = torch.ones(7, dtype=torch.float64)
    want = eagle.deploy(io_scale).run(x=x.numpy().copy(), w=w.numpy().copy())
    assert np.asarray(eagle.deploy(io_scale).run(x=x, w=w)).tobytes() == np.asarray(want).tobytes()
    launch = eagle.deploy(io_scale).bind(x=x, w=w)
    first = np.array(launch.launch(), copy=True)
    x.mul_(2.0)  # a bound launch reads the tensor's own memory: it sees the change
    second = np.asarray(launch.launch())
    assert np.array_equal(first, np.asarray(want)) and np.array_equal(second, 3.0 * x.numpy() + 1.0)
    assert as_host_array(x, "x", "io_scale").ctypes.data == x.data_ptr()
    wp = pytest.importorskip("warp")
    wp.config.quiet = True
    a = wp.array(np.arange(4.0), dtype=wp.float64, device="cpu")
    assert as_host_array(a, "x", "io_scale").ctypes.data == a.ptr
    assert np.array_equal(np.asarray(eagle.deploy(io_scale).run(x=a, w=a)), 4.0 * np.arange(4.0))


def test_strided_and_grad_tensors_are_accepted():
    base = torch.arange(12.0, dtype=torch.float64).reshape(3, 4)
    col = base.t()[1]  # a strided view: the run copies it
    got = eagle.deploy(io_scale).run(x=col, w=torch.zeros(3, dtype=torch.float64))
    assert np.array_equal(np.asarray(got), 3.0 * col.numpy())
    g = torch.ones(3, dtype=torch.float64, requires_grad=True)
    assert np.array_equal(np.asarray(eagle.deploy(io_scale).run(x=g, w=g)), np.full(3, 4.0))


@pytest.mark.parametrize("obj, where", [(_OnDevice(2), "cuda:1"), (_OnDevice(10), "rocm:1"),
                                        (_CudaOnly(), "a CUDA device")])
def test_device_memory_is_refused_by_name(obj, where):
    with pytest.raises(InputError) as err:
        eagle.deploy(io_scale).run(x=obj, w=np.ones(4))
    msg = str(err.value)
    assert msg.startswith("plane 'x' of kernel 'io_scale':") and where in msg and "tensor.cpu()" in msg


def test_a_dtype_numpy_cannot_read_is_refused_by_name():
    with pytest.raises(InputError, match="plane 'w' of kernel 'io_scale'.*bfloat16.*float32 or float64"):
        eagle.deploy(io_scale).run(x=np.ones(3), w=torch.ones(3, dtype=torch.bfloat16))


def test_wrong_dtypes_through_dlpack_get_the_binders_message():
    with pytest.raises(InputError) as want:
        eagle.deploy(io_scale).run(x=np.ones(3, dtype=np.int32), w=np.ones(3))
    with pytest.raises(InputError) as got:
        eagle.deploy(io_scale).run(x=torch.ones(3, dtype=torch.int32), w=np.ones(3))
    assert str(got.value) == str(want.value)
