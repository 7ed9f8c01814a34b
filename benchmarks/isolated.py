"""The suite's isolated mode: every implementation of a case runs in its own fresh worker process.

A peer's thread pool (torch's spin-waiting OpenMP threads, say) outlives its call and slows whatever runs next in
the same process, so in-process numbers depend on the order of the implementations. Here each measurement is a
`python -m benchmarks.worker` process that imports only its own source, builds the seeded inputs, warms up, checks
its output against NumPy and times `--repeats` samples inside itself (start-up is not timed). Workers run one at
a time, never two together.

Interleaving: a case runs in rounds; in each round every implementation's worker runs once, the starting point
of the order rotating by round, so that load on the machine, which comes and goes over seconds, falls on all of
them alike. An implementation's time is the median over rounds of its worker's median sample. The ratio is the
median over rounds of (ours / best peer in that round): the two times of a round were taken seconds apart, so a
slow drift of the machine's load cancels in each round's ratio, and the median drops a round where a burst hit
only one side. The ratio of the medians is kept in results.json too ("ratios_of_medians").

Time budget: `--budget` seconds for the cases; each case gets an equal share of what is left when it starts, runs
at least one round and stops adding rounds when the next would overrun its share. Cases left when the budget is
spent are marked skipped (not failures). A first `--list` worker compiles every hawk kernel into the disk cache,
so timed workers load them warm (each worker reports `hawk_builds`, the libraries it had to compile).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from argparse import Namespace
from pathlib import Path

from benchmarks.data import grid_shape
from benchmarks.worker import MARK

ROOT = Path(__file__).resolve().parent.parent


class WorkerFailed(RuntimeError):
    """A worker process that exited without a result (crash, timeout, bad arguments)."""


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def call_worker(args: list[str], timeout: float) -> dict:
    """Run one worker to completion (nothing else runs meanwhile) and return its result line."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "benchmarks.worker", *args]
    try:
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise WorkerFailed(f"worker {' '.join(args)} ran past {timeout:.0f} s") from None
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith(MARK)]
    if r.returncode != 0 or not lines:
        tail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-3:]
        raise WorkerFailed(f"worker exited with status {r.returncode}: {' | '.join(tail)[:400]}")
    return json.loads(lines[-1][len(MARK):])


class Budget:
    def __init__(self, seconds: float):
        self.seconds, self.t0 = seconds, time.perf_counter()

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.t0)


def lanes(op: str, n: int) -> int:
    rows, cols = grid_shape(n)
    return rows * cols if op in ("row_sum", "row_max_masked", "col_sum", "stencil") else n


def _impl_args(args: Namespace, op: str, n: int, dt: str, name: str, source: str) -> list[str]:
    out = ["--op", op, "--size", str(n), "--dtype", dt, "--impl", name, "--source", source,
           "--repeats", str(args.repeats), "--min-time", str(args.min_time)]
    return out + (["--plugin", str(args.plugin)] if args.plugin else [])


def run_case(args: Namespace, op: str, n: int, dt: str, rows: list, budget: Budget, cases_left: int) -> dict:
    """All rounds of one (operation, size, dtype); the case record the report reads (as in-process mode)."""
    recs = {name: {"kind": kind, "peer": peer, "source": src, "checked": False, "ok": False, "rounds_s": [],
                   "samples_s": [], "first_calls_s": [], "pids": [], "setup_s": [], "hawk_builds": 0, "failed": None}
            for name, kind, peer, src in rows}
    active = [name for name, *_ in rows]
    share = max(0.0, budget.left()) / max(1, cases_left)
    t0, done = time.perf_counter(), 0
    for r in range(max(1, args.rounds)):
        spent = time.perf_counter() - t0
        if r > 0 and (spent + spent / r > share or budget.left() <= 0 or not active):
            break
        for i in range(len(active)):
            name = active[(i + r) % len(active)]
            rec = recs[name]
            if rec["failed"]:
                continue
            try:
                res = call_worker(_impl_args(args, op, n, dt, name, rec["source"]), args.worker_timeout)
            except WorkerFailed as e:
                rec["failed"] = str(e)
                continue
            rec["pids"].append(res["pid"])
            rec["hawk_builds"] += res.get("hawk_builds", 0)
            rec["checked"] = rec["checked"] or res["checked"]
            rec["setup_s"].append(res.get("setup_s"))
            if not res["ok"]:
                rec["failed"] = res.get("error", "failed")
                continue
            rec["rounds_s"].append(res["median_s"])
            rec["samples_s"] += res["samples_s"]
            rec["first_calls_s"].append(res["first_call_s"])
            rec["number"] = res["number"]
        active = [a for a in active if not recs[a]["failed"]]
        done += 1
    case = {"op": op, "dtype": dt, "n": n, "lanes": lanes(op, n), "rounds": done, "impls": {}}
    for name, rec in recs.items():
        out = {k: rec[k] for k in ("kind", "peer", "checked", "pids", "hawk_builds", "rounds_s")}
        if rec["failed"] or not rec["rounds_s"]:
            out.update(ok=False, error=rec["failed"] or "no round ran")
        else:
            out.update(ok=True, median_s=statistics.median(rec["rounds_s"]), min_s=min(rec["samples_s"]),
                       samples_s=rec["samples_s"], number=rec.get("number", 0),
                       first_call_s=statistics.median(rec["first_calls_s"]),
                       setup_s=statistics.median(s for s in rec["setup_s"] if s is not None))
        case["impls"][name] = out
    case["loadavg"] = os.getloadavg()[0]
    ratios(case)
    return case


def ratios(case: dict) -> None:
    """best_peer (by median over rounds), ratios (median of per-round ratios) and ratios_of_medians."""
    impls = case["impls"]
    peers = {k: v for k, v in impls.items() if v["kind"] == "peer" and v["ok"]}
    best = min(peers, key=lambda k: peers[k]["median_s"]) if peers else None
    case["best_peer"] = best
    case["ratios"], case["ratios_of_medians"] = {}, {}
    for k, v in impls.items():
        if v["kind"] != "ours":
            continue
        if not (best and v["ok"]):
            case["ratios"][k] = case["ratios_of_medians"][k] = math.nan
            continue
        per_round = [v["rounds_s"][r] / min(p["rounds_s"][r] for p in peers.values())
                     for r in range(min(len(v["rounds_s"]), *(len(p["rounds_s"]) for p in peers.values())))]
        case["ratios"][k] = statistics.median(per_round) if per_round else math.nan
        case["ratios_of_medians"][k] = v["median_s"] / peers[best]["median_s"]


def skipped_case(op: str, n: int, dt: str, rows: list) -> dict:
    impls = {name: {"kind": kind, "peer": peer, "checked": False, "ok": False, "skipped": True,
                    "error": "not run: the time budget was spent"} for name, kind, peer, _ in rows}
    return {"op": op, "dtype": dt, "n": n, "lanes": lanes(op, n), "rounds": 0, "impls": impls, "best_peer": None,
            "ratios": {k: math.nan for k, v in impls.items() if v["kind"] == "ours"}, "ratios_of_medians": {},
            "loadavg": os.getloadavg()[0], "skipped": True}


def listing(args: Namespace) -> dict:
    """The implementations per case, the peers that load, versions; compiles the hawk kernels into the cache."""
    a = ["--list", "--ops", ",".join(args.ops), "--sizes", ",".join(str(n) for n in args.sizes),
         "--dtypes", ",".join(args.dtypes)]
    if args.peers:
        a += ["--peers", args.peers]
    if args.plugin:
        a += ["--plugin", str(args.plugin)]
    return call_worker(a, max(900.0, args.worker_timeout))


def bandwidth(n_bytes: int, args: Namespace) -> dict:
    try:
        return call_worker(["--bandwidth", str(n_bytes), "--repeats", str(max(3, args.repeats))],
                           args.worker_timeout)
    except WorkerFailed as e:
        return {"error": str(e)}


def extras(args: Namespace, peers: list[str]) -> dict:
    """Overhead (hawk and each peer in its own process), startup (fresh processes already), memory (a worker)."""
    from benchmarks import extras as ex

    out: dict = {"overhead_us": {}}
    say("extras: per-call overhead (a worker per source)")
    for src in ["hawk", *(p for p in peers if p != "numpy")]:
        try:
            out["overhead_us"].update(call_worker(["--overhead", src, "--repeats", str(args.repeats)],
                                                  args.worker_timeout)["rows"])
        except WorkerFailed as e:
            say(f"  overhead of {src}: {e}")
    say("extras: cold compile and warm start (fresh processes)")
    try:
        out["startup"] = ex.startup(args.startup_runs)
    except Exception as e:
        out["startup"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    say("extras: memory (a worker)")
    try:
        out["memory"] = call_worker(["--memory", str(min(args.memory_size, max(args.sizes)))],
                                    args.worker_timeout)["memory"]
    except WorkerFailed as e:
        say(f"  memory: {e}")
    return out


def run(args: Namespace, meta: dict) -> tuple[list[dict], dict, dict]:
    """Every case in isolated workers; returns (results, extras, the listing's facts merged into meta)."""
    from benchmarks import report

    say("isolated mode: listing the implementations and compiling the hawk kernels into the disk cache")
    lst = listing(args)
    meta.update(peers=lst["peers"], skipped_peers=dict(lst["skipped_peers"], **lst["not_expressed"]),
                versions=lst["versions"], eagle_threads=lst["eagle_threads"], rounds=args.rounds,
                budget_s=args.budget, ratio_rule="median over rounds of ours / best peer of the round")
    for name, why in lst["skipped_peers"].items():
        say(f"peer {name} skipped: {why}")
    budget = Budget(args.budget)
    results = []
    keys = [(n, dt, op) for n in args.sizes for dt in args.dtypes for op in args.ops]
    for i, (n, dt, op) in enumerate(keys):
        rows = lst["cases"][f"{n}|{dt}|{op}"]
        t0 = time.perf_counter()
        if budget.left() <= 0:
            results.append(skipped_case(op, n, dt, rows))
            say(f"[{i + 1}/{len(keys)}] {op} {dt} n={n:.0e}: skipped (time budget spent)")
        else:
            case = run_case(args, op, n, dt, rows, budget, len(keys) - i)
            results.append(case)
            say(f"[{i + 1}/{len(keys)}] {op} {dt} n={n:.0e}: {time.perf_counter() - t0:.1f} s, "
                f"{case['rounds']} round(s) of {len(rows)} workers")
            builds = sum(v.get("hawk_builds", 0) for v in case["impls"].values())
            if builds and not meta.get("hawk_builds_in_workers"):
                say(f"note: workers of {op} compiled {builds} hawk libraries (is HAWK_CACHE_DIR off?): their "
                    "first calls include the compile, their samples do not")
            meta["hawk_builds_in_workers"] = meta.get("hawk_builds_in_workers", 0) + builds
        if i + 1 == len(keys) or keys[i + 1][0] != n:
            report.print_size(results, n)
    return results, (extras(args, lst["peers"]) if not args.no_extras else {}), lst
