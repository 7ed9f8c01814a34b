"""The large-sink benchmark (#10, "no single-thread cliffs"): an `auto` (compensated) scatter of 1e7 lanes with
random keys into a sink of 1e6 slots, a bound launch per host thread count, with NumPy's `np.bincount` (one
thread, an uncompensated sum) for scale.

    .venv/bin/python -m benchmarks.large_sinks [--lanes 1e7] [--slots 1e6] [--threads 1,0] [--repeats 5] [--json F]
        [--keys random|sorted]

`--keys sorted` sorts the keys (runs of about lanes/slots lanes: CSR rows, segment sums) and times the same scatter
keyed by a `Sorted[Index]` plane, `auto` and `plain` (hawk/passes/lower/sorted_streams.py for runs this short).

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
from hawk import Index, Mutable, Scalar, Sorted

SLOTS = 1_000_000


@hawk.kernel
def scatter_wide_auto(key: Index, x: Scalar, acc: Mutable["slot":SLOTS]):
    hawk.scatter(acc)[key] += x


@hawk.kernel
def scatter_sorted_auto(key: Sorted[Index], x: Scalar, acc: Mutable["slot":SLOTS]):
    hawk.scatter(acc)[key] += x


@hawk.kernel
def scatter_sorted_plain(key: Sorted[Index], x: Scalar, acc: Mutable["slot":SLOTS]):
    hawk.scatter(acc, policy="plain")[key] += x


def _check(keys: np.ndarray, x: np.ndarray, slots: int, policy: str = "auto"):
    """A check of one result: every slot within 3 eps x its sum of |terms| of the long-double sum (plain: its
    term count x eps x that sum, the bound of any order of plain adds)."""
    want = np.zeros(slots, dtype=np.longdouble)
    np.add.at(want, keys, x.astype(np.longdouble))
    scale = np.bincount(keys, weights=np.abs(x), minlength=slots)
    factor = np.bincount(keys, minlength=slots) + 1.0 if policy == "plain" else 3.0
    tol = factor * float(np.finfo(x.dtype).eps) * scale

    def check(value) -> None:
        got = np.asarray(value, dtype=np.float64)
        bad = np.abs(got - want.astype(np.float64)) > tol
        if bad.any():
            raise AssertionError(f"large-sink scatter: {int(bad.sum())} slot(s) off the compensated bound")

    return check


def run(lanes: int, slots: int, threads: list[int], repeats: int, keys_kind: str = "random") -> list[dict]:
    if slots != SLOTS:
        raise SystemExit(f"--slots: the kernel is declared with {SLOTS} slots")
    rng = np.random.default_rng(10)
    keys = rng.integers(0, slots, lanes).astype(np.int32)
    if keys_kind == "sorted":
        keys.sort()
    x = rng.normal(size=lanes)
    kernels = {"auto": scatter_wide_auto} if keys_kind == "random" else \
        {"auto": scatter_sorted_auto, "plain": scatter_sorted_plain}
    rows = []
    for policy, kernel in kernels.items():
        for t in threads:
            plan = eagle.deploy(kernel, threads=t or None)
            launch = plan.bind(key=keys, x=x).launch
            hawk_t = measure(launch, repeats, 0.2, _check(keys, x, slots, policy))
            plan.run(key=keys, x=x)  # (sets plan.last_chunks)
            rows.append({"lanes": lanes, "slots": slots, "keys": keys_kind, "policy": policy, "threads": plan.threads,
                         "hawk_ms": hawk_t.median_s * 1e3, "chunks": list(plan.last_chunks)})
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
    ap.add_argument("--keys", choices=("random", "sorted"), default="random")
    a = ap.parse_args(argv)
    rows = run(int(a.lanes), int(a.slots), [int(t) for t in a.threads.split(",")], a.repeats, a.keys)
    print(f"# {os.cpu_count()} cpu; load average {os.getloadavg()[0]:.2f}")
    print("| lanes | slots | keys | policy | threads | hawk, bound launch (ms) | chunks | numpy bincount (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['lanes']:.0e} | {r['slots']:.0e} | {r['keys']} | {r['policy']} | {r['threads']} | "
              f"{r['hawk_ms']:.1f} | {','.join(map(str, r['chunks']))} | {r['numpy_bincount_ms']:.1f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
