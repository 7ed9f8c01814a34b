"""The accuracy card (scripts/card.py): a quick measurement keeps its promises on every target, and the published
card does too, with a table per target: compensated within k <= 1, ordered correctly rounded (at most 0.5 ulp of
the exact sum, bit for bit its rounding) at every length and on the adversarial sets, and the card's own exact
reference checked against math.fsum and against rounding straight to float32."""

import importlib.util
import json
import math
import pathlib
from fractions import Fraction

import numpy as np
import pytest
from conftest import BT_TARGETS, bt_ordered_sum

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _card_module():
    spec = importlib.util.spec_from_file_location("hawk_card_script", ROOT / "scripts" / "card.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def quick_card():
    """One quick card for every target that can run here (the same terms go to each)."""
    return _card_module().measure(quick=True, targets=BT_TARGETS)


def _entries(card, target):
    assert target in card["targets"], f"target {target} was not measured: {card['missing'].get(target)}"
    return card["targets"][target]["entries"]


def _say(e) -> str:
    return f"{e['op']} {e['policy']} {e['dtype']} n={e['length']}: k={e['k']} ({e['worst_case']})"


def _promised_one(entry) -> bool:
    """Entries whose policy promises k <= 1: compensated everywhere, and auto on a scatter."""
    return entry["policy"] == "compensated" or (entry["op"] == "scatter" and entry["policy"] == "auto")


@pytest.mark.slow
def test_quick_card_covers_every_policy_dtype_and_length(quick_card, target):
    entries = _entries(quick_card, target)
    seen = {(e["op"], e["policy"], e["dtype"], e["length"]) for e in entries}
    want = {(op, p, d, n)
            for op, pols in (("sum", ("auto", "compensated", "ordered")),
                             ("scatter", ("plain", "auto", "compensated", "ordered")))
            for p in pols for d in ("float64", "float32") for n in (100, 10_000)}
    assert seen == want
    assert quick_card["quick"] is True
    assert quick_card["targets"][target]["device"]
    for e in entries:  # at the quick lengths no target refuses a run
        assert not e["refused"], (target, _say(e), e["refused"])


def test_quick_card_every_k_is_finite(quick_card, target):
    for e in _entries(quick_card, target):
        assert e["k"] is not None and math.isfinite(e["k"]) and e["k"] >= 0.0, e
        assert all(math.isfinite(k) for k in e["cases"].values()), e


def test_card_reference_is_the_exact_sum(quick_card):
    # the card's exact sum and its rounding agree with math.fsum (float64) and with conftest's independent
    # reference (float32, rounded straight from the exact value), and the ulp measure is what it says
    mod = _card_module()
    rng = np.random.default_rng(7)
    for dtype in (np.float64, np.float32):
        for make in (*mod.FAMILIES.values(), *mod.ADVERSARIAL.values()):
            t = make(2000, dtype, rng)
            ex = mod.Exact(t)
            assert ex.value == sum((Fraction(float(v)) for v in t.tolist()), Fraction(0))
            want = bt_ordered_sum(t)
            assert ex.correct(want) and ex.ulps(want) <= 0.5
            if dtype == np.float64:
                assert float(want) == math.fsum(t.tolist())
            up = np.nextafter(want, dtype(np.inf))
            assert not ex.correct(up) and 0.5 <= ex.ulps(up) <= 1.5
    # a tie: 1 + half an ulp is 0.5 ulp from 1.0, and only 1.0 (even) is the correct rounding
    tie = mod.Exact(np.array([1.0, 2.0**-53]))
    assert tie.ulps(1.0) == 0.5 and tie.correct(1.0) and not tie.correct(1.0 + 2.0**-52)


def test_quick_card_ordered_is_correctly_rounded_at_every_length(quick_card, target):
    entries = [e for e in _entries(quick_card, target) if e["policy"] == "ordered"]
    assert {(e["op"], e["dtype"], e["length"]) for e in entries} == {
        (op, d, n) for op in ("sum", "scatter") for d in ("float64", "float32") for n in (100, 10_000)}
    for e in entries:
        assert e["bound"] == "0.5 ulp"
        assert e["correctly_rounded"] is True, f"{target}: {_say(e)}"
        assert 0.0 <= e["ulps"] <= 0.5 and all(0.0 <= u <= 0.5 for u in e["ulps_cases"].values()), _say(e)
    # and the card says so: "0.5 ulp (correctly rounded)" promised, no miss marked
    md = _card_module().render(quick_card)
    assert "| hawk.sum over lanes | `ordered` | 0.5 ulp (correctly rounded) |" in md
    assert "(not correctly rounded)" not in md


def test_quick_card_adversarial_sets(quick_card, target):
    rows = quick_card["targets"][target]["adversarial"]
    mod = _card_module()
    want = {(s, d, op, p) for s in mod.ADVERSARIAL for d in ("float64", "float32") for op, p in mod.ADV_ROWS}
    assert {(r["set"], r["dtype"], r["op"], r["policy"]) for r in rows} == want
    assert not any("refused" in r for r in rows), rows
    for r in rows:
        if r["policy"] == "ordered":
            assert r["correctly_rounded"] and r["ulps"] <= 0.5, (target, r)
    # the sets are hard: some other policy misses the correctly rounded sum by far on them
    assert max(r["ulps"] for r in rows if r["policy"] != "ordered") > 1e6
    assert f"## Adversarial sets: {target}" in mod.render(quick_card)


def test_quick_card_compensated_within_one(quick_card, target):
    for e in _entries(quick_card, target):
        if _promised_one(e):
            assert e["k"] <= 1.0, f"{target}: {_say(e)}"


def test_quick_card_plain_sums_lose_what_compensated_keeps(quick_card, target):
    # the hard inputs are hard: a plain scatter of the absorbing family is far off at 1e4 terms. How far depends on
    # how the target splits the lanes: the host adds a key's 1e4 terms in one chunk and drops nearly all of them
    # (k ~ 4900); a GPU target adds each invocation's lanes from zero first and keeps more (spirv: k ~ 80). Either
    # way far above the compensated k <= 1
    by = {(e["op"], e["policy"], e["dtype"], e["length"]): e for e in _entries(quick_card, target)}
    for d in ("float64", "float32"):
        plain = by["scatter", "plain", d, 10_000]["k"]
        assert plain > (100.0 if target == "host" else 10.0), (target, d, plain)
        assert plain > 10.0 * by["scatter", "compensated", d, 10_000]["k"]


def test_quick_card_ordered_is_the_same_on_every_target(quick_card):
    """ordered sums and scatters give the same bits on every target, so every family and layout the same k."""
    measured = list(quick_card["targets"])
    if len(measured) < 2:
        pytest.skip(f"one target measured here; the others cannot run: {quick_card['missing']}")
    assert _card_module()._same_ordered(quick_card) == []
    first = {(e["op"], e["dtype"], e["length"]): e["cases"] for e in _entries(quick_card, measured[0])
             if e["policy"] == "ordered"}
    for name in measured[1:]:
        other = {(e["op"], e["dtype"], e["length"]): e["cases"] for e in _entries(quick_card, name)
                 if e["policy"] == "ordered"}
        assert other == first, name


def test_published_card_exists_and_keeps_the_promise():
    path = ROOT / "docs" / "card.json"
    assert path.is_file(), "run: .venv/bin/python scripts/card.py"
    card = json.loads(path.read_text())
    md = (ROOT / "docs" / "card.md").read_text()
    assert set(card["targets"]) == set(BT_TARGETS), "the published card has a table per target"
    assert card["quick"] is False and card["lengths"] == [100, 10_000, 1_000_000]
    for name, t in card["targets"].items():
        assert f"## Worst k: {name}" in md
        assert t["entries"]
        promised = [e for e in t["entries"] if _promised_one(e)]
        assert {e["policy"] for e in promised} == {"compensated", "auto"}
        for e in promised:
            assert e["k"] is not None and e["k"] <= 1.0, f"{name}: {_say(e)}"
            assert not e["refused"], f"{name}: {_say(e)} {e['refused']}"
        for e in t["entries"]:
            if e["k"] is None:  # every input refused: a documented limit, named
                assert e["refused"] and all(why.split(":")[0] == "LoopBudgetExceeded" for why in e["refused"].values())
            else:
                assert math.isfinite(e["k"]), e
    assert _card_module()._same_ordered(card) == []
    for name, t in card["targets"].items():  # ordered: correctly rounded at every listed length and adversarial set
        ordered = [e for e in t["entries"] if e["policy"] == "ordered"]
        assert {e["length"] for e in ordered} == {100, 10_000, 1_000_000}
        for e in ordered:
            assert e["correctly_rounded"] is True and e["ulps"] <= 0.5, f"{name}: {_say(e)}"
        assert f"## Adversarial sets: {name}" in md
        adv = [r for r in t["adversarial"] if r["policy"] == "ordered"]
        assert {r["set"] for r in adv} == {"cancellation", "dynamic_range", "subnormals"}
        assert all(r["correctly_rounded"] and r["ulps"] <= 0.5 for r in adv), (name, adv)
