"""A short tour of hawk and eagle: a handful of kernels, each result printed next to NumPy's.

Run it with `bash scripts/tour.sh` (sets up .venv first) or `.venv/bin/python tour.py`.
It exits non-zero if any result differs from NumPy's (or a kernel fails to build or run).
"""

import math
import sys
import traceback

import numpy as np

import eagle
import hawk
import hawk.artifact
import hawk.math as m
from hawk import Grid, Index, Matrix, Mutable, Param, Scalar, Sorted, Table, Vector

rng = np.random.default_rng(2024)

ITEMS = 16  # fixed extent of the fast axis in the Grid section
BUCKETS = 5  # histogram buckets (the kernel scales t by 5.0 to match)
GROUPS = 6  # segments in the sorted segment sum
POINTS = 40  # points in the 1-D smoothing stencil

results: list[tuple[str, bool]] = []


def show(label: str, got, want, exact: bool = False, tol: float | None = None) -> None:
    """Print hawk's result above NumPy's and record whether they agree (exactly, within `tol`, or closely)."""
    got = np.asarray(got, dtype=np.float64).reshape(np.shape(want))
    want = np.asarray(want, dtype=np.float64)
    if exact:
        ok = bool(np.array_equal(got, want))
    elif tol is not None:
        ok = bool(np.all(np.abs(got - want) <= tol))
    else:
        ok = bool(np.allclose(got, want, rtol=1e-12, atol=1e-12))
    more = f" ... ({got.size} values, all compared)" if got.size > 8 else ""
    with np.printoptions(precision=5, suppress=True, linewidth=110):
        print(f"  {label}")
        print(f"    hawk : {got.ravel()[:8]}{more}")
        print(f"    numpy: {want.ravel()[:8]}{more}    {'ok' if ok else 'MISMATCH'}")
    results.append((label, ok))


def cell(out, name: str) -> float:
    """The value of a scalar cell (a one-element array) in a run's outputs."""
    arr = np.asarray(out[name])
    assert arr.shape == (1,), f"cell {name!r} has shape {arr.shape}, expected (1,)"
    return float(arr[0])


# --- 1. Reductions: sum and mean (with where=) in one kernel, max in its own ---------------------------
def reductions() -> None:
    @hawk.kernel
    def summary(x: Scalar, total: Mutable[Scalar], avg_neg: Mutable[Scalar]):
        total = hawk.sum(x)
        avg_neg = hawk.mean(x, where=x < 0.0)

    @hawk.kernel
    def largest(x: Scalar, top: Mutable[Scalar]):
        top = hawk.max(x)

    x = rng.standard_normal(257)
    out = eagle.deploy(summary).run(x=x)  # several outputs: a dict by name
    show("sum of x", cell(out, "total"), x.sum())
    show("mean of x where x < 0", cell(out, "avg_neg"), x[x < 0].mean())
    show("max of x", np.asarray(eagle.deploy(largest).run(x=x)), [x.max()], exact=True)


# --- 2. A Grid: weighted row sums over the fast axis; the first axis is bound at run time ----------------
def grid_over() -> None:
    @hawk.kernel
    def weighted_rows(lane: Grid["batch", "item":ITEMS], x: Scalar, w: Table["item":ITEMS]) -> Scalar:
        return hawk.sum(x * w.at(item=lane.item), over="item")

    x = rng.uniform(-1.0, 1.0, size=(3, ITEMS))  # (batch, item): item is the fastest axis
    w = np.linspace(0.5, 2.0, ITEMS)
    got = eagle.deploy(weighted_rows).run(x=x, w=w, batch=3)
    show("per-batch weighted sum (over='item', batch=3)", got, x @ w)


# --- 3. Vector and matrix cells: one array per entry, name_0 ... name_{k-1} -----------------------------
def vector_matrix_cells() -> None:
    @hawk.kernel
    def moments(
        q: Matrix[3, 2],
        p: Vector[3],
        qsum: Mutable[Matrix[3, 2]],
        col0: Mutable[Vector[3]],
        psq: Mutable[Vector[3]],
    ):
        qsum = hawk.sum(q)
        col0 = hawk.sum(q.columns[0])
        psq = hawk.sum(p * p)

    lanes = 30
    q = rng.standard_normal((6, lanes))  # a Matrix[3, 2] plane: (rows*columns, lanes), row-major entries
    p = rng.standard_normal((3, lanes))  # a Vector[3] plane: (3, lanes)
    out = eagle.deploy(moments).run(q=q, p=p)
    show("matrix cell qsum_0..qsum_5", [cell(out, f"qsum_{k}") for k in range(6)], q.sum(axis=1))
    show(
        "vector cell col0_0..col0_2 (first column)",
        [cell(out, f"col0_{k}") for k in range(3)],
        q.reshape(3, 2, lanes)[:, 0].sum(axis=-1),
    )
    show("vector cell psq_0..psq_2", [cell(out, f"psq_{k}") for k in range(3)], (p * p).sum(axis=1))


# --- 4. A scatter histogram: m.index(v, n) is clamp(floor(v), 0, n - 1) --------------------------------
def histogram() -> None:
    @hawk.kernel
    def bucket_counts(t: Scalar, counts: Mutable["bucket":BUCKETS]):
        hawk.scatter(counts)[m.index(t * 5.0, BUCKETS)] += 1.0

    t = rng.uniform(-0.25, 1.25, size=600)  # some values fall outside [0, 1): they land in the end buckets
    got = eagle.deploy(bucket_counts).run(t=t)
    want = np.bincount(np.clip(np.floor(t * BUCKETS), 0, BUCKETS - 1).astype(np.int64), minlength=BUCKETS)
    show("bucket counts", got, want, exact=True)


# --- 5. A segment sum over sorted keys (Sorted[Index]: equal keys are contiguous) -----------------------
def segment_sum() -> None:
    @hawk.kernel
    def group_totals(group: Sorted[Index], value: Scalar, per_group: Mutable["group":GROUPS]):
        hawk.scatter(per_group)[group] += value

    sizes = np.array([7, 0, 12, 3, 9, 1])  # group 1 is empty
    group = np.repeat(np.arange(GROUPS), sizes).astype(np.int64)
    value = rng.uniform(0.0, 10.0, size=group.size)
    got = eagle.deploy(group_totals).run(group=group, value=value)
    show("per-group totals", got, np.bincount(group, weights=value, minlength=GROUPS))


# --- 6. A stencil with .at: one explicit diffusion step on a line, ends held fixed ----------------------
def stencil() -> None:
    @hawk.kernel
    def diffuse(lane: Grid["pos":POINTS], u: Scalar, rate: Param) -> Scalar:
        i = lane.pos
        if m.land(i > 0, i < POINTS - 1):
            nxt = u + rate * (u.at(pos=i - 1) - 2.0 * u + u.at(pos=i + 1))
        else:
            nxt = u
        return nxt

    u = np.sin(np.linspace(0.0, 3.0, POINTS)) + 0.1 * rng.standard_normal(POINTS)
    rate = 0.2
    got = eagle.deploy(diffuse).run(u=u, rate=rate)
    want = u.copy()
    want[1:-1] = u[1:-1] + rate * (u[:-2] - 2.0 * u[1:-1] + u[2:])
    show("one diffusion step, ends held fixed", got, want)


def sum_policies() -> None:
    @hawk.kernel
    def totals(x: Scalar, fast: Mutable[Scalar], tight: Mutable[Scalar], fixed: Mutable[Scalar]):
        fast = hawk.sum(x)
        tight = hawk.sum(x, policy="compensated")
        fixed = hawk.sum(x, policy="ordered")

    # terms that cancel: big values and their negatives around a small remainder
    big = rng.uniform(1e12, 1e13, 20_000)
    x = np.concatenate([big, rng.uniform(0.0, 1.0, 20_000), -big])
    rng.shuffle(x)
    exact = math.fsum(x)
    out = eagle.deploy(totals).run(x=x)
    show("compensated sum of cancelling terms (within 1 eps x sum|x| of math.fsum)", cell(out, "tight"), exact,
         tol=np.finfo(np.float64).eps * np.abs(x).sum())
    runs = {float(cell(eagle.deploy(totals, threads=t).run(x=x), "fixed")) for t in (1, 2, 3)}
    show("ordered sum: one value for 1, 2 and 3 threads", len(runs), 1, exact=True)


def two_stages() -> None:
    @hawk.kernel
    def standardise(x: Scalar, z: Mutable[Scalar]):
        centred = x - hawk.mean(x)
        z = centred / m.sqrt(hawk.mean(centred * centred))

    x = rng.normal(5.0, 3.0, 2_000)
    print(f"  stages: {[s.name for s in standardise.stages()]}")
    show("standardised values (three stages: mean, spread, output)", eagle.deploy(standardise).run(x=x),
         (x - x.mean()) / x.std())


def artifact_round_trip() -> None:
    import tempfile

    @hawk.kernel
    def power(x: Scalar, energy: Mutable[Scalar]):
        energy = hawk.sum(x * x)

    x = rng.normal(size=5_000)
    folder = tempfile.mkdtemp()
    hawk.artifact.build(power, folder, targets=("host",))
    cell_out = np.zeros(1)
    hawk.run(hawk.load(folder, "power"), x=x, energy=cell_out)
    ordered = np.zeros(1)
    eagle.reduce(x * x, ordered, policy="ordered").launch()
    show("artifact cell, bitwise equal to eagle.reduce(policy='ordered')", cell_out, ordered, exact=True)


def gpu_targets() -> None:
    from eagle.targets import gpu_target
    from hawk.targets import gpu_target as compile_target

    @hawk.kernel
    def spread(x: Scalar, total: Mutable[Scalar], y: Mutable[Scalar]):
        total = hawk.sum(x * x, policy="ordered")
        y = m.sqrt(x * x + 1.0)

    x = rng.normal(size=50_000)
    host = eagle.deploy(spread).run(x=x)
    try:
        gpu_target("spirv").runtime()
    except eagle.RuntimeMissing as exc:
        print(f"  spirv: no Vulkan device here ({exc}); skipped")
        return
    out = eagle.deploy(spread, target="spirv").run(x=x)
    show("spirv (Vulkan) ordered total, bitwise equal to the host's", cell(out, "total"), cell(host, "total"),
         exact=True)
    show("spirv per-lane output", out["y"], np.sqrt(x * x + 1.0))
    for name, chip in (("nvvm", "sm_90"), ("rocdl", "gfx90a")):
        target = compile_target(name, chip=chip)
        binary = target.compile(spread.lowered_gpu(spread.default_spec()).gpu_module)
        print(f"  {name} {chip}: {len(binary)} bytes of {target.suffix}")


SECTIONS = [
    ("reductions: sum, mean with where=, max", reductions),
    ("Grid with over= and a runtime extent", grid_over),
    ("vector and matrix cells", vector_matrix_cells),
    ("scatter histogram with m.index", histogram),
    ("Sorted[Index] segment sum", segment_sum),
    (".at stencil on a 1-D grid", stencil),
    ("sum policies: compensated and ordered", sum_policies),
    ("a kernel that reads its own totals runs in stages", two_stages),
    ("an ahead-of-time artifact, loaded and run", artifact_round_trip),
    ("GPU targets: spirv runs on Vulkan (lavapipe here), nvvm and rocdl compile", gpu_targets),
]


def main() -> int:
    failed_sections = []
    for title, section in SECTIONS:
        print(f"\n== {title}")
        try:
            section()
        except Exception:
            traceback.print_exc()
            failed_sections.append(title)
    bad = [label for label, ok in results if not ok]
    print()
    if not bad and not failed_sections:
        print(f"all {len(results)} results matched NumPy")
        return 0
    if bad:
        print(f"{len(bad)} of {len(results)} results did not match NumPy: {', '.join(bad)}")
    if failed_sections:
        print(f"{len(failed_sections)} section(s) raised: {', '.join(failed_sections)}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
