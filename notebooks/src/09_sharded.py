# Source of notebooks/09_sharded.ipynb: edit here, then `.venv/bin/python scripts/notebooks.py build 09`.
# ruff: noqa: E402

# %% [markdown]
# # Sharded data on a JAX mesh: exact sums across devices
#
# When the lanes are split over devices, each device runs the kernel on its own shard and the shards' results
# are combined. `eagle.jax.wrap(kernel, axis_name="d")` does this inside `jax.shard_map`; with
# `partition=True` the same happens under plain `jax.jit` for inputs carrying a `NamedSharding`.
#
# `ordered` sums are exact, so the combine does not depend on how the lanes are split: each shard hands out its
# un-rounded partial state (the exact accumulators, as integers), the shards' states are added with integer
# collectives, and the total is rounded once. The sharded answer has the same bits as the one-device answer,
# for any number of shards. Here JAX pretends the CPU is 8 devices.

# %%
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"  # before JAX starts

import jax
import matplotlib.pyplot as plt
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import eagle
import eagle.jax
import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar

jax.config.update("jax_enable_x64", True)  # the exact accumulators are int64
print("devices:", jax.device_count())

# %% [markdown]
# ## A sharded reduction
#
# A kernel with an ordered total, an ordered mean and an ordered histogram (a scatter into 8 slots), over values
# spanning many orders of magnitude, where the order of float additions matters a lot:

# %%
@hawk.kernel
def stats(x: Scalar, key: Index, hist: Mutable["bin":8], total: Mutable[Scalar], avg: Mutable[Scalar]):
    hawk.scatter(hist, policy="ordered")[key] += x
    total = hawk.sum(x, policy="ordered")
    avg = hawk.mean(x, policy="ordered")


rng = np.random.default_rng(3)
n = 8 * 50_000
x = rng.normal(size=n) * np.exp(rng.normal(size=n) * 10)
key = rng.integers(0, 8, size=n).astype(np.int32)

one_device = eagle.deploy(stats).run(x=x, key=key)

f = eagle.jax.wrap(stats, axis_name="d")
answers = {}
for shards in (2, 4, 8):
    mesh = jax.make_mesh((shards,), ("d",), devices=jax.devices()[:shards])
    run = jax.jit(jax.shard_map(lambda x, key: f(x=x, key=key), mesh=mesh, in_specs=(P("d"), P("d")),
                                out_specs=P()))
    sh = NamedSharding(mesh, P("d"))
    answers[shards] = run(jax.device_put(x, sh), jax.device_put(key, sh))

print(f"{'':<10}{'one device':>24}" + "".join(f"{f'{s} shards':>24}" for s in answers))
for name in ("total", "avg"):
    print(f"{name:<10}{float(np.asarray(one_device[name])[0]):>24.17g}"
          + "".join(f"{float(np.asarray(a[name])[0]):>24.17g}" for a in answers.values()))
same = all(np.asarray(a[k]).tobytes() == np.asarray(one_device[k]).tobytes() for a in answers.values()
           for k in ("hist", "total", "avg"))
print("every sharded answer has the one-device bits:", same)

# %% [markdown]
# A float `psum` of each shard's rounded sum is what one usually gets from a sharded reduction. Its value
# depends on the shard count (and, on real hardware, on the collective's topology):

# %%
for shards in (2, 4, 8):
    partial = [np.sum(part) for part in np.split(x, shards)]  # each shard's sum, rounded, then added
    print(f"{shards} shards, float sum of rounded partials: {sum(partial):.17g}")
print(f"exact, rounded once (hawk, any shard count):  {float(np.asarray(one_device['total'])[0]):.17g}")

# %% [markdown]
# ## Under plain `jax.jit`, by the inputs' sharding
#
# With `partition=True` the wrapped kernel follows the shardings of its inputs (`custom_partitioning`): one
# launch per shard on the shard's own lanes, per-lane outputs sharded like the inputs, and collectives that
# move only the partial state. The compiled program holds no all-gather of a lane input:

# %%
mesh = jax.make_mesh((8,), ("d",))
sh = NamedSharding(mesh, P("d"))
fp = eagle.jax.wrap(stats, partition=True)
jitted = jax.jit(lambda x, key: fp(x=x, key=key))
xs, keys = jax.device_put(x, sh), jax.device_put(key, sh)
got = jitted(xs, keys)
print("same bits as one device:", np.asarray(got["total"]).tobytes() == np.asarray(one_device["total"]).tobytes())
hlo = jitted.lower(xs, keys).compile().as_text()
gathers = [ln.split("=")[1].split("all-gather")[0].strip() for ln in hlo.splitlines() if "all-gather(" in ln]
print("all-gathers in the compiled program move:", gathers, f"(a lane input would be f64[{n}])")

# %% [markdown]
# ## A stencil with halos
#
# A five-point heat step on a 2-D grid, its rows split over the devices. A shard's edge rows read their
# neighbours' rows: `u.at(row=i - 1)` reaches one row into the next shard, so each shard receives one halo row
# from each neighbour (`jax.lax.ppermute`) before it runs. The kernel also sees the whole grid's coordinates
# (`i > 0` and `i < ROWS - 1` are the grid's edges, not the shard's). A `.at` read that could reach any lane (a
# computed row, a flat index) is refused, naming the plane.

# %%
ROWS, COLS = 64, 96


@hawk.kernel
def heat(lane: Grid["row", "col":COLS], u: Scalar, k: Param, out: Mutable[Scalar], energy: Mutable[Scalar]):
    i, j = lane.row, lane.col
    if m.land(m.land(i > 0, i < ROWS - 1), m.land(j > 0, j < COLS - 1)):
        v = u + k * (u.at(row=i - 1, col=j) + u.at(row=i + 1, col=j) + u.at(row=i, col=j - 1)
                     + u.at(row=i, col=j + 1) - 4.0 * u)
    else:
        v = 0.0 * u
    out = v
    energy = hawk.sum(v * v, policy="ordered")


yy, xx = np.mgrid[0:ROWS, 0:COLS]
u0 = np.exp(-((yy - 20.0) ** 2 + (xx - 30.0) ** 2) / 40.0) + np.exp(-((yy - 45.0) ** 2 + (xx - 70.0) ** 2) / 60.0)

h = eagle.jax.wrap(heat, axis_name="d")
step = jax.jit(jax.shard_map(lambda u: h(u=u, k=0.2), mesh=mesh, in_specs=(P("d"),),
                             out_specs={"out": P("d"), "energy": P()}))
u = jax.device_put(u0, sh)
one = u0
energies = []
for _ in range(40):
    r = step(u)
    u = r["out"]
    ref = eagle.deploy(heat).run(u=one, k=0.2)
    one = np.asarray(ref["out"])
    energies.append((float(np.asarray(r["energy"])[0]), float(np.asarray(ref["energy"])[0])))
print("after 40 steps, the field has the one-device bits:", np.asarray(u).tobytes() == one.tobytes())
print("and so has every step's energy:", all(a == b for a, b in energies))

fig, (left, mid, right) = plt.subplots(1, 3, figsize=(13, 3.4))
left.imshow(u0, cmap="inferno")
left.set_title("start")
mid.imshow(np.asarray(u), cmap="inferno")
for s in range(1, 8):
    mid.axhline(s * ROWS / 8 - 0.5, color="white", linewidth=0.6)
mid.set_title("40 steps on 8 shards (white: shard edges)")
right.plot([e[0] for e in energies], label="8 shards")
right.plot([e[1] for e in energies], "--", label="one device")
right.set_xlabel("step")
right.set_ylabel("energy (ordered sum)")
right.legend()
plt.tight_layout()
plt.show()
