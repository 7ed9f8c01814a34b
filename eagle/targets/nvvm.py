"""The NVVM target's runtime: PTX (compiled by hawk/targets/nvvm.py) launched through cuda-bindings when an
NVIDIA driver is present."""

from __future__ import annotations

import ctypes
import os

import numpy as np

from eagle.targets.device import DeviceRuntime, Grid, missing


class CudaRuntime(DeviceRuntime):
    """Launch PTX through the CUDA driver API (cuda-bindings). Raises RuntimeMissing without a driver."""

    name = "cuda"
    float_atomics = True

    def __init__(self):
        try:
            from cuda.bindings import driver
        except ImportError as exc:
            raise missing("nvvm", "cuda-bindings", "pip install cuda-bindings") from exc
        try:
            (err,) = driver.cuInit(0)
        except Exception as exc:  # the bindings raise when libcuda.so cannot be loaded
            raise missing("nvvm", "an NVIDIA driver", f"cuInit failed: {exc}") from exc
        if err != driver.CUresult.CUDA_SUCCESS:
            raise missing("nvvm", "an NVIDIA GPU and driver", f"cuInit returned {err}")
        self.driver = driver
        err, count = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS or count == 0:
            raise missing("nvvm", "an NVIDIA GPU", "no CUDA device found")
        self.device = self._ok(driver.cuDeviceGet(0))
        self.context = self._ok(driver.cuDevicePrimaryCtxRetain(self.device))
        self._ok(driver.cuCtxSetCurrent(self.context))
        self._modules: dict[bytes, object] = {}

    def _ok(self, result):
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != self.driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"CUDA driver call failed: {err}")
        return rest[0] if len(rest) == 1 else (tuple(rest) if rest else None)

    def function(self, ptx: bytes, entry: str):
        key = ptx + entry.encode()
        if key not in self._modules:
            module = self._ok(self.driver.cuModuleLoadData(ptx + b"\0"))
            self._modules[key] = self._ok(self.driver.cuModuleGetFunction(module, entry.encode()))
        return self._modules[key]

    def launch(self, binary: bytes, entry: str, buffers: list[np.ndarray], written: list[bool], grid: Grid):
        d = self.driver
        fn = self.function(binary, entry)
        ptrs = []
        try:
            for a in buffers:
                p = self._ok(d.cuMemAlloc(max(a.nbytes, 8)))
                ptrs.append(p)
                if a.nbytes:
                    self._ok(d.cuMemcpyHtoD(p, a.ctypes.data, a.nbytes))
            # each memref argument is passed expanded: allocated, aligned, offset, size, stride
            values = []
            for p, a in zip(ptrs, buffers, strict=True):
                values += [ctypes.c_uint64(int(p)), ctypes.c_uint64(int(p)), ctypes.c_int64(0),
                           ctypes.c_int64(a.size), ctypes.c_int64(1)]
            params = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
            self._ok(d.cuLaunchKernel(fn, grid.groups, 1, 1, grid.block, 1, 1, 0, 0, ctypes.addressof(params), 0))
            self._ok(d.cuCtxSynchronize())
            for p, a, w in zip(ptrs, buffers, written, strict=True):
                if w and a.nbytes:
                    self._ok(d.cuMemcpyDtoH(a.ctypes.data, p, a.nbytes))
        finally:
            for p in ptrs:
                d.cuMemFree(p)


os.environ.setdefault("CUDA_MODULE_LOADING", "LAZY")
