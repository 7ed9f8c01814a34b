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
