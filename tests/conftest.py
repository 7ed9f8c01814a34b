"""Shared helpers for the test suite.

Behaviour-test helpers are prefixed ``bt_`` (import them with ``from conftest import bt_run``).
"""

from __future__ import annotations

import functools
import math
import os
import re
import shutil
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

# The targets a test may run on through the `target` fixture. A GPU target whose runtime or device is missing
# skips with the reason (pytest -ra prints it); spirv runs on Mesa's lavapipe where there is no GPU.
BT_TARGETS = ("host", "spirv")


def pytest_configure(config) -> None:
    """Under pytest-xdist (scripts/test.sh runs one worker per core) each worker gets a temporary folder of its
    own, for itself and the processes it starts: a test that checks a run left nothing behind in
    tempfile.gettempdir() then sees only its own worker's files."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        own = Path(tempfile.gettempdir()) / f"hawk-tests-{worker}-{os.getpid()}"
        own.mkdir(parents=True, exist_ok=True)
        os.environ["TMPDIR"] = str(own)
        tempfile.tempdir = None  # (gettempdir reads TMPDIR again)
        config._hawk_worker_tmp = own


# The files that take minutes from a cold compile cache (as on CI), longest first. scripts/test.sh runs
# pytest-xdist with --dist loadfile, which hands files to the workers in collection order; collected first, these
# start at once and the short files fill in around them, instead of one of them running alone at the end.
LONG_FILES = ("test_fuzz.py", "test_gpu_compile.py", "test_spirv.py", "test_notebooks.py", "test_dist_jax.py",
              "test_flag_chains.py", "test_policies.py", "test_exact_ordered.py", "test_fold_reverse.py",
              "test_scan_reverse.py", "test_reverse.py", "test_dist_torch.py")


def pytest_collection_modifyitems(config, items) -> None:
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # (stable: each file's own order kept)


def pytest_unconfigure(config) -> None:
    own = getattr(config, "_hawk_worker_tmp", None)
    if own is not None:
        shutil.rmtree(own, ignore_errors=True)


@pytest.fixture(autouse=True)
def _native_runtime_of_this_environment():
    """A test that points $HAWK_CACHE_DIR at a folder of its own loads eagle's native runtime from there when it is
    the process's first user: forget that library after the test, so that later tests (in whatever order a
    pytest-xdist worker runs them) load the one their own environment names, as every other process does."""
    yield
    native = sys.modules.get("eagle.native")
    lib = None if native is None else native._STATE.get("lib")
    if lib is not None:
        from hawk.abi import cache

        home = cache.cache_dir()  # (None: the disk cache is off for the whole run; each load builds its own)
        if home is not None and Path(lib._name).parent != home:
            native._STATE.clear()


def bt_run(kernel, **planes):
    """Deploy ``kernel`` for the host and run it: one output comes back as an ndarray, several as a dict."""
    return bt_run_on("host", kernel, **planes)


def bt_run_on(target, kernel, **planes):
    """Deploy ``kernel`` for ``target`` and run it: one output comes back as an ndarray, several as a dict."""
    import eagle

    out = eagle.deploy(kernel, target=target).run(**planes)
    if isinstance(out, dict):
        return {name: np.asarray(value) for name, value in out.items()}
    return np.asarray(out)


@functools.cache
def bt_target_missing(name: str) -> str | None:
    """Why ``name`` cannot run here (its runtime or device is missing), or None when it can."""
    if name == "host":
        return None
    from eagle import RuntimeMissing
    from eagle.targets import gpu_target

    try:
        gpu_target(name).runtime()
    except (RuntimeMissing, ImportError) as exc:
        return str(exc)
    return None


def bt_spirv_missing(why: str) -> None:
    """Skip a test that needs Vulkan (lavapipe) or spirv-val, saying why; under CI (CI=true) fail instead: every CI
    machine has lavapipe (scripts/setup.sh installs it), so its absence is a broken setup, never a skip."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run the spirv target on lavapipe, but {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="module")
def vulkan_transfers():
    """The Vulkan runtime's transfer counter (docs/devices.md), for tests of device-resident arrays on spirv."""
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    from eagle.targets.vulkan_runtime import transfers

    return transfers()


@pytest.fixture(params=BT_TARGETS)
def target(request):
    """Each target a test should pass on: "host", then "spirv" (skipped, saying why, without a Vulkan device; a
    failure under CI)."""
    why = bt_target_missing(request.param)
    if why:
        bt_spirv_missing(f"target '{request.param}' cannot run here: {why}")
    return request.param


def bt_same_code(text: str, stage: str) -> str:
    """A stage's GPU module text with the stage's own symbol names written as @STAGE: kernels of different tests
    that are the same code under other names give the same text, and the GPU sweeps build it once."""
    return re.sub(rf"@{re.escape(stage)}(?=_)", "@STAGE", text)


def bt_same_bits(got, want, what=""):
    """The same bits in two results (arrays, or dicts of arrays by name): -0.0 and +0.0 differ; a NaN matches a NaN
    in the same place (its payload may differ between targets)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), f"{what}: outputs {sorted(got)} != {sorted(want)}"
        for name in want:
            bt_same_bits(got[name], want[name], f"{what} {name}".strip())
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape, f"{what}: {g.dtype}{g.shape} != {w.dtype}{w.shape}"
    if g.dtype.kind == "f":
        both_nan = np.isnan(g) & np.isnan(w)
        g, w = np.where(both_nan, 0, g), np.where(both_nan, 0, w)
    if g.tobytes() != w.tobytes():
        bad = np.flatnonzero(g.ravel().view(f"u{g.itemsize}") != w.ravel().view(f"u{w.itemsize}"))
        raise AssertionError(f"{what}: bits differ at {bad.size} of {g.size} place(s), first {bad[:4].tolist()}: "
                             f"got {g.ravel()[bad[:4]].tolist()} want {w.ravel()[bad[:4]].tolist()}")


def bt_reverse_refused(file: str, kernel, ct, line: str, **planes) -> str:
    """plan.reverse refuses `kernel` with a KernelError naming it and pointing at the line of test file `file` that
    ends with `line` (a marker comment); the message."""
    import eagle
    import hawk

    with pytest.raises(hawk.KernelError) as exc:
        eagle.deploy(kernel).reverse(ct, **planes)
    msg = str(exc.value)
    src = open(file).read().splitlines()
    assert f":{src.index(next(s for s in src if s.endswith(line))) + 1}:" in msg, msg
    assert kernel.name in msg
    return msg


def bt_grads_split_bits(kernel, ct, planes: dict, min_chunk: int, what: str = "") -> None:
    """plan.reverse's gradients have the same bits on 1 to 4 threads, and runs past one thread really split."""
    import eagle

    results = []
    for threads in (1, 2, 3, 4):
        plan = eagle.deploy(kernel, threads=threads, min_chunk=min_chunk)
        results.append({k: np.asarray(v).copy() for k, v in plan.reverse(ct, **planes).items()})
        if threads > 1:
            assert max(plan.last_reverse_chunks) > 1, f"threads={threads}: {plan.last_reverse_chunks} chunk(s)"
    for g in results[1:]:
        bt_same_bits(g, results[0], what)


def bt_grads_spirv_bits(kernel, ct, planes: dict, what: str = "") -> None:
    """plan.reverse's gradients on spirv have the host's bits (skipped, with the reason, without the target)."""
    import eagle

    why = bt_target_missing("spirv")
    if why:
        pytest.skip(why)
    host = eagle.deploy(kernel).reverse(ct, **planes)
    dev = eagle.deploy(kernel, target="spirv").reverse(ct, **planes)
    bt_same_bits({k: np.asarray(v) for k, v in dev.items()}, {k: np.asarray(v) for k, v in host.items()}, what)


def bt_run_same_bits(target, kernel, **planes):
    """Run ``kernel`` on ``target`` (as bt_run_on); off the host, run it on the host too, on copies of the planes (so
    that passed sinks start equal), and require the same bits. For results the contract fixes bit for bit across
    targets: policy="ordered" sums, max/min, exact arithmetic."""
    host = None
    if target != "host":
        host = bt_run_on("host", kernel, **{k: (v.copy() if isinstance(v, np.ndarray) else v)
                                            for k, v in planes.items()})
    got = bt_run_on(target, kernel, **planes)
    if host is not None:
        bt_same_bits(got, host, f"kernel '{kernel.name}' on {target} vs host")
    return got


def bt_sum_ulps(got, terms, eps=None):
    """The error of ``got`` against math.fsum(terms), in units of eps * sum(|term|) (that scale in NumPy's float64
    sum: it only sizes the error, and is within n * 2**-53 of exact, where fsum took as long again)."""
    t = np.asarray(terms)
    if eps is None:
        eps = float(np.finfo(t.dtype).eps)
    t = t.astype(np.float64).ravel()
    exact = math.fsum(t.tolist())
    scale = float(np.sum(np.abs(t)))
    if not math.isfinite(scale):  # (overflowed, or inf/NaN terms: as fsum says)
        scale = math.fsum(np.abs(t).tolist())
    err = abs(float(got) - exact)
    if scale == 0.0:
        return 0.0 if err == 0.0 else math.inf
    return err / (eps * scale)


def bt_sum_k(n, dtype):
    """The tolerance used for a plain (uncompensated) sum of ``n`` terms, in eps * sum(|term|).

    f64: 1e-12 * sum(|term|); f32: a few eps plus 2 * sqrt(n) eps (a sequential or tree sum stays inside).
    """
    if np.dtype(dtype) == np.float64:
        return 1e-12 / float(np.finfo(np.float64).eps)
    return 4.0 + 2.0 * math.sqrt(n)


def bt_close(got, want, rtol=1e-14):
    """assert_allclose with an absolute floor scaled to the data (rtol * max|want|)."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != expected {want.shape}"
    finite = want[np.isfinite(want)]
    scale = float(np.max(np.abs(finite))) if finite.size else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(scale, 1e-300))


def bt_exact_fraction(terms) -> Fraction:
    """The exact sum of finite float terms as a Fraction (hawk.exact.fraction_sum: np.frexp per term, independent
    of hawk's accumulator); refuses infinities and NaN."""
    from hawk.exact import fraction_sum

    return fraction_sum(terms)


def bt_ordered_sum(terms, dtype=None, mask=None):
    """The "ordered" result of docs/ordered.md, in the terms' dtype (or `dtype`): the exact sum of the terms (a lane
    masked out by `mask` is no term) rounded once to nearest-even in that dtype (the Fraction sum rounded by
    hawk.exact.round_fraction: float32 straight from the exact value, never through float64). NaN anywhere, or
    +inf with -inf, gives NaN; one kind of infinity gives it; an exact sum past the largest finite value gives inf
    of its sign; a zero result (no terms, -0.0 terms, cancellation) is +0.0."""
    from hawk.exact import round_fraction

    t = np.asarray(terms, dtype=dtype)
    dt = t.dtype.type
    t = t.ravel()
    if mask is not None:
        t = t[np.asarray(mask, dtype=bool).ravel()]
    if np.isnan(t).any() or (np.isposinf(t).any() and np.isneginf(t).any()):
        return dt(np.nan)
    if np.isinf(t).any():
        return dt(np.inf) if np.isposinf(t).any() else dt(-np.inf)
    return dt(round_fraction(bt_exact_fraction(t), t.dtype.name))


def _bt_slot_sum(terms, prior, dtype):
    """One slot: the exact sum of its terms and its prior content, rounded once (math.fsum where it applies)."""
    if dtype == np.float64 and np.isfinite(prior) and np.isfinite(terms).all():
        try:
            return math.fsum([*terms.tolist(), float(prior)]) + 0.0
        except OverflowError:
            pass
    return bt_ordered_sum(np.append(terms, prior), dtype)


def bt_ordered_scatter(prior, keys, terms, dtype, slots=None):
    """An "ordered" scatter (docs/ordered.md): each slot of the sink is the exact sum of its prior content and of
    every term scattered to it, rounded once (the order of the adds does not matter).
    `keys` is one int array or a tuple (one per sink axis) with an entry per add, -1 on any axis adding nothing;
    `terms` is (adds,) or (payload, adds); `prior` is (*sink) or (payload, *sink). `slots` limits the work to
    some flat slot numbers (the others come back as NaN)."""
    keys = tuple(np.asarray(k).ravel() for k in (keys if isinstance(keys, tuple) else (keys,)))
    terms = np.asarray(terms, dtype=dtype)
    comps = terms[None] if terms.ndim == 1 else terms
    prior = np.asarray(prior, dtype=dtype)
    sink = prior.shape if terms.ndim == 1 else prior.shape[1:]
    pri = prior.reshape(comps.shape[0], -1)
    live = np.all([k != -1 for k in keys], axis=0)
    flat = np.ravel_multi_index(tuple(k[live] for k in keys), sink)
    order = np.argsort(flat, kind="stable")
    bounds = np.searchsorted(flat[order], np.arange(pri.shape[1] + 1))
    out = np.full(pri.shape, np.nan, dtype=dtype)
    for c in range(comps.shape[0]):
        vals = comps[c][live][order]
        for s in range(pri.shape[1]) if slots is None else slots:
            out[c, s] = _bt_slot_sum(vals[bounds[s]:bounds[s + 1]], pri[c, s], dtype)
    return out.reshape(prior.shape)


def bt_group_bad_keys(kernel, plain_twin, first_bad: int, x: float = 1.0, **extra) -> str:
    """A grouped scatter's refusal (hawk/passes/lower/split_scatters.py: lanes in groups of four) for two keyed
    sinks whose first bad key is the second sink's at lane `first_bad`, then the first's in the next lane; the
    message must be the one-pass lane loop's (`plain_twin`, the same kernel with plain sinks). Returns it."""
    import eagle

    n = 64
    key = np.arange(n, dtype=np.int32) % 5 + 1
    k2 = (np.arange(n, dtype=np.int32) * 3) % 5 + 1
    k2[first_bad] = 501 + first_bad  # the earliest bad lane: the second sink's key (500 + first_bad)
    key[first_bad + 1] = 1001  # then the first sink's, in the next lane (maybe the same group)
    key[n - 2] = 0  # (-1: adds nothing)

    def message(k) -> str:
        with pytest.raises(eagle.InputError) as info:
            eagle.deploy(k, threads=1).run(key=key, k2=k2, x=np.full(n, x), **extra)
        return str(info.value).replace(k.name, "K")

    got = message(kernel)
    assert f"first bad key: {500 + first_bad}" in got
    assert got == message(plain_twin)  # as the one-pass lane loop reports it
    return got


def bt_bound_bad_keys(kernels, key, x, slots: int, spoil) -> list[str]:
    """A bound launch reads its Index plane again at every launch (the caller may change it), so the kernel checks
    its keys as it runs: each of `kernels` (keys, terms `x`, a sink of `slots` zeros) is bound, launched (the sink
    must then hold the keys' counts, `x` being ones), its keys spoiled in place by `spoil(k)` and launched again,
    which must refuse and leave the sink as it was. Returns the refusals' messages, kernel names as "K"."""
    import eagle

    messages = []
    for kernel in kernels:
        k, sink = key.copy(), np.zeros(slots)
        bound = eagle.deploy(kernel, threads=1).bind(key=k, x=x, acc=sink)
        bound.launch()
        before = sink.copy()
        assert np.array_equal(before, np.bincount(key, minlength=slots))  # (written in place: ones, counted)
        spoil(k)
        with pytest.raises(eagle.InputError) as info:
            bound.launch()
        messages.append(str(info.value).replace(kernel.name, "K"))
        assert sink.tobytes() == before.tobytes(), f"{kernel.name}: a refused launch changed the sink"
    return messages


def bt_neumaier_scatter(prior, key, x, dtype) -> np.ndarray:
    """A compensated sink as one chunk leaves it: per slot, Neumaier steps over its terms in lane order in float64
    from (0, 0) (a non-finite sum keeps no correction), then (prior + sum) + correction rounded once to `dtype`."""
    s = np.zeros(prior.size)
    c = np.zeros(prior.size)
    for k, v in zip(key.tolist(), np.asarray(x, dtype=np.float64).tolist(), strict=True):
        if k < 0:
            continue
        a = float(s[k])
        t = a + v
        if abs(t) < math.inf:
            c[k] += (a - t) + v if abs(a) >= abs(v) else (v - t) + a
        s[k] = t
    return ((np.asarray(prior, dtype=np.float64) + s) + c).astype(dtype)


def _chain_check(request, monkeypatch) -> str:
    """How the host's ordered chains over every lane prove a block exact (docs/ordered.md): "range" (every CPU:
    the terms' range, $HAWK_NO_SAE=1 forces it), "flags" (x86-64 with AVX-512F: the inexact flag, the Fast2Sum's
    add silent; hawk/passes/lower/flag_chains.py) or "grid" (x86-64 with AVX and FMA: the inexact flag, float64
    terms cut on a grid; $HAWK_NO_SILENT_ADDS=1 makes a CPU with AVX-512F take it too), each skipped, saying why,
    on a CPU without it. Column tiles read the flag only with AVX-512F (kept_check)."""
    from hawk.abi import cache

    if request.param == "range":
        monkeypatch.setenv("HAWK_NO_SAE", "1")
    elif request.param == "flags" and not cache.sae_host():
        pytest.skip("the inexact-flag chains with silent adds need an x86-64 CPU with AVX-512F; this one has none")
    elif request.param == "grid":
        monkeypatch.setenv("HAWK_NO_SILENT_ADDS", "1")
        if not cache.mxcsr_host():
            pytest.skip("the inexact-flag chains on a grid need an x86-64 CPU with AVX and FMA; this one has none")
    return request.param


@pytest.fixture(params=["range", "flags", "grid"])
def chain_check(request, monkeypatch):
    """Each way the host's ordered chains over every lane and along rows prove a block exact (_chain_check)."""
    return _chain_check(request, monkeypatch)


@pytest.fixture(params=["range", "flags"])
def kept_check(request, monkeypatch):
    """Each way the host's ordered column tiles prove a block exact (_chain_check): the range, or the inexact
    flag with AVX-512F's silent adds (without them they take the range)."""
    return _chain_check(request, monkeypatch)


@pytest.fixture(params=["pairs", "grid"])
def scatter_route(request, monkeypatch):
    """Each way the host adds an ordered scatter's terms into a chunk's (high, low) pairs: "pairs" (every CPU: two
    TwoSums a lane, side by side in groups; $HAWK_NO_SAE=1 forces it) or "grid" (x86-64 with AVX and FMA, or
    AVX-512F: terms cut on a grid, the chunk proved exact by MXCSR's flags, else run again in pairs;
    hawk/passes/lower/grid_scatters.py), skipped, saying why, on a CPU without it."""
    from hawk.abi import cache

    if request.param == "pairs":
        monkeypatch.setenv("HAWK_NO_SAE", "1")
    elif not (cache.mxcsr_host() or cache.sae_host()):
        pytest.skip("ordered scatters on a grid need an x86-64 CPU with AVX and FMA; this one has none")
    return request.param


def bt_host_asm(llvm_dialect: str, cpu: str) -> str:
    """The x86-64 assembly LLVM makes of a kernel's lowered module (`kernel.lowered(spec).llvm_ir`) for `cpu`,
    through opt and llc at -O3: what a test of the code a CPU runs reads."""
    import subprocess

    from mlir import ir
    from mlir.dialects import llvm

    from hawk.abi import cache
    from hawk.ir.dialect import new_context
    from hawk.targets.host import _llvm_tool

    with new_context(), ir.Location.unknown():
        ll = str(llvm.translate_module_to_llvmir(ir.Module.parse(llvm_dialect).operation))
    triple = f"{cache.machine()}-unknown-linux-gnu"
    opt = subprocess.run([_llvm_tool("opt"), "-O3", f"-mtriple={triple}", f"-mcpu={cpu}", "-S", "-"], input=ll,
                         capture_output=True, text=True, check=True).stdout
    return subprocess.run([_llvm_tool("llc"), "-O3", f"-mtriple={triple}", f"-mcpu={cpu}", "-"], input=opt,
                          capture_output=True, text=True, check=True).stdout


def bt_lanes_func(kernel) -> str:
    """The host lanes function of `kernel` (stage 0) after lower-host-lanes, without the finish beside it (which
    takes slots eight at a time its own way): what a test of the lanes loop's form reads."""
    return next(f for f in kernel.mlir(after="lower-host-lanes").split("func.func") if "_lanes(" in f)


def bt_host_lanes_ir(kernel, tmp_path) -> str:
    """The kernel's IR after the host lowering (verify-hawk, plan-buffers, lower-host-lanes), through `hawk-opt`
    on its printed hawk IR, less the finish function (which takes slots eight at a time its own way): what a
    test of the lowered loop's shape reads."""
    import subprocess
    import sys

    src = tmp_path / f"{kernel.name}.mlir"
    src.write_text(kernel.mlir())
    run = subprocess.run([sys.executable, "-m", "hawk.opt", str(src), "--passes",
                          "verify-hawk,plan-buffers,lower-host-lanes"], capture_output=True, text=True, check=True)
    return "func.func".join(f for f in run.stdout.split("func.func") if "_finish(" not in f)


@pytest.fixture
def fold_reports(monkeypatch):
    """Every native launch's fold report (eagle.native.StageArgs.fold_report), in order; skips where the native
    executor cannot be built."""
    import eagle.native

    if eagle.native.library() is None:
        pytest.skip(f"no native executor here: {eagle.native.unavailable_reason()}")
    seen: list[list[dict]] = []
    fire = eagle.native.StageArgs.fire

    def recording(self):
        r = fire(self)
        seen.append(self.fold_report())
        return r

    monkeypatch.setattr(eagle.native.StageArgs, "fire", recording)
    return seen


def bt_executor(monkeypatch, native: str, parallel_finish: bool = True) -> None:
    """Runs from here on take the native executor (`native` "1") or the Python pool ("0"), with the executor's
    fold of large sinks' copies (eagle/native/folds.py) or, `parallel_finish` False, the compiled finish's."""
    import eagle.native
    import eagle.native.folds

    monkeypatch.setenv("EAGLE_NATIVE", native)
    monkeypatch.setattr(eagle.native, "_STATE", {})
    monkeypatch.setattr(eagle.native.folds, "PARALLEL_FINISH", parallel_finish)


def bt_spoiled_key_refused(bound, key: np.ndarray, sink: np.ndarray, at: int, bad: int) -> None:
    """Key `at` of a bound plan's Index plane spoiled after binding (set to `bad`, outside the sink): the next
    launch is refused and the sink keeps its bits."""
    import eagle

    key[at] = bad
    before = sink.copy()
    with pytest.raises(eagle.InputError):
        bound.launch()
    bt_same_bits(sink, before, "a refused launch")


def bt_sink_keys(rng, n: int, slots: int, minus: float = 0.05) -> np.ndarray:
    """n scatter keys into `slots` slots, uniform, a fraction `minus` of them -1 (adds nothing), as int32."""
    key = rng.integers(0, slots, size=n)
    key[rng.uniform(size=n) < minus] = -1
    return key.astype(np.int32)


def bt_split_runs(kernel, sinks, stages: int, threads, min_chunk: int, **planes) -> dict:
    """A kernel whose last stage runs in slot ranges (tests of hawk/passes/split_sinks.py), run at each of
    `threads` (passed sinks copied first): the same bits at every count, `stages` stages, the last in one slot
    range per thread and a stage before it (if any) in several chunks. Its outputs at threads[0], by name (a
    lone output under the first sink's name)."""
    import eagle

    got = []
    for t in threads:
        given = {k: (np.array(v, copy=True) if k in sinks else v) for k, v in planes.items()}
        plan = eagle.deploy(kernel, threads=t, min_chunk=min_chunk)
        out = plan.run(**given)
        chunks = plan.last_chunks
        assert len(chunks) == stages and chunks[-1] == t, f"{kernel.name} threads={t}: {chunks}"
        if t > 1 and stages > 1:
            assert chunks[-2] > 1, f"{kernel.name} threads={t}: the stage before ran {chunks} chunk(s)"
        out = out if isinstance(out, dict) else {sinks[0]: out}
        got.append({k: np.asarray(v) for k, v in out.items()})
    for t, out in zip(threads[1:], got[1:], strict=True):
        bt_same_bits(out, got[0], f"{kernel.name}: threads {t} against threads {threads[0]}")
    return got[0]


def bt_gpu_builds(gpu: str, kernel, planes: dict) -> None:
    """Without the GPU target's runtime the kernel compiles (PTX / AMD code objects), then raises RuntimeMissing
    saying so; with one, its results are the host's bits."""
    import eagle

    try:
        got = eagle.deploy(kernel, target=gpu).run(**planes)
    except eagle.RuntimeMissing as exc:
        assert "compiled" in str(exc), (kernel.name, str(exc))  # (raised after the build, not instead of it)
        return
    want = eagle.deploy(kernel).run(**planes)
    if isinstance(want, dict):  # (several outputs: compared by name)
        got, want = ({k: np.asarray(v) for k, v in r.items()} for r in (got, want))
    bt_same_bits(np.asarray(got) if not isinstance(got, dict) else got,
                 np.asarray(want) if not isinstance(want, dict) else want, f"{kernel.name} on {gpu}")


def bt_stages_assemble(kernel, spec, chip: str = "sm_80") -> int:
    """Every stage of `kernel` for `spec` assembles with ptxas (NVIDIA `chip`) and links with ld.lld (gfx90a), each
    from the module lowered for its subgroup width with float atomics; how many stages."""
    from hawk.targets.nvvm import NvvmTarget
    from hawk.targets.rocdl import RocdlTarget

    stages = kernel.stages(spec)
    for k, st in enumerate(stages):
        gpu = {w: kernel.lowered_gpu(spec, k, w, True).gpu_module for w in (32, 64)}
        nv = NvvmTarget(chip)
        nv.check(nv.compile(gpu[nv.subgroup]))
        amd = RocdlTarget("gfx90a")
        amd.check(amd.compile(gpu[amd.subgroup]), f"{st.name}_lanes")
    return len(stages)


def bt_ulps(got, want, dtype=np.float64) -> np.ndarray:
    """|got - want| in ulps of `dtype` at `want`, per value; NaN meets NaN, and zeros (with their signs) and
    infinities must match exactly (else inf)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    same = ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))
    step = np.spacing(np.abs(np.where(np.isfinite(want), want, 0.0)).astype(dtype)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        err = np.where(same, 0.0, np.abs(got - want) / step)
    err[(~np.isfinite(want) | (want == 0.0)) & ~same] = np.inf
    return err
