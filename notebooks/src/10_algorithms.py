# Source of notebooks/10_algorithms.ipynb: edit here, then `.venv/bin/python scripts/notebooks.py build 10`.
# ruff: noqa: E402

# %% [markdown]
# # The cells around each point of a mesh
#
# A mesh stores, for each cell, the ids of its corner points (`conn`). Many algorithms need the inverse: for each
# point, the cells that touch it. On a structured grid that is index arithmetic; on an unstructured mesh it is a
# sort and a walk over runs of equal keys. `eagle.algorithms` has the pieces, each a hawk kernel
# (docs/algorithms.md):
#
# - `sort_by_key(conn, cell_of)`: the corner entries grouped by point (a stable radix sort, then two gathers),
# - `unique(points)`: each point once, and how many entries (cells) it has,
# - `exclusive_scan(counts, offsets)`: where each point's cells start,
#
# which together give a CSR structure: the cells of point `p` are `cells[offsets[p]:offsets[p] + counts[p]]`.
# At the end a custom reduction (`hawk.reduce` with a `@hawk.func` operator) finds the most crowded point.

# %%
import matplotlib.pyplot as plt
import numpy as np

import eagle
import hawk
import hawk.math as m
from eagle.algorithms import exclusive_scan, sort_by_key, unique
from hawk import Index, Vector

np.set_printoptions(linewidth=110)

# %% [markdown]
# ## A small triangle mesh
#
# A 4 x 5 grid of points, each square split into two triangles, numbered row by row: 24 triangles, 72 corner
# entries. `cell_of[j]` is the cell of entry `j`.

# %%
rows, cols = 4, 5
pid = np.arange(rows * cols).reshape(rows, cols)
tris = []
for r in range(rows - 1):
    for c in range(cols - 1):
        a, b, d, e = pid[r, c], pid[r, c + 1], pid[r + 1, c], pid[r + 1, c + 1]
        tris += [(a, b, e), (a, e, d)]
conn = np.array(tris, np.int32).reshape(-1)
cell_of = np.repeat(np.arange(len(tris), dtype=np.int32), 3)
print(len(tris), "cells,", conn.size, "corner entries; the first cells:", np.array(tris[:3]).tolist())

# %% [markdown]
# ## Sort, walk the runs, scan
#
# `sort_by_key` is stable: the cells of one point stay in increasing order, as they appeared in `conn`. The
# permutation is `int32` here (fewer than 2**31 entries). The keys span 0 ... 19, five bits: one 8-bit radix
# pass (a keyed scan and two scatters), whatever the key dtype.

# %%
points, cells = sort_by_key(conn, cell_of)
upoints, counts = unique(points)
offsets = np.empty(upoints.size, np.int64)  # int32 counts, int64 offsets: no overflow for a large mesh
total = exclusive_scan(counts, offsets)
print("points:", np.asarray(upoints).tolist())
print("counts:", np.asarray(counts).tolist(), counts.dtype)
print("offsets:", offsets.tolist(), "total:", total)

# %%
cells = np.asarray(cells)


def around(p: int) -> list[int]:
    return cells[offsets[p]:offsets[p] + np.asarray(counts)[p]].tolist()


for p in (0, 6, 19):
    print(f"point {p:2d}: cells {around(p)}")

# %% [markdown]
# The mesh, with the cells around point 6 filled and their number written in each:

# %%
xy = np.stack([pid.reshape(-1) % cols, pid.reshape(-1) // cols], 1).astype(float)
fig, ax = plt.subplots(figsize=(5, 4))
ax.triplot(xy[:, 0], xy[:, 1], np.array(tris), color="0.6", lw=0.8)
for k in around(6):
    corners = xy[list(tris[k])]
    ax.fill(corners[:, 0], corners[:, 1], color="tab:orange", alpha=0.5)
    ax.text(*corners.mean(0), str(k), ha="center", va="center", fontsize=8)
ax.plot(*xy[6], "ko")
ax.set_title("cells around point 6: " + ", ".join(map(str, around(6))))
ax.set_aspect("equal")
ax.axis("off")
plt.show()

# %% [markdown]
# The same structure by hand, with Python sets, as a check:

# %%
by_hand = {p: sorted(k for k, t in enumerate(tris) if p in t) for p in range(rows * cols)}
print("every point agrees:", all(around(p) == by_hand[p] for p in range(rows * cols)))

# %% [markdown]
# ## The most crowded point: a custom reduction
#
# A kernel with one lane per point packs `(count, point)` into a `Vector[2]` and folds the lanes with a
# `@hawk.func` operator that keeps the larger count, and on a tie the running value (the earlier point). The fold
# order is fixed (blocks of 1024 lanes, left to right, then the blocks' results), so a tie is always broken the
# same way, on every thread count and target.

# %%
@hawk.func
def more_cells(a, b):
    if b.components[0] > a.components[0]:
        return b
    return a


@hawk.kernel
def crowded(cells_at: Index, point: Index) -> Vector[2]:
    return hawk.reduce(more_cells, m.vec(float(cells_at), float(point)))


best = np.asarray(eagle.deploy(crowded).run(cells_at=np.asarray(counts), point=np.asarray(upoints)))
print("most cells:", int(best[0]), "at point", int(best[1]))
print("NumPy:     ", int(np.asarray(counts).max()), "at point", int(np.asarray(upoints)[np.argmax(counts)]))

# %% [markdown]
# ## A larger mesh, one call each
#
# The same three calls on a 300 x 300 grid (178,802 triangles, 536,406 entries); the keys span 17 bits, so three
# radix passes. The structure is checked against NumPy's stable argsort and `np.cumsum`.

# %%
rows, cols = 300, 300
pid = np.arange(rows * cols).reshape(rows, cols)
a, b, d, e = pid[:-1, :-1], pid[:-1, 1:], pid[1:, :-1], pid[1:, 1:]
big = np.stack([np.stack([a, b, e], -1), np.stack([a, e, d], -1)], 2).reshape(-1, 3)
conn = big.reshape(-1).astype(np.int32)
cell_of = np.repeat(np.arange(big.shape[0], dtype=np.int32), 3)
points, cells = sort_by_key(conn, cell_of)
upoints, counts = unique(points)
offsets = np.empty(upoints.size, np.int64)
total = exclusive_scan(counts, offsets)
order = np.argsort(conn, kind="stable")
print(big.shape[0], "cells;", upoints.size, "points; total", total)
print("cells grouped as NumPy's stable sort:", np.array_equal(np.asarray(cells), cell_of[order]))
print("offsets as np.cumsum:", np.array_equal(offsets[1:], np.cumsum(np.asarray(counts))[:-1]))
values, how_many = np.unique(np.asarray(counts), return_counts=True)
print("points with 1, 2, 3, 6 cells:", dict(zip(values.tolist(), how_many.tolist(), strict=True)))

# %% [markdown]
# ## On a GPU target, with the data left there
#
# Every function above also takes device arrays (`eagle.asarray(a, device="spirv")`, run here on lavapipe, Mesa's
# Vulkan driver for the CPU). The call then runs on that device, reading its inputs in place, and its array
# results stay there as device arrays, ready for the next call; only totals, like the scan's, come back as Python
# numbers. So the whole sort, walk and scan chain can run with the mesh on the device, and the Vulkan runtime's
# transfer counter shows that no lane-sized array crossed between host and device along the way. The results
# have the bits of the host run.

# %% machine
def grid_mesh(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """The corner entries of a rows x cols grid of points, two triangles a square, and each entry's cell."""
    pid = np.arange(rows * cols).reshape(rows, cols)
    a, b, d, e = pid[:-1, :-1], pid[:-1, 1:], pid[1:, :-1], pid[1:, 1:]
    tri = np.stack([np.stack([a, b, e], -1), np.stack([a, e, d], -1)], 2).reshape(-1, 3)
    return tri.reshape(-1).astype(np.int32), np.repeat(np.arange(tri.shape[0], dtype=np.int32), 3)


conn, cell_of = grid_mesh(40, 40)
h_points, h_cells = sort_by_key(conn, cell_of)
h_upoints, h_counts = unique(h_points)
h_offsets = np.empty(h_upoints.size, np.int64)
h_total = exclusive_scan(h_counts, h_offsets)
try:
    d_conn, d_cell_of = eagle.asarray(conn, device="spirv"), eagle.asarray(cell_of, device="spirv")
except eagle.RuntimeMissing as why:
    print("spirv skipped:", why)
else:
    from eagle.targets.vulkan_runtime import transfers

    d_offsets = eagle.asarray(np.empty(h_upoints.size, np.int64), device="spirv")
    counter = transfers()
    counter.reset()
    points, cells = sort_by_key(d_conn, d_cell_of)  # runs on spirv: its inputs are there
    upoints, counts = unique(points)
    total = exclusive_scan(counts, d_offsets)
    print("results:", {k: (type(a).__name__, a.device) for k, a in
                       dict(cells=cells, counts=counts, offsets=d_offsets).items()})
    print("lane planes copied:", counter.planes(), "| arrays copied down:", counter.counts[("down", "array")],
          f"| total: {total} (the host's: {h_total})")
    same = [a.numpy().tobytes() == np.asarray(b).tobytes() for a, b in
            ((cells, h_cells), (upoints, h_upoints), (counts, h_counts), (d_offsets, h_offsets))]
    print("cells, points, counts and offsets: the host's bits:", all(same))
    assert all(same) and total == h_total and counter.planes() == 0

# %% [markdown]
# ## Float results in a float of their own
#
# Storage is often narrower than arithmetic: coordinates and fields in float64 while computing, float32 in the
# arrays that are kept. A per-lane output plane takes the dtype of the array passed for it, whatever the run's
# float type: a run on float64 inputs computes everything in float64 and rounds each stored value once into a
# float32 output, exactly as NumPy's `astype(np.float32)` would round the float64 result. That is more accurate
# than converting the inputs to float32 first, where every operation rounds to float32. `eagle.algorithms.copy`
# converts between float widths the same way, in one kernel: float64 into float32 with `astype`'s bits (ties to
# even, subnormals, overflow to infinity, `-0.0` and NaN included), float32 into float64 exactly.
#
# Here: the distance of every point of the 300 x 300 mesh from a centre, computed in float64 and stored in float32.

# %%
from eagle.algorithms import copy
from hawk import Mutable, Scalar


@hawk.kernel
def distance(px: Scalar, py: Scalar, r: Mutable[Scalar]):
    r = m.sqrt((px - 149.3) * (px - 149.3) + (py - 151.7) * (py - 151.7)) / 3.0


px = (np.arange(rows * cols) % cols).astype(np.float64) * 1.01
py = (np.arange(rows * cols) // cols).astype(np.float64) * 0.99
plan = eagle.deploy(distance)
wide = np.asarray(plan.run(px=px, py=py))  # no output passed: it comes back in the run's float64
narrow = np.zeros(px.size, np.float32)
plan.run(px=px, py=py, r=narrow)  # the same float64 run, each value rounded once into float32
print("dtypes:", wide.dtype, narrow.dtype)
print("float32 output, bit for bit the float64 result's astype:", narrow.tobytes() == wide.astype(np.float32).tobytes())
in32 = np.asarray(plan.run(px=px.astype(np.float32), py=py.astype(np.float32)))  # a float32 run, for contrast
print("a float32 run instead: its dtype", in32.dtype, "| differs from rounding once in some points:",
      bool((in32 != narrow).any()))
assert narrow.tobytes() == wide.astype(np.float32).tobytes()

f32 = np.finfo(np.float32)
hard = np.array([1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24, 2.0 ** -149, 2.0 ** -150, 1e-45, float(f32.max) * 1.0000001,
                 -0.0, np.inf, np.nan, 0.1])
dst = np.full(hard.size, 7.0, np.float32)
copy(hard, dst)
with np.errstate(over="ignore"):  # NumPy warns where it rounds to infinity
    want = hard.astype(np.float32)
print("float64 values:", hard.tolist())
print("copied to f32: ", dst.tolist())
print("bits of astype:", dst.tobytes() == want.tobytes(),
      "| signed zero kept:", bool(np.signbit(dst[6])))
back = np.zeros(hard.size)
copy(dst, back)
print("and back to float64, exactly:", back.tobytes() == dst.astype(np.float64).tobytes())
assert dst.tobytes() == want.tobytes() and back.tobytes() == dst.astype(np.float64).tobytes()
