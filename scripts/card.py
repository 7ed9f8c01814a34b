"""The per-target accuracy card: how far each sum policy lands from the exact sum, on hard inputs.

    .venv/bin/python scripts/card.py [--quick] [--targets host,spirv] [--out docs/card.md]

For each target (by default "host" and "spirv"; spirv runs on any Vulkan device, Mesa's lavapipe where there is no
GPU) it measures, for every sum policy, k = |result - fsum(terms)| / (eps * sum|terms|), where fsum is Python's
exactly rounded math.fsum of the terms as the kernel saw them (rounded to the run's dtype) and eps is that dtype's
machine epsilon (2**-52 for float64, 2**-23 for float32). It keeps the worst k over several input families for
each (operation, policy, dtype, run length) and writes a markdown card with a table per target plus a JSON copy
next to it (docs/card.md and docs/card.json by default). Every target sees the very same terms. A target that
cannot run here is listed with the reason; a run the target refuses (a documented limit, such as lavapipe's loop
budget) is listed as refused, never as a k. `measure(quick, targets)` does the measuring and returns the card as a
dict; tests/test_card.py imports this file and calls it.
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

ROOT = Path(__file__).resolve().parents[1]
LENGTHS = (100, 10_000, 1_000_000)
QUICK_LENGTHS = (100, 10_000)
DTYPES = ("float64", "float32")
KEYS = 4  # slots the spread and grouped scatter layouts use; every slot gets a full run of the length
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
# what each policy promises, in units of eps * sum|terms| ("n" = grows with the run length)
BOUND = {("sum", "auto"): "n", ("sum", "compensated"): 1, ("sum", "ordered"): "n",
         ("scatter", "plain"): "n", ("scatter", "auto"): 1, ("scatter", "compensated"): 1,
         ("scatter", "ordered"): "n"}

# ---------------------------------------------------------------------------------------------- inputs


def _eps(dtype) -> float:
    return float(np.finfo(dtype).eps)


def cancelling(n, dtype, rng):
    """Pairs b and r - b: big values (1 .. 2e7) that cancel up to small residues r (|r| < 1e-3), shuffled."""
    half = n // 2
    b = (rng.uniform(1.0, 2.0, half) * 10.0 ** rng.uniform(0.0, 7.0, half)).astype(dtype)
    r = rng.uniform(-1e-3, 1e-3, half).astype(dtype)
    t = np.concatenate([b, (r - b).astype(dtype), np.full(n % 2, 0.625, dtype=dtype)])
    return rng.permutation(t).astype(dtype)


def wide(n, dtype, rng):
    """Random signs, decimal exponents uniform over 1e-290 .. 1e283 (float32: 1e-30 .. 1e23): no overflow."""
    d = 290.0 if np.dtype(dtype) == np.float64 else 30.0
    mant = rng.uniform(1.0, 10.0, n) * rng.choice([-1.0, 1.0], n)
    return (mant * 10.0 ** rng.uniform(-d, d - 7.0, n)).astype(dtype)


def wide_cancelling(n, dtype, rng):
    """Wide exponents where each huge term also appears negated; what is left is small (|v| ~ 1e-3 .. 1e3)."""
    w = wide(n // 2 - n // 8, dtype, rng)
    rest = n - 2 * w.size
    tail = (rng.normal(size=rest) * 10.0 ** rng.uniform(-3.0, 3.0, rest)).astype(dtype)
    return rng.permutation(np.concatenate([w, -w, tail])).astype(dtype)


def absorbing(n, dtype, rng):
    """1.0, then n - 1 terms of 0.49 eps: each lies under half an ulp of the running sum (a plain add drops it)."""
    t = np.full(n, 0.49 * _eps(dtype), dtype=dtype)
    t[0] = 1.0
    return t


def positive(n, dtype, rng):
    """Uniform on [0, 1): no cancellation, the running sum grows steadily (the usual case for a plain sum)."""
    return rng.uniform(0.0, 1.0, n).astype(dtype)


FAMILIES = {"cancelling": cancelling, "wide": wide, "wide_cancelling": wide_cancelling,
            "absorbing": absorbing, "positive": positive}
LAYOUTS = {  # how the lanes of a scatter meet the slots
    "one": "every lane to key 0 (Index key)",
    "one_sorted": "every lane to key 0 (Sorted[Index] key)",
    "spread": f"{KEYS} keys, a run of the length each, lanes shuffled (Index key)",
    "grouped": f"{KEYS} keys, a run of the length each, keys grouped (Sorted[Index] key)",
}

# ---------------------------------------------------------------------------------------------- measuring


class _Exact:
    """fsum(terms) and fsum(|terms|) of one run, computed once."""

    def __init__(self, terms: np.ndarray):
        t = terms.astype(np.float64)
        self.sum = math.fsum(t.tolist())
        self.scale = math.fsum(np.abs(t).tolist())

    def k(self, got, eps: float) -> float:
        err = abs(float(got) - self.sum)
        if self.scale == 0.0:
            return 0.0 if err == 0.0 else math.inf
        return err / (eps * self.scale)


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
        return worst[target].setdefault((op, policy, dtype, n), {"k": None, "case": None, "cases": {}, "refused": {}})

    def note(target, op, policy, dtype, n, case, got, exact, eps):
        e = entry(target, op, policy, dtype, n)
        if isinstance(got, Exception):
            e["refused"][case] = f"{type(got).__name__}: {got}"
            return
        k = exact.k(got, eps)
        e["cases"][case] = max(k, e["cases"].get(case, -1.0))
        if e["k"] is None or not k <= e["k"]:  # a NaN k wins too
            e["k"], e["case"] = k, case

    def pick(got, s):
        return got if isinstance(got, Exception) else got[s]

    for dtype_name in DTYPES:
        dtype = np.dtype(dtype_name).type
        eps = _eps(dtype)
        for n in lengths:
            for fi, (fam, make) in enumerate(FAMILIES.items()):
                start = time.perf_counter()
                rng = np.random.default_rng([SEED, fi, n, int(dtype_name == "float32")])
                # one run of n terms: a sum over every lane, and a scatter of every lane into one key
                t = make(n, dtype, rng)
                ex = _Exact(t)
                zero = np.zeros(n, dtype=np.int32)
                # KEYS runs of n terms each (fresh draws), grouped by key, and the same lanes shuffled
                runs = [t] + [make(n, dtype, rng) for _ in range(KEYS - 1)]
                exacts = [ex] + [_Exact(r) for r in runs[1:]]
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
                            "refused": e["refused"]})
        cards[target] = {"device": _device(target), "entries": entries,
                         "kernel_seconds_per_input": kernel_time[target]}
    return {
        "targets": cards,
        "missing": missing,
        "machine": f"{platform.machine()} ({os.cpu_count()} cpu)",
        "quick": quick,
        "lengths": list(lengths),
        "dtypes": list(DTYPES),
        "eps": {d: _eps(np.dtype(d)) for d in DTYPES},
        "families": {name: (f.__doc__ or "").strip() for name, f in FAMILIES.items()},
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
    """An entry that breaks a k <= 1 promise (a NaN k does too)."""
    return e["bound"] == 1 and e["k"] is not None and not e["k"] <= 1.0


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
            bound = "k <= 1" if BOUND[op, policy] == 1 else "grows with n"
            cells = [cell(by.get((op, policy, d, n))) for d, n in cols]
            rows.append(f"| {LABEL[op]} | `{policy}` | {bound} | " + " | ".join(cells) + " |")
        return rows

    def worst_k(e) -> str:
        if e is None:
            return "-"
        if e["k"] is None:
            return "refused"
        text = _fmt(e["k"])
        if _over(e):
            text = f"**{text} (over 1)**"
        if e["refused"]:
            text += f" ({len(e['refused'])} refused)"
        return text

    def worst_case(e) -> str:
        if e is None or e["k"] is None:
            return "refused" if e is not None else "-"
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
        "form) promises k <= 1 at any length; `auto` on a sum over lanes, `plain` and `ordered` promise a",
        "bound that grows with the number of terms (at worst that many). A cell marked **over 1** breaks the",
        "k <= 1 promise. `ordered` gives the same bits on every target, so the same k; `auto` and `plain` may",
        "differ between targets (they add in whatever order the target's threads make). A run the target",
        "refuses (a documented limit, listed below) gives no k: the cell says `refused`, or how many of its",
        "inputs were refused next to the worst k of the others.",
    ]
    for name, t in targets.items():
        lines += ["", f"## Worst k: {name}", "", *head("promise"), *table(_lookup(t["entries"]), worst_k)]
    for name, t in targets.items():
        lines += ["", f"## Which input gave the worst k: {name}", "", *head("promise"),
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
        + " Most of the time goes to the exact reference: math.fsum keeps more partials the wider the exponent"
        f" range, so the `wide` families cost the most. The kernels, every policy and layout, all lengths: {kernels}"
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
                print(f"over the k <= 1 promise on {name}: {e['op']} policy={e['policy']} {e['dtype']} "
                      f"n={e['length']} k={e['k']:.4g} ({e['worst_case']})", file=sys.stderr)
    for line in _same_ordered(card):
        print(f"ordered k differs between targets: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
