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

Refused by name: per-lane planes with a payload (Vector) in a kernel with cells (the adjoint adds a cell's cotangent
at lane 0 of the whole run, so it needs whole-run lane numbers, which sharded runs give Scalar planes only),
gradients with respect to a plane read with `.at` (a stencil's adjoint adds into neighbours'
rows: a reverse halo exchange, not done), and anything the sharded forward refuses in the adjoint itself.
"""

from __future__ import annotations

from eagle.errors import InputError

FLOATS = ("lane", "table", "param")


def adjoint_plan(plan, wrt: tuple[str, ...], extents: tuple[int, ...], where: str):
    """(adjoint plan, design) for a sharded backward over `wrt`, refusing what shards cannot differentiate."""
    from eagle.reverse import adjoint_for

    kernel = plan.kernel
    for x in wrt:
        if kernel.adjoint_needs_extents((x,)):
            raise InputError(f"plane '{x}' of kernel '{kernel.name}': gradients through a sharded call (over "
                             f"{where}) do not cover planes read with .at(...): their adjoint adds into other "
                             f"lanes' gradients across shard boundaries; differentiate the unsharded call, or "
                             f"stop the gradient of '{x}' (jax.lax.stop_gradient / .detach())")
    adj, design, win = adjoint_for(plan, wrt, extents)
    if win is not None:  # (sinks stored into with `= v`: the forward already refuses them sharded)
        raise InputError(f"kernel '{kernel.name}': gradients through a sharded call of a kernel storing into "
                         f"sinks with `= v` are not supported; differentiate the unsharded call")
    sig = kernel.signature
    cells = [n for n in design.ct if design.ct_kind[n] != "lane" and sig.get(n) is not None
             and sig.get(n).kind != "sink"]
    for p in sig.planes:
        per_lane = p.kind == "lane" or (p.kind == "output" and design.ct_kind.get(p.name) == "lane")
        if cells and per_lane and p.payload.shape:
            raise InputError(f"plane '{p.name}' of kernel '{kernel.name}': gradients through a sharded call (over "
                             f"{where}) of a kernel with cells ({', '.join(sorted(cells))}) take Scalar per-lane "
                             f"planes, not a {p.payload.shape} payload: the adjoint adds each cell's cotangent at "
                             f"the first lane of the whole run, so it runs with whole-run lane numbers; split the "
                             f"components into Scalar planes, or differentiate the unsharded call")
    return adj, design


def renamed(kernel_name: str, exc: InputError) -> InputError:
    """An adjoint's refusal, said of the forward kernel's gradient."""
    return InputError(f"the gradient of kernel '{kernel_name}' through a sharded call: {exc}")
