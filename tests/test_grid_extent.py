"""`lane.extent("a")`: a Grid axis's extent in the run, as an integer the kernel body computes with
(docs/semantics.md, "Planes and layout"; hawk.extent in docs/ir.md).

A fixed extent is a constant; the first axis's is read at run time, the same on every lane and every chunk. The
runs kernels of eagle.algorithms name their last lane with it instead of a Param, and a scan block's interior lanes
then drop `i == last` and the clamp of `x.at(m.min(i + 1, last))` (hawk/passes/lower/scan_interior.py): checked here
bit for bit against the same kernel written with a Param, at lengths around the 4096-lane scan blocks and at
several thread counts that really split; spirv (lavapipe) gives the host's bits; an artifact runs it without
MLIR; the reverse treats it as a constant.
"""

import importlib.util
import re

import numpy as np
import pytest
from conftest import bt_same_bits, bt_spirv_missing, bt_target_missing
from ir.make_inputs import opt_runs as runs_extent  # each run's sum at its last lane, `last = lane.extent("i") - 1`

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar
from hawk.abi.layout import SCAN_BLOCK
from hawk.errors import KernelError


@hawk.kernel
def flags(lane: Grid["i"], x: Scalar, y: Mutable[Scalar], last: Mutable[Scalar]):
    n = lane.extent("i")
    y = x * float(n) + float(lane.i)  # noqa: F841
    last = m.where(lane.i == n - 1, 1.0, 0.0)  # noqa: F841


@hawk.kernel
def grid2(lane: Grid["r", "c":5], x: Scalar) -> Scalar:
    scale = float(lane.extent(0) * 10 + lane.extent("c")) + float(lane.extent(-1)) * 0.5
    return hawk.sum(x * scale, over="c")


@hawk.kernel
def runs_param(lane: Grid["i"], k: Index, x: Scalar, nlanes: Param, y: Mutable[Scalar]):
    i = lane.i
    last = int(nlanes) - 1
    start = (i == 0) | (k != k.at(m.max(i - 1, 0)))
    end = (i == last) | (k != k.at(m.min(i + 1, last)))
    y = m.where(end, hawk.scan(x, reset=start), 0.0)  # noqa: F841


@hawk.kernel
def named_extent(lane: Grid["extent"], x: Scalar, y: Mutable[Scalar]):
    y = x + float(lane.extent)  # noqa: F841  (an axis labelled "extent": its coordinate)


@hawk.kernel
def scaled_total(lane: Grid["i"], x: Scalar) -> Scalar:
    return hawk.sum(x * float(lane.extent("i")))


def _runs_data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    k = np.sort(rng.integers(0, max(1, n // 5), size=n)).astype(np.int32)
    x = rng.integers(-1000, 1000, size=n) / 8.0  # sums exact in float64: any order gives the reference's bits
    return k, x


def _runs_reference(k: np.ndarray, x: np.ndarray) -> np.ndarray:
    y = np.zeros(k.size)
    total = 0.0
    for i in range(k.size):
        total = x[i] if i == 0 or k[i] != k[i - 1] else total + x[i]
        if i == k.size - 1 or k[i] != k[i + 1]:
            y[i] = total
    return y


@pytest.mark.parametrize("n", [1, 2, 7, 40_000])
def test_every_lane_sees_the_runs_extent(n):
    x = np.random.default_rng(n).normal(size=n)
    for threads in (1, 2, 3):
        plan = eagle.deploy(flags, threads=threads, min_chunk=1024)
        out = plan.run(x=x)
        if n > 3 * 1024 and threads > 1:
            assert max(plan.last_chunks) > 1, f"threads={threads}: ran {plan.last_chunks} chunk(s)"
        bt_same_bits(np.asarray(out["y"]), x * float(n) + np.arange(n), f"n={n} threads={threads}: y")
        want = np.zeros(n)
        want[-1] = 1.0
        bt_same_bits(np.asarray(out["last"]), want, f"n={n} threads={threads}: the last lane")


def test_fixed_extents_are_constants_and_positions_count_from_either_end():
    x = np.random.default_rng(3).normal(size=(4, 5))
    got = np.asarray(eagle.deploy(grid2).run(x=x, r=4))
    np.testing.assert_allclose(got, (x * (4 * 10 + 5 + 2.5)).sum(axis=1), rtol=1e-14)
    ir = grid2.mlir()
    assert ir.count('"hawk.extent"') == 1 and 'axis = "r"' in ir  # "c":5 is the constant 5, with no op


@pytest.mark.parametrize("n", [1, 2, SCAN_BLOCK - 1, SCAN_BLOCK, SCAN_BLOCK + 1, 3 * SCAN_BLOCK + 7])
def test_runs_named_by_the_extent_match_a_param_and_a_loop(n):
    k, x = _runs_data(n, n)
    want = _runs_reference(k, x)
    param = np.asarray(eagle.deploy(runs_param).run(k=k, x=x, nlanes=float(n)))
    bt_same_bits(param, want, f"n={n}: the Param kernel against a loop")
    for threads in (1, 2, 3):
        plan = eagle.deploy(runs_extent, threads=threads, min_chunk=SCAN_BLOCK)
        got = np.asarray(plan.run(k=k, x=x))
        if n > 2 * SCAN_BLOCK and threads > 1:
            assert max(plan.last_chunks) > 1, f"threads={threads}: ran {plan.last_chunks} chunk(s)"
        bt_same_bits(got, param, f"n={n} threads={threads}: extent against Param")


def test_the_scan_interior_drops_the_last_lane_test():
    # the second stage's lanes function: its three loops per block hold `i == last` and the clamps in the outer
    # two only (tests/ir/host_scan_interior.mlir checks the same through hawk-opt)
    text = runs_extent.mlir(after="canonicalize", stage=1)
    lanes = text[text.index("func.func @opt_runs_2_lanes"):text.index("func.func @opt_runs_2_finish")]
    loops = lanes.split("scf.for")[2:]  # (the first piece precedes the block loop, the second is its head)
    # the edge loop; the interior streamed (stream.py: its blocks' loop, the hints for its two planes' lines a
    # block on, the interior's copy, the copy out's head, lines and tail loops) or not (the interior itself);
    # the other edge loop
    assert len(loops) == 10 and "nontemporal" in loops[6] and "prefetch" in loops[2] + loops[3], lanes
    for interior in (loops[4], loops[8]):
        assert "arith.minsi" not in interior and "arith.cmpi eq" not in interior, interior
    for general in (loops[0], loops[9]):
        assert "arith.minsi" in general and "arith.cmpi eq" in general, general
    with_param = runs_param.mlir(after="canonicalize", stage=1)
    loops = with_param[with_param.index("func.func @runs_param_2_lanes"):].split("scf.for")[2:]
    for interior in (loops[4], loops[8]):
        assert "arith.minsi" in interior  # a Param is not known to be the lane count: its clamp stays


def test_an_axis_labelled_extent_is_a_coordinate():
    x = np.arange(5.0)
    bt_same_bits(np.asarray(eagle.deploy(named_extent).run(x=x)), x + np.arange(5.0), "lane.extent as a coordinate")


def _kernel_error(body: str, folder) -> str:
    path = folder / "user_kernel.py"
    path.write_text("import hawk\nimport hawk.math as m\nfrom hawk import Grid, Scalar, Mutable\n\n"
                    "@hawk.kernel\ndef bad(lane: Grid[\"row\", \"col\":3], x: Scalar, y: Mutable[Scalar]):\n"
                    f"    y = {body}\n")
    spec = importlib.util.spec_from_file_location("hawk_user_kernel", path)
    with pytest.raises(KernelError) as info:  # (refused where @hawk.kernel builds the IR)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    return str(info.value)


@pytest.mark.parametrize("body,says", [
    ('x * float(lane.extent("sample"))', r"grid 'lane' has axes \['row', 'col'\]; there is no axis 'sample'"),
    ("x * float(lane.extent(2))", r"has 2 axis\(es\) \['row', 'col'\]: position 2 is outside"),
    ('x * float(lane.extent("row", "col"))', r"takes one axis, by label or position"),
    ('x * float(lane.extent(axis="row"))', r"takes one axis, by label or position"),
    ("x * float(lane.extent(lane.col))", r"takes an axis label \(a string\) or a constant position"),
])
def test_bad_extents_name_the_kernel_line_and_the_fix(body, says, tmp_path):
    msg = _kernel_error(body, tmp_path)
    assert "user_kernel.py:7" in msg and "'bad'" in msg, msg
    assert 'lane.extent("row")' in msg, msg
    assert re.search(says, msg), msg


def test_an_artifact_reads_the_extent_at_run_time(tmp_path):
    hawk.artifact.build_bundle([runs_extent], tmp_path, targets=("host",), dtypes=("float64",))
    k, x = _runs_data(2 * SCAN_BLOCK + 3, 11)
    got = np.asarray(hawk.run(hawk.load(tmp_path, runs_extent.name), k=k, x=x))
    bt_same_bits(got, _runs_reference(k, x), "artifact against a loop")


def test_the_reverse_treats_the_extent_as_a_constant():
    x = np.random.default_rng(5).normal(size=37)
    grads = eagle.deploy(scaled_total).reverse(1.0, x=x)
    bt_same_bits(np.asarray(grads["x"]), np.full(37, 37.0), "d/dx of sum(x * L)")


@pytest.mark.parametrize("kernel", [flags, runs_extent, grid2])
def test_spirv_gives_the_hosts_bits(kernel):
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    if kernel is grid2:
        x = np.random.default_rng(7).integers(-64, 64, size=(6, 5)) / 4.0  # exact sums: any order, same bits
        planes = dict(x=x, r=6)
    elif kernel is flags:
        planes = dict(x=np.random.default_rng(8).normal(size=5000))
    else:
        k, x = _runs_data(2 * SCAN_BLOCK + 11, 9)
        planes = dict(k=k, x=x)
    want = eagle.deploy(kernel).run(**planes)
    got = eagle.deploy(kernel, target="spirv").run(**planes)
    if isinstance(want, dict):
        bt_same_bits({n: np.asarray(v) for n, v in got.items()}, {n: np.asarray(v) for n, v in want.items()},
                     f"{kernel.name}: spirv against host")
    else:
        bt_same_bits(np.asarray(got), np.asarray(want), f"{kernel.name}: spirv against host")
