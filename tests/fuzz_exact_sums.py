"""A seeded fuzzer for ordered sums and means against exact sums (tests/test_fuzz.py runs it).

An ordered sum promises the exact sum of its terms rounded once, a mean that sum divided once by the count
(docs/ordered.md). The host reaches it by several forms, each proving its blocks exact or taking them again:
chains whose terms' range or MXCSR's flags (a grid, on x86-64 with AVX and FMA) prove them exact, row chains,
column tiles, the exact accumulators. The hand-written tests hold each form's edges; this one crosses them at
random. Case `i` of seed `s` comes from `np.random.default_rng([s, i])` alone: a body (a sum over every lane, a
masked sum and mean, a product the body rounds, a vector sum and mean, row sums of a Grid, column sums and means
of a Grid), 1 to ~200,000 lanes (rows of 1 to 3,000 columns, columns of 1 to 1,003 slots), float64 or float32,
data from tests/exact_families.py (adversaries, wide families, special values), 1 to 3 threads with small chunks,
and the route (by the case's index, even or odd, so that any two cases in a row take both: $HAWK_NO_SAE=1
keeps the range check). Every result must have the bits of conftest's exact
reference (any NaN meets any NaN), through Plan.run or (--door artifact) a published artifact run by hawk.run
(tests/exact_doors.py).

    python tests/fuzz_exact_sums.py --seed 7 --start 0 --count 50 --dir /tmp/fe   # one JSON line per case
    python tests/fuzz_exact_sums.py --seed 7 --start 12 --show                     # what case 12 runs
    python tests/fuzz_exact_sums.py --seed 7 --count 50 --door artifact            # through hawk.run
"""

import dataclasses
import functools
import sys

import fuzz_kernels as fk
import numpy as np
from conftest import bt_ordered_sum
from exact_doors import DOORS, run_through
from exact_families import DrawnCase, draw_terms, judge

LANES = (1, 7, 255, 1024, 1025, 4096, 20000, 20000, 70000, 200000)
BODIES = ("full", "masked", "product", "vector", "rows", "cols")
ROW_COLS = (1, 3, 64, 1000, 1016, 1040, 3000)  # a row's lanes (row sums)
COL_SLOTS = (1, 4, 7, 64, 1003)  # kept columns (column sums)
MIN_CHUNKS = (256, 1024, 4096)


@functools.cache
def kernels(cols: int) -> dict:
    """The bodies the fuzzer draws (`cols`: the Grid's column count for the row and column bodies)."""
    import hawk
    from hawk import Grid, Mutable, Param, Scalar, Vector

    @hawk.kernel
    def fe_full(x: Scalar) -> Scalar:
        return hawk.sum(x, policy="ordered")

    @hawk.kernel
    def fe_product(x: Scalar, w: Scalar) -> Scalar:
        return hawk.sum(x * w, policy="ordered")  # (the body rounds: no flag proves these blocks)

    @hawk.kernel
    def fe_masked(x: Scalar, w: Scalar, cut: Param, tot: Mutable[Scalar], avg: Mutable[Scalar]):
        tot = hawk.sum(x, where=w > cut, policy="ordered")
        avg = hawk.mean(x, where=w > cut, policy="ordered")

    @hawk.kernel
    def fe_vector(v: Vector[2], tot: Mutable[Vector[2]], avg: Mutable[Vector[2]]):
        tot = hawk.sum(v, policy="ordered")
        avg = hawk.mean(v, policy="ordered")

    @hawk.kernel
    def fe_rows(lane: Grid["row", "col":cols], x: Scalar) -> Scalar:
        return hawk.sum(x, over="col", policy="ordered")

    @hawk.kernel
    def fe_cols(lane: Grid["row", "col":cols], x: Scalar, s: Mutable[Scalar], mu: Mutable[Scalar]):
        s = hawk.sum(x, over="row", policy="ordered")
        mu = hawk.mean(x, over="row", policy="ordered")

    return {"full": fe_full, "masked": fe_masked, "product": fe_product, "vector": fe_vector, "rows": fe_rows,
            "cols": fe_cols}


@dataclasses.dataclass
class Case(DrawnCase):
    cols: int = 0  # the Grid's columns (rows and cols bodies)

    @property
    def what(self) -> str:
        shape = f"{self.lanes // self.cols} x {self.cols}" if self.cols else f"{self.lanes} lanes"
        return f"{self.body}, {self.dtype.name}, {shape}, {self.setting}"

    @property
    def name(self) -> str:
        return f"fe_{self.body}"


def case(seed: int, index: int) -> Case:
    """Case `index` of `seed`, from np.random.default_rng([seed, index]) alone."""
    rng = np.random.default_rng([seed, index])
    body = str(rng.choice(BODIES))
    dtype = np.dtype(rng.choice(["float64", "float32"]))
    lanes, cols = int(rng.choice(LANES)) + int(rng.integers(0, 3)), 0
    if body in ("rows", "cols"):
        cols = int(rng.choice(ROW_COLS if body == "rows" else COL_SLOTS))
        lanes = max(1, lanes // cols) * cols
    (f1, x), (f2, w) = draw_terms(lanes, dtype, rng), draw_terms(lanes, dtype, rng)
    if body == "vector":
        planes = {"v": np.stack([x, w])}
    elif body in ("rows", "cols"):
        planes = {"x": x.reshape(lanes // cols, cols)}
    else:
        planes = {"x": x}
    if body in ("masked", "product"):
        planes["w"] = w
    if body == "masked":  # (none, some or every lane kept)
        planes["cut"] = float(rng.choice([-np.inf, 0.0, 1.0, np.inf]))
    return Case(index, body, dtype, lanes, int(rng.integers(1, 4)), int(rng.choice(MIN_CHUNKS)),
                ("grid", "range")[index % 2], (f1, f2), planes, cols=cols)


def _mean(total, count: int, dt):
    with np.errstate(all="ignore"):
        return dt.type(total) / dt.type(count)


def reference(c: Case) -> dict:
    """Each output's exact result: the exact sum rounded once (conftest.bt_ordered_sum), a mean that sum divided
    once by its count in the output's dtype."""
    p, dt = c.planes, c.dtype
    if c.body == "full":
        return {"out": np.array(bt_ordered_sum(p["x"], dt))}
    if c.body == "product":
        with np.errstate(all="ignore"):
            return {"out": np.array(bt_ordered_sum((p["x"] * p["w"]).astype(dt), dt))}
    if c.body == "masked":
        keep = p["w"] > p["cut"]
        tot = bt_ordered_sum(p["x"], dt, keep)
        return {"tot": np.array(tot), "avg": np.array(_mean(tot, int(keep.sum()), dt))}
    if c.body == "vector":  # (a vector cell comes back by component: tot_0, tot_1)
        tot = [bt_ordered_sum(r, dt) for r in p["v"]]
        return {**{f"tot_{j}": np.array(t) for j, t in enumerate(tot)},
                **{f"avg_{j}": np.array(_mean(t, p["v"].shape[1], dt)) for j, t in enumerate(tot)}}
    x = p["x"]
    if c.body == "rows":
        return {"out": np.array([bt_ordered_sum(r, dt) for r in x])}
    s = np.array([bt_ordered_sum(x[:, j], dt) for j in range(x.shape[1])])
    return {"s": s, "mu": np.array([_mean(t, x.shape[0], dt) for t in s])}


def check(c: Case, workdir: str = "", target: str = "host", door: str = "plan") -> dict:
    """Run case c through `door` (tests/exact_doors.py) and compare every output with the reference, bit for
    bit."""
    out = {"index": c.index, "what": c.what, "tags": []}
    kernel = kernels(c.cols or 1)[c.body]
    try:
        got, ran = run_through(door, kernel, c.planes, dtype=c.dtype, threads=c.threads, min_chunk=c.min_chunk,
                               off=c.route == "range", target=target, workdir=workdir, variant=str(c.cols or ""))
    except Exception as exc:
        return fk.raised(c, exc)
    return judge(out, got, reference(c), c.dtype, ran, ("flags allowed", "range only"))


def main(argv=None) -> int:
    return fk.run_drawn_cases(case, check, __doc__, argv, doors=DOORS)


if __name__ == "__main__":
    sys.exit(main())
