"""The large-sink benchmark (#10, "no single-thread cliffs"): an `auto` (compensated) scatter of 1e7 lanes with
random keys into a sink of 1e6 slots, a bound launch per host thread count, with NumPy's `np.bincount` (one
thread, an uncompensated sum) for scale.

    .venv/bin/python -m benchmarks.large_sinks [--lanes 1e7] [--slots 1e6] [--threads 1,0] [--repeats 5] [--json F]

`--threads 0` is every core. Sinks over hawk.abi.layout.PRIVATE_SLOTS (65,536) used to run as one chunk whatever the
thread count; they now get a private copy per chunk (a chunk count fixed by the lanes and the sink's size, so the
same bits at every thread count). Each hawk result is checked against a long-double np.add.at within the
compensated bound (3 eps x the slot's sum of |terms|, as benchmarks/ops.py's check) before and after its samples;
the table gives median milliseconds and the chunks the launch ran (`plan.last_chunks`).
"""

import argparse
import json
import os

import numpy as np

import eagle
import hawk
from benchmarks.timing import measure
from hawk import Index, Mutable, Scalar

SLOTS = 1_000_000


@hawk.kernel
def scatter_wide_auto(key: Index, x: Scalar, acc: Mutable["slot":SLOTS]):
    hawk.scatter(acc)[key] += x


def _check(keys: np.ndarray, x: np.ndarray, slots: int):
    """A check of one result: every slot within 3 eps x its sum of |terms| of the long-double sum."""
    want = np.zeros(slots, dtype=np.longdouble)
    np.add.at(want, keys, x.astype(np.longdouble))
    scale = np.bincount(keys, weights=np.abs(x), minlength=slots)
    tol = 3.0 * float(np.finfo(x.dtype).eps) * scale

    def check(value) -> None:
        got = np.asarray(value, dtype=np.float64)
        bad = np.abs(got - want.astype(np.float64)) > tol
        if bad.any():
            raise AssertionError(f"large-sink scatter: {int(bad.sum())} slot(s) off the compensated bound")

    return check


def run(lanes: int, slots: int, threads: list[int], repeats: int) -> list[dict]:
    if slots != SLOTS:
        raise SystemExit(f"--slots: the kernel is declared with {SLOTS} slots")
    rng = np.random.default_rng(10)
    keys = rng.integers(0, slots, lanes).astype(np.int32)
    x = rng.normal(size=lanes)
    check = _check(keys, x, slots)
    rows = []
    for t in threads:
        plan = eagle.deploy(scatter_wide_auto, threads=t or None)
        launch = plan.bind(key=keys, x=x).launch
        hawk_t = measure(launch, repeats, 0.2, check)
        plan.run(key=keys, x=x)  # (sets plan.last_chunks)
        rows.append({"lanes": lanes, "slots": slots, "threads": plan.threads, "hawk_auto_ms": hawk_t.median_s * 1e3,
                     "chunks": list(plan.last_chunks)})
    np_t = measure(lambda: np.bincount(keys, weights=x, minlength=slots), repeats, 0.2)
    for r in rows:
        r["numpy_bincount_ms"] = np_t.median_s * 1e3
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", type=float, default=1e7)
    ap.add_argument("--slots", type=float, default=SLOTS)
    ap.add_argument("--threads", default="1,0", help="host thread counts, comma-separated (0: every core)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    rows = run(int(a.lanes), int(a.slots), [int(t) for t in a.threads.split(",")], a.repeats)
    print(f"# {os.cpu_count()} cpu; load average {os.getloadavg()[0]:.2f}")
    print("| lanes | slots | threads | hawk auto, bound launch (ms) | chunks | numpy bincount (ms) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['lanes']:.0e} | {r['slots']:.0e} | {r['threads']} | {r['hawk_auto_ms']:.1f} | "
              f"{','.join(map(str, r['chunks']))} | {r['numpy_bincount_ms']:.1f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
