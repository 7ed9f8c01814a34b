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
# ## Per-channel statistics over a sharded batch
#
# Reductions that keep axes other than the leading one (column sums, per-channel means over a batch) combine
# across shards too: each chunk of each shard keeps its own copy of the cell, and the finish adds the copies in
# order, or, for `ordered`, adds their exact parts and rounds once. A batch norm over a batch split across the
# devices: the channel means (an ordered mean keeping axis `c`) are read by a second stage, which gets them, the
# same on every shard, before it normalises its own rows. A reduction that keeps the leading axis instead (a row
# sum: one total per example) has each row on one shard; its cell is each shard's own rows, sharded like a
# per-lane output (`out_specs=P("d")`).

# %%
C = 4


@hawk.kernel
def batch_norm(lane: Grid["n", "c":C], x: Scalar, y: Mutable[Scalar], mu: Mutable[Scalar], var: Mutable[Scalar]):
    mu = hawk.mean(x, over="n", policy="ordered")
    d = x - mu
    var = hawk.mean(d * d, over="n", policy="ordered")
    y = d / m.sqrt(var + 1e-5)


batch = rng.normal(size=(8 * 1000, C)) * [1.0, 10.0, 0.1, 1e3] + [0.0, 5.0, -2.0, 1e4]
one = eagle.deploy(batch_norm).run(x=batch)
fb = eagle.jax.wrap(batch_norm, axis_name="d")
for shards in (2, 8):
    mesh = jax.make_mesh((shards,), ("d",), devices=jax.devices()[:shards])
    bn = jax.jit(jax.shard_map(lambda x: fb(x=x), mesh=mesh, in_specs=P("d"),
                               out_specs={"y": P("d"), "mu": P(), "var": P()}))
    got = bn(jax.device_put(batch, NamedSharding(mesh, P("d"))))
    same = all(np.asarray(got[k]).tobytes() == np.asarray(one[k]).tobytes() for k in ("y", "mu", "var"))
    print(f"{shards} shards: the one-device bits: {same}; y stays sharded over {len(got['y'].sharding.device_set)}"
          " devices")
print("channel means:", np.asarray(one["mu"]))
print("against NumPy:", np.allclose(np.asarray(one["y"]), (batch - batch.mean(0)) / np.sqrt(batch.var(0) + 1e-5)))


@hawk.kernel
def row_sums(lane: Grid["n", "c":C], x: Scalar) -> Scalar:
    return hawk.sum(x * x, over="c", policy="ordered")


per_example = jax.jit(jax.shard_map(lambda x: eagle.jax.wrap(row_sums, axis_name="d")(x=x), mesh=mesh,
                                    in_specs=P("d"), out_specs=P("d")))(
    jax.device_put(batch, NamedSharding(mesh, P("d"))))
print("per-example sums:", per_example.shape, "over", len(per_example.sharding.device_set), "devices; the one-device"
      " bits:", np.asarray(per_example).tobytes() == np.asarray(eagle.deploy(row_sums).run(x=batch)).tobytes())

# %% [markdown]
# Gradients flow back through such per-example results: each shard's rows' cotangents are its own, and the adjoint
# reads them at the shard's own rows (its lanes need no whole-run numbering), while the gradient of a `Param` is an
# exact sum over every shard. A least-squares loss per example, `jax.grad` through the sharded call, bitwise the
# one-device `plan.reverse`:

# %%
@hawk.kernel
def per_example_loss(lane: Grid["n", "c":C], x: Scalar, y: Scalar, w: Param) -> Scalar:
    e = x * w - y
    return hawk.sum(e * e, over="c", policy="ordered")


rng_loss = np.random.default_rng(9)  # (its own stream: the cells below draw as before)
target = batch * 0.5 + rng_loss.normal(size=batch.shape)
weights = rng_loss.uniform(size=batch.shape[0])  # a weight per example: the loss is sum_i weights[i] * loss_i
fl = eagle.jax.wrap(per_example_loss, axis_name="d")
mesh = jax.make_mesh((8,), ("d",))
losses = jax.shard_map(lambda x, y, w: fl(x=x, y=y, w=w), mesh=mesh, in_specs=(P("d"), P("d"), P()),
                       out_specs=P("d"))
grad = jax.jit(jax.grad(lambda x, y, w: (losses(x, y, w) * weights).sum(), argnums=(0, 2)))
put = NamedSharding(mesh, P("d"))
gx, gw = grad(jax.device_put(batch, put), jax.device_put(target, put), jax.numpy.asarray(0.4))
want = eagle.deploy(per_example_loss).reverse(weights, x=batch, y=target, w=0.4)
print("d/dx sharded over", len(gx.sharding.device_set), "devices; bitwise plan.reverse:",
      np.asarray(gx).tobytes() == np.asarray(want["x"]).tobytes(), "| d/dw:", float(gw),
      float(gw) == float(np.asarray(want["w"]).reshape(-1)[0]))
print("against NumPy:", np.allclose(float(gw), (2 * (batch * 0.4 - target) * batch * weights[:, None]).sum()))

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

# %% [markdown]
# ## Running totals across shards: scans
#
# A scan gives each lane the running total of the lanes before it. On one device hawk folds the lanes in fixed
# blocks of 4096 (each block from the folded totals of the earlier blocks), and that block structure is what fixes
# the bits. A shard boundary usually falls inside a block, and two half-block float sums added together are not
# the block's sum, so the sharded run keeps whole blocks: each shard runs the blocks that start in its lanes,
# borrowing the few lanes of the next shard it needs and handing back the results that belong to others. A reverse
# scan (from the last lane down) is one fold over the whole run: each shard contributes its lanes' values and
# every shard's finish does that fold.
#
# One kernel with four kinds: a forward scan, a segmented one (restarting where `start` is set), a keyed one (a
# running total per key) and a reverse one, over 12,000 lanes: about three blocks, so on 8 shards of 1,500 lanes
# a block spans three shards.

# %%
@hawk.kernel
def running(x: Scalar, start: Scalar, key: Index, fwd: Mutable[Scalar], seg: Mutable[Scalar],
            per_key: Mutable[Scalar], back: Mutable[Scalar]):
    fwd = hawk.scan(x)
    seg = hawk.scan(x, reset=start > 0.5)
    per_key = hawk.scan(x, by=key, keys=4)
    back = hawk.scan(x, reverse=True)


ns = 12_000
xr = rng.normal(size=ns) * np.exp(rng.normal(size=ns) * 4)
start = (rng.random(ns) < 0.01).astype(np.float64)
skey = rng.integers(0, 4, size=ns).astype(np.int32)
scan_one = eagle.deploy(running).run(x=xr, start=start, key=skey)
names = ("fwd", "seg", "per_key", "back")

g = eagle.jax.wrap(running, axis_name="d")
for shards in (2, 4, 8):
    smesh = jax.make_mesh((shards,), ("d",), devices=jax.devices()[:shards])
    ssh = NamedSharding(smesh, P("d"))
    srun = jax.jit(jax.shard_map(lambda x, s, k: g(x=x, start=s, key=k), mesh=smesh, in_specs=(P("d"),) * 3,
                                 out_specs={k: P("d") for k in names}))
    got = srun(jax.device_put(xr, ssh), jax.device_put(start, ssh), jax.device_put(skey, ssh))
    same = {k: np.asarray(got[k]).tobytes() == np.asarray(scan_one[k]).tobytes() for k in names}
    print(f"{shards} shards of {ns // shards:>5} lanes, the one-device bits:", same)
    assert all(same.values())

back_np = np.cumsum(xr[::-1])[::-1]
print("reverse scan, NumPy's cumsum of the reversed lanes, bit for bit:",
      np.asarray(scan_one["back"]).tobytes() == back_np.tobytes())
print("forward scan, first block, bit for bit np.cumsum:",
      np.asarray(scan_one["fwd"])[:4096].tobytes() == np.cumsum(xr[:4096]).tobytes())
print("forward scan, whole run, within 1e-12 of np.cumsum (relative to the running sum of |x|):",
      bool(np.all(np.abs(np.asarray(scan_one["fwd"]) - np.cumsum(xr)) <= 1e-12 * np.cumsum(np.abs(xr)))))
k0 = skey == 0
print("running total of key 0 in the first block, as np.cumsum of its lanes:",
      np.asarray(scan_one["per_key"])[:4096][k0[:4096]].tobytes() == np.cumsum(xr[:4096][k0[:4096]]).tobytes())
assert np.asarray(scan_one["back"]).tobytes() == back_np.tobytes()
assert np.asarray(scan_one["fwd"])[:4096].tobytes() == np.cumsum(xr[:4096]).tobytes()

# %% [markdown]
# ## Vector planes beside cells
#
# Per-lane planes can carry a payload: here each lane holds a 3-vector, sharded along its lanes (the payload axis
# comes first, so the spec is `P(None, "d")`). The kernel takes an ordered total of the vectors and divides each
# lane by it: a cell computed from every shard, then read by every lane (two stages). A vector cell comes back as
# one output per component, `tot_0`, `tot_1`, `tot_2`, here as from `Plan.run`. Both the shares and the totals
# have the one-device bits, and so has the gradient: `jax.grad` through the sharded call runs the adjoint kernel
# sharded the same way and gives `plan.reverse`'s bits; `jax.grad` of the same computation written in `jax.numpy`
# agrees to rounding.

# %%
from hawk import Vector


@hawk.kernel
def shares(v: Vector[3], tot: Mutable[Vector[3]], z: Mutable[Vector[3]]):
    tot = hawk.sum(v, policy="ordered")
    z = v / tot


nv = 8 * 1_000
v = rng.uniform(0.5, 2.0, size=(3, nv))
cz = rng.normal(size=(3, nv))
vshard = NamedSharding(mesh, P(None, "d"))
sv = eagle.jax.wrap(shares, axis_name="d")
vcall = jax.shard_map(lambda v: sv(v=v), mesh=mesh, in_specs=P(None, "d"),
                      out_specs={"tot_0": P(), "tot_1": P(), "tot_2": P(), "z": P(None, "d")})
vgot = jax.jit(vcall)(jax.device_put(v, vshard))
vone = eagle.deploy(shares).run(v=v)
tot_sharded = np.concatenate([np.asarray(vgot[f"tot_{c}"]) for c in range(3)])
tot_one = np.concatenate([np.asarray(vone[f"tot_{c}"]) for c in range(3)])
print("totals, 8 shards:", tot_sharded)
print("      one device:", tot_one)
print("totals and shares, the one-device bits:", tot_sharded.tobytes() == tot_one.tobytes()
      and np.asarray(vgot["z"]).tobytes() == np.asarray(vone["z"]).tobytes())


def vloss(v):
    r = vcall(v)
    return (r["z"] * cz).sum() + 2.0 * r["tot_0"].sum() - r["tot_2"].sum()


def vloss_jnp(v):
    tot = v.sum(axis=1, keepdims=True)
    return ((v / tot) * cz).sum() + 2.0 * tot[0, 0] - tot[2, 0]


gv = np.asarray(jax.jit(jax.grad(vloss))(jax.device_put(v, vshard)))
gv_rev = np.asarray(eagle.deploy(shares).reverse({"z": cz, "tot": np.array([2.0, 0.0, -1.0])}, v=v)["v"])
gv_jnp = np.asarray(jax.grad(vloss_jnp)(v))
print("gradient, 8 shards, plan.reverse's bits:", gv.tobytes() == gv_rev.tobytes())
print("and jax.grad of the jax.numpy version agrees to rounding:", np.allclose(gv, gv_jnp, rtol=1e-12, atol=1e-15))
assert gv.tobytes() == gv_rev.tobytes()

# %% [markdown]
# ## The stencil's gradient, sharded
#
# Differentiating the heat step sends each lane's sensitivity back to the neighbours it read, so a shard's edge rows
# owe something to the next shard. `jax.grad` through the `shard_map` call handles that with halos again, this
# time of the adjoint's per-lane shares: each shard gets its neighbours' edge rows of shares and adds, for each of
# its own lanes, the shares its neighbours' reads sent it, in a fixed order and rounded once. The gradient with
# respect to the field and to the `Param` `k` (an ordered sum over every lane of every shard) has `plan.reverse`'s
# bits; beside it, `jax.grad` of the same step written with `jax.numpy` slices.

# %%
import jax.numpy as jnp

cu = np.random.default_rng(9).normal(size=(ROWS, COLS))
hcall = jax.shard_map(lambda u, k: h(u=u, k=k), mesh=mesh, in_specs=(P("d"), P()),
                      out_specs={"out": P("d"), "energy": P()})


def hloss(u, k):
    r = hcall(u, k)
    return (r["out"] * cu).sum() + 0.5 * r["energy"].sum()


def hloss_jnp(u, k):
    c = u[1:-1, 1:-1]
    inner = c + k * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * c)
    v = jnp.zeros_like(u).at[1:-1, 1:-1].set(inner)
    return (v * cu).sum() + 0.5 * (v * v).sum()


gu, gk = jax.jit(jax.grad(hloss, argnums=(0, 1)))(jax.device_put(u0, sh), 0.2)
hrev = eagle.deploy(heat).reverse({"out": cu, "energy": np.array([0.5])}, u=u0, k=0.2)
gu_jnp, gk_jnp = jax.grad(hloss_jnp, argnums=(0, 1))(jnp.asarray(u0), 0.2)
print("d loss / d u, 8 shards, plan.reverse's bits:", np.asarray(gu).tobytes() == np.asarray(hrev["u"]).tobytes(),
      "| sharded like u:", gu.sharding.spec)
# (12 digits: d loss / d k is an auto sum, whose last bits depend on the machine's vector width; the bits are
# compared below)
print(f"d loss / d k: {float(gk):.12g} (8 shards)\n              {float(np.asarray(hrev['k'])[0]):.12g} "
      f"(plan.reverse)\n              {float(gk_jnp):.12g} (jax.numpy)")
print("same bits:", np.asarray(gk).reshape(1).tobytes() == np.asarray(hrev["k"]).reshape(1).tobytes(),
      "| jax.numpy agrees to rounding:", np.allclose(gu, gu_jnp, rtol=1e-12, atol=1e-14)
      and np.isclose(float(gk), float(gk_jnp), rtol=1e-12))
assert np.asarray(gu).tobytes() == np.asarray(hrev["u"]).tobytes()

# %% [markdown]
# ## The last store wins, across shards, and its gradient
#
# `hawk.scatter(sink)[k] = v` keeps, in each slot, the value of the last lane that stored there. Sharded, each
# shard keeps its own stores and marks, and the combine takes each slot from the last shard that stored, so the
# slot holds what one device would hold. A slot that no lane stores into keeps the prior content passed in.
#
# The gradient goes to the winning lane only: its value is the slot's, so it gets the slot's cotangent, and the
# prior gets the cotangent of the slots no lane replaced. Finding the winners needs every shard's lanes, so
# `jax.grad` runs the reverse's winners kernel sharded first, then the adjoint. Here each lane is one reading
# of a sensor, and the sink keeps each sensor's latest reading (times a gain). The gradient is checked against
# `plan.reverse` and against `jax.grad` of the same thing in `jax.numpy`, where the last reading of each sensor
# is found by hand.

# %%
@hawk.kernel
def latest(reading: Scalar, sensor: Index, gain: Param, last: Mutable["sensor":6]):
    hawk.scatter(last)[sensor] = reading * gain


nr = 8 * 2_000
reading = rng.normal(size=nr)
sensor = rng.integers(-1, 6, size=nr).astype(np.int32)
sensor[sensor == 5] = -1  # (sensor 5 never reports: its slot keeps the prior)
prior, cl = rng.normal(size=6), rng.normal(size=6)
lw = eagle.jax.wrap(latest, axis_name="d")
lcall = jax.shard_map(lambda r, s, g, p: lw(reading=r, sensor=s, gain=g, last=p), mesh=mesh,
                      in_specs=(P("d"), P("d"), P(), P()), out_specs=P())
rs, ss = jax.device_put(reading, sh), jax.device_put(sensor, sh)
got_last = jax.jit(lcall)(rs, ss, 1.5, prior)
one_last = eagle.deploy(latest).run(reading=reading, sensor=sensor, gain=1.5, last=prior.copy())
print("last readings, 8 shards:", np.asarray(got_last))
print("the one-device bits:", np.asarray(got_last).tobytes() == np.asarray(one_last).tobytes())


def lloss(r, g, p):
    return (lcall(r, ss, g, p) * cl).sum()


def lloss_jnp(r, g, p):
    idx = np.arange(nr)
    winner = [idx[sensor == s].max() if np.any(sensor == s) else -1 for s in range(6)]
    vals = jnp.stack([r[w] * g if w >= 0 else p[s] for s, w in enumerate(winner)])
    return (vals * cl).sum()


gr, gg, gp = jax.jit(jax.grad(lloss, argnums=(0, 1, 2)))(rs, 1.5, prior)
lrev = eagle.deploy(latest).reverse(cl, reading=reading, sensor=sensor, gain=1.5, last=prior.copy())
jr, jg, jp = jax.grad(lloss_jnp, argnums=(0, 1, 2))(jnp.asarray(reading), 1.5, jnp.asarray(prior))
print("lanes with a gradient:", int(np.count_nonzero(np.asarray(gr))), "(one per sensor that reported)")
print("prior's gradient:", np.asarray(gp), "(only the silent sensor's slot)")
print("plan.reverse's bits:", np.asarray(gr).tobytes() == np.asarray(lrev["reading"]).tobytes()
      and np.asarray(gp).tobytes() == np.asarray(lrev["last"]).tobytes()
      and np.asarray(gg).reshape(1).tobytes() == np.asarray(lrev["gain"]).tobytes())
print("jax.numpy agrees:", np.allclose(gr, jr, rtol=1e-13, atol=0) and np.allclose(gp, jp)
      and np.isclose(float(gg), float(jg), rtol=1e-13))
assert np.asarray(gr).tobytes() == np.asarray(lrev["reading"]).tobytes()

# %% [markdown]
# ## A custom fold per row, across shards
#
# `hawk.reduce(op, x, over="col")` folds each row of a `Grid` with an operator of your own, in a documented
# order (left to right along the row), so even an operator that is neither associative nor commutative gives the
# same bits everywhere. Sharded by rows, every row lives whole on one shard, so each shard folds its own rows
# and the rows come back sharded: the one-device bits, with no combine at all. Here an exponential moving
# average along each row (the last value weighs most). An empty row has no value to start from, so a row fold
# under sharding takes `identity=` (what an empty row gives; without it the call is refused by name, before
# anything runs, as one shard alone would otherwise refuse while the others went on).

# %%
@hawk.func
def ema(avg, x):
    return 0.8 * avg + 0.2 * x


@hawk.kernel
def row_ema(lane: Grid["series", "t":64], x: Scalar) -> Scalar:  # noqa: F821
    return hawk.reduce(ema, x, over="t", where=x > -2.0, identity=0.0)


series = rng.normal(size=(8 * 5, 64))
ew = eagle.jax.wrap(row_ema, axis_name="d")
rows = jax.jit(jax.shard_map(lambda x: ew(x=x), mesh=mesh, in_specs=(P("d"),), out_specs=P("d")))(
    jax.device_put(series, sh))
one_rows = eagle.deploy(row_ema).run(x=series)


def ema_rows(s):  # the fold order, in Python: each row's kept values, left to right
    out = []
    for row in s:
        kept = row[row > -2.0]
        acc = kept[0]
        for v in kept[1:]:
            acc = 0.8 * acc + 0.2 * v
        out.append(acc)
    return np.array(out)


print("rows, sharded over 8 devices:", np.asarray(rows)[:4], "...")
print("the one-device bits:", np.asarray(rows).tobytes() == np.asarray(one_rows).tobytes())
print("the documented order's bits:", np.asarray(rows).tobytes() == ema_rows(series).tobytes())

# %% [markdown]
# ## Per-row results beside a halo, and their gradient
#
# A stencil that also reduces each row (here each row's ordered energy after a heat step) runs its shards at
# whole-run lane numbers, because its lanes read their neighbours. The compiled code then numbers the row
# results as the whole run does, so each shard writes its rows' partial state into a buffer sized for every
# row and hands its own rows on (`eagle/distributed/rows.py`). The per-row results come back sharded like the
# rows, with the one-device bits. Their gradient runs the adjoint at whole-run numbers too: it reads each row's
# cotangent by the row's number in the whole run, so the shards gather every shard's row cotangents first. The
# gradient has `plan.reverse`'s bits, and agrees with `jax.grad` of the same step written in `jax.numpy`.

# %%
@hawk.kernel
def heat_rows(lane: Grid["row", "col":COLS], u: Scalar, k: Param, out: Mutable[Scalar], e: Mutable[Scalar]):
    i, j = lane.row, lane.col
    v = u + k * (u.at(row=i - 1) + u.at(row=i + 1) + u.at(col=j - 1) + u.at(col=j + 1) - 4.0 * u)  # clamped
    out = v
    e = hawk.sum(v * v, over="col", policy="ordered")  # one energy per row


hr = eagle.jax.wrap(heat_rows, axis_name="d")
rows_step = jax.shard_map(lambda u: hr(u=u, k=0.2), mesh=mesh, in_specs=(P("d"),),
                          out_specs={"out": P("d"), "e": P("d")})
got = jax.jit(rows_step)(jax.device_put(u0, sh))
ref = eagle.deploy(heat_rows).run(u=u0, k=0.2)
print("row energies, sharded over 8 devices:", np.asarray(got["e"])[18:22], "...")
print("the one-device bits:", np.asarray(got["e"]).tobytes() == np.asarray(ref["e"]).tobytes())

weights = np.linspace(1.0, 2.0, ROWS)  # a loss: weighted row energies


def rows_loss(u):
    return jnp.sum(rows_step(u)["e"] * weights)


def rows_loss_jnp(u):  # the same step in jax.numpy (edge rows and columns clamped, as .at clamps)
    q = jnp.pad(u, 1, mode="edge")
    v = u + 0.2 * (q[:-2, 1:-1] + q[2:, 1:-1] + q[1:-1, :-2] + q[1:-1, 2:] - 4.0 * u)
    return jnp.sum(jnp.sum(v * v, axis=1) * weights)


g = jax.jit(jax.grad(rows_loss))(jax.device_put(u0, sh))
rev = eagle.deploy(heat_rows).reverse({"e": weights}, u=u0, k=0.2)["u"]
print("gradient: plan.reverse's bits:", np.asarray(g).tobytes() == np.asarray(rev).tobytes())
print("jax.numpy's own gradient agrees:", np.allclose(g, jax.grad(rows_loss_jnp)(jnp.asarray(u0)), rtol=1e-12,
                                                      atol=1e-15))
assert np.asarray(g).tobytes() == np.asarray(rev).tobytes()

# %% [markdown]
# ## Stream compaction across shards: writes by key
#
# A compaction keeps the lanes that pass a test, packed in lane order: a scan numbers the kept lanes, and each
# writes its value at that position of an output *by key* (`hawk.scatter(kept)[pos] = x`). Those positions are not
# lanes, so no shard owns them: inside `shard_map` every shard passes the whole array (replicated), its lanes store
# into a copy, and each position comes from the shard that stored it (eagle combines the copies exactly). The scan
# itself runs across shards as a scan does (each shard runs whole blocks). The result is the one-device run's, bit
# for bit:

# %%
@hawk.kernel
def compact(lane: Grid["i"], x: Scalar, kept: Mutable[Scalar], at: Mutable[Index], n: Mutable[Scalar]):
    keep = x > 1.0
    pos = m.where(keep, hawk.scan(m.where(keep, 1, 0)) - 1, -1)  # -1: this lane writes nothing
    hawk.scatter(kept)[pos] = x
    hawk.scatter(at)[pos] = lane.i
    n = hawk.sum(m.where(keep, 1.0, 0.0), policy="ordered")


xs = rng.normal(size=8 * 5000)
fc = eagle.jax.wrap(compact, axis_name="d")
packed = jax.jit(jax.shard_map(lambda x, kept, at: fc(x=x, kept=kept, at=at), mesh=mesh,
                               in_specs=(P("d"), P(), P()), out_specs={"kept": P(), "at": P(), "n": P()}))
got = packed(jax.device_put(xs, sh), np.zeros(xs.size), np.zeros(xs.size, np.int64))
count = int(np.asarray(got["n"])[0])
ref = eagle.deploy(compact).run(x=xs, kept=np.zeros(xs.size), at=np.zeros(xs.size, np.int64))
print(f"kept {count} of {xs.size} lanes; the first:", np.asarray(got["kept"])[:4], "from lanes",
      np.asarray(got["at"])[:4])
print("NumPy's x[x > 1]:", np.array_equal(np.asarray(got["kept"])[:count], xs[xs > 1.0]),
      "| the one-device bits:", all(np.asarray(got[k]).tobytes() == np.asarray(ref[k]).tobytes() for k in got))

# %% [markdown]
# Its gradient runs across the shards too. Each kept lane's store reads the cotangent at its position; the stores
# into each position are counted on every shard and summed (a position stored twice would refuse the gradient, as
# on one device), and the array's initial content keeps the cotangent where no lane stored. For a loss
# `sum(w * kept)` the gradient of `x` is `w[pos]` on the kept lanes and zero elsewhere, which NumPy writes in one
# line; the sharded gradient is `plan.reverse`'s, bit for bit:

# %%
w = rng.normal(size=xs.size)
kept_of = jax.shard_map(lambda x, kept, at: fc(x=x, kept=kept, at=at)["kept"], mesh=mesh,
                        in_specs=(P("d"), P(), P()), out_specs=P())


def kept_loss(x, start):
    return jnp.sum(w * kept_of(x, start, np.zeros(xs.size, np.int64)))


gx, gstart = jax.jit(jax.grad(kept_loss, argnums=(0, 1)))(jax.device_put(xs, sh), np.zeros(xs.size))
by_hand = np.zeros(xs.size)
by_hand[xs > 1.0] = w[:count]
rev = eagle.deploy(compact).reverse({"kept": w}, x=xs, kept=np.zeros(xs.size), at=np.zeros(xs.size, np.int64))
print("d/dx is w at each kept lane's position:", np.array_equal(np.asarray(gx), by_hand),
      "| the initial content's gradient is w past the kept count:",
      np.array_equal(np.asarray(gstart), np.where(np.arange(xs.size) < count, 0.0, w)),
      "| plan.reverse's bits:", np.asarray(gx).tobytes() == np.asarray(rev["x"]).tobytes()
      and np.asarray(gstart).tobytes() == np.asarray(rev["kept"]).tobytes())
