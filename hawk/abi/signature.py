"""A kernel's signature as data: its planes (name, kind, payload, axes) and its return, with no MLIR and no
front end in it.

The binder and the artifact loader read these; the compiler's front end builds them from a kernel's annotations
(hawk/signature.py, read_signature). A signature round-trips through JSON (an artifact's sidecar carries it).
"""

from __future__ import annotations

from dataclasses import dataclass

from hawk import types as T


@dataclass(frozen=True)
class PlaneSpec:
    """One kernel parameter.

    kind: 'lane' (per-lane input), 'index' (Index plane), 'param', 'table', 'grid', 'output' (Mutable payload:
    a per-lane output or a cell), 'sink' (Mutable with named axes). `integer`: an output of integers
    (Mutable[Index]: int8, int16, int32 or int64, its dtype chosen per run like an Index plane's). A float output's
    dtype is the run's, or its array's (Spec.float_outputs: chosen per run too).
    """

    name: str
    kind: str
    annotation: object
    payload: T.Payload = T.Payload(())
    axes: tuple[T.Axis, ...] = ()
    sorted: bool = False
    integer: bool = False

    def describe(self) -> str:
        return repr(self.annotation)

    @property
    def integer_plane(self) -> bool:
        """An Index plane or an integer output: its dtype (an integer output: int8 ... int64; an Index plane: int32
        or int64) is part of the specialisation."""
        return self.kind == "index" or self.integer


@dataclass(frozen=True)
class Signature:
    planes: tuple[PlaneSpec, ...]
    returns: T.Payload | None

    def __post_init__(self):
        object.__setattr__(self, "_by_name", {p.name: p for p in self.planes})
        object.__setattr__(self, "_grid", next((p for p in self.planes if p.kind == "grid"), None))

    @property
    def grid(self) -> PlaneSpec | None:
        return self._grid

    def get(self, name: str) -> PlaneSpec | None:
        return self._by_name.get(name)

    def lane_axes(self) -> tuple[T.Axis, ...]:
        g = self.grid
        return g.axes if g is not None else (T.Axis("sample", None),)

    def to_json(self) -> dict:
        return {"planes": [{"name": p.name, "kind": p.kind, "payload": list(p.payload.shape),
                            "axes": [[a.label, a.extent] for a in p.axes], "sorted": p.sorted,
                            **({"integer": True} if p.integer else {})} for p in self.planes],
                "returns": None if self.returns is None else list(self.returns.shape)}

    @classmethod
    def from_json(cls, d: dict) -> Signature:
        planes = []
        for p in d["planes"]:
            payload = T.Payload(tuple(int(x) for x in p["payload"]))
            axes = tuple(T.Axis(str(a), None if e is None else int(e)) for a, e in p["axes"])
            integer = bool(p.get("integer", False))
            planes.append(PlaneSpec(p["name"], p["kind"], _annotation(p["kind"], payload, axes, bool(p["sorted"]),
                                                                      integer),
                                    payload, axes, bool(p["sorted"]), integer))
        ret = d.get("returns")
        return cls(tuple(planes), None if ret is None else T.Payload(tuple(int(x) for x in ret)))


def _payload_type(payload: T.Payload) -> T.PayloadType:
    sh = payload.shape
    return T.Scalar if not sh else (T.Vector[sh[0]] if len(sh) == 1 else T.Matrix[sh[0], sh[1]])


def _annotation(kind: str, payload: T.Payload, axes: tuple[T.Axis, ...], is_sorted: bool, integer: bool = False):
    """The annotation object a plane kind stands for (used when a signature is read back from JSON)."""
    if kind == "lane":
        return _payload_type(payload)
    if kind == "index":
        return T.Sorted[T.Index] if is_sorted else T.Index
    if kind == "param":
        return T.Param
    if kind == "output":
        return T.Mutable[T.Index if integer else _payload_type(payload)]
    cls = {"table": T.TableType, "grid": T.GridType, "sink": T.SinkType}.get(kind)
    if cls is None:
        raise ValueError(f"unknown plane kind {kind!r}")
    return cls(axes)
