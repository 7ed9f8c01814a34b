"""Printing and writing the suite's results: console tables, results.json, ratios.png and the markdown page."""

from __future__ import annotations

import json
import math
from pathlib import Path

from benchmarks.ops import OPS

TITLES = {op.name: op.title for op in OPS}
COMMAND = "bash scripts/bench.sh"


def fmt_ms(s) -> str:
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "-"
    ms = s * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def fmt_ratio(r) -> str:
    return "-" if r is None or math.isnan(r) else f"{r:.2f}"


def size_label(n: int) -> str:
    e = math.log10(n) if n > 0 else 0
    return f"1e{int(e)}" if n > 0 and abs(e - round(e)) < 1e-9 else f"{n:,}"


def _cell(rec) -> str:
    if rec is None:
        return ""
    if not rec["ok"]:
        return "WRONG" if rec.get("checked") else "failed"
    return fmt_ms(rec["median_s"])


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def case_table(cases: list[dict]) -> str:
    """One operation at one size: a row per implementation, a column (ms) per dtype; then the ratios."""
    names: list[str] = []
    for c in cases:
        for k in c["impls"]:
            if k not in names:
                names.append(k)
    names.sort(key=lambda k: 0 if k.startswith(("hawk", "eagle")) else 1)
    headers = ["implementation", *(f"{c['dtype']} ms" for c in cases)]
    rows = [[k, *(_cell(c["impls"].get(k)) for c in cases)] for k in names]
    ours = [k for k in names if any(c["impls"].get(k, {}).get("kind") == "ours" for c in cases)]
    for k in ours:
        rows.append([f"ratio {k} / best peer", *(
            f"{fmt_ratio(c['ratios'].get(k))} ({c['best_peer'] or 'none'})" for c in cases)])
    return _table(headers, rows)


def print_size(results: list[dict], n: int) -> None:
    for op in OPS:
        cases = [c for c in results if c["n"] == n and c["op"] == op.name]
        if cases:
            lanes = cases[0]["lanes"]
            extra = f" ({lanes:,} lanes)" if lanes != n else ""
            print(f"\n== {op.title}: n = {size_label(n)}{extra}")
            print(case_table(cases))
            for c in cases:
                for k, v in c["impls"].items():
                    if not v["ok"]:
                        print(f"   {c['dtype']} {k}: {v.get('error')}")


def ratio_rows(results: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Rows: operation / our variant; columns: size x dtype; cells: ours / best peer."""
    cols = []
    for c in results:
        key = (c["n"], c["dtype"])
        if key not in cols:
            cols.append(key)
    cols.sort(key=lambda k: (k[0], k[1] != "float64"))
    headers = ["operation / ours", *(f"{size_label(n)} {dt.replace('float', 'f')}" for n, dt in cols)]
    rows = []
    for op in OPS:
        variants = []
        for c in results:
            if c["op"] == op.name:
                variants += [k for k in c["ratios"] if k not in variants]
        for v in variants:
            row = [f"{op.name} / {v}"]
            for n, dt in cols:
                c = next((c for c in results if c["op"] == op.name and c["n"] == n and c["dtype"] == dt), None)
                row.append(fmt_ratio(c["ratios"].get(v)) if c else "")
            rows.append(row)
    return headers, rows


def slower(results: list[dict]) -> list[dict]:
    """Every (operation, variant, dtype, size) where ours is slower than the best peer."""
    out = []
    for c in results:
        for k, r in c["ratios"].items():
            if r is not None and not math.isnan(r) and r > 1.0:
                ours, peer = c["impls"][k], c["impls"][c["best_peer"]]
                out.append({"op": c["op"], "variant": k, "dtype": c["dtype"], "n": c["n"], "ratio": r,
                            "best_peer": c["best_peer"], "ours_ms": ours["median_s"] * 1e3,
                            "peer_ms": peer["median_s"] * 1e3, "ratio_of_min": ours["min_s"] / peer["min_s"]})
    return sorted(out, key=lambda s: -s["ratio"])


SCRATCH_LIMIT = 256 * 1024  # bytes a run may allocate beyond its outputs (O(threads x cells) scratch)


def _case(results, op, n, dt="float64"):
    return next((c for c in results if c["op"] == op and c["n"] == n and c["dtype"] == dt), None)


def targets(rep: dict) -> list[dict]:
    """Issue 5's targets for the host, each with what this run measured and whether it is met.

    Throughput targets are read at the largest size of the run (10^7 lanes by default), float64."""
    results, ex, out = rep["results"], rep.get("extras", {}), []
    if results:
        n = max(c["n"] for c in results)
        lab = f"n = {size_label(n)}, f64"

        def t(name, value, limit, unit, met):
            out.append({"target": name, "measured": value, "limit": limit, "unit": unit, "met": met})

        def ms(c, k):
            v = c["impls"].get(k, {}) if c else {}
            return v.get("median_s") if v.get("ok") else None

        s = _case(results, "sum", n)
        auto = ms(s, "hawk auto")
        if s and auto and s["best_peer"]:
            r = s["ratios"]["hawk auto"]
            t(f"sum auto / best peer ({s['best_peer']}), {lab}", r, 1.1, "x", r <= 1.1)
            rates = [8.0 * c["n"] / v["median_s"] / 1e9 for c in results
                     if c["n"] == n and c["dtype"] == "float64" and c["op"] in ("sum", "mean", "max", "masked_sum")
                     for v in c["impls"].values() if v.get("ok")]
            gbs, best = 8.0 * n / auto / 1e9, max(rates)
            t(f"sum auto read rate vs the fastest read seen in this run ({best:.1f} GB/s), {lab}", gbs / best, 0.8,
              "of best", gbs / best >= 0.8)
            for k, lim in (("hawk compensated", 1.3), ("hawk ordered", 1.5)):
                v = ms(s, k)
                if v:
                    t(f"sum {k.split()[1]} / sum auto, {lab}", v / auto, lim, "x", v / auto <= lim)
        for op in ("scatter_random", "scatter_sorted", "histogram"):
            c = _case(results, op, n)
            for k, r in (c["ratios"].items() if c else ()):
                if r is not None and not math.isnan(r):
                    t(f"{op} / {k} faster than the best peer ({c['best_peer']}), {lab}", r, 1.0, "x", r < 1.0)
    oh = ex.get("overhead_us", {})
    for k, lim in (("hawk Plan.run (map: x + 1)", 20.0), ("hawk bound launch (map: x + 1)", 5.0)):
        if k in oh:
            out.append({"target": f"{k.replace('hawk ', '')} on 1 lane", "measured": oh[k]["us"], "limit": lim,
                        "unit": "us", "met": oh[k]["us"] < lim})
    st = ex.get("startup", {})
    if "cold_first_result_ms" in st:
        for k, name, lim in (("cold_first_result_ms", "cold compile of a small kernel", 300.0),
                             ("warm_first_result_ms", "warm start from the disk cache", 20.0)):
            out.append({"target": name, "measured": st[k], "limit": lim, "unit": "ms", "met": st[k] < lim})
    mem = ex.get("memory", {}).get("cases", {})
    if mem:
        extra = max(v["plan_run_peak_bytes"] - v["output_bytes"] for v in mem.values())
        bound = max(v["bound_launch_peak_bytes"] for v in mem.values())
        out.append({"target": "Plan.run: bytes allocated beyond its outputs (worst case)", "measured": extra / 1024,
                    "limit": SCRATCH_LIMIT / 1024, "unit": "KiB", "met": extra <= SCRATCH_LIMIT})
        out.append({"target": "bound launch: bytes allocated (worst case)", "measured": bound / 1024,
                    "limit": SCRATCH_LIMIT / 1024, "unit": "KiB", "met": bound <= SCRATCH_LIMIT})
    return out


def targets_rows(tg: list[dict]) -> tuple[list[str], list[list[str]]]:
    return (["target", "measured", "limit", "met"],
            [[t["target"], f"{t['measured']:.3g} {t['unit']}", f"{t['limit']:g} {t['unit']}",
              "yes" if t["met"] else "**no**"] for t in tg])


def print_summary(rep: dict) -> None:
    headers, rows = ratio_rows(rep["results"])
    print("\n== ratio ours / best peer (below 1: we are faster)")
    print(_table(headers, rows))
    tg = rep.get("targets") or []
    if tg:
        print("\n== targets (issue 5)")
        print(_table(*targets_rows(tg)).replace("**", ""))
    m = rep["meta"]
    print(f"\nsuite wall time {m['wall_s']:.0f} s; load average {m['loadavg_start']:.2f} at start, "
          f"{m['loadavg_end']:.2f} at end")
    if m["skipped_peers"]:
        print("skipped: " + "; ".join(f"{k} ({v})" for k, v in m["skipped_peers"].items()))


def print_extras(ex: dict) -> None:
    if "overhead_us" in ex:
        print("\n== per-call overhead on 1 lane (us, median)")
        print(_table(["call", "us"], [[k, f"{v['us']:.2f}"] for k, v in ex["overhead_us"].items()]))
    s = ex.get("startup", {})
    if "error" in s:
        print(f"\n== startup: {s['error']}")
    elif s:
        print("\n== startup of a small kernel in a fresh process (ms, median of "
              f"{s['runs']}): cold compile {s['cold_first_result_ms']:.0f}, warm from the disk cache "
              f"{s['warm_first_result_ms']:.1f}; import {s['import_ms']:.0f}; second plan in the same process "
              f"{s['second_plan_same_process_ms']:.2f}")
    mem = ex.get("memory")
    if mem:
        print(f"\n== peak allocation of one run (n = {mem['n']:,}, {mem['dtype']}; MB)")
        print(_table(*memory_rows(mem)))


def memory_rows(mem: dict) -> tuple[list[str], list[list[str]]]:
    mb = lambda b: f"{b / 1e6:.3f}"  # noqa: E731
    headers = ["operation / ours", "inputs", "outputs", "Plan.run peak", "bound launch peak", "NumPy peak"]
    rows = [[k, mb(v["input_bytes"]), mb(v["output_bytes"]), mb(v["plan_run_peak_bytes"]),
             mb(v["bound_launch_peak_bytes"]), mb(v["numpy_peak_bytes"])] for k, v in mem["cases"].items()]
    return headers, rows


# ---- files ------------------------------------------------------------------------------------------------
def _json_safe(o):
    """NaN/inf as null; floats to 4 significant digits (timings are not more precise than that here)."""
    if isinstance(o, float):
        return float(f"{o:.4g}") if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _json_safe(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_json_safe(v) for v in o]
    return o


def write(rep: dict, out: Path, markdown: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(_json_safe(rep), indent=1) + "\n")
    png = out / "ratios.png"
    try:
        plot(rep, png)
    except Exception as e:  # matplotlib absent: the JSON and the markdown still come out
        print(f"no plot ({type(e).__name__}: {e})")
        png = None
    markdown.parent.mkdir(parents=True, exist_ok=True)
    markdown.write_text(to_markdown(rep, png, markdown))


def plot(rep: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    results = rep["results"]
    dtypes = [dt for dt in ("float64", "float32") if any(c["dtype"] == dt for c in results)]
    sizes = sorted({c["n"] for c in results})
    labels = []
    for op in OPS:
        for c in results:
            if c["op"] == op.name:
                labels += [(op.name, v) for v in c["ratios"] if (op.name, v) not in labels]
    fig, axes = plt.subplots(len(dtypes), 1, figsize=(max(8, 0.55 * len(labels) + 2), 4.2 * len(dtypes)),
                             squeeze=False)
    width = 0.8 / max(1, len(sizes))
    for ax, dt in zip(axes[:, 0], dtypes, strict=True):
        x = np.arange(len(labels))
        for i, n in enumerate(sizes):
            vals = []
            for op, v in labels:
                c = next((c for c in results if c["op"] == op and c["n"] == n and c["dtype"] == dt), None)
                r = c["ratios"].get(v) if c else None
                vals.append(r if r is not None and math.isfinite(r) else np.nan)
            ax.bar(x + (i - (len(sizes) - 1) / 2) * width, vals, width, label=f"n = {size_label(n)}")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ticks = [op if v == "hawk" else f"{op}\n{v.replace('hawk', '').strip()}" for op, v in labels]
        ax.set_xticks(x, ticks, fontsize=7, rotation=60, ha="right")
        ax.set_ylabel("ours / best peer (log)")
        ax.set_title(f"{dt}: time of hawk / time of the fastest peer (below 1: hawk is faster)", fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _md_table(headers, rows) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def to_markdown(rep: dict, png: Path | None, md_path: Path) -> str:
    m, results, ex = rep["meta"], rep["results"], rep.get("extras", {})
    parts = ["# Benchmarks: hawk against its peers",
             "",
             "Written by `benchmarks/suite.py` (do not edit by hand: run the suite again). Times are medians of "
             f"{m['repeats']} samples after warm-up, outputs reused where the peer allows "
             "(hawk: `plan.bind(...).launch()`), "
             "every output checked against NumPy before and after timing. The machine is shared and noisy: "
             "read the ratios, not the absolute times.",
             "",
             "## How to run",
             "",
             "```bash",
             f"{COMMAND}                        # set up .venv with the peers, then the default suite (< 10 min here)",
             ".venv/bin/python -m benchmarks.suite --quick   # 1e5 and 1e6 lanes, 3 repeats",
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
             "- versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()),
             ]
    if m["skipped_peers"]:
        parts.append("- skipped: " + "; ".join(f"{k}: {v}" for k, v in m["skipped_peers"].items()))
    parts += ["", "## Ratio ours / best peer", "",
              "Below 1: hawk is faster than every peer; above 1: the fastest peer beats us by that factor.", ""]
    if png is not None:
        rel = Path(png).resolve().relative_to(md_path.resolve().parent) if Path(png).resolve().is_relative_to(
            md_path.resolve().parent) else Path(png).resolve()
        parts += [f"![ratios]({rel.as_posix()})", ""]
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
                  "From issue 5; throughput targets read at the largest size of this run, float64. Memory: traced "
                  f"allocations beyond the outputs, allowed up to {SCRATCH_LIMIT // 1024} KiB of scratch.", "",
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
                      ["cold: eagle.deploy to first result, empty HAWK_CACHE_DIR", f"{s['cold_first_result_ms']:.0f}"],
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
    return "\n".join(parts)
