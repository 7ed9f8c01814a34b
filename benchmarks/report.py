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
        return "skipped" if rec.get("skipped") else "WRONG" if rec.get("checked") else "failed"
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


BANDWIDTH_SHARE = 0.85  # issue 12: the host sum at 10^7 lanes reads at >= 85% of the measured read bandwidth


def targets(rep: dict) -> list[dict]:
    """Issues 5 and 12's targets for the host, each with what this run measured and whether it is met.

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
            bw = rep["meta"].get("read_bandwidth", {}).get("median_gbs")
            if bw:
                t(f"sum auto read rate / the machine's read bandwidth ({bw:.3g} GB/s, all threads), {lab}", gbs / bw,
                  BANDWIDTH_SHARE, "of bandwidth", gbs / bw >= BANDWIDTH_SHARE)
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
    for k, lim in (("hawk Plan.run (map: x + 1)", 10.0), ("hawk bound launch (map: x + 1)", 2.0)):
        if k in oh:
            out.append({"target": f"{k.replace('hawk ', '')} on 1 lane", "measured": oh[k]["us"], "limit": lim,
                        "unit": "us", "met": oh[k]["us"] < lim})
    st = ex.get("startup", {})
    if "cold_first_result_ms" in st:
        for k, name, lim in (("cold_first_result_ms", "cold compile of a small kernel", 300.0),
                             ("warm_first_result_ms", "warm start from the disk cache", 20.0),
                             ("cold_large_result_ms", "cold compile of ordered float32 vector and matrix sums "
                              "(a guard: it once took 77 s)", 5000.0)):
            if k in st:
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
        print("\n== targets (issues 5 and 12)")
        print(_table(*targets_rows(tg)).replace("**", ""))
    m = rep["meta"]
    print(f"\nmode: {mode_of(rep)}; {bandwidth_line(m)}")
    print(f"suite wall time {m['wall_s']:.0f} s; load average {m['loadavg_start']:.2f} at start, "
          f"{m['loadavg_end']:.2f} at end")
    if m["skipped_peers"]:
        print("skipped: " + "; ".join(f"{k} ({v})" for k, v in m["skipped_peers"].items()))


def bandwidth_line(meta: dict) -> str:
    bw = meta.get("read_bandwidth")
    if not bw:
        return "read bandwidth not measured"
    if "error" in bw:
        return f"read bandwidth not measured ({bw['error']})"
    return (f"read bandwidth {bw['median_gbs']:.3g} GB/s (median; fastest sample {bw['best_gbs']:.3g}) over "
            f"{bw['bytes'] / 1e6:.3g} MB: {bw['method']}")


def print_extras(ex: dict) -> None:
    if "overhead_us" in ex:
        print("\n== per-call overhead on 1 lane (us, median)")
        print(_table(["call", "us"], [[k, f"{v['us']:.2f}"] for k, v in ex["overhead_us"].items()]))
    s = ex.get("startup", {})
    if "error" in s:
        print(f"\n== startup: {s['error']}")
    elif s:
        print("\n== startup of a small kernel in a fresh process (ms, median of "
              f"{s['runs']}): once per machine {s.get('first_use_ms', float('nan')):.0f}, cold compile "
              f"{s['cold_first_result_ms']:.0f}, warm from the disk cache "
              f"{s['warm_first_result_ms']:.1f}; import {s['import_ms']:.0f}; second plan in the same process "
              f"{s['second_plan_same_process_ms']:.2f}")
        if "cold_large_result_ms" in s:
            print(f"   ordered float32 vector and matrix sums: cold compile {s['cold_large_result_ms']:.0f}, warm "
                  f"{s['warm_large_result_ms']:.1f}")
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


def mode_of(rep: dict) -> str:
    return rep["meta"].get("mode", "in-process")  # runs from before the isolated mode had no "mode"


def write(rep: dict, out: Path, markdown: Path) -> None:
    """results-<mode>.json and ratios-<mode>.png in `out`; the markdown page, with the other mode's tables too
    when an earlier run of it left its results in `out`."""
    from benchmarks.markdown import to_markdown

    mode = mode_of(rep)
    other_mode = "in-process" if mode == "isolated" else "isolated"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"results-{mode}.json").write_text(json.dumps(_json_safe(rep), indent=1) + "\n")
    png = out / f"ratios-{mode}.png"
    try:
        plot(rep, png)
    except Exception as e:  # matplotlib absent: the JSON and the markdown still come out
        print(f"no plot ({type(e).__name__}: {e})")
        png = None
    other, other_png = None, out / f"ratios-{other_mode}.png"
    if (out / f"results-{other_mode}.json").is_file():
        try:
            other = json.loads((out / f"results-{other_mode}.json").read_text())
        except (OSError, ValueError) as e:
            print(f"the {other_mode} results in {out} are unreadable ({e}): left out of the page")
    markdown.parent.mkdir(parents=True, exist_ok=True)
    markdown.write_text(to_markdown(rep, png, markdown, other, other_png if other_png.is_file() else None))


def plot(rep: dict, path: Path) -> None:
    """One panel per size: for each operation and variant of ours, a bar per dtype of ours / best peer."""
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
    fig, axes = plt.subplots(len(sizes), 1, figsize=(max(8, 0.55 * len(labels) + 2), 4.2 * len(sizes)),
                             squeeze=False)
    width = 0.8 / max(1, len(dtypes))
    for ax, n in zip(axes[:, 0], sizes, strict=True):
        x = np.arange(len(labels))
        for i, dt in enumerate(dtypes):
            vals = []
            for op, v in labels:
                c = next((c for c in results if c["op"] == op and c["n"] == n and c["dtype"] == dt), None)
                r = c["ratios"].get(v) if c else None
                vals.append(r if r is not None and math.isfinite(r) else np.nan)
            ax.bar(x + (i - (len(dtypes) - 1) / 2) * width, vals, width, label=dt)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ticks = [op if v == "hawk" else f"{op}\n{v.replace('hawk', '').strip()}" for op, v in labels]
        ax.set_xticks(x, ticks, fontsize=7, rotation=60, ha="right")
        ax.set_ylabel("ours / best peer (log)")
        ax.set_title(f"n = {size_label(n)} ({mode_of(rep)} mode): time of hawk / time of the fastest peer "
                     "(below 1: hawk is faster)", fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
