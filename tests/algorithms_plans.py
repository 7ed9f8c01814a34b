"""Shared by the eagle.algorithms tests: small chunks (so that a few thousand values split over threads), each
test's own plans, and the check that a thread-count test really split a run into chunks.

Import both names into a test module (`from algorithms_plans import assert_split, small_chunks`): the fixture
is autouse, so importing it applies it to every test of that module."""

import pytest

from eagle.algorithms import _common


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setenv("EAGLE_MIN_CHUNK", "1024")
    monkeypatch.setattr(_common, "_PLANS", {})  # this test's plans only, so assert_split sees its own runs


def assert_split() -> None:
    """Several threads really split a run into chunks (what a thread-count test claims to test)."""
    runs = [max(p.last_chunks) for (_, _, threads, _), p in _common._PLANS.items() if threads and threads > 1
            and p.last_chunks]
    assert runs and max(runs) > 1, f"no run split into chunks: {runs}"
