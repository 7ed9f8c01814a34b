"""scalarize-payloads (hawk/passes/scalarize.py): a lane's vector arithmetic split into one scalar op per component
in the host's lane loops, so the loop vectorizer widens it across lanes. Each component must get exactly what the
same expression gives on Scalar planes, so every expression here runs twice, on `Vector[3]` planes and on three
Scalar planes per component, bit for bit (math functions included: a payload's exp, sin... is eagle's own code now,
as a scalar's is), at 1 and 2 threads; the lowered IR shows the split (no vector arithmetic left in the lanes
function) and its loop widened (vector ops in the object code where the unsplit body had scalar ones)."""

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
from mlir import ir
from mlir.dialects import llvm

import eagle
from hawk.abi import cache
from hawk.ir.dialect import new_context
from hawk.targets.host import _llvm_tool

N = 5003

# (name, an expression of v, w (payloads, or scalars per component) and s (a Scalar plane))
EXPRS = [
    ("arith", "v * s + w / (w * w + 0.5) - 2.0 * v"),
    ("minmax", "m.min(v, w) + m.max(v * s, -w) + m.clamp(v, -0.5, 0.25)"),
    ("where", "m.where(v > w, v - w, w * s)"),
    ("branch", None),  # an if/else on a scalar condition choosing payload values (speculated into selects)
    ("signs", "m.abs(v) + m.sign(w) + m.copysign(s, v) - (-v)"),
    ("rounding", "m.floor(v * 7.0) + m.ceil(w * 3.0) + m.trunc(v * 5.5) + m.round(w * 2.5)"),
    ("roots", "m.sqrt(m.abs(v)) + m.rsqrt(w * w + 1.0) + m.fma(v, w, s)"),
    ("floordiv", "v // (w + 0.25) + v % (w + 0.25)"),
    ("exp_log", "m.exp(v) + m.log(m.abs(w) + 0.5) + m.expm1(v * 0.5) + m.log2(w * w + 1.0)"),
    ("trig", "m.sin(v * 3.0) + m.cos(w) + m.tan(v * 0.5) + m.tanh(w * 2.0)"),
    ("other_math", "m.atan2(v, w) + m.log1p(m.abs(v)) + m.pow(m.abs(w) + 0.5, v)"),
    ("specials", "v / w + m.sqrt(v) + m.log(w)"),  # NaN, inf and -0.0 from the data's specials
]

_BRANCH = ("    if s > 0.5:\n        t = v * s + w\n    else:\n        t = w - v * 0.5\n")


def _module(tmp_path, name: str, expr: str | None):
    """The expression as two kernels: on Vector[3] planes and on Scalar planes."""
    body = _BRANCH if expr is None else f"    t = {expr}\n"
    src = ("import hawk\nimport hawk.math as m\nfrom hawk import Mutable, Scalar, Vector\n\n"
           f"@hawk.kernel\ndef sp_{name}_vec(v: Vector[3], w: Vector[3], s: Scalar, z: Mutable[Vector[3]]):\n"
           f"{body}    z = t\n\n"
           f"@hawk.kernel\ndef sp_{name}_one(v: Scalar, w: Scalar, s: Scalar, z: Mutable[Scalar]):\n"
           f"{body}    z = t\n")
    mod = _load(tmp_path, f"sp_{name}", src)
    return getattr(mod, f"sp_{name}_vec"), getattr(mod, f"sp_{name}_one")


def _load(tmp_path, name: str, src: str):
    """The module `name` made of `src` (kernels are defined in files)."""
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _planes(specials: bool):
    rng = np.random.default_rng(11)
    v = rng.normal(size=(3, N)) * 2.0
    w = rng.uniform(-3.0, 3.0, size=(3, N))
    s = rng.uniform(size=N)
    if specials:
        for a in (v, w):
            flat = a.reshape(-1)
            flat[rng.integers(0, flat.size, 60)] = rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324], 60)
    return v, w, s


@pytest.mark.parametrize("name,expr", EXPRS, ids=[n for n, _ in EXPRS])
def test_components_get_the_scalar_bits(tmp_path, name, expr):
    vec, one = _module(tmp_path, name, expr)
    v, w, s = _planes(name == "specials")
    want = np.stack([np.asarray(eagle.deploy(one).run(v=v[c], w=w[c], s=s)) for c in range(3)])
    for threads in (1, 2):
        got = np.asarray(eagle.deploy(vec, threads=threads, min_chunk=1024).run(v=v, w=w, s=s))
        assert got.tobytes() == want.tobytes(), (name, threads)
    lanes = next(f for f in vec.mlir(after="canonicalize").split("func.func") if "_lanes(" in f)
    arith = [line for line in lanes.splitlines() if "vector<3xf64>" in line and ("arith." in line or "math." in line)]
    assert not arith, arith  # every payload op split into components


def test_the_split_loop_widens_across_lanes(tmp_path):
    """LLVM's loop vectorizer reports the lanes function's loops of a Vector[3] map vectorized (the streamed
    copy and the plain one); before the split it vectorized none of them."""
    vec, _ = _module(tmp_path, "widen", "v * s + w")
    with new_context(), ir.Location.unknown():
        ll = llvm.translate_module_to_llvmir(ir.Module.parse(vec.lowered(vec.default_spec()).llvm_ir).operation)
    (tmp_path / "k.ll").write_text(ll)
    subprocess.run([_llvm_tool("opt"), "-O3", f"-mtriple={cache.machine()}-unknown-linux-gnu", str(tmp_path / "k.ll"),
                    "-o", os.devnull, f"-pass-remarks-output={tmp_path / 'r.yaml'}",
                    "-pass-remarks-filter=loop-vectorize"], check=True, capture_output=True)
    remarks = (tmp_path / "r.yaml").read_text().split("--- ")
    done = [r for r in remarks if r.startswith("!Passed") and "Name:            Vectorized" in r
            and "Function:        sp_widen_vec_lanes" in r]
    assert len(done) >= 2, remarks


def test_a_vector_carried_across_lanes_keeps_its_vector(tmp_path):
    """A loop whose state is a payload (an auto vector sum) is left as it was, and sums as before."""
    src = ("import hawk\nfrom hawk import Mutable, Vector\n\n@hawk.kernel\n"
           "def sp_carry(v: Vector[3], t: Mutable[Vector[3]]):\n    t = hawk.sum(v * 2.0)\n")
    mod = _load(tmp_path, "sp_carry", src)
    v = np.random.default_rng(3).integers(-1000, 1000, size=(3, N)).astype(np.float64)
    out = eagle.deploy(mod.sp_carry).run(v=v)
    got = [float(np.asarray(out[f"t_{c}"])[0]) for c in range(3)]
    assert got == [float((v[c] * 2.0).sum()) for c in range(3)]  # (whole numbers: exact in any order)


def test_a_grouped_reading_loop_splits_its_payload_arithmetic(tmp_path):
    """A sum that only reads (hawk/passes/lower/read_groups.py: whole groups, each an inner loop, then the rest)
    has its payload arithmetic split in both loops: unsplit in the groups' inner loop, a Vector[3] sum beside a
    Scalar plane ran at half the speed at 1e5 lanes. Its components are the Scalar sums (whole numbers: exact)."""
    src = ("import hawk\nfrom hawk import Mutable, Scalar, Vector\n\n@hawk.kernel\n"
           "def sp_wsum(v: Vector[3], s: Scalar, t: Mutable[Vector[3]]):\n    t = hawk.sum(v * s)\n")
    mod = _load(tmp_path, "sp_wsum", src)
    text = mod.sp_wsum.mlir(after="scalarize-payloads")
    lanes = text[text.index("@sp_wsum_lanes("):text.index("@sp_wsum_finish(")]
    assert "llvm.intr.prefetch" in lanes, lanes  # (the grouped form)
    assert not [ln for ln in lanes.splitlines() if "arith." in ln and "vector<3x" in ln], lanes
    rng = np.random.default_rng(4)
    v, s = rng.integers(-1000, 1000, size=(3, N)).astype(np.float64), rng.integers(-3, 4, size=N).astype(np.float64)
    out = eagle.deploy(mod.sp_wsum).run(v=v, s=s)
    assert [float(np.asarray(out[f"t_{c}"])[0]) for c in range(3)] == [float((v[c] * s).sum()) for c in range(3)]
