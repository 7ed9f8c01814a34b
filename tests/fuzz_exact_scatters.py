"""A seeded fuzzer for ordered scatters against exact sums (tests/test_fuzz.py runs it).

An ordered scatter promises each slot the exact sum of its prior content and its terms, rounded once
(docs/ordered.md). The host reaches it by two routes whose fast paths prove themselves after the fact and fall
back when they cannot (hawk/passes/lower/grid_scatters.py: a grid whose exactness MXCSR's flags prove, on x86-64
with AVX and FMA; hawk/passes/lower/split_scatters.py: grouped TwoSums into pairs, which spill what a pair cannot
hold). The hand-written tests hold each route's edges; this one crosses them at random. Case `i` of seed `s` comes
from `np.random.default_rng([s, i])` alone: a body (one scatter, a rounding product, two sinks, one sink twice, a
masked term, a `for`, a vector payload, a computed key), a sink of 1 to 70,000 slots (past 2**16 the grid leaves
it to the grouped form), float64 or float32, 1 to ~200,000 lanes, a share of keys -1 (adding nothing), data from
tests/exact_families.py's adversaries and wider families (lognormal, decades of spread, ramps, jumps along the
lanes, subnormals, huge values, infinities and NaN), a prior content, 1 to 3 threads with small chunks, and the
route (by the case's index, even or odd, so that any two cases in a row take both: $HAWK_NO_SAE=1 forces
the grouped form). Every slot must have the bits of conftest's exact reference; a
planted key outside the sink must be refused by name (a key plane by its largest key before the run, a computed
key by the first bad one in lane order), the caller's sink unchanged. A case runs through Plan.run or (--door
artifact) a published artifact run by hawk.run (tests/exact_doors.py).

    python tests/fuzz_exact_scatters.py --seed 7 --start 0 --count 50 --dir /tmp/fs   # one JSON line per case
    python tests/fuzz_exact_scatters.py --seed 7 --start 12 --show                     # what case 12 runs
    python tests/fuzz_exact_scatters.py --seed 7 --count 50 --door artifact            # through hawk.run
"""

import dataclasses
import functools
import sys

import fuzz_kernels as fk
import numpy as np
from conftest import bt_ordered_scatter
from exact_doors import DOORS, run_through
from exact_families import DrawnCase, draw_terms, judge, raw_bits

SLOTS = (1, 3, 64, 1000, 4099, 65535, 70000)  # (65535: the grid's largest; 70000: the grouped form's)
LANES = (1, 7, 255, 257, 1000, 4096, 20000, 20000, 70000, 200000)
BODIES = ("one", "mul", "two", "same", "masked", "loop", "vector", "shifted")
MIN_CHUNKS = (256, 1024, 4096)


@functools.cache
def kernels(slots: int) -> dict:
    """The bodies the fuzzer draws, for a sink of `slots` slots."""
    import hawk
    import hawk.math as hm
    from hawk import Index, Mutable, Scalar, Vector

    @hawk.kernel
    def fs_one(key: Index, x: Scalar, acc: Mutable["slot":slots]):
        hawk.scatter(acc, policy="ordered")[key] += x

    @hawk.kernel
    def fs_mul(key: Index, x: Scalar, w: Scalar, acc: Mutable["slot":slots]):
        hawk.scatter(acc, policy="ordered")[key] += x * w  # (the body rounds: the grid's first pass)

    @hawk.kernel
    def fs_two(key: Index, k2: Index, x: Scalar, w: Scalar, acc: Mutable["slot":slots], b: Mutable["slot":slots]):
        hawk.scatter(acc, policy="ordered")[key] += x
        hawk.scatter(b, policy="ordered")[k2] += w

    @hawk.kernel
    def fs_same(key: Index, k2: Index, x: Scalar, w: Scalar, acc: Mutable["slot":slots]):
        hawk.scatter(acc, policy="ordered")[key] += x
        hawk.scatter(acc, policy="ordered")[k2] += w

    @hawk.kernel
    def fs_masked(key: Index, x: Scalar, w: Scalar, acc: Mutable["slot":slots]):
        hawk.scatter(acc, policy="ordered")[key] += hm.where(w > 0.0, x, 0.0)

    @hawk.kernel
    def fs_loop(key: Index, x: Scalar, acc: Mutable["slot":slots]):
        for j in range(2):
            hawk.scatter(acc, policy="ordered")[key] += x * (j + 1.0)

    @hawk.kernel
    def fs_vector(key: Index, v: Vector[2], acc: Mutable["slot":slots]):
        hawk.scatter(acc, policy="ordered")[key] += v

    @hawk.kernel
    def fs_shifted(key: Index, x: Scalar, acc: Mutable["slot":slots]):
        hawk.scatter(acc, policy="ordered")[key - 1] += x  # (a computed key: checked in the kernel)

    return {"one": fs_one, "mul": fs_mul, "two": fs_two, "same": fs_same, "masked": fs_masked, "loop": fs_loop,
            "vector": fs_vector, "shifted": fs_shifted}


@dataclasses.dataclass
class Case(DrawnCase):
    slots: int = 0
    bad: int | None = None  # the lane of the first key planted outside the sink

    @property
    def what(self) -> str:
        bad = f", key outside at lane {self.bad}" if self.bad is not None else ""
        return f"{self.body} into {self.slots} slots, {self.dtype.name}, {self.lanes} lanes, {self.setting}{bad}"

    @property
    def name(self) -> str:
        return f"fs_{self.body}"


def _keys(n: int, slots: int, rng, shift: int = 0) -> np.ndarray:
    key = rng.integers(0, slots, n)
    key[rng.uniform(size=n) < rng.choice([0.0, 0.05, 0.5])] = -1  # (adds nothing)
    return (key + shift).astype(rng.choice([np.int32, np.int64]))


def case(seed: int, index: int) -> Case:
    """Case `index` of `seed`, from np.random.default_rng([seed, index]) alone."""
    rng = np.random.default_rng([seed, index])
    body, slots = str(rng.choice(BODIES)), int(rng.choice(SLOTS))
    dtype = np.dtype(rng.choice(["float64", "float32"]))
    lanes = int(rng.choice(LANES)) + int(rng.integers(0, 3))
    (f1, x), (f2, w) = draw_terms(lanes, dtype, rng), draw_terms(lanes, dtype, rng)
    key = _keys(lanes, slots, rng, int(body == "shifted"))
    planes = {"key": key}
    if body == "vector":
        planes["v"] = np.stack([x, w])
    else:
        planes["x"] = x
    if body in ("mul", "two", "same", "masked"):
        planes["w"] = w
    if body in ("two", "same"):
        planes["k2"] = _keys(lanes, slots, rng)
    shape = (2, slots) if body == "vector" else (slots,)
    planes["acc"] = (rng.standard_normal(shape) * (rng.uniform() < 0.5)).astype(dtype)
    if body == "two":
        planes["b"] = (rng.standard_normal(slots) * (rng.uniform() < 0.5)).astype(dtype)
    bad = None
    if rng.uniform() < 0.1:  # keys outside the sink: the first in lane order is the one reported
        at = np.sort(rng.choice(lanes, size=min(lanes, int(rng.integers(1, 4))), replace=False))
        key[at] = rng.integers(slots + 1, slots + 1000, at.size)
        bad = int(at[0])
    return Case(index, body, dtype, lanes, int(rng.integers(1, 4)), int(rng.choice(MIN_CHUNKS)),
                ("grid", "pairs")[index % 2], (f1, f2), planes, slots=slots, bad=bad)


def reference(c: Case) -> dict:
    """Each sink's exact result (conftest.bt_ordered_scatter), the terms formed as the body forms them."""
    p, dt = c.planes, c.dtype
    with np.errstate(all="ignore"):
        if c.body == "vector":
            return {"acc": bt_ordered_scatter(p["acc"], p["key"], p["v"], dt)}
        x, keys = p["x"], p["key"] - (c.body == "shifted")
        if c.body == "mul":
            x = (x * p["w"]).astype(dt)
        elif c.body == "masked":
            x = np.where(p["w"] > 0, x, dt.type(0.0)).astype(dt)
        terms = x
        if c.body == "loop":
            keys, terms = np.concatenate([keys, keys]), np.concatenate([x, (x * dt.type(2.0)).astype(dt)])
        elif c.body == "same":
            keys, terms = np.concatenate([keys, p["k2"]]), np.concatenate([x, p["w"]])
        out = {"acc": bt_ordered_scatter(p["acc"], keys, terms, dt)}
        if c.body == "two":
            out["b"] = bt_ordered_scatter(p["b"], p["k2"], p["w"], dt)
    return out


def check(c: Case, workdir: str = "", target: str = "host", door: str = "plan") -> dict:
    """Run case c through `door` (tests/exact_doors.py; sinks passed as copies) and judge it: bits against the
    reference, or the refusal of a key outside the sink with the caller's arrays unchanged."""
    import eagle

    out = {"index": c.index, "what": c.what, "tags": []}
    kernel = kernels(c.slots)[c.body]
    given = {k: v.copy() for k, v in c.planes.items()}
    try:
        got, ran = run_through(door, kernel, given, dtype=c.dtype, threads=c.threads, min_chunk=c.min_chunk,
                               off=c.route == "pairs", target=target, workdir=workdir, variant=str(c.slots))
    except eagle.InputError as exc:
        if c.bad is None:
            return {**out, "status": "fail", "why": f"refused: {str(exc)[:300]}"}
        # a key plane that feeds a sink as it is: refused before the run by its largest key; a computed key: in
        # the kernel, by the first bad key in lane order
        keys = c.planes["key"]
        want = (f"first bad key: {int(keys[c.bad]) - 1}" if c.body == "shifted" else f"holds key {int(keys.max())}")
        if kernel.name not in str(exc) or want not in str(exc):
            return {**out, "status": "fail", "why": f"refusal without the kernel or {want!r}: {exc}"}
        changed = [k for k, v in given.items() if raw_bits(v, v.dtype) != raw_bits(c.planes[k], v.dtype)]
        if changed:
            return {**out, "status": "fail", "why": f"a refused run changed {changed}"}
        return {**out, "status": "ok", "why": "refused the key outside the sink"}
    except Exception as exc:
        return fk.raised(c, exc)
    if c.bad is not None:
        return {**out, "status": "fail", "why": f"ran with a key outside the sink at lane {c.bad}"}
    return judge(out, got, reference(c), c.dtype, ran, ("the grid allowed", "pairs only"))


def main(argv=None) -> int:
    return fk.run_drawn_cases(case, check, __doc__, argv, doors=DOORS)


if __name__ == "__main__":
    sys.exit(main())
