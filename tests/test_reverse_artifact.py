"""The reverse in artifacts (docs/reverse.md, "Artifacts"): hawk.artifact.build(..., reverse=True) publishes the
adjoint beside the kernel, and `hawk.load(dir, name).reverse(...)` gives plan.reverse's gradients bit for bit,
in a process where MLIR cannot be imported. Also: the sidecar's reverse entry against the schema (hawk's validator
and jsonschema agree), refusals (extents, wrt, no reverse built, a tampered entry), planes named like the door's
arguments, and bound ranges.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from test_artifact_integrity import _mutations, _reference

import eagle
import hawk
import hawk.artifact
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar, Vector
from hawk.abi.artifact import schema as hschema
from hawk.abi.artifact.format import content_hash
from hawk.artifact import ArtifactError

ROOT = Path(__file__).resolve().parent.parent
RNG = np.random.default_rng(813)


@hawk.kernel
def ra_smooth(x: Scalar, w: Scalar, a: Param) -> Scalar:
    y = m.sin(x) * w + a * m.exp(-x * x)
    if x > 0.1:
        y = y * m.sqrt(x + 1.0)
    return y * y


@hawk.kernel
def ra_stencil(g: Grid["r", "c":4], u: Scalar, k: Param) -> Scalar:
    lap = u.at(r=g.r + 1) + u.at(r=g.r - 1) + u.at(c=g.c + 1) + u.at(c=g.c - 1) - 4.0 * u
    return m.sin(lap * k)


@hawk.kernel
def ra_store(x: Scalar, k: Index, h: Mutable["slot":3], total: Mutable[Scalar]):
    hawk.scatter(h)[k] = x * x * 3.0
    total = hawk.sum(x * m.cos(x))


@hawk.kernel
def ra_centred(x: Scalar, w: Scalar) -> Scalar:
    d = x - hawk.mean(x)
    return d * w / m.sqrt(hawk.sum(d * d) + 1.0)


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def cases():
    """(kernel, cotangent, planes) for each published kernel."""
    n = 300
    x, w = RNG.normal(size=n), RNG.normal(size=n)
    u = RNG.normal(size=(6, 4))
    xs = RNG.normal(size=9)
    k = np.array([0, 2, 0, -1, 2, 1, 2, 0, 1], dtype=np.int32)
    return {
        "ra_smooth": (RNG.normal(size=n), dict(x=x, w=w, a=0.7)),
        "ra_stencil": (RNG.normal(size=(6, 4)), dict(u=u, k=0.8)),
        "ra_store": ({"h": np.array([1.0, 2.0, 4.0]), "total": 0.5}, dict(x=xs, k=k, h=np.full(3, 7.0))),
        "ra_centred": (RNG.normal(size=n), dict(x=x, w=np.abs(w))),
    }


CASES = cases()
KERNELS = {"ra_smooth": ra_smooth, "ra_stencil": ra_stencil, "ra_store": ra_store, "ra_centred": ra_centred}


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("reverse_artifacts")
    hawk.artifact.build(ra_smooth, d, dtypes=("float64", "float32"), reverse=True)
    hawk.artifact.build(ra_stencil, d, reverse=True, reverse_extents=(6, 4))
    hawk.artifact.build(ra_store, d, reverse=True)
    hawk.artifact.build_bundle([ra_centred], d, reverse=("x",))
    return d


def want_grads(name: str, threads: int = 2, min_chunk: int = 16):
    ct, planes = CASES[name]
    plan = eagle.deploy(KERNELS[name], threads=threads)
    plan.min_chunk = min_chunk
    wrt = ("x",) if name == "ra_centred" else None
    return plan.reverse(ct, wrt, **planes)


@pytest.mark.parametrize("name", sorted(CASES))
def test_loaded_reverse_has_plan_reverse_bits(published, name):
    ct, planes = CASES[name]
    want = {k: np.asarray(v).copy() for k, v in want_grads(name).items()}
    for threads in (1, 3):
        art = hawk.load(published, name, threads=threads, min_chunk=16)
        got = art.reverse(ct, **planes)
        assert sorted(got) == sorted(want)
        for k in want:
            assert same_bits(got[k], want[k]), (name, threads, k)
    if name == "ra_store":  # the winners kernel ran: only the last store into a slot gets its cotangent
        x, k = planes["x"], planes["k"]
        won = np.isin(np.arange(9), [6, 7, 8])  # the last lanes into slots 2, 0, 1
        lane = np.where(won, 6.0 * x * ct["h"][np.maximum(k, 0)], 0.0) + 0.5 * (np.cos(x) - x * np.sin(x))
        np.testing.assert_allclose(np.asarray(want["x"]), lane, rtol=1e-13)
        np.testing.assert_array_equal(np.asarray(want["h"]), [0.0, 0.0, 0.0])  # every slot was replaced
    if name == "ra_centred":
        assert art.reverse_wrt == ("x",) and art._reverse.adjoint.stage_count > 1  # a staged adjoint


def test_a_float32_build_has_the_float32_reverse(published):
    ct, planes = CASES["ra_smooth"]
    p32 = {k: np.asarray(v, np.float32) for k, v in planes.items()}
    want = eagle.deploy(ra_smooth).reverse(ct.astype(np.float32), **p32)
    got = hawk.load(published, "ra_smooth").reverse(ct.astype(np.float32), **p32)
    for k in want:
        assert np.asarray(got[k]).dtype == np.float32 and same_bits(got[k], want[k]), k


NO_MLIR = textwrap.dedent("""
    import importlib.abc, json, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "mlir" or name.startswith("mlir."):
                raise ImportError("mlir is blocked in this process: " + name)
            return None

    sys.meta_path.insert(0, Block())
    import numpy as np
    import hawk

    d, cases = sys.argv[1], json.loads(sys.argv[2])
    out = {}
    for name, (ct, planes) in cases.items():
        planes = {k: np.asarray(v, dtype=np.int32 if (name, k) == ("ra_store", "k") else np.float64)
                  for k, v in planes.items()}
        ct = {k: np.asarray(v) for k, v in ct.items()} if isinstance(ct, dict) else np.asarray(ct)
        art = hawk.load(d, name, threads=2, min_chunk=16)
        out[name] = {k: np.asarray(v).tobytes().hex() for k, v in art.reverse(ct, **planes).items()}
    assert "hawk.compiler" not in sys.modules and "hawk.reverse" not in sys.modules
    assert not [m for m in sys.modules if m == "mlir" or m.startswith("mlir.")]
    print(json.dumps(out))
""")


def _jsonable(v):
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return np.asarray(v).tolist()


def test_loaded_reverse_runs_without_mlir(published):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    arg = json.dumps({n: [_jsonable(ct), _jsonable(p)] for n, (ct, p) in CASES.items()})
    r = subprocess.run([sys.executable, "-c", NO_MLIR, str(published), arg], capture_output=True, text=True,
                       env=env, cwd=str(published), timeout=240)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    for name in CASES:
        want = want_grads(name)
        assert got[name] == {k: np.asarray(v).tobytes().hex() for k, v in want.items()}, name


def test_reverse_sidecar_fits_the_schema_and_the_validators_agree(published):
    ref = _reference()
    for name in ("ra_store", "ra_stencil"):
        sc = json.loads((published / f"{name}.json").read_text())
        assert "reverse" in sc and not list(ref.iter_errors(sc))
        rev = sc["reverse"]
        assert rev["kernel"] == f"{name}__reverse" and (rev["winners"] is not None) == (name == "ra_store")
        for s in _mutations({"reverse": rev}):  # every field of the reverse entry edited in turn
            full = {**sc, **s} if "reverse" in s else {k: v for k, v in sc.items() if k != "reverse"}
            try:
                hschema.validate(full)
                ours = True
            except hschema.Invalid:
                ours = False
            assert ours == ref.is_valid(full), s.get("reverse")


def _rewrite(d: Path, name: str, mutate) -> None:
    p = d / f"{name}.json"
    sc = json.loads(p.read_text())
    mutate(sc)
    sc["content_hash"] = content_hash(sc)
    p.write_text(json.dumps(sc))


@pytest.fixture
def copy(published, tmp_path) -> Path:
    import shutil

    d = tmp_path / "art"
    shutil.copytree(published, d)
    return d


@hawk.kernel
def ra_linear(g: Grid["i"], x: Scalar, a: Param) -> Scalar:
    return (x.at(i=g.i - 1) + x.at(i=g.i + 1) + x) * a


def test_a_stencil_artifact_gathers_its_gradient_as_plan_reverse_does(published, tmp_path):
    """A stencil's published reverse holds the gather form (shares adjoint, gather, Param sums: docs/reverse.md),
    which the loaded door runs, with plan.reverse's bits; where a lane's pair errs it runs the published adjoint."""
    from eagle.reverse import Reverse
    from hawk.abi.artifact.format import describe

    sc = json.loads((published / "ra_stencil.json").read_text())
    assert "ra_stencil__param_sums (gather form)" in describe(sc)  # (what `hawk-artifact show` prints)
    g = sc["reverse"]["gather"]
    assert [g[k]["kernel"] for k in ("shares", "gather", "sums")] == \
        ["ra_stencil__reverse_shares", "ra_stencil__gather", "ra_stencil__param_sums"]
    assert g["grad"] == {"u": "grad_u"} and list(g["sum_planes"]) == ["grad_k"]
    ct, planes = CASES["ra_stencil"]
    art = hawk.load(published, "ra_stencil", threads=2, min_chunk=8)
    rev = Reverse(art, planes, None, art._reverse)
    got = rev(ct)
    assert rev.gather_run is not None and rev.exact_calls == 0 and len(art.last_reverse_chunks) == 3
    want = want_grads("ra_stencil")
    assert all(same_bits(got[k], want[k]) for k in want)
    # lane 5 of ra_linear gathers ct[4] + ct[5] + ct[6] (a = 1): 1e30 + 1 + 1e-30 spans more than two doubles
    hawk.artifact.build(ra_linear, tmp_path, reverse=True, reverse_extents=(40,))
    x = np.random.default_rng(3).normal(size=40)
    art = hawk.load(tmp_path, "ra_linear", threads=2, min_chunk=8)
    rev = Reverse(art, {"x": x, "a": 1.0}, None, art._reverse)
    plan = eagle.deploy(ra_linear, threads=2, min_chunk=8)
    for calls, special in enumerate(([1e30, 1.0, 1e-30], [np.nan, 0.0, 1.0], None)):
        ct = np.random.default_rng(4).normal(size=40)
        if special is not None:
            ct[4:7] = special
        got = {k: np.asarray(v).copy() for k, v in rev(ct).items()}
        assert rev.exact_calls == min(calls + 1, 2), special
        want = plan.reverse(ct, x=x, a=1.0)
        assert all(same_bits(got[k], want[k]) for k in want), special
    assert np.asarray(got["x"])[5] == float(np.sum(ct[4:7]))  # (gathered again: ordinary terms)


@hawk.kernel
def ra_vline(g: Grid["i"], v: Vector[2], a: Param) -> Vector[2]:
    return (v.at(i=g.i - 1) + v.at(i=g.i + 1) + v * v.at(i=g.i + 2)) * a


def test_a_vector_stencil_artifact_gathers_its_gradient_too(tmp_path):
    """A Vector plane's gather form is published like a Scalar's (share planes of its components); the loaded door
    runs it with plan.reverse's bits, and where a component's pair errs (lane 5's second: 1e30 + 1 + 1e-30), the
    published adjoint."""
    from eagle.reverse import Reverse

    hawk.artifact.build(ra_vline, tmp_path, reverse=True, reverse_extents=(40,))
    g = json.loads((tmp_path / "ra_vline.json").read_text())["reverse"]["gather"]
    assert g["grad"] == {"v": "grad_v"}, g
    planes = {"v": np.random.default_rng(5).normal(size=(2, 40)), "a": 0.5}
    art = hawk.load(tmp_path, "ra_vline", threads=2, min_chunk=8)
    rev = Reverse(art, planes, None, art._reverse)
    plan = eagle.deploy(ra_vline, threads=2, min_chunk=8)
    for calls, special in enumerate((None, [1e30, 1.0, 1e-30])):
        ct = np.random.default_rng(6).normal(size=(2, 40))
        if special is not None:
            ct[1, 4:7] = special
        got = {k: np.asarray(v).copy() for k, v in rev(ct).items()}
        assert rev.gather_run is not None and rev.exact_calls == calls, special
        want = plan.reverse(ct, **planes)
        assert all(same_bits(got[k], want[k]) for k in want), special


@pytest.mark.parametrize("mutate, words", [
    (lambda sc: sc["reverse"]["gather"]["grad"].update(k="grad_k"), "reverse.gather.grad.k must name a per-lane"),
    (lambda sc: sc["reverse"]["gather"].update(sums=None), "name a Param sums kernel exactly when"),
    (lambda sc: sc["reverse"]["gather"].update(flag="u"), "names a share plane or the flag twice"),
    (lambda sc: sc["reverse"].update(extents=None), "made for fixed lane extents"),
    (lambda sc: sc["reverse"]["gather"]["gather"].update(content_hash="0" * 64), "not the pinned"),
    (lambda sc: sc["reverse"]["gather"].update(share_planes=["share0_grad_u", "nope"]),
     "'ra_stencil__reverse_shares' has no output plane 'nope'"),
])
def test_a_wrong_gather_entry_is_refused(copy, mutate, words):
    _rewrite(copy, "ra_stencil", mutate)
    with pytest.raises(ArtifactError, match=words):
        hawk.load(copy, "ra_stencil")


@pytest.mark.parametrize("mutate, words", [
    (lambda sc: sc["reverse"].update(wrt=["k"]), "reverse.wrt names 'k', which is not a float input"),
    (lambda sc: sc["reverse"].update(winners=None), "must name a winners kernel exactly when"),
    (lambda sc: sc["reverse"]["ct"].update(h="x"), "names an adjoint plane twice, or one that is a plane"),
    (lambda sc: sc["reverse"].update(kernel="ra_store"), "which must differ from each other"),
    (lambda sc: sc["reverse"].update(passes={"total": 1}), "reverse.passes.total must name a sink of win"),
    (lambda sc: sc["reverse"].update(passes={"h": 0}), "reverse.passes.h"),
    (lambda sc: sc["reverse"].update(content_hash="0" * 64), "not the pinned"),
])
def test_a_wrong_reverse_entry_is_refused(copy, mutate, words):
    _rewrite(copy, "ra_store", mutate)
    with pytest.raises(ArtifactError, match=words):
        hawk.load(copy, "ra_store")


def test_a_changed_adjoint_sidecar_is_refused_by_the_pinned_hash(copy):
    _rewrite(copy, "ra_smooth__reverse", lambda sc: sc["outputs"].update())  # rewritten: same fields, new bytes
    hawk.load(copy, "ra_smooth")  # the same content: the same hash
    _rewrite(copy, "ra_smooth__reverse", lambda sc: sc.update(hawk_version=sc["hawk_version"] + "+x"))
    with pytest.raises(ArtifactError, match="not the pinned"):
        hawk.load(copy, "ra_smooth")


def test_refusals_name_the_kernel_and_what_to_do(published, tmp_path):
    ct, planes = CASES["ra_stencil"]
    with pytest.raises(ValueError, match=r"kernel 'ra_stencil'.*reverse_extents=\(r, c\)"):
        hawk.artifact.build(ra_stencil, tmp_path, reverse=True)
    with pytest.raises(ValueError, match="fixes at 4"):
        hawk.artifact.build(ra_stencil, tmp_path, reverse=True, reverse_extents=(6, 5))
    with pytest.raises(ValueError, match="'k', which is not a float input of kernel 'ra_store'"):
        hawk.artifact.build(ra_store, tmp_path, reverse=("k",))
    art = hawk.load(published, "ra_stencil")
    with pytest.raises(eagle.InputError, match=r"built for lane extents \(6, 4\).*reverse_extents=\(5, 4\)"):
        art.reverse(np.zeros((5, 4)), u=np.zeros((5, 4)), k=1.0)
    art = hawk.load(published, "ra_centred")
    with pytest.raises(eagle.InputError, match=r"plane 'w' of kernel 'ra_centred'.*built for \['x'\]"):
        art.reverse(CASES["ra_centred"][0], ("w",), **CASES["ra_centred"][1])
    hawk.artifact.build(ra_smooth, tmp_path)
    with pytest.raises(eagle.InputError, match="kernel 'ra_smooth': this artifact was built without its reverse"):
        hawk.load(tmp_path, "ra_smooth").reverse(*CASES["ra_smooth"][:1], **CASES["ra_smooth"][1])


# ======================================================================= the door's argument names, ranges
@hawk.kernel
def ra_named(wrt: Scalar, cotangent: Scalar, a: Param) -> Scalar:
    return wrt * cotangent * a


def test_planes_named_wrt_and_cotangent_pass_by_keyword():
    wrt, cot, ct = RNG.normal(size=5), RNG.normal(size=5), RNG.normal(size=5)
    plan = eagle.deploy(ra_named)
    g = plan.reverse(ct, wrt=wrt, cotangent=cot, a=2.0)  # the planes by keyword, the cotangent positionally
    np.testing.assert_allclose(np.asarray(g["wrt"]), ct * cot * 2.0, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(g["cotangent"]), ct * wrt * 2.0, rtol=1e-15)
    only = plan.reverse(ct, ("a",), wrt=wrt, cotangent=cot, a=2.0)  # wrt= selection positionally
    assert sorted(only) == ["a"] and np.asarray(only["a"])[0] == pytest.approx(float(np.sum(ct * wrt * cot)))
    with pytest.raises(eagle.InputError, match="kernel 'ra_named'.*plane named 'cotangent'"):
        plan.reverse(wrt=wrt, cotangent=cot, a=2.0)
    x, w = RNG.normal(size=4), RNG.normal(size=4)  # other kernels keep taking cotangent= and wrt= by keyword
    g = eagle.deploy(ra_smooth).reverse(cotangent=np.ones(4), wrt=("w",), x=x, w=w, a=1.0)
    assert sorted(g) == ["w"]


def test_a_bound_range_is_differentiated_as_its_slices():
    x, w = RNG.normal(size=20), RNG.normal(size=20)
    plan = eagle.deploy(ra_smooth)
    got = plan.bind(base=4, count=10, x=x, w=w, a=1.0).reverse(np.ones(20))  # (tests/test_reverse_range.py)
    cut = plan.reverse(np.ones(10), x=x[4:14], w=w[4:14], a=1.0)
    assert same_bits(np.asarray(got["a"]), np.asarray(cut["a"]))
    assert same_bits(np.asarray(got["x"])[4:14], np.asarray(cut["x"])) and not np.any(np.asarray(got["x"])[:4])
    full = plan.bind(x=x, w=w, a=1.0).reverse(np.ones(20))
    assert same_bits(full["x"], plan.reverse(np.ones(20), x=x, w=w, a=1.0)["x"])


CLI_KERNELS = textwrap.dedent("""
    import hawk
    import hawk.math as m
    from hawk import Grid, Scalar


    @hawk.kernel
    def cl_heat(g: Grid["r", "c":3], u: Scalar) -> Scalar:
        return m.sin(u.at(r=g.r + 1) - u)
""")


def test_the_command_line_builds_the_reverse(tmp_path):
    (tmp_path / "clk.py").write_text(CLI_KERNELS)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "hawk.artifact", "build", *args], capture_output=True,
                              text=True, cwd=tmp_path, env=env, timeout=300)

    r = cli("--reverse", "--out", "out", "clk.py:cl_heat")
    assert r.returncode == 2 and "reverse_extents=(r, c)" in r.stderr, r.stderr
    r = cli("--reverse", "--reverse-extents", "4,3", "--out", "out", "clk.py:cl_heat")
    assert r.returncode == 0, r.stderr
    u, ct = RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3))
    got = hawk.load(tmp_path / "out", "cl_heat").reverse(ct, u=u)["u"]
    down = np.concatenate([u[1:], u[-1:]])  # u.at(r + 1), clamped
    s = ct * np.cos(down - u)
    want = -s
    want[1:] += s[:-1]
    want[-1] += s[-1]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-13, atol=1e-15)


def test_a_spirv_artifact_has_the_spirv_plans_reverse_bits(tmp_path):
    ct, planes = CASES["ra_stencil"]
    try:
        want = eagle.deploy(ra_stencil, "spirv").reverse(ct, **planes)
    except eagle.RuntimeMissing as exc:
        pytest.skip(f"no Vulkan runtime here: {exc}")
    hawk.artifact.build(ra_stencil, tmp_path, targets=("host", "spirv"), reverse=True, reverse_extents=(6, 4))
    got = hawk.load(tmp_path, "ra_stencil", target="spirv").reverse(ct, **planes)
    for k in want:
        assert same_bits(got[k], want[k]), k
