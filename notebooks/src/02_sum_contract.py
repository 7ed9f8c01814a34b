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
import os
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
# ## The sign of a zero
#
# A `plain` or `compensated` (`auto`) scatter leaves a slot as IEEE addition does in any order, as `np.add.at` and
# torch's `index_add_` do: `-0.0` when its prior content and every term added into it are `-0.0`, `+0.0` as soon
# as one term is `+0.0` or two cancel; a slot no lane adds into keeps its bits. An `ordered` scatter rounds the
# exact sum, and an exact zero has no sign: `+0.0`, as `math.fsum` gives.

# %%
zero_key = np.zeros(3, np.int64)
for name, zero_terms in (("all -0.0", [-0.0, -0.0, -0.0]), ("one +0.0", [-0.0, 0.0, -0.0]),
                         ("1, -1, -0.0", [1.0, -1.0, -0.0])):
    x0 = np.array(zero_terms)
    ref = np.array([-0.0])
    np.add.at(ref, zero_key, x0)
    got = {p: float(np.asarray(eagle.deploy(k).run(key=zero_key, x=x0, acc=np.array([-0.0])))[0])
           for p, k in SCATTERS.items()}
    print(f"{name:>12} into -0.0: np.add.at {ref[0]:+}  " + "  ".join(f"{p} {v:+}" for p, v in got.items()))

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
# ## Ordered scatters: four lanes at a time, every slot exact
#
# A scatter with `policy="ordered"` gives each slot the exact sum of its terms rounded once, which is
# `math.fsum` of them. On the host, each chunk of lanes keeps a `(high, low)` float pair per slot and takes each
# term by two error-free TwoSums; only a term the pair cannot hold exactly goes into the slot's shared integer
# accumulator (docs/ordered.md).
#
# When a kernel does nothing but ordered `+=` of scalars into sinks, the host runs its lanes **in groups of
# four**: the body once per lane, then the four lanes' pairs are gathered into vectors and their TwoSums run side
# by side, one vector instruction for four lanes. Those are exactly the steps each lane would take alone, so the
# bits cannot change; a group whose lanes share a slot, whose pairs would lose a bit, or that holds a key of `-1`
# (a lane that adds nothing) or outside the sink falls back to the one-lane steps in lane order.
#
# Here a million lanes add into 1024 slots, with random keys (about 1% of them `-1`) and terms spread over 16
# orders of magnitude. The host lowering of this kernel holds 4-wide float64 vectors; the same scatter with
# `policy="plain"` holds none.

# %%
@hawk.kernel
def binned(key: Index, x: Scalar, acc: Mutable["slot":1024]):
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def binned_plain(key: Index, x: Scalar, acc: Mutable["slot":1024]):
    hawk.scatter(acc, policy="plain")[key] += x


for kernel in (binned, binned_plain):
    print(f"{kernel.name:>12}: 4-wide vectors in the host lowering:",
          "vector<4xf64>" in kernel.mlir(after="lower-host-lanes"))

N_LANES, N_SLOTS = 1_000_000, 1024
rng_bins = np.random.default_rng(21)
bin_key = rng_bins.integers(0, N_SLOTS, size=N_LANES).astype(np.int32)
bin_key[rng_bins.uniform(size=N_LANES) < 0.01] = -1  # these lanes add nothing
bin_x = rng_bins.normal(size=N_LANES) * 10.0 ** rng_bins.uniform(-8, 8, size=N_LANES)
print("lanes with key -1:", int((bin_key < 0).sum()))

# %% [markdown]
# The same run on one thread and on two (`min_chunk` lets a million lanes split into several chunks;
# `plan.last_chunks` says how many chunks each stage ran), bit for bit, and against `math.fsum` of each slot's
# terms. NumPy's `np.add.at` adds one term at a time in lane order: most slots' last bits differ from the exact
# sum.

# %%
binned_runs = {}
for threads in (1, 2):
    plan = eagle.deploy(binned, threads=threads, min_chunk=65_536)
    binned_runs[threads] = np.asarray(plan.run(key=bin_key, x=bin_x))
    print(f"threads={threads}: chunks {plan.last_chunks}, slot 0 = {float(binned_runs[threads][0]).hex()}")
print("same bits on 1 and 2 threads:", np.array_equal(binned_runs[1].view(np.int64), binned_runs[2].view(np.int64)))

order = np.argsort(bin_key, kind="stable")  # each slot's terms side by side (the -1 lanes first)
cuts = np.searchsorted(bin_key[order], np.arange(-1, N_SLOTS + 1))
sorted_x = bin_x[order]
fsum = np.array([math.fsum(sorted_x[cuts[s + 1]:cuts[s + 2]].tolist()) for s in range(N_SLOTS)])
print("every slot is math.fsum of its terms:", np.array_equal(binned_runs[2].view(np.int64), fsum.view(np.int64)))
one_by_one = np.zeros(N_SLOTS)
np.add.at(one_by_one, bin_key[bin_key >= 0], bin_x[bin_key >= 0])
print("slots where np.add.at differs from math.fsum:", int((one_by_one != fsum).sum()), "of", N_SLOTS)

# %% [markdown]
# ## Sinks too large for private copies: slot ranges
#
# A plain or compensated scatter normally gives each chunk of lanes a private copy of the sink and adds the
# copies together at the end (the plain sum's last bits follow how the lanes were chunked, within its bound).
# That cannot go on for any size: beyond `2**25` slots (`hawk.abi.layout.PAIR_SLOTS`, 256 MiB of float64 a copy)
# a sink keeps no copies. Rather than run such a stage as one chunk on one thread, eagle runs a stage whose only
# effects are scatters into sinks (and per-lane outputs it does not read back) in **slot ranges**: one chunk per
# thread, each running *every* lane but applying only the scatters whose slot falls in its own contiguous range
# of the sink (chunk c of P takes slots `[c*S//P, (c+1)*S//P)`). Every slot then gets all its terms from one
# chunk, in lane order: the bits of a single chunk, under every policy, at every thread count, with no memory
# beyond the sink. The price is that each thread streams every lane's inputs, for 1/P of the random slot
# accesses, which dominate a scatter into a sink that large. An ordered sink alone never takes this form: its chunks
# share the slots' exact accumulators, so it keeps splitting by lanes (and is exact in any form). A stage that
# also reduces, scans, stores by key into an output plane or reads its outputs keeps the one-chunk form
# (docs/semantics.md, "Scatter keys").
#
# Showing it with a 2**25-slot sink would take gigabytes, so this cell sets `HAWK_COPY_SLOTS`, **a test knob**
# that lowers the copy limit for the kernels specialised while it is set (it is part of every cache key), so
# that a 3000-slot sink takes the slot-range form; it is removed again at the end of the cell. A plain sink
# beside an ordered one, on two threads: in the usual form the plain sink's bits follow the chunks; in slot
# ranges they are `np.add.at`'s, one add at a time in lane order, as on one thread.

# %%
@hawk.kernel
def two_sinks(key: Index, other: Index, x: Scalar, acc: Mutable["slot":3000], exact: Mutable["slot":500]):
    hawk.scatter(acc, policy="plain")[key] += x
    hawk.scatter(exact, policy="ordered")[other] += x


rng_sr = np.random.default_rng(5)
sr_key = rng_sr.integers(0, 3000, size=20_000).astype(np.int32)
sr_key[rng_sr.uniform(size=20_000) < 0.05] = -1
sr_other = rng_sr.integers(0, 500, size=20_000).astype(np.int32)
sr_x = rng_sr.normal(size=20_000) * 10.0 ** rng_sr.integers(-6, 7, size=20_000)
lane_order = np.zeros(3000)
np.add.at(lane_order, sr_key[sr_key >= 0], sr_x[sr_key >= 0])


def run_two_sinks(threads: int) -> dict:
    plan = eagle.deploy(two_sinks, threads=threads, min_chunk=1024)
    out = {k: np.asarray(v) for k, v in plan.run(key=sr_key, other=sr_other, x=sr_x).items()}
    ranges = two_sinks.layout(two_sinks.spec_for("float64", {})).slot_ranges()
    print(f"  threads={threads}: chunks {plan.last_chunks}, slot ranges: {ranges}, plain sink bit for bit "
          f"np.add.at: {np.array_equal(out['acc'], lane_order)}")
    return out


print("usual form (private copies):")
usual = {threads: run_two_sinks(threads) for threads in (1, 2)}
os.environ["HAWK_COPY_SLOTS"] = "1024"  # a test knob: sinks over 1024 slots count as too large for copies
try:
    print("slot-range form:")
    ranged = {threads: run_two_sinks(threads) for threads in (1, 2)}
finally:
    del os.environ["HAWK_COPY_SLOTS"]
print("slot ranges on 2 threads, same bits as the usual form on 1:",
      all(np.array_equal(ranged[2][k].view(np.int64), usual[1][k].view(np.int64)) for k in ("acc", "exact")))
print("ordered sink, same bits in every run:",
      all(np.array_equal(r["exact"], usual[1]["exact"]) for r in (usual[2], ranged[1], ranged[2])))

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
