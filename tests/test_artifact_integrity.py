"""An artifact never runs what its sidecar does not describe, nor on a CPU it was not built for.

Each host library carries its own description (dtype, layout, entries, CPU; for a GPU build's finish, the device
binary's sha256), compared with the sidecar before anything in it is called: a sidecar edited with its content
hash recomputed is refused, not run. The sidecar is validated against the JSON Schema shipped in the package
(hawk's own validator, checked here against the jsonschema package). Host code is built for this machine's CPU
(refused elsewhere) or, with cpu="portable", for the architecture's generic CPU. Tampered loads run in a fresh
process, so a crash would show as a signal.
"""

import copy
import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import hawk
import hawk.artifact
from hawk import Index, Mutable, Scalar
from hawk.abi import cache
from hawk.abi.artifact import format as fmt
from hawk.abi.artifact import schema as hschema
from hawk.abi.artifact.format import content_hash
from hawk.artifact import ArtifactError

ROOT = Path(__file__).resolve().parent.parent


@hawk.kernel
def ai_energy(x: Scalar, total: Mutable[Scalar], y: Mutable[Scalar]):
    total = hawk.sum(x * x)
    y = x * 2.0 + 1.0


@hawk.kernel
def ai_bins(key: Index, v: Scalar, acc: Mutable["slot":16]):
    hawk.scatter(acc)[key] += v


@hawk.kernel
def ai_share(x: Scalar, z: Mutable[Scalar]):
    z = x / hawk.sum(x)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("integrity")
    hawk.artifact.build(ai_energy, d, dtypes=("float64", "float32"))
    hawk.artifact.build(ai_bins, d)
    hawk.artifact.build_bundle([ai_share], d)
    return d


@pytest.fixture
def work(built, tmp_path) -> Path:
    d = tmp_path / "art"
    shutil.copytree(built, d)
    return d


def rewrite(d: Path, name: str, mutate) -> None:
    """Edit the sidecar alone and recompute its content hash, as a careless or hostile editor would."""
    p = d / f"{name}.json"
    sc = json.loads(p.read_text())
    mutate(sc)
    sc["content_hash"] = content_hash(sc)
    p.write_text(json.dumps(sc))


LOAD_AND_RUN = textwrap.dedent("""
    import sys
    import numpy as np
    import hawk
    from hawk.artifact import ArtifactError
    d, name = sys.argv[1], sys.argv[2]
    planes = {"ai_energy": {"x": np.arange(1.0, 9.0)}, "ai_share": {"x": np.arange(1.0, 9.0)},
              "ai_bins": {"key": np.arange(16, dtype=np.int32) % 16, "v": np.ones(16)}}[name]
    try:
        lk = hawk.load(d, name, target=sys.argv[3] if len(sys.argv) > 3 else "host")
    except ArtifactError as exc:
        print("REFUSED", exc)
        raise SystemExit(0)
    print("RAN", hawk.run(lk, **planes))
""")


def load_in_fresh_process(d: Path, name: str, target: str = "host") -> str:
    r = subprocess.run([sys.executable, "-c", LOAD_AND_RUN, str(d), name, target], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, f"exit {r.returncode} (a negative one is a signal): {r.stderr[-2000:]}"
    return r.stdout.strip()


def _builds(sc: dict, **match) -> list[dict]:
    return [b for b in sc["builds"] if all(b[k] == v for k, v in match.items())]


def swap_dtype_builds(sc: dict) -> None:
    a, b = _builds(sc, dtype="float64")[0], _builds(sc, dtype="float32")[0]
    for f in ("file", "sha256"):
        a[f], b[f] = b[f], a[f]


def shrink_sink(sc: dict) -> None:
    for sig in [sc["planes"]] + [b["layout"]["signature"] for b in sc["builds"]]:
        for p in sig["planes"]:
            if p["name"] == "acc":
                p["axes"] = [[p["axes"][0][0], 4]]
    for b in sc["builds"]:
        b["layout"]["sinks"]["acc"] = [4]


def reorder_buffers(sc: dict) -> None:
    for b in sc["builds"]:
        bufs = b["layout"]["buffers"]
        bufs[0], bufs[1] = bufs[1], bufs[0]


def swap_stages(sc: dict) -> None:
    a, b = sc["builds"][0], sc["builds"][1]
    for f in ("file", "sha256"):
        a[f], b[f] = b[f], a[f]


@pytest.mark.parametrize("name,mutate,words", [
    ("ai_energy", swap_dtype_builds, "dtype"),
    ("ai_bins", shrink_sink, "layout"),
    ("ai_energy", reorder_buffers, "layout.buffers"),
    ("ai_share", swap_stages, "no description of stage"),
], ids=["dtype-builds-swapped", "sink-extent-shrunk", "buffers-reordered", "stages-swapped"])
def test_a_sidecar_edited_alone_is_refused_before_anything_runs(work, name, mutate, words):
    assert load_in_fresh_process(work, name).startswith("RAN")  # the control: untouched, it runs
    rewrite(work, name, mutate)
    out = load_in_fresh_process(work, name)
    assert out.startswith("REFUSED"), out
    assert words in out and f"{name}.json" in out, out


def test_the_binary_says_what_it_was_built_for(built):
    import ctypes

    sc = json.loads((built / "ai_energy.json").read_text())
    for b in sc["builds"]:
        lib = ctypes.CDLL(str(built / b["file"]))
        got = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, fmt.description_symbol(b["stage"]))))
        assert got == fmt.description(sc, b)
        assert json.loads(got)["dtype"] == b["dtype"]


def test_a_binary_without_a_description_is_refused(work, tmp_path):
    from hawk.targets import host

    lib = tmp_path / "plain.so"
    host.build(ai_energy.lowered(ai_energy.spec_for("float64", {}, auto_sum="ordered")).llvm_ir, lib)
    sc = json.loads((work / "ai_energy.json").read_text())
    b = _builds(sc, dtype="float64")[0]
    shutil.copyfile(lib, work / b["file"])
    rewrite(work, "ai_energy", lambda s: _builds(s, dtype="float64")[0].update(
        sha256=fmt.sha256_bytes(lib.read_bytes())))
    out = load_in_fresh_process(work, "ai_energy")
    assert out.startswith("REFUSED") and "carries no description" in out, out


def test_a_gpu_build_binds_its_finish_to_its_device_binary(tmp_path):
    from conftest import bt_target_missing

    why = bt_target_missing("spirv")
    if why:
        pytest.skip(f"target 'spirv' cannot run here: {why}")
    hawk.artifact.build(ai_energy, tmp_path, targets=("spirv",), dtypes=("float64", "float32"))
    assert load_in_fresh_process(tmp_path, "ai_energy", "spirv").startswith("RAN")
    rewrite(tmp_path, "ai_energy", swap_dtype_builds)  # the device binaries trade places, finishes stay
    out = load_in_fresh_process(tmp_path, "ai_energy", "spirv")
    assert out.startswith("REFUSED") and "device" in out, out


# ---- the schema ----------------------------------------------------------------------------------------------
SCHEMA_BREAKS = [
    (["builds", 0, "layout", "buffers", 0, "dtype"], "f16", r"sidecar.builds\[0\].layout.buffers\[0\].dtype"),
    (["planes", "planes", 0, "payload"], [2.0], r"sidecar.planes.planes\[0\].payload\[0\]"),
    (["host_cpu", "portable"], 1, "sidecar.host_cpu.portable"),
    (["host_cpu", "features"], "avx2; rm -rf", "sidecar.host_cpu.features"),
    (["builds", 0, "layout", "sinks"], {"acc": [0]}, r"sidecar.builds\[0\].layout.sinks.acc\[0\]"),
    (["builds", 0, "file"], "a/../../b.so", r"sidecar.builds\[0\].file"),
    (["cells"], [{"name": "total"}], r"sidecar.cells\[0\] .*'internal' is a required property"),
    (["format_version"], True, "format version True"),
]


@pytest.mark.parametrize("path,value,field", SCHEMA_BREAKS, ids=[".".join(map(str, p[0])) for p in SCHEMA_BREAKS])
def test_a_sidecar_outside_the_schema_is_refused_naming_the_field(work, path, value, field):
    def mutate(sc):
        obj = sc
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value

    rewrite(work, "ai_energy", mutate)
    with pytest.raises(ArtifactError, match=field):
        hawk.load(work, "ai_energy")


def test_the_schema_ships_with_the_package():
    text = (Path(hschema.__file__).parent / hschema.SCHEMA_FILE).read_text()
    s = json.loads(text)
    assert s["$schema"].endswith("2020-12/schema")
    assert s["properties"]["format_version"]["const"] == hawk.artifact.FORMAT_VERSION
    toml = (ROOT / "pyproject.toml").read_text()
    assert hschema.SCHEMA_FILE in toml  # package data: installed beside the module


def _reference():
    jsonschema = pytest.importorskip("jsonschema")
    base = jsonschema.Draft202012Validator
    base.check_schema(hschema.schema())
    ints = base.TYPE_CHECKER.redefine("integer", lambda _, v: isinstance(v, int) and not isinstance(v, bool))
    return jsonschema.validators.extend(base, type_checker=ints)(hschema.schema())


def _mutations(sc: dict):
    """Single-field edits of a valid sidecar: at every path, the field deleted and replaced by two values of other
    types or edge values (taken in turn from a list, so that every kind of value meets many fields)."""
    def walk(obj, path):
        yield path
        items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
        for k, v in items:
            yield from walk(v, (*path, k))

    others = [None, True, 0, -1, 1.5, 3.0, "", "x y", "../f", [], {}, ["a"], {"a": 1}, 2 ** 31, "a", 7]
    for i, path in enumerate(p for p in walk(sc, ()) if p):
        for value in (others[i % len(others)], others[(i * 7 + 3) % len(others)], "delete"):
            s = copy.deepcopy(sc)
            obj = s
            for k in path[:-1]:
                obj = obj[k]
            if value == "delete":
                del obj[path[-1]]
            else:
                obj[path[-1]] = value
            yield s


@pytest.mark.parametrize("name", ["ai_energy", "ai_bins"])
def test_hawks_validator_agrees_with_jsonschema(built, name):
    ref = _reference()
    sc = json.loads((built / f"{name}.json").read_text())
    assert not list(ref.iter_errors(sc))
    hschema.validate(sc)
    accepted = refused = 0
    for s in _mutations(sc):
        ref_ok = ref.is_valid(s)
        try:
            hschema.validate(s)
            ours = True
        except hschema.Invalid:
            ours = False
        assert ours == ref_ok, json.dumps(s)[:400]
        accepted, refused = accepted + ours, refused + (not ours)
    assert refused > 300 and accepted > 10, (accepted, refused)


# ---- the CPU -------------------------------------------------------------------------------------------------
def test_a_native_build_for_another_cpu_is_refused_naming_both(work):
    here = cache.host_cpu()["name"]
    rewrite(work, "ai_energy", lambda sc: sc["host_cpu"].update(cpu="znver9"))
    with pytest.raises(ArtifactError) as e:
        hawk.load(work, "ai_energy")
    assert "'znver9'" in str(e.value) and f"'{here}'" in str(e.value) and "portable" in str(e.value)


def test_check_cpu_rules():
    native = {"llvm": "22.1.8", "arch": "x86_64", "cpu": "skylake-avx512", "features": "+avx2,+avx512f,-amx-tile",
              "portable": False}
    portable = dict(native, cpu="x86-64", features="", portable=True)
    same = {"llvm": "22.1.8", "arch": "x86_64", "name": "skylake-avx512", "features": "+avx2,+avx512f,+sse2",
            "detected": "llvm"}
    fmt.check_cpu(native, "w", same)
    fmt.check_cpu(portable, "w", dict(same, name="znver2", features="+avx2"))
    with pytest.raises(ArtifactError, match="'skylake-avx512' .*'znver2' .*lacks avx512f"):
        fmt.check_cpu(native, "w", dict(same, name="znver2", features="+avx2"))
    with pytest.raises(ArtifactError, match="'skylake-avx512' .*'icelake-server'"):
        fmt.check_cpu(native, "w", dict(same, name="icelake-server"))
    with pytest.raises(ArtifactError, match=r"\(aarch64\)"):
        fmt.check_cpu(portable, "w", dict(same, arch="aarch64", name="neoverse-v2"))
    # without LLVM on the loading machine, /proc/cpuinfo's instruction sets decide
    no_llvm = {"llvm": "none", "arch": "x86_64", "name": "Some Xeon", "features": "+avx2,+sse2", "detected": "cpuinfo"}
    with pytest.raises(ArtifactError, match="lacks avx512f"):
        fmt.check_cpu(native, "w", no_llvm)
    fmt.check_cpu(native, "w", dict(no_llvm, features="+avx2,+avx512f"))


def test_a_portable_build_runs_and_uses_no_vector_extensions(tmp_path):
    hawk.artifact.build(ai_energy, tmp_path, dtypes=("float64", "float32"), cpu="portable")
    sc = json.loads((tmp_path / "ai_energy.json").read_text())
    assert sc["host_cpu"]["portable"] and sc["host_cpu"]["cpu"] == cache.portable_cpu()
    x = np.random.default_rng(3).normal(size=10_001)
    out = hawk.run(hawk.load(tmp_path, "ai_energy"), x=x)
    np.testing.assert_allclose(np.asarray(out["total"])[0], np.sum(x * x), rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(out["y"]), x * 2.0 + 1.0)
    if cache.machine() == "x86_64":
        import llvm

        objdump = Path(llvm.__file__).parent / "bin" / "llvm-objdump"
        for b in sc["builds"]:
            text = subprocess.run([str(objdump), "-d", str(tmp_path / b["file"])], capture_output=True, text=True,
                                  check=True).stdout
            assert "ret" in text
            assert not [ln for ln in text.splitlines() if "ymm" in ln or "zmm" in ln or "\tv" in ln], b["file"]


@hawk.kernel
def ai_ordered(x: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(x, policy="ordered")


def test_a_portable_build_exports_the_kernels_functions_only(tmp_path):
    """The exact sum's steps are hidden functions of the library (hawk/passes/exact_emit.py): a portable build
    writes no packed wrapper for them, and the sum is still math.fsum's."""
    import llvm

    hawk.artifact.build(ai_ordered, tmp_path, cpu="portable")
    x = np.random.default_rng(4).normal(size=10_001) * np.exp2(np.arange(10_001) % 60)
    out = hawk.run(hawk.load(tmp_path, "ai_ordered"), x=x)
    assert float(np.asarray(out)[0]) == math.fsum(x)
    nm = Path(llvm.__file__).parent / "bin" / "llvm-nm"
    (b,) = json.loads((tmp_path / "ai_ordered.json").read_text())["builds"]
    names = subprocess.run([str(nm), "-D", "--defined-only", "-j", str(tmp_path / b["file"])], capture_output=True,
                           text=True, check=True).stdout.split()
    assert sorted(n for n in names if "ai_ordered" in n) == ["_mlir_ai_ordered_finish", "_mlir_ai_ordered_lanes",
                                                             "ai_ordered_finish", "ai_ordered_lanes",
                                                             "hawk_artifact_ai_ordered"], names
    assert not [n for n in names if "__hawk_" in n], names


def test_a_native_build_records_this_cpu(built):
    sc = json.loads((built / "ai_energy.json").read_text())
    here = cache.host_cpu()
    assert sc["host_cpu"] == {"llvm": here["llvm"], "arch": here["arch"], "cpu": here["name"],
                              "features": here["features"], "portable": False}


def test_an_unknown_cpu_option_is_refused(tmp_path):
    with pytest.raises(ValueError, match="cpu= is 'native'"):
        hawk.artifact.build(ai_energy, tmp_path, cpu="skylake")


def test_a_description_mismatch_names_the_differing_leaf():
    """The refusal names the one field that differs (`layout.buffers[1].role`), not the whole value holding it."""
    from hawk.abi.artifact.format import description_differs

    want = {"kernel": "k", "layout": {"buffers": [{"name": "x", "role": "in"}, {"name": "y", "role": "out"}]}}
    got = json.loads(json.dumps(want))
    got["layout"]["buffers"][1]["role"] = "sink"
    assert description_differs(json.dumps(got).encode(), json.dumps(want).encode()) == \
        'its layout.buffers[1].role is "sink", the sidecar says "out"'
    got = dict(want, extra=1)
    assert description_differs(json.dumps(got).encode(), json.dumps(want).encode()) == \
        'its extra is 1, the sidecar says "<missing>"'
