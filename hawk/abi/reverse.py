"""The reverse's record in an artifact's sidecar: the adjoint's planes (cotangent and gradient names and kinds),
with no MLIR in it. The artifact builder writes it from a Design (hawk/reverse/sweep.py); eagle/reverse.py reads it
back for a loaded artifact's reverse."""

from __future__ import annotations

from dataclasses import dataclass, field

# The adjoint's planes as a sidecar records them (hawk/reverse/sweep.Design's fields that the door reads).
INFO_FIELDS = ("ct", "ct_kind", "payload", "grad", "grad_kind", "win", "kept", "init")

# A winners Table (sinks stored into with `= v`) holds, per slot, the winning store's number and the pass of each
# for loop around it, each integer as PART_BITS-bit parts, low first: exact in float32 as in float64, however many
# lanes. -1 in every component: no lane stored there.
PART_BITS = 24
PARTS = 2


def win_components(passes: int) -> int:
    """The components of a winners Table's slot for a sink whose deepest `=` store sits in `passes` for loops."""
    return PARTS * (1 + passes)


@dataclass(frozen=True)
class Info:
    """The adjoint's planes (cotangent and gradient names and kinds) read back from a sidecar."""

    ct: dict
    ct_kind: dict
    payload: dict
    grad: dict
    grad_kind: dict
    win: dict
    kept: dict
    init: tuple = ()  # outputs whose initial contents the adjoint reads as input planes (of their own names)
    positions: dict = field(default_factory=dict)  # float output written by key -> the array length it was built for
    passes: dict = field(default_factory=dict)  # sink stored into inside for loops -> loops around its deepest store


def info_to_json(design) -> dict:
    """The fields of a Design (or Info) that a sidecar records, as JSON data."""
    d = {f: dict(getattr(design, f)) for f in INFO_FIELDS if f != "init"}
    if getattr(design, "init", ()):  # (written only when some: other kernels' sidecars are as before)
        d["init"] = list(design.init)
    if getattr(design, "positions", {}):  # (likewise)
        d["positions"] = dict(design.positions)
    if getattr(design, "passes", {}):  # (likewise)
        d["passes"] = dict(design.passes)
    d["payload"] = {k: list(v) for k, v in d["payload"].items()}
    d["kept"] = {k: list(v) for k, v in d["kept"].items()}
    return d


def info_from_json(d: dict) -> Info:
    return Info(dict(d["ct"]), dict(d["ct_kind"]), {k: tuple(v) for k, v in d["payload"].items()}, dict(d["grad"]),
                dict(d["grad_kind"]), dict(d["win"]), {k: tuple(v) for k, v in d["kept"].items()},
                tuple(d.get("init", ())),  # (a sidecar written before outputs' initial contents had gradients)
                dict(d.get("positions", {})), dict(d.get("passes", {})))


@dataclass(frozen=True)
class GatherPlanes:
    """The planes the gather form of a stencil's gradient exchanges (hawk/reverse/gather.Gather less its read
    sites, which only the gather kernel's builder needs), as eagle's door reads them: the share planes the shares
    adjoint writes and the gather reads, each gathered input's gradient output, each Param gradient cell's share
    plane (summed by the Param sums kernel), and the gather's flag cell (lanes whose pair erred)."""

    shares: tuple
    grad: dict
    sums: dict
    flag: str


def gather_to_json(g) -> dict:
    """A Gather's (or GatherPlanes') planes as a sidecar's reverse.gather records them."""
    return {"share_planes": list(g.shares), "grad": dict(g.grad), "sum_planes": dict(g.sums), "flag": g.flag}


def gather_from_json(d: dict) -> GatherPlanes:
    return GatherPlanes(tuple(d["share_planes"]), dict(d["grad"]), dict(d["sum_planes"]), d["flag"])
