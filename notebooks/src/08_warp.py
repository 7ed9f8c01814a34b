# Source of notebooks/08_warp.ipynb: edit here, then `.venv/bin/python scripts/notebooks.py build 08`.
# ruff: noqa: E402

# %% [markdown]
# # Warp and hawk on one tape
#
# `eagle.warp.wrap(kernel)` calls a hawk kernel with `wp.array`s, reading and writing them where they lie (no
# copies). Under an active `wp.Tape` the call records itself, so a pipeline can alternate Warp kernels and hawk
# kernels, and `tape.backward()` runs Warp's adjoints and the hawk kernel's reverse in turn.
#
# Here Warp advances particles by one step of a simple integrator, and a hawk kernel measures the result: the
# kinetic energy (an `ordered` sum, exact and the same bits on every thread count) and an energy histogram by
# cell. The tape then gives the gradient of the energy with respect to the initial velocities.

# %% machine
import contextlib
import io

import matplotlib.pyplot as plt
import numpy as np
import warp as wp

import eagle
import eagle.warp
import hawk
from hawk import Index, Mutable, Scalar

wp.config.quiet = True
with contextlib.redirect_stdout(io.StringIO()):  # Warp's device banner
    wp.init()

# %% [markdown]
# ## A Warp step: gravity and a drag force

# %%
@wp.kernel
def integrate(v0: wp.array(dtype=wp.float64), v1: wp.array(dtype=wp.float64), dt: wp.float64):
    i = wp.tid()
    v = v0[i]
    v1[i] = v + dt * (wp.float64(-9.81) - wp.float64(0.5) * v * wp.abs(v))


# %% [markdown]
# ## A hawk measurement: energy and its histogram by cell

# %%
@hawk.kernel
def energy(v: Scalar, cell: Index, mass: Scalar, total: Mutable[Scalar], per_cell: Mutable["cell":8]):
    e = 0.5 * mass * v * v
    total = hawk.sum(e, policy="ordered")
    hawk.scatter(per_cell, policy="ordered")[cell] += e


measure = eagle.warp.wrap(energy)

rng = np.random.default_rng(8)
n = 10_000
v_init = rng.normal(0.0, 3.0, n)
cell = rng.integers(0, 8, n).astype(np.int32)
mass = rng.uniform(0.5, 2.0, n)

v0 = wp.array(v_init, dtype=wp.float64, device="cpu", requires_grad=True)
v1 = wp.zeros(n, dtype=wp.float64, device="cpu", requires_grad=True)
tape = wp.Tape()
with contextlib.redirect_stdout(io.StringIO()):  # Warp reports its module compile
    with tape:
        wp.launch(integrate, dim=n, inputs=[v0, v1, 0.01], device="cpu")
        out = measure(v=v1, cell=wp.array(cell, device="cpu"), mass=wp.array(mass, device="cpu"))
print("kinetic energy after the step:", round(float(out["total"].numpy()[0]), 6))
print("per cell:", np.round(out["per_cell"].numpy(), 3))
plt.figure(figsize=(6, 3))
plt.bar(np.arange(8), out["per_cell"].numpy())
plt.xlabel("cell")
plt.ylabel("kinetic energy")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Backward through both
#
# `tape.backward` seeds the energy's gradient, runs the hawk kernel's reverse (filling `v1.grad`), then Warp's
# adjoint of the step (filling `v0.grad`). The result matches the derivative worked by hand:
# `dE/dv0 = m * v1 * dv1/dv0`, with `dv1/dv0 = 1 - dt * |v0|` for this drag law.

# %%
tape.backward(grads={out["total"]: wp.array([1.0], dtype=wp.float64, device="cpu")})
v1_np = v1.numpy()
by_hand = mass * v1_np * (1.0 - 0.01 * np.abs(v_init))
print("gradient matches the hand derivative:", np.allclose(v0.grad.numpy(), by_hand, rtol=1e-12))
print("first gradients:", np.round(v0.grad.numpy()[:4], 6))

# %% [markdown]
# ## Same bits on every thread count
#
# The energy is an exact sum of its terms rounded once, so deploying the hawk kernel on one thread or on two with
# small chunks gives the same bits:

# %%
one = eagle.warp.wrap(energy, threads=1)(v=v1, cell=cell, mass=mass)["total"].numpy()
two = eagle.warp.wrap(energy, threads=2, min_chunk=512)(v=v1, cell=cell, mass=mass)["total"].numpy()
print("same bits:", one.tobytes() == two.tobytes(), " (math.fsum agrees:",
      float(one[0]) == __import__("math").fsum(0.5 * mass * v1_np * v1_np), ")")
