# Source of notebooks/06_jax.ipynb: edit here, then `.venv/bin/python scripts/notebooks.py build 06`.
# ruff: noqa: E402

# %% [markdown]
# # A hawk kernel inside a JAX training loop
#
# `eagle.jax.wrap(kernel)` turns a hawk kernel into a function of JAX arrays. Inside `jax.jit` it is one custom
# call of the compiled program (the XLA FFI, with a C handler: no Python runs per call), `jax.grad` runs the
# kernel's reverse (its adjoint, built from the hawk IR), and `jax.vmap` loops launches inside XLA.
#
# Here a hawk kernel computes the loss of a small model, and plain JAX does the rest of the training loop.

# %%
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import eagle
import eagle.jax
import hawk
import hawk.math as m
from hawk import Mutable, Param, Scalar

jax.config.update("jax_enable_x64", True)  # float64 planes need it (eagle.jax refuses them without)

# %% [markdown]
# ## The model and its loss, as one hawk kernel
#
# The model is `y = a * sin(b * x) + c`. The kernel computes each lane's residual and the loss as an `ordered`
# mean of squares: the exact sum of the terms, rounded once, then divided by the count, so the loss (and its
# gradient, whose sums over lanes are ordered too) has the same bits on every thread count.

# %%
@hawk.kernel
def sine_loss(x: Scalar, y: Scalar, a: Param, b: Param, c: Param, loss: Mutable[Scalar]):
    r = a * m.sin(b * x) + c - y
    loss = hawk.mean(r * r, policy="ordered")


rng = np.random.default_rng(6)
x = np.linspace(-3.0, 3.0, 2_000)
y = 1.7 * np.sin(1.3 * x) + 0.4 + 0.05 * rng.normal(size=x.size)

f = eagle.jax.wrap(sine_loss)


def loss(p):
    return f(x=x, y=y, a=p[0], b=p[1], c=p[2])[0]


p0 = jnp.array([1.0, 1.2, 0.0])
print("loss at the start:", round(float(loss(p0)), 6))

# %% [markdown]
# ## Its gradient is JAX's gradient
#
# `jax.grad` of the wrapped kernel is the reverse of the kernel. It matches `jax.grad` of the same loss written
# in `jax.numpy`, to rounding:

# %%
def loss_jnp(p):
    return jnp.mean((p[0] * jnp.sin(p[1] * x) + p[2] - y) ** 2)


g_hawk = jax.grad(loss)(p0)
g_jax = jax.grad(loss_jnp)(p0)
print("hawk gradient:", np.round(np.asarray(g_hawk), 6))
print("jax gradient: ", np.round(np.asarray(g_jax), 6))
print("agree to 1e-10 (relative):", bool(jnp.allclose(g_hawk, g_jax, rtol=1e-10)))

# %% [markdown]
# ## Training: gradient descent, jitted end to end
#
# The whole step (forward kernel, reverse kernel, update) is one jitted function. Plain gradient descent with a
# fixed step fits the parameters:

# %%
@jax.jit
def step(p):
    value, grad = jax.value_and_grad(loss)(p)
    return p - 0.1 * grad, value


p = p0
history = []
for k in range(300):
    p, value = step(p)
    history.append(float(value))
    if k % 60 == 0:
        print(f"step {k:3d}: loss {float(value):.6f}")
print("fitted a, b, c:", np.round(np.asarray(p), 3), " (the data: 1.7, 1.3, 0.4)")

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
left.semilogy(history)
left.set_xlabel("step")
left.set_ylabel("loss (ordered mean of squares)")
right.plot(x, y, ".", markersize=1, label="data")
right.plot(x, p[0] * np.sin(p[1] * x) + p[2], label="fitted model")
right.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The same bits on every run
#
# Ordered sums are exact, so the loss and the gradients do not depend on how the lanes are split over threads.
# Deployed on one thread and on two with small chunks, the jitted step gives the same bits:

# %%
one = eagle.jax.wrap(sine_loss, threads=1)
two = eagle.jax.wrap(sine_loss, threads=2, min_chunk=256)


def grad_with(fw):
    return jax.jit(jax.grad(lambda q: fw(x=x, y=y, a=q[0], b=q[1], c=q[2])[0]))(p)


print("same gradient bits on 1 and 2 threads:", np.asarray(grad_with(one)).tobytes() ==
      np.asarray(grad_with(two)).tobytes())

# %% [markdown]
# ## vmap: several models at once
#
# `jax.vmap` over the parameters runs one launch per model inside XLA (never a Python callback per element):

# %%
models = jnp.stack([p, p0, jnp.array([1.5, 1.2, 0.3])])
print("losses of three models:", np.round(np.asarray(jax.jit(jax.vmap(loss))(models)), 4))

# %% [markdown]
# ## A stencil's gradient
#
# A kernel that reads its neighbours with `.at` has a gradient in which every lane gathers the shares its
# neighbours' reads sent it. `jax.grad` of the wrapped kernel runs that gather form as FFI calls (the shares,
# the gather, the Param's ordered sum), with the exact scatter kept for the rare lane whose few terms do not fit
# a pair of floats. Here the smoothness energy of a 2-D field, `k * sum(|grad u|^2)`, and its gradient:

# %%
from hawk import Grid


@hawk.kernel
def energy(g: Grid["r", "c":400], u: Scalar, k: Param, e: Mutable[Scalar]):
    dr = u.at(r=g.r + 1) - u
    dc = u.at(c=g.c + 1) - u
    e = hawk.sum(k * (dr * dr + dc * dc), policy="ordered")


def energy_jnp(u, k):
    dr = jnp.concatenate([u[1:], u[-1:]]) - u  # .at clamps to the grid's edge: the last row reads itself
    dc = jnp.concatenate([u[:, 1:], u[:, -1:]], axis=1) - u
    return jnp.sum(k * (dr * dr + dc * dc))


u = rng.normal(size=(500, 400))
e = eagle.jax.wrap(energy)
grad_hawk = jax.jit(jax.grad(lambda u, k: e(u=u, k=k)[0], argnums=(0, 1)))
grad_jnp = jax.jit(jax.grad(energy_jnp, argnums=(0, 1)))
(gu, gk), (ju, jk) = grad_hawk(u, 0.5), grad_jnp(u, 0.5)
print("the same gradient as jax.numpy's, to rounding:",
      bool(jnp.allclose(gu, ju, rtol=1e-12, atol=1e-12)), bool(abs(float(gk) / float(jk) - 1.0) < 1e-12))

# %% machine
import timeit

for name, fn in (("hawk kernel, jax.grad", grad_hawk), ("jax.numpy, jax.grad  ", grad_jnp)):
    fn(u, 0.5)[0].block_until_ready()
    best = min(timeit.repeat(lambda fn=fn: fn(u, 0.5)[0].block_until_ready(), number=5, repeat=3)) / 5
    print(f"{name}: {best * 1e3:.2f} ms for 200,000 lanes")

# %% [markdown]
# ## A vector field's stencil
#
# `Vector` planes take the same gather form: a read site's cotangent is a vector, and each lane gathers a pair of
# floats per component. The smoothness energy of a 2-D velocity field (two components a lane, payload first), its
# gradient through `jax.grad`, against jax.numpy's and, bit for bit, against `plan.reverse`:

# %%
from hawk import Vector


@hawk.kernel
def flow_energy(g: Grid["r", "c":400], v: Vector[2], k: Param, e: Mutable[Scalar]):
    dr = v.at(r=g.r + 1) - v
    dc = v.at(c=g.c + 1) - v
    e = hawk.sum(k * ((dr * dr).sum() + (dc * dc).sum()), policy="ordered")


def flow_energy_jnp(v, k):
    dr = jnp.concatenate([v[:, 1:], v[:, -1:]], axis=1) - v
    dc = jnp.concatenate([v[:, :, 1:], v[:, :, -1:]], axis=2) - v
    return jnp.sum(k * (dr * dr + dc * dc))


v = rng.normal(size=(2, 500, 400))
fe = eagle.jax.wrap(flow_energy)
gv = jax.jit(jax.grad(lambda v: fe(v=v, k=0.5)[0]))(v)
print("the same gradient as jax.numpy's, to rounding:",
      bool(jnp.allclose(gv, jax.grad(flow_energy_jnp)(v, 0.5), rtol=1e-12, atol=1e-12)))
want = eagle.deploy(flow_energy).reverse({"e": np.array([1.0])}, v=v, k=0.5)["v"]
print("plan.reverse's bits:", np.asarray(gv).tobytes() == np.asarray(want).tobytes())
