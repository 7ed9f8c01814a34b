"""The NVVM target's runtime: PTX (compiled by hawk/targets/nvvm.py) launched through cuda-bindings when an
NVIDIA driver is present.

A launch argument is a NumPy array (copied to fresh device memory and, when written, back) or a Placed device
buffer: memory eagle allocated for a device eagle.Array (`alloc`), or memory lent by a framework's CUDA array
(`lend`: torch, CuPy, Numba, Warp, JAX; eagle/targets/device_planes.py), whose pointer goes straight into the
launch. Before a launch that reads lent memory the context is synchronised, so the framework's pending writes to
it (on any of its streams) have landed. Every host<->device copy is counted in `transfers`. Device 0 only."""

from __future__ import annotations

import ctypes
import os

import numpy as np

from eagle.targets.device import DeviceRuntime, Grid, Placed, PointerBuffer, Transfers, missing


class CudaRuntime(DeviceRuntime):
    """Launch PTX through the CUDA driver API (cuda-bindings). Raises RuntimeMissing without a driver."""

    name = "cuda"
    target = "nvvm"
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
        self.transfers = Transfers()

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

    # ---- device memory for eagle.Arrays and lent framework arrays -----------------------------------------
    def alloc(self, nbytes: int) -> PointerBuffer:
        return PointerBuffer(self, int(self._ok(self.driver.cuMemAlloc(max(nbytes, 8)))), nbytes)

    def lend(self, ptr: int, nbytes: int, owner) -> PointerBuffer:
        """A framework's CUDA memory at `ptr`, used in place (`owner` kept alive, never freed here)."""
        return PointerBuffer(self, ptr, nbytes, owner)

    def free(self, ptr: int) -> None:
        self.driver.cuMemFree(self.driver.CUdeviceptr(ptr))

    def upload(self, buf: PointerBuffer, a: np.ndarray, what: str = "array") -> None:
        a = np.ascontiguousarray(a)
        self._ok(self.driver.cuMemcpyHtoD(self.driver.CUdeviceptr(buf.ptr), a.ctypes.data, a.nbytes))
        self.transfers.add("up", what, a.nbytes)

    def download(self, buf: PointerBuffer, a: np.ndarray, what: str = "array", offset: int = 0) -> None:
        self._ok(self.driver.cuCtxSynchronize())
        self._ok(self.driver.cuMemcpyDtoH(a.ctypes.data, self.driver.CUdeviceptr(buf.ptr + offset), a.nbytes))
        self.transfers.add("down", what, a.nbytes)

    def synchronize(self) -> None:
        """Wait for every launch and copy of the context (before a DLPack export hands memory to a consumer)."""
        self._ok(self.driver.cuCtxSynchronize())

    def device_copy(self, src: PointerBuffer, src_at: int, dst: PointerBuffer, dst_at: int, nbytes: int) -> None:
        """`nbytes` from `src` at byte `src_at` to `dst` at `dst_at`, on the device (not a transfer)."""
        if nbytes:
            d = self.driver
            self._ok(d.cuMemcpyDtoD(d.CUdeviceptr(dst.ptr + dst_at), d.CUdeviceptr(src.ptr + src_at), nbytes))

    def zero(self, buf: PointerBuffer) -> None:
        if buf.nbytes:
            self._ok(self.driver.cuMemsetD8(self.driver.CUdeviceptr(buf.ptr), 0, buf.nbytes))

    def launch(self, binary: bytes, entry: str, buffers: list, written: list[bool], grid: Grid,
               roles: list[str] | None = None):
        d = self.driver
        fn = self.function(binary, entry)
        owned, ptrs = [], []
        try:
            for k, a in enumerate(buffers):
                if isinstance(a, Placed):  # device memory: its pointer goes straight into the launch
                    ptrs.append(a.buffer.ptr)
                    continue
                p = self._ok(d.cuMemAlloc(max(a.nbytes, 8)))
                owned.append(p)
                ptrs.append(int(p))
                if a.nbytes:
                    self._ok(d.cuMemcpyHtoD(p, a.ctypes.data, a.nbytes))
                    self.transfers.add("up", roles[k] if roles else "buffer", a.nbytes)
            if any(isinstance(a, Placed) and a.buffer.owner is not None for a in buffers):
                self._ok(d.cuCtxSynchronize())  # a framework's pending writes to the memory it lent land first
            # each memref argument is passed expanded: allocated, aligned, offset, size, stride
            values = []
            for p, a in zip(ptrs, buffers, strict=True):
                values += [ctypes.c_uint64(p), ctypes.c_uint64(p), ctypes.c_int64(0), ctypes.c_int64(a.size),
                           ctypes.c_int64(1)]
            params = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
            self._ok(d.cuLaunchKernel(fn, grid.groups, 1, 1, grid.block, 1, 1, 0, 0, ctypes.addressof(params), 0))
            self._ok(d.cuCtxSynchronize())
            for k, (p, a, w) in enumerate(zip(ptrs, buffers, written, strict=True)):
                if w and a.nbytes and not isinstance(a, Placed):
                    self._ok(d.cuMemcpyDtoH(a.ctypes.data, d.CUdeviceptr(p), a.nbytes))
                    self.transfers.add("down", roles[k] if roles else "buffer", a.nbytes)
        finally:
            for p in owned:
                d.cuMemFree(p)


os.environ.setdefault("CUDA_MODULE_LOADING", "LAZY")
