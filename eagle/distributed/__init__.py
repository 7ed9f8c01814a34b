"""eagle.distributed: hawk kernels over sharded data, on JAX meshes and in torch.distributed process groups.

The user-facing doors are hooks of the bridges: `eagle.jax.wrap(kernel, axis_name=...)` inside `jax.shard_map`,
`eagle.jax.wrap(kernel, partition=True)` under `jax.jit` with sharded inputs, and `eagle.torch.wrap(kernel,
group=...)`. Underneath, each stage runs in two halves (stages.py): the lanes on every shard, the finish once
the shards' partial states are combined with the framework's collectives (run.py; jax_shard.py, jit_shard.py,
torch_shard.py), so ordered sums are rounded once from the exact total of every shard's terms. reach.py reads
what a kernel reads across lanes (halos, global coordinates, refusals), geometry.py where a shard's lanes sit
in the whole grid (and which lanes move when shards run whole scan blocks), sinks.py how large sinks' copies
cross the shards (one folded copy per shard), grads.py gradients (the adjoint kernel run sharded the same way;
a stencil's in plan.reverse's gather form, jax_grads.py under JAX), dist.c the native side. docs/distributed.md
describes it all.
"""
