"""The ROCDL target's runtime: HSA code objects (compiled by hawk/targets/rocdl.py) launched through the HIP runtime
(libamdhip64, with ctypes) when ROCm and an AMD GPU are present. NumPy and ctypes only, no MLIR."""

from __future__ import annotations

import ctypes
import ctypes.util
import os

import numpy as np

from eagle.targets.device import DeviceRuntime, Grid, Placed, PointerBuffer, Transfers, missing
from hawk.abi.libraries import first_loadable


# ---- launch (NumPy and ctypes only) -------------------------------------------------------------------------
class HipRuntime(DeviceRuntime):
    """Launch code objects through the HIP runtime (libamdhip64) with ctypes: no Python package is needed, only
    ROCm. Raises RuntimeMissing (\"no ROCm runtime\") where libamdhip64 or an AMD GPU is absent."""

    name = "hip"
    target = "rocdl"
    float_atomics = True
    H2D, D2H = 1, 2  # hipMemcpyHostToDevice, hipMemcpyDeviceToHost

    def __init__(self):
        path = os.environ.get("HAWK_HIP_LIBRARY") or ctypes.util.find_library("amdhip64")
        cands = [path] if path else []
        cands += ["libamdhip64.so", "/opt/rocm/lib/libamdhip64.so"]
        lib, errors = first_loadable(cands)
        if lib is None:
            raise missing("rocdl", "the HIP runtime of ROCm (libamdhip64.so)",
                          "no ROCm runtime: " + (errors[-1] if errors else "libamdhip64.so not found"))
        self.lib = lib
        for fn, args in (("hipInit", [ctypes.c_uint]), ("hipGetDeviceCount", [ctypes.POINTER(ctypes.c_int)]),
                         ("hipSetDevice", [ctypes.c_int]),
                         ("hipModuleLoadData", [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]),
                         ("hipModuleGetFunction", [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                                   ctypes.c_char_p]),
                         ("hipMalloc", [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]),
                         ("hipFree", [ctypes.c_void_p]),
                         ("hipMemcpy", [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]),
                         ("hipModuleLaunchKernel", [ctypes.c_void_p] + [ctypes.c_uint] * 7 +
                          [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
                         ("hipDeviceSynchronize", [])):
            f = getattr(lib, fn)
            f.argtypes, f.restype = args, ctypes.c_int
        err = lib.hipInit(0)
        if err != 0:
            raise missing("rocdl", "an AMD GPU with the ROCm driver", f"no ROCm runtime: hipInit returned {err}")
        n = ctypes.c_int(0)
        if lib.hipGetDeviceCount(ctypes.byref(n)) != 0 or n.value == 0:
            raise missing("rocdl", "an AMD GPU", "no ROCm runtime device: hipGetDeviceCount found none")
        self._ok(lib.hipSetDevice(0), "hipSetDevice")
        self._functions: dict[bytes, ctypes.c_void_p] = {}
        self.transfers = Transfers()
        self._images: list = []

    @staticmethod
    def _ok(err: int, what: str) -> None:
        if err != 0:
            raise RuntimeError(f"HIP call {what} failed with error {err}")

    def function(self, binary: bytes, entry: str) -> ctypes.c_void_p:
        key = binary + entry.encode()
        if key not in self._functions:
            module, fn = ctypes.c_void_p(), ctypes.c_void_p()
            image = ctypes.create_string_buffer(binary, len(binary))
            self._ok(self.lib.hipModuleLoadData(ctypes.byref(module), image), "hipModuleLoadData")
            self._ok(self.lib.hipModuleGetFunction(ctypes.byref(fn), module, entry.encode()), "hipModuleGetFunction")
            self._functions[key] = fn
            self._images.append(image)  # kept alive with the module loaded from it
        return self._functions[key]

    # ---- device memory for eagle.Arrays (as nvvm.py's; lent memory: HIP arrays have no common interface) ----
    def alloc(self, nbytes: int) -> PointerBuffer:
        p = ctypes.c_void_p()
        self._ok(self.lib.hipMalloc(ctypes.byref(p), max(nbytes, 8)), "hipMalloc")
        return PointerBuffer(self, p.value, nbytes)

    def lend(self, ptr: int, nbytes: int, owner) -> PointerBuffer:
        return PointerBuffer(self, ptr, nbytes, owner)

    def free(self, ptr: int) -> None:
        self.lib.hipFree(ctypes.c_void_p(ptr))

    def upload(self, buf: PointerBuffer, a: np.ndarray, what: str = "array") -> None:
        a = np.ascontiguousarray(a)
        self._ok(self.lib.hipMemcpy(ctypes.c_void_p(buf.ptr), a.ctypes.data, a.nbytes, self.H2D), "hipMemcpy")
        self.transfers.add("up", what, a.nbytes)

    def download(self, buf: PointerBuffer, a: np.ndarray, what: str = "array", offset: int = 0) -> None:
        self._ok(self.lib.hipMemcpy(a.ctypes.data, ctypes.c_void_p(buf.ptr + offset), a.nbytes, self.D2H),
                 "hipMemcpy")
        self.transfers.add("down", what, a.nbytes)

    def device_copy(self, src: PointerBuffer, src_at: int, dst: PointerBuffer, dst_at: int, nbytes: int) -> None:
        """`nbytes` from `src` at byte `src_at` to `dst` at `dst_at`, on the device (not a transfer)."""
        if nbytes:
            self._ok(self.lib.hipMemcpy(ctypes.c_void_p(dst.ptr + dst_at), ctypes.c_void_p(src.ptr + src_at), nbytes,
                                        3), "hipMemcpy")  # 3: hipMemcpyDeviceToDevice

    def zero(self, buf: PointerBuffer) -> None:
        if buf.nbytes:
            self._ok(self.lib.hipMemset(ctypes.c_void_p(buf.ptr), 0, buf.nbytes), "hipMemset")

    def launch(self, binary: bytes, entry: str, buffers: list, written: list[bool], grid: Grid,
               roles: list[str] | None = None):
        lib = self.lib
        fn = self.function(binary, entry)
        ptrs: list[ctypes.c_void_p] = []
        owned: list[ctypes.c_void_p] = []
        try:
            for k, a in enumerate(buffers):
                if isinstance(a, Placed):  # device memory: its pointer goes straight into the launch
                    ptrs.append(ctypes.c_void_p(a.buffer.ptr))
                    continue
                p = ctypes.c_void_p()
                self._ok(lib.hipMalloc(ctypes.byref(p), max(a.nbytes, 8)), "hipMalloc")
                ptrs.append(p)
                owned.append(p)
                if a.nbytes:
                    self._ok(lib.hipMemcpy(p, a.ctypes.data, a.nbytes, self.H2D), "hipMemcpy")
                    self.transfers.add("up", roles[k] if roles else "buffer", a.nbytes)
            # each memref argument is passed expanded: allocated, aligned, offset, size, stride
            values = []
            for p, a in zip(ptrs, buffers, strict=True):
                values += [ctypes.c_uint64(p.value), ctypes.c_uint64(p.value), ctypes.c_int64(0),
                           ctypes.c_int64(a.size), ctypes.c_int64(1)]
            params = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
            self._ok(lib.hipModuleLaunchKernel(fn, grid.groups, 1, 1, grid.block, 1, 1, 0, None, params, None),
                     "hipModuleLaunchKernel")
            self._ok(lib.hipDeviceSynchronize(), "hipDeviceSynchronize")
            for k, (p, a, w) in enumerate(zip(ptrs, buffers, written, strict=True)):
                if w and a.nbytes and not isinstance(a, Placed):
                    self._ok(lib.hipMemcpy(a.ctypes.data, p, a.nbytes, self.D2H), "hipMemcpy")
                    self.transfers.add("down", roles[k] if roles else "buffer", a.nbytes)
        finally:
            for p in owned:
                lib.hipFree(p)
