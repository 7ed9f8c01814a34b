"""The lowering's shape (hawk/passes/lower/): hawk ops are lowered by rules looked up per op and target, a
target's own variant only where its code differs, and the lowering modules stay within their size budget."""

import ast
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import bt_run

import hawk
import hawk.math as m
from hawk import Mutable, Scalar
from hawk.ir import dialect
from hawk.passes.lower import scatters
from hawk.passes.lower.context import RULES, TARGETS, rule, rule_for

PASSES = Path(hawk.__file__).parent / "passes"
DRIVERS = ("lower_host.py", "lower_gpu.py", "lower_gpu_tree.py", "host_emit.py", "exact_emit.py", "gpu_wide.py",
           "speculate.py")
LOWERING = [PASSES / f for f in DRIVERS] + sorted((PASSES / "lower").glob("*.py"))


def _dialect_ops() -> list[str]:
    return [f"hawk.{n}" for n in re.findall(r"irdl\.operation @(\w+)", dialect._IRDL)]


def test_every_hawk_op_has_a_rule_on_every_target():
    ops = _dialect_ops()
    assert "hawk.scatter" in ops and "hawk.reduce" in ops
    for op in ops:
        if op == "hawk.cell":  # only names where a reduction lands: the reduce rule writes it
            continue
        for target in TARGETS:
            assert callable(rule_for(op, target)), (op, target)


def test_a_target_variant_overrides_only_its_target():
    assert rule_for("add-into", "gpu") is scatters.add_into_gpu
    assert rule_for("add-into", "host") is scatters.add_into
    assert rule_for("hawk.scatter", "gpu") is rule_for("hawk.scatter", "host")  # shared: no GPU variant


def test_rule_registration_refuses_clashes_and_unknown_targets():
    with pytest.raises(ValueError, match="two lowering rules for hawk.load on target 'any'"):
        rule("hawk.load")(lambda cx, op: None)
    with pytest.raises(ValueError, match="unknown lowering target 'tpu'"):
        rule("hawk.load", target="tpu")
    with pytest.raises(RuntimeError, match="no lowering rule for hawk.nothing on target 'host'"):
        rule_for("hawk.nothing", "host")
    assert ("hawk.nothing", "any") not in RULES


def test_lowering_sources_stay_within_budget():
    """No lowering module over 600 lines, no class (a driver) over 400, no subclassing among the drivers."""
    for path in LOWERING:
        text = path.read_text()
        assert text.count("\n") <= 600, path.name
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                assert node.end_lineno - node.lineno < 400, (path.name, node.name)
                bases = {getattr(b, "id", None) for b in node.bases}
                assert not bases & {"HostLowering", "GpuLowering", "TreeLowering"}, (path.name, node.name)
        assert "getattr(self, f\"lower_" not in text and "_in_lanes" not in text, path.name


@hawk.kernel
def lr_mixed(x: Scalar, bins: Mutable["bin":8], total: Mutable[Scalar]) -> Scalar:
    hawk.scatter(bins)[m.index(x * 8.0, 8)] += x
    total = hawk.sum(x, policy="compensated")
    return x * 2.0


def test_a_kernel_through_every_rule_kind_matches_numpy():
    """Planes, a scatter (add-into), a compensated reduction and a per-lane output, lowered by the rule table."""
    rng = np.random.default_rng(5)
    x = rng.random(10_001)
    got = bt_run(lr_mixed, x=x, bins=np.zeros(8))
    np.testing.assert_array_equal(got["result"], x * 2.0)
    want = np.zeros(8)
    np.add.at(want, np.minimum((x * 8.0).astype(np.int64), 7), x)
    np.testing.assert_allclose(got["bins"], want, rtol=1e-12)
    assert abs(got["total"] - np.sum(x)) <= 1e-12 * np.sum(np.abs(x))
