# Source of notebooks/02_sum_contract.ipynb: edit here, then `.venv/bin/python scripts/notebooks.py build 02`.
# ruff: noqa: E402

# %% [markdown]
# # The sum contract: four policies, measured
#
# Floating-point addition is not associative, so "the sum" of many numbers depends on the order they are added
# in. hawk lets each sum say what it needs with `policy=`:
#
# | policy | what it promises |
# |---|---|
# | `"auto"` (the default) | over lanes, the fast form (bound grows with the terms); on a scatter, `compensated` |
# | `"compensated"` | an error of at most about one rounding of the total, however many terms |
# | `"plain"` | scatters only: the bare add, error growing with the number of terms |
# | `"ordered"` | the exact sum rounded once (`math.fsum`'s value): the same bits on every run, thread count, target |
#
# The error is measured as **k**: how far the result lands from the exactly rounded sum (`math.fsum`), in units of
# `eps * sum(|terms|)`. This notebook measures k for each policy as the number of terms grows, checks the bits of
# `ordered` across thread counts and targets, and looks at the published accuracy card.

# %%
import importlib.util
import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import eagle
import hawk
from hawk import Index, Mutable, Scalar

EPS = float(np.finfo(np.float64).eps)
ROOT = Path.cwd().parent  # the notebooks run from notebooks/

# %% [markdown]
# ## One kernel per policy
#
# Three sums over every lane (`plain` exists only for scatters) and four scatters that add every lane into key 0
# of a one-slot sink. Each is deployed with two threads, so the results below do not depend on how many cores
# this machine has.

# %%
@hawk.kernel
def sum_auto(x: Scalar) -> Scalar:
    return hawk.sum(x)


@hawk.kernel
def sum_compensated(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="compensated")


@hawk.kernel
def sum_ordered(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="ordered")


@hawk.kernel
def add_plain(key: Index, x: Scalar, acc: Mutable["slot":1]):
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def add_auto(key: Index, x: Scalar, acc: Mutable["slot":1]):
    hawk.scatter(acc)[key] += x


@hawk.kernel
def add_compensated(key: Index, x: Scalar, acc: Mutable["slot":1]):
    hawk.scatter(acc, policy="compensated")[key] += x


@hawk.kernel
def add_ordered(key: Index, x: Scalar, acc: Mutable["slot":1]):
    hawk.scatter(acc, policy="ordered")[key] += x


SUMS = {"auto": sum_auto, "compensated": sum_compensated, "ordered": sum_ordered}
SCATTERS = {"plain": add_plain, "auto": add_auto, "compensated": add_compensated, "ordered": add_ordered}

# %% [markdown]
# ## A hard input, and k
#
# The terms: a 1.0 followed by many tiny ones, each a little under half a unit in the last place of 1.0. Added one
# by one onto 1.0, every tiny term rounds away, so a naive running sum loses all of them; the exact sum keeps them.
# Small uniform noise keeps the tiny terms from being all equal. k is computed against `math.fsum`.

# %%
def hard_terms(n: int, seed: int = 5) -> np.ndarray:
    tiny = np.random.default_rng(seed).uniform(0.35, 0.45, n) * EPS
    tiny[0] = 1.0
    return tiny


def k_of(result: float, terms: np.ndarray) -> float:
    exact = math.fsum(terms.tolist())
    return abs(result - exact) / (EPS * math.fsum(np.abs(terms).tolist()))


terms = hard_terms(1000)
print("numpy's sum  :", terms.sum().hex(), " k =", round(k_of(terms.sum(), terms), 2))
print("math.fsum    :", math.fsum(terms.tolist()).hex())
print("running sum  :", float(np.cumsum(terms)[-1]).hex(), " (every tiny term rounded away)")

# %% [markdown]
# ## k as the number of terms grows
#
# Each policy runs on 10 to 100,000 terms. The dashed lines are the two kinds of promise: k <= 1
# (`compensated`, and `auto` on a scatter) and k <= n (the bounds that grow with the number of terms).

# %%
LENGTHS = [10, 100, 1_000, 10_000, 100_000]
over_lanes = {p: [] for p in SUMS}
by_key = {p: [] for p in SCATTERS}
for n in LENGTHS:
    t = hard_terms(n)
    for policy, kernel in SUMS.items():
        over_lanes[policy].append(k_of(float(eagle.deploy(kernel, threads=2).run(x=t)[0]), t))
    key = np.zeros(n, dtype=np.int32)
    for policy, kernel in SCATTERS.items():
        by_key[policy].append(k_of(float(eagle.deploy(kernel, threads=2).run(key=key, x=t)[0]), t))

# %%
COLOR = {"plain": "tab:red", "auto": "tab:blue", "compensated": "tab:green", "ordered": "tab:purple"}
STYLE = {"plain": "v-", "auto": "o-", "compensated": "s--", "ordered": "D-"}
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
for ax, title, results in ((axes[0], "hawk.sum over lanes", over_lanes),
                           (axes[1], "hawk.scatter(acc)[0] +=", by_key)):
    for policy, ks in results.items():
        ax.loglog(LENGTHS, np.maximum(ks, 1e-3), STYLE[policy], color=COLOR[policy], label=policy)
    ax.loglog(LENGTHS, LENGTHS, "k--", lw=0.8, label="k = n")
    ax.axhline(1.0, color="k", ls=":", lw=0.8, label="k = 1")
    ax.set_title(title)
    ax.set_xlabel("terms n")
axes[0].set_ylabel("k  (0 drawn at 1e-3)")
for ax in axes:
    ax.legend(fontsize=7, loc="center left")
plt.tight_layout()
plt.show()

# %% [markdown]
# What the plot shows: `auto` over lanes and `plain` scatters drift away as n grows, though far below the k = n
# line; `ordered` is the exact sum rounded once, which is what `math.fsum` returns, so its k is 0 at every n;
# `compensated` (and `auto` on a scatter, which is the compensated form) also lands on the exactly rounded sum of
# these terms, k = 0, though it promises only k <= 1.
#
# The same numbers as a table. `auto` and `plain` add in whatever order the machine's vector units and threads make,
# so their k can differ from machine to machine (this cell's output is this machine's); the promises below hold
# everywhere.

# %% machine
print(f"{'n':>8}" + "".join(f"{'sum ' + p:>17}" for p in SUMS) + "".join(f"{'scatter ' + p:>21}" for p in SCATTERS))
for i, n in enumerate(LENGTHS):
    row = [over_lanes[p][i] for p in SUMS] + [by_key[p][i] for p in SCATTERS]
    print(f"{n:>8}" + "".join(f"{k:>17.3g}" for k in row[:3]) + "".join(f"{k:>21.3g}" for k in row[3:]))

# %%
tight = over_lanes["compensated"] + by_key["compensated"] + by_key["auto"]
grows = over_lanes["auto"] + by_key["plain"]
bounds = LENGTHS * 2
print("k <= 1 for compensated sums and auto/compensated scatters:", all(k <= 1.0 for k in tight))
print("k <= n for auto sums and plain scatters:", all(k <= n for k, n in zip(grows, bounds, strict=True)))
exact = over_lanes["ordered"] + by_key["ordered"]
print("ordered is math.fsum's value (k = 0) at every n:", all(k == 0.0 for k in exact))

# %% [markdown]
# ## `ordered`: the same bits everywhere
#
# An ordered sum keeps the exact sum of its terms in an integer accumulator and rounds it once at the end
# (docs/ordered.md). Integer adds do not care about order, so the thread count cannot change the result.
# `float.hex` shows every bit. `eagle.reduce` with `policy="ordered"` gives the same bits, and so does `math.fsum`.

# %%
x = np.random.default_rng(11).normal(size=50_000) * 10.0 ** np.random.default_rng(12).uniform(-3, 3, 50_000)
bits = {threads: float(eagle.deploy(sum_ordered, threads=threads).run(x=x)[0]).hex() for threads in (1, 2, 3, 4, 7)}
for threads, b in bits.items():
    print(f"threads={threads}: {b}")
ref = np.zeros(1)
eagle.reduce(x, ref, policy="ordered").launch()
print("eagle.reduce    :", float(ref[0]).hex())
print("math.fsum       :", math.fsum(x.tolist()).hex())
print("one value:", len(set(bits.values()) | {float(ref[0]).hex(), math.fsum(x.tolist()).hex()}) == 1)

# %% [markdown]
# Targets too: on the spirv target (Vulkan) the GPU threads deposit into the same exact accumulators and the host
# rounds them, so the bits are the host's. Without a GPU it runs on Mesa's lavapipe, a Vulkan driver on the CPU.
# This cell skips a target whose runtime is not on this machine, saying why.

# %% machine
for target in ("spirv", "nvvm", "rocdl"):
    try:
        got = float(eagle.deploy(sum_ordered, target=target).run(x=x)[0]).hex()
    except eagle.RuntimeMissing as why:
        print(f"{target}: skipped, {why}")
        continue
    print(f"{target}: {got}  same bits as the host: {got == bits[1]}")

# %% [markdown]
# ## The accuracy card
#
# `scripts/card.py` measures k for every policy on several families of hard inputs, at 100 to a million terms,
# on each target, and writes `docs/card.md` with a JSON copy. The worst k on the host, float64:

# %%
card = json.loads((ROOT / "docs" / "card.json").read_text())
print(f"{'':>8} {'policy':>12}" + "".join(f"{'n=' + format(n, ','):>14}" for n in card["lengths"]))
rows = {}
for e in card["targets"]["host"]["entries"]:
    if e["dtype"] == "float64":
        rows.setdefault((e["op"], e["policy"]), {})[e["length"]] = e["k"]
for (op, policy), ks in rows.items():
    print(f"{op:>8} {policy:>12}" + "".join(f"{ks[n]:>14.3g}" for n in card["lengths"]))

# %% [markdown]
# Recomputing a small part: the card's quick mode (100 and 10,000 terms) on the host, a few seconds. The
# `ordered` entries are bits that do not depend on the machine, so they must match the published card exactly
# (and be the correctly rounded sum); the `compensated` ones must keep k <= 1.

# %%
spec = importlib.util.spec_from_file_location("card", ROOT / "scripts" / "card.py")
card_script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(card_script)
quick = card_script.measure(quick=True, targets=("host",))

published = {(e["op"], e["policy"], e["dtype"], e["length"]): e for e in card["targets"]["host"]["entries"]}
for e in quick["targets"]["host"]["entries"]:
    if e["policy"] in ("ordered", "compensated") and e["dtype"] == "float64":
        same = e["cases"] == published[e["op"], e["policy"], e["dtype"], e["length"]]["cases"]
        verdict = f"worst {e['ulps']:.2g} ulp, correctly rounded: {e['correctly_rounded']}, same as the card: " \
            f"{same}" if e["policy"] == "ordered" else f"worst k <= 1: {e['k'] <= 1}"
        print(f"{e['op']:>8} {e['policy']:>12} n={e['length']:>6}: {verdict}")
