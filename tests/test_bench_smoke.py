"""The benchmark suite (benchmarks/) cannot rot: a tiny run of it, with whichever peers import here (NumPy always),
must finish, check every hawk result against NumPy and write a complete results file. A wrong hawk result must
fail the run. The isolated mode really runs each implementation in its own process and still checks outputs."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is not an installed package: import it from the checkout
    sys.path.insert(0, str(ROOT))

from benchmarks import suite  # noqa: E402
from benchmarks.data import Data, ordered_sum  # noqa: E402
from benchmarks.ops import OP_NAMES, OPS, Impl, Mismatch, check_output  # noqa: E402

pytestmark = pytest.mark.slow  # (pyproject.toml's markers: -m 'not slow' leaves it out)

TINY = ["--sizes", "2048", "--repeats", "1", "--min-time", "0"]


def test_suite_smoke(tmp_path):
    out = tmp_path / "bench"
    r = subprocess.run([sys.executable, "-m", "benchmarks.suite", "--in-process", *TINY, "--out", str(out),
                        "--startup-runs", "1", "--memory-size", "2048"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rep = json.loads((out / "results-in-process.json").read_text())
    assert rep["meta"]["mode"] == "in-process"
    assert "Mode of this run: **in-process**" in (out / "benchmarks.md").read_text()
    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "ratios-in-process.png").stat().st_size > 0

    # every operation at every dtype, each with hawk checked against NumPy and a NumPy peer timed
    seen = {(c["op"], c["dtype"]) for c in rep["results"]}
    assert seen == {(op, dt) for op in OP_NAMES for dt in ("float64", "float32")}
    assert rep["failures"] == []
    for c in rep["results"]:
        ours = {k: v for k, v in c["impls"].items() if v["kind"] == "ours"}
        assert ours, c["op"]
        for name, v in c["impls"].items():
            assert v["checked"] and v["ok"], (c["op"], c["dtype"], name, v.get("error"))
            assert math.isfinite(v["median_s"]) and v["median_s"] > 0
        assert any(v["peer"] == "numpy" for v in c["impls"].values())
        assert c["best_peer"] is not None
        for k, ratio in c["ratios"].items():
            assert ratio is not None and math.isfinite(ratio) and ratio > 0, (c["op"], k)

    # peers that did not import are named with a reason, the others ran
    skipped = rep["meta"]["skipped_peers"]
    for name in ("jax", "torch", "numba", "warp"):
        assert (name in rep["meta"]["peers"]) != (name in skipped)
        if name in skipped:
            assert f"peer {name} skipped" in r.stderr

    ex = rep["extras"]
    assert ex["overhead_us"]["hawk bound launch (map: x + 1)"]["us"] > 0
    st = ex["startup"]
    assert st["ok"] and st["cold_first_result_ms"] > 0 and st["cold_large_result_ms"] > 0
    assert ex["memory"]["cases"]


def _wrong_run(tmp_path, monkeypatch, impl: Impl) -> tuple[int, dict]:
    op = next(o for o in OPS if o.name == "sum")
    monkeypatch.setattr(op, "ours", lambda d: {"hawk auto": impl})
    code = suite.main(["--in-process", *TINY, "--ops", "sum", "--dtypes", "float64", "--peers", "numpy",
                       "--no-extras", "--out", str(tmp_path)])
    return code, json.loads((tmp_path / "results-in-process.json").read_text())


def test_wrong_hawk_result_fails_the_run(tmp_path, monkeypatch):
    code, rep = _wrong_run(tmp_path, monkeypatch, Impl(lambda: np.array([1.0]), kind="ours"))
    assert code == 1
    rec = rep["results"][0]["impls"]["hawk auto"]
    assert rec["checked"] and not rec["ok"] and "reference" in rec["error"]
    assert rep["failures"]


def test_result_wrong_only_after_reuse_fails(tmp_path, monkeypatch):
    # right at the first call, then a reused buffer that is never reset: the check after timing catches it
    d = Data(np.float64, 2048)
    acc = np.zeros(1)

    def stale():
        acc[0] += np.sum(d.x)
        return acc

    code, rep = _wrong_run(tmp_path, monkeypatch, Impl(stale, kind="ours"))
    assert code == 1 and not rep["results"][0]["impls"]["hawk auto"]["ok"]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ordered_check_is_bit_exact(dtype):
    op = next(o for o in OPS if o.name == "sum")
    d = Data(dtype, 5000)
    impl = Impl(lambda: None, kind="ours", check="ordered")
    want = ordered_sum(d.x)
    check_output(op, d, "ordered", impl, np.array([want]))
    with pytest.raises(Mismatch, match="not the exact sum's bits"):
        check_output(op, d, "ordered", impl, np.array([np.nextafter(want, np.inf)]))


# ---- the isolated mode ------------------------------------------------------------------------------------
WRONG_PLUGIN = """
import numpy as np
from benchmarks.ops import Impl

NAME = "wrong"


def impls(op, d):
    if op != "max":
        return {}
    return {"wrong peer": Impl(lambda: np.array([d.x.max() + 1.0])),
            "hawk wrong": Impl(lambda: np.array([d.x.min()]), kind="ours")}
"""


def _worker(*args) -> tuple[int, dict | None]:
    from benchmarks.worker import MARK

    r = subprocess.run([sys.executable, "-m", "benchmarks.worker", *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith(MARK)]
    return r.returncode, (json.loads(lines[-1][len(MARK):]) if lines else None)


def test_isolated_mode_runs_each_implementation_in_its_own_checked_process(tmp_path):
    plugin = tmp_path / "wrong_impls.py"
    plugin.write_text(WRONG_PLUGIN)
    out = tmp_path / "bench"
    r = subprocess.run([sys.executable, "-m", "benchmarks.suite", "--isolated", "--sizes", "2048", "--repeats", "2",
                        "--min-time", "0", "--rounds", "2", "--ops", "max", "--dtypes", "float64", "--peers", "numpy",
                        "--no-extras", "--plugin", str(plugin), "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    rep = json.loads((out / "results-isolated.json").read_text())
    # the wrong "ours" fails the run, and is the only failure
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert len(rep["failures"]) == 1 and rep["failures"][0].startswith("max float64 n=2048 hawk wrong:")
    (case,) = rep["results"]
    impls = case["impls"]
    assert set(impls) == {"hawk", "numpy", "wrong peer", "hawk wrong"}
    for name in ("wrong peer", "hawk wrong"):  # checked in their workers, reported failed, dropped after round 1
        assert impls[name]["checked"] and not impls[name]["ok"], impls[name]
        assert "differs from NumPy" in impls[name]["error"] and len(impls[name]["pids"]) == 1
    # the right ones: a fresh process per implementation and round, none of them this test's own
    assert case["rounds"] == 2
    pids = [p for name in ("hawk", "numpy") for p in impls[name]["pids"]]
    assert len(pids) == 4 and len(set(pids)) == 4 and os.getpid() not in pids
    for name in ("hawk", "numpy"):
        v = impls[name]
        assert v["ok"] and v["checked"] and len(v["rounds_s"]) == 2 and v["median_s"] > 0
    assert impls["hawk"]["hawk_builds"] == 0  # compiled once by the listing worker, loaded warm from the disk cache
    assert case["best_peer"] == "numpy"  # the wrong peer is out of the ratios
    assert math.isfinite(case["ratios"]["hawk"]) and case["ratios"]["hawk"] > 0
    assert case["ratios"]["hawk wrong"] is None  # NaN, written as null
    bw = rep["meta"]["read_bandwidth"]
    assert bw["median_gbs"] > 0 and bw["method"]
    md = (out / "benchmarks.md").read_text()
    assert "Mode of this run: **isolated**" in md and "read bandwidth" in md


def test_worker_reports_a_wrong_output(tmp_path):
    plugin = tmp_path / "wrong_impls.py"
    plugin.write_text(WRONG_PLUGIN)
    code, res = _worker("--op", "max", "--size", "512", "--dtype", "float32", "--impl", "wrong peer",
                        "--source", "plugin", "--plugin", str(plugin), "--repeats", "1", "--min-time", "0")
    assert code == 0 and res is not None
    assert res["checked"] and not res["ok"] and "differs from NumPy" in res["error"]
    assert res["pid"] != os.getpid()
    code, res = _worker("--op", "max", "--size", "512", "--dtype", "float32", "--impl", "no such thing")
    assert code == 2 and res is None


def test_isolated_ratio_is_the_median_of_per_round_ratios():
    from benchmarks import isolated

    def rec(kind, rounds):
        return {"kind": kind, "ok": True, "rounds_s": rounds, "median_s": sorted(rounds)[len(rounds) // 2]}

    # round 2 has a burst on the peers only: per-round ratios 1, 0.25, 1 -> median 1; ratio of medians 1 too,
    # but with the best peer of each round taken (a: rounds 1 and 3, b: round 2)
    case = {"impls": {"hawk": rec("ours", [2.0, 2.0, 2.0]), "a": rec("peer", [2.0, 9.0, 2.0]),
                      "b": rec("peer", [3.0, 8.0, 3.0]), "info": rec("info", [1.0, 1.0, 1.0])}}
    isolated.ratios(case)
    assert case["best_peer"] == "a"
    assert case["ratios"] == {"hawk": 1.0} and case["ratios_of_medians"] == {"hawk": 1.0}
    case["impls"]["hawk"]["rounds_s"] = [1.0, 4.0, 3.0]  # per round 0.5, 0.5, 1.5 -> 0.5
    isolated.ratios(case)
    assert case["ratios"]["hawk"] == 0.5


def test_bandwidth_target_row():
    from benchmarks import report

    n = 10_000_000
    case = {"op": "sum", "dtype": "float64", "n": n, "best_peer": "numpy", "ratios": {"hawk auto": 1.0},
            "impls": {"hawk auto": {"kind": "ours", "ok": True, "median_s": 8.0 * n / 40e9},
                      "numpy": {"kind": "peer", "ok": True, "median_s": 8.0 * n / 40e9}}}
    rep = {"meta": {"read_bandwidth": {"median_gbs": 50.0}}, "results": [case], "extras": {}}
    (row,) = [t for t in report.targets(rep) if "bandwidth" in t["target"]]
    assert row["measured"] == pytest.approx(0.8) and row["limit"] == 0.85 and not row["met"]


def test_jax_overhead_runs_and_checks_its_calls(tmp_path):
    """benchmarks/jax_overhead.py (#15's per-call target inside jax.jit): a tiny run checks every call's result
    and writes a row per implementation with its overhead over the jax.numpy baseline."""
    pytest.importorskip("jax")
    out = tmp_path / "jax.json"
    r = subprocess.run([sys.executable, "-m", "benchmarks.jax_overhead", "--calls", "20", "--rounds", "2",
                        "--no-warp", "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    got = json.loads(out.read_text())
    for name in ("tiny_map", "tiny_sum"):
        rows = got["kernels"][name]["rows"]
        assert set(rows) == {"jax.numpy in jax.jit", "eagle.jax in jax.jit", "bound launch (NumPy)"}, rows
        assert rows["jax.numpy in jax.jit"]["over_us"] == 0.0
        assert all(r["median_us"] > 0 for r in rows.values())
    assert "target < 5 us" in r.stdout
