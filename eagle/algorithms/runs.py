"""unique and reduce_by_key: one result per run of equal adjacent keys, in order of appearance.

The keys need only be grouped (sorted, or equal keys adjacent): [7, 7, 2, 2, 7] has the runs 7, 2, 7. A key
starts a run when it differs (!=) from the key before it, so NaN keys are each their own run and 0.0 / -0.0 share
one (the run keeps its first key). Scans number the runs and fold each run's values, and the run's last lane
stores its result; unique stores where each run starts, and a second kernel over the runs takes their lengths
(docs/algorithms.md). Results are new eagle.Arrays of exactly the run count.
"""

from __future__ import annotations

import numpy as np

from eagle.algorithms._common import (
    as_index,
    empty_like_on,
    float_run,
    host_array,
    on_device,
    part,
    pick_target,
    plan,
    prefix,
    result,
    to_float,
)
from eagle.array import Array

OPS = ("sum", "min", "max")
_I32_MAX = (1 << 31) - 1
_UNTOUCHED = 32 << 20  # from this size malloc maps fresh zero pages: the part never written holds no memory
_FLIP = -(2.0**63)  # INT64_MIN: uint64 values read as int64 order as unsigned once their top bit is flipped


def _keys(keys, n, who: str) -> tuple[np.ndarray, np.ndarray]:
    """(the caller's key prefix, the plane the kernel reads): floats as Scalar planes (float16 widened),
    integers and booleans as Index planes."""
    a = host_array(keys, who, "keys")
    count = a.size if n is None else n
    k = prefix(a, count, who, "keys")
    return k, (float_run(k) if k.dtype.kind == "f" else as_index(k)[0])


def _count_dtype(size: int) -> type:
    return np.int32 if size <= _I32_MAX else np.int64


def _lanes(a):
    """A run's lane-count output as an array: a DeviceArray stays one, anything else becomes NumPy."""
    return a if on_device(a) else np.asarray(a)


def _back(plane: np.ndarray, dtype: np.dtype, target=None, threads=None) -> np.ndarray:
    """A result prefix in the caller's dtype. The kernels' compaction outputs are left for the run to allocate
    (lane-count planes: float in the run's type, integer as int64), since a passed array written at computed
    positions is staged through a copy: an int64 plane is narrowed here (its values fit, or wrap as the values'
    width says), uint64 is viewed, float16 rounds from float32. A short prefix of a plane under _UNTOUCHED bytes
    is copied out of it; a larger plane (np.zeros: pages mapped on first write) holds memory only for the prefix
    the kernel wrote, so the prefix is returned as a view of it (a copy cost as much as the kernel's stores).
    On the device: a view, or an integer narrowed by a copy kernel there."""
    if on_device(plane):
        if plane.dtype == dtype or (dtype.kind in "iu" and dtype.itemsize == plane.dtype.itemsize):
            return plane if plane.dtype == dtype else type(plane)(plane.buffer, plane.shape, dtype, plane.device)
        from eagle.algorithms.copying import _store

        out = empty_like_on(plane, plane.size, dtype)
        _store(plane, out, target, threads)
        return out
    if plane.dtype == dtype:
        whole = plane.base if isinstance(plane.base, np.ndarray) else plane
        return plane.copy() if 2 * plane.size < whole.size and whole.nbytes < _UNTOUCHED else plane
    if dtype.kind in "iu" and dtype.itemsize == plane.dtype.itemsize:
        return plane.view(dtype)
    return plane.astype(dtype)


def unique(keys, n: int | None = None, *, target: str | None = None,
           threads: int | None = None) -> tuple[Array, Array]:
    """(ukeys, counts): the first key of each run of equal adjacent keys among the first n (n=None: all), in
    keys' dtype, and each run's length (int32, int64 past 2**31 - 1 keys). n past keys is a ValueError; n=0
    gives two empty arrays."""
    from eagle.algorithms import _kernels_scan as K

    k, plane = _keys(keys, n, "unique")
    target = pick_target(target, (k,), "unique")
    cdt = _count_dtype(k.size)
    if k.size == 0:
        return Array(np.zeros(0, k.dtype)), Array(np.zeros(0, cdt))
    if plane.dtype.kind == "f":
        kern, planes = K.float_unique, {"x": plane}
    else:
        kern, planes = K.int_unique, {"k": plane}
    out = plan(kern, target, threads, ("ukeys", "starts")).run(**planes)
    r = _run_count(out["runs"], plane, target, threads)
    counts = empty_like_on(plane, r, cdt)  # each run's length: the next run's start (or the lane count) less its own
    plan(K.run_lengths, target, threads).run(starts=part(_lanes(out["starts"]), 0, r), nlanes=float(k.size),
                                             counts=counts)
    return result(_back(part(_lanes(out["ukeys"]), 0, r), k.dtype, target, threads)), result(counts)


def reduce_by_key(keys, values, n: int | None = None, op: str = "sum", *, target: str | None = None,
                  threads: int | None = None) -> tuple[Array, Array]:
    """(ukeys, reduced): the first key of each run of equal adjacent keys among the first n (n=None: keys.size),
    and the run's values reduced with op="sum", "min" or "max" in values' dtype. Integer sums wrap at the
    values' width; float sums add the run's values in order (blocked, the same bits everywhere: see
    docs/algorithms.md); min/max follow np.minimum/np.maximum (NaN wins). ValueError for another op or n past
    either array; n=0 gives two empty arrays."""
    from eagle.algorithms import _kernels_scan as K

    if op not in OPS:
        raise ValueError(f"reduce_by_key: op={op!r}; use 'sum', 'min' or 'max'")
    ka = host_array(keys, "reduce_by_key", "keys")
    va = host_array(values, "reduce_by_key", "values")
    count = ka.size if n is None else n
    k, kplane = _keys(ka, count, "reduce_by_key")
    v = prefix(va, count, "reduce_by_key", "values")
    target = pick_target(target, (k, v), "reduce_by_key")
    if k.size == 0:
        return Array(np.zeros(0, k.dtype)), Array(np.zeros(0, v.dtype))
    if v.dtype.kind == "f":
        vplane, flip = float_run(v), 0.0
    else:
        vplane, flip = as_index(v)[0], (_FLIP if v.dtype == np.uint64 else 0.0)
    if kplane.dtype.kind == "f" and vplane.dtype.kind == "f" and kplane.dtype != vplane.dtype:
        if kplane.dtype == np.float32:  # widening keys keeps their equalities: one float64 run (Plan.run
            kplane = to_float(kplane, np.float64, target, threads) if on_device(kplane) else kplane  # promotes)
        else:  # float64 keys, float32 values: number the runs first, then reduce over the run numbers
            ids = plan(K.float_run_ids, target, threads, ("ukeys",)).run(x=kplane)
            r = _run_count(ids["runs"], kplane, target, threads)
            _, _, out = _reduce(_lanes(ids["ids"]), vplane, flip, op, target, threads)
            return (result(_back(part(_lanes(ids["ukeys"]), 0, r), k.dtype, target, threads)),
                    result(_back(part(out, 0, r), v.dtype, target, threads)))
    r, ukeys, out = _reduce(kplane, vplane, flip, op, target, threads)
    return (result(_back(part(ukeys, 0, r), k.dtype, target, threads)),
            result(_back(part(out, 0, r), v.dtype, target, threads)))


def _reduce(kplane: np.ndarray, vplane: np.ndarray, flip: float, op: str, target,
            threads) -> tuple[int, np.ndarray, np.ndarray]:
    """Run the reduce kernel for these planes' kinds: (run count, first keys, reduced values), the last two
    lane-count planes of which the first `run count` values are the results."""
    from eagle.algorithms import _kernels_scan as K

    kk = "float" if kplane.dtype.kind == "f" else "int"
    vk = "float" if vplane.dtype.kind == "f" else "int"
    kern = getattr(K, f"{kk}_keys_{vk}_{op}")
    planes = {"x" if kk == "float" else "k": kplane, "v": vplane}
    planes["flip"] = flip if op != "sum" else 0.0  # (a shift would not cancel out of a sum)
    out = plan(kern, target, threads, ("ukeys", "out")).run(**planes)
    return _run_count(out["runs"], kplane, target, threads), _lanes(out["ukeys"]), _lanes(out["out"])


def _run_count(total, kplane: np.ndarray, target, threads) -> int:
    """The number of runs from a kernel's `runs` total (the sum of its run-start flags). Partial sums of ones
    are exact in float64, and in float32 while below 2**24 (a float32 total from there on may have rounded:
    the count is then taken again by a kernel whose last lane stores it)."""
    from eagle.algorithms import _kernels_scan as K

    t = np.asarray(total).reshape(-1)
    if t.dtype == np.float64 or float(t[0]) < 2.0**24:
        return int(t[0])
    runs = np.zeros(1, np.int64)
    kern, name = (K.float_run_count, "x") if kplane.dtype.kind == "f" else (K.int_run_count, "k")
    plan(kern, target, threads).run(runs=runs, **{name: kplane})
    return int(runs[0])
