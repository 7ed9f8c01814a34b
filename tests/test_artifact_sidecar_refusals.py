"""A sidecar that fits the schema but not itself is refused by hawk.load with a message naming the field and what
is wrong (hawk/abi/artifact/format.py), never loaded into a launch that would read or write the wrong buffers.
Each case edits one thing in the sidecar of a real two-stage bundle (Index keys into a compensated and an ordered
sink, a kept mean with private copies, a scan, a cut cell), re-seals its content hash (so only the consistency
checks can catch it) and asserts the refusal's words."""

import json
import shutil

import pytest

import hawk
from hawk import Grid, Index, Mutable, Scalar
from hawk.abi.artifact.format import content_hash
from hawk.artifact import ArtifactError


@hawk.kernel
def sc_many(g: Grid["r", "c":4], x: Scalar, key: Index, acc: Mutable["slot":6], ordd: Mutable["slot":6],
            y: Mutable[Scalar], cols: Mutable[Scalar], run: Mutable[Scalar], z: Mutable[Scalar]):
    hawk.scatter(acc, policy="compensated")[key] += x
    hawk.scatter(ordd, policy="ordered")[key] += x
    cols = hawk.mean(x, over="r")
    run = hawk.scan(x)
    y = x * 2.0
    z = x - hawk.sum(x, policy="ordered")


def _bufs(sc, stage: int = 0) -> list:
    return sc["builds"][stage]["layout"]["buffers"]


def _buf(sc, name: str, role: str, stage: int = 0) -> dict:
    return next(b for b in _bufs(sc, stage) if b["name"] == name and b["role"] == role)


def _drop(sc, name: str, role: str, stage: int = 0) -> None:
    _bufs(sc, stage).remove(_buf(sc, name, role, stage))


def _set(d: dict, key, value) -> None:
    d[key] = value


CASES = {  # what is edited: (the edit, words of the refusal)
    "a plane twice": (lambda sc: sc["planes"]["planes"].append(dict(sc["planes"]["planes"][1])),
                      "repeats a plane name"),
    "an input as an output": (lambda sc: _set(sc["outputs"], "x", "lane"), "is not an output plane of the kernel"),
    "an Index plane without a dtype": (lambda sc: sc["index_dtypes"].pop("key"),
                                       "must give a dtype for each Index plane"),
    "a stage twice": (lambda sc: _set(sc["stages"][1], "kernel", "sc_many"), "repeats a stage name"),
    "a cell twice": (lambda sc: sc["cells"].append(dict(sc["cells"][0])), "repeats cell 'cols'"),
    "a build of no stage": (lambda sc: _set(sc["builds"][1], "stage", "nowhere"),
                            "which is not a (stage, dtype, target) of this artifact"),
    "a build twice": (lambda sc: sc["builds"].append(json.loads(json.dumps(sc["builds"][0]))), "repeats the build"),
    "two builds, one file": (lambda sc: _set(sc["builds"][1], "file", sc["builds"][0]["file"]),
                             "the file of another build"),
    "a build missing": (lambda sc: sc["builds"].pop(1), "lacks the build"),
    "a layout of another name": (lambda sc: _set(sc["builds"][0]["layout"], "name", "other"),
                                 "must be the stage's name 'sc_many'"),
    "a layout's own planes": (lambda sc: sc["builds"][0]["layout"]["signature"]["planes"].pop(),
                              "differs from the sidecar's planes"),
    "an output of another mode": (lambda sc: _set(sc["builds"][0]["layout"]["outputs"], "y", "cell"),
                                  "is not an output of the kernel with that mode"),
    "a stage's cells changed": (lambda sc: _set(sc["builds"][0]["layout"], "cells_out", []),
                                "has cells_in/cells_out other than its stage's"),
    "a reduction over no axis": (lambda sc: _set(sc["builds"][0]["layout"]["reductions"][0], "kept", ["q"]),
                                 "names lane axis 'q', which the kernel does not have"),
    "a sink that is not one": (lambda sc: _set(sc["builds"][0]["layout"]["sinks"], "y", []),
                               "names 'y', which is not a sink plane"),
    "keys from a plane that is not an Index": (lambda sc: _set(sc["builds"][0]["layout"]["index_keys"], "x",
                                                               [["acc", 0]]), "names 'x', which is not an Index"),
    "a key position a sink lacks": (lambda sc: _set(sc["builds"][0]["layout"]["index_keys"], "key", [["acc", 3]]),
                                    "names key position 3 of 'acc', which does not exist"),
    "folded keys from a plane that is not the key": (lambda sc: _set(sc["builds"][0]["layout"].setdefault(
        "fold_keys", {}), "acc", "x"), "names 'x', which is not the Index plane of its one key"),
    "a buffer twice": (lambda sc: _bufs(sc).append(dict(_buf(sc, "x", "in"))), "repeats buffer 'x' (in)"),
    "an input buffer of an output": (lambda sc: _set(_buf(sc, "x", "in"), "name", "y"),
                                     "is a 'in' buffer but 'y' is not such a plane"),
    "an Index buffer of another width": (lambda sc: _set(_buf(sc, "key", "index"), "dtype", "i64"),
                                         "not the one of Index plane 'key'"),
    "an out buffer of a cell": (lambda sc: _set(_buf(sc, "y", "out"), "name", "cols"),
                                "is an 'out' buffer but 'cols' is not a per-lane output"),
    "an out buffer of another dtype": (lambda sc: _set(_buf(sc, "y", "out"), "dtype", "i32"),
                                       "not the one of output 'y'"),
    "a count of no reduction": (lambda sc: _set(_buf(sc, "cols", "count"), "name", "y"),
                                "is a 'count' buffer but no reduction lands in 'y'"),
    "a scan's totals the stage does not write": (lambda sc: _set(_buf(sc, "cut0", "scan"), "name", "cutX"),
                                                 "holds a scan's block totals 'cutX'"),
    "a cut the stage does not read": (lambda sc: _set(_buf(sc, "cut1", "cut", 1), "name", "cutX"),
                                      "reads cell 'cutX', which is not one of the stage's cells_in"),
    "a companion of nothing": (lambda sc: _set(_buf(sc, "acc", "comp"), "name", "ghost"),
                               "is a companion of 'ghost', which has no sink or cell buffer before it"),
    "a private copy of nothing": (lambda sc: _set(_buf(sc, "acc", "priv"), "name", "ghost"),
                                  "is a private copy of 'ghost', which is not a sink or cell with private slots"),
    "a private copy of a sink without private slots": (lambda sc: sc["builds"][0]["layout"]["private"].pop("acc"),
                                                       "is a private copy of 'acc'"),
    "a scratch buffer misnamed": (lambda sc: _set(_buf(sc, "#scratch", "scratch"), "name", "#scr"),
                                  "must be named '#scratch'"),
    "exact accumulators of nothing": (lambda sc: _set(_buf(sc, "ordd", "exact"), "name", "ghost"),
                                      "holds exact accumulators of 'ghost', which has no sink or cell buffer"),
    "a length of no output": (lambda sc: _bufs(sc).append({"name": "x", "role": "len", "dtype": "i64"}),
                              "is the length of 'x', which has no 'out' buffer before it"),
    "a fold's state without a fold": (lambda sc: _bufs(sc).append({"name": "cols", "role": "fold", "dtype": "f"}),
                                      "is a fold's state but no hawk.reduce with an operator lands in 'cols'"),
    "no cell buffer for a cell the stage writes": (lambda sc: _drop(sc, "cut1", "cell"),
                                                   "has no cell buffer for 'cut1', which the stage writes"),
    "no cut buffer for a cell the stage reads": (lambda sc: _drop(sc, "cut1", "cut", 1),
                                                 "has no cut buffer for 'cut1', which the stage reads"),
}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    d = tmp_path_factory.mktemp("bundle")
    hawk.artifact.build_bundle([sc_many], str(d), targets=("host",), dtypes=("float64",))
    hawk.load(str(d), "sc_many")  # (as built, it loads)
    return d


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_inconsistent_sidecar_is_refused_by_what_is_wrong(bundle, tmp_path, case):
    edit, words = CASES[case]
    d = tmp_path / "art"
    shutil.copytree(bundle, d)
    p = d / "sc_many.json"
    sc = json.loads(p.read_text())
    edit(sc)
    sc["content_hash"] = content_hash(sc)
    p.write_text(json.dumps(sc))
    with pytest.raises(ArtifactError) as info:
        hawk.load(str(d), "sc_many")
    assert words in str(info.value), str(info.value)
