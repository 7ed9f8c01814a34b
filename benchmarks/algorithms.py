"""eagle.algorithms against NumPy, PyTorch and Numba, each implementation in a fresh process of its own.

    .venv/bin/python -m benchmarks.algorithms                       # every case at 1e6 and 1e7, 3 rounds
    .venv/bin/python -m benchmarks.algorithms --cases argsort_i32 --sizes 1e7 --rounds 5

The cases: argsort of int32 keys over the full int32 range and over ids below 2**16 (eagle.argsort vs
np.argsort(kind="stable") and torch.sort(stable=True)); scans (exclusive_scan of float64, inclusive_scan of int32
counts into int64 offsets, vs np.cumsum with out=); statistics (var, dot, norm vs NumPy); reduce_by_key and
unique over sorted int64 keys in runs of about 8 (vs a NumPy version: flags, np.flatnonzero, np.add.reduceat, and
a Numba loop). As in benchmarks/isolated.py, a worker process (`--worker CASE IMPL SIZE`) imports only what its
implementation needs, builds the seeded inputs, warms up (the first call compiles), checks the output against
NumPy, times `--repeats` samples (benchmarks.timing.measure) and prints one `BENCH-RESULT {json}` line. Workers
run one at a time, in rounds whose order rotates; an implementation's time is the median over rounds, and the
ratio printed is the median over rounds of (eagle / the best peer of that round). Speed is never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from benchmarks.worker import MARK  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RUN = 8  # mean run length of the reduce_by_key / unique keys


# --- inputs (seeded) and the implementations of each case ----------------------------------------------------
def _inputs(case: str, n: int) -> dict:
    rng = np.random.default_rng(20261201)
    if case == "argsort_i32":
        return {"keys": rng.integers(-2**31, 2**31 - 1, n, dtype=np.int32, endpoint=True)}
    if case == "argsort_ids16":
        return {"keys": rng.integers(0, 2**16, n).astype(np.int32)}
    if case == "exclusive_scan_f64":
        return {"x": rng.standard_normal(n), "out": np.empty(n)}
    if case == "inclusive_scan_i32_i64":
        return {"x": rng.integers(0, 100, n).astype(np.int32), "out": np.empty(n, np.int64)}
    if case in ("var_f64", "norm_f64", "dot_f64"):
        return {"x": rng.standard_normal(n), "y": rng.standard_normal(n)}
    if case in ("reduce_by_key_f64", "unique_i64"):
        keys = np.sort(rng.integers(0, max(1, n // RUN), n))
        return {"keys": keys, "values": rng.standard_normal(n)}
    raise SystemExit(f"benchmarks.algorithms: unknown case {case!r}")


CASES = {  # case: implementations (ours first)
    "argsort_i32": ("eagle", "numpy", "torch"),
    "argsort_ids16": ("eagle", "numpy", "torch"),
    "exclusive_scan_f64": ("eagle", "numpy"),
    "inclusive_scan_i32_i64": ("eagle", "numpy"),
    "var_f64": ("eagle", "numpy"),
    "norm_f64": ("eagle", "numpy"),
    "dot_f64": ("eagle", "numpy"),
    "reduce_by_key_f64": ("eagle", "numpy", "numba"),
    "unique_i64": ("eagle", "numpy", "numba"),
}


def _numpy_runs(keys: np.ndarray) -> np.ndarray:
    flags = np.empty(keys.size, bool)
    flags[0] = True
    np.not_equal(keys[1:], keys[:-1], out=flags[1:])
    return np.flatnonzero(flags)


def _numba_runs():
    import numba

    @numba.njit(cache=False)
    def runs(keys, values, ukeys, sums, counts):
        r = -1
        for i in range(keys.size):
            if i == 0 or keys[i] != keys[i - 1]:
                r += 1
                ukeys[r] = keys[i]
                sums[r] = 0.0
                counts[r] = 0
            sums[r] += values[i]
            counts[r] += 1
        return r + 1

    return runs


def _call(case: str, impl: str, d: dict):
    """A zero-argument call for one implementation of a case, and a function of its output that checks it."""
    if impl == "eagle":
        from eagle import algorithms as A
    if case.startswith("argsort"):
        k = d["keys"]
        want = np.argsort(k, kind="stable")
        check = (lambda p: np.array_equal(np.asarray(p), want))  # noqa: E731
        if impl == "eagle":
            return (lambda: A.argsort(k)), check
        if impl == "numpy":
            return (lambda: np.argsort(k, kind="stable")), check
        import torch

        t = torch.from_numpy(k)
        return (lambda: torch.sort(t, stable=True).indices), (lambda p: np.array_equal(p.numpy(), want))
    if case.startswith(("exclusive", "inclusive")):
        x, out = d["x"], d["out"]
        inclusive = case.startswith("inclusive")
        want = np.cumsum(x, dtype=out.dtype)
        if not inclusive:
            want = np.concatenate([np.zeros(1, out.dtype), want[:-1]])

        def check(_):
            return np.allclose(out, want, rtol=1e-9, atol=1e-6) if out.dtype.kind == "f" else np.array_equal(out,
                                                                                                            want)
        if impl == "eagle":
            f = A.inclusive_scan if inclusive else A.exclusive_scan
            return (lambda: f(x, out)), check
        if inclusive:
            return (lambda: np.cumsum(x, dtype=out.dtype, out=out)), check

        def numpy_exclusive():  # the NumPy idiom: cumsum into out[1:], then the empty sum in front
            np.cumsum(x[:-1], dtype=out.dtype, out=out[1:])
            out[0] = 0
        return numpy_exclusive, check
    if case in ("var_f64", "norm_f64", "dot_f64"):
        x, y = d["x"], d["y"]
        # the reference without BLAS (np.linalg.norm, np.dot): OpenBLAS's threads spin for a while after a call, on
        # the core the timed implementation's second thread needs (eagle's norm at 1e7 took 3.7-4.7 ms after one
        # such call, 1.8-2.2 without); the NumPy worker times those calls themselves
        want = {"var_f64": np.var(x), "norm_f64": np.sqrt(np.sum(x * x)), "dot_f64": np.sum(x * y)}[case]
        check = (lambda v: abs(float(v) - want) <= 1e-9 * abs(want))  # noqa: E731
        if impl == "eagle":
            f = {"var_f64": lambda: A.var(x), "norm_f64": lambda: A.norm(x), "dot_f64": lambda: A.dot(x, y)}
            return f[case], check
        f = {"var_f64": lambda: np.var(x), "norm_f64": lambda: np.linalg.norm(x), "dot_f64": lambda: np.dot(x, y)}
        return f[case], check
    keys, values = d["keys"], d["values"]
    starts = _numpy_runs(keys)
    if case == "unique_i64":
        want_u, want_c = keys[starts], np.diff(np.append(starts, keys.size))
        if impl == "eagle":
            return (lambda: A.unique(keys)), (lambda r: np.array_equal(np.asarray(r[0]), want_u)
                                              and np.array_equal(np.asarray(r[1]), want_c))
        if impl == "numpy":
            def numpy_unique():
                s = _numpy_runs(keys)
                return keys[s], np.diff(np.append(s, keys.size))
            return numpy_unique, (lambda r: np.array_equal(r[0], want_u) and np.array_equal(r[1], want_c))
    else:
        want_u, want_s = keys[starts], np.add.reduceat(values, starts)
        if impl == "eagle":
            return (lambda: A.reduce_by_key(keys, values)), (
                lambda r: np.array_equal(np.asarray(r[0]), want_u) and np.allclose(np.asarray(r[1]), want_s))
        if impl == "numpy":
            def numpy_reduce():
                s = _numpy_runs(keys)
                return keys[s], np.add.reduceat(values, s)
            return numpy_reduce, (lambda r: np.array_equal(r[0], want_u) and np.allclose(r[1], want_s))
    runs = _numba_runs()

    def numba_call():
        u, s, c = np.empty(keys.size, keys.dtype), np.empty(keys.size), np.empty(keys.size, np.int64)
        r = runs(keys, values, u, s, c)
        return u[:r], s[:r], c[:r]
    if case == "unique_i64":
        return numba_call, (lambda r: np.array_equal(r[0], want_u) and np.array_equal(r[2], want_c))
    return numba_call, (lambda r: np.array_equal(r[0], want_u) and np.allclose(r[1], want_s))


def worker(case: str, impl: str, n: int, repeats: int, min_time: float) -> dict:
    from benchmarks.timing import measure

    d = _inputs(case, n)
    rec = {"case": case, "impl": impl, "n": n, "pid": os.getpid(), "ok": False}
    try:
        call, check = _call(case, impl, d)
    except ImportError as e:  # a peer that is not installed here: skipped, not a failure
        rec["skipped"] = f"{impl} does not import: {e}"
        return rec
    try:
        t = measure(call, repeats, min_time, check=lambda v: _checked(check, v))
    except AssertionError as e:
        rec["error"] = str(e)
        return rec
    rec.update(ok=True, median_s=t.median_s, min_s=t.min_s, first_call_s=t.first_call_s)
    return rec


def _checked(check, value) -> None:
    assert check(value), "output differs from NumPy's"


# --- the driver: workers in rotating rounds -------------------------------------------------------------------
def _run_worker(case: str, impl: str, n: int, a: argparse.Namespace) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "benchmarks.algorithms", "--worker", case, impl, str(n), "--repeats",
           str(a.repeats), "--min-time", str(a.min_time)]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=a.timeout)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith(MARK)]
    if r.returncode != 0 or not lines:
        tail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-2:]
        return {"ok": False, "error": f"exit {r.returncode}: {' | '.join(tail)[:300]}"}
    return json.loads(lines[-1][len(MARK):])


def drive(a: argparse.Namespace) -> dict:
    results = {}
    for n in (int(float(s)) for s in a.sizes.split(",")):
        for case in a.cases.split(","):
            impls = CASES[case]
            times = {i: [] for i in impls}
            ratios = []
            for rnd in range(a.rounds):
                got = {}
                for j in range(len(impls)):
                    impl = impls[(j + rnd) % len(impls)]
                    rec = _run_worker(case, impl, n, a)
                    if rec.get("ok"):
                        got[impl] = rec["median_s"]
                        times[impl].append(rec["median_s"])
                    elif rec.get("skipped"):
                        print(f"  {case} {impl}: skipped ({rec['skipped']})", flush=True)
                    else:
                        print(f"  {case} {impl} n={n}: {rec.get('error')}", file=sys.stderr)
                peers = [v for k, v in got.items() if k != "eagle"]
                if "eagle" in got and peers:
                    ratios.append(got["eagle"] / min(peers))
            med = {i: statistics.median(v) for i, v in times.items() if v}
            ratio = statistics.median(ratios) if ratios else float("nan")
            results[f"{case}|{n}"] = {"median_s": med, "ratio": ratio, "rounds": len(ratios)}
            row = "  ".join(f"{i} {1e3 * s:8.2f} ms" for i, s in med.items())
            print(f"{case:24s} n={n:>9d}  {row}   eagle/best peer {ratio:5.2f}x", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.algorithms", description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", nargs=3, metavar=("CASE", "IMPL", "N"), help="time one implementation (internal)")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--sizes", default="1e6,1e7")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--min-time", type=float, default=0.05)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--out", default=None, help="write the results as JSON here")
    a = p.parse_args(argv)
    if a.worker:
        case, impl, n = a.worker
        print(MARK + json.dumps(worker(case, impl, int(float(n)), a.repeats, a.min_time)), flush=True)
        return 0
    unknown = [c for c in a.cases.split(",") if c not in CASES]
    if unknown:
        p.error(f"unknown cases {unknown}; choose from {sorted(CASES)}")
    t0 = time.perf_counter()
    load = os.getloadavg()[0]
    print(f"# {os.cpu_count()} cores, load average {load:.2f} at the start", flush=True)
    results = drive(a)
    print(f"# {time.perf_counter() - t0:.0f} s, load average {os.getloadavg()[0]:.2f} at the end", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
