"""What a name in a kernel body can stand for besides a lane value: a plane, the grid, a sink..."""

from __future__ import annotations

from dataclasses import dataclass

from hawk.signature import PlaneSpec


@dataclass(frozen=True)
class PlaneRef:
    """An input plane (per-lane Scalar/Vector/Matrix or Index): reads as this lane's value."""

    spec: PlaneSpec


@dataclass(frozen=True)
class OutRef:
    """A Mutable payload output: a per-lane plane or a cell, decided by what the body assigns."""

    spec: PlaneSpec


@dataclass(frozen=True)
class SinkRef:
    """A Mutable sink with named axes: only hawk.scatter(sink)[key] writes it."""

    spec: PlaneSpec


@dataclass(frozen=True)
class TableRef:
    spec: PlaneSpec


@dataclass(frozen=True)
class GridRef:
    spec: PlaneSpec


@dataclass(frozen=True)
class ParamRef:
    spec: PlaneSpec


@dataclass(frozen=True)
class AxisView:
    """`mm.rows`, `mm.columns` or `v.components`: waits for a subscript."""

    base: object
    axis: str


@dataclass(frozen=True)
class Method:
    """A bound method of a ref or value (`u.at`, `v.sum`, `y.add`...), resolved when called."""

    base: object
    name: str
    base_src: str


@dataclass(frozen=True)
class Scatter:
    """`hawk.scatter(sink, policy=...)`, waiting for `[key] += v` or `[key] = v`."""

    sink: SinkRef
    policy: str


@dataclass(frozen=True)
class Undefined:
    """A name that is not defined here, with the reason to tell the user."""

    why: str
