"""The exact accumulators of policy="ordered" on the GPU targets.

Threads that share an accumulator add into it with 64-bit integer atomics (`memref.atomic_rmw addi` on i64), so
every target must take them: spirv declares Int64Atomics and the Vulkan runtime enables 64-bit buffer atomics
(lavapipe has them), nvvm emits `atom.global.add.u64`, rocdl a native 64-bit global atomic. Here a bare kernel
with such adds runs on lavapipe (and is checked by ptxas and ld.lld), then hawk/passes/exact_emit.py's deposit,
shared (atomic) and per-thread, runs on lavapipe against hawk/exact.py's reference integers: integer adds commute,
so the accumulator must hold exactly the reference's words, whatever order the threads ran in.
"""


import math
import shutil
import subprocess

import numpy as np
import pytest
from conftest import bt_spirv_missing, bt_target_missing

from hawk import exact

mlir = pytest.importorskip("mlir")

ATOMIC_ADD = """
module attributes {gpu.container_module} {
gpu.module @atom_gpu {
  gpu.func @atom_lanes(%acc: memref<?xi64>, %x: memref<?xi64>) kernel {
    %tid = gpu.thread_id x
    %bid = gpu.block_id x
    %bd = gpu.block_dim x
    %g0 = arith.muli %bid, %bd : index
    %g = arith.addi %g0, %tid : index
    %v = memref.load %x[%g] : memref<?xi64>
    %c7 = arith.constant 7 : index
    %slot = arith.remui %g, %c7 : index
    %old = memref.atomic_rmw addi %v, %acc[%slot] : (i64, memref<?xi64>) -> i64
    gpu.return
  }
}
}
"""


# thread g adds lane+1 into slot `lane` for each lane of [g*span, min(g*span+span, end)), g < threads: a loop
# whose trip count differs between threads (whole SIMD groups of idle threads in a partly used workgroup)
LOOPED_ADDS = """
module attributes {gpu.container_module} {
gpu.module @loop_gpu {
  gpu.func @loop_lanes(%acc: memref<?xi64>, %meta: memref<?xi64>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %s = memref.load %meta[%c0] : memref<?xi64>
    %span = arith.index_cast %s : i64 to index
    %e = memref.load %meta[%c1] : memref<?xi64>
    %end = arith.index_cast %e : i64 to index
    %t = memref.load %meta[%c2] : memref<?xi64>
    %nt = arith.index_cast %t : i64 to index
    %tid = gpu.thread_id x
    %bid = gpu.block_id x
    %bd = gpu.block_dim x
    %g0 = arith.muli %bid, %bd : index
    %g = arith.addi %g0, %tid : index
    %start = arith.muli %g, %span : index
    %st2 = arith.addi %start, %span : index
    %hi = arith.minui %st2, %end : index
    %lo = arith.minui %start, %hi : index
    %ok = arith.cmpi ult, %g, %nt : index
    scf.if %ok {
      scf.for %i = %lo to %hi step %c1 {
        %ii = arith.index_cast %i : index to i64
        %one = arith.constant 1 : i64
        %v = arith.addi %ii, %one : i64
        %old = memref.atomic_rmw addi %v, %acc[%i] : (i64, memref<?xi64>) -> i64
      }
    }
    gpu.return
  }
}
}
"""


def _vulkan():
    why = bt_target_missing("spirv")
    if why:
        bt_spirv_missing(f"target 'spirv' cannot run here: {why}")
    from eagle.targets.vulkan_runtime import VulkanRuntime

    return VulkanRuntime.shared()


def _spirv(text: str) -> bytes:
    from hawk.targets.spirv import SpirvTarget

    t = SpirvTarget()
    binary = t.compile(text)
    if shutil.which("spirv-val") is None:
        bt_spirv_missing("spirv-val is not installed")
    return t.check(binary)


def test_i64_atomic_adds_run_on_spirv_exactly():
    """Signed 64-bit terms far beyond 32 bits, 320 threads into 7 shared words: the sums NumPy gives."""
    from eagle.targets.device import Grid
    from eagle.targets.vulkan_runtime import capabilities

    binary = _spirv(ATOMIC_ADD)
    assert 12 in capabilities(binary)  # Int64Atomics, which spirv-update-vce does not add by itself
    rt = _vulkan()
    assert "shaderBufferInt64Atomics" in rt.features, f"{rt.device_name} has no 64-bit buffer atomics"
    n = 64 * 5
    x = np.arange(n, dtype=np.int64) * 0x100000001 - (1 << 40)
    x[::3] *= -7
    acc = np.full(7, 5, np.int64)
    rt.launch(binary, "atom_lanes", [acc, x], [True, False], Grid(1, n, 64))
    np.testing.assert_array_equal(acc, 5 + np.array([x[i::7].sum() for i in range(7)]))


@pytest.mark.parametrize("span, threads", [(4, 8), (4, 56), (4, 57), (3, 33), (1024, 66), (7, 143), (10, 64)])
def test_atomic_adds_in_loops_of_uneven_trip_counts_are_all_kept(span, threads):
    """Lavapipe dropped AcquireRelease atomic adds in a loop (every trip after the second) once a whole SIMD
    group of the workgroup had no trips; the spirv target makes them relaxed, and none is lost."""
    from eagle.targets.device import Grid

    binary = _spirv(LOOPED_ADDS)
    rt = _vulkan()
    end = span * threads - (span > 1)  # the last thread one lane short
    acc = np.zeros(end, np.int64)
    rt.launch(binary, "loop_lanes", [acc, np.array([span, end, threads], np.int64)], [True, False],
              Grid(span, threads, 64))
    missing = np.flatnonzero(acc != np.arange(end) + 1)
    assert missing.size == 0, f"{missing.size} of {end} adds lost, first at lanes {missing[:6].tolist()}"


def test_a_device_without_64_bit_atomics_is_named(monkeypatch):
    """A Vulkan device without shaderBufferInt64Atomics refuses such a kernel before launching it, naming the
    feature (lavapipe has it: the test takes it away)."""
    binary = _spirv(ATOMIC_ADD.replace("@atom_", "@atom_nofeat_"))
    rt = _vulkan()
    monkeypatch.setattr(rt, "features", rt.features - {"shaderBufferInt64Atomics"})
    with pytest.raises(RuntimeError, match=r"atom_nofeat_lanes' needs the Vulkan feature\(s\) "
                                           r"\['shaderBufferInt64Atomics'\]"):
        rt.pipeline(binary, "atom_nofeat_lanes", 2)


def test_i64_atomic_adds_assemble_for_nvidia_and_amd():
    """ptxas assembles the native 64-bit atomic add; the AMD code object links and uses the native one (no
    compare-and-swap loop)."""
    from hawk.targets.nvvm import NvvmTarget, find_ptxas
    from hawk.targets.rocdl import RocdlTarget, tool

    try:
        find_ptxas()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    nv = NvvmTarget("sm_80")
    ptx = nv.compile(ATOMIC_ADD)
    assert "atom.global.add.u64" in ptx.decode()
    nv.check(ptx)
    try:
        amd = RocdlTarget("gfx90a")
        code = amd.compile(ATOMIC_ADD)
    except RuntimeError as exc:
        if "needs" in str(exc):
            pytest.skip(str(exc))
        raise
    amd.check(code)
    objdump = shutil.which("llvm-objdump-22")
    if objdump:
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "k.hsaco"
            p.write_bytes(code)
            asm = subprocess.run([objdump, "-d", "--mcpu=gfx90a", str(p)], capture_output=True, text=True).stdout
        assert "global_atomic_add_x2" in asm and "cmpswap" not in asm, tool("llc")


# ---- exact_emit.deposit on the device ---------------------------------------------------------------------
def _deposit_kernel(dtype: str, atomic: bool) -> str:
    """lanes(acc: i64 words, xs: terms, live: i64 flags): thread g deposits xs[g] (when live) into accumulator
    0 (`atomic`: one accumulator shared by every thread) or into its own accumulator g."""
    from mlir import ir
    from mlir.dialects import gpu

    from hawk.ir.build import create
    from hawk.ir.dialect import new_context
    from hawk.passes import exact_emit
    from hawk.passes.host_emit import Emit

    with new_context(), ir.Location.unknown():
        module = ir.Module.create()
        module.operation.attributes["gpu.container_module"] = ir.UnitAttr.get()
        ft = ir.F64Type.get() if dtype == "float64" else ir.F32Type.get()
        e = Emit(ft)
        dyn = ir.ShapedType.get_dynamic_size()
        types = [ir.MemRefType.get([dyn], e.i64), ir.MemRefType.get([dyn], ft), ir.MemRefType.get([dyn], e.i64)]
        with ir.InsertionPoint(module.body):
            mod = gpu.GPUModuleOp("dep_gpu")
            mod.regions[0].blocks.append()
        with ir.InsertionPoint(mod.regions[0].blocks[0]):
            f = gpu.GPUFuncOp(ir.TypeAttr.get(ir.FunctionType.get(types, [])), sym_name="dep_lanes", kernel=True)
        block = f.regions[0].blocks.append(*types)
        with ir.InsertionPoint(block):
            acc, xs, live = block.arguments
            dim = ir.Attribute.parse("#gpu<dim x>")
            tid = create("gpu.thread_id", [], [e.index], {"dimension": dim}).result
            bid = create("gpu.block_id", [], [e.index], {"dimension": dim}).result
            bdim = create("gpu.block_dim", [], [e.index], {"dimension": dim}).result
            g = e.add_i(e.mul_i(bid, bdim), tid)
            on = e.cmpi(1, e.load(live, g), e.c(0, e.i64))
            base = e.c(0) if atomic else e.mul_i(g, e.c(exact.words(dtype)))
            exact_emit.deposit(e, acc, base, e.load(xs, g), on, atomic=atomic)
            gpu.ReturnOp([])
        assert module.operation.verify()
        return str(module)


def _hard_terms(dtype: str, n: int, rng) -> np.ndarray:
    """Cancellations, a huge dynamic range, subnormals, signed zeros, ties and long runs of one value."""
    info = np.finfo(dtype)
    big = float(info.max) / 4
    parts = [
        rng.standard_normal(n // 4) * 10.0 ** rng.integers(-30, 30, n // 4),
        np.array([big, big, big, -big, -big, 1.0, -1.0, 3.0, -0.0, 0.0, float(info.tiny) / 8, -float(info.tiny) / 3]),
        np.full(n // 8, 0.1),
        rng.standard_normal(n // 8) * float(info.tiny),
    ]
    x = np.concatenate(parts).astype(dtype)
    rng.shuffle(x)
    return x


def _reference(xs: np.ndarray, live: np.ndarray, dtype: str) -> list[int]:
    acc = [0] * exact.words(dtype)
    for x, on in zip(xs.tolist(), live.tolist(), strict=True):
        if on:
            exact.deposit(acc, float(x), dtype)
    return acc


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_shared_atomic_deposits_on_spirv_hold_the_reference_words(dtype):
    """Every thread deposits into one accumulator with atomic adds: the very words of the Python reference, and
    the value rounds to the exact sum (the order the threads ran in cannot show)."""
    from eagle.targets.device import Grid

    rng = np.random.default_rng(11)
    xs = _hard_terms(dtype, 600, rng)
    xs = np.concatenate([xs, np.array([np.inf, 1.0, np.nan, -np.inf], dtype=dtype)])
    n = -(-xs.size // 64) * 64
    xs = np.concatenate([xs, np.zeros(n - xs.size, dtype)])
    for live in (np.r_[np.ones(n - 4, np.int64), np.zeros(4, np.int64)],  # the special terms masked out
                 (rng.random(n) < 0.7).astype(np.int64)):
        binary = _spirv(_deposit_kernel(dtype, atomic=True))
        rt = _vulkan()
        acc = np.zeros(exact.words(dtype), np.int64)
        rt.launch(binary, "dep_lanes", [acc, xs, live], [True, False, False], Grid(1, n, 64))
        want = _reference(xs, live, dtype)
        assert acc.tolist() == want
        got = exact.round_exact(acc.tolist(), dtype)
        terms = [float(x) for x, on in zip(xs.tolist(), live.tolist(), strict=True) if on]
        if all(math.isfinite(t) for t in terms):
            from fractions import Fraction

            assert got == exact.round_fraction(sum(map(Fraction, terms), Fraction(0)), dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_per_thread_deposits_on_spirv_hold_the_reference_words(dtype):
    """One accumulator per thread (plain loads and adds, no atomics), starting from earlier contents: each
    holds the reference words of its start plus its own term (a masked-out thread's start unchanged)."""
    from eagle.targets.device import Grid

    rng = np.random.default_rng(12)
    n = 128
    xs = np.concatenate([_hard_terms(dtype, 600, rng)[:n - 3], np.array([np.inf, -np.inf, np.nan], dtype)])
    live = (rng.random(n) < 0.8).astype(np.int64)
    binary = _spirv(_deposit_kernel(dtype, atomic=False))
    rt = _vulkan()
    w = exact.words(dtype)
    start = rng.integers(-(1 << 40), 1 << 40, n * w)
    acc = start.copy()
    rt.launch(binary, "dep_lanes", [acc, xs, live], [True, False, False], Grid(1, n, 64))
    for g in range(n):
        want = start[g * w:(g + 1) * w].tolist()
        if live[g]:
            exact.deposit(want, float(xs[g]), dtype)
        assert acc[g * w:(g + 1) * w].tolist() == want, f"thread {g}, term {xs[g]!r}"


# ---- ordered kernels on spirv: every thread deposits into one shared accumulator per slot --------------------
import hawk  # noqa: E402
from hawk import Index, Mutable, Scalar  # noqa: E402

SLOTS = (8, 1500, 5000)


def _scatter_kernel(slots: int):
    @hawk.kernel
    def ge_scatter(key: Index, x: Scalar, acc: Mutable["slot":slots], tot: Mutable[Scalar]):
        hawk.scatter(acc, policy="ordered")[key] += x * 3.0
        tot = hawk.sum(x, policy="ordered")

    return ge_scatter


KERNELS = {n: _scatter_kernel(n) for n in SLOTS}


def _per_slot(terms: np.ndarray, key: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """Each slot's exact sum of its prior content and its lanes' terms, rounded once (key -1: no slot)."""
    from conftest import bt_ordered_sum

    order = np.argsort(key, kind="stable")
    ks, ts = key[order], terms[order]
    cuts = np.searchsorted(ks, np.arange(prior.size + 1))
    return np.array([bt_ordered_sum(np.r_[prior[s:s + 1], ts[cuts[s]:cuts[s + 1]]]) for s in range(prior.size)],
                    dtype=prior.dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("slots", SLOTS)
def test_ordered_scatters_on_spirv_are_exact_under_many_threads(slots, dtype):
    """Sinks of any size: the lanes spread over many threads (no private copies on a GPU, so nothing caps them),
    every thread adds each term into the slot's one exact accumulator with integer atomics, and each slot is its
    exact sum, the prior content included (the host's bits)."""
    from conftest import bt_ordered_sum, bt_run_on, bt_same_bits

    from eagle.targets.device import plan_grid

    _vulkan()
    kernel = KERNELS[slots]
    n = 200_003
    grid = plan_grid(kernel.layout(kernel.default_spec(), 0), n, 8, (n,))
    assert grid.form == "chunks" and grid.chunks > 1000, grid
    rng = np.random.default_rng(slots)
    x = _hard_terms(dtype, 4 * n, rng)[:n]
    key = rng.integers(-1, slots, n).astype(np.int32)
    key[:3000] = slots // 2  # a slot that many threads add into at once
    prior = rng.standard_normal(slots).astype(dtype)
    host = bt_run_on("host", kernel, key=key, x=x, acc=prior.copy())
    dev = bt_run_on("spirv", kernel, key=key, x=x, acc=prior.copy())
    bt_same_bits(dev, host, f"ordered sink of {slots} slots")
    bt_same_bits(dev["acc"], _per_slot(x * np.asarray(3.0, dtype), key, prior), "exact slots")
    assert dev["tot"][0] == bt_ordered_sum(x)
