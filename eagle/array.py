"""eagle.Array: what a run hands back. A thin, NumPy-convertible view of a result buffer with its device."""

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


def asarray(a, device: str = "cpu") -> Array:
    """An eagle.Array over `a`: an eagle.Array is returned as it is; anything else goes through np.asarray (no copy
    when `a` already is a NumPy array). Its data lives on the host ("cpu")."""
    if isinstance(a, Array):
        return a
    if device != "cpu":
        raise ValueError(f"eagle.asarray: arrays live on the host for now (device='cpu'), got device={device!r}")
    return Array(np.asarray(a), device)

