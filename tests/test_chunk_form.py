"""chunk-form: the loop shape of a chunk is a decision written in the IR (hawk.chunk_form), picked from the stage's
layout and body, and the lowering takes any shape that fits: the faster shapes (nested, column, rows, scan) give
the flat loop's answers, and a shape that does not fit is refused in one line."""

import numpy as np
import pytest

import eagle
import hawk
import hawk.math as m
from hawk import Grid, Mutable, Scalar
from hawk.abi import cache
from hawk.opt import run as opt_run
from hawk.passes import chunk_form


def _kernels() -> dict:
    """Fresh kernel objects (each keeps its own lowered code), one per shape chunk-form picks."""

    @hawk.kernel
    def cf_nested(g: Grid["row", "col":64], x: Scalar) -> Scalar:
        return hawk.max(m.abs(x) - 1.0, over="col")

    @hawk.kernel
    def cf_nested_sum(g: Grid["row", "col":64], x: Scalar) -> Scalar:
        return hawk.sum(x * x, over="col")

    @hawk.kernel
    def cf_nested_ordered(g: Grid["row", "col":64], x: Scalar) -> Scalar:
        return hawk.sum(x * x, over="col", policy="ordered")  # (the host: TwoSum pairs in registers)

    @hawk.kernel
    def cf_short(g: Grid["row", "col":3], x: Scalar) -> Scalar:
        return hawk.min(x, over="col", where=x > -1.5)  # (short slots: straight-line copies, _short_slots)

    @hawk.kernel
    def cf_short_mean(g: Grid["row", "col":3], x: Scalar) -> Scalar:
        return hawk.mean(x * 2.0, over="col", where=x > -1.5)

    @hawk.kernel
    def cf_column(g: Grid["row", "col":16], x: Scalar) -> Scalar:
        return hawk.min(x * 2.0, over="row")

    @hawk.kernel
    def cf_rows(g: Grid["row", "col":32], u: Scalar) -> Scalar:
        return u.at(col=g.col - 1) - 2.0 * u + u.at(col=g.col + 1) + u.at(row=g.row + 1) * 0.5

    @hawk.kernel
    def cf_scan(x: Scalar, start: Scalar, y: Mutable[Scalar]):
        y = hawk.scan(x * x, reset=start > 0.5)

    @hawk.kernel
    def cf_blocked(x: Scalar, t: Mutable[Scalar]):
        t = hawk.sum(m.sin(x), policy="ordered")

    @hawk.kernel
    def cf_flat(x: Scalar, y: Mutable[Scalar]):
        y = x * 3.0

    return {k.name: k for k in (cf_nested, cf_nested_sum, cf_nested_ordered, cf_short, cf_short_mean, cf_column,
                                cf_rows, cf_scan, cf_blocked, cf_flat)}


SHAPES = {"cf_nested": "nested", "cf_nested_sum": "nested", "cf_nested_ordered": "nested", "cf_short": "nested",
          "cf_short_mean": "nested",
          "cf_column": "column", "cf_rows": "rows", "cf_scan": "scan",
          "cf_blocked": "blocked", "cf_flat": "flat"}
ROWS = 2_003  # rows of each grid: chunks cut them (min_chunk below)


def _planes(name: str, rng) -> dict:
    if name in ("cf_nested", "cf_nested_sum", "cf_nested_ordered"):
        return {"x": rng.standard_normal((ROWS, 64))}
    if name == "cf_column":
        return {"x": rng.standard_normal((ROWS, 16))}
    if name in ("cf_short", "cf_short_mean"):
        x = rng.standard_normal((8 * ROWS, 3))  # (enough lanes for chunks of 4096)
        x[5, 1], x[7] = np.nan, [-0.0, 0.0, -0.0]  # (a NaN, and zeros of both signs: max/min's own bits)
        return {"x": x}
    if name == "cf_rows":
        return {"u": rng.standard_normal((ROWS, 32))}
    if name == "cf_scan":
        n = 50_001
        return {"x": rng.standard_normal(n), "start": rng.random(n) ** 8}
    return {"x": rng.standard_normal(30_001)}


def _form_of(kernel, stage: int, pairs: bool = True) -> str:
    passes = f"verify-hawk,plan-buffers,chunk-form{{pairs={str(pairs).lower()}}}"
    text = opt_run(kernel.mlir(stage=stage), passes=passes)
    return text.split('hawk.chunk_form = "', 1)[1].split('"', 1)[0]


def _last_stage(kernel) -> int:
    return len(kernel.stages(kernel.default_spec())) - 1


@pytest.mark.parametrize("name", list(SHAPES))
def test_chunk_form_picks_each_shape(name):
    kernel = _kernels()[name]
    assert _form_of(kernel, _last_stage(kernel)) == SHAPES[name]


def test_gpu_chunks_take_no_two_float_chains():
    # without pairs (GPU threads: ordered terms go to the exact accumulators one by one) an ordered sum is flat
    assert _form_of(_kernels()["cf_blocked"], 0, pairs=False) == "flat"
    assert _form_of(_kernels()["cf_nested_ordered"], 0, pairs=False) == "flat"  # (ordered kept sums too)


def _runs(kernels: dict, name: str, planes: dict) -> dict:
    out = {}
    for t in (1, 2):
        plan = eagle.deploy(kernels[name], threads=t, min_chunk=4096)
        got = plan.run(**{k: v.copy() for k, v in planes.items()})
        if t > 1:
            assert max(plan.last_chunks) > 1, plan.last_chunks
        out[t] = {k: np.asarray(v) for k, v in got.items()} if isinstance(got, dict) else {"": np.asarray(got)}
    return out


@pytest.mark.parametrize("name", ["cf_nested", "cf_nested_sum", "cf_short", "cf_short_mean", "cf_column", "cf_rows",
                                  "cf_scan"])
def test_the_flat_loop_gives_what_each_faster_shape_gives(name, monkeypatch, tmp_path):
    rng = np.random.default_rng(11)
    planes = _planes(name, rng)
    picked = _kernels()
    stage = _last_stage(picked[name])
    want = _runs(picked, name, planes)
    code = picked[name].lowered(picked[name].default_spec(), stage).llvm_ir

    # every stage's chunk now runs the flat loop: a binary of its own (another compiler fingerprint, no disk cache)
    monkeypatch.setattr(chunk_form, "pick", lambda *a: "flat")
    monkeypatch.setattr(cache, "compiler_fingerprint", lambda: "flat-chunk-form")
    monkeypatch.setenv("HAWK_CACHE_DIR", str(tmp_path))
    flat = _kernels()
    assert _form_of(flat[name], stage) == "flat"
    assert flat[name].lowered(flat[name].default_spec(), stage).llvm_ir != code  # (really another loop)
    got = _runs(flat, name, planes)
    for t in (1, 2):
        for k, w in want[t].items():
            if name in ("cf_nested_sum", "cf_short_mean"):  # an "auto" sum: the contract's bound, not bits
                np.testing.assert_allclose(got[t][k], w, rtol=1e-13)
            else:  # max, min, a stencil's lanes, a scan's running values: the same bits
                assert got[t][k].tobytes() == w.tobytes(), (name, t, k)


@pytest.mark.parametrize("base, count", [(4, 2102), (3, 2101), (4, 2100), (3, 2100), (1, 1), (7, 2)])
def test_short_slots_cut_by_a_lane_range_give_what_the_flat_loop_gives(base, count, monkeypatch, tmp_path):
    """run(base=, count=) may start or end inside a kept slot: _short_slots runs those slots lane by lane (a head
    and a tail loop), the whole ones as copies."""
    x = _planes("cf_short", np.random.default_rng(12))["x"]
    outs = {}
    for form in ("picked", "flat"):
        if form == "flat":
            monkeypatch.setattr(chunk_form, "pick", lambda *a: "flat")
            monkeypatch.setattr(cache, "compiler_fingerprint", lambda: "flat-chunk-form")
            monkeypatch.setenv("HAWK_CACHE_DIR", str(tmp_path))
        kernels = _kernels()
        assert _form_of(kernels["cf_short"], 0) == ("nested" if form == "picked" else "flat")
        outs[form] = [np.asarray(eagle.deploy(kernels[n], threads=1).run(base=base, count=count, x=x.copy()))
                      for n in ("cf_short", "cf_short_mean")]
    assert outs["picked"][0].tobytes() == outs["flat"][0].tobytes()
    np.testing.assert_allclose(outs["picked"][1], outs["flat"][1], rtol=1e-13)
    row = (base + 2) // 3  # the first whole row inside the range: NumPy's min of it
    if 3 * row + 3 <= base + count:
        vals = x[row][x[row] > -1.5]
        expect = np.nan if np.isnan(vals).any() else vals.min()
        assert outs["picked"][0][row] == expect or (np.isnan(expect) and np.isnan(outs["picked"][0][row]))


def test_a_shape_that_does_not_fit_is_refused_in_one_line():
    kernel = _kernels()["cf_blocked"]
    text = opt_run(kernel.mlir(stage=0), passes="verify-hawk,plan-buffers,chunk-form")
    assert 'hawk.chunk_form = "blocked"' in text
    for bad, words in (("flat", "= 'flat' does not fit this stage; write 'blocked'"),
                       ("nested", "= 'nested' does not fit this stage; write 'blocked'"),
                       ("spiral", "forms are flat, blocked, nested, column, rows, scan")):
        with pytest.raises(ValueError, match=words) as err:
            opt_run(text.replace('"blocked"', f'"{bad}"'), passes="build-finish,lower-chunk-loop")
        assert "lower-chunk-loop: kernel func 'cf_blocked'" in str(err.value) and "\n" not in str(err.value)
    nested = _kernels()["cf_nested"]
    text = opt_run(nested.mlir(stage=0), passes="verify-hawk,plan-buffers,chunk-form")
    with pytest.raises(ValueError, match="'column' does not fit this stage; write 'nested' or 'flat'"):
        opt_run(text.replace('"nested"', '"column"'), passes="build-finish,lower-chunk-loop")
    assert "_lanes" in opt_run(text.replace('"nested"', '"flat"'), passes="build-finish,lower-chunk-loop")
