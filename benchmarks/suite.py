"""The benchmark suite: hawk (through eagle) against NumPy, JAX, PyTorch, Numba and Warp.

    python -m benchmarks.suite                 # isolated (default): each implementation in its own process
    python -m benchmarks.suite --in-process    # every implementation side by side in this process
    python -m benchmarks.suite --quick         # 10^5 and 10^6 lanes, fewer repeats and rounds
    python -m benchmarks.suite --sizes 1e6 --ops sum,histogram --peers numpy,torch --out /tmp/bench

Every implementation's output is checked against NumPy before it is timed and again after: a hawk result that
is wrong fails the run (exit status 1); a peer whose result is wrong is left out of the ratios, with the reason.
The machine's streaming read bandwidth (benchmarks/bandwidth.py) is measured in fresh processes in both modes.
Writes results-<mode>.json, ratios-<mode>.png and benchmarks.md (docs/bench/ and docs/benchmarks.md by default).
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python benchmarks/suite.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from benchmarks import report  # noqa: E402
from benchmarks.data import Data  # noqa: E402
from benchmarks.ops import OP_NAMES, OPS, Mismatch, check_output  # noqa: E402
from benchmarks.timing import Runner, rounds  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SIZES = (100_000, 1_000_000, 10_000_000)
QUICK_SIZES = (100_000, 1_000_000)
DTYPES = ("float64", "float32")


def parse_sizes(text: str) -> list[int]:
    return [int(float(s)) for s in text.split(",") if s.strip()]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.suite", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=parse_sizes, default=None, help="lanes per run, e.g. 1e5,1e6,1e7 (default)")
    p.add_argument("--repeats", type=int, default=None, help="timed samples per implementation (default 9, quick 3)")
    p.add_argument("--quick", action="store_true", help="10^5 and 10^6 lanes, 3 repeats, 1 startup run")
    p.add_argument("--out", type=Path, default=None, help="where results.json, ratios.png (and benchmarks.md) go "
                   "(default docs/bench, with the markdown table in docs/benchmarks.md)")
    p.add_argument("--markdown", type=Path, default=None, help="where the markdown table goes")
    p.add_argument("--ops", default=",".join(OP_NAMES), help=f"operations (default all): {','.join(OP_NAMES)}")
    p.add_argument("--peers", default=None, help="peers to try (default all that import): numpy,jax,torch,numba,warp")
    p.add_argument("--dtypes", default=",".join(DTYPES), help="float64,float32 (default both)")
    p.add_argument("--min-time", type=float, default=0.01, help="seconds one timed sample lasts at least")
    p.add_argument("--no-extras", action="store_true", help="skip overhead, startup and memory measurements")
    p.add_argument("--startup-runs", type=int, default=None, help="fresh processes for cold/warm start (default 3)")
    p.add_argument("--memory-size", type=int, default=1_000_000, help="lanes for the memory measurement")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--isolated", dest="mode", action="store_const", const="isolated",
                      help="each implementation in its own worker process, interleaved rounds (the default)")
    mode.add_argument("--in-process", dest="mode", action="store_const", const="in-process",
                      help="every implementation in this process, samples interleaved")
    p.add_argument("--rounds", type=int, default=None, help="isolated: rounds of workers per case (default 3, "
                   "quick 2); --repeats is then the samples each worker takes")
    p.add_argument("--budget", type=float, default=None, help="isolated: seconds for all cases (default 1800, "
                   "quick 600); later cases get fewer rounds, or are skipped when it is spent")
    p.add_argument("--worker-timeout", type=float, default=300.0, help="isolated: seconds one worker may take")
    p.add_argument("--plugin", type=Path, default=None, help="isolated: a Python file with impls(op, d) whose "
                   "implementations join the cases (see benchmarks/README.md)")
    a = p.parse_args(argv)
    a.mode = a.mode or "isolated"
    if a.plugin and a.mode != "isolated":
        p.error("--plugin needs the isolated mode")
    a.rounds = a.rounds or (2 if a.quick else 3)
    a.budget = a.budget or (600.0 if a.quick else 1800.0)
    a.sizes = a.sizes or list(QUICK_SIZES if a.quick else DEFAULT_SIZES)
    a.repeats = a.repeats or (3 if a.quick else 9)
    a.startup_runs = a.startup_runs or (1 if a.quick else 3)
    unknown = [o for o in a.ops.split(",") if o not in OP_NAMES]
    if unknown:
        p.error(f"unknown operation(s) {unknown}; known: {OP_NAMES}")
    a.ops = [o for o in OP_NAMES if o in a.ops.split(",")]
    a.dtypes = [t for t in a.dtypes.split(",") if t]
    default_out = a.out is None
    a.out = a.out or ROOT / "docs" / "bench"
    a.markdown = a.markdown or (ROOT / "docs" / "benchmarks.md" if default_out else a.out / "benchmarks.md")
    return a


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_case(op, d: Data, peers: dict, args, skipped: dict) -> dict:
    """Time every implementation of one operation at one dtype and size."""
    try:
        impls = dict(op.ours(d))
    except Exception as e:  # a kernel that does not build or bind is a failure of ours, reported at the end
        impls = {}
        broken = {"kind": "ours", "peer": "hawk", "checked": False, "ok": False,
                  "error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
    for name, mod in peers.items():
        try:
            impls.update(mod.impls(op.name, d))
        except Exception as e:  # a peer that cannot express this case is noted, not fatal
            skipped.setdefault(f"{name}:{op.name}", f"{type(e).__name__}: {e}".splitlines()[0][:200])
    case = {"op": op.name, "dtype": d.dtype.name, "n": d.n, "lanes": d.u.size if op.name in
            ("row_sum", "row_max_masked", "col_sum", "stencil") else d.n, "impls": {}}
    if not impls:
        case["impls"]["hawk"] = broken
    runners = {}

    def fail(name, e):
        rec = case["impls"][name]
        if isinstance(e, Mismatch):
            rec.update(checked=True, error=str(e))
        else:
            rec.update(error=f"{type(e).__name__}: {e}".splitlines()[0][:300])
        runners.pop(name, None)

    for name, impl in impls.items():  # warm up, check, calibrate
        peer = "hawk" if impl.kind in ("ours", "info") else name.split()[0]
        case["impls"][name] = {"kind": impl.kind, "peer": peer, "checked": False, "ok": False}

        def check(value, name=name, impl=impl):
            check_output(op, d, name, impl, impl.fetch(value))

        runners[name] = Runner(impl.call, check)
        try:
            runners[name].prepare(args.min_time)
        except Exception as e:
            fail(name, e)
    for name in rounds(list(runners), args.repeats):  # side by side: one sample of each per round
        if name in runners:
            try:
                runners[name].sample()
            except Exception as e:
                fail(name, e)
    for name, runner in list(runners.items()):  # check the last timed output again
        try:
            t = runner.finish()
        except Exception as e:
            fail(name, e)
            continue
        case["impls"][name].update(ok=True, checked=True, median_s=t.median_s, min_s=t.min_s, samples_s=t.samples_s,
                                   number=t.number, first_call_s=t.first_call_s)
    case["loadavg"] = os.getloadavg()[0]  # other work on the machine while this case ran
    peers_ok = {k: v for k, v in case["impls"].items() if v["kind"] == "peer" and v["ok"]}
    best = min(peers_ok, key=lambda k: peers_ok[k]["median_s"]) if peers_ok else None
    case["best_peer"] = best
    case["ratios"] = {k: (v["median_s"] / peers_ok[best]["median_s"] if best and v["ok"] else math.nan)
                      for k, v in case["impls"].items() if v["kind"] == "ours"}
    return case


def base_meta(args) -> dict:
    """What the run was and where: machine, load, sizes, mode (either mode fills in the peers' part)."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "mode": args.mode,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": f"{platform.machine()} {cpu}".strip(),
        "cores": os.cpu_count(),
        "loadavg_start": os.getloadavg()[0],
        "sizes": args.sizes, "dtypes": args.dtypes, "repeats": args.repeats, "min_time_s": args.min_time,
        "openblas": {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")},
    }


def environment(peers: dict, skipped: dict, args) -> dict:
    import eagle
    from benchmarks import kernels

    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for name, mod in peers.items():
        if name != "numpy":
            try:
                versions[name] = mod.version()
            except Exception:
                versions[name] = "?"
    return dict(base_meta(args), eagle_threads=eagle.deploy(kernels.tiny_map).threads, versions=versions,
                peers=list(peers), skipped_peers=dict(skipped))


def read_bandwidth(args, runs: list[dict]) -> dict:
    """The machine's read bandwidth over the bytes of the largest float64 input, from `runs` (fresh processes):
    the best run's median (bandwidth is what the machine can do: the least disturbed run says it best)."""
    ok = [r for r in runs if "median_gbs" in r]
    if not ok:
        return {"error": "; ".join(r.get("error", "?") for r in runs)}
    best = max(ok, key=lambda r: r["median_gbs"])
    return {"method": best["method"], "bytes": best["bytes"], "threads": best["threads"],
            "median_gbs": best["median_gbs"], "best_gbs": max(r["best_gbs"] for r in ok),
            "runs_gbs": [r["median_gbs"] for r in ok]}


def in_process(args) -> tuple[dict, list[dict], dict]:
    """Every case in this process (the suite's original mode): meta, results, extras."""
    from benchmarks import peers as peer_modules

    names = args.peers.split(",") if args.peers else peer_modules.ORDER
    peers, skipped = peer_modules.load(names)
    for name, why in skipped.items():
        say(f"peer {name} skipped: {why}")
    env = environment(peers, skipped, args)
    results = []
    ops = [op for op in OPS if op.name in args.ops]
    total = len(args.sizes) * len(args.dtypes) * len(ops)
    done = 0
    for n in args.sizes:
        for dt in args.dtypes:
            d = Data(np.dtype(dt), n)
            for op in ops:
                t0 = time.perf_counter()
                case = run_case(op, d, peers, args, env["skipped_peers"])
                results.append(case)
                done += 1
                say(f"[{done}/{total}] {op.name} {dt} n={n:.0e}: {time.perf_counter() - t0:.1f} s")
            del d
            gc.collect()
        report.print_size(results, n)
    ex = {}
    if not args.no_extras:
        from benchmarks import extras

        say("extras: per-call overhead")
        ex["overhead_us"] = extras.overhead(peers, args.repeats)
        say("extras: cold compile and warm start (fresh processes)")
        try:
            ex["startup"] = extras.startup(args.startup_runs)
        except Exception as e:
            ex["startup"] = {"error": f"{type(e).__name__}: {e}"[:300]}
        say("extras: memory")
        ex["memory"] = extras.memory(min(args.memory_size, max(args.sizes)))
    return env, results, ex


def run(args) -> dict:
    """The whole suite; returns the report (also written to args.out)."""
    from benchmarks import isolated

    t_start = time.perf_counter()
    load = os.getloadavg()[0]
    if load > 0.5:
        say(f"note: load average {load:.2f} at start: other work shares the cores; compare ratios")
    bw_bytes = 8 * max(args.sizes)
    say(f"read bandwidth over {bw_bytes / 1e6:.3g} MB (a fresh process)")
    bw = [isolated.bandwidth(bw_bytes, args)]
    if args.mode == "isolated":
        env = base_meta(args)
        results, ex, _ = isolated.run(args, env)
    else:
        env, results, ex = in_process(args)
    say("read bandwidth again")
    bw.append(isolated.bandwidth(bw_bytes, args))
    env["read_bandwidth"] = read_bandwidth(args, bw)
    rep = {"meta": env, "results": results, "extras": ex}
    if ex:
        report.print_extras(ex)
    rep["meta"]["loadavg_end"] = os.getloadavg()[0]
    rep["meta"]["wall_s"] = time.perf_counter() - t_start
    rep["failures"] = [f"{c['op']} {c['dtype']} n={c['n']} {k}: {v.get('error')}" for c in results
                       for k, v in c["impls"].items()
                       if v["kind"] in ("ours", "info") and not v["ok"] and not v.get("skipped")]
    rep["targets"] = report.targets(rep)
    report.write(rep, args.out, args.markdown)
    report.print_summary(rep)
    return rep


def main(argv=None) -> int:
    args = parse_args(argv)
    rep = run(args)
    if rep["failures"]:
        say("FAILED: hawk results that did not match NumPy (or did not run):")
        for f in rep["failures"]:
            say(f"  {f}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
