"""A kernel's parameters read from its annotations: which planes it has and what each one is.

The data classes it fills (PlaneSpec, Signature) live in hawk/abi/signature.py, where the runtime reads them.
"""

from __future__ import annotations

import inspect
import math

from hawk import types as T
from hawk.abi.signature import PlaneSpec, Signature
from hawk.errors import KernelError


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
        return PlaneSpec(name, "output", ann, ann.payload, integer=ann.integer)
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
