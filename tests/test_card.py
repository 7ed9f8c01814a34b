"""The accuracy card (scripts/card.py): a quick measurement keeps its promises, and the published card does too."""

import importlib.util
import json
import math
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _card_module():
    spec = importlib.util.spec_from_file_location("hawk_card_script", ROOT / "scripts" / "card.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def quick_card():
    return _card_module().measure(quick=True)


def _say(e) -> str:
    return f"{e['op']} {e['policy']} {e['dtype']} n={e['length']}: k={e['k']} ({e['worst_case']})"


def _promised_one(entry) -> bool:
    """Entries whose policy promises k <= 1: compensated everywhere, and auto on a scatter."""
    return entry["policy"] == "compensated" or (entry["op"] == "scatter" and entry["policy"] == "auto")


def test_quick_card_covers_every_policy_dtype_and_length(quick_card):
    seen = {(e["op"], e["policy"], e["dtype"], e["length"]) for e in quick_card["entries"]}
    want = {(op, p, d, n)
            for op, pols in (("sum", ("auto", "compensated", "ordered")),
                             ("scatter", ("plain", "auto", "compensated", "ordered")))
            for p in pols for d in ("float64", "float32") for n in (100, 10_000)}
    assert seen == want
    assert quick_card["quick"] is True and quick_card["target"] == "host"


def test_quick_card_every_k_is_finite(quick_card):
    for e in quick_card["entries"]:
        assert math.isfinite(e["k"]) and e["k"] >= 0.0, e
        assert all(math.isfinite(k) for k in e["cases"].values()), e


def test_quick_card_compensated_within_one(quick_card):
    for e in quick_card["entries"]:
        if _promised_one(e):
            assert e["k"] <= 1.0, _say(e)


def test_quick_card_plain_sums_lose_what_compensated_keeps(quick_card):
    # the hard inputs are hard: a plain scatter of the absorbing family is far off at 1e4 terms
    by = {(e["op"], e["policy"], e["dtype"], e["length"]): e for e in quick_card["entries"]}
    for d in ("float64", "float32"):
        assert by["scatter", "plain", d, 10_000]["k"] > 100.0


def test_published_card_exists_and_keeps_the_promise():
    path = ROOT / "docs" / "card.json"
    assert path.is_file(), "run: .venv/bin/python scripts/card.py"
    card = json.loads(path.read_text())
    assert (ROOT / "docs" / "card.md").is_file()
    assert card["target"] == "host" and card["entries"]
    promised = [e for e in card["entries"] if _promised_one(e)]
    assert {e["policy"] for e in promised} == {"compensated", "auto"}
    for e in promised:
        assert e["k"] <= 1.0, _say(e)
    for e in card["entries"]:
        assert math.isfinite(e["k"]), e
