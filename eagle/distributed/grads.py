"""Gradients through a sharded call: the adjoint kernel (hawk/reverse, as plan.reverse runs it) run sharded the
same way as the forward.

The adjoint of a kernel is a hawk kernel whose planes are the forward's inputs, one cotangent plane per result
(a per-lane output's cotangent is per-lane: each shard passes its own lanes'; a cell's is a Param and a sink's a
Table: the same on every shard) and whose outputs are the gradients: per lane for per-lane inputs, and ordered
(exact) sums over every lane for Params and Tables (a Table's gradient is a sink of the adjoint). So the adjoint
runs through eagle/distributed like any kernel: its lanes on each shard, its exact sums combined across shards
and rounded once by its finish. Per-lane gradients, Param and Table gradients are then bitwise the one-device
plan.reverse, whatever the shard count and sizes (a cell the adjoint recomputes with an `auto` sum may differ in
its last bits, within the bound, as in the forward). A sink's prior content gets the sink's cotangent.

A cell's cotangent is added at lane 0 of the whole run, so an adjoint with cells runs with whole-run lane numbers
(Vector planes too: on the host their components are strided by the shard's buffer, not the run's lane count).
A stencil's gradient (planes read with `.at`) follows plan.reverse's gather form: the helpers below, driven by
eagle/distributed/jax_grads.py and torch_shard.py (its scatter fallback: the adjoint specialised to the whole
grid, each shard keeping its rows of the whole grid's gradient). A cell keeping the leading lane axis (a row
sum) has its cotangent read by row: by the shard's own rows where the adjoint runs at the shard's numbers, else
from every shard's rows gathered (`whole_rows`); such a kernel's stencil gradient takes the scatter adjoint.
An output written by key is passed whole to every shard, so its cotangent is a Table there too; the stores into
each position are counted over every shard (`winners`): a position stored twice refuses the gradient on every
shard, and the array's initial content keeps its cotangent where no shard stored
(eagle.reverse.unstored_positions).
Refused by name: anything the sharded forward refuses in the adjoint itself.
"""

from __future__ import annotations

import math

import numpy as np

from eagle.distributed.stages import whole_blocks
from eagle.errors import InputError

FLOATS = ("lane", "table", "param")


def stencil_planes(plan, wrt: tuple[str, ...]) -> list[str]:
    """The planes of `wrt` read with `.at` (their adjoint adds into other lanes' gradients, so it is specialised
    to the whole grid's extents and its gradient is the whole grid's, of which a shard keeps its rows). A cell
    that keeps lane axes also specialises the adjoint to the extents, but only to shape its cotangent by the kept
    axes, which a sharded run allows only off the leading one (fixed extents: the same on every shard)."""
    return [x for x in wrt if plan.kernel.adjoint_reads_other_lanes((x,))]


def own_rows(g, r0: int, rows: int, total: int, w: int):
    """A whole-grid gradient (payload first, then `total` rows of `w` lanes) cut to the shard's rows [r0, r0 +
    rows): (payload, rows, w), for the caller to shape like its plane."""
    return g.reshape(-1, total, w)[:, r0:r0 + rows]


def adjoint_plan(plan, wrt: tuple[str, ...], extents: tuple[int, ...], where: str, positions: tuple = ()):
    """(adjoint plan, design, winners plan or None) for a sharded backward over `wrt` (what shards cannot run is
    refused when the adjoint runs sharded, by the same checks as a forward). `extents`: the whole run's lane
    extents (what a stencil's adjoint is specialised to); `positions`: the lengths of the float outputs written by
    key (Forward.positions: every shard passes the whole array). The winners plan (sinks stored into with `= v`,
    the stores counted into each position of an output written by key) runs sharded like the forward
    (`winners`)."""
    from eagle.reverse import adjoint_for

    return adjoint_for(plan, wrt, extents, positions)


def whole_rows_adjoint(plan, wrt: tuple[str, ...], ext: tuple[int, ...], where: str, gather,
                       positions: tuple = ()) -> tuple:
    """(adjoint plan, design, the cotangent planes as the adjoint reads them) for a sharded backward.
    `gather(design, axes)` makes the cotangent planes, with the Tables `axes` names (`whole_rows`: each row Table
    read whole, and the axis its rows lie along) holding every shard's rows, in order. Where rows are read whole,
    the adjoint is made again for the whole run's rows (its Tables' extents)."""
    adj, design, _ = adjoint_plan(plan, wrt, ext, where, positions)
    axes = whole_rows(plan, adj, design)
    cts = gather(design, axes)
    if axes:
        name, axis = next(iter(axes.items()))
        total = int(cts[name].shape[axis])
        if total != ext[0]:
            adj, design, _ = adjoint_plan(plan, wrt, (total, *ext[1:]), where, positions)
    return adj, design, cts


def at_whole_run_numbers(kernel) -> bool:
    """Whether `kernel`'s shards run at whole-run lane numbers: it scans or folds over every lane (whole blocks),
    reads other lanes (halos), or reads its leading coordinate (a cell's cotangent added at the run's lane 0)."""
    spec = kernel.default_spec()
    halo, coordinates = kernel.lane_reach(spec)
    return bool(whole_blocks(kernel, spec)) or coordinates or any(v != 0 for v in halo.values())


def whole_rows(plan, adj, design) -> dict[str, int]:
    """The cotangent Tables of cells keeping the leading lane axis that a sharded adjoint reads whole (by cotangent
    plane: the axis its rows lie along): an adjoint whose shards run at whole-run lane numbers (whole blocks of
    scans, as a product's and a running product's; halos of a stencil; a read of the leading coordinate, as where
    a cell's cotangent enters at the run's lane 0: `at_whole_run_numbers`) reads each row's cotangent by the
    row's number in the whole run, so the caller gathers every shard's rows of those Tables first. Empty when the
    adjoint runs at the shard's own numbers."""
    kernel = plan.kernel
    lead = next(iter(a.label for a in kernel.signature.lane_axes()), None)
    rows = [c for c, kept in kernel.kept_cells().items() if lead in kept and c in design.ct]
    if not rows or not at_whole_run_numbers(adj.kernel):
        return {}
    # a cell's Table: its payload's components first (when more than one), then its kept axes
    return {design.ct[c]: int(math.prod(design.payload.get(c, ())) > 1) for c in rows}


def winners(plan, wrt: tuple[str, ...], extents: tuple[int, ...], run, planes: dict, dtype, xp=np,
            positions: tuple = ()) -> tuple[dict, dict]:
    """(each slot's winning store by sink stored into with `= v`, and the stores counted into each position by
    float output written by key; the adjoint's Table planes holding the winners); both empty when the kernel
    stores into no sink and writes no output by key. `run(winners plan, its planes)` runs the winners kernel
    sharded as the caller runs the forward (its results by name, or its one result). Its planes: those of
    `planes` (inputs, Grid extents, the outputs read before they are assigned) it takes, its sinks filled with
    -1, no store yet, and its counts with zeros (`positions`: Forward.positions). Its store numbers come from
    whole-run lane numbers, and a sharded run keeps each slot's last store over every shard
    (eagle/distributed/stages.py), so every shard gets plan.reverse's winners: the adjoint compares its lanes'
    store numbers with them, and a slot still at -1 keeps its prior content (`prior_gradient`). The counts are
    summed over every shard (the whole run's): a position stored twice, on one shard or two, refuses the
    gradient (the caller asks eagle.reverse.refuse_repeats, or the JAX bridge's check inside the compiled
    backward), and one no shard stored keeps the array's initial content
    (eagle.reverse.unstored_positions)."""
    from eagle.reverse import adjoint_for, winner_fills

    if not plan.kernel.stored_sinks() and not positions:
        return {}, {}
    _, design, win = adjoint_for(plan, wrt, extents, positions)
    names = design.win  # (sink -> the adjoint's plane)
    sig = win.kernel.signature
    fills = winner_fills(design, sig, dtype, xp=xp)
    fills.update({n: xp.zeros(size, dtype) for n, size in positions})
    got = run(win, {**{p.name: planes[p.name] for p in sig.planes if p.name in planes and p.name not in fills},
                    **fills})
    got = got if isinstance(got, dict) else {next(iter(fills)): got}
    return {s: got[s] for s in fills}, {names[s]: got[s] for s in names}


def prior_gradient(kernel, sink: str, ct, wins=None, xp=np):
    """The gradient of a sink's prior content: the sink's cotangent (each slot's sum adds the prior once); for a
    sink stored into with `= v`, zero where a lane stored (`wins`: the winners kernel's result for the sink,
    eagle.reverse.unstored_prior), where the prior is replaced. None: no cotangent, none."""
    from eagle.reverse import unstored_prior

    if ct is None or sink not in kernel.stored_sinks():
        return ct
    if wins is None:
        raise RuntimeError(f"internal error: kernel '{kernel.name}': the prior gradient of sink '{sink}', stored "
                           f"into with = v, needs its winners")
    return unstored_prior(ct, wins, xp)


def renamed(kernel_name: str, exc: InputError) -> InputError:
    """An adjoint's refusal, said of the forward kernel's gradient."""
    return InputError(f"the gradient of kernel '{kernel_name}' through a sharded call: {exc}")


# ---- a stencil's gradient in gather form (hawk/reverse/gather.py), as plan.reverse runs it ----------------------
def gather_form(plan, wrt: tuple[str, ...], extents: tuple[int, ...]):
    """(shares adjoint plan, design, Param sums plan or None, Gather) of plan.reverse's gather form for `wrt` over
    the whole grid `extents`, or None when plan.reverse runs the scatter adjoint (no plane of `wrt` is read at
    constant offsets only), or when a cell keeps the leading lane axis (its cotangent rows are read whole:
    `whole_rows`, which the scatter adjoint's door gathers)."""
    from eagle.reverse import gather_for

    lead = next(iter(a.label for a in plan.kernel.signature.lane_axes()), None)
    if any(lead in kept for kept in plan.kernel.kept_cells().values()):
        return None
    got = gather_for(plan, wrt, extents)
    if got is None:
        return None
    adj, design, _, sk, g = got
    return adj, design, sk, g


def gather_halo(g) -> int:
    """Rows of share planes each lane's gather reads above and below its own (the largest leading offset)."""
    return max((abs(offs[0]) for sites in g.sites.values() for _, offs in sites), default=0)


def local_rows(r0: int, rows: int, total: int, h: int) -> tuple[int, int]:
    """The rows [a, b) a shard's gather runs as a grid of its own: its rows and `h` of each neighbour's, cut at the
    whole grid's edges, so that the local grid's edges are the whole grid's or rows whose results are dropped."""
    return max(0, r0 - h), min(total, r0 + rows + h)


def local_gather(plan, wrt: tuple[str, ...], extents: tuple[int, ...], local: tuple[int, ...]):
    """The gather kernel of plan.reverse's gather form, made for a local grid of extents `local` (its edges'
    clamps are compiled in) and deployed like `plan`; the same sites, terms and order as the whole grid's."""
    import eagle

    cache = plan.__dict__.setdefault("_local_gathers", {})
    key = (wrt, local)
    if key not in cache:
        got = plan.kernel.gather_adjoint(wrt, local)
        opts = dict(threads=plan.threads, min_chunk=plan.min_chunk, **getattr(plan, "options", {}))
        cache[key] = eagle.deploy(got[2], plan.target, **opts)
    return cache[key]
