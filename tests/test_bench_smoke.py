"""The benchmark suite (benchmarks/) cannot rot: a tiny run of it, with whichever peers import here (NumPy always),
must finish, check every hawk result against NumPy and write a complete results.json. A wrong hawk result must
fail the run."""

from __future__ import annotations

import importlib.util
import json
import math
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

TINY = ["--sizes", "2048", "--repeats", "1", "--min-time", "0"]


def test_suite_smoke(tmp_path):
    out = tmp_path / "bench"
    r = subprocess.run([sys.executable, "-m", "benchmarks.suite", *TINY, "--out", str(out), "--startup-runs", "1",
                        "--memory-size", "2048"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rep = json.loads((out / "results.json").read_text())
    assert (out / "benchmarks.md").read_text().startswith("# Benchmarks")
    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "ratios.png").stat().st_size > 0

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
    assert ex["startup"]["ok"] and ex["startup"]["cold_first_result_ms"] > 0
    assert ex["memory"]["cases"]


def _wrong_run(tmp_path, monkeypatch, impl: Impl) -> tuple[int, dict]:
    op = next(o for o in OPS if o.name == "sum")
    monkeypatch.setattr(op, "ours", lambda d: {"hawk auto": impl})
    code = suite.main([*TINY, "--ops", "sum", "--dtypes", "float64", "--peers", "numpy", "--no-extras",
                       "--out", str(tmp_path)])
    return code, json.loads((tmp_path / "results.json").read_text())


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
    with pytest.raises(Mismatch, match="ordered tree"):
        check_output(op, d, "ordered", impl, np.array([np.nextafter(want, np.inf)]))
