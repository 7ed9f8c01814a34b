"""Wide payloads on the GPU targets. nvvm and rocdl lower them with component loops (`wide_loops`: per-thread
buffers in private memory, every op on a wide value a loop; hawk/passes/gpu_wide.py): Vector[1024] and
Matrix[32, 32] kernels build for sm_80 (ptxas) and gfx90a (ld.lld) with no wide vector left in the module. spirv
takes the loops in the tree form only (lavapipe's loop budget; chunk-form stages stay one op per component); its
runs are compared bitwise with the host, and the loops in every form run on lavapipe at a width its budget
allows, bitwise equal to the host (ordered and compensated sums included): the very lowering nvvm and rocdl
compile."""

import functools
import re
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import bt_spirv_missing, bt_target_missing

import eagle
import hawk
import hawk.math as m
from hawk import Index, Matrix, Mutable, Scalar, Vector

LANES = 3000


@functools.cache
def kernels() -> SimpleNamespace:
    """Built on first use, inside a function: tests/test_gpu_compile.py builds every module-level kernel of the
    suite without the target's switch (one op per component)."""

    @hawk.kernel
    def g_elementwise(a: Vector[1024], b: Vector[1024], s: Scalar, out: Mutable[Vector[1024]]):
        out = (a + b) * s - a / 2.0

    @hawk.kernel
    def g_sum_auto(a: Vector[1024]) -> Vector[1024]:
        return hawk.sum(a * 2.0)

    @hawk.kernel
    def g_sum_comp(a: Vector[1024], x: Scalar) -> Vector[1024]:
        return hawk.sum(a, policy="compensated", where=x > 0.0)

    @hawk.kernel
    def g_sum_comp_512(a: Vector[512], x: Scalar) -> Vector[512]:
        return hawk.sum(a, policy="compensated", where=x > 0.0)

    @hawk.kernel
    def g_sum_ordered(a: Vector[1024]) -> Vector[1024]:
        return hawk.sum(a, policy="ordered")

    @hawk.kernel
    def g_scatter(key: Index, v: Vector[1024], acc: Mutable["slot":8]):
        hawk.scatter(acc, policy="plain")[key] += v

    @hawk.kernel
    def g_matrix(mm: Matrix[32, 32], s: Scalar, out: Mutable[Matrix[32, 32]], down: Mutable[Vector[32]]):
        out = mm * s + 1.0
        down = mm.sum(axis="rows")

    @hawk.kernel
    def n_elementwise(a: Vector[16], b: Vector[16], s: Scalar, out: Mutable[Vector[16]]):
        out = (a + b) * s - a / 2.0

    @hawk.kernel
    def n_sum_comp(a: Vector[16], x: Scalar) -> Vector[16]:
        return hawk.sum(a, policy="compensated", where=x > 0.0)

    @hawk.kernel
    def n_sum_ordered(a: Vector[16]) -> Vector[16]:
        return hawk.sum(a, policy="ordered")

    @hawk.kernel
    def n_mean_ordered(a: Vector[12], x: Scalar) -> Vector[12]:
        return hawk.mean(a, policy="ordered", where=x > 0.0)

    @hawk.kernel
    def n_scatter(key: Index, v: Vector[16], acc: Mutable["slot":8]):
        hawk.scatter(acc, policy="ordered")[key] += v

    @hawk.kernel
    def b_built(x: Scalar) -> Vector[10]:  # a wide value made in the lane from scalars, returned
        return m.vec(x, x * 2.0, x - 1.0, x * x, x / 3.0, -x, x + 0.5, x * 7.0, 1.0 / (1.0 + x * x), x * 0.25)

    @hawk.kernel
    def b_mask(v: Vector[12], x: Scalar) -> Vector[12]:  # a wide truth value, kept in a buffer
        return m.where(v > x, v, -v * 2.0)

    @hawk.kernel
    def b_cell(x: Scalar, tot: Mutable[Vector[10]]):  # a wide value made in the lane, reduced over lanes
        tot = hawk.max(m.vec(x, x, -x, x * 3.0, x, x * x, x, x - 2.0, x, x * 2.0))

    return SimpleNamespace(**locals())


WIDE = ["g_elementwise", "g_sum_auto", "g_sum_comp", "g_sum_ordered", "g_scatter", "g_matrix", "b_mask"]
# (b_built and b_cell stay out: a vector.from_elements keeps its vector form on nvvm and rocdl, see gpu_wide.py)
_WIDE_VECTOR = re.compile(r"vector<(\d+)(?:x(\d+))?x?f(?:32|64)>")


def _no_wide_vectors(text: str, name: str) -> None:
    """No vector in a GPU module is wider than WIDE_PAYLOAD components (they are buffers and loops)."""
    from hawk.passes.host_emit import WIDE_PAYLOAD

    for hit in _WIDE_VECTOR.finditer(text):
        assert int(hit.group(1)) * int(hit.group(2) or 1) <= WIDE_PAYLOAD, \
            f"{name}: a wide vector is left: {hit.group(0)}"


def _gpu_modules(kernel, target) -> list[tuple[str, str]]:
    """(entry, gpu.module text) of every stage, lowered with the target's switch (loops in every form)."""
    assert target.wide_loops is True
    spec = kernel.default_spec()
    out = []
    for k, st in enumerate(kernel.stages(spec)):
        text = kernel.lowered_gpu(spec, k, target.subgroup, target.float_atomics, target.wide_loops).gpu_module
        _no_wide_vectors(text, kernel.name)
        out.append((f"{st.name}_lanes", text))
    return out


@pytest.mark.parametrize("name", WIDE)
def test_wide_payloads_assemble_for_sm80(name):
    from hawk.targets.nvvm import NvvmTarget, find_ptxas

    try:
        find_ptxas()
    except RuntimeError as exc:
        pytest.skip(f"ptxas is missing: {exc}")
    target = NvvmTarget("sm_80")
    for entry, text in _gpu_modules(getattr(kernels(), name), target):
        ptx = target.compile(text)
        assert re.search(rf"\.entry\s+{entry}\b", ptx.decode()), entry
        target.check(ptx)


@pytest.mark.parametrize("name", [n if n != "g_sum_comp" else "g_sum_comp_512" for n in WIDE])
def test_wide_payloads_link_for_gfx90a(name):
    # a compensated Vector[1024] sum keeps 18 x 1024 float64 of state per thread (chunk pairs and 8 chains of
    # pairs): more than gfx90a's 128 KiB of private memory a thread, which llc refuses; 512 fits
    from hawk.targets.rocdl import RocdlTarget, tool

    try:
        tool("ld.lld")
    except RuntimeError as exc:
        pytest.skip(str(exc))
    target = RocdlTarget("gfx90a")
    for entry, text in _gpu_modules(getattr(kernels(), name), target):
        target.check(target.compile(text), entry)


def test_one_host_finish_for_every_variant():
    k = kernels().n_sum_ordered
    spec = k.default_spec()
    loops = k.lowered_gpu(spec, 0, 32, True, True).finish_llvm_ir
    assert loops == k.lowered_gpu(spec, 0, 0, False, False).finish_llvm_ir


def _spirv():
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")


def _data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, LANES)) * 10.0 ** rng.integers(-6, 6, size=(n, LANES))
    return a, rng.normal(size=(n, LANES)), rng.normal(size=LANES), rng.integers(0, 8, size=LANES).astype(np.int32)


def _same_bits(kernel, **planes):
    host = eagle.deploy(kernel).run(**planes)
    got = eagle.deploy(kernel, target="spirv").run(**planes)
    if isinstance(host, dict):
        for k in host:
            assert np.asarray(got[k]).tobytes() == np.asarray(host[k]).tobytes(), (kernel.name, k)
    else:
        assert np.asarray(got).tobytes() == np.asarray(host).tobytes(), kernel.name


def test_spirv_wide_payloads_match_the_host_bitwise():
    # Vector[1024] and Matrix[32, 32] in the tree form (component loops within lavapipe's budget); ordered and
    # compensated Vector[16] sums in the chunk form (one op per component)
    _spirv()
    from hawk.targets.spirv import SpirvTarget

    k = kernels()
    t = SpirvTarget()
    _no_wide_vectors(k.g_elementwise.lowered_gpu(k.g_elementwise.default_spec(), 0, 0, False, t.wide_loops).gpu_module,
                     "g_elementwise")
    rng = np.random.default_rng(1)
    a, b, s = rng.normal(size=(1024, 300)), rng.normal(size=(1024, 300)), rng.normal(size=300)
    _same_bits(k.g_elementwise, a=a, b=b, s=s)
    mm = rng.normal(size=(32 * 32, 500))
    _same_bits(k.g_matrix, mm=mm, s=rng.normal(size=500))
    a, _, x, _ = _data(16, 3)
    _same_bits(k.n_sum_ordered, a=a)
    _same_bits(k.n_sum_comp, a=a, x=x)


def test_wide_values_made_in_the_lane_and_wide_masks_on_spirv():
    # a Vector[10] built from scalars and returned (stored to its buffer with vector.store, which the spirv
    # scalariser now writes element by element), a Vector[12] mask (kept as 32-bit integers: SPIR-V's Int8 is
    # optional) and a Vector[10] max over lanes: they failed to lower on spirv before
    _spirv()
    k = kernels()
    rng = np.random.default_rng(6)
    x, v = rng.normal(size=LANES), rng.normal(size=(12, LANES))
    _same_bits(k.b_built, x=x)
    _same_bits(k.b_mask, v=v, x=x)
    _same_bits(k.b_cell, x=x)
    np.testing.assert_array_equal(eagle.deploy(k.b_mask, target="spirv").run(v=v, x=x), np.where(v > x, v, -v * 2.0))


@pytest.mark.parametrize("name", ["n_elementwise", "n_sum_comp", "n_sum_ordered", "n_mean_ordered", "n_scatter"])
def test_component_loops_on_lavapipe_match_the_host_bitwise(name, monkeypatch, tmp_path):
    # the lowering nvvm and rocdl compile (component loops, per-thread buffers, wide sums' state in memory), run
    # where a GPU is not needed: lavapipe, at a width its loop budget allows
    _spirv()
    from hawk.targets.spirv import SpirvTarget

    monkeypatch.setattr(SpirvTarget, "wide_loops", True)  # every form; part of options, so of the cache key
    monkeypatch.setenv("HAWK_CACHE_DIR", str(tmp_path))
    kernel = getattr(kernels(), name)
    n = 12 if name == "n_mean_ordered" else 16
    a, b, s, key = _data(n, 4)
    planes = {"n_elementwise": dict(a=a, b=b, s=s), "n_sum_comp": dict(a=a, x=s), "n_sum_ordered": dict(a=a),
              "n_mean_ordered": dict(a=a, x=s), "n_scatter": dict(key=key, v=a)}[name]
    _no_wide_vectors(kernel.lowered_gpu(kernel.default_spec(), 0, 0, False, True).gpu_module, name)
    _same_bits(kernel, **planes)
