"""What every algorithm shares: deployed plans cached per kernel, target and threads; inputs flattened to the
first `n` values with the reference's bounds rule; integer inputs brought to the Index planes hawk reads.

Plans are kept at module level: a plan compiles once per dtype specialisation (and keeps it), so a second call
of a statistic on the same dtype and target launches at once.

Device arrays (eagle.DeviceArray, docs/devices.md) go through the same helpers without leaving the device: a
prefix or a same-width view is a DeviceArray over the same buffer, `target` follows the inputs' device
(`pick_target`), and what the host cannot do in place (widening float16 or narrow integers) is refused by name.
"""

from __future__ import annotations

import os

import numpy as np

import eagle
from eagle.array import Array, DeviceArray

_PLANS: dict[tuple, object] = {}
_TARGETS = {None: "host", "host": "host", "cpu": "host", "spirv": "spirv", "nvvm": "nvvm", "rocdl": "rocdl",
            "auto": "auto"}
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
U64_WRAP = float(2**64)  # added to a uint64 read as int64 when its top bit is set


def plan(kernel, target: str | None, threads: int | None, unspecified: tuple[str, ...] = ()):
    """The deployed plan of `kernel` for a target and thread count (made once; $EAGLE_MIN_CHUNK is part of the key,
    since a plan reads it when made). `unspecified`: outputs stored by key that the caller reads only where lanes
    stored (a compaction's first `runs` values), so a run need not zero them (Plan.unspecified)."""
    tgt = resolve_target(target, kernel.name)
    key = (id(kernel), tgt, threads, os.environ.get("EAGLE_MIN_CHUNK", ""))
    p = _PLANS.get(key)
    if p is None:
        p = _PLANS[key] = eagle.deploy(kernel, target=tgt, threads=threads)
        p.unspecified = frozenset(unspecified)
    return p


def resolve_target(target, who: str) -> str:
    """An eagle target name for `target=` (None is the host, where eagle.Array data lives)."""
    if isinstance(target, str) or target is None:
        t = _TARGETS.get(target)
        if t is not None:
            return t
    raise ValueError(f"{who}: target= is one of 'host', 'spirv', 'nvvm', 'rocdl' or 'auto', got {target!r}")


def pick_target(target, values, who: str):
    """The target a call runs on: its `target=` when no input is a device array; else the device the device
    arrays are on (they must agree, and `target=`, when given, must name it)."""
    dev = None
    for v in values:
        if isinstance(v, DeviceArray):
            if dev is not None and v.device != dev:
                raise ValueError(f"{who}: inputs on devices '{dev}' and '{v.device}'; move one with "
                                 f"eagle.asarray(a, device='{dev}')")
            dev = v.device
    if dev is None or target is None:
        return target if dev is None else dev
    if resolve_target(target, who) != dev:
        raise ValueError(f"{who}: the data is on device '{dev}' but target={target!r}; leave target= out (a device "
                         f"array's device picks it), or pass a.numpy() to run elsewhere")
    return dev


def on_device(a) -> bool:
    return isinstance(a, DeviceArray)


def flat(a):
    """`a` in flat order (a DeviceArray: a 1-d DeviceArray over the same buffer)."""
    if isinstance(a, DeviceArray):
        return a if a.ndim == 1 else DeviceArray(a.buffer, (a.size,), a.dtype, a.device)
    return a.reshape(-1)


def view(a, dtype):
    """`a` read as another dtype of the same width (no copy; a DeviceArray over the same buffer)."""
    dtype = np.dtype(dtype)
    if isinstance(a, DeviceArray):
        return a if a.dtype == dtype else DeviceArray(a.buffer, a.shape, dtype, a.device)
    return a.view(dtype)


def part(a, lo: int, hi: int):
    """Elements lo:hi of a flat array: a view. On the device only lo == 0 is a view (a kernel binds a buffer from
    its start); the caller copies otherwise."""
    if isinstance(a, DeviceArray):
        if lo:
            raise ValueError("part of a device array from a nonzero start")
        return DeviceArray(a.buffer, (hi,), a.dtype, a.device)
    return a[lo:hi]


def device_empty(device: str, n: int, dtype) -> DeviceArray:
    """A fresh flat device array of n values (contents undefined) on `device`."""
    from eagle.targets import runtime

    dtype = np.dtype(dtype)
    return DeviceArray(runtime(device).alloc(n * dtype.itemsize), (n,), dtype, device)


def empty_like_on(ref, n: int, dtype):
    """np.empty(n, dtype), or a device array of it on ref's device when `ref` is a device array."""
    return device_empty(ref.device, n, dtype) if isinstance(ref, DeviceArray) else np.empty(n, dtype)


def device_copy(src: DeviceArray, dst: DeviceArray, at: int = 0) -> None:
    """src's bytes into dst from element `at`, on the device (not a host transfer)."""
    if src.size:
        nbytes = src.size * src.dtype.itemsize
        src.buffer.runtime.device_copy(src.buffer, 0, dst.buffer, at * dst.dtype.itemsize, nbytes)


def item(a, i: int):
    """Element i (negative: from the end) of a flat array as a NumPy scalar; a device array copies that one value
    to the host (a counted transfer of "value", not of a lane plane)."""
    if not isinstance(a, DeviceArray):
        return a[i]
    i = i % a.size
    out = np.empty(1, a.dtype)
    a.buffer.runtime.download(a.buffer, out, "value", i * a.dtype.itemsize)
    return out[0]


def result(a) -> Array:
    """An array result as an eagle.Array (a DeviceArray stays one)."""
    return a if isinstance(a, Array) else Array(a)


def host_only(a, who: str, what: str):
    """Refuse a device array where a step would need its values on the host (a dtype widening): say what to do."""
    if isinstance(a, DeviceArray):
        raise TypeError(f"{who}: {what} on device '{a.device}' is not read in place (it would be converted on the "
                        f"host); convert it before it goes to the device, or pass a.numpy()")
    return a


def host_array(data, who: str, name: str = "data") -> np.ndarray:
    """The NumPy array behind an input (an eagle.Array's own memory, or np.asarray of anything else); a device
    array is returned as it is (read in place by a plan on its device)."""
    if isinstance(data, DeviceArray):
        if data.dtype.kind not in "fiub":
            raise TypeError(f"{who}: {name} must hold numbers, got dtype {data.dtype}")
        return data
    a = data.numpy() if isinstance(data, Array) else np.asarray(data)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"{who}: {name} must hold numbers (floats, integers or booleans), got dtype {a.dtype}")
    _plain_float(a, who, name)
    if not a.dtype.isnative:  # the other byte order: read by value (the kernels' planes are native)
        a = a.astype(a.dtype.newbyteorder("="))
    return a


def _plain_float(a, who: str, name: str) -> None:
    """Refuse a float wider than float64 (longdouble): no kernel plane reads it, and narrowing it would round."""
    if a.dtype.kind == "f" and a.dtype.itemsize > 8:
        raise TypeError(f"{who}: {name} is {a.dtype}; floats are float16, float32 or float64 (convert with "
                        ".astype(np.float64))")


def prefix(a: np.ndarray, n, who: str, name: str = "data") -> np.ndarray:
    """The first `n` values of `a` in flat (row-major) order; n=None means all. A negative `n` or one past the
    array's size is a ValueError naming the function and the array."""
    whole = flat(a)  # a view for contiguous arrays, a copy otherwise
    if n is None:
        return whole
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{who}: n= takes a whole number of elements, got {n!r}")
    if n < 0 or n > whole.size:
        raise ValueError(f"{who}: n={n} is outside {name}, which has {whole.size} elements (0 <= n <= "
                         f"{whole.size})")
    return part(whole, 0, int(n))


def float_run(a: np.ndarray) -> np.ndarray:
    """A float input as the plane hawk reads: float32/float64 unchanged, float16 widened to float32 (exact)."""
    return host_only(a, "eagle.algorithms", "a float16 array").astype(np.float32) if a.dtype == np.float16 else a


def to_float(a, dtype, target, threads):
    """A float array in `dtype` (float32/float64) for a run that must compute in it: `a` itself when it has it;
    on the host a NumPy conversion (astype: widening is exact, narrowing rounds once to nearest even); on a
    device a fresh device array written by the copy kernel there (its store converts with astype's bits), so
    no lane plane crosses to the host. Plan.run promotes a float32 input beside a float64 one by itself on the
    host; this is for what it cannot do: a device array, or a run in another dtype than its inputs' (a scan in
    dst's dtype)."""
    dtype = np.dtype(dtype)
    if a.dtype == dtype:
        return a
    if not isinstance(a, DeviceArray):
        return a.astype(dtype)
    from eagle.algorithms.copying import _store

    out = device_empty(a.device, a.size, dtype)
    _store(a, out, target, threads)
    return out


def as_index(a: np.ndarray) -> tuple[np.ndarray, float]:
    """An integer (or boolean) input as an Index plane, and what to add to a value read negative so that it
    converts to its unsigned value: int32/int64 as they are; uint64 read as int64 without a copy (2**64 added
    back where the top bit is set); narrower types and uint32 widened on the host, since Index planes are
    int32 or int64 only."""
    if a.dtype in (np.dtype(np.int32), np.dtype(np.int64)):
        return a, 0.0
    if a.dtype == np.uint64:
        return view(a, np.int64), U64_WRAP
    host_only(a, "eagle.algorithms", f"a {a.dtype} array (Index planes are int32 or int64)")
    if a.dtype == np.uint32:
        return a.astype(np.int64), 0.0
    return a.astype(np.int32), 0.0


def is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f"


def cell(out) -> float:
    """A one-value result as a Python float."""
    return float(np.asarray(out).reshape(-1)[0])


def destination(dst, who: str, writes: str) -> np.ndarray:
    """The caller's array a function writes in place, flat: NumPy (or an eagle.Array's memory), C-contiguous,
    writable, float32/float64 or integer. `writes` names what the function writes, for the dtype refusal."""
    if isinstance(dst, DeviceArray):
        if dst.dtype.kind not in "fiu" or dst.dtype == np.float16:
            raise TypeError(f"{who}: dst is {dst.dtype}; {writes} float32, float64 or integer arrays")
        return flat(dst)
    d = dst.numpy() if isinstance(dst, Array) else dst
    if not isinstance(d, np.ndarray):
        raise TypeError(f"{who}: dst is written in place, so pass a NumPy array or an eagle.Array (got "
                        f"{type(dst).__name__})")
    if not d.flags.c_contiguous or not d.flags.writeable:
        raise ValueError(f"{who}: dst must be a writable C-contiguous array (pass np.ascontiguousarray(dst) and "
                         "read the result from it)")
    if d.dtype.kind not in "fiu" or d.dtype == np.float16 or d.dtype.itemsize > 8:
        raise TypeError(f"{who}: dst is {d.dtype}; {writes} float32, float64 or integer arrays")
    if not d.dtype.isnative:
        raise TypeError(f"{who}: dst is {d.dtype.str}, in the other byte order; {writes} arrays in the machine's "
                        f"byte order (pass dst.astype(dst.dtype.newbyteorder('=')) and read the result from it)")
    return d.reshape(-1)
