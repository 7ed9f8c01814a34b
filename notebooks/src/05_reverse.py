# Source of notebooks/05_reverse.ipynb: edit here, then `.venv/bin/python scripts/notebooks.py build 05`.
# ruff: noqa: E402

# %% [markdown]
# # Fitting a model with the reverse
#
# `plan.reverse(cotangent, **planes)` gives the gradient of a kernel's outputs with respect to its float inputs
# (docs/reverse.md). The adjoint is itself a hawk kernel, made from the forward kernel's IR and compiled like
# any other, and every sum across lanes in it is an exact (`ordered`) sum: the gradient has the same bits on
# every thread count.
#
# Here it drives plain gradient descent: we fit `(a, b, c)` of `y = a * sin(b * x) + c` to noisy samples by
# minimising the mean of the squared residuals.

# %%
import itertools

import jax
import matplotlib.pyplot as plt
import numpy as np

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Mutable, Param, Scalar, Table

jax.config.update("jax_enable_x64", True)
np.set_printoptions(precision=4, suppress=True)

rng = np.random.default_rng(5)
n = 4000
x = rng.uniform(-3.0, 3.0, size=n)
true = {"a": 1.5, "b": 2.0, "c": -0.3}
y = true["a"] * np.sin(true["b"] * x) + true["c"] + rng.normal(scale=0.1, size=n)

# %% [markdown]
# ## The loss as a kernel
#
# One lane per sample: each lane computes its residual, and `hawk.sum(..., policy="ordered")` adds the squares
# exactly (rounded once), so the loss, and the point the reverse linearises at, do not depend on how the lanes
# were split.

# %%
@hawk.kernel
def squares(x: Scalar, y: Scalar, a: Param, b: Param, c: Param, total: Mutable[Scalar]):
    r = a * m.sin(b * x) + c - y
    total = hawk.sum(r * r, policy="ordered")


plan = eagle.deploy(squares)


def loss(p: dict) -> float:
    return float(np.asarray(plan.run(x=x, y=y, **p))[0]) / n


def gradient(p: dict) -> np.ndarray:
    """d loss / d (a, b, c): the reverse with the cotangent of `total` set to 1/n (loss = total / n)."""
    g = plan.reverse(1.0 / n, x=x, y=y, wrt=("a", "b", "c"), **p)
    return np.array([np.asarray(g[k])[0] for k in ("a", "b", "c")])


start = {"a": 1.0, "b": 1.7, "c": 0.0}
print("loss at the start:", round(loss(start), 6))
print("gradient:         ", gradient(start))

# %% [markdown]
# ## Checking one gradient
#
# Against `jax.grad` of the same loss written in `jax.numpy`, and against central finite differences of the
# kernel's own loss.

# %%
jnp = jax.numpy


def jax_loss(abc):
    a, b, c = abc
    return jnp.mean((a * jnp.sin(b * x) + c - y) ** 2)


ours = gradient(start)
theirs = np.asarray(jax.grad(jax_loss)(jnp.array([start["a"], start["b"], start["c"]])))
h = 1e-6
fd = np.array([(loss({**start, k: start[k] + h}) - loss({**start, k: start[k] - h})) / (2 * h) for k in "abc"])
print("reverse vs jax.grad, largest relative difference below 1e-12:",
      bool(np.max(np.abs(ours - theirs) / np.abs(theirs)) < 1e-12))
print("reverse vs finite differences, largest relative difference below 1e-6:",
      bool(np.max(np.abs(ours - fd) / np.abs(ours)) < 1e-6))

# %% [markdown]
# ## Gradient descent
#
# A fixed step with momentum. Each step is one forward run (the loss, for the plot) and one reverse run; the
# adjoint was compiled at the first call and is reused.

# %%
p = dict(start)
velocity = np.zeros(3)
history = []
for _ in range(200):
    history.append(loss(p))
    velocity = 0.8 * velocity - 0.05 * gradient(p)
    p = {k: p[k] + v for k, v in zip("abc", velocity, strict=True)}
history.append(loss(p))

for step in (0, 10, 50, 100, 200):
    print(f"step {step:>3}: loss {history[step]:.6f}")
print("fitted:", {k: round(float(v), 3) for k, v in p.items()}, " true:", true)

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
left.semilogy(history)
left.set_xlabel("step")
left.set_ylabel("mean squared residual")
left.set_title("loss")
order = np.argsort(x)
right.plot(x[::20], y[::20], ".", ms=3, alpha=0.5, label="data")
right.plot(x[order], p["a"] * np.sin(p["b"] * x[order]) + p["c"], "r", label="fit")
right.legend()
right.set_title("the fitted model")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The same bits on every thread count
#
# The gradient's sums over lanes are exact, so another thread count (another split of the lanes into chunks)
# gives the same bits, not just close numbers.

# %%
one = eagle.deploy(squares, threads=1).reverse(1.0 / n, x=x, y=y, **p)
three = eagle.deploy(squares, threads=3).reverse(1.0 / n, x=x, y=y, **p)
print({k: np.asarray(one[k]).tobytes() == np.asarray(three[k]).tobytes() for k in ("a", "b", "c")})

# %% [markdown]
# ## Reads of other lanes inside a loop
#
# A causal filter: each lane adds four earlier samples, each weighted by a tap from a `Table`. The reads
# `x.at(t=g.t - j)` sit inside the `for` loop, so their reverse is a scatter of the cotangent back to the lanes
# that were read (at the clamped coordinates the forward read), run inside the loop's reverse, and each tap's
# gradient is a sum over lanes. Both are ordered sums (exact, rounded once), as everywhere in the reverse.

# %%
@hawk.kernel
def causal(g: Grid["t"], x: Scalar, taps: Table["tap":4]) -> Scalar:
    acc = 0.0
    for j in range(4):
        acc = acc + taps.at(tap=j) * x.at(t=g.t - j)
    return acc


T = 20_000
signal = np.sin(np.linspace(0.0, 60.0, T)) + 0.1 * rng.normal(size=T)
weights = np.array([0.4, 0.3, 0.2, 0.1])
ct = rng.normal(size=T)
grads = eagle.deploy(causal).reverse(ct, x=signal, taps=weights, t=T)


def jax_filter(sig, w):
    back = [np.maximum(np.arange(T) - j, 0) for j in range(4)]  # clamped at the first sample, as .at clamps
    return jnp.sum(ct * sum(w[j] * sig[back[j]] for j in range(4)))


jx, jw = jax.grad(jax_filter, argnums=(0, 1))(signal, weights)
print("d/dx    largest difference from jax.grad:", float(np.max(np.abs(np.asarray(grads["x"]) - jx))))
print("d/dtaps hawk:", np.asarray(grads["taps"]), " jax:", np.asarray(jw))

# %% [markdown]
# ## An output updated in place
#
# A kernel may read an output before assigning it: `v = v * beta + x * x` updates a running average that the
# caller passes in. Its initial contents are then an input too, and `plan.reverse` hands back their gradient
# under the output's name (when the array is passed, or when `wrt=` names it), as it does for a passed sink.
# The adjoint reads the same initial contents the forward read.

# %%
@hawk.kernel
def running(x: Scalar, beta: Param, v: Mutable[Scalar], energy: Mutable[Scalar]):
    v = v * beta + (1.0 - beta) * x * x
    energy = hawk.sum(v, policy="ordered")


v0 = rng.uniform(size=T)
ct_v = rng.normal(size=T)
g = eagle.deploy(running).reverse({"v": ct_v, "energy": 0.5}, x=signal, beta=0.9, v=v0.copy())
print(sorted(g))


def jax_running(sig, beta, v):
    new = v * beta + (1.0 - beta) * sig * sig
    return jnp.sum(ct_v * new) + 0.5 * jnp.sum(new)


jg = jax.grad(jax_running, argnums=(0, 1, 2))(signal, 0.9, v0)
for name, theirs in zip(("x", "beta", "v"), jg, strict=True):
    close = np.allclose(np.asarray(g[name]).reshape(np.shape(theirs)), theirs, rtol=1e-12, atol=1e-12)
    print(f"d/d{name:5s} agrees with jax.grad to 1e-12:", close)

# %% [markdown]
# ## Through a write by key
#
# `hawk.scatter(out)[k] = v` writes each lane's value at position `k` of an output array: the permute or compact
# step of sorting and `unique`. Its reverse hands each lane the cotangent at the position it wrote. Here the
# lanes above a threshold are compacted to the front of `out` (their positions come from a scan), and we
# differentiate a weighted sum of the compacted values. A position written twice would have kept an unspecified
# lane's value, so `plan.reverse` refuses such a run by name rather than guess (docs/reverse.md).

# %%
@hawk.kernel
def compact(x: Scalar, cut: Param, out: Mutable[Scalar]):
    keep = x > cut
    at = m.where(keep, hawk.scan(m.where(keep, 1, 0)) - 1, -1)  # -1: this lane writes nothing
    hawk.scatter(out)[at] = x * x


ct_out = rng.normal(size=T)
g = eagle.deploy(compact).reverse({"out": ct_out}, x=signal, cut=0.2)


def jax_compact(sig):
    kept = sig[np.asarray(signal) > 0.2]  # the same positions: the kept lanes, in lane order
    return jnp.sum(ct_out[:kept.size] * kept * kept)


print("d/dx agrees with jax.grad to 1e-14:",
      np.allclose(np.asarray(g["x"]), jax.grad(jax_compact)(signal), rtol=1e-14, atol=0))

# %%
from hawk import Index


@hawk.kernel
def place(key: Index, x: Scalar, out: Mutable[Scalar]):
    hawk.scatter(out)[key] = x


try:  # lanes 0 and 2 both write position 0
    eagle.deploy(place).reverse({"out": np.ones(3)}, x=np.ones(3), key=np.array([0, 2, 0]))
except eagle.InputError as exc:
    print(exc)

# %% [markdown]
# Into a sink, `hawk.scatter(sink)[k] = v` keeps the last store into each slot: the last lane's, and of its
# stores the last it made, also pass after pass inside a `for` loop. Only that store gets the slot's cotangent.
# Here each lane takes three readings, and each reading overwrites the bucket of the hour it falls in; the
# gradient matches `jax.grad` of the same stores made one by one with `.at[].set` in a `lax.fori_loop`.

# %%
@hawk.kernel
def latest(t: Scalar, x: Scalar, drift: Param, bucket: Mutable["hour":6]):
    for j in range(3):
        hour = m.index(t + 0.4 * j, 6)
        hawk.scatter(bucket)[hour] = x + drift * j


t_read = rng.uniform(0.0, 6.0, size=50)
x_read = rng.normal(size=50)
ct_bucket = rng.normal(size=6)
g = eagle.deploy(latest).reverse({"bucket": ct_bucket}, t=t_read, x=x_read, drift=0.1)


reading = [(lane, j, min(int(t_read[lane] + 0.4 * j), 5)) for lane in range(50) for j in range(3)]  # in order
lane_of, j_of, hour_of = (jnp.asarray(c) for c in zip(*reading, strict=True))


def jax_latest(x, drift):
    def store(k, b):  # the k-th store: later ones overwrite earlier ones
        return b.at[hour_of[k]].set(x[lane_of[k]] + drift * j_of[k])

    return jnp.sum(ct_bucket * jax.lax.fori_loop(0, len(reading), store, jnp.zeros(6)))


jx, jd = jax.grad(jax_latest, argnums=(0, 1))(x_read, 0.1)
print("d/dx and d/d drift agree with jax.grad:", np.array_equal(np.asarray(g["x"]), jx),
      np.allclose(np.asarray(g["drift"])[0], jd, rtol=1e-14, atol=0))

# %% [markdown]
# ## Products, and the best value so far
#
# `hawk.scan(x, op=m.mul)` is a running product (`np.cumprod`, bit for bit up to a scan block of 4096 lanes):
# here the value of one unit invested, day after day, at daily returns `r`. The best value before each day is an
# exclusive running maximum, and the drawdown the distance below it.

# %%
@hawk.kernel
def drawdown(r: Scalar, wealth: Mutable[Scalar], peak: Mutable[Scalar], worst: Mutable[Scalar]):
    wealth = hawk.scan(1.0 + r, op=m.mul)
    peak = hawk.scan(wealth, op=m.max, exclusive=True)  # the first day's peak is the identity, -inf
    worst = hawk.max(peak - wealth)


days = 1000
r = rng.normal(0.0004, 0.01, size=days)
out = eagle.deploy(drawdown).run(r=r)
print("running product == np.cumprod, bit for bit:",
      np.asarray(out["wealth"]).tobytes() == np.cumprod(1.0 + r).tobytes())
print(f"worst drawdown: {float(out['worst'][0]):.4f} (NumPy: "
      f"{np.max(np.maximum.accumulate(np.cumprod(1.0 + r))[:-1] - np.cumprod(1.0 + r)[1:]):.4f})")

# %% [markdown]
# A product over lanes, `hawk.reduce(m.mul, x)`, has a gradient: each lane gets the product of the others
# (two running products, one from each end, so no division), which is what `jax.grad` of `jnp.prod` gives, exact
# zeros included. Below, one day loses everything (`1 + r = 0`): the final value is 0 and only that day's return
# moves it. The exclusive running maximum has a gradient too: each lane's cotangent goes to the day that set the
# peak before it (ties split equally). So does the running product (`torch.cumprod`'s rule, zeros included).

# %%
@hawk.kernel
def final(r: Scalar, value: Mutable[Scalar]):
    value = hawk.reduce(m.mul, 1.0 + r)


@hawk.kernel
def below_peak(price: Scalar) -> Scalar:
    return price - hawk.scan(price, op=m.max, exclusive=True)


crash = r.copy()
crash[400] = -1.0
g = eagle.deploy(final).reverse({"value": 1.0}, r=crash)["r"]
theirs = jax.grad(lambda q: jnp.prod(1.0 + q))(crash)
print("days with a nonzero gradient:", np.flatnonzero(np.asarray(g)), "| agrees with jax.grad:",
      np.allclose(np.asarray(g), theirs, rtol=1e-12, atol=0))

price = np.cumprod(1.0 + r)
ct = rng.normal(size=days)
g = eagle.deploy(below_peak).reverse(ct, price=price)["price"]


def jax_below_peak(p):
    def step(peak, q):  # (the running max as a loop: jax.lax.cummax's gradient takes XLA 12 s to compile here)
        return jnp.maximum(peak, q), peak

    _, before = jax.lax.scan(step, -jnp.inf, p)
    return jnp.sum(ct[1:] * (p - before)[1:])  # (day 0 is p + inf: no gradient reaches the identity)


print("exclusive running max: agrees with jax.grad:",
      np.allclose(np.asarray(g)[1:], jax.grad(jax_below_peak)(price)[1:], rtol=1e-12, atol=1e-12))

ct_w = rng.normal(size=days)
g = eagle.deploy(drawdown).reverse({"wealth": ct_w}, r=crash)["r"]
theirs = jax.grad(lambda q: jnp.sum(ct_w * jnp.cumprod(1.0 + q)))(crash)
print("running product, with the crash: agrees with jax.grad:", np.allclose(np.asarray(g), theirs, rtol=1e-12),
      "| zero after day 400:", bool(np.all(np.asarray(g)[401:] == 0.0)))

# %% [markdown]
# The same rules hold per key. With several assets' prices interleaved in one array (an `Index` plane says whose
# each day is), `hawk.scan(price, by=asset, keys=3, op=m.max)` is each asset's running peak, and its gradient
# sends each lane's cotangent to the day of that asset that set the peak (ties split equally; a lane of key -1
# takes no part). A running total in key order (`order="key"`: every lane of a smaller key, then its own key's
# lanes up to it) differentiates too. Below, both against `jax.grad` of one `lax.scan` loop per asset.

# %%
@hawk.kernel
def per_asset(price: Scalar, asset: Index, peak: Mutable[Scalar], ranked: Mutable[Scalar]):
    peak = hawk.scan(price, by=asset, keys=3, op=m.max)
    ranked = hawk.scan(price, by=asset, keys=3, order="key")


asset = rng.integers(0, 3, size=days).astype(np.int32)
prices = 100.0 + np.cumsum(rng.normal(size=days))
c_peak, c_ranked = rng.normal(size=(2, days))
g = eagle.deploy(per_asset).reverse({"peak": c_peak, "ranked": c_ranked}, price=prices, asset=asset)["price"]


def jax_per_asset(p):
    loss, offset = 0.0, 0.0
    for k in range(3):
        idx = np.flatnonzero(asset == k)
        _, run_max = jax.lax.scan(lambda c, q: (jnp.maximum(c, q), jnp.maximum(c, q)), -jnp.inf, p[idx])
        loss += jnp.sum(c_peak[idx] * run_max)
        totals = offset + jnp.cumsum(p[idx])  # key order: every smaller asset's lanes first
        loss += jnp.sum(c_ranked[idx] * totals)
        offset = totals[-1]
    return loss


print("running peak per asset and key-order totals: agree with jax.grad:",
      np.allclose(np.asarray(g), jax.grad(jax_per_asset)(prices), rtol=1e-12, atol=1e-12))


# %% [markdown]
# ## A recurrence of your own: scans and folds by a func
#
# `hawk.scan(x, op=f)` with a `@hawk.func` of two values folds the lanes one by one in lane order, as
# `itertools.accumulate(x, f)` does: no associativity is assumed, so any step rule is a scan. Here a robust
# tracker of the price: each day it moves half the way towards the new price, but never more than 0.005, so one
# jump cannot pull it far. The reverse differentiates it through the func's own code (the chain of its
# partials, itself a scan over the lanes: docs/reverse.md, "Scans by a func"), checked against `jax.grad` of
# the same step in `jax.lax.scan`. A `hawk.reduce` by the same func (its end value, in the contract's order:
# 1024-day blocks, then the blocks) has a gradient too.

# %%
@hawk.func
def track(s, p):
    return s + m.min(m.max(0.5 * (p - s), -0.005), 0.005)


@hawk.kernel
def tracked(price: Scalar, level: Mutable[Scalar], gap: Mutable[Scalar]):
    level = hawk.scan(price, op=track)
    gap = hawk.sum((price - level) * (price - level), policy="ordered")


out = eagle.deploy(tracked).run(price=price)
py = list(itertools.accumulate(price, lambda s, p: s + min(max(0.5 * (p - s), -0.005), 0.005)))
print("the scan is the Python loop, bit for bit:", np.asarray(out["level"]).tobytes() == np.array(py).tobytes())


def jax_levels(p):
    def step(s, q):
        s = s + jnp.clip(0.5 * (q - s), -0.005, 0.005)
        return s, s

    _, rest = jax.lax.scan(step, p[0], p[1:])
    return jnp.concatenate([p[:1], rest])


g = eagle.deploy(tracked).reverse({"gap": 1.0}, price=price)["price"]
print("gradient of the squared gap: agrees with jax.grad:",
      np.allclose(np.asarray(g), jax.grad(lambda p: jnp.sum((p - jax_levels(p)) ** 2))(price), rtol=1e-10,
                  atol=1e-14))


@hawk.kernel
def last_level(price: Scalar, end: Mutable[Scalar]):
    end = hawk.reduce(track, price)  # (1000 days: one block, so the fold is the scan's last value)


g = eagle.deploy(last_level).reverse({"end": 1.0}, price=price)["price"]
print("gradient of the fold's end: agrees with jax.grad:",
      np.allclose(np.asarray(g), jax.grad(lambda p: jax_levels(p)[-1])(price), rtol=1e-10, atol=1e-14))

# %% [markdown]
# ## A linear recurrence, with its gradients
#
# A scan by a func may carry a Vector: `h[t] = a[t] * h[t-1] + b[t]` (the core of linear RNNs and state-space
# models) is the scan of the affine maps `(a, b)` under composition, whose second component is `h`. JAX users
# write the same composition for `jax.lax.associative_scan`, which reassociates it into a tree; hawk folds it in
# lane order, so its values are the plain loop's bits. The reverse differentiates it through the func's
# Jacobians (a 2 x 2 per lane), so the gradients with respect to both `a` and `b` match `jax.grad`.

# %%
@hawk.func
def then(p, q):
    return m.vec(q[0] * p[0], q[0] * p[1] + q[1])  # the map p, then the map q


@hawk.kernel
def linear(a: Scalar, b: Scalar, h: Mutable[Scalar]):
    h = hawk.scan(m.vec(a, b), op=then)[1]


steps = 2000
a = rng.uniform(0.9, 1.0, size=steps)
b = rng.normal(size=steps)
h = np.asarray(eagle.deploy(linear).run(a=a, b=b))
loop = np.empty(steps)
loop[0] = b[0]
for t in range(1, steps):
    loop[t] = a[t] * loop[t - 1] + b[t]
print("h is the loop's, bit for bit:", h.tobytes() == loop.tobytes())


def jax_then(p, q):
    return q[0] * p[0], q[0] * p[1] + q[1]


@jax.jit
def jax_h(a, b):
    return jax.lax.associative_scan(jax_then, (a, b))[1]


gap = np.max(np.abs(np.asarray(jax_h(a, b)) - h))  # (its tree rounds otherwise: last bits, which vary with XLA's code)
print("jax.lax.associative_scan agrees within 1e-13:", bool(gap < 1e-13))
w = rng.normal(size=steps)
g = eagle.deploy(linear).reverse(w, a=a, b=b)
ga, gb = jax.jit(jax.grad(lambda a, b: jnp.sum(w * jax_h(a, b)), argnums=(0, 1)))(a, b)
print("gradients with respect to a and b agree with jax.grad:",
      np.allclose(np.asarray(g["a"]), ga, rtol=1e-9), np.allclose(np.asarray(g["b"]), gb, rtol=1e-9))

# %% [markdown]
# ## Branches that loop over neighbours, and a range of lanes
#
# A `for` loop that reads other lanes (`x.at(k)`: lane k's x) may sit inside an `if`: its adjoint scatters into
# those lanes, and only the lanes that took that side run it, forward and reverse (a lane on the other side runs no
# pass, so a pass count read from its data, or a derivative that is NaN there, never matters).
#
# A launch bound to a range of lanes, `plan.bind(base=, count=, ...)`, has a reverse too: its gradients are those
# of what the range computed. Where no lane reads another lane or its position they are a run over the planes'
# slices, zero outside the range; where lanes read their neighbours (a stencil), the adjoint runs over the same
# lanes, and lanes just outside the range get what the range's reads sent them.

# %%
@hawk.kernel
def damped(x: Scalar, w: Scalar) -> Scalar:
    y = x * w
    if x > 0.0:
        for k in range(3):
            y = y * 0.5 + x.at(k + 1) * m.exp(w)
    return y


n = 64
x, w, ct = rng.normal(size=n), rng.normal(size=n) * 0.3, rng.normal(size=n)
g = eagle.deploy(damped).reverse(ct, x=x, w=w)


def jax_damped(x, w):
    y = x * w
    for k in range(3):  # (x.at(k + 1): lane k + 1's x, read by every lane)
        y = jnp.where(x > 0.0, y * 0.5 + x[k + 1] * jnp.exp(w), y)
    return jnp.sum(ct * y)


gx, gw = jax.grad(jax_damped, argnums=(0, 1))(x, w)
print("loop inside an if: agrees with jax.grad:", np.allclose(np.asarray(g["x"]), gx, rtol=1e-12, atol=1e-14),
      np.allclose(np.asarray(g["w"]), gw, rtol=1e-12, atol=1e-14))


@hawk.kernel
def scaled_sin(x: Scalar, a: Param) -> Scalar:
    return a * m.sin(x)


lo, count = 10, 20
part = eagle.deploy(scaled_sin).bind(base=lo, count=count, x=x, a=1.5).reverse(ct)  # (ct: what the launch hands back)
whole = eagle.deploy(scaled_sin).reverse(ct[lo:lo + count], x=x[lo:lo + count], a=1.5)
print("a bound range: the slices' gradients, bit for bit:",
      np.asarray(part["x"])[lo:lo + count].tobytes() == np.asarray(whole["x"]).tobytes(),
      float(part["a"]) == float(whole["a"]), "| zero outside it:",
      not np.any(np.asarray(part["x"])[:lo]) and not np.any(np.asarray(part["x"])[lo + count:]))


@hawk.kernel
def sharpen(g: Grid["r", "c":8], u: Scalar) -> Scalar:
    v = u - 0.25 * (u.at(r=g.r + 1) + u.at(r=g.r - 1) + u.at(c=g.c + 1) + u.at(c=g.c - 1))
    return v * v


u, ct_u = rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
rows = eagle.deploy(sharpen).bind(base=16, count=16, u=u).reverse(ct_u)["u"]  # rows 2 and 3 of 6


def jax_sharpen(u):
    p = jnp.pad(u, 1, mode="edge")  # (a read past the edge is clamped: the edge's value)
    v = u - 0.25 * (p[2:, 1:-1] + p[:-2, 1:-1] + p[1:-1, 2:] + p[1:-1, :-2])
    return jnp.sum((ct_u * v * v)[2:4])  # what the range computed: rows 2 and 3 only


print("a stencil's range agrees with jax.grad:", np.allclose(np.asarray(rows), jax.grad(jax_sharpen)(u), rtol=1e-12,
      atol=1e-14), "| rows that get a gradient:", np.nonzero(np.any(np.asarray(rows) != 0.0, axis=1))[0])

# %% [markdown]
# ## A convolution's gradient, gathered
#
# A 3 x 3 convolution reads its neighbours inside two `for` loops. The reverse of a read is a scatter of its
# cotangent back to the lane it read; for reads at the lane's own coordinates plus constants, `plan.reverse`
# gathers those terms instead (each lane collects what its neighbours' reads sent it, in plain lane kernels), with
# the same bits. Loops of a constant pass count around such reads are unrolled for it (docs/reverse.md, "A
# stencil's gradient: the gather form"), so the convolution's gradient runs as two lane kernels rather than an
# exact scatter into one slot per pixel.

# %%
@hawk.kernel
def blur_loss(g: Grid["r", "c":32], img: Scalar, w: Table["i":3, "j":3]) -> Scalar:
    acc = 0.0
    for i in range(3):
        for j in range(3):
            acc = acc + w.at(i=i, j=j) * img.at(r=g.r + i - 1, c=g.c + j - 1)
    return acc * acc


img, kern, ct_img = rng.normal(size=(24, 32)), rng.normal(size=(3, 3)) / 9.0, rng.normal(size=(24, 32))
plan = eagle.deploy(blur_loss)
g = plan.reverse(ct_img, img=img, w=kern)
print("launches of the gradient (the shares adjoint, with the Table's sums, then the gather):",
      len(plan.last_reverse_chunks))


def jax_blur(img, kern):
    p = jnp.pad(img, 1, mode="edge")  # (reads past the edge are clamped)
    acc = sum(kern[i, j] * p[i:i + 24, j:j + 32] for i in range(3) for j in range(3))
    return jnp.sum(ct_img * acc * acc)


gi, gw = jax.grad(jax_blur, argnums=(0, 1))(img, kern)
print("agrees with jax.grad:", np.allclose(np.asarray(g["img"]), gi, rtol=1e-12, atol=1e-13),
      np.allclose(np.asarray(g["w"]), gw, rtol=1e-12, atol=1e-13))
