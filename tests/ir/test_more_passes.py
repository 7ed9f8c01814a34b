"""IR tests for the passes added after the first lowering: speculate-ifs, the lane-loop drivers chosen by
lower-host-lanes, lower-gpu-lanes, and the lowering's passes run one by one (gpu-form, build-finish,
lower-chunk-loop, map-lanes-gpu)."""

import re
from pathlib import Path

import pytest
from mlir import ir

import hawk
import hawk.math as m
from hawk import Grid, Mutable, Scalar, Vector
from hawk.ir import new_context
from hawk.passes.base import kernel_funcs

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
# a division by a nonzero constant cannot fault: the branch becomes a select (the ifs left choose whether the
# launch streams its output, stream.py, and yield nothing)
# CHECK-LABEL: func.func @ir_m_divide_const_lanes(
# CHECK-NOT: scf.if {{.+}} -> (
# CHECK: arith.divui
# CHECK: arith.select
# CHECK-LABEL: func.func @ir_m_divide_const_finish(
"""


def test_speculate_ifs_turns_branches_dividing_by_constants_into_selects(filecheck):
    assert "= scf.if" in ir_m_divide_const.mlir(after="lower-host-lanes")
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


@hawk.kernel
def ir_m_wide_block(v: Vector[12], t: Mutable[Vector[12]]):
    t = hawk.sum(v, policy="compensated")  # (a wide payload: its short block lane by lane, under a guard)


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
# CHECK-LABEL: func.func @ir_m_wide_block_lanes(
# CHECK: } {hawk.no_speculate}
"""


def test_leading_kept_axes_sum_in_registers(filecheck):
    filecheck(ir_m_rows.mlir(after="lower-host-lanes"), ROWS)


def test_trailing_kept_axes_update_their_slot(filecheck):
    filecheck(ir_m_cols.mlir(after="lower-host-lanes"), COLS)


def test_partial_block_guard_is_not_speculated(filecheck):
    filecheck(ir_m_wide_block.mlir(after="speculate-ifs"), GUARD)


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


# ------------------------------------------------------------------ the lowering as passes (lower_units.py)

IR_DIR = Path(__file__).parent
GROUPS = [  # (input file, a group, the passes it runs)
    ("host_finish", "lower-host-lanes", "chunk-form,build-finish{target=host},lower-chunk-loop"),
    ("host_sink_private", "lower-host-lanes", "chunk-form,build-finish,lower-chunk-loop"),
    ("host_scan", "plan-buffers,lower-host-lanes", "plan-buffers,chunk-form,build-finish,lower-chunk-loop"),
    ("gpu_tree", "lower-gpu-lanes{subgroup=32}",
     "gpu-form,chunk-form{pairs=false wide=false},build-finish{target=gpu},map-lanes-gpu{subgroup=32}"),
    ("gpu_chunks", "lower-gpu-lanes{atomics=true wide=true}",
     "gpu-form,chunk-form{pairs=false},build-finish{target=gpu},map-lanes-gpu{atomics=true wide=true}"),
    ("gpu_blocks", "lower-gpu-lanes",
     "gpu-form,chunk-form{pairs=false wide=false},build-finish{target=gpu},map-lanes-gpu"),
]


def _ir_input(name: str) -> str:
    return (IR_DIR / f"{name}.mlir").read_text()


@pytest.mark.parametrize("name, group, passes", GROUPS, ids=[g[0] for g in GROUPS])
def test_a_lowering_group_is_its_passes_run_one_by_one(name, group, passes):
    from hawk.opt import run

    text = _ir_input(name)
    whole = run(text, passes=group)
    assert not re.search(r'"hawk\.\w+"\(', whole) and "hawk.kernel" not in whole  # no hawk op, no kernel func
    assert run(text, passes=passes) == whole
    one_by_one = text
    for p in passes.split(","):  # each pass's output is a module the next one reads as text
        one_by_one = run(one_by_one, passes=p)
    assert one_by_one == whole


def test_build_finish_depends_on_the_layout_alone():
    # the finish build-finish makes is the one the lowered module ends with: the lanes' lowering leaves it as
    # it was, and (GPU) no option of the mapping changes it
    from hawk.opt import run

    def finish_of(text: str) -> str:
        return text[text.index("func.func @opt_hist_finish("):]

    text = _ir_input("gpu_chunks")
    built = finish_of(run(text, passes="build-finish{target=gpu}"))
    for opts in ("", "{subgroup=32 atomics=true wide=true}", "{subgroup=64 wide=tree}"):
        assert finish_of(run(text, passes=f"lower-gpu-lanes{opts}")) == built
    host = finish_of(run(text, passes="build-finish"))
    assert finish_of(run(text, passes="lower-host-lanes")) == host


@pytest.mark.parametrize("name, form", [("gpu_tree", "tree"), ("gpu_slots", "slots"), ("gpu_chunks", "chunks"),
                                        ("gpu_blocks", "blocks"), ("host_reduce_ordered", "chunks")])
def test_gpu_form_writes_the_form_the_layout_takes(name, form):
    from hawk.abi.layout import gpu_form
    from hawk.opt import run
    from hawk.passes.plan import layout_of_attr

    out = run(_ir_input(name), passes="gpu-form")
    assert re.findall(r'hawk\.gpu_form = "(\w+)"', out) == [form]
    with new_context():  # the same answer the runtime gets from the layout
        module = ir.Module.parse(out)
        (func,) = kernel_funcs(module)
        assert gpu_form(layout_of_attr(func.attributes["hawk.layout"]), 8) == form


def test_map_lanes_gpu_reads_the_form_from_the_ir():
    from hawk.opt import run

    text = _ir_input("gpu_tree")
    with pytest.raises(ValueError, match="has no hawk.gpu_form attribute: run gpu-form first"):
        run(text, passes="map-lanes-gpu")
    forced = run(text, passes="gpu-form").replace('hawk.gpu_form = "tree"', 'hawk.gpu_form = "chunks"')
    assert 'hawk.gpu_form = "chunks"' in forced
    with pytest.raises(ValueError, match="has no hawk.chunk_form attribute: run chunk-form first"):
        run(forced, passes="build-finish{target=gpu},map-lanes-gpu")  # the chunks form reads its loop shape
    chunks = run(forced, passes="chunk-form{pairs=false},build-finish{target=gpu},map-lanes-gpu")  # a tree stage
    assert "gpu.block_dim" in chunks and "workgroup(" not in chunks
    with pytest.raises(ValueError, match="'rows' is not a GPU form; write one of tree, slots, chunks, blocks"):
        run(forced.replace('"chunks"', '"rows"'), passes="map-lanes-gpu")
