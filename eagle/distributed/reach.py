"""What a kernel reads across lanes, and so how it runs sharded along its leading lane axis.

A shard holds a contiguous run of the leading lane axis (rows of a Grid, or lanes of a 1-D kernel). It can run
its lanes alone unless the kernel reads other lanes or its own coordinates:

* a `.at` read of a per-lane plane whose leading coordinate is the lane's own plus a constant (`u.at(row=i - 1)`)
  reaches at most that many rows away: the shard needs a halo of that many rows from each neighbour;
* a `.at` read whose leading coordinate is anything else (a flat index, a key read from a plane) can reach any
  lane: refused, naming the plane;
* reading the leading coordinate itself (`lane.row`) or its extent (`lane.extent("row")`) needs the global one:
  the shard runs with the whole grid's extents and its global lane range (eagle/distributed/geometry.py);
* a `hawk.scan` folds fixed blocks of lanes counted from lane 0 (hawk.abi.layout.SCAN_BLOCK): the shards run
  with global lane numbers too, each over whole blocks (`block`: its lanes realigned to that unit, the lanes of
  a block that straddles two shards passed to the shard that runs it; eagle/distributed/geometry.py).

The facts come from the compiler as plain data (`Kernel.lane_reach`, hawk/ir/reach.py): eagle reads no IR.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eagle.errors import InputError


@dataclass(frozen=True)
class Reach:
    """How a kernel runs sharded: the leading lane axis, the halo rows each per-lane plane needs, whether lanes
    must see global coordinates (a halo, or a read of the leading coordinate or extent), and `block`: the lanes every
    shard's run must start on (a scan's blocks; 0: none, shards run their own lanes)."""

    axis: str | None
    halo: dict[str, int] = field(default_factory=dict)
    coordinates: bool = False
    block: int = 0

    @property
    def global_lanes(self) -> bool:
        return self.coordinates or bool(self.block) or any(self.halo.values())


def reach(kernel, spec, where: str) -> Reach:
    """The kernel's Reach for this specialisation; InputError (naming kernel and plane) for a read that can reach
    any lane. `where` names the shards in the message ("mesh axis 'd'", "the process group")."""
    axes = kernel.signature.lane_axes()
    lead = axes[0].label if axes else "lane"
    halo, coordinates = kernel.lane_reach(spec)
    for plane, rows in sorted(halo.items()):
        if rows is None:
            raise InputError(f"kernel '{kernel.name}': plane '{plane}' is read with .at(...) at a {lead} that is "
                             f"not this lane's own {lead} plus a constant, which can reach any lane, and lanes are "
                             f"split over {where}; shards exchange halos only for reads like `{plane}.at({lead}="
                             f"{lead} - 1)`: gather the plane, or run the kernel unsharded")
    return Reach(axes[0].label if axes else None, {p: r for p, r in halo.items() if r}, coordinates)
