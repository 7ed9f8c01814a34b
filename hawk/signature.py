"""A kernel's parameters read from its annotations: which planes it has and what each one is."""

from __future__ import annotations

import inspect
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

    @property
    def grid(self) -> PlaneSpec | None:
        return next((p for p in self.planes if p.kind == "grid"), None)

    def get(self, name: str) -> PlaneSpec | None:
        return next((p for p in self.planes if p.name == name), None)

    def lane_axes(self) -> tuple[T.Axis, ...]:
        g = self.grid
        return g.axes if g is not None else (T.Axis("sample", None),)


def _spec(name: str, ann, where) -> PlaneSpec:
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


def read_signature(fn, file: str, line: int, name: str) -> Signature:
    """Evaluate the annotations of `fn` into plane specs, refusing what is not a plane type."""

    def where(msg: str) -> KernelError:
        return KernelError(msg, file=file, line=line, kernel=name)

    try:
        sig = inspect.signature(fn, eval_str=True)
    except KernelError:
        raise
    except Exception as exc:  # an annotation that does not evaluate
        raise where(f"cannot read the annotations: {exc}") from exc
    planes = []
    for p in sig.parameters.values():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise where(f"parameter '{p.name}': *args/**kwargs are not planes; declare each plane by name")
        planes.append(_spec(p.name, p.annotation, where))
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
