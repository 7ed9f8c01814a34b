"""LLVM IR -> object code inside this process, through the C API of the system's LLVM 22 (libLLVM.so.22.1).

The rocdl target needs LLVM's AMDGPU backend, which the MLIR wheel's LLVM lacks, so it used Debian's LLVM 22
tools: `opt -O3`, then `llc -O3`. Each tool process spent about 20 ms starting (loading libLLVM and registering
its targets) before doing 10-40 ms of work on a stage. Here the same pipeline (the `default<O3>` pass pipeline for
the target machine, then its code generator at the aggressive level) runs on a library loaded once: the objects are
byte-identical to the tools' (tests/test_rocdl_tools.py compares them) at a third of the time.

An LLVM error diagnostic would end the process under LLVM's default handler, so every context gets a handler that
collects the diagnostics, and errors become a RuntimeError with LLVM's words.
"""

from __future__ import annotations

import ctypes
import threading
from functools import cache

from hawk.abi.libraries import first_loadable

LIBRARY_NAMES = ("libLLVM.so.22.1", "libLLVM-22.so", "/usr/lib/llvm-22/lib/libLLVM.so.22.1")
_vp = ctypes.c_void_p
_str = ctypes.c_char_p
# the C API's enums: LLVMCodeGenOptLevel, LLVMRelocMode, LLVMCodeModel, LLVMCodeGenFileType, LLVMDiagnosticSeverity
OPT_AGGRESSIVE, RELOC_DEFAULT, CODE_MODEL_DEFAULT, OBJECT_FILE, DS_ERROR = 3, 0, 0, 1, 0
_DIAGNOSTIC = ctypes.CFUNCTYPE(None, _vp, _vp)
_lock = threading.Lock()  # loading the library, setting its options
_options: tuple[str, ...] | None = None


class _Api:
    """The few C functions used, with their types."""

    def __init__(self, lib: ctypes.CDLL):
        def fn(name, res, *args):
            f = getattr(lib, name)
            f.restype, f.argtypes = res, list(args)
            return f

        self.context_create = fn("LLVMContextCreate", _vp)
        self.context_dispose = fn("LLVMContextDispose", None, _vp)
        self.set_diagnostic_handler = fn("LLVMContextSetDiagnosticHandler", None, _vp, _DIAGNOSTIC, _vp)
        self.diag_description = fn("LLVMGetDiagInfoDescription", _vp, _vp)
        self.diag_severity = fn("LLVMGetDiagInfoSeverity", ctypes.c_int, _vp)
        self.dispose_message = fn("LLVMDisposeMessage", None, _vp)
        self.buffer_copy = fn("LLVMCreateMemoryBufferWithMemoryRangeCopy", _vp, _str, ctypes.c_size_t, _str)
        self.parse_ir = fn("LLVMParseIRInContext", ctypes.c_int, _vp, _vp, ctypes.POINTER(_vp), ctypes.POINTER(_vp))
        self.dispose_module = fn("LLVMDisposeModule", None, _vp)
        self.target_from_triple = fn("LLVMGetTargetFromTriple", ctypes.c_int, _str, ctypes.POINTER(_vp),
                                     ctypes.POINTER(_vp))
        self.create_tm = fn("LLVMCreateTargetMachine", _vp, _vp, _str, _str, _str, ctypes.c_int, ctypes.c_int,
                            ctypes.c_int)
        self.dispose_tm = fn("LLVMDisposeTargetMachine", None, _vp)
        self.pass_options = fn("LLVMCreatePassBuilderOptions", _vp)
        self.dispose_pass_options = fn("LLVMDisposePassBuilderOptions", None, _vp)
        self.run_passes = fn("LLVMRunPasses", _vp, _vp, _str, _vp, _vp)
        self.error_message = fn("LLVMGetErrorMessage", _vp, _vp)
        self.dispose_error_message = fn("LLVMDisposeErrorMessage", None, _vp)
        self.emit = fn("LLVMTargetMachineEmitToMemoryBuffer", ctypes.c_int, _vp, _vp, ctypes.c_int,
                       ctypes.POINTER(_vp), ctypes.POINTER(_vp))
        self.buffer_start = fn("LLVMGetBufferStart", _vp, _vp)
        self.buffer_size = fn("LLVMGetBufferSize", ctypes.c_size_t, _vp)
        self.dispose_buffer = fn("LLVMDisposeMemoryBuffer", None, _vp)
        self.parse_command_line = fn("LLVMParseCommandLineOptions", None, ctypes.c_int, ctypes.POINTER(_str), _str)
        self.lib = lib

    def message(self, ptr, dispose) -> str:
        """A C string LLVM allocated, as text; frees it with `dispose`."""
        if not ptr:
            return ""
        text = ctypes.string_at(ptr).decode(errors="replace")
        dispose(ptr)
        return text


def api(backend: str) -> _Api:
    """The loaded library with `backend`'s target (e.g. "AMDGPU") initialised; RuntimeError if it is missing.
    Loaded once per process, under a lock (builds may run in several threads)."""
    with _lock:
        return _load(backend)


@cache
def _load(backend: str) -> _Api:
    lib, why = first_loadable(LIBRARY_NAMES)
    if lib is None:
        raise RuntimeError("compiling for this target needs LLVM 22's shared library (libLLVM.so.22.1, Debian "
                           "package libllvm22, which llvm-22 installs; scripts/setup.sh does): " + "; ".join(why))
    a = _Api(lib)
    for part in ("TargetInfo", "Target", "TargetMC", "AsmPrinter"):
        getattr(lib, f"LLVMInitialize{backend}{part}")()
    return a


def set_options(a: _Api, options: tuple[str, ...]) -> None:
    """LLVM's command-line options (process-wide, settable once): a second, different set is refused."""
    global _options
    with _lock:
        if _options is None:
            argv = (_str * (len(options) + 1))(b"hawk", *(o.encode() for o in options))
            a.parse_command_line(len(options) + 1, argv, None)
            _options = options
        elif _options != options:
            raise RuntimeError(f"internal error: LLVM options {options} after {_options} in one process")


def object_code(a: _Api, ir: bytes, triple: str, cpu: str, what: str) -> bytes:
    """Textual or bitcode LLVM IR -> an object file for `triple`/`cpu`: `default<O3>`, then code generation at
    the aggressive level (as `opt -O3` then `llc -O3`). Raises RuntimeError naming `what` on any error."""
    errors: list[str] = []

    def on_diagnostic(info, _ctx):
        if a.diag_severity(info) == DS_ERROR:
            errors.append(a.message(a.diag_description(info), a.dispose_message))

    handler = _DIAGNOSTIC(on_diagnostic)  # kept alive until the context is gone
    ctx = a.context_create()
    tm = options = None
    try:
        a.set_diagnostic_handler(ctx, handler, None)
        buf = a.buffer_copy(ir, len(ir), b"stage")
        module, msg = _vp(), _vp()
        if a.parse_ir(ctx, buf, ctypes.byref(module), ctypes.byref(msg)):  # takes the buffer
            raise RuntimeError(f"{what} failed: LLVM cannot read the IR: {a.message(msg, a.dispose_message)}")
        try:
            target, msg = _vp(), _vp()
            if a.target_from_triple(triple.encode(), ctypes.byref(target), ctypes.byref(msg)):
                raise RuntimeError(f"{what} failed: {a.message(msg, a.dispose_message)}")
            tm = a.create_tm(target, triple.encode(), cpu.encode(), b"", OPT_AGGRESSIVE, RELOC_DEFAULT,
                             CODE_MODEL_DEFAULT)
            options = a.pass_options()
            err = a.run_passes(module, b"default<O3>", tm, options)
            if err:
                raise RuntimeError(f"{what} failed: {a.message(a.error_message(err), a.dispose_error_message)}")
            out = _vp()
            failed = a.emit(tm, module, OBJECT_FILE, ctypes.byref(msg), ctypes.byref(out))
            if failed or errors:
                words = "; ".join(errors) or a.message(msg, a.dispose_message)
                if out:
                    a.dispose_buffer(out)
                raise RuntimeError(f"{what} failed: {words}")
            data = ctypes.string_at(a.buffer_start(out), a.buffer_size(out))
            a.dispose_buffer(out)
            return data
        finally:
            a.dispose_module(module)
    finally:
        if options:
            a.dispose_pass_options(options)
        if tm:
            a.dispose_tm(tm)
        a.context_dispose(ctx)
