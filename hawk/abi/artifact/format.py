"""The artifact sidecar: its constants, its content hash and the checks a loader runs on it.

Pure Python (no MLIR, no NumPy): a sidecar is data read from disk, so every field is checked before anything else
looks at it: its structure against the JSON Schema shipped beside this module (sidecar.schema.json, validated by
hawk.abi.artifact.schema), then what a schema cannot say (fields that must agree with each other) here. Nothing in a
sidecar is ever evaluated, unpickled or imported. `description` is what each host library says about itself
(embedded when it is built) and `check_cpu` whether its code can run on this CPU.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from hawk import __version__ as HAWK_VERSION

FORMAT = "hawk-artifact"
# 3: "ordered" is exact (#exact and per-slot "exact" accumulators replace #blocks); 4: a reverse's winners Table
# holds each store's number in parts, and its loops' passes (hawk.abi.reverse.win_components); 5: a reverse may
# publish a stencil's gradient in gather form (reverse.gather); 6: a compensated sink's companion and copies keep
# each slot's (sum, correction) side by side (Layout.pairs_side_by_side; the runtime's folds read them so)
FORMAT_VERSION = 6
MAX_SIDECAR_BYTES = 16 << 20

# What a binary file is called on each target. A new target adds its suffix here, a builder in
# hawk/artifact/builder.py and a loader in eagle/artifact.py (LOADERS).
SUFFIX = {"host": ".so", "nvvm": ".ptx", "rocdl": ".hsaco", "spirv": ".spv"}
# GPU targets: each build carries the device binary and, under "device", the host library that finishes the stage
# (the runtime finishes on the host), the chip it was built for and the kernel's entry name.
GPU_TARGETS = ("nvvm", "rocdl", "spirv")
FINISH_SUFFIX = ".finish.so"

FLOAT_DTYPES = ("float32", "float64")
INDEX_DTYPES = ("int32", "int64")
PLANE_KINDS = ("lane", "index", "param", "table", "grid", "output", "sink")
REDUCE_KINDS = ("sum", "mean", "max", "min", "fold")
POLICIES = ("auto", "compensated", "plain", "ordered")
SINK_POLICIES = ("plain", "compensated", "ordered")
# The buffer roles eagle.launch.Launcher allocates; a role it does not know is refused before anything runs.
BUFFER_ROLES = ("in", "index", "param", "table", "cut", "out", "cell", "count", "sink", "comp", "priv", "mark",
                "scratch", "exact", "pairs", "parked", "fold", "meta", "err", "len", "scan", "scanoff",
                "rscan", "parts")
BUFFER_DTYPES = ("f", "f64", "i32", "i64")
_ROLE_KIND = {"in": "lane", "index": "index", "param": "param", "table": "table", "sink": "sink"}

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\Z")


class ArtifactError(ValueError):
    """An artifact that cannot be used: a malformed sidecar, one from another format or hawk version, or one that
    does not match its binaries. Nothing of it has been run."""


# ---- hashing ------------------------------------------------------------------------------------------------
def canonical(obj: Any) -> bytes:
    """The canonical JSON bytes of `obj`: sorted keys, no spaces, ASCII only, no NaN."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def content_hash(sidecar: dict) -> str:
    """sha256 over the canonical JSON of every field but `content_hash` itself (so it covers the binaries'
    sha256 too)."""
    return hashlib.sha256(canonical({k: v for k, v in sidecar.items() if k != "content_hash"})).hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def major(version: str) -> int | None:
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def is_name(s: object) -> bool:
    """A kernel, stage, plane or cell name: a plain identifier (so it can never name a path)."""
    return isinstance(s, str) and bool(_IDENT.match(s))


def is_safe_file(s: object) -> bool:
    """A binary's file name: one plain name inside the artifact directory (no separators, no '..', not absolute,
    not hidden)."""
    return isinstance(s, str) and bool(_FILE.match(s)) and ".." not in s and len(s) <= 255


# ---- parsing ------------------------------------------------------------------------------------------------
def parse(raw: bytes, where: str) -> dict:
    """The sidecar's JSON object; refuses what is not one (duplicate keys and NaN/Infinity included)."""
    if len(raw) > MAX_SIDECAR_BYTES:
        raise ArtifactError(f"{where}: the sidecar is {len(raw)} bytes, more than a sidecar can be "
                            f"({MAX_SIDECAR_BYTES}); it is not a hawk artifact")

    def pairs(items):
        d = {}
        for k, v in items:
            if k in d:
                raise ArtifactError(f"{where}: the sidecar repeats the key {k!r}; a sidecar holds each field once")
            d[k] = v
        return d

    def constant(name):
        raise ArtifactError(f"{where}: the sidecar holds {name}, which is not JSON data a sidecar can hold")

    try:
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=pairs, parse_constant=constant)
    except ArtifactError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ArtifactError(f"{where}: the sidecar is not JSON ({exc}); it is not a hawk artifact") from None
    if not isinstance(data, dict):
        raise ArtifactError(f"{where}: the sidecar holds a JSON {type(data).__name__}, not an object; "
                            "it is not a hawk artifact")
    return data


# ---- structure ----------------------------------------------------------------------------------------------
class _Refuse:
    def __init__(self, where: str):
        self.where = where

    def __call__(self, path: str, msg: str) -> ArtifactError:
        return ArtifactError(f"{self.where}: {path} {msg}")


def _field(path) -> str:
    return "sidecar" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def check_structure(d: dict, where: str) -> None:
    """Validate `d` against the sidecar's JSON Schema (hawk.abi.artifact.schema); the refusal names the field."""
    from hawk.abi.artifact import schema

    try:
        schema.validate(d)
    except schema.Invalid as err:
        must = f" (it must be {err.want})" if err.want else ""
        raise ArtifactError(f"{where}: {_field(err.path)} does not fit the sidecar schema: {err.message}{must}") \
            from None


def check_header(d: dict, where: str, name: str | None = None) -> None:
    """The format tag, format version and hawk version, checked before the rest (a sidecar of another version
    may have another structure)."""
    if d.get("format") != FORMAT:
        raise ArtifactError(f"{where}: the format tag is {d.get('format')!r}, not {FORMAT!r}; "
                            "it is not a hawk artifact")
    v = d.get("format_version")
    if v != FORMAT_VERSION or isinstance(v, bool):
        raise ArtifactError(f"{where}: the sidecar has format version {v!r}; this hawk ({HAWK_VERSION}) reads "
                            f"version {FORMAT_VERSION}: rebuild the artifact with this hawk")
    hv = d.get("hawk_version")
    if not isinstance(hv, str) or major(hv) is None or major(hv) != major(HAWK_VERSION):
        raise ArtifactError(f"{where}: the artifact was built by hawk {hv!r}, another major version than this "
                            f"hawk ({HAWK_VERSION}): rebuild the artifact with this hawk")
    if name is not None and d.get("name") != name:
        raise ArtifactError(f"{where}: the sidecar describes kernel {d.get('name')!r}, not {name!r}")


def check_sidecar(d: dict, where: str) -> None:
    """Every field of a sidecar: presence, type, then consistency across fields. Raises ArtifactError."""
    check_header(d, where)
    check_structure(d, where)
    _check_consistency(d, _Refuse(where))


def _check_consistency(d: dict, refuse: _Refuse) -> None:
    name = d["name"]
    planes = {p["name"]: p for p in d["planes"]["planes"]}
    if len(planes) != len(d["planes"]["planes"]):
        raise refuse("sidecar.planes", "repeats a plane name")
    if sum(p["kind"] == "grid" for p in planes.values()) > 1:
        raise refuse("sidecar.planes", "has more than one grid")
    returns = d["planes"]["returns"] is not None
    for out in d["outputs"]:
        if not (out == "result" and returns) and planes.get(out, {}).get("kind") != "output":
            raise refuse(f"sidecar.outputs.{out}", "is not an output plane of the kernel")
    index_planes = {n for n, p in planes.items() if p["kind"] == "index" or p.get("integer")}  # + Mutable[Index]
    if set(d["index_dtypes"]) != index_planes:
        raise refuse("sidecar.index_dtypes", f"must give a dtype for each Index plane and integer output "
                                             f"{sorted(index_planes)}")

    stages = d["stages"]
    names = [st["kernel"] for st in stages]
    if names[0] != name:
        raise refuse("sidecar.stages[0].kernel", f"must be the kernel's name {name!r}, got {names[0]!r}")
    if len(set(names)) != len(names):
        raise refuse("sidecar.stages", "repeats a stage name")
    made: set[str] = set()
    for k, st in enumerate(stages):
        missing = [c for c in st["cells_in"] if c not in made]
        if missing:
            raise refuse(f"sidecar.stages[{k}].cells_in", f"reads cell '{missing[0]}' that no earlier stage writes")
        made |= set(st["cells_out"])
    user_cells = {o for o, m in d["outputs"].items() if m == "cell"}
    want = {c: c not in d["outputs"] for c in made} | {c: False for c in user_cells}
    got = {}
    for i, c in enumerate(d["cells"]):
        if c["name"] in got:
            raise refuse(f"sidecar.cells[{i}]", f"repeats cell '{c['name']}'")
        got[c["name"]] = c["internal"]
    if got != want:
        raise refuse("sidecar.cells", f"must list each cell with its internal flag: {sorted(want.items())}")

    combos = {(st, dt, tg) for st in names for dt in d["dtypes"] for tg in d["targets"]}
    seen: set[tuple[str, str, str]] = set()
    files: set[str] = set()
    for i, b in enumerate(d["builds"]):
        key = (b["stage"], b["dtype"], b["target"])
        path = f"sidecar.builds[{i}]"
        if key not in combos:
            raise refuse(path, f"builds {key}, which is not a (stage, dtype, target) of this artifact")
        if key in seen:
            raise refuse(path, f"repeats the build {key}")
        if b["file"] in files:
            raise refuse(f"{path}.file", f"names {b['file']!r}, the file of another build")
        seen.add(key)
        files.add(b["file"])
        gpu = b["target"] in GPU_TARGETS
        if gpu != ("device" in b):
            raise refuse(path, f"{'lacks' if gpu else 'has'} a 'device' entry, which "
                               f"{'every' if gpu else 'no'} {'GPU' if gpu else 'host'} build has")
        if gpu:
            dev = b["device"]
            if dev["entry"] != f"{b['stage']}_lanes":
                raise refuse(f"{path}.device.entry", f"must be the stage's kernel '{b['stage']}_lanes'")
            if dev["finish"] in files:
                raise refuse(f"{path}.device.finish", f"names {dev['finish']!r}, the file of another build")
            files.add(dev["finish"])
        st = stages[names.index(b["stage"])]
        _check_layout(b["layout"], d, st, refuse, f"{path}.layout")
    if seen != combos:
        raise refuse("sidecar.builds", f"lacks the build {sorted(combos - seen)[0]}")
    if "reverse" in d:
        _check_reverse(d, d["reverse"], planes, refuse)


def reverse_kernels(rev: dict) -> list[str]:
    """The kernels a sidecar's reverse entry names: the adjoint, the winners kernel and the gather form's, in that
    order, those it has."""
    g = rev.get("gather") or {}
    return [rev["kernel"]] + [k["kernel"] for k in (rev["winners"], g.get("shares"), g.get("gather"), g.get("sums"))
                              if k is not None]


def _check_reverse(d: dict, rev: dict, planes: dict, refuse: _Refuse) -> None:
    """The reverse entry names the kernel's own float inputs, outputs and sinks, and distinct adjoint planes."""
    path = "sidecar.reverse"
    gather = rev.get("gather")
    kernels = [d["name"], *reverse_kernels(rev)]
    if len(set(kernels)) != len(kernels):
        raise refuse(path, f"names kernels {kernels}, which must differ from each other and from the kernel")
    init = rev.get("init", [])
    for y in init:
        if d["outputs"].get(y) != "lane":
            raise refuse(f"{path}.init", f"names '{y}', which is not a per-lane output of the kernel")
    for x in rev["wrt"]:
        if planes.get(x, {}).get("kind") not in ("lane", "param", "table") and x not in init:
            raise refuse(f"{path}.wrt", f"names '{x}', which is not a float input plane (Scalar, Vector, Matrix, "
                                        "Param or Table) nor an output whose initial contents it reads (init)")
    if set(rev["grad"]) != set(rev["wrt"]) or set(rev["grad_kind"]) != set(rev["wrt"]):
        raise refuse(f"{path}.grad", "must name a gradient plane and its kind for each input of wrt")
    sinks = {n for n, p in planes.items() if p["kind"] == "sink"}
    for o in rev["ct"]:
        if o not in d["outputs"] and o not in sinks:
            raise refuse(f"{path}.ct.{o}", "is neither an output nor a sink of the kernel")
    if set(rev["ct_kind"]) != set(rev["ct"]):
        raise refuse(f"{path}.ct_kind", "must give a kind for each cotangent plane")
    if not set(rev["ct"]) <= set(rev["payload"]) <= set(rev["ct"]) | set(rev["wrt"]):
        raise refuse(f"{path}.payload", "must give the payload of each cotangent (and of per-lane inputs only)")
    if not set(rev["win"]) <= set(rev["ct"]) & sinks:
        raise refuse(f"{path}.win", "names a sink without a cotangent")
    for s, n in rev.get("passes", {}).items():
        if s not in rev["win"] or not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise refuse(f"{path}.passes.{s}", "must name a sink of win with the number of for loops around its "
                                                "deepest store (1 or more)")
    positions = rev.get("positions", {})
    for o in positions:
        if not str(d["outputs"].get(o, "")).startswith("scatter") or o not in rev["ct"]:
            raise refuse(f"{path}.positions.{o}", "is not a float output the kernel writes by key")
    if (rev["winners"] is None) != (not rev["win"] and not positions):
        raise refuse(f"{path}.winners", "must name a winners kernel exactly when a sink is stored into (win) or an "
                                        "output is written by key (positions)")
    adjoint = [*rev["ct"].values(), *rev["grad"].values(), *rev["win"].values()]
    if len(set(adjoint)) != len(adjoint) or set(adjoint) & set(planes):
        raise refuse(path, "names an adjoint plane twice, or one that is a plane of the kernel")
    grid = next((p for p in planes.values() if p["kind"] == "grid"), None)
    labels = [a[0] for a in grid["axes"]] if grid else ["sample"]
    for c, axes in rev["kept"].items():
        if d["outputs"].get(c) != "cell" or not set(axes) <= set(labels):
            raise refuse(f"{path}.kept.{c}", "must name a cell output and lane axes of the kernel")
    if rev["extents"] is not None and len(rev["extents"]) != len(labels):
        raise refuse(f"{path}.extents", f"must give one extent per lane axis {labels}")
    if gather is not None:
        _check_gather(rev, gather, planes, adjoint, refuse)


def _check_gather(rev: dict, g: dict, planes: dict, adjoint: list, refuse: _Refuse) -> None:
    """A stencil's gather form: made for fixed extents, for per-lane inputs of wrt (with their gradient planes'
    names) and Params, over planes of its own."""
    path = "sidecar.reverse.gather"
    if rev["extents"] is None:
        raise refuse(path, "is made for fixed lane extents: the reverse entry must give them (extents)")
    for x, out in g["grad"].items():
        if x not in rev["wrt"] or planes.get(x, {}).get("kind") != "lane" or rev["grad"].get(x) != out:
            raise refuse(f"{path}.grad.{x}", "must name a per-lane input of wrt and its gradient plane (grad)")
    params = {rev["grad"][x] for x in rev["wrt"] if planes.get(x, {}).get("kind") == "param"}
    if not g["grad"] or not set(g["sum_planes"]) <= params or (g["sums"] is None) != (not g["sum_planes"]):
        raise refuse(path, "must gather at least one input, and name a Param sums kernel exactly when it sums the "
                           "shares of Param gradients (sum_planes: each a Param's gradient cell)")
    own = [*g["share_planes"], *g["sum_planes"].values(), g["flag"]]
    if len(set(own)) != len(own) or set(own) & (set(planes) | set(adjoint)):
        raise refuse(path, "names a share plane or the flag twice, or one that is a plane of the kernel or of its "
                           "adjoint")


def _check_layout(lay: dict, d: dict, st: dict, refuse: _Refuse, path: str) -> None:
    """A build's layout agrees with the sidecar and refers only to things that exist (the runtime relies on it)."""
    if lay["name"] != st["kernel"]:
        raise refuse(f"{path}.name", f"must be the stage's name {st['kernel']!r}")
    if canonical(lay["signature"]) != canonical(d["planes"]):
        raise refuse(f"{path}.signature", "differs from the sidecar's planes")
    for o, m in lay["outputs"].items():
        if d["outputs"].get(o) != m:
            raise refuse(f"{path}.outputs.{o}", "is not an output of the kernel with that mode")
    if lay["cells_in"] != st["cells_in"] or lay["cells_out"] != st["cells_out"]:
        raise refuse(path, "has cells_in/cells_out other than its stage's")
    planes = {p["name"]: p for p in d["planes"]["planes"]}
    grid = next((p for p in planes.values() if p["kind"] == "grid"), None)
    labels = {a[0] for a in grid["axes"]} if grid else {"sample"}
    cells = {r["cell"] for r in lay["reductions"]}
    for i, r in enumerate(lay["reductions"]):
        bad = [a for a in (*r["over"], *r["kept"]) if a not in labels]
        if bad:
            raise refuse(f"{path}.reductions[{i}]", f"names lane axis '{bad[0]}', which the kernel does not have")
    for sink in (*lay["sinks"], *lay["sink_policy"], *(n for n in lay["private"] if n not in cells),
                 *lay.get("stored", []), *lay.get("mixed", [])):
        if planes.get(sink, {}).get("kind") != "sink":
            raise refuse(f"{path}.sinks", f"names '{sink}', which is not a sink plane")
    for plane, uses in lay["index_keys"].items():
        if plane not in planes or planes[plane]["kind"] != "index":
            raise refuse(f"{path}.index_keys", f"names '{plane}', which is not an Index plane")
        for sink, pos in uses:
            if d["outputs"].get(sink, "").startswith("scatter") and pos == 0:  # an output plane written by key
                continue
            if planes.get(sink, {}).get("kind") != "sink" or pos >= len(planes[sink]["axes"]):
                raise refuse(f"{path}.index_keys.{plane}", f"names key position {pos} of '{sink}', which does "
                                                           "not exist")
    for sink, plane in lay.get("fold_keys", {}).items():  # (the executor reads the plane's values as slots)
        if [sink, 0] not in [list(u) for u in lay["index_keys"].get(plane, [])] or \
                planes.get(sink, {}).get("kind") != "sink" or len(planes[sink]["axes"]) != 1:
            raise refuse(f"{path}.fold_keys.{sink}", f"names '{plane}', which is not the Index plane of its one key")
    roles: dict[str, list[str]] = {}
    for i, b in enumerate(lay["buffers"]):
        role, bname, where = b["role"], b["name"], f"{path}.buffers[{i}]"
        if bname in roles.get(role, []):
            raise refuse(where, f"repeats buffer '{bname}' ({role})")
        roles.setdefault(role, []).append(bname)
        if role in _ROLE_KIND and planes.get(bname, {}).get("kind") != _ROLE_KIND[role]:
            raise refuse(where, f"is a '{role}' buffer but '{bname}' is not such a plane")
        if role == "index" and b["dtype"] != {"int32": "i32", "int64": "i64"}[d["index_dtypes"][bname]]:
            raise refuse(where, f"has dtype {b['dtype']!r}, not the one of Index plane '{bname}'")
        if role == "out" and d["outputs"].get(bname) not in ("lane", "scatter", "scatter-run"):
            raise refuse(where, f"is an 'out' buffer but '{bname}' is not a per-lane output")
        if role == "out" and b["dtype"] != ("f" if not planes.get(bname, {}).get("integer") else
                                            {"int32": "i32", "int64": "i64"}[d["index_dtypes"][bname]]):
            raise refuse(where, f"has dtype {b['dtype']!r}, not the one of output '{bname}'")
        if role == "len" and bname not in roles.get("out", []):
            raise refuse(where, f"is the length of '{bname}', which has no 'out' buffer before it")
        if role == "fold" and bname not in {r["cell"] for r in lay["reductions"] if r["kind"] == "fold"}:
            raise refuse(where, f"is a fold's state but no hawk.reduce with an operator lands in '{bname}'")
        if role in ("cell", "count") and bname not in cells:
            raise refuse(where, f"is a '{role}' buffer but no reduction lands in '{bname}'")
        if role == "cell" and bname not in d["outputs"] and bname not in st["cells_out"]:
            raise refuse(where, f"is a cell buffer '{bname}' that is neither an output nor a cell the stage writes")
        if role in ("scan", "rscan") and bname not in st["cells_out"]:
            raise refuse(where, f"holds a scan's block totals '{bname}', which is not one of the stage's cells_out")
        if role in ("cut", "scanoff") and bname not in st["cells_in"]:
            raise refuse(where, f"reads cell '{bname}', which is not one of the stage's cells_in")
        if role == "comp" and bname not in roles.get("sink", []) + roles.get("cell", []):
            raise refuse(where, f"is a companion of '{bname}', which has no sink or cell buffer before it")
        if role in ("priv", "mark", "pairs") and (bname not in lay["private"] or bname not in roles.get("sink", [])
                                                   and (role == "mark" or bname not in cells)):
            raise refuse(where, f"is a private copy of '{bname}', which is not a sink or cell with private slots")
        if role in ("meta", "err", "scratch", "parts") and bname != f"#{role}":
            raise refuse(where, f"must be named '#{role}'")
        if role == "parked" and bname not in roles.get("exact", []):
            raise refuse(where, f"holds parked pairs of '{bname}', which has no exact accumulators before it")
        if role == "exact" and bname != "#exact" and bname not in roles.get("sink", []) + roles.get("cell", []):
            raise refuse(where, f"holds exact accumulators of '{bname}', which has no sink or cell buffer before it")
    for role in ("meta", "err"):
        if roles.get(role) != [f"#{role}"]:
            raise refuse(f"{path}.buffers", f"must hold one '#{role}' buffer")
    for c in st["cells_out"]:
        if c not in roles.get("cell", []) + roles.get("scan", []) + roles.get("rscan", []):
            raise refuse(f"{path}.buffers", f"has no cell buffer for '{c}', which the stage writes")
    for c in st["cells_in"]:
        if c not in roles.get("cut", []) + roles.get("scanoff", []):
            raise refuse(f"{path}.buffers", f"has no cut buffer for '{c}', which the stage reads")


# ---- what a binary says about itself ---------------------------------------------------------------------------
def description_symbol(stage: str) -> str:
    """The exported constant C string in a host library that describes it."""
    return f"hawk_artifact_{stage}"


def description(sidecar: dict, build: dict) -> bytes:
    """The canonical JSON a build's host library carries (the host binary, or a GPU build's finish): kernel, stage,
    dtype, target, entry points, layout (planes and extents, buffers in order with roles and dtypes), Index dtypes
    and CPU; for a GPU build also the device binary's chip, entry and sha256. The loader compares it with the one
    made from the sidecar before it calls anything in the library."""
    stage = build["stage"]
    gpu = "device" in build
    d = {"kernel": sidecar["name"], "stage": stage, "dtype": build["dtype"], "target": build["target"],
         "entries": [f"{stage}_finish"] if gpu else [f"{stage}_lanes", f"{stage}_finish"],
         "layout": build["layout"], "index_dtypes": sidecar["index_dtypes"], "host_cpu": sidecar["host_cpu"]}
    if gpu:
        d["device"] = {"chip": build["device"]["chip"], "entry": build["device"]["entry"], "sha256": build["sha256"]}
    return canonical(d)


def description_differs(got: bytes, want: bytes) -> str:
    """What differs between a binary's description and the sidecar's, in words: the first differing field, followed
    down through objects and lists (`layout.buffers[3].role`), not the whole value that holds it."""
    try:
        g = json.loads(got)
    except ValueError:
        return "the binary's description is not JSON"
    w = json.loads(want)
    if not isinstance(g, dict):
        return "the binary's description is not a JSON object"
    found = _first_difference(g, w, "")
    if found is None:
        return "the binary's description has fields the sidecar does not"
    path, gv, wv = found
    return f"its {path} is {_short(gv)}, the sidecar says {_short(wv)}"


_MISSING = "<missing>"


def _first_difference(g, w, path: str):
    """(path, the binary's value, the sidecar's) of the first leaf where `g` and `w` differ, or None."""
    if isinstance(g, dict) and isinstance(w, dict):
        for k in [*w, *(k for k in g if k not in w)]:
            found = _first_difference(g.get(k, _MISSING), w.get(k, _MISSING), f"{path}.{k}" if path else k)
            if found is not None:
                return found
        return None
    if isinstance(g, list) and isinstance(w, list) and len(g) == len(w):
        for i, (a, b) in enumerate(zip(g, w, strict=True)):
            found = _first_difference(a, b, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if g == w else (path, g, w)


def _short(v) -> str:
    text = json.dumps(v)
    return text if len(text) <= 120 else text[:117] + "..."


def check_cpu(host_cpu: dict, where: str, here: dict | None = None) -> None:
    """Refuse host code the CPU here cannot run: another architecture, or a native build for another CPU (LLVM's
    name and features; where LLVM is not installed, the instruction sets /proc/cpuinfo lists). A portable build
    runs on any CPU of its architecture."""
    from hawk.abi import cache

    here = here or cache.host_cpu()
    built = f"'{host_cpu['cpu']}' ({host_cpu['arch']})"
    mine = f"'{here['name']}' ({here['arch']})"
    fix = ("rebuild it on this machine, or build it with cpu='portable' (hawk-artifact build --cpu portable) to run "
           "on any machine of its architecture")
    if host_cpu["arch"] != here["arch"]:
        raise ArtifactError(f"{where}: its host code was built for CPU {built}, and this machine's CPU is {mine}: "
                            f"{fix}")
    if host_cpu["portable"]:
        return
    want = cache.enabled(host_cpu["features"])
    if here["detected"] == "llvm":
        missing = sorted(want - cache.enabled(here["features"]))
        same = host_cpu["cpu"] == here["name"]
    else:
        missing = sorted((want & set(cache.X86_CHECKED)) - cache.enabled(here["features"]))
        same = True  # no LLVM here to name the CPU: its instruction sets decide
    if not same or missing:
        lacks = f", which lacks {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}" if missing else ""
        raise ArtifactError(f"{where}: its host code was built for CPU {built}, and this machine's CPU is "
                            f"{mine}{lacks}: {fix}")


def describe(d: dict) -> str:
    """A human summary of a checked sidecar (what `python -m hawk.artifact show` prints)."""

    def plane(p):
        pay = p["payload"]
        shape = "" if not pay else f"[{', '.join(map(str, pay))}]"
        axes = "" if not p["axes"] else "[" + ", ".join(a if e is None else f"{a}:{e}" for a, e in p["axes"]) + "]"
        return f"{p['name']} ({p['kind']}{shape}{axes}{', sorted' if p['sorted'] else ''})"

    lines = [f"kernel {d['name']}  ({d['format']} v{d['format_version']}, built by hawk {d['hawk_version']})",
             "planes:  " + ", ".join(plane(p) for p in d["planes"]["planes"]),
             "outputs: " + (", ".join(f"{k} ({v})" for k, v in d["outputs"].items()) or "-")]
    if d["planes"]["returns"] is not None:
        lines.append(f"returns: {d['planes']['returns'] or 'Scalar'}")
    if d["index_dtypes"]:
        lines.append("index:   " + ", ".join(f"{k}={v}" for k, v in d["index_dtypes"].items()))
    lines.append(f"stages:  {len(d['stages'])}")
    for st in d["stages"]:
        lines.append(f"  {st['kernel']}: cells_in={st['cells_in']} cells_out={st['cells_out']}")
    lines.append("cells:   " + (", ".join(f"{c['name']}{' (internal)' if c['internal'] else ''}"
                                          for c in d["cells"]) or "-"))
    lines.append(f"dtypes:  {', '.join(d['dtypes'])}")
    lines.append(f"targets: {', '.join(d['targets'])}")
    hc = d["host_cpu"]
    kind = "portable, " if hc["portable"] else ""
    lines.append(f"host code: {kind}CPU {hc['cpu']} ({hc['arch']}), LLVM {hc['llvm']}")
    lines.append("builds:")
    for b in d["builds"]:
        chip = f"  ({b['device']['chip']})" if "device" in b else ""
        lines.append(f"  {b['file']}  sha256 {b['sha256'][:16]}...{chip}")
        if "device" in b:
            lines.append(f"  {b['device']['finish']}  sha256 {b['device']['finish_sha256'][:16]}...")
    if "reverse" in d:
        rev = d["reverse"]
        lines.append(f"reverse: wrt {', '.join(rev['wrt'])}; kernels {', '.join(reverse_kernels(rev))}"
                     + (" (gather form)" if "gather" in rev else ""))
    lines.append(f"content hash: {d['content_hash']}")
    return "\n".join(lines)
