"""Every kernel of the test suite compiles for the GPU targets, checked by the real offline tools.

For each @hawk.kernel defined at module level in tests/ (every stage of split kernels), float64, plus float32 for
a handful: PTX for sm_80 (and sm_90 for a fixed sample: nvvm_chips) that ptxas assembles, and AMD code objects
for gfx90a (and gfx1100 for another sample: rocdl_chips) that ld.lld links with no undefined symbols and that
define the stage's kernel descriptor. A kernel that fails to lower is a bug: its test fails with the compiler's words.

The builds run in two worker processes (this machine has two cores; compiling holds the GIL), once per session,
for the tests that were selected, and once per module text (kernels of different tests that are the same code
under other names share a build: _verdict); a worker that crashes is replaced and its job reported as failed. Tests that
need a GPU skip with the reason (pytest -ra prints it); the no-runtime paths are tested here.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import bt_same_code

import eagle
import hawk
from hawk import Mutable, Scalar
from hawk.compiler import Kernel

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
CHIPS = {"nvvm": ("sm_80", "sm_90"), "rocdl": ("gfx90a", "gfx1100")}
WORKERS = 2
# float32 builds too for these (a sum, an ordered sum and scatter, math, a grid, vector payloads, a split kernel)
FLOAT32 = ("r_totals", "p_sum_ord", "p_sc_ord", "p_ord_vec_ret", "a_matrix", "bm_exp", "bm_sin", "g_energy",
           "st_standardize", "a_norm_ord")


# A worker's stdout carries the protocol only. Stray prints must not break it, whether from Python or from native
# code writing to fd 1 (Warp's start-up banner, say, when collecting imports a test module that uses a bridge), so
# before anything is imported the protocol takes its own copy of fd 1 and fd 1 goes to stderr.
_PROTOCOL = None
if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    _PROTOCOL = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr


# ---- which kernels ------------------------------------------------------------------------------------------
def _module_names() -> list[str]:
    names = [p.stem for p in sorted(TESTS.glob("test_*.py")) if p.stem != Path(__file__).stem]
    names += [f"ir.{p.stem}" for p in sorted((TESTS / "ir").glob("*.py")) if p.stem not in ("__init__", "conftest")]
    return names


def _ensure_path() -> None:
    for p in (str(TESTS), str(ROOT)):
        if p not in sys.path:
            sys.path.insert(0, p)


def collect() -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(module, name) of every Kernel defined at module level in the test modules, and the modules that do not
    import (with why: their kernels cannot be built, which test_every_test_module_imports reports)."""
    _ensure_path()
    found, broken = [], {}
    for modname in _module_names():
        try:
            mod = importlib.import_module(modname)
        except Exception as exc:
            broken[modname] = f"{type(exc).__name__}: {exc}"
            continue
        for name, value in vars(mod).items():
            if isinstance(value, Kernel) and value.fn.__module__ == mod.__name__:
                found.append((modname, name))
    return found, broken


KERNELS, BROKEN = collect()
JOBS = [(m, n, "float64") for m, n in KERNELS] + [(m, n, "float32") for m, n in KERNELS if n in FLOAT32]
# A known bug, recognised by its error rather than by kernel name (kernels are added all the time): it is reported
# as XFAIL with the reason and the error, never skipped; once fixed those kernels simply pass.
KNOWN_NVVM = (re.compile(r"vector\.multi_reduction|Translation failed for operation: builtin\.unrealized_conversion"),
              "n-D vector ops (vector.multi_reduction, 2-D from_elements/transpose) reach the NVVM conversion "
              "unlowered; hawk.targets.gpu_vectors.lower_vectors in Kernel.lowered_gpu would fix it for every GPU "
              "target")


def nvvm_chips(module: str, name: str) -> tuple[str, ...]:
    """sm_80 for every kernel; sm_90 for the float32 handful and a fixed eighth of the rest (by a hash of the
    name, so the sample does not move when kernels are added). The two chips take the same module through the
    same NVPTX backend with another `.target` (the same PTX but for a few instructions), so a sample finds what
    is sm_90's own at an eighth of its build and ptxas time (a quarter until the suite passed 800 kernels)."""
    if name in FLOAT32 or zlib.crc32(f"{module}.{name}".encode()) % 8 == 0:
        return CHIPS["nvvm"]
    return CHIPS["nvvm"][:1]


def rocdl_chips(module: str, name: str) -> tuple[str, ...]:
    """gfx90a (CDNA, wave64) for every kernel; gfx1100 (RDNA 3, wave32) for the float32 handful and another fixed
    eighth. A stage's AMD build costs about 110 ms a chip (the LLVM back end, llvm-link and ld.lld processes),
    the sweep's largest part; the wave32 module gfx1100 compiles is the one every kernel's nvvm build lowers."""
    if name in FLOAT32 or zlib.crc32(f"{module}.{name}".encode()) % 8 == 1:
        return CHIPS["rocdl"]
    return CHIPS["rocdl"][:1]


def _job_id(job) -> str:
    return f"{job[1]}-{job[2]}"


# ---- one job (in a worker) ----------------------------------------------------------------------------------
def _words(exc: BaseException) -> str:
    """An exception as the lines that matter: MLIR's errors, the tool's stderr, else the traceback's tail."""
    text = str(exc)
    errors = [ln.strip() for ln in text.splitlines() if "error" in ln.lower()]
    if errors:
        text = "\n".join(dict.fromkeys(errors))
    elif not text:
        text = "".join(traceback.format_exception(exc)[-3:])
    return f"{type(exc).__name__}: {text[:2000]}"


def build_job(module: str, name: str, dtype: str) -> dict:
    """Build one kernel for every GPU chip: {"stages": [{stage, lower, nvvm: {chip: error|None}, rocdl: ...}]}."""
    from hawk.targets.nvvm import NvvmTarget
    from hawk.targets.rocdl import RocdlTarget

    _ensure_path()
    t0 = time.perf_counter()
    kernel = getattr(importlib.import_module(module), name)
    spec = kernel.spec_for(dtype, {})
    stages = []
    for k, st in enumerate(kernel.stages(spec)):
        rec: dict = {"stage": st.name, "lower": None, "nvvm": {}, "rocdl": {}}
        stages.append(rec)
        try:  # the module each target compiles: its subgroup width (a warp, a wavefront), float atomics
            gpu = {w: kernel.lowered_gpu(spec, k, w, True).gpu_module for w in (32, 64)}
        except Exception as exc:
            rec["lower"] = _words(exc)
            continue
        entry = f"{st.name}_lanes"

        def nvvm(chip, text, entry=entry):
            target = NvvmTarget(chip)
            ptx = target.compile(text)
            if not re.search(rf"\.entry\s+{entry}\b", ptx.decode(errors="replace")):
                raise RuntimeError(f"the PTX has no .entry {entry}")
            target.check(ptx)

        def rocdl(chip, text, entry=entry):
            target = RocdlTarget(chip)
            target.check(target.compile(text), entry)

        for chip in nvvm_chips(module, name):
            rec["nvvm"][chip] = _verdict("nvvm", chip, st.name, gpu[NvvmTarget(chip).subgroup], nvvm)
        for chip in rocdl_chips(module, name):
            rec["rocdl"][chip] = _verdict("rocdl", chip, st.name, gpu[RocdlTarget(chip).subgroup], rocdl)
    return {"stages": stages, "seconds": time.perf_counter() - t0}


def _verdict(target: str, chip: str, stage: str, text: str, build) -> str | None:
    """`build(chip, text)`'s error words (None: it built), once per module text. Kernels of different tests are
    often the same code under other names (a quarter of the suite's stages): their modules, the stage's name
    written as STAGE in its symbols, share one build, its verdict kept in $HAWK_GPU_VERDICTS for both workers."""
    folder = os.environ.get("HAWK_GPU_VERDICTS")
    same = bt_same_code(text, stage)
    path = Path(folder) / hashlib.sha256(f"{target} {chip}\n{same}".encode()).hexdigest() if folder else None
    if path is not None and path.exists():
        return json.loads(path.read_text())["error"]
    try:
        build(chip, text)
        err = None
    except Exception as exc:
        err = _words(exc)
    if path is not None:
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_text(json.dumps({"error": err}))
        tmp.replace(path)
    return err


def _worker() -> None:
    """Worker loop: a JSON job per stdin line, a JSON result per stdout line."""
    out = _PROTOCOL
    for line in sys.stdin:
        job = json.loads(line)
        try:
            res = build_job(*job)
        except Exception as exc:
            res = {"stages": [], "error": _words(exc), "seconds": 0.0}
        out.write(json.dumps(res) + "\n")
        out.flush()


# ---- the pool (in the test process) ---------------------------------------------------------------------------
class _Worker:
    def __init__(self, verdicts: str):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT), os.environ.get("PYTHONPATH", "")]),
                   HAWK_GPU_VERDICTS=verdicts)
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker"], cwd=str(ROOT),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env, bufsize=1)
        self.err: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.err.append(line)
            del self.err[:-40]

    def run(self, job) -> dict | None:
        try:
            self.proc.stdin.write(json.dumps(list(job)) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        return json.loads(line) if line else None

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def run_jobs(jobs: list[tuple[str, str, str]], workers: int = WORKERS) -> dict:
    """Build every job in `workers` processes; a crashed worker's job is reported with its exit status."""
    todo: queue.Queue = queue.Queue()
    for j in jobs:
        todo.put(tuple(j))
    results: dict = {}
    verdicts = tempfile.mkdtemp(prefix="hawk-gpu-verdicts-")  # (one build per module text: _verdict)

    def loop():
        w = _Worker(verdicts)
        try:
            while True:
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                res = w.run(job)
                if res is None:
                    w.proc.wait()
                    tail = "".join(w.err[-15:])
                    results[job] = {"stages": [], "seconds": 0.0,
                                    "error": f"the compiler crashed (exit status {w.proc.returncode}):\n{tail}"}
                    w = _Worker(verdicts)
                else:
                    results[job] = res
        finally:
            w.close()

    threads = [threading.Thread(target=loop) for _ in range(max(1, min(workers, len(jobs))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shutil.rmtree(verdicts, ignore_errors=True)
    return results


@pytest.fixture(scope="session")
def gpu_builds(request):
    """The builds of the jobs the selected tests need, made once per session in parallel."""
    wanted = []
    for item in request.session.items:
        cs = getattr(item, "callspec", None)
        if cs is not None and "job" in cs.params and item.module.__name__ == __name__:
            wanted.append(cs.params["job"])
    wanted = list(dict.fromkeys(wanted)) or JOBS
    t0 = time.perf_counter()
    results = run_jobs(wanted)
    wall = time.perf_counter() - t0
    cpu = sum(r.get("seconds", 0.0) for r in results.values())
    rep = request.config.pluginmanager.get_plugin("terminalreporter")
    capman = request.config.pluginmanager.get_plugin("capturemanager")
    if rep is not None and capman is not None:
        stages = sum(len(r["stages"]) for r in results.values())
        chips = sum(map(len, CHIPS.values()))
        with capman.global_and_fixture_disabled():
            rep.write_line(f"\ntest_gpu_compile: {len(results)} kernel builds ({stages} stages x {chips} chips) in "
                           f"{wall:.1f} s wall, {cpu:.1f} s in workers")
    return results


def _failures(res: dict, target: str) -> list[str]:
    if res.get("error"):
        return [res["error"]]
    out = []
    for st in res["stages"]:
        if st["lower"]:
            out.append(f"stage {st['stage']}: lowering failed: {st['lower']}")
            continue
        for chip, err in st[target].items():
            if err:
                out.append(f"stage {st['stage']} {chip}: {err}")
    return out


# ---- the tests ----------------------------------------------------------------------------------------------
def test_every_test_module_imports():
    assert not BROKEN, "test modules whose kernels cannot be built here:\n" + "\n".join(
        f"{m}: {e}" for m, e in BROKEN.items())


def test_the_suite_has_kernels_of_every_shape():
    names = {n for _, n in KERNELS}
    assert len(KERNELS) >= 100, f"only {len(KERNELS)} module-level kernels found in tests/"
    missing = [n for n in FLOAT32 if n not in names]
    assert not missing, f"the float32 kernels {missing} are no longer defined at module level in tests/"
    for chips in (nvvm_chips, rocdl_chips):  # each second chip's sample is a fair share, and not the other's
        sample = {(m, n) for m, n in KERNELS if len(chips(m, n)) == 2} - {(m, n) for m, n in KERNELS if n in FLOAT32}
        assert len(KERNELS) / 12 < len(sample) < len(KERNELS) / 5, (chips.__name__, len(sample), len(KERNELS))
    both = [n for m, n in KERNELS if n not in FLOAT32 and len(nvvm_chips(m, n)) == len(rocdl_chips(m, n)) == 2]
    assert not both
    split = [n for m, n in KERNELS if getattr(importlib.import_module(m), n).stage_count > 1]
    assert split, "no split kernel among the collected ones"


@pytest.mark.slow
@pytest.mark.parametrize("job", JOBS, ids=_job_id)
def test_ptx_assembles_for_nvidia_chips(job, gpu_builds):
    res = gpu_builds[job]
    assert res["stages"] or res.get("error"), "no stage was built"
    bad = _failures(res, "nvvm")
    pattern, reason = KNOWN_NVVM
    if bad and all(pattern.search(b) for b in bad):
        pytest.xfail(f"known bug: {reason} ({bad[0].splitlines()[0][:200]})")
    assert not bad, f"{job[0]}.{job[1]} ({job[2]}) does not build for nvvm:\n" + "\n".join(bad)


@pytest.mark.slow
@pytest.mark.parametrize("job", JOBS, ids=_job_id)
def test_amd_code_object_links_for_amd_chips(job, gpu_builds):
    res = gpu_builds[job]
    assert res["stages"] or res.get("error"), "no stage was built"
    bad = _failures(res, "rocdl")
    assert not bad, f"{job[0]}.{job[1]} ({job[2]}) does not build for rocdl:\n" + "\n".join(bad)


# ---- what the code looks like ---------------------------------------------------------------------------------
@hawk.kernel
def gc_ordered_dot(a: Scalar, b: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(a * b + b, policy="ordered")  # each term a*b + b: fused, it would round once, not twice


@hawk.kernel
def gc_fast_dot(a: Scalar, b: Scalar, total: Mutable[Scalar]):
    total = hawk.sum(a * b)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_ordered_sums_stay_unfused_on_amd_and_nvidia(dtype):
    """An ordered sum's terms (a product plus a value) keep separate multiplies and adds on every chip (no
    contraction flags in the LLVM IR, no fused instruction in the ISA/PTX), so they are the host's terms and
    the exact sum of them has the host's bits."""
    from hawk.targets.nvvm import NvvmTarget
    from hawk.targets.rocdl import RocdlTarget, tool

    spec = gc_ordered_dot.spec_for(dtype, {})
    gpu = gc_ordered_dot.lowered_gpu(spec, 0).gpu_module
    bits = "f64" if dtype == "float64" else "f32"
    for chip in CHIPS["rocdl"]:
        target = RocdlTarget(chip)
        llvm_ir = target.llvm_ir(gpu)
        fops = [ln for ln in llvm_ir.splitlines() if re.search(r"= (fadd|fmul|fsub)\b", ln)]
        assert fops, "no float arithmetic found in the LLVM IR"
        flagged = [ln.strip() for ln in fops if re.search(r"\b(contract|reassoc|fast)\b", ln)]
        assert not flagged, f"ordered arithmetic carries fast-math flags on {chip}: {flagged[:3]}"
        assert "fmuladd" not in llvm_ir and "llvm.fma" not in llvm_ir
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"hawk-gc-{os.getpid()}-{chip}.hsaco"
        path.write_bytes(target.compile(gpu))
        try:
            dis = subprocess.run([tool("llvm-objdump"), "-d", f"--mcpu={chip}", str(path)], capture_output=True,
                                 text=True, check=True).stdout
        finally:
            path.unlink()
        fused = sorted(set(re.findall(rf"\bv_(?:fma|fmac|mad|mac)\w*_{bits}\b", dis)))
        assert not fused, f"fused multiply-adds in the {chip} ISA of an ordered sum: {fused}"
        assert re.search(rf"\bv_add_{bits}\b|\bv_add_f32_e", dis), "no add in the ISA"
    for chip in CHIPS["nvvm"]:
        ptx = NvvmTarget(chip).compile(gpu).decode()
        assert not re.search(rf"\bfma\.\w*{bits}\b", ptx), f"fma in the {chip} PTX of an ordered sum"
        adds = re.findall(rf"\badd(\.\w+)*\.{bits}\b", ptx)
        assert adds and all(".rn" in a for a in adds), f"an add in the {chip} PTX may be fused by ptxas: {adds}"


def test_fast_sums_may_fuse_but_ordered_ones_may_not():
    """The contrast that makes the test above meaningful: the fast policy does carry contraction flags."""
    from hawk.targets.rocdl import RocdlTarget

    spec = gc_fast_dot.spec_for("float64", {})
    llvm_ir = RocdlTarget().llvm_ir(gc_fast_dot.lowered_gpu(spec, 0).gpu_module)
    assert re.search(r"= fadd (\w+ )*contract", llvm_ir)


def test_rocdl_controls_follow_the_chip():
    from hawk.targets.rocdl import controls, isa_version, wave64

    assert isa_version("gfx90a") == 9010 and isa_version("gfx942") == 9402 and isa_version("gfx1100") == 11000
    assert wave64("gfx90a") and wave64("gfx942") and not wave64("gfx1100")
    assert "@__oclc_wavefrontsize64 = linkonce_odr protected local_unnamed_addr addrspace(4) constant i8 0" \
        in controls("gfx1100")
    with pytest.raises(ValueError, match="rocdl chip 'sm_80' is not known"):
        eagle.deploy(gc_fast_dot, target="rocdl", chip="sm_80")


# ---- runtimes -------------------------------------------------------------------------------------------------
def _runtime(name: str):
    from eagle.targets import gpu_target

    try:
        return gpu_target(name).runtime(), None
    except eagle.RuntimeMissing as exc:
        return None, str(exc)


def test_nvvm_without_a_driver_says_so():
    rt, why = _runtime("nvvm")
    if rt is not None:
        pytest.skip("an NVIDIA driver and GPU are present here: the no-runtime path cannot be seen")
    x = np.arange(10.0)
    with pytest.raises(eagle.RuntimeMissing, match="NVIDIA driver|cuda-bindings|NVIDIA GPU") as info:
        eagle.deploy(gc_fast_dot, target="nvvm").run(a=x, b=x)
    assert "target 'nvvm' compiled" in str(info.value)


def test_rocdl_without_rocm_says_so():
    rt, why = _runtime("rocdl")
    if rt is not None:
        pytest.skip("ROCm and an AMD GPU are present here: the no-runtime path cannot be seen")
    x = np.arange(10.0)
    with pytest.raises(eagle.RuntimeMissing, match="no ROCm runtime") as info:
        eagle.deploy(gc_fast_dot, target="rocdl", chip="gfx1100").run(a=x, b=x)
    assert "target 'rocdl' compiled" in str(info.value)


@pytest.mark.parametrize("target", ["nvvm", "rocdl"])
def test_gpu_run_equals_the_host(target):
    rt, why = _runtime(target)
    if rt is None:
        pytest.skip(f"needs a GPU for {target}: {why}")
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=100_003), rng.normal(size=100_003)
    host = eagle.deploy(gc_ordered_dot).run(a=a, b=b)
    got = eagle.deploy(gc_ordered_dot, target=target).run(a=a, b=b)
    assert np.asarray(got).tobytes() == np.asarray(host).tobytes()


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    _worker()
