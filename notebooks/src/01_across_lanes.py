# Source of notebooks/01_across_lanes.ipynb: edit here, then `.venv/bin/python scripts/notebooks.py build 01`.
# ruff: noqa: E402

# %% [markdown]
# # Across lanes: reductions, scatters and reads of other lanes
#
# A hawk kernel body is written for **one lane**. Inside it, `x` means "my value of x" and nothing reaches a
# neighbour by accident. Lanes meet in exactly three ways, each spelled out in the body:
#
# 1. **reduce** over lanes: `hawk.sum`, `hawk.mean`, `hawk.max`, `hawk.min` (with `where=` and `over=`);
# 2. **scatter** by key: `hawk.scatter(sink)[key] += v` or `= v`;
# 3. **read** another lane's input: `u.at(i)`.
#
# Every section below is a small kernel next to the NumPy line that computes the same thing. The data are seeded,
# so the printed numbers are the same on every run.

# %%
import numpy as np

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Index, Matrix, Mutable, Param, Scalar, Sorted, Vector

rng = np.random.default_rng(17)
np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## Reductions and `where=`
#
# A reduction assigned to a `Mutable` output makes that output a **cell**: one value for the whole run, handed
# back as a one-element array. `where=` keeps only the lanes whose mask is true. Below: the total rainfall over
# a month of days, and the mean over the wet days only.

# %%
@hawk.kernel
def rain_stats(mm: Scalar, total: Mutable[Scalar], wet_mean: Mutable[Scalar], wet_days: Mutable[Scalar]):
    total = hawk.sum(mm)
    wet_mean = hawk.mean(mm, where=mm > 0.5)
    wet_days = hawk.sum(m.where(mm > 0.5, 1.0, 0.0))


rain = np.round(rng.gamma(0.6, 4.0, size=30), 1)
out = eagle.deploy(rain_stats).run(mm=rain)
print("hawk :", {name: round(float(cell[0]), 6) for name, cell in out.items()})
print("numpy:", {"total": round(float(rain.sum()), 6), "wet_days": float((rain > 0.5).sum()),
                 "wet_mean": round(float(rain[rain > 0.5].mean()), 6)})

# %% [markdown]
# A kernel reduces with one kind of operation: `sum` and `mean` may share a kernel, `max` and `min` each get their
# own. The wettest day (`hawk.min` works the same way):

# %%
@hawk.kernel
def wettest(mm: Scalar) -> Scalar:
    return hawk.max(mm)


print("hawk :", eagle.deploy(wettest).run(mm=rain)[0], " numpy:", rain.max())

# %% [markdown]
# ## Named lane axes: `Grid` and `over=`
#
# A `Grid` parameter names the lane axes, in NumPy order (the last is the fastest). Only the first axis may
# leave its extent open; the run binds it by its label (`station=3`). `over=` says which axes a reduction folds;
# the others are kept, and the result is shaped by them.
#
# Hourly temperatures of three weather stations over four days: `over="hour"` gives the daily mean, one value
# per (station, day).

# %%
@hawk.kernel
def daily_mean(lane: Grid["station", "day":4, "hour":24], temp: Scalar) -> Scalar:
    return hawk.mean(temp, over="hour")


temp = np.round(rng.normal(12.0, 4.0, size=(3, 4, 24)), 2)
per_day = eagle.deploy(daily_mean).run(temp=temp, station=3)
# (the default policy adds in the order this CPU's vectors favour: the last bit may differ between machines,
# and a mean like 10.83125 may then print either way at four decimals: five decimals leave no tie here)
with np.printoptions(precision=5):
    print("hawk :", np.asarray(per_day).shape, "\n", np.asarray(per_day))
    print("numpy:", temp.mean(axis=2).shape, "\n", temp.mean(axis=2))
print("within 1e-12 of NumPy:", np.allclose(per_day, temp.mean(axis=2), rtol=0, atol=1e-12))

# %% [markdown]
# An axis can also be named by its position (`over=-1` is the fastest axis, here `hour`) or several at once with
# a tuple. Folding `day` and `hour` together leaves one value per station.

# %%
@hawk.kernel
def by_position(lane: Grid["station", "day":4, "hour":24], temp: Scalar) -> Scalar:
    return hawk.mean(temp, over=-1)


@hawk.kernel
def station_mean(lane: Grid["station", "day":4, "hour":24], temp: Scalar) -> Scalar:
    return hawk.mean(temp, over=("day", "hour"))


print("over=-1 equals over='hour':", np.array_equal(eagle.deploy(by_position).run(temp=temp, station=3), per_day))
print("hawk :", np.asarray(eagle.deploy(station_mean).run(temp=temp, station=3)))
print("numpy:", temp.mean(axis=(1, 2)))

# %% [markdown]
# ## Two different sums: inside a lane, over lanes
#
# `v.sum()` adds a lane's **own** components: it never leaves the lane, so every lane gets its own answer.
# `hawk.sum(v)` adds **across lanes**, component by component. Here each lane holds one shopping basket of three
# items (prices times quantities).

# %%
@hawk.kernel
def baskets(price: Vector[3], qty: Vector[3], bill: Mutable[Scalar], per_item: Mutable[Vector[3]]):
    spent = price * qty
    bill = spent.sum()              # inside the lane: this basket's bill
    per_item = hawk.sum(spent)      # over the lanes: each item's takings over every basket


price = np.array([[2.5], [0.8], [4.0]]) * np.ones((3, 6))
qty = rng.integers(0, 5, size=(3, 6)).astype(np.float64)
out = eagle.deploy(baskets).run(price=price, qty=qty)
print("bill per basket  hawk :", np.asarray(out["bill"]), " numpy:", (price * qty).sum(axis=0))
print("takings per item hawk :", [float(out[f"per_item_{k}"][0]) for k in range(3)],
      " numpy:", (price * qty).sum(axis=1))

# %% [markdown]
# ## Vector and matrix cells
#
# Reducing a `Vector[n]` or `Matrix[r, c]` gives a cell with one entry per component, handed back as
# `name_0 ... name_{k-1}` (row-major for a matrix). `.rows[i]`, `.columns[j]` and `.components[k]` pick a part
# of a lane's value first (they stay inside the lane). A matrix plane is passed as `(r*c, lanes)`.
#
# Summing outer products `d d^T` over the lanes gives a scatter (second-moment) matrix.

# %%
@hawk.kernel
def moments(d: Vector[2], outer: Mutable[Matrix[2, 2]], first_row: Mutable[Vector[2]]):
    o = m.mat(d.components[0] * d, d.components[1] * d)      # rows: d0 * d and d1 * d
    outer = hawk.sum(o)
    first_row = hawk.sum(o.rows[0])


d = rng.normal(size=(2, 40))
out = eagle.deploy(moments).run(d=d)
print("hawk :", np.array([out[f"outer_{k}"][0] for k in range(4)]).reshape(2, 2).round(6).tolist())
print("numpy:", (d @ d.T).round(6).tolist())
print("first row hawk:", np.array([out[f"first_row_{k}"][0] for k in range(2)]), " numpy:", (d @ d.T)[0])

# %% [markdown]
# ## Scatter by key: `+=` and `=`
#
# A sink is a `Mutable` declared with named axes, `Mutable["bin":6]`. `hawk.scatter(sink)[key] += v` adds each
# lane's `v` into the slot its key names; many lanes may share a key and their adds never race. A key can be
# a computed index (`m.index(v, n)` is `clamp(floor(v), 0, n - 1)`), a tuple of coordinates, or an `Index` plane.
#
# An **omitted** sink starts at zero. A **passed** sink is written in place and the adds land on top of what it
# held: handy to accumulate over several runs.

# %%
@hawk.kernel
def age_histogram(age: Scalar, counts: Mutable["bin":6]):
    hawk.scatter(counts)[m.index(age / 15.0, 6)] += 1.0


ages = rng.uniform(0.0, 90.0, size=500)
fresh = eagle.deploy(age_histogram).run(age=ages)                     # omitted: starts at zero
print("omitted sink:", np.asarray(fresh), " numpy:", np.histogram(ages, bins=6, range=(0, 90))[0])

running = np.zeros(6)
for batch in np.split(ages, 5):                                       # passed: five batches add up in place
    eagle.deploy(age_histogram).run(age=batch, counts=running)
print("passed sink, five batches:", running)

# %% [markdown]
# A tuple key addresses a sink with several axes, and an `Index` plane gives each lane's key directly. A store
# (`= v`) writes instead of adding; when several lanes store into one slot the last lane wins, and a slot no lane
# writes keeps its content.

# %%
@hawk.kernel
def by_weekday_hour(day: Index, hour: Index, sales: Scalar, grid: Mutable["weekday":7, "hour":24]):
    hawk.scatter(grid)[day, hour] += sales


@hawk.kernel
def latest(slot: Index, reading: Scalar, board: Mutable["slot":5]):
    hawk.scatter(board)[slot] = reading


day = rng.integers(0, 7, 300).astype(np.int32)
hour = rng.integers(0, 24, 300).astype(np.int32)
sales = np.round(rng.uniform(1.0, 50.0, 300), 2)
grid = eagle.deploy(by_weekday_hour).run(day=day, hour=hour, sales=sales)
want = np.zeros((7, 24))
np.add.at(want, (day, hour), sales)
print("tuple key: shape", np.asarray(grid).shape, " equal to np.add.at:", np.allclose(grid, want))

board = np.full(5, -1.0)
slot = np.array([0, 2, 2, 4, 0], dtype=np.int32)
eagle.deploy(latest).run(slot=slot, reading=np.array([10.0, 20.0, 21.0, 40.0, 11.0]), board=board)
print("store, last lane wins, slots 1 and 3 untouched:", board)
print("store into an omitted sink (starts at zero)  :",
      np.asarray(eagle.deploy(latest).run(slot=slot, reading=np.array([10.0, 20.0, 21.0, 40.0, 11.0]))))

# %% [markdown]
# A key can also be a lane coordinate. Adding every reading of a station into that station's slot is the same sum
# as `hawk.sum(temp, over=("day", "hour"))`: one form returns the result, the other adds it into a sink you can
# pass in.

# %%
@hawk.kernel
def station_totals(lane: Grid["station", "day":4, "hour":24], temp: Scalar, total: Mutable["station":3]):
    hawk.scatter(total)[lane.station] += temp


print("hawk :", np.asarray(eagle.deploy(station_totals).run(temp=temp, station=3)))
print("numpy:", temp.sum(axis=(1, 2)))

# %% [markdown]
# ## Keys that arrive in order: `Sorted[Index]`
#
# When equal keys sit next to each other (a CSR row index, a sorted group id), say so with `Sorted[Index]`. hawk
# then adds each run of equal keys once instead of lane by lane; the result is the same. The promise is yours to
# keep: `HAWK_CHECK_SORTED=1` makes a run verify it.

# %%
@hawk.kernel
def row_sums(row: Sorted[Index], value: Scalar, out: Mutable["row":5]):
    hawk.scatter(out)[row] += value


row = np.repeat(np.arange(5), [3, 0, 6, 2, 4]).astype(np.int32)      # row 1 has no entries
value = np.round(rng.normal(size=row.size), 3)
print("hawk :", np.asarray(eagle.deploy(row_sums).run(row=row, value=value)))
print("numpy:", np.bincount(row, weights=value, minlength=5))

# %% [markdown]
# ## Reading another lane: `.at`
#
# `u.at(i)` is the input `u` as lane `i` holds it; on a `Grid` the axes are named, `u.at(pos=i - 1)`. Only
# inputs can be read this way (never a value the kernel computes), and an index outside the lanes is undefined,
# so guard the edges with an `if`. First a gather through a permutation:

# %%
@hawk.kernel
def gather(x: Scalar, src: Index, y: Mutable[Scalar]):
    y = x.at(src)


x = np.arange(10.0) ** 2
src = rng.permutation(10).astype(np.int32)
print("hawk :", np.asarray(eagle.deploy(gather).run(x=x, src=src)))
print("numpy:", x[src])

# %% [markdown]
# And a stencil: one step of a three-point moving average on a noisy signal, the two ends kept as they are. A
# picture says more than the numbers here.

# %%
POINTS = 120


@hawk.kernel
def smooth(lane: Grid["pos":POINTS], u: Scalar, w: Param) -> Scalar:
    i = lane.pos
    if m.land(i > 0, i < POINTS - 1):
        v = (1.0 - 2.0 * w) * u + w * (u.at(pos=i - 1) + u.at(pos=i + 1))
    else:
        v = u
    return v


t = np.linspace(0.0, 4.0 * np.pi, POINTS)
noisy = np.sin(t) + 0.3 * rng.normal(size=POINTS)
plan = eagle.deploy(smooth)
once = np.asarray(plan.run(u=noisy, w=1 / 3))
want = noisy.copy()
want[1:-1] = noisy[1:-1] / 3 + (noisy[:-2] + noisy[2:]) / 3
print("one step equals numpy:", np.allclose(once, want))
many = noisy
for _ in range(10):
    many = np.asarray(plan.run(u=many, w=1 / 3))

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 2.6))
ax.plot(t, noisy, ".", ms=3, color="0.6", label="input")
ax.plot(t, once, lw=1, label="one step")
ax.plot(t, many, lw=2, label="ten steps")
ax.set_xlabel("t")
ax.legend(loc="upper right", fontsize=8)
plt.show()

# %% [markdown]
# `smooth` fixes its length (`"pos":POINTS`). With a bare label the length comes with the data, and
# `lane.extent("pos")` is it: an integer, the same on every lane, so the last lane is `lane.extent("pos") - 1`
# (a fixed extent would just be the constant).

# %%
@hawk.kernel
def smooth_any(lane: Grid["pos"], u: Scalar, w: Param) -> Scalar:
    i, last = lane.pos, lane.extent("pos") - 1
    if m.land(i > 0, i < last):
        v = (1.0 - 2.0 * w) * u + w * (u.at(pos=i - 1) + u.at(pos=i + 1))
    else:
        v = u
    return v


any_plan = eagle.deploy(smooth_any)
print("same bits as smooth at", POINTS, "points:", np.array_equal(any_plan.run(u=noisy, w=1 / 3), once))
for n in (3, 7, 40):
    ends = np.asarray(any_plan.run(u=noisy[:n], w=1 / 3))
    mid = noisy[1:n - 1] / 3 + (noisy[:n - 2] + noisy[2:n]) / 3
    print(f"{n} points: ends kept {ends[0] == noisy[0] and ends[-1] == noisy[n - 1]},",
          "inside equals numpy:", np.allclose(ends[1:-1], mid))

# %% [markdown]
# Instead of guarding the ends, a read can clamp its neighbour to the edge: `u.at(pos=m.max(i - 1, 0))` and
# `u.at(pos=m.min(i + 1, last))` read the end sample itself past an end, as NumPy's `np.pad(u, 1, mode="edge")`
# does. The compiler still sees each read as this lane's position plus a constant (clamped), so such a kernel is
# a stencil everywhere a bare offset is: its gradient takes the gathered form and sharded runs exchange halo rows
# (notebooks 06 and 09 show both with bare offsets).

# %%
@hawk.kernel
def smooth_edge(lane: Grid["pos"], u: Scalar, w: Param) -> Scalar:
    i, last = lane.pos, lane.extent("pos") - 1
    return (1.0 - 2.0 * w) * u + w * (u.at(pos=m.max(i - 1, 0)) + u.at(pos=m.min(i + 1, last)))


padded = np.pad(noisy, 1, mode="edge")
edge = np.asarray(eagle.deploy(smooth_edge).run(u=noisy, w=1 / 3))
print("clamped at the edges equals numpy's edge padding:",
      np.allclose(edge, noisy / 3 + (padded[:-2] + padded[2:]) / 3))

# %% [markdown]
# ## Reading a total: stages
#
# Reading a reduced value later in the body is fine, but the total exists only once every lane has been added.
# So that read is a launch boundary: hawk cuts the kernel into **stages**, each one launch, each compiled and
# cached on its own, with the total passed between them as a cell. Standardising a signal needs two totals, the
# mean and then the spread around it, so it runs in three stages.

# %%
@hawk.kernel
def standardise(x: Scalar, z: Mutable[Scalar]):
    centred = x - hawk.mean(x)
    z = centred / m.sqrt(hawk.mean(centred * centred))


x = rng.normal(40.0, 6.0, size=200)
print("stages:", [stage.name for stage in standardise.stages()])
z = np.asarray(eagle.deploy(standardise).run(x=x))
print("equal to numpy's (x - x.mean()) / x.std():", np.allclose(z, (x - x.mean()) / x.std()))

# %% [markdown]
# ## Retired forms and what to write instead
#
# Older spellings are refused while the kernel is read, with a `hawk.KernelError` that gives the file and line
# and the replacement. The helper below prints the message without the file and line (in a notebook the file is
# a temporary one).

# %%
import textwrap


def show_refusal(label, define):
    try:
        define()
    except hawk.KernelError as err:
        print(label, textwrap.fill(err.text, 100, initial_indent="    ", subsequent_indent="    "), "", sep="\n")


def old_all_samples():
    @hawk.kernel
    def k(x: Scalar, y: Mutable[Scalar]):
        y = hawk.all_samples(x).sum()


def old_samples_axis():
    @hawk.kernel
    def k(v: Vector[3], y: Mutable[Scalar]):
        y = v.sum(axis="samples")


def old_add_at():
    @hawk.kernel
    def k(x: Scalar, key: Index, y: Mutable[Scalar]):
        y.add(x, at=key)


def reduce_in_branch():
    @hawk.kernel
    def k(x: Scalar, y: Mutable[Scalar]):
        if x > 0.0:
            y = hawk.sum(x)


show_refusal("hawk.Accum", lambda: hawk.Accum)
show_refusal("hawk.all_samples(x).sum()", old_all_samples)
show_refusal('v.sum(axis="samples")', old_samples_axis)
show_refusal("y.add(x, at=key)", old_add_at)
show_refusal("a reduction under an if", reduce_in_branch)

# %% [markdown]
# The rewrites, in short:
#
# | retired | write instead |
# |---|---|
# | `hawk.all_samples(x).sum()` (`.mean()`, `.max()`, `.min()`) | `hawk.sum(x)` (`hawk.mean`, `hawk.max`, `hawk.min`) |
# | `hawk.all_samples(x)[mask].sum()` | `hawk.sum(x, where=mask)` |
# | `x.sum(axis="samples")` | `hawk.sum(x)`, or `hawk.sum(x, over=...)` to keep some lane axes |
# | `hawk.all_samples(u)[i]` | `u.at(i)` |
# | `hawk.all_samples(y)[key] += v` / `= v` | `hawk.scatter(y)[key] += v` / `= v` |
# | `hawk.all_samples(y)[mask] = v` | `y = m.where(mask, v, y)` |
# | an `Accum` plane and `y.add(v, at=key)` | a sink `Mutable["bin":n]` and `hawk.scatter(y)[key] += v` |
# | a `Reduce` plane and `y.contribute(v)` | `y = hawk.sum(v)` |
# | `y.write(v, at=key)` | `hawk.scatter(y)[key] = v` |
# | a reduction under `if` | reduce at the top level and put the condition in `where=` |
