"""eagle.Array: what a run hands back. A thin, NumPy-convertible view of a result buffer with its device; a
DeviceArray keeps its data in a GPU target's memory (eagle.asarray(a, device="spirv"), or a run's results when
its inputs were there: docs/devices.md)."""

from __future__ import annotations

import numpy as np

_UNSET = object()  # an argument NumPy's np.sum/np.max/... pass and a plain `a.sum()` does not


class Array:
    """A run's output. `np.asarray(a)` gives the data without a copy on the host."""

    __slots__ = ("_data", "device")

    def __init__(self, data: np.ndarray, device: str = "cpu"):
        self._data = data
        self.device = device

    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return self._data.size

    def numpy(self) -> np.ndarray:
        """The data as a NumPy array (the same memory on the host)."""
        return self._data

    def __array__(self, dtype=None, copy=None):
        if copy:
            return np.array(self._data, dtype=dtype, copy=True)
        return self._data if dtype is None else self._data.astype(dtype, copy=False)

    # ---- interop: DLPack over the same memory (docs/bridges.md). No __array_interface__ on purpose: NumPy
    # reads it before __array__, and np.asarray(a) would then be a new view instead of the very array (which
    # callers rely on: doors.py, tests/test_run_safety.py); `__array__` above is already zero-copy. --------------
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule over the result's memory (torch.from_dlpack, jax.dlpack, wp.from_dlpack, ...)."""
        if self.device != "cpu":
            raise BufferError(f"eagle.Array on {self.device}: only host arrays export DLPack for now")
        return self._data.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """(1, 0): DLPack's CPU device (eagle hands back host memory)."""
        return (1, 0)

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, item):
        return self._data[item]

    def __iter__(self):
        return iter(self._data)

    def __float__(self) -> float:
        return float(self._data.reshape(-1)[0]) if self._data.size == 1 else float(self._data)

    def tolist(self):
        return self._data.tolist()

    # ---- reductions of every component (eagle.algorithms.reductions: hawk kernels, the reference's rules) ----
    # NumPy's np.sum/np.min/np.max/np.mean call these methods with axis=/out=: such calls (any NumPy keyword)
    # go to NumPy's own method on the data, as before these methods existed.
    def _numpy(self, name: str, given: dict):
        return getattr(self._data, name)(**{k: v for k, v in given.items() if v is not _UNSET})

    def sum(self, axis=_UNSET, dtype=_UNSET, out=_UNSET, *, target: str | None = None, threads: int | None = None,
            **numpy_keywords) -> float:
        """The sum of every component as a Python float: float32/float64 in their own precision (hawk's ordered
        tree: the same bits on every run and target), integers exact modulo 2**64. 0.0 when empty."""
        if numpy_keywords or _UNSET is not axis or _UNSET is not dtype or _UNSET is not out:
            return self._numpy("sum", dict(numpy_keywords, axis=axis, dtype=dtype, out=out))
        from eagle.algorithms.reductions import array_sum

        return array_sum(self, target=target, threads=threads)

    def min(self, axis=_UNSET, out=_UNSET, *, target: str | None = None, threads: int | None = None,
            **numpy_keywords) -> float:
        """The smallest component as a Python float: NaN if any is NaN, -0.0 of 0.0 and -0.0; ValueError when
        empty."""
        if numpy_keywords or _UNSET is not axis or _UNSET is not out:
            return self._numpy("min", dict(numpy_keywords, axis=axis, out=out))
        from eagle.algorithms.reductions import array_min

        return array_min(self, target=target, threads=threads)

    def max(self, axis=_UNSET, out=_UNSET, *, target: str | None = None, threads: int | None = None,
            **numpy_keywords) -> float:
        """The largest component as a Python float: NaN if any is NaN, 0.0 of 0.0 and -0.0; ValueError when
        empty."""
        if numpy_keywords or _UNSET is not axis or _UNSET is not out:
            return self._numpy("max", dict(numpy_keywords, axis=axis, out=out))
        from eagle.algorithms.reductions import array_max

        return array_max(self, target=target, threads=threads)

    def mean(self, axis=_UNSET, dtype=_UNSET, out=_UNSET, *, target: str | None = None, threads: int | None = None,
             **numpy_keywords) -> float:
        """`self.sum() / self.size` in Python floats; NaN when empty."""
        if numpy_keywords or _UNSET is not axis or _UNSET is not dtype or _UNSET is not out:
            return self._numpy("mean", dict(numpy_keywords, axis=axis, dtype=dtype, out=out))
        from eagle.algorithms.reductions import array_mean

        return array_mean(self, target=target, threads=threads)

    def __repr__(self) -> str:
        return f"eagle.Array(shape={self.shape}, dtype={self.dtype}, device={self.device})"

    def __str__(self) -> str:
        return str(self._data)


# DLPack device types of the GPU targets' memory (dlpack.h's DLDeviceType)
_DLPACK = {"spirv": 7, "nvvm": 2, "rocdl": 10}


class DeviceArray(Array):
    """An eagle.Array whose data lives in a GPU target's device memory (`device`: the target's name, "spirv",
    "nvvm" or "rocdl"). A plan on that target reads it where it lies; `numpy()` / `np.asarray(a)` copy it to the
    host (one counted transfer each time); `sum()`/`min()`/`max()`/`mean()` run on the device; anything else that
    needs values (indexing, printing) goes through that copy. docs/devices.md."""

    __slots__ = ("buffer", "_shape", "_dtype")

    def __init__(self, buffer, shape: tuple[int, ...], dtype, device: str):
        super().__init__(None, device)
        self.buffer, self._shape, self._dtype = buffer, tuple(shape), np.dtype(dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._shape))

    def numpy(self) -> np.ndarray:
        """A fresh host copy of the data (one transfer from the device)."""
        out = np.empty(self._shape, self._dtype)
        if out.size:
            self.buffer.runtime.download(self.buffer, out)
        return out

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError(f"eagle.Array on device '{self.device}': reading it on the host needs a copy")
        a = self.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    @property
    def __cuda_array_interface__(self) -> dict:
        """CUDA's array interface (version 3) for an array on 'nvvm': torch.as_tensor(a, device="cuda"), CuPy,
        Numba and Warp read the device memory in place."""
        ptr = getattr(self.buffer, "ptr", None)
        if self.device != "nvvm" or ptr is None:
            raise AttributeError(f"eagle.Array on device '{self.device}' has no __cuda_array_interface__")
        return {"shape": self._shape, "typestr": self._dtype.str, "data": (int(ptr), False), "version": 3,
                "strides": None, "stream": None}

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """On 'nvvm': a DLPack capsule (kDLCUDA, unversioned) over the device memory, no copy; the context is
        synchronised first, so the data is ready on any consumer stream. Elsewhere a BufferError: no framework
        consumes a Vulkan (spirv) or HIP capsule from eagle; a.numpy() is the way out (docs/devices.md)."""
        ptr = getattr(self.buffer, "ptr", None)
        if self.device != "nvvm" or ptr is None:
            raise BufferError(f"eagle.Array on device '{self.device}' does not export DLPack: no framework reads "
                              f"this device's memory through it; pass it to a plan on target '{self.device}', or "
                              "take a host copy with a.numpy() (np.from_dlpack(eagle.asarray(a.numpy())) works)")
        if copy:
            raise BufferError("eagle.Array on 'nvvm': DLPack export never copies (copy=True refused)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"eagle.Array on 'nvvm' lives on {self.__dlpack_device__()}, not {tuple(dl_device)}")
        sync = getattr(self.buffer.runtime, "synchronize", None)
        if sync is not None:
            sync()
        from eagle.dlpack import capsule

        return capsule(ptr, self._shape, self._dtype, self.__dlpack_device__(), self)

    def __dlpack_device__(self) -> tuple[int, int]:
        """(DLPack device type, 0): 7 Vulkan, 2 CUDA, 10 ROCm."""
        return (_DLPACK.get(self.device, 12), 0)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d eagle.Array")
        return self._shape[0]

    def __getitem__(self, item):
        return self.numpy()[item]

    def __iter__(self):
        return iter(self.numpy())

    def __float__(self) -> float:
        return float(Array(self.numpy()))

    def tolist(self):
        return self.numpy().tolist()

    def _numpy(self, name: str, given: dict):
        return getattr(self.numpy(), name)(**{k: v for k, v in given.items() if v is not _UNSET})

    # reductions run on the array's device (a plan on its target reads it in place; only the total comes back);
    # NumPy's keywords (axis=, out=, ...) go to NumPy's method on a host copy
    def _reduce(self, name: str, given: dict, target, threads) -> float:
        if any(v is not _UNSET for v in given.values()):
            return self._numpy(name, given)
        from eagle.algorithms import reductions

        return getattr(reductions, f"array_{name}")(self, target=target, threads=threads)

    def sum(self, axis=_UNSET, dtype=_UNSET, out=_UNSET, *, target: str | None = None, threads: int | None = None,
            **numpy_keywords) -> float:
        """As Array.sum, run on the array's device (target= may only name it)."""
        return self._reduce("sum", dict(numpy_keywords, axis=axis, dtype=dtype, out=out), target, threads)

    def min(self, axis=_UNSET, out=_UNSET, *, target: str | None = None, threads: int | None = None,
            **numpy_keywords) -> float:
        return self._reduce("min", dict(numpy_keywords, axis=axis, out=out), target, threads)

    def max(self, axis=_UNSET, out=_UNSET, *, target: str | None = None, threads: int | None = None,
            **numpy_keywords) -> float:
        return self._reduce("max", dict(numpy_keywords, axis=axis, out=out), target, threads)

    def mean(self, axis=_UNSET, dtype=_UNSET, out=_UNSET, *, target: str | None = None, threads: int | None = None,
             **numpy_keywords) -> float:
        return self._reduce("mean", dict(numpy_keywords, axis=axis, dtype=dtype, out=out), target, threads)

    def __str__(self) -> str:
        return str(self.numpy())


def asarray(a, device: str = "cpu") -> Array:
    """An eagle.Array over `a` on `device`: "cpu" (also "host"), or a GPU target, "spirv", "nvvm" or "rocdl",
    whose runtime keeps the data in device memory (one counted copy there; a plan on that target then reads it
    in place). An eagle.Array already on `device` is returned as it is; one on another device is copied through
    the host; on "nvvm", a framework's C-contiguous CUDA array is wrapped where it lies (no copy). On the host,
    anything else goes through np.asarray (no copy when `a` already is a NumPy array)."""
    if device == "host":
        device = "cpu"
    if isinstance(a, Array) and a.device == device:
        return a
    if device == "cpu":
        return Array(np.asarray(a), device)
    if device not in _DLPACK:
        raise ValueError(f"eagle.asarray: device={device!r} is not one eagle keeps arrays on; use 'cpu' or a GPU "
                         f"target: {sorted(_DLPACK)}")
    from eagle.targets import runtime

    if device == "nvvm":  # a framework's CUDA array (torch, CuPy, Numba, Warp, JAX): its memory, lent, no copy
        from eagle.targets.device_planes import lent_cuda

        lent = lent_cuda(a, runtime(device))
        if lent is not None:
            return lent
    data = np.ascontiguousarray(np.asarray(a))
    if data.dtype.kind not in "fiub" or data.dtype.hasobject:
        raise ValueError(f"eagle.asarray: a device array holds numbers, got dtype {data.dtype}")
    rt = runtime(device)
    buf = rt.alloc(data.nbytes)
    if data.size:
        rt.upload(buf, data)
    return DeviceArray(buf, data.shape, data.dtype, device)
