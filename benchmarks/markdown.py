"""docs/benchmarks.md: the run's tables (either mode) and, when the other mode's results are at hand, its ratio
table and a side-by-side of the two modes' ratios."""

from __future__ import annotations

import math
from pathlib import Path

from benchmarks.report import (
    COMMAND,
    SCRATCH_LIMIT,
    _cell,
    bandwidth_line,
    memory_rows,
    mode_of,
    ratio_rows,
    size_label,
    slower,
    targets_rows,
)

MODES = {
    "isolated": "isolated: each implementation in its own fresh process, one at a time; per case, rounds in which "
                "every implementation's worker runs once (order rotated per round); times are medians over rounds "
                "of each worker's median sample; a ratio is the median over rounds of ours / the best peer of that "
                "round",
    "in-process": "in-process: every implementation in the suite's process, one sample of each per round "
                  "(order rotated); peers' thread pools stay alive between calls and can slow whoever runs next",
}


def _md_table(headers, rows) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _link(png: Path, md_path: Path) -> str:
    p, base = Path(png).resolve(), md_path.resolve().parent
    return (p.relative_to(base) if p.is_relative_to(base) else p).as_posix()


def _rounds(m: dict) -> str:
    if m.get("mode") == "isolated":
        return (f"{m['repeats']} samples in each worker, up to {m['rounds']} round(s) of workers per case "
                f"(budget {m['budget_s']:.0f} s)")
    return f"{m['repeats']} samples after warm-up"


def compare_modes(rep: dict, other: dict) -> list[str]:
    """Ours / best peer in both modes, at the largest size both ran, float64."""
    mine = {(c["op"], c["n"], c["dtype"]): c for c in rep["results"]}
    theirs = {(c["op"], c["n"], c["dtype"]): c for c in other["results"]}
    common = [k for k in mine if k in theirs and k[2] == "float64"]
    if not common:
        return []
    big = max(k[1] for k in common)
    a, b = mode_of(rep), mode_of(other)
    rows = []
    for key in (k for k in mine if k in theirs and k[1] == big and k[2] == "float64"):
        for v, r in mine[key]["ratios"].items():
            r2 = theirs[key]["ratios"].get(v)
            fmt = lambda x: "-" if x is None or not math.isfinite(x) else f"{x:.2f}"  # noqa: E731
            rows.append([f"{key[0]} / {v}", fmt(r), fmt(r2)])
    return [f"### Ratios side by side at n = {size_label(big)}, float64", "",
            _md_table(["operation / ours", a, b], rows), ""]


def to_markdown(rep: dict, png: Path | None, md_path: Path, other: dict | None = None,
                other_png: Path | None = None) -> str:
    """The page for `rep` (its mode first); `other`: the other mode's latest results, shown after it."""
    m, results, ex = rep["meta"], rep["results"], rep.get("extras", {})
    parts = ["# Benchmarks: hawk against its peers",
             "",
             f"Mode of this run: **{mode_of(rep)}**. Written by `benchmarks/suite.py` (do not edit by hand: run "
             f"the suite again). Times are medians of {_rounds(m)}, outputs reused where the peer allows "
             "(hawk: `plan.bind(...).launch()`), "
             "every output checked against NumPy before and after timing. The machine is shared and noisy: "
             "read the ratios, not the absolute times.",
             "",
             "## How to run",
             "",
             "```bash",
             f"{COMMAND}                   # set up .venv with the peers, then the default suite (isolated mode)",
             f"{COMMAND} --in-process      # every implementation in one process (the older mode)",
             ".venv/bin/python -m benchmarks.suite --quick   # 1e5 and 1e6 lanes, fewer repeats and rounds",
             ".venv/bin/python -m benchmarks.suite --sizes 1e6 --ops sum,histogram --peers numpy,torch --out /tmp/b",
             "```",
             "",
             "Options and what each operation does: [benchmarks/README.md](../benchmarks/README.md).",
             "",
             "## This run",
             "",
             f"- {m['started']}, {m['machine']}, {m['cores']} cores, eagle threads {m['eagle_threads']}; "
             f"load average {m['loadavg_start']:.2f} at start, {m.get('loadavg_end', float('nan')):.2f} at end; "
             f"suite wall time {m.get('wall_s', 0):.0f} s.",
             f"- mode: {MODES.get(mode_of(rep), mode_of(rep))}"
             + (f"; hawk libraries compiled inside timed workers: {m.get('hawk_builds_in_workers', '?')} (0: all "
                "loaded warm from the disk cache)." if mode_of(rep) == "isolated" else "."),
             f"- {bandwidth_line(m)}.",
             "- versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()),
             ]
    if m["skipped_peers"]:
        parts.append("- skipped: " + "; ".join(f"{k}: {v}" for k, v in m["skipped_peers"].items()))
    parts += ["", "## Ratio ours / best peer", "",
              "Below 1: hawk is faster than every peer; above 1: the fastest peer beats us by that factor.", ""]
    if png is not None:
        parts += [f"![ratios, one panel per size]({_link(png, md_path)})", ""]
    parts += [_md_table(*ratio_rows(results)), ""]
    big = max(c["n"] for c in results) if results else 0
    for dt in ("float64", "float32"):
        cases = [c for c in results if c["n"] == big and c["dtype"] == dt]
        if not cases:
            continue
        parts += [f"## Times at n = {size_label(big)}, {dt} (ms)", ""]
        rows = []
        for c in cases:
            ours = [k for k, v in c["impls"].items() if v["kind"] != "peer"]
            peers = sorted((k for k, v in c["impls"].items() if v["kind"] == "peer"),
                           key=lambda k: c["impls"][k].get("median_s") or math.inf)
            rows.append([c["op"], "; ".join(f"{k} {_cell(c['impls'][k])}" for k in ours),
                         "; ".join(f"{k} {_cell(c['impls'][k])}" for k in peers)])
        parts += [_md_table(["operation", "hawk", "peers (fastest first)"], rows), ""]
    if rep.get("targets"):
        parts += ["## Targets for the host", "",
                  "From issues 5 and 12; throughput targets read at the largest size of this run, float64. Memory: "
                  f"traced allocations beyond the outputs, allowed up to {SCRATCH_LIMIT // 1024} KiB of scratch.", "",
                  _md_table(*targets_rows(rep["targets"])), ""]
    slow = slower(results)
    parts += ["## Where a peer is faster", ""]
    if slow:
        parts += ["Sorted by the ratio of medians; the last column is the ratio of the fastest samples (less "
                  "sensitive to other work on the machine).", "",
                  _md_table(["operation / ours", "dtype", "n", "ours ms", "best peer", "peer ms", "ours / peer",
                             "ours / peer (min)"],
                            [[f"{s['op']} / {s['variant']}", s["dtype"], size_label(s["n"]), f"{s['ours_ms']:.3g}",
                              s["best_peer"], f"{s['peer_ms']:.3g}", f"{s['ratio']:.2f}", f"{s['ratio_of_min']:.2f}"]
                             for s in slow]), ""]
    else:
        parts += ["Nowhere in this run.", ""]
    if "overhead_us" in ex:
        parts += ["## Per-call overhead on one lane (us, median)", "",
                  _md_table(["call", "us"], [[k, f"{v['us']:.2f}"] for k, v in ex["overhead_us"].items()]), ""]
    s = ex.get("startup")
    if s and "error" not in s:
        parts += ["## Startup of a small kernel in a fresh process (ms, median of "
                  f"{s['runs']})", "",
                  _md_table(["measure", "ms"], [
                      ["once per machine: import, eagle's native runtime built, bytecode written, a first "
                       "kernel compiled", f"{s['first_use_ms']:.0f}" if "first_use_ms" in s else "-"],
                      ["cold: eagle.deploy to first result, the kernel not in HAWK_CACHE_DIR",
                       f"{s['cold_first_result_ms']:.0f}"],
                      ["warm: eagle.deploy to first result, from the disk cache", f"{s['warm_first_result_ms']:.1f}"],
                      ["import numpy, hawk, eagle (not in the above)", f"{s['import_ms']:.0f}"],
                      ["a second plan of the same kernel in the same process",
                       f"{s['second_plan_same_process_ms']:.2f}"],
                  ]), ""]
    mem = ex.get("memory")
    if mem:
        parts += [f"## Peak allocation of one run (n = {mem['n']:,}, {mem['dtype']}; MB, tracemalloc)", "",
                  "Traced Python and NumPy allocations above what was held before the call. A bound launch "
                  "reuses its buffers; `Plan.run` allocates its outputs (and cells) per call.", "",
                  _md_table(*memory_rows(mem)), ""]
    if other is not None:
        om = other["meta"]
        parts += [f"## The other mode: {mode_of(other)} (its latest run, {om['started']})", "",
                  f"Mode: {MODES.get(mode_of(other), mode_of(other))}. Load average {om['loadavg_start']:.2f} at "
                  f"start; {bandwidth_line(om)}.", ""]
        if other_png is not None:
            parts += [f"![{mode_of(other)} ratios]({_link(other_png, md_path)})", ""]
        parts += [_md_table(*ratio_rows(other["results"])), ""]
        parts += compare_modes(rep, other)
    return "\n".join(parts)
