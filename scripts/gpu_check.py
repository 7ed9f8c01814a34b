"""The GPU check: build a bundle of artifacts here (with MLIR), run it on a GPU machine (without MLIR).

    python scripts/gpu_check.py build [--out build/gpu_check] [--bench-lanes N] [--only NAME,...] [--no-bench]
    python scripts/gpu_check.py run [--bundle build/gpu_check] [--target nvvm] [--budget SECONDS] [--no-mlir]

`build` publishes the kernels of scripts/gpu_cases.py as artifacts for the host and the GPU target(s), saves the
contract cases' inputs, and the expected results of every case computed here by the host build, as .npz files
with a manifest.json; the whole bundle stays under 64 MiB (benchmark inputs are not stored: `run` makes them from
a NumPy-only integer recipe that gives the same bits everywhere).

`run` needs only Python 3.11+, NumPy and the target's runtime (cuda-bindings for nvvm): it loads each artifact
with hawk.load, runs it on the target, compares with the expected results (bitwise where the contract promises
the host's bits: ordered sums and scatters, max/min, counts; within a tolerance elsewhere), times it, and prints
a summary ending in "N passed, N failed". `--target host` runs the same bundle on the CPU (how the tests keep this
script working on a machine without a GPU); `--no-mlir` makes importing MLIR fail, as on the GPU machine.
Most users go through scripts/gpu_check.sh.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BUNDLE = ROOT / "build" / "gpu_check"
MANIFEST = "manifest.json"
MARKER = "GPU_CHECK_BUNDLE"
MAX_BUNDLE = 60 << 20  # what one call to a lent GPU machine may carry is 64 MiB
FULL_LIMIT = 1 << 16  # lane outputs larger than this are checked on samples (and a float64 total)
SAMPLES = 4096
MANIFEST_VERSION = 1


# ---- NumPy-only helpers shared by both modes -------------------------------------------------------------------
def _splitmix(n: int, seed: int) -> np.ndarray:
    """n pseudo-random uint64 (splitmix64 of seed + i): integer arithmetic, the same bits on every machine."""
    with np.errstate(over="ignore"):
        z = (np.arange(1, n + 1, dtype=np.uint64) + np.uint64(seed)) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def recipe_inputs(recipe: dict, n: int, dtype: str, seed: int) -> dict:
    """Benchmark inputs from a recipe (plane -> "signed" | "unit" | "keys" | "sorted_keys", or a Param value;
    "@cols": the grid's fast extent, making lane planes (n // cols, cols); "@rows-1" as a value: rows - 1)."""
    cols = recipe.get("@cols")
    rows = n // cols if cols else None
    shape = (rows, cols) if cols else (n,)
    size = rows * cols if cols else n
    out: dict = {}
    for k, (name, kind) in enumerate(sorted((p, v) for p, v in recipe.items() if not p.startswith("@"))):
        if not isinstance(kind, str):
            out[name] = float(kind)
            continue
        if kind == "@rows-1":
            out[name] = float(rows - 1)
            continue
        bits = _splitmix(size, seed * 101 + k)
        if kind in ("keys", "sorted_keys"):
            keys = (bits % np.uint64(recipe.get("@keys", 1024))).astype(np.int32)
            out[name] = np.sort(keys) if kind == "sorted_keys" else keys
            continue
        unit = (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))  # exact: 53-bit integers scaled
        if kind == "unit":
            vals = unit
        elif kind == "signed":
            vals = unit * 4.0 - 1.75
        else:
            raise ValueError(f"unknown input kind {kind!r} in a recipe")
        out[name] = vals.astype(dtype).reshape(shape)
    return out


def as_outputs(result) -> dict[str, np.ndarray]:
    """hawk.run's result (one eagle.Array, or a dict of them) as {name: ndarray}; one output is named '_'."""
    if isinstance(result, dict):
        return {k: np.array(v) for k, v in result.items()}
    return {"_": np.array(result)}


def _reduce_expected(outs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What the bundle keeps of each output: all of it, or for big lane outputs evenly spaced samples and a
    float64 total."""
    keep = {}
    for name, a in outs.items():
        flat = a.reshape(-1)
        if flat.size <= FULL_LIMIT:
            keep[name] = a
        else:
            idx = np.linspace(0, flat.size - 1, SAMPLES).astype(np.int64)
            keep[f"{name}@idx"] = idx
            keep[f"{name}@val"] = flat[idx]
            keep[f"{name}@shape"] = np.array(a.shape, dtype=np.int64)
            keep[f"{name}@total"] = np.array(np.sum(flat, dtype=np.float64))
    return keep


def _load_npz(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _planes(stored: dict) -> dict:
    """Inputs from an .npz: 0-d arrays are Params (Python floats)."""
    return {k: (float(v) if v.ndim == 0 else v) for k, v in stored.items()}


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _close(got: np.ndarray, want: np.ndarray, rtol: float) -> tuple[bool, float]:
    """Within rtol of the data's scale (NaN where the expected value is NaN); returns (ok, worst error/scale)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return False, float("inf")
    nan = np.isnan(want)
    if not np.array_equal(nan, np.isnan(got)):
        return False, float("inf")
    fin = want[~nan]
    scale = float(np.max(np.abs(fin))) if fin.size else 1.0
    scale = max(scale, 1e-300)
    err = float(np.max(np.abs(got[~nan] - fin))) / scale if fin.size else 0.0
    return err <= rtol, err


def compare(got: dict, expected: dict, exact: list[str], rtol: float) -> tuple[bool, list[str], bool]:
    """(ok, problems, bitwise) of one run's outputs against the bundle's expected results."""
    problems = []
    bitwise = True
    names = sorted({k.split("@")[0] for k in expected})
    if sorted(got) != names:
        return False, [f"outputs {sorted(got)}, expected {names}"], False
    for name in names:
        g = got[name]
        strict = "*" in exact or name in exact
        if name in expected:
            want = expected[name]
            same = _same_bits(g, want)
        else:  # sampled
            shape = tuple(int(s) for s in expected[f"{name}@shape"])
            if g.shape != shape:
                problems.append(f"{name}: shape {g.shape}, expected {shape}")
                bitwise = False
                continue
            g = g.reshape(-1)[expected[f"{name}@idx"]]
            want = expected[f"{name}@val"]
            same = _same_bits(g, want)
        bitwise &= same
        if strict and not same:
            _, err = _close(g, want, 0.0)
            problems.append(f"{name}: not bitwise equal to the host (worst relative error {err:.3g})")
        elif not strict:
            ok, err = _close(g, want, rtol)
            if not ok:
                problems.append(f"{name}: relative error {err:.3g} > {rtol:g}")
    return not problems, problems, bitwise


# ---- build (here, with MLIR) ------------------------------------------------------------------------------------
def _case_ids(case, bench_lanes: int):
    sizes = (bench_lanes,) if case.bench else case.sizes
    for dt in case.dtypes:
        for n in sizes:
            yield f"{case.name}.{dt}.n{n}", dt, n


@contextlib.contextmanager
def _copy_slots(n: int):
    """$HAWK_COPY_SLOTS = n while a kernel builds (n > 0): its artifacts carry that copy limit in their spec."""
    if not n:
        yield
        return
    was = os.environ.get("HAWK_COPY_SLOTS")
    os.environ["HAWK_COPY_SLOTS"] = str(n)
    try:
        yield
    finally:
        if was is None:
            del os.environ["HAWK_COPY_SLOTS"]
        else:
            os.environ["HAWK_COPY_SLOTS"] = was


def build(args) -> int:
    sys.path[:0] = [str(ROOT / "scripts"), str(ROOT)]  # gpu_cases, and the benchmarks/ it takes kernels from
    import gpu_cases

    import hawk
    import hawk.artifact

    out = Path(args.out)
    only = set(filter(None, (args.only or "").split(",")))
    cases = gpu_cases.contract_cases() + ([] if args.no_bench else gpu_cases.bench_cases())
    if only:
        unknown = only - {c.name for c in cases}
        if unknown:
            raise SystemExit(f"gpu_check build: no case named {sorted(unknown)}")
        cases = [c for c in cases if c.name in only]
    targets = tuple(dict.fromkeys(["host", *args.targets.split(",")]))
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise SystemExit(f"gpu_check build: {out} exists and is not a gpu_check bundle; pick another --out")
        import shutil

        shutil.rmtree(out)
    (out / "artifacts").mkdir(parents=True)
    (out / MARKER).write_text("a gpu_check bundle (scripts/gpu_check.py build replaces it)\n")
    (out / "data").mkdir()
    t0 = time.perf_counter()
    kernels: dict[str, tuple] = {}
    for c in cases:
        k, dts, _ = kernels.get(c.kernel.name, (c.kernel, (), 0))
        kernels[c.kernel.name] = (k, tuple(dict.fromkeys(dts + c.dtypes)), c.copy_slots)
    broken: dict[str, str] = {}
    for name, (k, dts, copy_slots) in kernels.items():
        t = time.perf_counter()
        try:
            with _copy_slots(copy_slots):
                hawk.artifact.build_bundle([k], out / "artifacts", targets=targets, dtypes=dts, cpu="portable")
        except Exception as exc:  # a kernel that does not build is a bug: record it, build the rest
            lines = [ln.strip() for ln in str(exc).splitlines() if "error" in ln.lower()] or [str(exc)]
            broken[name] = f"{type(exc).__name__}: " + " | ".join(dict.fromkeys(lines))[:600]
            print(f"FAILED {name}: {broken[name]}", flush=True)
            continue
        print(f"built {name} ({'/'.join(dts)}, {'+'.join(targets)}) in {time.perf_counter() - t:.1f} s", flush=True)
    entries = []
    loaded = {}
    for c in cases:
        for cid, dt, n in _case_ids(c, args.bench_lanes):
            if c.kernel.name in broken:
                entries.append({"id": cid, "case": c.name, "kernel": c.kernel.name, "dtype": dt, "n": n,
                                "build_error": broken[c.kernel.name]})
                continue
            seed = _seed(cid)
            if c.bench:
                planes = recipe_inputs(c.recipe, n, dt, seed)
                inputs = None
            else:
                planes = c.inputs(n, np.dtype(dt), np.random.default_rng(seed))
                inputs = f"data/{cid}.in.npz"
                np.savez(out / inputs, **{k: np.asarray(v) for k, v in planes.items()})
            lk = loaded.get(c.kernel.name)
            if lk is None:
                lk = loaded[c.kernel.name] = hawk.load(out / "artifacts", c.kernel.name, target="host")
            expected = _reduce_expected(as_outputs(hawk.run(lk, **planes)))
            np.savez(out / f"data/{cid}.want.npz", **expected)
            entries.append({"id": cid, "case": c.name, "kernel": c.kernel.name, "dtype": dt, "n": n,
                            "inputs": inputs, "recipe": c.recipe, "seed": seed, "expected": f"data/{cid}.want.npz",
                            "exact": list(c.exact), "rtol": c.rtol[dt], "bench": c.bench})
    manifest = {"version": MANIFEST_VERSION, "hawk_version": hawk.__version__, "targets": list(targets),
                "bench_lanes": args.bench_lanes, "cpu_flags": sorted(_cpu_flags() & WIDE_FLAGS), "cases": entries}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"bundle {out}: {len(entries)} checks of {len(kernels)} kernels, {size / 2**20:.1f} MiB, built in "
          f"{time.perf_counter() - t0:.0f} s")
    for name, err in broken.items():
        print(f"gpu_check build: kernel {name} did not build (its checks will fail): {err}", file=sys.stderr)
    if size > MAX_BUNDLE:
        print(f"gpu_check build: the bundle is {size / 2**20:.1f} MiB, over the {MAX_BUNDLE >> 20} MiB a GPU "
              "machine takes in one call", file=sys.stderr)
        return 1
    return 1 if broken else 0


WIDE_FLAGS = {"avx2", "avx512f", "avx512bw", "avx512dq", "avx512vl", "fma"}


def _cpu_flags() -> set[str]:
    """This CPU's feature flags (Linux): the host-side libraries of an artifact are compiled for the CPU that built
    them, so the machine that runs them needs the same vector extensions."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _seed(cid: str) -> int:
    """A case's seed: a checksum of its id (Python's hash() differs per process)."""
    import zlib

    return zlib.crc32(cid.encode())


# ---- run (on the GPU machine: NumPy and the runtime, no MLIR) -----------------------------------------------------
def block_mlir() -> None:
    """Make `import mlir` fail in this process, as on a machine without the MLIR wheels."""
    import importlib.abc

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "mlir" or name.startswith("mlir."):
                raise ImportError(f"mlir is blocked in this process ({name}): gpu_check run --no-mlir")
            return None

    sys.meta_path.insert(0, Block())


def _time_runs(fn, budget: float, min_runs: int = 3, max_runs: int = 20) -> list[float]:
    times = []
    start = time.perf_counter()
    while len(times) < max_runs and (len(times) < min_runs or time.perf_counter() - start < budget):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def _device_line(target: str) -> str:
    if target == "nvvm":
        try:
            from cuda.bindings import driver

            driver.cuInit(0)
            err, dev = driver.cuDeviceGet(0)
            err, name = driver.cuDeviceGetName(128, dev)
            return name.split(b"\0", 1)[0].decode()
        except Exception as exc:  # only informative
            return f"(no CUDA device: {exc})"
    return platform.processor() or platform.machine()


def run(args) -> int:
    if args.no_mlir:
        block_mlir()
    sys.path.insert(0, str(ROOT))
    import hawk
    from eagle.errors import RuntimeMissing

    bundle = Path(args.bundle)
    manifest = json.loads((bundle / MANIFEST).read_text())
    target = args.target
    if target not in manifest["targets"]:
        print(f"gpu_check run: the bundle was built for {manifest['targets']}, not {target!r}", file=sys.stderr)
        return 2
    only = set(filter(None, (args.only or "").split(",")))
    entries = [e for e in manifest["cases"] if not only or e["case"] in only]
    here = _cpu_flags()
    lacking = sorted(set(manifest.get("cpu_flags", [])) - here) if here else []
    if lacking:
        print(f"gpu_check run: warning: the bundle's host libraries were built on a CPU with {lacking}, which this "
              "CPU lacks: they may stop with an illegal instruction", file=sys.stderr)
    print(f"gpu_check run: target {target} on {_device_line(target)}; Python {platform.python_version()}, "
          f"NumPy {np.__version__}; {len(entries)} checks from {bundle}", flush=True)
    t_start = time.perf_counter()
    deadline = t_start + args.budget
    loaded: dict = {}
    rows = []
    passed = failed = 0
    for e in entries:
        row = {"id": e["id"], "status": "ok", "bitwise": "", "ms": None, "note": ""}
        rows.append(row)
        try:
            if "build_error" in e:
                raise RuntimeError(f"the kernel did not build: {e['build_error']}")
            lk = loaded.get(e["kernel"])
            if lk is None:
                lk = loaded[e["kernel"]] = hawk.load(bundle / "artifacts", e["kernel"], target=target)
            if e["inputs"] is not None:
                planes = _planes(_load_npz(bundle / e["inputs"]))
            else:
                planes = recipe_inputs(e["recipe"], e["n"], e["dtype"], e["seed"])
            expected = _load_npz(bundle / e["expected"])
            got = as_outputs(hawk.run(lk, **planes))
            ok, problems, bitwise = compare(got, expected, e["exact"], e["rtol"])
            row["bitwise"] = "yes" if bitwise else "no"
            if not ok:
                row["status"], row["note"] = "FAIL", "; ".join(problems)
            left = deadline - time.perf_counter()
            if left > 5:
                times = _time_runs(lambda lk=lk, planes=planes: hawk.run(lk, **planes),
                                   min(1.0 if e["bench"] else 0.2, left / 10))
                row["ms"] = 1e3 * float(np.median(times))
                if e["bench"]:
                    nbytes = sum(v.nbytes for v in planes.values() if isinstance(v, np.ndarray))
                    row["note"] = row["note"] or f"{nbytes / (row['ms'] * 1e-3) / 1e9:.1f} GB/s of inputs"
            else:
                row["note"] = row["note"] or "not timed (time budget spent)"
        except RuntimeMissing as exc:  # no driver or device: nothing will run, say so once
            print(f"gpu_check run: {exc}", file=sys.stderr)
            return 3
        except Exception as exc:  # report every case; one failure does not stop the check
            row["status"], row["note"] = "ERROR", f"{type(exc).__name__}: {exc}"[:400]
        if row["status"] == "ok":
            passed += 1
        else:
            failed += 1
        ms = f"{row['ms']:9.3f}" if row["ms"] is not None else "        -"
        print(f"{row['status']:5} {row['id']:48} bitwise={row['bitwise'] or '-':3} {ms} ms  {row['note']}",
              flush=True)
    status, note = _device_planes(bundle, entries, loaded, target)  # scripts/gpu_check_device.py
    if status == "skip":
        print(f"skip  device_planes: {note}", flush=True)
    else:
        rows.append({"id": "device_planes", "status": status, "bitwise": "", "ms": None, "note": note})
        passed, failed = passed + (status == "ok"), failed + (status != "ok")
        print(f"{status:5} device_planes  {note}", flush=True)
    if args.no_mlir:
        leaked = sorted(m for m in sys.modules if m == "mlir" or m.startswith("mlir."))
        if leaked:
            print(f"gpu_check run: MLIR was imported: {leaked[:5]}", file=sys.stderr)
            failed += 1
    wall = time.perf_counter() - t_start
    bad = [r for r in rows if r["status"] != "ok"]
    print(f"\nsummary: target {target}, {len(rows)} checks in {wall:.1f} s; "
          f"{sum(r['bitwise'] == 'yes' for r in rows)} bitwise equal to the host")
    for r in bad:
        print(f"  {r['status']} {r['id']}: {r['note']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"target": target, "rows": rows, "wall_s": wall}, indent=1) + "\n")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def _device_planes(bundle: Path, entries: list, loaded: dict, target: str) -> tuple[str, str]:
    """("ok" / "FAIL" / "skip", note) of the device-planes case (scripts/gpu_check_device.py)."""
    if target == "host":
        return "skip", "target host keeps no device arrays (run --target nvvm, rocdl or spirv)"
    import gpu_check_device

    import hawk

    def kernel(name):
        if name not in loaded:
            loaded[name] = hawk.load(bundle / "artifacts", name, target=target)
        return loaded[name]

    try:
        entry = gpu_check_device.pick(entries, kernel)
        if entry is None:
            return "skip", "no selected case has stored inputs (only benchmarks were selected)"
        planes = _planes(_load_npz(bundle / entry["inputs"]))
        expected = _load_npz(bundle / entry["expected"])
        return gpu_check_device.check(hawk, kernel(entry["kernel"]), entry, planes, expected, target, compare,
                                      as_outputs)
    except Exception as exc:  # reported as a failed check, like any case
        return "FAIL", f"{type(exc).__name__}: {exc}"[:400]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="gpu_check", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)
    b = sub.add_parser("build", help="build the bundle here (needs MLIR)")
    b.add_argument("--out", default=str(DEFAULT_BUNDLE))
    b.add_argument("--targets", default="nvvm", help="GPU targets to build besides the host (comma separated)")
    b.add_argument("--bench-lanes", type=int, default=1 << 24, help="lanes of each benchmark (default 2^24)")
    b.add_argument("--only", help="only these cases (comma separated names)")
    b.add_argument("--no-bench", action="store_true", help="leave the benchmarks out")
    r = sub.add_parser("run", help="run the bundle (NumPy and the target's runtime; no MLIR)")
    r.add_argument("--bundle", default=str(DEFAULT_BUNDLE))
    r.add_argument("--target", default="nvvm")
    r.add_argument("--budget", type=float, default=420.0, help="seconds for the whole run (timing stops first)")
    r.add_argument("--only", help="only these cases (comma separated names)")
    r.add_argument("--no-mlir", action="store_true", help="make importing MLIR fail, as on the GPU machine")
    r.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    return build(args) if args.mode == "build" else run(args)


if __name__ == "__main__":
    sys.exit(main())
