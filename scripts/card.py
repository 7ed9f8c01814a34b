"""The per-target accuracy card: how far each sum policy lands from the exact sum, on hard inputs.

    .venv/bin/python scripts/card.py [--quick] [--targets host,spirv] [--out docs/card.md]

For each target (by default "host" and "spirv"; spirv runs on any Vulkan device, Mesa's lavapipe where there is no
GPU) it measures, for every sum policy, k = |result - fsum(terms)| / (eps * sum|terms|), where fsum is Python's
exactly rounded math.fsum of the terms as the kernel saw them (rounded to the run's dtype) and eps is that dtype's
machine epsilon (2**-52 for float64, 2**-23 for float32). "ordered" promises the correctly rounded sum, so its
entries also carry the error in ulps of the exact sum (a Fraction, float32 rounded straight from it) and whether
every result was bit for bit the exact sum rounded once. A second table runs adversarial sets (cancellation, a
huge dynamic range, subnormals) through the policies and reports the error in ulps. It keeps the worst k over
several input families for each (operation, policy, dtype, run length) and writes a markdown card with a table
per target plus a JSON copy next to it (docs/card.md and docs/card.json by default). Every target sees the very
same terms. A target that cannot run here is listed with the reason; a run the target refuses (a documented
limit, such as lavapipe's loop budget) is listed as refused, never as a k. `measure(quick, targets)` does the
measuring and returns the card as a dict; tests/test_card.py imports this file and calls it.
"""

import argparse
import json
import math
import os
import platform
import re
import sys
import time
from pathlib import Path

import numpy as np

import eagle
import hawk
from hawk import Index, Mutable, Scalar, Sorted

sys.path.insert(0, str(Path(__file__).resolve().parent))  # card_inputs, also when this file is loaded by path
from card_inputs import ADVERSARIAL, ADVERSARIAL_LENGTH, FAMILIES, KEYS, LAYOUTS, Exact, eps_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LENGTHS = (100, 10_000, 1_000_000)
QUICK_LENGTHS = (100, 10_000)
DTYPES = ("float64", "float32")
SEED = 20_240

# ---------------------------------------------------------------------------------------------- kernels


@hawk.kernel
def card_sum_auto(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="auto")


@hawk.kernel
def card_sum_compensated(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="compensated")


@hawk.kernel
def card_sum_ordered(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="ordered")


@hawk.kernel
def card_sc_plain(key: Index, x: Scalar, acc: Mutable["slot":KEYS]):  # noqa: F821
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def card_sc_auto(key: Index, x: Scalar, acc: Mutable["slot":KEYS]):  # noqa: F821
    hawk.scatter(acc, policy="auto")[key] += x


@hawk.kernel
def card_sc_compensated(key: Index, x: Scalar, acc: Mutable["slot":KEYS]):  # noqa: F821
    hawk.scatter(acc, policy="compensated")[key] += x


@hawk.kernel
def card_sc_ordered(key: Index, x: Scalar, acc: Mutable["slot":KEYS]):  # noqa: F821
    hawk.scatter(acc, policy="ordered")[key] += x


@hawk.kernel
def card_ss_plain(key: Sorted[Index], x: Scalar, acc: Mutable["slot":KEYS]):  # noqa: F821
    hawk.scatter(acc, policy="plain")[key] += x


@hawk.kernel
def card_ss_auto(key: Sorted[Index], x: Scalar, acc: Mutable["slot":KEYS]):  # noqa: F821
    hawk.scatter(acc, policy="auto")[key] += x


@hawk.kernel
def card_ss_compensated(key: Sorted[Index], x: Scalar, acc: Mutable["slot":KEYS]):  # noqa: F821
    hawk.scatter(acc, policy="compensated")[key] += x


@hawk.kernel
def card_ss_ordered(key: Sorted[Index], x: Scalar, acc: Mutable["slot":KEYS]):  # noqa: F821
    hawk.scatter(acc, policy="ordered")[key] += x


SUMS = {"auto": card_sum_auto, "compensated": card_sum_compensated, "ordered": card_sum_ordered}
SCATTERS = {  # policy -> (Index-key kernel, Sorted[Index]-key kernel)
    "plain": (card_sc_plain, card_ss_plain),
    "auto": (card_sc_auto, card_ss_auto),
    "compensated": (card_sc_compensated, card_ss_compensated),
    "ordered": (card_sc_ordered, card_ss_ordered),
}
# what each policy promises: k <= 1 (units of eps * sum|terms|), "n" (grows with the run length) or "0.5 ulp"
# (correctly rounded: the exact sum rounded once)
BOUND = {("sum", "auto"): "n", ("sum", "compensated"): 1, ("sum", "ordered"): "0.5 ulp",
         ("scatter", "plain"): "n", ("scatter", "auto"): 1, ("scatter", "compensated"): 1,
         ("scatter", "ordered"): "0.5 ulp"}

# ---------------------------------------------------------------------------------------------- inputs and references

# (scripts/card_inputs.py: the families, the adversarial sets and the exact references)
ADV_ROWS = [("sum", "auto"), ("sum", "compensated"), ("sum", "ordered"), ("scatter", "compensated"),
            ("scatter", "ordered")]


# ---------------------------------------------------------------------------------------------- measuring


TARGETS = ("host", "spirv")


def target_missing(name: str) -> str | None:
    """Why target `name` cannot run here (its runtime or device is missing), or None when it can."""
    if name == "host":
        return None
    from eagle.targets import gpu_target

    try:
        gpu_target(name).runtime()
    except Exception as exc:  # RuntimeMissing, or the runtime's package missing altogether
        return f"{type(exc).__name__}: {exc}"
    return None


def _device(name: str) -> str:
    if name == "host":
        return f"{platform.machine()} ({os.cpu_count()} cpu), eagle threads={eagle.deploy(card_sum_auto).threads}"
    from eagle.targets import gpu_target

    rt = gpu_target(name).runtime()
    return str(getattr(rt, "device_name", rt))


def _refusals() -> tuple[type, ...]:
    """The documented refusals a run may meet: a result is never given for them, so the card says "refused"."""
    try:
        from eagle.targets.vulkan_runtime import LoopBudgetExceeded
    except ImportError:
        return ()
    return (LoopBudgetExceeded,)


def adversarial(target: str, run, refusals) -> list[dict]:
    """Each adversarial set through each row of ADV_ROWS on `target` (every lane into key 0 for a scatter): the
    error in ulps of the exact sum, k, and whether the result is the exact sum rounded once."""
    rows = []
    for dtype_name in DTYPES:
        dtype = np.dtype(dtype_name).type
        for si, (name, make) in enumerate(ADVERSARIAL.items()):
            t = make(ADVERSARIAL_LENGTH, dtype, np.random.default_rng([SEED, 99, si, int(dtype_name == "float32")]))
            exact = Exact(t)
            for op, policy in ADV_ROWS:
                if op == "sum":
                    got = run(target, SUMS[policy], x=t)
                else:
                    got = run(target, SCATTERS[policy][0], key=np.zeros(t.size, dtype=np.int32), x=t)
                row = {"set": name, "dtype": dtype_name, "op": op, "policy": policy}
                if isinstance(got, refusals):
                    row["refused"] = f"{type(got).__name__}: {got}"
                else:
                    row.update(ulps=exact.ulps(got[0]), k=exact.k(got[0], eps_of(dtype)),
                               correctly_rounded=exact.correct(got[0]))
                rows.append(row)
    return rows


def measure(quick: bool = False, targets=TARGETS) -> dict:
    """Measure every policy on each of `targets` that can run here; the card as a dict (the module docstring says
    what k is). The same terms go to every target."""
    lengths = QUICK_LENGTHS if quick else LENGTHS
    missing = {name: why for name in targets if (why := target_missing(name))}
    live = [name for name in targets if name not in missing]
    refusals = _refusals()
    plans: dict = {}
    worst: dict[str, dict[tuple, dict]] = {name: {} for name in live}  # (op, policy, dtype, n) -> entry
    timing: dict[str, float] = {}  # the reference and the inputs, per input
    kernel_time: dict[str, dict[str, float]] = {name: {} for name in live}

    def run(target, kernel, **planes):
        """The result, or the refusal (an exception of a documented kind)."""
        if (target, kernel) not in plans:
            plans[target, kernel] = eagle.deploy(kernel, target=target)
        try:
            return np.asarray(plans[target, kernel].run(**planes))
        except refusals as exc:
            return exc

    def entry(target, op, policy, dtype, n):
        new = {"k": None, "case": None, "cases": {}, "refused": {}}
        if policy == "ordered":  # the error in ulps of the exact sum, and whether every result was its rounding
            new.update(ulps=None, ulps_cases={}, correctly_rounded=True)
        return worst[target].setdefault((op, policy, dtype, n), new)

    def note(target, op, policy, dtype, n, case, got, exact, eps):
        e = entry(target, op, policy, dtype, n)
        if isinstance(got, Exception):
            e["refused"][case] = f"{type(got).__name__}: {got}"
            return
        k = exact.k(got, eps)
        e["cases"][case] = max(k, e["cases"].get(case, -1.0))
        if e["k"] is None or not k <= e["k"]:  # a NaN k wins too
            e["k"], e["case"] = k, case
        if policy == "ordered":
            u = exact.ulps(got)
            e["ulps_cases"][case] = max(u, e["ulps_cases"].get(case, -1.0))
            e["ulps"] = u if e["ulps"] is None or not u <= e["ulps"] else e["ulps"]
            e["correctly_rounded"] = e["correctly_rounded"] and exact.correct(got)

    def pick(got, s):
        return got if isinstance(got, Exception) else got[s]

    for dtype_name in DTYPES:
        dtype = np.dtype(dtype_name).type
        eps = eps_of(dtype)
        for n in lengths:
            for fi, (fam, make) in enumerate(FAMILIES.items()):
                start = time.perf_counter()
                rng = np.random.default_rng([SEED, fi, n, int(dtype_name == "float32")])
                # one run of n terms: a sum over every lane, and a scatter of every lane into one key
                t = make(n, dtype, rng)
                ex = Exact(t)
                zero = np.zeros(n, dtype=np.int32)
                # KEYS runs of n terms each (fresh draws), grouped by key, and the same lanes shuffled
                runs = [t] + [make(n, dtype, rng) for _ in range(KEYS - 1)]
                exacts = [ex] + [Exact(r) for r in runs[1:]]
                grouped_x = np.concatenate(runs)
                grouped_k = np.repeat(np.arange(KEYS, dtype=np.int32), n)
                perm = rng.permutation(grouped_x.size)
                spread_x, spread_k = grouped_x[perm], grouped_k[perm]
                timing[f"{dtype_name}/{n}/{fam}"] = round(time.perf_counter() - start, 3)
                for target in live:
                    began = time.perf_counter()
                    args = (dtype_name, n)
                    for policy, kernel in SUMS.items():
                        note(target, "sum", policy, *args, fam, pick(run(target, kernel, x=t), 0), ex, eps)
                    for policy, (by_index, by_sorted) in SCATTERS.items():
                        got = run(target, by_index, key=zero, x=t)
                        note(target, "scatter", policy, *args, f"{fam}/one", pick(got, 0), ex, eps)
                        got = run(target, by_sorted, key=zero, x=t)
                        note(target, "scatter", policy, *args, f"{fam}/one_sorted", pick(got, 0), ex, eps)
                    for policy, (by_index, by_sorted) in SCATTERS.items():
                        got_spread = run(target, by_index, key=spread_k, x=spread_x)
                        got_grouped = run(target, by_sorted, key=grouped_k, x=grouped_x)
                        for s in range(KEYS):
                            note(target, "scatter", policy, *args, f"{fam}/spread", pick(got_spread, s), exacts[s], eps)
                            note(target, "scatter", policy, *args, f"{fam}/grouped", pick(got_grouped, s), exacts[s],
                                 eps)
                    kernel_time[target][f"{dtype_name}/{n}/{fam}"] = round(time.perf_counter() - began, 3)

    cards = {}
    for target in live:
        entries = []
        for (op, policy, dtype_name, n), e in worst[target].items():
            entries.append({"op": op, "policy": policy, "dtype": dtype_name, "length": n, "k": e["k"],
                            "worst_case": e["case"], "bound": BOUND[op, policy], "cases": e["cases"],
                            "refused": e["refused"],
                            **{f: e[f] for f in ("ulps", "ulps_cases", "correctly_rounded") if f in e}})
        cards[target] = {"device": _device(target), "entries": entries,
                         "adversarial": adversarial(target, run, refusals),
                         "kernel_seconds_per_input": kernel_time[target]}
    return {
        "targets": cards,
        "missing": missing,
        "machine": f"{platform.machine()} ({os.cpu_count()} cpu)",
        "quick": quick,
        "lengths": list(lengths),
        "dtypes": list(DTYPES),
        "eps": {d: eps_of(np.dtype(d)) for d in DTYPES},
        "families": {name: (f.__doc__ or "").strip() for name, f in FAMILIES.items()},
        "adversarial_sets": {name: (f.__doc__ or "").strip() for name, f in ADVERSARIAL.items()},
        "adversarial_length": ADVERSARIAL_LENGTH,
        "layouts": LAYOUTS,
        "seconds_per_input": timing,
    }


# ---------------------------------------------------------------------------------------------- writing


def _fmt(k: float) -> str:
    if not math.isfinite(k):
        return str(k)
    if k == 0.0:
        return "0"
    if k < 0.01:
        return "<0.01"
    if k < 1000:
        return f"{k:.2g}" if k < 1 else f"{k:.3g}"
    return f"{k:,.0f}"


ROWS = [("sum", "auto"), ("sum", "compensated"), ("sum", "ordered"),
        ("scatter", "plain"), ("scatter", "auto"), ("scatter", "compensated"), ("scatter", "ordered")]
LABEL = {"sum": "hawk.sum over lanes", "scatter": "hawk.scatter(sink)[key] +="}


def _lookup(entries: list) -> dict:
    return {(e["op"], e["policy"], e["dtype"], e["length"]): e for e in entries}


def _over(e) -> bool:
    """An entry that breaks its promise: k <= 1 (a NaN k does too), or for "ordered" the correctly rounded sum."""
    if e["bound"] == "0.5 ulp":
        return e["ulps"] is not None and not (e["correctly_rounded"] and e["ulps"] <= 0.5)
    return e["bound"] == 1 and e["k"] is not None and not e["k"] <= 1.0


PROMISE = {1: "k <= 1", "n": "grows with n", "0.5 ulp": "0.5 ulp (correctly rounded)"}


def _ulps(u: float) -> str:
    return f"{u:.2g} ulp" if 0.01 <= u < 1000 or u == 0.0 or not math.isfinite(u) else f"{u:.1e} ulp"


def _same_ordered(card: dict) -> list[str]:
    """(op, dtype, length) where an ordered result's k differs between targets: it must not (the same bits)."""
    names = list(card["targets"])
    differ = []
    for name in names[1:]:
        ref, other = _lookup(card["targets"][names[0]]["entries"]), _lookup(card["targets"][name]["entries"])
        for key, e in ref.items():
            o = other.get(key)
            if key[1] == "ordered" and o is not None:
                common = set(e["cases"]) & set(o["cases"])
                if any(e["cases"][c] != o["cases"][c] for c in common):
                    differ.append(f"{key[0]} {key[2]} n={key[3]} ({names[0]} vs {name})")
    return differ


def _why(messages) -> str:
    """Refusals in a few words: the errors' names, and for lavapipe's loop budget how many lanes an invocation had."""
    names = sorted({m.split(":", 1)[0] for m in messages})
    spans = sorted({(int(m[1]), int(m[2])) for text in messages
                    if (m := re.search(r"each of its (\d+) invocation\(s\) up to (\d+) lanes", text))})
    text = ", ".join(names)
    if "LoopBudgetExceeded" in names and spans:
        each = " or ".join(f"{lanes:,} lanes in {inv:,} invocation(s)" for inv, lanes in spans)
        text += f" (lavapipe ends an invocation's loops after 65535 iterations; these launches ran {each})"
    return text


def adversarial_table(card: dict, rows: list[dict]) -> list[str]:
    """The adversarial sets' table: a row per (operation, policy), the error in ulps of the exact sum per set."""
    sets = list(card.get("adversarial_sets", {}))
    cols = [(s, d) for d in card["dtypes"] for s in sets]
    short = {"float64": "f64", "float32": "f32"}
    by = {(r["op"], r["policy"], r["set"], r["dtype"]): r for r in rows}
    lines = [f"Error in ulps of the exact sum, {card.get('adversarial_length', 0):,} terms per set (a scatter adds",
             "every term into key 0); `ordered` must be the exact sum rounded once.", "",
             "| operation | policy | " + " | ".join(f"{s} {short[d]}" for s, d in cols) + " |",
             "|---|---|" + "---|" * len(cols)]
    for op, policy in ADV_ROWS:
        cells = []
        for s, d in cols:
            r = by.get((op, policy, s, d))
            if r is None or "refused" in r:
                cells.append("-" if r is None else "refused")
                continue
            text = _ulps(r["ulps"])
            if policy == "ordered" and not (r["correctly_rounded"] and r["ulps"] <= 0.5):
                text = f"**{text} (not correctly rounded)**"
            cells.append(text)
        lines.append(f"| {LABEL[op]} | `{policy}` | " + " | ".join(cells) + " |")
    return lines


def render(card: dict) -> str:
    cols = [(d, n) for d in card["dtypes"] for n in card["lengths"]]
    short = {"float64": "f64", "float32": "f32"}
    targets = card["targets"]

    def head(first: str) -> list[str]:
        names = [f"{short[d]} n={n:.0e}".replace("e+0", "e") for d, n in cols]
        return [f"| operation | policy | {first} | " + " | ".join(names) + " |",
                "|---|---|---|" + "---|" * len(cols)]

    def table(by: dict, cell) -> list[str]:
        rows = []
        for op, policy in ROWS:
            bound = PROMISE[BOUND[op, policy]]
            cells = [cell(by.get((op, policy, d, n))) for d, n in cols]
            rows.append(f"| {LABEL[op]} | `{policy}` | {bound} | " + " | ".join(cells) + " |")
        return rows

    def worst_k(e) -> str:
        if e is None:
            return "-"
        if e["k"] is None:
            return "refused"
        if e["bound"] == "0.5 ulp":  # ordered: the error in ulps of the exact sum
            text = _ulps(e["ulps"])
            if _over(e):
                text = f"**{text} (not correctly rounded)**"
        else:
            text = _fmt(e["k"])
        if _over(e) and e["bound"] == 1:
            text = f"**{text} (over 1)**"
        if e["refused"]:
            text += f" ({len(e['refused'])} refused)"
        return text

    def worst_case(e) -> str:
        if e is None or e["k"] is None:
            return "refused" if e is not None else "-"
        if e["bound"] == "0.5 ulp":  # ordered: the input furthest from the exact sum, in ulps
            worst = max(e["ulps_cases"].items(), key=lambda kv: kv[1], default=(None, 0.0))
            return "-" if worst[1] == 0.0 else str(worst[0])
        return "-" if e["k"] == 0.0 else str(e["worst_case"])

    title = " and ".join(targets) if targets else "no"
    lines = [
        f"# Sum accuracy card: {title} target{'s' if len(targets) != 1 else ''}",
        "",
        "Generated by `scripts/card.py`" + (" --quick" if card["quick"] else "") +
        f" on {card['machine']}. Rerun it after changing a sum's lowering.",
        "",
        "| target | device |",
        "|---|---|",
        *[f"| {name} | {t['device']} |" for name, t in targets.items()],
        *[f"| {name} | not measured: cannot run here ({why}) |" for name, why in card["missing"].items()],
        "",
        "Every target gets the very same terms. On a machine without a GPU the spirv target runs on Mesa's",
        "lavapipe (Vulkan on the CPU): the same SPIR-V a GPU would run, so the same k.",
        "",
        "## What k means",
        "",
        "For one slot (the cell of a sum over lanes, or one key of a scatter) that received terms `t`,",
        "",
        "    k = |result - math.fsum(t)| / (eps * math.fsum(|t|))",
        "",
        "`t` are the terms as the kernel saw them (already rounded to the run's dtype) and `eps` is the machine",
        "epsilon of that dtype (float64: 2^-52, float32: 2^-23), so float32 is judged by float32's own eps",
        "against the exact sum of its float32 terms. Each cell below is the worst k over every input family and",
        "scatter layout (and over every slot) at that run length, where the run length is the number of terms",
        "added into one slot. The contract: `compensated` (and `auto` on a scatter, which is the compensated",
        "form) promises k <= 1 at any length; `auto` on a sum over lanes and `plain` promise a bound that",
        "grows with the number of terms (at worst that many). A cell marked **over 1** breaks the k <= 1",
        "promise. `auto` and `plain` may differ between targets (they add in whatever order the target's",
        "threads make). A run the target refuses (a documented limit, listed below) gives no k: the cell says",
        "`refused`, or how many of its inputs were refused next to the worst k of the others.",
        "",
        "`ordered` promises more: the exact sum of the terms rounded once (docs/ordered.md), the same bits on",
        "every target. Its cells give the worst error in ulps of the exact sum,",
        "",
        "    |result - exact(t)| / ulp(exact(t))",
        "",
        "where `exact(t)` is the exact sum as a Fraction and the ulp is the dtype's spacing at that value. A",
        "correctly rounded result is at most 0.5 ulp away (exactly 0.5 on a tie); the card also checks every",
        "result bit for bit against the exact sum rounded once (float32 straight from the exact value, never",
        "through float64) and marks a miss **not correctly rounded**. The JSON copy keeps k for `ordered` too.",
    ]
    for name, t in targets.items():
        lines += ["", f"## Worst k: {name}", "", *head("promise"), *table(_lookup(t["entries"]), worst_k)]
    for name, t in targets.items():
        lines += ["", f"## Adversarial sets: {name}", "", *adversarial_table(card, t.get("adversarial", []))]
    for name, t in targets.items():
        lines += ["", f"## Which input gave the worst k (ordered: the worst ulps): {name}", "", *head("promise"),
                  *table(_lookup(t["entries"]), worst_case)]
    differ = _same_ordered(card)
    if len(targets) > 1:
        lines += ["", "## Ordered across targets", ""]
        lines.append("Every `ordered` k measured on more than one target is the same on each: the same bits."
                     if not differ else "**`ordered` k differs between targets** (it must not): " + "; ".join(differ))
    refused = [(name, e) for name, t in targets.items() for e in t["entries"] if e["refused"]]
    if refused:
        lines += ["", "## Refused runs", "",
                  "Runs a target refused with a documented error instead of a result (the JSON copy has each message):",
                  ""]
        for name, e in refused:
            every = not e["cases"]
            which = "every input" if every else ", ".join(sorted(e["refused"]))
            lines.append(f"- {name}: `{e['policy']}` {e['op']}, {e['dtype']}, n={e['length']:,}: {which} "
                         f"({len(e['refused'])} runs): {_why(e['refused'].values())}")
    lines += [
        "",
        "## How the inputs are made",
        "",
        "Every family is drawn with NumPy's default generator from a fixed seed, in the run's dtype:",
        "",
    ]
    lines += [f"- `{name}`: {doc}" for name, doc in card["families"].items()]
    lines += ["", f"The adversarial sets ({card.get('adversarial_length', 0):,} terms each, the same on every target):",
              ""]
    lines += [f"- `{name}`: {doc}" for name, doc in card.get("adversarial_sets", {}).items()]
    lines += [
        "",
        "A sum over lanes adds one run of n terms. A scatter is measured in four layouts (the `worst_case`",
        "entries name them as `family/layout`):",
        "",
    ]
    lines += [f"- `{name}`: {doc}" for name, doc in card["layouts"].items()]
    slow = {k: v for k, v in card["seconds_per_input"].items() if v > 20.0}
    kernels = ", ".join(f"{name} {sum(t['kernel_seconds_per_input'].values()):.1f} s" for name, t in targets.items())
    lines += [
        "",
        "## Cost",
        "",
        "Seconds per (dtype, length, family) for the inputs and their exact reference: the largest is "
        f"{max(card['seconds_per_input'].values()):.1f} s"
        + (f"; over 20 s: {', '.join(slow)}." if slow else "; every family runs at every listed length.")
        + " Most of the time goes to the exact references: math.fsum (for k) keeps more partials the wider the"
        " exponent range, so the `wide` families cost the most, and the exact sum as a Fraction (for the ulps of"
        f" `ordered`) grows with the exponent range too. The kernels, every policy and layout, all lengths: {kernels}"
        + (f"; the whole card {card['seconds']} s." if "seconds" in card else ".")
        + " Every target runs every listed length (" + ", ".join(f"{n:,}" for n in card["lengths"]) + " terms)"
        + (", the quick set." if card["quick"] else ": lavapipe is fast enough here for the full set."),
        "",
        "The same numbers, with every family and layout, are in the JSON copy next to this file.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="run lengths 1e2 and 1e4 only")
    ap.add_argument("--targets", default=",".join(TARGETS), help="comma-separated targets (default: host,spirv)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "card.md"), help="the markdown card (JSON next to it)")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    card = measure(args.quick, tuple(t.strip() for t in args.targets.split(",") if t.strip()))
    card["seconds"] = round(time.perf_counter() - start, 1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(card))
    out.with_suffix(".json").write_text(json.dumps(card, indent=1, sort_keys=True) + "\n")
    print(render(card).split("## How the inputs")[0])
    print(f"wrote {out} and {out.with_suffix('.json')} in {card['seconds']} s")
    for name, why in card["missing"].items():
        print(f"target {name} not measured: {why}", file=sys.stderr)
    for name, t in card["targets"].items():
        for e in t["entries"]:
            if _over(e):
                print(f"over the {PROMISE[e['bound']]} promise on {name}: {e['op']} policy={e['policy']} "
                      f"{e['dtype']} n={e['length']} k={e['k']:.4g} ulps={e.get('ulps')} ({e['worst_case']})",
                      file=sys.stderr)
        for r in t.get("adversarial", []):
            if r["policy"] == "ordered" and not r.get("correctly_rounded", True):
                print(f"ordered not correctly rounded on {name}: {r['op']} {r['set']} {r['dtype']} "
                      f"ulps={r['ulps']:.4g}", file=sys.stderr)
    for line in _same_ordered(card):
        print(f"ordered k differs between targets: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
