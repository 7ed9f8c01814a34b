"""IR tests for the passes added after the first lowering: speculate-ifs, the lane-loop drivers chosen by
lower-host-lanes, and lower-gpu-lanes."""

import hawk
import hawk.math as m
from hawk import Grid, Mutable, Scalar

# ------------------------------------------------------------------ speculate-ifs


@hawk.kernel
def ir_m_border(g: Grid["row", "col":16], u: Scalar) -> Scalar:
    i, j = g.row, g.col
    if m.land(j > 0, j < 15):
        out = u.at(row=i, col=j - 1) + u.at(row=i, col=j + 1)
    else:
        out = u
    return out


@hawk.kernel
def ir_m_divide(k: Scalar, d: Scalar) -> Scalar:
    a = m.to_int(k)
    b = m.to_int(d)
    if b != 0:
        q = a // b
    else:
        q = 0
    return q


@hawk.kernel
def ir_m_divide_const(k: Scalar) -> Scalar:
    a = m.to_int(k)
    if a > 5:
        q = a // 3 + a % 7
    else:
        q = a // 16
    return q


SPECULATED = """
# a pure if/else (clamped reads only) becomes both branches and a select: no scf.if is left in the lane loop
# CHECK-LABEL: func.func @ir_m_border_lanes(
# CHECK-NOT: scf.if
# CHECK: arith.select
# CHECK-LABEL: func.func @ir_m_border_finish(
"""

KEPT_BRANCH = """
# an integer division could fault for a lane that does not take the branch: it stays a branch
# CHECK-LABEL: func.func @ir_m_divide_lanes(
# CHECK: scf.if
# CHECK: arith.floordivsi
"""


def test_speculate_ifs_turns_pure_branches_into_selects(filecheck):
    before = ir_m_border.mlir(after="lower-host-lanes")
    assert "scf.if" in before  # the front end made a branch ...
    filecheck(ir_m_border.mlir(after="speculate-ifs"), SPECULATED)  # ... which the pass removed


def test_speculate_ifs_keeps_branches_that_divide_integers(filecheck):
    filecheck(ir_m_divide.mlir(after="speculate-ifs"), KEPT_BRANCH)


CONST_DIVISOR = """
# a division by a nonzero constant cannot fault: the branch becomes a select
# CHECK-LABEL: func.func @ir_m_divide_const_lanes(
# CHECK-NOT: scf.if
# CHECK: arith.divui
# CHECK: arith.select
# CHECK-LABEL: func.func @ir_m_divide_const_finish(
"""


def test_speculate_ifs_turns_branches_dividing_by_constants_into_selects(filecheck):
    assert "scf.if" in ir_m_divide_const.mlir(after="lower-host-lanes")
    filecheck(ir_m_divide_const.mlir(after="speculate-ifs"), CONST_DIVISOR)


# ------------------------------------------------------------------ the drivers


@hawk.kernel
def ir_m_rows(g: Grid["row", "col":64], x: Scalar) -> Scalar:
    return hawk.sum(x, over="col")


@hawk.kernel
def ir_m_cols(g: Grid["row", "col":64], x: Scalar) -> Scalar:
    return hawk.sum(x, over="row")


@hawk.kernel
def ir_m_partial_block(x: Scalar, t: Mutable[Scalar]):
    t = hawk.sum(x, policy="compensated")


ROWS = """
# a sum keeping the leading axis: one register accumulator per kept slot, reassociable, stored once per slot
# CHECK-LABEL: func.func @ir_m_rows_lanes(
# CHECK: scf.for
# CHECK: scf.for {{.+}} iter_args
# CHECK: arith.addf {{.+}} fastmath<reassoc,contract>
# CHECK: scf.yield
# CHECK: }
# CHECK: memref.store
"""

COLS = """
# a sum keeping the trailing axis: rows of lanes, each lane adding into its slot (lane - row start)
# CHECK-LABEL: func.func @ir_m_cols_lanes(
# CHECK: scf.for
# CHECK: scf.for %[[LANE:[a-z0-9_]+]] =
# CHECK: arith.subi %[[LANE]]
"""

GUARD = """
# the partial last block of a blocked driver guards each lane, and that guard is never speculated
# CHECK-LABEL: func.func @ir_m_partial_block_lanes(
# CHECK: } {hawk.no_speculate}
"""


def test_leading_kept_axes_sum_in_registers(filecheck):
    filecheck(ir_m_rows.mlir(after="lower-host-lanes"), ROWS)


def test_trailing_kept_axes_update_their_slot(filecheck):
    filecheck(ir_m_cols.mlir(after="lower-host-lanes"), COLS)


def test_partial_block_guard_is_not_speculated(filecheck):
    filecheck(ir_m_partial_block.mlir(after="speculate-ifs"), GUARD)


# ------------------------------------------------------------------ lower-gpu-lanes

@hawk.kernel
def ir_m_ordered(x: Scalar, t: Mutable[Scalar]):
    t = hawk.sum(x * x, policy="ordered")


@hawk.kernel
def ir_m_scatter(k: hawk.Index, x: Scalar, bins: Mutable["bin":8]):
    hawk.scatter(bins)[k] += x


TREE = """
# tree form: a workgroup's threads take every 64th lane of its span; their partials meet pairwise in workgroup
# memory (6 levels for 64 threads, a barrier before each), and thread 0 writes the group's partials
# CHECK: gpu.module @ir_m_partial_block_gpu
# CHECK: gpu.func @ir_m_partial_block_lanes(
# CHECK-SAME: workgroup(%[[RED:.+]] : memref<128xf64, #gpu.address_space<workgroup>>)
# CHECK-SAME: kernel
# CHECK: %[[TID:.+]] = gpu.thread_id x
# CHECK: %[[FIRST:.+]] = arith.addi {{.+}}, %[[TID]]
# CHECK: scf.for {{.+}} = %[[FIRST]] to {{.+}} step %c64
# CHECK-COUNT-6: gpu.barrier
# CHECK: arith.cmpi eq, %[[TID]]
# CHECK: gpu.return
# CHECK-NOT: func.func
"""

EXACT_CHUNKS = """
# ordered sums take the chunk form: each thread deposits its lanes' terms into its own exact accumulator (integer
# adds into #exact, no workgroup memory, no float add on the ordered path); the host finish rounds
# CHECK: gpu.func @ir_m_ordered_lanes(
# CHECK-NOT: workgroup(
# CHECK-SAME: kernel
# CHECK: gpu.thread_id x
# CHECK: arith.bitcast %{{.+}} : f64 to i64
# CHECK: arith.shrui
# CHECK: arith.addi
# CHECK: gpu.return
"""

CHUNKS = """
# chunk form (a stage with a scatter): a chunk of lanes per global thread; a thread past the last chunk does
# nothing
# CHECK: gpu.func @ir_m_scatter_lanes(
# CHECK-NOT: workgroup(
# CHECK-SAME: kernel
# CHECK-DAG: gpu.thread_id x
# CHECK-DAG: gpu.block_id x
# CHECK-DAG: gpu.block_dim x
# CHECK: scf.if
# CHECK: gpu.return
"""


def test_lower_gpu_lanes_tree_form(filecheck):
    lowered = ir_m_partial_block.lowered_gpu(ir_m_partial_block.default_spec())
    filecheck(lowered.gpu_module, TREE)
    assert "_finish" in lowered.finish_llvm_ir and "gpu.module" not in lowered.finish_llvm_ir


def test_lower_gpu_lanes_ordered_sums_take_the_chunk_form(filecheck):
    filecheck(ir_m_ordered.lowered_gpu(ir_m_ordered.default_spec()).gpu_module, EXACT_CHUNKS)


def test_lower_gpu_lanes_chunk_form_for_scatters(filecheck):
    filecheck(ir_m_scatter.lowered_gpu(ir_m_scatter.default_spec()).gpu_module, CHUNKS)


WARP_TREE = """
# with a warp's width (32), each thread's state (a compensated pair) meets its subgroup's in a shuffle-xor
# butterfly (5 levels x 2 values), then one barrier, and thread 0 adds the two subgroups' states
# CHECK: gpu.func @ir_m_partial_block_lanes(
# CHECK-COUNT-10: gpu.shuffle xor
# CHECK-NOT: gpu.shuffle
# CHECK: gpu.barrier
# CHECK-NOT: gpu.barrier
# CHECK: gpu.return
"""


def test_lower_gpu_lanes_tree_form_with_warp_shuffles(filecheck):
    lowered = ir_m_partial_block.lowered_gpu(ir_m_partial_block.default_spec(), 0, 32)
    filecheck(lowered.gpu_module, WARP_TREE)


@hawk.kernel
def ir_m_stencil(g: Grid["row", "col":16], u: Scalar) -> Scalar:
    return u.at(col=g.col - 1) + u.at(col=g.col + 1)


INTERIOR = """
# neighbour reads on a 2-D grid: each row runs as three loops; the middle one (columns and rows far enough from
# every edge) reads its neighbours without clamping their coordinates, the edge loops clamp them
# CHECK-LABEL: func.func @ir_m_stencil_lanes(
# CHECK: scf.for
# CHECK: scf.for
# CHECK: arith.minsi
# CHECK: memref.load
# CHECK: scf.for
# CHECK-NOT: arith.minsi
# CHECK: memref.load
# CHECK-NOT: arith.minsi
# CHECK: memref.load
# CHECK: scf.for
# CHECK: arith.minsi
# CHECK-LABEL: func.func @ir_m_stencil_finish(
"""


def test_neighbour_reads_skip_their_clamps_in_the_interior(filecheck):
    filecheck(ir_m_stencil.mlir(after="lower-host-lanes"), INTERIOR)
