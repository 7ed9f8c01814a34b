"""Streaming stores (hawk/passes/lower/stream.py): a host launch whose per-lane outputs take at least STREAM_BYTES
writes them through L1 block buffers and non-temporal stores. Only how the values reach memory changes, so each
test runs outputs past the threshold (asserted, with the streamed path in the lanes function's IR) and checks
them bit for bit: against NumPy where its order of operations is the kernel's, and against runs of the same
kernel over slices small enough not to stream. Outputs start at every offset within a 64-byte line (the block
copy's plain head and tail), chunks split mid-block, and stores mix with loop state (sums, kept totals, scans)."""

import math

import numpy as np
import pytest
from conftest import bt_lanes_func

import eagle
import hawk
import hawk.math as m
from benchmarks.kernels import diffuse
from hawk import Grid, Index, Matrix, Mutable, Scalar, Vector
from hawk.abi.layout import SCAN_BLOCK
from hawk.passes.lower.stream import STREAM_BYTES

COLS = 1000
N = STREAM_BYTES // 8 + 4099  # float64 lanes just past the threshold (an odd count: a partial last block)
ROWS = -(-STREAM_BYTES // (8 * COLS)) + 3


@hawk.kernel
def st_map(x: Scalar, y: Mutable[Scalar]):
    y = x * 1.5 + 0.25


@hawk.kernel
def st_two(x: Scalar, k: Index, y: Mutable[Scalar], j: Mutable[Index]) -> Scalar:
    y = x - 0.5
    j = k * 3 - 7
    return hawk.sum(x, policy="ordered")


@hawk.kernel
def st_shift(x: Scalar) -> Scalar:
    return x - hawk.max(x)  # the second stage stores


@hawk.kernel
def st_bump(k: Index, out: Mutable[Index]):
    out = out + k  # reads its output: never streamed


@hawk.kernel
def st_vec(v: Vector[3], z: Mutable[Vector[3]]):
    z = v * 2.0  # component c at c * lanes + lane


@hawk.kernel
def st_mat(mm: Matrix[2, 3], x: Scalar, a: Mutable[Matrix[2, 3]], k: Mutable[Index]):
    a = mm * 0.5
    k = m.to_int(x * 8.0)


@hawk.kernel
def st_vec_read(v: Vector[3], z: Mutable[Vector[3]]):
    z = z + v  # reads its output: never streamed


@hawk.kernel
def st_scan(x: Scalar, k: Index, y: Mutable[Scalar], j: Mutable[Index]):
    y = hawk.scan(x)
    j = hawk.scan(k)


@hawk.kernel
def st_rows(g: Grid["row", "col":COLS], x: Scalar, y: Mutable[Scalar]) -> Scalar:
    y = 2.0 * x
    return hawk.sum(x, over="col", policy="ordered")


st_diffuse = diffuse(COLS)  # (the benchmarks' 5-point diffusion step)


def _streams(kernel, stage: int = 0) -> None:
    """The kernel's stage lowers with the streamed path (non-temporal stores and the closing fence)."""
    ir_text = kernel.mlir(after="lower-host-lanes") if stage == 0 else \
        kernel.mlir(after="lower-host-lanes", stage=stage)
    lanes = next(f for f in ir_text.split("func.func") if "_lanes(" in f)
    assert "nontemporal = true" in lanes and "llvm.fence" in lanes, kernel.name


def _lanes_of(kernel) -> str:
    return next(f for f in kernel.mlir(after="lower-host-lanes").split("func.func") if "_lanes(" in f)


def _past(*arrays) -> None:
    assert sum(np.asarray(a).nbytes for a in arrays) >= STREAM_BYTES


def test_only_own_lane_outputs_nothing_reads_stream():
    _streams(st_map)
    _streams(st_two)
    _streams(st_vec)
    # the streamed blocks of a map hint the lines of its reads a block ahead; three (a Vector[3] plane's) none
    assert "llvm.intr.prefetch" in _lanes_of(st_map) and "llvm.intr.prefetch" not in _lanes_of(st_vec)
    # outputs read in the body; a stage with no per-lane output
    for k in (st_bump, st_vec_read, st_shift):
        assert "nontemporal" not in bt_lanes_func(k), k.name


@pytest.mark.parametrize("threads", [1, 3])
def test_map_at_every_offset_in_a_line(threads):
    x = np.random.default_rng(threads).standard_normal(N)
    want = x * 1.5 + 0.25
    room = np.empty(N + 8)
    plan = eagle.deploy(st_map, threads=threads, min_chunk=1 << 20)
    for off in range(8):  # the output's first lane at every 8-byte offset within a 64-byte line
        y = room[off:off + N]
        y[:] = np.nan
        plan.run(x=x, y=y)
        _past(y)
        assert plan.last_chunks[0] > 1 or threads == 1
        assert y.tobytes() == want.tobytes(), off
    _streams(st_map)


def test_outputs_of_two_types_beside_an_ordered_sum():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(N) * np.exp(rng.uniform(-30, 30, N))
    k = rng.integers(-1000, 1000, N).astype(np.int32)
    j = np.empty(N, np.int32)
    plan = eagle.deploy(st_two, threads=2, min_chunk=1 << 20)
    out = plan.run(x=x, k=k, j=j)
    _past(out["y"], j)
    assert plan.last_chunks[0] > 1
    assert np.asarray(out["y"]).tobytes() == (x - 0.5).tobytes()
    assert j.tobytes() == (k * 3 - 7).astype(np.int32).tobytes()
    assert np.asarray(out["result"]).tolist() == [math.fsum(x)]
    _streams(st_two)


def test_a_later_stage_streams():
    x = np.random.default_rng(6).standard_normal(N)
    y = np.asarray(eagle.deploy(st_shift, threads=2).run(x=x))
    _past(y)
    assert y.tobytes() == (x - x.max()).tobytes()
    _streams(st_shift, stage=1)


def test_scans_stream_with_their_running_values():
    rng = np.random.default_rng(7)
    x = rng.standard_normal(N)
    k = rng.integers(-1 << 20, 1 << 20, N).astype(np.int64)
    j = np.empty(N, np.int64)
    out = eagle.deploy(st_scan, threads=2).run(x=x, k=k, j=j)
    _past(out["y"], j)
    assert j.tobytes() == np.cumsum(k).tobytes()
    whole = N // SCAN_BLOCK * SCAN_BLOCK  # the float scan's block contract (docs/semantics.md, "Scans")
    blocks = np.cumsum(x[:whole].reshape(-1, SCAN_BLOCK), axis=1)
    offs = np.cumsum(np.concatenate([[-0.0], blocks[:, -1]]))
    want = np.cumsum(np.concatenate([offs[:-1, None], x[:whole].reshape(-1, SCAN_BLOCK)], axis=1), axis=1)[:, 1:]
    tail = np.cumsum(np.concatenate([[offs[-1]], x[whole:]]))[1:]
    assert np.asarray(out["y"]).tobytes() == np.concatenate([want.reshape(-1), tail]).tobytes()
    _streams(st_scan, stage=1)


def test_rows_with_kept_totals():
    x = np.random.default_rng(8).standard_normal((ROWS, COLS))
    out = eagle.deploy(st_rows, threads=2).run(x=x)
    _past(out["y"])
    assert np.asarray(out["y"]).tobytes() == (2.0 * x).tobytes()
    assert np.asarray(out["result"]).tolist() == [math.fsum(r) for r in x]
    _streams(st_rows)


@pytest.mark.parametrize("threads", [1, 2])
def test_stencil_rows_against_slabs_that_do_not_stream(threads):
    u = np.random.default_rng(9).standard_normal((ROWS, COLS))
    plan = eagle.deploy(st_diffuse, threads=threads)
    big = np.asarray(plan.run(u=u, rate=0.1, last_row=float(ROWS - 1)))
    _past(big)
    for a in (0, ROWS // 2, ROWS - 1000):  # a slab's interior rows are the big grid's
        slab = np.asarray(plan.run(u=u[a:a + 1000], rate=0.1, last_row=999.0))
        assert slab.nbytes < STREAM_BYTES
        assert slab[1:-1].tobytes() == big[a + 1:a + 999].tobytes(), a
    assert big[0].tobytes() == u[0].tobytes() and big[-1].tobytes() == u[-1].tobytes()
    _streams(st_diffuse)


def test_vector_and_matrix_components_stream():
    rng = np.random.default_rng(10)
    v = rng.standard_normal((3, N // 3))
    plan = eagle.deploy(st_vec, threads=2, min_chunk=1 << 18)
    z = np.asarray(plan.run(v=v))
    _past(z)
    assert plan.last_chunks[0] > 1
    assert z.tobytes() == (v * 2.0).tobytes()
    x = rng.standard_normal(N // 6 + 77)
    mm = rng.standard_normal((2, 3, x.size))
    room = np.empty(6 * x.size + 3)
    a = room[3:].reshape(2, 3, x.size)  # components starting at several offsets within a line
    out = eagle.deploy(st_mat, threads=3, min_chunk=1 << 16).run(mm=mm, x=x, a=a)
    _past(a, out["k"])
    assert a.tobytes() == (mm * 0.5).tobytes()
    assert np.asarray(out["k"]).tolist() == (x * 8.0).astype(np.int64).tolist()
    _streams(st_vec)
    _streams(st_mat)
