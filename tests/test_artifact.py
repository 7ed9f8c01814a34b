"""hawk.artifact: publishing kernels, loading them back (without MLIR), and refusing artifacts that are not sound."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import bt_ordered_sum

import eagle
import hawk
import hawk.artifact
from hawk import Grid, Index, Matrix, Mutable, Param, Scalar, Sorted, Table, Vector
from hawk.abi.artifact.format import content_hash
from hawk.artifact import ArtifactError

ROOT = Path(__file__).resolve().parent.parent


# ====================================================================================== kernels
@hawk.kernel
def a_energy(x: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(x * x)


@hawk.kernel
def a_energy_ord(x: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(x * x, policy="ordered")


@hawk.kernel
def a_scaled(x: Scalar, w: Scalar, gain: Param, y: Mutable[Scalar], total: Mutable[Scalar]):
    y = gain * x * w
    total = hawk.sum(x * w)


@hawk.kernel
def a_scaled_ord(x: Scalar, w: Scalar, gain: Param, y: Mutable[Scalar], total: Mutable[Scalar]):
    y = gain * x * w
    total = hawk.sum(x * w, policy="ordered")


@hawk.kernel
def a_share(x: Scalar, z: Mutable[Scalar]):
    z = x / hawk.sum(x)  # reads the total: two stages


@hawk.kernel
def a_norm(x: Scalar, tot: Mutable[Scalar], z: Mutable[Scalar]):
    tot = hawk.sum(x)
    z = x / tot  # a user cell that a later stage also reads


@hawk.kernel
def a_norm_ord(x: Scalar, tot: Mutable[Scalar], z: Mutable[Scalar]):
    tot = hawk.sum(x, policy="ordered")
    z = x / tot


@hawk.kernel
def a_vec(v: Vector[3], tot: Mutable[Vector[3]]):
    tot = hawk.sum(v)


@hawk.kernel
def a_vec_ord(v: Vector[3], tot: Mutable[Vector[3]]):
    tot = hawk.sum(v, policy="ordered")


@hawk.kernel
def a_mean(x: Scalar) -> Scalar:
    return hawk.mean(x)


@hawk.kernel
def a_mean_ord(x: Scalar) -> Scalar:
    return hawk.mean(x, policy="ordered")


@hawk.kernel
def a_bins(key: Index, x: Scalar, hist: Mutable["bin":4]):
    hawk.scatter(hist)[key] += x


@hawk.kernel
def a_grid(lane: Grid["band", "tick":6], x: Scalar, w: Table["tick":6]) -> Scalar:
    return hawk.sum(x * w.at(tick=lane.tick), over="tick")


@hawk.kernel
def a_mixed(key: Index, x: Scalar, y: Mutable[Scalar], total: Mutable[Scalar], counts: Mutable["k":5],
            z: Mutable[Scalar]):
    y = 2.0 * x
    hawk.scatter(counts)[key] += x
    total = hawk.sum(x)
    z = x / hawk.mean(x)


@hawk.kernel
def a_vshare(v: Vector[3], tot: Mutable[Vector[3]], z: Mutable[Vector[3]]):
    tot = hawk.sum(v)
    z = v / tot


@hawk.kernel
def a_sorted(key: Sorted[Index], x: Scalar, acc: Mutable["slot":7], acc2: Mutable["slot":7]):
    hawk.scatter(acc, policy="ordered")[key] += x
    hawk.scatter(acc2, policy="plain")[key] += x * x


@hawk.kernel
def a_matrix(mm: Matrix[2, 2], g: Mutable[Matrix[2, 2]], big: Mutable[Scalar]):
    g = hawk.max(mm)
    big = hawk.max(mm.rows[0].sum(axis="components"))


# ====================================================================================== helpers
def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def rewrite(d: Path, name: str, mutate, rehash: bool = True) -> None:
    p = d / f"{name}.json"
    sc = json.loads(p.read_text())
    mutate(sc)
    if rehash:
        sc["content_hash"] = content_hash(sc)
    p.write_text(json.dumps(sc))


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """One directory with a single-stage kernel (float64 and float32), split kernels and a vector cell."""
    d = tmp_path_factory.mktemp("artifacts")
    hawk.artifact.build(a_energy, d, targets=("host",), dtypes=("float64", "float32"))
    hawk.artifact.build(a_scaled, d)
    hawk.artifact.build(a_vec, d)
    hawk.artifact.build(a_mean, d)
    hawk.artifact.build_bundle([a_share, a_norm], d, targets=("host",), dtypes=("float64", "float32"))
    return d


@pytest.fixture
def copy(published, tmp_path) -> Path:
    """A private copy of the published directory, to tamper with."""
    d = tmp_path / "art"
    shutil.copytree(published, d)
    return d


def rng(seed=0):
    return np.random.default_rng(seed)


# ====================================================================================== round trips
def test_single_stage_round_trip(published):
    x, w = rng(1).normal(size=3000), rng(2).normal(size=3000)
    got = hawk.run(hawk.load(published, "a_scaled"), x=x, w=w, gain=1.5)
    want = eagle.deploy(a_scaled).run(x=x, w=w, gain=1.5)
    assert sorted(got) == sorted(want) == ["total", "y"]
    assert same_bits(got["y"], want["y"])
    np.testing.assert_allclose(np.asarray(got["total"]), np.asarray(want["total"]), rtol=1e-12)
    ordered = eagle.deploy(a_scaled_ord).run(x=x, w=w, gain=1.5)
    assert same_bits(got["total"], ordered["total"])


@hawk.kernel
def a_columns(g: Grid["row", "col":6], x: Scalar, k: Index, low: Mutable["slot":5]) -> Scalar:
    hawk.scatter(low)[k] = x
    return hawk.max(x, over="row")


def test_private_copies_round_trip(tmp_path):
    # a column max (a private copy of the kept cell per chunk) and a store by key (a copy and marks per chunk):
    # the sidecar carries the copies' buffers and the loaded artifact gives the compiled kernel's results
    hawk.artifact.build(a_columns, tmp_path, targets=("host",))
    x = rng(9).normal(size=(1000, 6))
    k = ((np.arange(6000, dtype=np.int32) * 7) % 5).reshape(1000, 6)
    got = hawk.run(hawk.load(tmp_path, "a_columns"), x=x, k=k)
    want = eagle.deploy(a_columns).run(x=x, k=k)
    assert same_bits(got["result"], want["result"]) and same_bits(got["low"], want["low"])
    np.testing.assert_array_equal(np.asarray(got["result"]), x.max(axis=0))
    last = {int(key): v for key, v in zip(k.ravel().tolist(), x.ravel().tolist(), strict=True)}
    np.testing.assert_array_equal(np.asarray(got["low"]), [last[s] for s in range(5)])


def test_single_output_comes_back_bare(published):
    x = rng(3).normal(size=777)
    got = hawk.run(hawk.load(published, "a_mean"), x=x)
    assert isinstance(got, eagle.Array) and got.shape == (1,)
    assert same_bits(got, eagle.deploy(a_mean_ord).run(x=x))
    np.testing.assert_allclose(np.asarray(got), [x.mean()], rtol=1e-13)


def test_split_kernel_round_trip(published):
    x = rng(4).uniform(1.0, 2.0, 5000)
    got = hawk.run(hawk.load(published, "a_share"), x=x)
    want = eagle.deploy(a_share).run(x=x)
    assert isinstance(got, eagle.Array)  # the internal cell is not handed back
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-13)
    np.testing.assert_allclose(np.asarray(got), x / x.sum(), rtol=1e-13)


def test_split_kernel_with_a_user_cell_read_later(published):
    x = rng(5).uniform(1.0, 2.0, 5000)
    got = hawk.run(hawk.load(published, "a_norm"), x=x)
    want = eagle.deploy(a_norm_ord).run(x=x)
    assert sorted(got) == ["tot", "z"]
    assert same_bits(got["tot"], want["tot"]) and same_bits(got["z"], want["z"])
    np.testing.assert_allclose(np.asarray(got["z"]), np.asarray(eagle.deploy(a_norm).run(x=x)["z"]), rtol=1e-13)


def test_split_kernel_writes_outputs_in_place(published):
    x = rng(6).uniform(1.0, 2.0, 100)
    z = np.zeros(100)
    hawk.run(hawk.load(published, "a_share"), x=x, z=z)
    np.testing.assert_allclose(z, x / x.sum(), rtol=1e-13)


def test_float32_build(published):
    x = rng(7).normal(size=4000).astype(np.float32)
    lk = hawk.load(published, "a_energy")
    got = hawk.run(lk, x=x)
    assert got.dtype == np.float32
    assert same_bits(got, eagle.deploy(a_energy_ord).run(x=x))
    assert np.asarray(got)[0] == bt_ordered_sum(x * x)
    z = hawk.run(hawk.load(published, "a_share"), x=np.abs(x) + np.float32(1))
    assert z.dtype == np.float32


def test_a_dtype_that_was_not_built_is_refused(published):
    with pytest.raises(eagle.InputError, match=r"built for \['float64'\].*float32"):
        hawk.run(hawk.load(published, "a_scaled"), x=np.ones(4, np.float32), w=np.ones(4, np.float32), gain=1.0)


@pytest.mark.parametrize("base,count", [(0, 10), (100, 2000), (1500, None), (None, 700), (3000, 0)])
def test_base_and_count_on_a_single_stage_artifact(published, base, count):
    x, w = rng(8).normal(size=3000), rng(9).normal(size=3000)
    got = hawk.run(hawk.load(published, "a_scaled"), base=base, count=count, x=x, w=w, gain=2.0)
    want = eagle.deploy(a_scaled).run(base=base, count=count, x=x, w=w, gain=2.0)
    assert same_bits(got["y"], want["y"])
    np.testing.assert_allclose(np.asarray(got["total"]), np.asarray(want["total"]), rtol=1e-12, atol=1e-300)
    ordered = eagle.deploy(a_scaled_ord).run(base=base, count=count, x=x, w=w, gain=2.0)
    assert same_bits(got["total"], ordered["total"])


def test_base_and_count_outside_the_lanes_are_refused(published):
    with pytest.raises(eagle.InputError, match="outside the 10 lanes"):
        hawk.run(hawk.load(published, "a_energy"), base=5, count=6, x=np.ones(10))


def test_kernels_of_every_shape_round_trip(tmp_path):
    kernels = [a_grid, a_mixed, a_vshare, a_sorted, a_matrix]
    hawk.artifact.build_bundle(kernels, tmp_path, dtypes=("float64", "float32"))
    r = rng(30)
    x = r.uniform(1.0, 2.0, 900)
    key = np.sort(r.integers(0, 7, 900)).astype(np.int32)
    runs = {
        "a_grid": dict(x=r.normal(size=(4, 6)), w=r.normal(size=6)),
        "a_mixed": dict(key=key % 5, x=x),
        "a_vshare": dict(v=r.uniform(1.0, 2.0, (3, 900))),
        "a_sorted": dict(key=key, x=x),
        "a_matrix": dict(mm=r.normal(size=(4, 900))),
    }
    for k in kernels:
        for dtype in (np.float64, np.float32):
            planes = {n: (v.astype(dtype) if v.dtype.kind == "f" else v) for n, v in runs[k.name].items()}
            got = hawk.run(hawk.load(tmp_path, k.name), **planes)
            want = eagle.deploy(k).run(**planes)
            if not isinstance(want, dict):
                got, want = {"": got}, {"": want}
            assert sorted(got) == sorted(want), k.name
            for n in want:
                assert got[n].dtype == dtype and got[n].shape == want[n].shape, (k.name, n)
                np.testing.assert_allclose(np.asarray(got[n]), np.asarray(want[n]),
                                           rtol=1e-12 if dtype == np.float64 else 1e-5, err_msg=f"{k.name}.{n}")


# ====================================================================================== split kernels
def test_build_refuses_a_split_kernel(tmp_path):
    with pytest.raises(ValueError, match=r"kernel 'a_share' runs in 2 stages.*hawk\.artifact\.build_bundle") as e:
        hawk.artifact.build(a_share, tmp_path)
    assert not isinstance(e.value, hawk.KernelError)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("extra", [{"base": 1}, {"count": 5}, {"base": 0, "count": 10}])
def test_split_artifact_refuses_base_and_count(published, extra):
    with pytest.raises(eagle.InputError, match=r"'a_share'.*reads a value reduced over every lane, so it runs over "
                                               r"every lane \(no base= or count=\)"):
        hawk.run(hawk.load(published, "a_share"), x=np.ones(10), **extra)


def test_sidecar_stages_and_cells(published):
    sc = json.loads((published / "a_share.json").read_text())
    assert [(s["kernel"], s["cells_in"], s["cells_out"]) for s in sc["stages"]] == [
        ("a_share", [], ["cut0"]), ("a_share_2", ["cut0"], [])]
    assert sc["cells"] == [{"name": "cut0", "internal": True}]
    assert sc["outputs"] == {"z": "lane"}
    norm = json.loads((published / "a_norm.json").read_text())
    assert [(s["kernel"], s["cells_in"], s["cells_out"]) for s in norm["stages"]] == [
        ("a_norm", [], ["tot"]), ("a_norm_2", ["tot"], [])]
    assert norm["cells"] == [{"name": "tot", "internal": False}]
    single = json.loads((published / "a_energy.json").read_text())
    assert [(s["kernel"], s["cells_in"], s["cells_out"]) for s in single["stages"]] == [("a_energy", [], [])]
    assert single["cells"] == [{"name": "total", "internal": False}]


def test_sidecar_fields(published):
    sc = json.loads((published / "a_share.json").read_text())
    assert sc["format"] == hawk.artifact.FORMAT and sc["format_version"] == hawk.artifact.FORMAT_VERSION
    assert sc["hawk_version"] == hawk.__version__ and sc["name"] == "a_share"
    assert sc["planes"] == a_share.signature.to_json()
    assert sc["dtypes"] == ["float64", "float32"] and sc["targets"] == ["host"]
    assert {(b["stage"], b["dtype"], b["target"]) for b in sc["builds"]} == {
        (s, d, "host") for s in ("a_share", "a_share_2") for d in ("float64", "float32")}
    for b in sc["builds"]:
        assert "/" not in b["file"] and (published / b["file"]).is_file()
        assert b["layout"]["name"] == b["stage"]
        assert hashlib.sha256((published / b["file"]).read_bytes()).hexdigest() == b["sha256"]
    assert sc["content_hash"] == content_hash(sc)
    # auto sums over every lane are built ordered
    assert {r["policy"] for b in sc["builds"] for r in b["layout"]["reductions"]} == {"ordered"}


def test_bundle_publishes_single_stage_kernels_too(tmp_path):
    paths = hawk.artifact.build_bundle([a_energy, a_share], tmp_path)
    assert [p.name for p in paths] == ["a_energy.json", "a_share.json"]
    x = rng(10).normal(size=50)
    assert same_bits(hawk.run(hawk.load(tmp_path, "a_energy"), x=x), eagle.deploy(a_energy_ord).run(x=x))


# ====================================================================================== the ordered contract
def test_artifact_sum_is_bitwise_the_ordered_policy_at_every_thread_count(published, monkeypatch):
    x = rng(11).normal(size=200_003) * 10.0 ** rng(12).uniform(-6, 6, 200_003)
    want = eagle.deploy(a_energy_ord, threads=1).run(x=x)
    assert np.asarray(want)[0] == bt_ordered_sum(x * x)
    monkeypatch.delenv("EAGLE_MIN_CHUNK", raising=False)
    for threads in (1, 2, 3):
        for setting in ("min_chunk", "env"):  # small chunks, so that threads > 1 really split the lanes
            if setting == "env":
                monkeypatch.setenv("EAGLE_MIN_CHUNK", "1024")
            cell = np.zeros(1)
            art = hawk.load(published, "a_energy", threads=threads, min_chunk=1024 if setting == "min_chunk" else None)
            monkeypatch.delenv("EAGLE_MIN_CHUNK", raising=False)
            hawk.run(art, x=x, total=cell)
            assert same_bits(cell, want), (threads, setting)
            assert len(art.last_chunks) == 1 and (threads == 1 or art.last_chunks[0] > 1), (setting, art.last_chunks)
    art = hawk.load(published, "a_energy", threads=3)  # the default chunk: 10000 lanes are one chunk
    hawk.run(art, x=x[:10_000])
    assert art.last_chunks == (1,)


def test_scalar_cell_bound_as_the_output(published):
    x = rng(13).normal(size=1000)
    cell = np.zeros(1)
    out = hawk.run(hawk.load(published, "a_energy"), x=x, total=cell)
    assert cell[0] == bt_ordered_sum(x * x) and same_bits(out, cell)


def test_vector_cell_bound_as_the_output(published):
    v = rng(14).normal(size=(3, 2500))
    cell = np.zeros(3)
    out = hawk.run(hawk.load(published, "a_vec"), v=v, tot=cell)
    assert sorted(out) == ["tot_0", "tot_1", "tot_2"]
    want = eagle.deploy(a_vec_ord).run(v=v)
    for c in range(3):
        assert cell[c] == bt_ordered_sum(v[c]) == np.asarray(want[f"tot_{c}"])[0]
        assert np.asarray(out[f"tot_{c}"])[0] == cell[c]


def test_a_cell_of_the_wrong_size_is_refused(published):
    with pytest.raises(eagle.InputError, match="'tot'"):
        hawk.run(hawk.load(published, "a_vec"), v=np.ones((3, 5)), tot=np.zeros(2))


@pytest.mark.skipif(not hasattr(eagle, "reduce") or not hasattr(eagle, "Graph"), reason="eagle.reduce not there yet")
def test_artifact_cell_equals_eagle_reduce_ordered(published):
    xs = rng(15).normal(size=5000)
    cell = np.zeros(1)
    hawk.run(hawk.load(published, "a_energy"), x=xs, total=cell)
    ordered = np.zeros(1)
    eagle.Graph().add_node(eagle.reduce(xs * xs, ordered, policy="ordered"), name="sum").build().launch()
    assert same_bits(cell, ordered)


# ====================================================================================== arguments
def test_unknown_target_lists_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match=r"unknown target 'cuda'.*\['host', 'nvvm', 'rocdl'"):
        hawk.artifact.build(a_energy, tmp_path, targets=("host", "cuda"))


def test_bad_dtype_and_non_kernel_are_refused(tmp_path):
    with pytest.raises(ValueError, match="float16"):
        hawk.artifact.build(a_energy, tmp_path, dtypes=("float16",))
    with pytest.raises(TypeError, match="@hawk.kernel"):
        hawk.artifact.build(lambda x: x, tmp_path)
    with pytest.raises(ValueError, match="two kernels named 'a_energy'"):
        hawk.artifact.build_bundle([a_energy, a_energy], tmp_path)


def test_index_dtypes_are_built_and_checked(tmp_path):
    hawk.artifact.build(a_bins, tmp_path, index_dtypes={"key": "int64"})
    assert json.loads((tmp_path / "a_bins.json").read_text())["index_dtypes"] == {"key": "int64"}
    key = np.array([0, 1, 1, 3, 3, 3], dtype=np.int64)
    x = np.arange(6.0)
    got = hawk.run(hawk.load(tmp_path, "a_bins"), key=key, x=x)
    assert same_bits(got, eagle.deploy(a_bins).run(key=key, x=x))
    with pytest.raises(eagle.InputError, match="built for int64 keys, got int32"):
        hawk.run(hawk.load(tmp_path, "a_bins"), key=key.astype(np.int32), x=x)
    with pytest.raises(ValueError, match="not an Index plane"):
        hawk.artifact.build(a_bins, tmp_path, index_dtypes={"x": "int64"})


def test_run_takes_a_loaded_artifact():
    with pytest.raises(TypeError, match="hawk.load"):
        hawk.run(a_energy, x=np.ones(3))


def test_load_by_name_and_target(published):
    with pytest.raises(ArtifactError, match="no sidecar for kernel 'nothing'"):
        hawk.load(published, "nothing")
    for bad in ("../a_energy", "a_energy.json", "/etc/passwd", ""):
        with pytest.raises(ArtifactError, match="not a kernel name"):
            hawk.load(published, bad)
    with pytest.raises(ArtifactError, match=r"built for targets \['host'\], not 'nvvm'"):
        hawk.load(published, "a_energy", target="nvvm")


def test_content_hash_pin(published):
    sc = json.loads((published / "a_energy.json").read_text())
    assert hawk.load(published, "a_energy", content_hash=sc["content_hash"]).content_hash == sc["content_hash"]
    with pytest.raises(ArtifactError, match="not the pinned"):
        hawk.load(published, "a_energy", content_hash="0" * 64)


# ====================================================================================== tampering
def _set(path, value):
    def mutate(sc):
        obj = sc
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value
    return mutate


def _drop(path):
    def mutate(sc):
        obj = sc
        for k in path[:-1]:
            obj = obj[k]
        del obj[path[-1]]
    return mutate


def _drop_meta(sc):
    lay = sc["builds"][0]["layout"]
    lay["buffers"] = [b for b in lay["buffers"] if b["role"] != "meta"]


TAMPERED = [
    # (id, mutation, rehash, message)
    ("format-tag", _set(["format"], "pickle"), True, "format tag is 'pickle'"),
    ("format-version", _set(["format_version"], 1), True, "format version 1"),
    ("format-version-type", _set(["format_version"], "1"), True, "format version '1'"),
    ("hawk-major", _set(["hawk_version"], "1.0.0"), True, "another major version"),
    ("hawk-version-missing", _drop(["hawk_version"]), True, "another major version"),
    ("missing-field", _drop(["stages"]), True, "'stages' is a required property"),
    ("missing-build-field", _drop(["builds", 0, "sha256"]), True, r"builds\[0\] .*'sha256' is a required property"),
    ("dtypes-not-list", _set(["dtypes"], "float64"), True, "sidecar.dtypes .*is not of type 'array'"),
    ("dtype-unknown", _set(["dtypes"], ["float16"]), True, r"dtypes\[0\] .*is not one of"),
    ("cells-in-type", _set(["stages", 0, "cells_in"], 5), True, r"stages\[0\].cells_in .*not of type 'array'"),
    ("internal-type", _set(["cells", 0, "internal"], "no"), True, "not of type 'boolean'"),
    ("extra-field", _set(["run_this"], "import os"), True, "'run_this' was unexpected"),
    ("role", _set(["builds", 0, "layout", "buffers", 0, "role"], "shell"), True, r"buffers\[0\].role .*is not one of"),
    ("no-meta", _drop_meta, True, "must hold one '#meta' buffer"),
    ("payload-type", _set(["planes", "planes", 0, "payload"], [True]), True, "must be a positive integer"),
    ("plane-name", _set(["planes", "planes", 0, "name"], "os.system"), True, "must be a plain name"),
    ("stage-name", _set(["stages", 0, "kernel"], "other"), True, "must be the kernel's name"),
    ("cell-flag", _set(["cells", 0, "internal"], True), True, "must list each cell with its internal flag"),
    ("sha-format", _set(["builds", 0, "sha256"], "abc"), True, "must be a sha256"),
    ("build-missing", _set(["builds"], []), True, "should be non-empty"),
    ("layout-signature", _set(["builds", 0, "layout", "signature", "returns"], [2]), True, "differs from"),
    ("file-parent", _set(["builds", 0, "file"], "../a_energy.a_energy.float64.host.so"), True, "plain file name"),
    ("file-absolute", _set(["builds", 0, "file"], "/usr/lib/libc.so.6"), True, "plain file name"),
    ("file-subdir", _set(["builds", 0, "file"], "sub/k.so"), True, "plain file name"),
    ("file-backslash", _set(["builds", 0, "file"], "..\\k.so"), True, "plain file name"),
    ("file-dotdot", _set(["builds", 0, "file"], ".."), True, "plain file name"),
    ("content-hash", _set(["builds", 0, "layout", "reductions", 0, "policy"], "auto"), False,
     "content hash does not match"),
    ("content-hash-outputs", _set(["hawk_version"], "0.1.99"), False, "content hash does not match"),
]


@pytest.mark.parametrize("mutate,rehash,message", [t[1:] for t in TAMPERED], ids=[t[0] for t in TAMPERED])
def test_tampered_sidecar_is_refused(copy, mutate, rehash, message):
    rewrite(copy, "a_energy", mutate, rehash)
    with pytest.raises(ArtifactError, match=message) as e:
        hawk.load(copy, "a_energy")
    assert "a_energy.json" in str(e.value)
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize("text,message", [
    ("{not json", "not JSON"),
    ("", "not JSON"),
    ("[1, 2]", "JSON list, not an object"),
    ('"hawk"', "JSON str, not an object"),
    ('{"format": "hawk-artifact", "format": "x"}', "repeats the key 'format'"),
    ('{"format": NaN}', "NaN"),
])
def test_sidecar_that_is_not_a_json_object_is_refused(copy, text, message):
    (copy / "a_energy.json").write_text(text)
    with pytest.raises(ArtifactError, match=message):
        hawk.load(copy, "a_energy")


def test_binary_that_differs_from_its_sha256_is_refused(copy):
    sc = json.loads((copy / "a_energy.json").read_text())
    f = copy / sc["builds"][0]["file"]
    f.write_bytes(f.read_bytes() + b"\0")
    with pytest.raises(ArtifactError, match="does not match the sidecar"):
        hawk.load(copy, "a_energy")


def test_binary_swapped_for_another_kernels_is_refused(copy):
    sc = json.loads((copy / "a_energy.json").read_text())
    other = json.loads((copy / "a_vec.json").read_text())
    shutil.copyfile(copy / other["builds"][0]["file"], copy / sc["builds"][0]["file"])
    with pytest.raises(ArtifactError, match="does not match the sidecar"):
        hawk.load(copy, "a_energy")


def test_missing_binary_is_refused(copy):
    sc = json.loads((copy / "a_share.json").read_text())
    (copy / sc["builds"][-1]["file"]).unlink()
    with pytest.raises(ArtifactError, match="is missing"):
        hawk.load(copy, "a_share")


def test_symlinked_binary_is_refused(copy):
    sc = json.loads((copy / "a_energy.json").read_text())
    f = copy / sc["builds"][0]["file"]
    real = copy.parent / "elsewhere.so"
    shutil.move(f, real)
    os.symlink(real, f)
    with pytest.raises(ArtifactError, match="symbolic link"):
        hawk.load(copy, "a_energy")


def test_binary_that_is_not_a_library_is_refused(copy):
    def mutate(sc):
        f = copy / sc["builds"][0]["file"]
        f.write_bytes(b"not a shared library")
        sc["builds"][0]["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()

    rewrite(copy, "a_energy", mutate)  # consistent hashes: only the loader can tell
    with pytest.raises(ArtifactError, match="does not load on this machine"):
        hawk.load(copy, "a_energy")


def test_binary_loads_from_a_private_copy_without_memfd(published, monkeypatch):
    from eagle import artifact as loader

    monkeypatch.delattr(os, "memfd_create", raising=False)
    monkeypatch.setattr(loader, "_LIBS", {})
    before = set(Path(tempfile.gettempdir()).glob("hawk-artifact-*"))
    x = rng(40).normal(size=100)
    assert same_bits(hawk.run(hawk.load(published, "a_energy"), x=x), eagle.deploy(a_energy_ord).run(x=x))
    assert set(Path(tempfile.gettempdir()).glob("hawk-artifact-*")) == before  # nothing left behind


def test_sidecar_of_another_kernel_is_refused(copy):
    shutil.copyfile(copy / "a_energy.json", copy / "a_other.json")
    with pytest.raises(ArtifactError, match="describes kernel 'a_energy', not 'a_other'"):
        hawk.load(copy, "a_other")


def test_split_sidecar_with_a_stage_reading_an_unwritten_cell_is_refused(copy):
    rewrite(copy, "a_share", _set(["stages", 0, "cells_out"], []))
    with pytest.raises(ArtifactError, match="reads cell 'cut0' that no earlier stage writes"):
        hawk.load(copy, "a_share")


# ====================================================================================== no MLIR
NO_MLIR = textwrap.dedent("""
    import importlib.abc, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "mlir" or name.startswith("mlir."):
                raise ImportError("mlir is blocked in this process: " + name)
            return None

    sys.meta_path.insert(0, Block())
    try:
        import mlir  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("the block does not work")

    import numpy as np
    import hawk

    d = sys.argv[1]
    x = np.random.default_rng(21).normal(size=50_000)
    cell = np.zeros(1)
    energy, share = hawk.load(d, "a_energy", threads=2), hawk.load(d, "a_share", threads=2)
    hawk.run(energy, x=x, total=cell)
    z = hawk.run(share, x=np.abs(x) + 1.0)
    assert "hawk.compiler" not in sys.modules
    assert not [m for m in sys.modules if m == "mlir" or m.startswith("mlir.")]
    assert min(energy.last_chunks + share.last_chunks) > 1, (energy.last_chunks, share.last_chunks)
    print(cell[0].hex(), float(np.asarray(z).sum()).hex())
""")


def test_load_and_run_without_mlir(published):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               EAGLE_MIN_CHUNK="1024")  # threads=2 there splits 50000 lanes into chunks
    r = subprocess.run([sys.executable, "-c", NO_MLIR, str(published)], capture_output=True, text=True, env=env,
                       cwd=str(published), timeout=120)
    assert r.returncode == 0, r.stderr
    x = np.random.default_rng(21).normal(size=50_000)
    total = np.asarray(eagle.deploy(a_energy_ord).run(x=x))[0]
    z = np.asarray(hawk.run(hawk.load(published, "a_share"), x=np.abs(x) + 1.0))
    assert r.stdout.split() == [total.hex(), float(z.sum()).hex()]


def test_import_hawk_and_its_artifact_side_stay_mlir_free():
    code = ("import sys, hawk, hawk.artifact; hawk.load; hawk.run; "
            "print(sorted(m for m in sys.modules if m == 'mlir' or m.startswith('mlir.') or m == 'hawk.compiler'))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
