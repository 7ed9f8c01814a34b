"""eagle.Array: what a run hands back. A thin, NumPy-convertible view of a result buffer with its device."""

from __future__ import annotations

import numpy as np


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

    def __repr__(self) -> str:
        return f"eagle.Array(shape={self.shape}, dtype={self.dtype}, device={self.device})"

    def __str__(self) -> str:
        return str(self._data)
