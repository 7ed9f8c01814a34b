"""Plane types: what each kernel parameter is, as written in annotations.

A *plane* is one kernel input or output. Per-lane planes carry one value per lane (``Scalar``, ``Vector[n]``,
``Matrix[r, c]``, ``Index``); ``Param`` is one number per run; ``Table[...]`` a fixed-shape input read with
``.at``; ``Grid[...]`` names the lane axes; ``Mutable[...]`` marks an output (a per-lane plane, a cell, or a
scatter sink with named axes).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Payload:
    """The shape of one lane's value: () for Scalar, (n,) for Vector[n], (r, c) for Matrix[r, c]."""

    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def describe(self) -> str:
        if not self.shape:
            return "Scalar"
        if len(self.shape) == 1:
            return f"Vector[{self.shape[0]}]"
        return f"Matrix[{self.shape[0]}, {self.shape[1]}]"


class _PayloadType:
    """Base of the annotation objects Scalar, Vector[n] and Matrix[r, c]."""

    payload: Payload

    def __repr__(self) -> str:
        return self.payload.describe()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _PayloadType) and other.payload == self.payload

    def __hash__(self) -> int:
        return hash(self.payload)


class _ScalarType(_PayloadType):
    payload = Payload(())


Scalar = _ScalarType()


class _VectorType(_PayloadType):
    def __init__(self, n: int):
        self.payload = Payload((_extent(n, "Vector"),))


class _MatrixType(_PayloadType):
    def __init__(self, r: int, c: int):
        self.payload = Payload((_extent(r, "Matrix"), _extent(c, "Matrix")))


class _Generic:
    """`Vector[n]`-style subscription on a class-like object."""

    def __init__(self, name: str, make):
        self._name, self._make = name, make

    def __getitem__(self, item):
        return self._make(*item) if isinstance(item, tuple) else self._make(item)

    def __repr__(self) -> str:
        return self._name


Vector = _Generic("Vector", _VectorType)
Matrix = _Generic("Matrix", _MatrixType)


def _extent(n, what: str) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise TypeError(f"{what} extents must be positive integers, got {n!r}")
    return n


class _IndexType:
    """An integer plane (int32 or int64), one key or lane index per lane."""

    sorted = False

    def __repr__(self) -> str:
        return "Index"


Index = _IndexType()


class _SortedIndexType(_IndexType):
    sorted = True

    def __repr__(self) -> str:
        return "Sorted[Index]"


class _SortedGeneric:
    def __getitem__(self, item):
        if item is not Index:
            raise TypeError("Sorted[...] takes Index: write Sorted[Index]")
        return _SortedIndexType()


Sorted = _SortedGeneric()


class _ParamType:
    def __repr__(self) -> str:
        return "Param"


Param = _ParamType()


@dataclass(frozen=True)
class Axis:
    """One named axis; extent None means bound at run time."""

    label: str
    extent: int | None


def _axes(item, what: str, allow_open_first: bool) -> tuple[Axis, ...]:
    items = item if isinstance(item, tuple) else (item,)
    axes: list[Axis] = []
    for k, it in enumerate(items):
        if isinstance(it, slice):
            if not isinstance(it.start, str) or it.step is not None:
                raise TypeError(f'{what} axes are written "label":extent, got {it!r}')
            axes.append(Axis(it.start, _extent(it.stop, what)))
        elif isinstance(it, str):
            if not allow_open_first or k != 0:
                raise TypeError(
                    f'{what}[...]: only the first Grid axis may take its extent at run time; write "{it}":n'
                    if allow_open_first else f'{what}[...] axes need extents: write "{it}":n')
            axes.append(Axis(it, None))
        else:
            raise TypeError(f'{what} axes are written "label":extent, got {it!r}')
    labels = [a.label for a in axes]
    if len(set(labels)) != len(labels):
        raise TypeError(f"{what}[...] repeats an axis label: {labels}")
    return tuple(axes)


class _AxesType:
    kind = ""

    def __init__(self, axes: tuple[Axis, ...]):
        self.axes = axes

    @property
    def shape(self) -> tuple[int | None, ...]:
        return tuple(a.extent for a in self.axes)

    def __repr__(self) -> str:
        inner = ", ".join(f'"{a.label}"' if a.extent is None else f'"{a.label}":{a.extent}' for a in self.axes)
        return f"{self.kind}[{inner}]"


class _TableType(_AxesType):
    kind = "Table"


class _GridType(_AxesType):
    kind = "Grid"


class _SinkType(_AxesType):
    kind = "Mutable"


Table = _Generic("Table", lambda *items: _TableType(_axes(items, "Table", False)))
Grid = _Generic("Grid", lambda *items: _GridType(_axes(items, "Grid", True)))


class _MutableType:
    """Mutable[Scalar | Vector[n] | Matrix[r, c]]: an output plane or cell (a per-lane one may have another float
    dtype than the run's); Mutable[Index]: an integer output plane (int8, int16, int32 or int64, one value per lane
    or written by key)."""

    def __init__(self, inner: _PayloadType | _IndexType):
        self.inner = inner

    @property
    def integer(self) -> bool:
        return isinstance(self.inner, _IndexType)

    @property
    def payload(self) -> Payload:
        return Payload(()) if self.integer else self.inner.payload

    def __repr__(self) -> str:
        return f"Mutable[{self.inner!r}]"


def _mutable(*items):
    if len(items) == 1 and isinstance(items[0], _PayloadType):
        return _MutableType(items[0])
    if len(items) == 1 and isinstance(items[0], _IndexType):
        if items[0].sorted:
            raise TypeError("Mutable[Sorted[Index]] is not a plane type: an integer output is Mutable[Index]")
        return _MutableType(items[0])
    if all(isinstance(i, slice) for i in items):
        return _SinkType(_axes(items, "Mutable", False))
    raise TypeError('Mutable[...] takes Scalar, Vector[n], Matrix[r, c], Index or sink axes such as '
                    'Mutable["bin":8]')


Mutable = _Generic("Mutable", _mutable)

PayloadType = _PayloadType
IndexType = _IndexType
ParamType = _ParamType
TableType = _TableType
GridType = _GridType
SinkType = _SinkType
MutableType = _MutableType
