"""A kernel's parameters read from its annotations: which planes it has and what each one is."""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

from hawk import types as T
from hawk.errors import KernelError


@dataclass(frozen=True)
class PlaneSpec:
    """One kernel parameter.

    kind: 'lane' (per-lane input), 'index' (Index plane), 'param', 'table', 'grid', 'output' (Mutable payload:
    a per-lane output or a cell), 'sink' (Mutable with named axes).
    """

    name: str
    kind: str
    annotation: object
    payload: T.Payload = T.Payload(())
    axes: tuple[T.Axis, ...] = ()
    sorted: bool = False

    def describe(self) -> str:
        return repr(self.annotation)


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
                            "axes": [[a.label, a.extent] for a in p.axes], "sorted": p.sorted} for p in self.planes],
                "returns": None if self.returns is None else list(self.returns.shape)}

    @classmethod
    def from_json(cls, d: dict) -> Signature:
        planes = []
        for p in d["planes"]:
            payload = T.Payload(tuple(int(x) for x in p["payload"]))
            axes = tuple(T.Axis(str(a), None if e is None else int(e)) for a, e in p["axes"])
            planes.append(PlaneSpec(p["name"], p["kind"], _annotation(p["kind"], payload, axes, bool(p["sorted"])),
                                    payload, axes, bool(p["sorted"])))
        ret = d.get("returns")
        return cls(tuple(planes), None if ret is None else T.Payload(tuple(int(x) for x in ret)))


def _payload_type(payload: T.Payload) -> T.PayloadType:
    sh = payload.shape
    return T.Scalar if not sh else (T.Vector[sh[0]] if len(sh) == 1 else T.Matrix[sh[0], sh[1]])


def _annotation(kind: str, payload: T.Payload, axes: tuple[T.Axis, ...], is_sorted: bool):
    """The annotation object a plane kind stands for (used when a signature is read back from JSON)."""
    if kind == "lane":
        return _payload_type(payload)
    if kind == "index":
        return T.Sorted[T.Index] if is_sorted else T.Index
    if kind == "param":
        return T.Param
    if kind == "output":
        return T.Mutable[_payload_type(payload)]
    cls = {"table": T.TableType, "grid": T.GridType, "sink": T.SinkType}.get(kind)
    if cls is None:
        raise ValueError(f"unknown plane kind {kind!r}")
    return cls(axes)


def _spec(name: str, ann, where_at) -> PlaneSpec:
    def where(msg: str) -> KernelError:
        return where_at(msg, name)

    if isinstance(ann, T.PayloadType):
        return PlaneSpec(name, "lane", ann, ann.payload)
    if isinstance(ann, T.IndexType):
        return PlaneSpec(name, "index", ann, sorted=ann.sorted)
    if isinstance(ann, T.ParamType):
        return PlaneSpec(name, "param", ann)
    if isinstance(ann, T.TableType):
        return PlaneSpec(name, "table", ann, axes=ann.axes)
    if isinstance(ann, T.GridType):
        return PlaneSpec(name, "grid", ann, axes=ann.axes)
    if isinstance(ann, T.MutableType):
        return PlaneSpec(name, "output", ann, ann.payload)
    if isinstance(ann, T.SinkType):
        return PlaneSpec(name, "sink", ann, axes=ann.axes)
    if ann is inspect.Parameter.empty:
        raise where(f"parameter '{name}' has no plane type: annotate it, e.g. {name}: Scalar")
    raise where(f"parameter '{name}' has annotation {ann!r}, which is not a plane type: use Scalar, Vector[n], "
                "Matrix[r, c], Index, Sorted[Index], Param, Table[...], Grid[...] or Mutable[...]")


INDEX_LIMIT = (1 << 63) - 1  # compiled code indexes every plane, and numbers lanes, with 64-bit integers


def _check_fixed_size(p: PlaneSpec, where_at) -> None:
    """Refuse a plane whose declared extents alone (payload and fixed axes) overflow 64-bit indices: Vector[2**70],
    Mutable["slot":2**40, "k":2**40]. Such a plane could never be addressed, and the compiler would fail on it
    with an internal error instead."""
    size = math.prod(p.payload.shape) * math.prod(a.extent for a in p.axes if a.extent is not None)
    if size > INDEX_LIMIT:
        raise where_at(f"parameter '{p.name}': {p.describe()} declares {size} values, more than 64-bit indices "
                       f"reach ({INDEX_LIMIT}); declare smaller extents", p.name)


def _closure(fn) -> dict:
    """The values a nested function closes over, so string annotations (`from __future__ import annotations`)
    that name them evaluate as they would have eagerly."""
    out = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # a cell not filled yet
            pass
    return out


def read_signature(fn, file: str, lines: dict[str, int], name: str, scope: dict | None = None) -> Signature:
    """Evaluate the annotations of `fn` into plane specs, refusing what is not a plane type.

    `lines` maps each parameter (and 'return') to its source line, so an error points at the annotation.
    `scope` holds the names visible where the kernel was defined (string annotations may name them).
    """

    def where_at(msg: str, param: str = "return") -> KernelError:
        return KernelError(msg, file=file, line=lines.get(param, lines["return"]), kernel=name)

    def where(msg: str) -> KernelError:
        return where_at(msg)

    try:
        sig = inspect.signature(fn, eval_str=True, locals={**(scope or {}), **_closure(fn)})
    except KernelError:
        raise
    except Exception as exc:  # an annotation that does not evaluate
        raise where(f"cannot read the annotations: {exc}") from exc
    planes = []
    for p in sig.parameters.values():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise where_at(f"parameter '{p.name}': *args/**kwargs are not planes; declare each plane by name")
        planes.append(_spec(p.name, p.annotation, where_at))
        _check_fixed_size(planes[-1], where_at)
    grids = [p for p in planes if p.kind == "grid"]
    if len(grids) > 1:
        raise where("a kernel has at most one Grid parameter; put every lane axis in it")
    ret = sig.return_annotation
    if ret is inspect.Signature.empty or ret is None:
        returns = None
    elif isinstance(ret, T.PayloadType):
        returns = ret.payload
    else:
        raise where(f"the return annotation {ret!r} must be Scalar, Vector[n] or Matrix[r, c]")
    labels = {a.label for g in grids for a in g.axes}
    names = {p.name for p in planes}
    clash = labels & names
    if clash:
        raise where(f"grid axis {sorted(clash)[0]!r} has the name of a parameter; rename one of them")
    return Signature(tuple(planes), returns)
