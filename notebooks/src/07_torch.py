# Source of notebooks/07_torch.ipynb: edit here, then `.venv/bin/python scripts/notebooks.py build 07`.
# ruff: noqa: E402

# %% [markdown]
# # A hawk kernel inside a PyTorch module, under `torch.compile`
#
# `eagle.torch.wrap(kernel)` makes a hawk kernel a `torch.library` custom operator: it has a fake-tensor
# implementation (so `torch.compile` traces it without running it, sizes symbolic) and an autograd formula whose
# backward is the kernel's reverse (the adjoint built from the hawk IR), itself a custom operator.
#
# Here a hawk kernel is the core of a small module: a smooth histogram of its inputs (each value spread over
# neighbouring bins with learnable weights), summed into bins with an `ordered` scatter.

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch

import eagle
import eagle.torch
import hawk
import hawk.math as m
from hawk import Index, Mutable, Param, Scalar

torch.manual_seed(7)

# %% [markdown]
# ## The kernel
#
# Each lane adds `w * exp(-(x - centre)^2 / width)` into its bin and the next one. The bins are a sink of 16
# slots; `ordered` makes every slot the exact sum of what its lanes added, rounded once.

# %%
@hawk.kernel
def soft_hist(x: Scalar, bin: Index, w: Scalar, width: Param, hist: Mutable["slot":17]):
    centre = (bin + 0.5) / 16.0
    d = x - centre
    hawk.scatter(hist, policy="ordered")[bin] += w * m.exp(-d * d / width)
    hawk.scatter(hist, policy="ordered")[bin + 1] += w * m.exp(-(d - 0.0625) * (d - 0.0625) / width)


soft = eagle.torch.wrap(soft_hist)


class SoftHistogram(torch.nn.Module):
    """Per-value weights (learned) and a bin width (learned) around a hawk kernel."""

    def __init__(self, n: int):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(n, dtype=torch.float64))
        self.log_width = torch.nn.Parameter(torch.tensor(-4.0, dtype=torch.float64))

    def forward(self, x, bins):
        return soft(x=x, bin=bins, w=self.w, width=torch.exp(self.log_width))


x = torch.rand(4096, dtype=torch.float64)
bins = torch.clamp((x * 16).long(), 0, 15).to(torch.int32)
target = torch.from_numpy(np.interp(np.arange(17), [0, 8, 16], [0.0, 400.0, 100.0]))
model = SoftHistogram(x.numel())
print("first bins:", np.round(model(x, bins).detach().numpy()[:4], 3))

# %% [markdown]
# ## Gradients are the reverse's, and they check out
#
# `torch.autograd.gradcheck` compares the operator's gradients with finite differences (float64):

# %%
small = dict(x=x[:64], bin=bins[:64])
w = torch.rand(64, dtype=torch.float64, requires_grad=True)
width = torch.tensor(0.02, dtype=torch.float64, requires_grad=True)
ok = torch.autograd.gradcheck(lambda w, width: soft(**small, w=w, width=width), (w, width), eps=1e-6, atol=1e-7)
print("gradcheck:", ok)

# %% [markdown]
# ## Training under `torch.compile(fullgraph=True)`
#
# The forward and backward operators are traced into one graph: no graph break. The module learns weights and a
# width that reshape the histogram towards a target:

# %%
@torch.compile(fullgraph=True, backend="aot_eager")
def loss_fn(model, x, bins):
    return ((model(x, bins) - target) ** 2).mean()


opt = torch.optim.Adam(model.parameters(), lr=0.05)
for k in range(60):
    opt.zero_grad()
    loss = loss_fn(model, x, bins)
    loss.backward()
    opt.step()
    if k % 15 == 0:
        print(f"step {k:2d}: loss {loss.item():.3f}")
print("final loss:", round(loss_fn(model, x, bins).item(), 3))

with torch.no_grad():
    fitted = model(x, bins).numpy()
plt.figure(figsize=(6, 3.2))
plt.bar(np.arange(17), fitted, label="soft histogram (trained)")
plt.plot(np.arange(17), target.numpy(), "k.-", label="target")
plt.xlabel("bin")
plt.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The same bits on every thread count
#
# The bins are ordered (exact) sums, and so are the gradients' sums over lanes: deployed on one thread and on two
# with small chunks, the gradient of the weights has the same bits.

# %%
def weight_grad(op):
    w = model.w.detach().clone().requires_grad_()
    out = op(x=x, bin=bins, w=w, width=torch.exp(model.log_width.detach()))
    (out * target).sum().backward()
    return w.grad.numpy().tobytes()


print("same bits:", weight_grad(eagle.torch.wrap(soft_hist, threads=1)) ==
      weight_grad(eagle.torch.wrap(soft_hist, threads=2, min_chunk=512)))

# %% [markdown]
# ## Integer results beside float ones
#
# A kernel may also hand back integers: a `Mutable[Index]` output (one int64 per lane when left out, or the
# dtype of a tensor passed in) and an output written by key (`hawk.scatter(out)[k] = v`, zero where no lane
# writes). Here each value's nearest bin comes back as an integer beside its distance to the bin's centre; the
# integer result needs no gradient, and `backward()` runs through the float one.

# %%
@hawk.kernel
def nearest_bin(x: Scalar, bin: Mutable[Index], dist: Mutable[Scalar]):
    bin = m.index(x * 16.0, 16)
    d = x - (m.floor(x * 16.0) + 0.5) / 16.0
    dist = d * d


near = eagle.torch.wrap(nearest_bin)
xs = torch.rand(6, dtype=torch.float64, requires_grad=True)
got = near(x=xs)
print("bins:", got["bin"].tolist(), got["bin"].dtype, "requires grad:", got["bin"].requires_grad)
print("bins agree with torch:", torch.equal(got["bin"], torch.clamp((xs.detach() * 16).floor(), 0, 15).long()))
got["dist"].sum().backward()
want = 2 * (xs.detach() - ((xs.detach() * 16).floor() + 0.5) / 16)
print("d/dx of the summed distances, as torch computes it:", torch.allclose(xs.grad, want, rtol=1e-14, atol=0))
