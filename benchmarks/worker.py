"""One measurement in a fresh process, for the suite's isolated mode (benchmarks/isolated.py starts these).

    python -m benchmarks.worker --op sum --size 1e7 --dtype float64 --impl torch --source torch
    python -m benchmarks.worker --list --ops sum,mean --sizes 1e5 --dtypes float64 --peers numpy,torch
    python -m benchmarks.worker --bandwidth 80000000
    python -m benchmarks.worker --overhead hawk          # or a peer's name
    python -m benchmarks.worker --memory 1000000

Why a process each: a peer's thread pool (torch's OpenMP threads spin-waiting after a call, Numba's workqueue,
XLA's pool) keeps running after its own call and takes cores from whatever runs next in the same process. A case
worker imports only the one source it times (hawk, one peer, or a plugin file), builds the seeded inputs
(benchmarks/data.py), warms up, checks the output against NumPy, takes `--repeats` samples, checks the last output
again and prints one line `BENCH-RESULT {json}`. Start-up (interpreter, imports, input data) is outside the
samples. A worker whose check fails still exits 0 with "ok": false and the reason; exit status 2 means it could
not run at all. `hawk_builds` counts compiled libraries the worker had to build (0 when the disk cache was warm).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

_T0 = time.perf_counter()

if __package__ in (None, ""):  # run as a script: python benchmarks/worker.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

if TYPE_CHECKING:
    from benchmarks.data import Data
    from benchmarks.ops import Op

MARK = "BENCH-RESULT "
_BUILDS = [0]


def _count_builds() -> None:
    """Count the host libraries this process compiles (cache misses), by wrapping eagle's build step."""
    try:
        from eagle.targets import host
    except ImportError:
        return
    build = getattr(host, "_build_into", None)
    if build is None:
        return

    def counted(*a, **k):
        _BUILDS[0] += 1
        return build(*a, **k)

    host._build_into = counted


def emit(obj: dict) -> None:
    sys.stdout.flush()
    print(MARK + json.dumps(obj), flush=True)


def load_plugin(path: str) -> ModuleType:
    """A Python file with `impls(op, d) -> {name: Impl}` (and optionally NAME): implementations from outside the
    suite (tests use one that is deliberately wrong)."""
    spec = importlib.util.spec_from_file_location(f"bench_plugin_{Path(path).stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load plugin {path}: not a Python file")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not hasattr(mod, "impls"):
        raise ImportError(f"plugin {path} defines no impls(op, d)")
    return mod


def source_impls(source: str, op: Op, d: Data, plugin: str | None) -> dict:
    """The implementations of `op` on `d` from one source: "hawk" (ours), a peer's name, or "plugin"."""
    if source == "hawk":
        return dict(op.ours(d))
    if source == "plugin":
        return dict(load_plugin(plugin).impls(op.name, d))
    from benchmarks import peers

    ready, skipped = peers.load([source])
    if source not in ready:
        raise RuntimeError(f"peer {source} does not load here: {skipped.get(source)}")
    return dict(ready[source].impls(op.name, d))


def time_case(a: argparse.Namespace) -> dict:
    """Build the inputs, warm up, check, time one implementation; the record isolated.py collects per round."""
    from benchmarks.data import Data
    from benchmarks.ops import OPS, Mismatch, check_output
    from benchmarks.timing import Runner

    rec = {"pid": os.getpid(), "impl": a.impl, "source": a.source, "ok": False, "checked": False}
    op = next((o for o in OPS if o.name == a.op), None)
    if op is None:
        raise SystemExit(f"benchmarks.worker: unknown operation {a.op!r}")
    d = Data(np.dtype(a.dtype), int(float(a.size)))
    impls = source_impls(a.source, op, d, a.plugin)
    if a.impl not in impls:
        raise SystemExit(f"benchmarks.worker: {a.source} has no implementation {a.impl!r} of {a.op} "
                         f"(it has {sorted(impls)})")
    impl = impls[a.impl]
    rec["kind"] = impl.kind
    rec["setup_s"] = time.perf_counter() - _T0  # interpreter, imports, inputs: not in any sample

    def check(value):
        check_output(op, d, a.impl, impl, impl.fetch(value))

    runner = Runner(impl.call, check)
    try:
        runner.prepare(a.min_time)
        rec["checked"] = True
        for _ in range(max(1, a.repeats)):
            runner.sample()
        t = runner.finish()
    except Mismatch as e:
        rec.update(checked=True, error=str(e))
        return rec
    except Exception as e:
        rec["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        return rec
    rec.update(ok=True, median_s=t.median_s, min_s=t.min_s, samples_s=t.samples_s, number=t.number,
               first_call_s=t.first_call_s)
    return rec


def list_cases(a: argparse.Namespace) -> dict:
    """Which implementations each (size, dtype, op) has, per source; peers that do not load, with the reason;
    versions. Calls every hawk implementation once on a small input with the same grid width as the real sizes,
    so that the kernels are compiled into the disk cache here and the timed workers find them warm."""
    import eagle
    from benchmarks import kernels, peers
    from benchmarks.data import Data, grid_shape
    from benchmarks.ops import OPS

    ready, skipped = peers.load(a.peers.split(",") if a.peers else peers.ORDER)
    plugin = load_plugin(a.plugin) if a.plugin else None
    versions = {"python": sys.version.split()[0], "numpy": np.__version__}
    for name, mod in ready.items():
        if name != "numpy":
            try:
                versions[name] = mod.version()
            except Exception:
                versions[name] = "?"
    ops = [o for o in OPS if o.name in a.ops.split(",")]
    cases, not_expressed = {}, {}
    for n in (int(float(s)) for s in a.sizes.split(",")):
        small = n if n < 100_000 else 100_000  # the same grid width (1000 columns) as every n >= 10^5
        assert grid_shape(small)[1] == grid_shape(n)[1]
        for dt in a.dtypes.split(","):
            d = Data(np.dtype(dt), small)
            for op in ops:
                rows = []
                try:
                    ours = op.ours(d)
                except Exception as e:  # recorded; the case worker reports the same failure as a hawk failure
                    ours = {}
                    not_expressed[f"hawk:{op.name}"] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
                for name, impl in ours.items():
                    try:
                        impl.call()
                    except Exception:
                        pass  # the case worker reports it
                    rows.append([name, impl.kind, "hawk", "hawk"])
                srcs = list(ready.items()) + ([("plugin", plugin)] if plugin else [])
                for src, mod in srcs:
                    try:
                        got = mod.impls(op.name, d)
                    except Exception as e:
                        not_expressed[f"{src}:{op.name}"] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
                        continue
                    for name, impl in got.items():
                        peer = "hawk" if impl.kind != "peer" else (getattr(mod, "NAME", src) if src == "plugin"
                                                                   else src)
                        rows.append([name, impl.kind, peer, src])
                if not any(r[1] == "ours" for r in rows):
                    rows.insert(0, ["hawk", "ours", "hawk", "hawk"])  # so that the failure shows as ours
                cases[f"{n}|{dt}|{op.name}"] = rows
    return {"pid": os.getpid(), "cases": cases, "peers": list(ready), "skipped_peers": skipped,
            "not_expressed": not_expressed, "versions": versions,
            "eagle_threads": eagle.deploy(kernels.tiny_map).threads, "hawk_builds": _BUILDS[0]}


def overhead(source: str, repeats: int) -> dict:
    from benchmarks import extras, peers

    if source == "hawk":
        return extras.overhead({}, repeats)
    ready, skipped = peers.load([source])
    if source not in ready:
        return {}
    return extras.overhead(ready, repeats, ours=False)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.worker", description=__doc__.split("\n\n")[0])
    p.add_argument("--op")
    p.add_argument("--size", default="0")
    p.add_argument("--dtype", default="float64")
    p.add_argument("--impl", help="the implementation's name, as the suite's tables show it (e.g. 'hawk auto')")
    p.add_argument("--source", help="where it comes from: hawk, a peer's name, or plugin (default: hawk for "
                   "names starting with hawk or eagle, else the name's first word)")
    p.add_argument("--plugin", help="a Python file with impls(op, d): extra implementations")
    p.add_argument("--repeats", type=int, default=9, help="timed samples")
    p.add_argument("--min-time", type=float, default=0.01, help="seconds one sample lasts at least")
    p.add_argument("--list", action="store_true", help="list the implementations per case and warm the hawk cache")
    p.add_argument("--ops", default="")
    p.add_argument("--sizes", default="")
    p.add_argument("--dtypes", default="float64,float32")
    p.add_argument("--peers", default=None)
    p.add_argument("--bandwidth", type=int, default=None, metavar="BYTES", help="measure the read bandwidth")
    p.add_argument("--overhead", default=None, metavar="SOURCE", help="per-call overhead of hawk or one peer")
    p.add_argument("--memory", type=int, default=None, metavar="N", help="peak allocations at N lanes")
    a = p.parse_args(argv)
    if a.impl and not a.source:
        a.source = "hawk" if a.impl.startswith(("hawk", "eagle")) else a.impl.split()[0]
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    _count_builds()
    try:
        if a.list:
            out = list_cases(a)
        elif a.bandwidth is not None:
            from benchmarks.bandwidth import read_bandwidth

            out = read_bandwidth(a.bandwidth, a.repeats)
        elif a.overhead is not None:
            out = {"rows": overhead(a.overhead, a.repeats)}
        elif a.memory is not None:
            from benchmarks import extras

            out = {"memory": extras.memory(a.memory)}
        elif a.op and a.impl:
            out = time_case(a)
        else:
            print("benchmarks.worker: give --op and --impl, or --list, --bandwidth, --overhead or --memory",
                  file=sys.stderr)
            return 2
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    except Exception as e:  # could not set up (a peer that does not load, an unreadable plugin...): no result
        print(f"benchmarks.worker: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    if isinstance(out, dict):
        out.setdefault("pid", os.getpid())
        out.setdefault("hawk_builds", _BUILDS[0])
        out["threads_alive"] = threading.active_count()
    emit(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
