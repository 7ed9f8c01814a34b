"""The host pipeline one pass at a time: verify-hawk, lower-host-lanes, canonicalize, lower-to-llvm, and dumps."""

import inspect
import re

import pytest
from mlir import ir

import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Param, Scalar, Table, Vector
from hawk.ir import new_context
from hawk.passes.pipeline import HOST, Pipeline

# ------------------------------------------------------------------ verify-hawk


@hawk.kernel
def ir_p_ok(v: Scalar, w: Scalar, s: Mutable[Scalar], bins: Mutable["b":4]):
    s = hawk.sum(v, where=w > 0.0)
    for i in range(2):
        hawk.scatter(bins)[i] += v


def _without_func_line(text: str) -> list[str]:
    return [line for line in text.splitlines() if "func.func" not in line]


def test_verify_hawk_keeps_a_valid_kernel_unchanged():
    # the pipeline's input is the kernel's IR with its facts written onto the func (hawk/passes/plan.py)
    after = ir_p_ok.mlir(after="verify-hawk")
    assert _without_func_line(after) == _without_func_line(ir_p_ok.mlir())
    assert "hawk.signature = " in after and "hawk.spec = {float = f64" in after


# Kernels refused at decoration, where the front end and then verify-hawk check the body; plain functions, each
# marking the refused line with `# refused`. The pass itself is tested on hand-written hawk IR below.
def ir_p_sum_in_for(v: Scalar, s: Mutable[Scalar]):
    for i in range(3):
        s = hawk.sum(v * i)  # refused


def ir_p_mean_in_if(v: Scalar, s: Mutable[Scalar]):
    if v > 0.0:
        s = hawk.mean(v)  # refused
    else:
        s = hawk.mean(v)


def ir_p_sum_and_max(v: Scalar, s: Mutable[Scalar], top: Mutable[Scalar]):
    s = hawk.sum(v)
    top = hawk.max(v)  # refused


def ir_p_scatter_in_if(v: Scalar, bins: Mutable["b":4]):
    if v > 0.5:
        hawk.scatter(bins)[1] += v  # refused


REFUSALS = [
    (ir_p_sum_in_for, "may not sit inside a for loop"),
    (ir_p_mean_in_if, "may not sit inside an if"),
    (ir_p_sum_and_max, "one kernel reduces with one operation"),
    (ir_p_scatter_in_if, "hawk.scatter(...) may not sit inside an if"),
]


def _refused_line(fn) -> int:
    lines, first = inspect.getsourcelines(fn)
    return next(first + k for k, text in enumerate(lines) if text.rstrip().endswith("# refused"))


@pytest.mark.parametrize("fn, message", REFUSALS, ids=[f.__name__ for f, _ in REFUSALS])
def test_kernel_refusals_raise_kernel_error_at_the_line(fn, message):
    # the front end refuses some of these itself, with verify-hawk's words; either way: a KernelError at the line
    with pytest.raises(hawk.KernelError) as info:
        hawk.kernel(fn)
    err = info.value
    assert message in str(err)
    assert err.kernel == fn.__name__
    assert err.file == __file__ and err.line == _refused_line(fn), str(err)
    assert str(err).startswith(f"{__file__}:{err.line}: kernel '{fn.__name__}': ")


PLANE, TOTAL, SINK = '!hawk.plane<f64, array<i64>, ["sample"]>', "!hawk.total<f64, array<i64>, []>", \
    '!hawk.sink<f64, array<i64>, ["b"]>'
ARGS = f'%px: {PLANE} {{hawk.name = "x"}}, %top: {TOTAL} {{hawk.name = "top"}}, %bins: {SINK} {{hawk.name = "bins"}}'
LOAD = f'%x = "hawk.load"(%px) : ({PLANE}) -> f64\n'
COND = '%z = arith.constant 0.0 : f64\n%c = arith.cmpf ogt, %x, %z : f64\n'
REDUCE = '%t = "hawk.reduce"(%x) {{kind = "{kind}", over = ["sample"], policy = "auto"}} : (f64) -> f64\n'
CELL = f'"hawk.cell"(%top, %t) : ({TOTAL}, f64) -> ()\n'
KEY = "%k = arith.constant 1 : i64\n"
SCATTER = f'"hawk.scatter"(%bins, %x, %k) {{mode = "add", policy = "auto"}} : ({SINK}, f64, i64) -> ()\n'
LOOP = "%c0 = arith.constant 0 : index\n%c1 = arith.constant 1 : index\nscf.for %i = %c0 to %c1 step %c1 {{\n{}}}\n"
HAND_WRITTEN = {
    "reduce in if": (LOAD + COND + "scf.if %c {\n" + REDUCE.format(kind="max") + CELL + "}\n",
                     r"hawk\.max\(\.\.\.\) reduces over the lanes.*inside an if"),
    "reduce in for": (LOAD + LOOP.format(REDUCE.format(kind="sum") + CELL),
                      r"hawk\.sum\(\.\.\.\) reduces over the lanes.*inside a for loop"),
    "two operations": (LOAD + REDUCE.format(kind="mean") + CELL + REDUCE.format(kind="min").replace("%t", "%u")
                       + CELL.replace(", %t)", ", %u)"), "already reduces with hawk.mean"),
    "scatter in if": (LOAD + KEY + COND + "scf.if %c {\n" + SCATTER + "}\n", r"hawk\.scatter\(\.\.\.\) may not sit"),
}


def _hand_module(body: str) -> ir.Module:
    module = ir.Module.parse(f"func.func @ir_p_hand({ARGS}) attributes {{hawk.kernel}} {{\n" + body + "return\n}\n")
    assert module.operation.verify()  # valid IR as far as the dialect goes ...
    return module


@pytest.mark.parametrize("case", sorted(HAND_WRITTEN))
def test_verify_hawk_pass_refuses_hand_written_ir(case, monkeypatch):
    monkeypatch.delenv("HAWK_DUMP_DIR", raising=False)
    body, message = HAND_WRITTEN[case]
    with new_context(), ir.Location.unknown():
        module = _hand_module(body)
        with pytest.raises(hawk.KernelError, match=message) as e:
            Pipeline(("verify-hawk",)).run(module)  # ... that verify-hawk refuses
        assert e.value.kernel == "ir_p_hand"


@pytest.mark.parametrize("body", [
    LOAD + REDUCE.format(kind="sum") + CELL + REDUCE.format(kind="mean").replace("%t", "%u")
    + CELL.replace(", %t)", ", %u)"),
    LOAD + KEY + LOOP.format(SCATTER),
], ids=["sum-and-mean", "scatter-in-for"])
def test_verify_hawk_pass_accepts_hand_written_ir(body, monkeypatch):
    monkeypatch.delenv("HAWK_DUMP_DIR", raising=False)
    with new_context(), ir.Location.unknown():
        module = _hand_module(body)
        before = str(module)
        Pipeline(("verify-hawk",)).run(module)
        assert str(module) == before


def test_unknown_pass_names_are_refused():
    with pytest.raises(ValueError, match="unknown pass 'lower-to-gpu'; known passes: .*lower-gpu-lanes"):
        Pipeline(("verify-hawk", "lower-to-gpu"))
    with pytest.raises(ValueError, match="no pass named"):
        ir_p_ok.mlir(after="lower-to-gpu")


# ------------------------------------------------------------------ lower-host-lanes


@hawk.kernel
def ir_p_total(v: Scalar) -> Scalar:
    return hawk.sum(v * v)


def _buffers(kernel, dtype: str = "float64") -> dict[str, str]:
    """${...} substitutions from the kernel's layout: ${signature} is the lane/finish function's parameter list
    (one flat memref per buffer, in layout order), ${name} / ${name:role} the SSA name of that buffer's argument."""
    layout = kernel.layout(kernel.spec_for(dtype, {}))
    ftype = "f64" if dtype == "float64" else "f32"
    elem = [ftype if b.dtype == "f" else b.dtype for b in layout.buffers]  # 'f' is the kernel's float
    subs = {"signature": ", ".join(f"%arg{k}: memref<?x{t}>" for k, t in enumerate(elem))}
    for k, b in enumerate(layout.buffers):
        subs.setdefault(b.name, f"arg{k}")
        subs[f"{b.name}:{b.role}"] = f"arg{k}"
    return subs


def _with_buffers(checks: str, kernel, dtype: str = "float64") -> str:
    subs = _buffers(kernel, dtype)
    return re.sub(r"\$\{([^}]+)\}", lambda mo: subs[mo.group(1)], checks)


P_TOTAL_LANES = """
# CHECK-NOT: hawk.{{(load|reduce|store|scatter|cell|param|at|lane|cut_read)\b}}
# CHECK-LABEL: func.func @ir_p_total_lanes(${signature}) {
# CHECK-NOT: hawk.{{(load|reduce|store|scatter|cell|param|at|lane|cut_read)\b}}
# CHECK: memref.load %${#meta}[%c0{{.*}}] : memref<?xi64>
# CHECK: memref.load %${#meta}[%c1{{.*}}] : memref<?xi64>
# a loop that only reads into sums runs whole groups of 256 lanes first (read_groups.py): each group hints the
# lines of the lanes 1024 on, then runs the body in an inner loop whose trip count is a constant
# CHECK: %[[GROUPS:.+]] = scf.for %[[G:[a-z0-9_]+]] = %{{[a-z0-9_]+}} to %{{[a-z0-9_]+}} step %c256
# CHECK-SAME: iter_args(%[[GA:[a-z0-9_]+]] = %{{[a-z0-9_]+}}) -> (f64) {
# CHECK:   "llvm.intr.prefetch"
# CHECK:   %[[INNER:.+]] = scf.for %[[K:[a-z0-9_]+]] = %c0{{[_0-9]*}} to %c256{{[_0-9]*}} step %{{[a-z0-9_]+}}
# CHECK-SAME: iter_args(%[[B:[a-z0-9_]+]] = %[[GA]]) -> (f64) {
# CHECK:     %[[AT:.+]] = arith.addi %[[G]], %[[K]] : index
# CHECK:     %[[Y:.+]] = memref.load %${v}[%[[AT]]] : memref<?xf64>
# CHECK:     %[[YY:.+]] = arith.mulf %[[Y]], %{{.+}} : f64
# CHECK:     arith.addf %[[B]], %[[YY]] fastmath<reassoc,contract> : f64
# CHECK:   scf.yield %[[INNER]] : f64
# then the chunk's last lanes one by one, from the groups' total
# CHECK: %[[ACC:.+]] = scf.for %[[LANE:[a-z0-9_]+]] = %{{[a-z0-9_]+}} to %{{[a-z0-9_]+}} step %{{[a-z0-9_]+}}
# CHECK-SAME: iter_args(%[[A:[a-z0-9_]+]] = %[[GROUPS]]) -> (f64) {
# CHECK:   %[[X:.+]] = memref.load %${v}[%[[LANE]]] : memref<?xf64>
# CHECK:   %[[SQ:.+]] = arith.mulf %[[X]], %{{.+}} : f64
# CHECK:   %[[NEW:.+]] = arith.addf %[[A]], %[[SQ]] fastmath<reassoc,contract> : f64
# CHECK:   scf.yield %[[NEW]] : f64
# CHECK: }
# the chunk's partial total lands in scratch
# CHECK: memref.store %[[ACC]], %${#scratch}[%{{.+}}] : memref<?xf64>
# CHECK: return
# CHECK-LABEL: func.func @ir_p_total_finish(${signature}) {
# CHECK-NOT: hawk.{{(load|reduce|store|scatter|cell|param|at|lane|cut_read)\b}}
# the finish adds the chunks' partials into the cell
# CHECK: %[[SUM:.+]] = scf.for
# CHECK:   memref.load %${#scratch}
# CHECK:   arith.addf
# CHECK: }
# CHECK: memref.store %[[SUM]], %${result}[%{{.+}}] : memref<?xf64>
# CHECK-NOT: hawk.{{(load|reduce|store|scatter|cell|param|at|lane|cut_read)\b}}
"""


def test_lower_host_lanes_makes_a_lane_loop_and_a_finish(filecheck):
    text = ir_p_total.mlir(after="lower-host-lanes")
    filecheck(text, _with_buffers(P_TOTAL_LANES, ir_p_total))
    assert "hawk.load" not in text and "hawk.reduce" not in text and "hawk.kernel" not in text
    assert "attributes {hawk.layout = {buffers = [" in text  # the layout moved onto the module
    assert "func.func @ir_p_total(" not in text  # the kernel func itself is gone


@hawk.kernel
def ir_p_stencil(g: Grid["row", "col":8], u: Scalar, k: Index, t: Table["j":3], p: Param, out: Mutable[Scalar],
                 bins: Mutable["bin":5]):
    out = u.at(col=g.col + 1) * p + t.at(j=g.col)
    hawk.scatter(bins)[k] += u


STENCIL_LANES = """
# CHECK-NOT: hawk.{{(load|reduce|store|scatter|cell|param|at|lane|cut_read)\b}}
# CHECK-LABEL: func.func @ir_p_stencil_lanes(${signature}) {
# a Param is element 0, read once at the top of the function (not in the lane loop)
# CHECK: memref.load %${p}[%{{.+}}] : memref<?xf64>
# a 2-D grid runs as rows of lanes: the loops hold the coordinates, no division per lane
# CHECK: scf.for %[[ROW:[a-z0-9_]+]] = {{.+}} {
# CHECK: scf.for %[[LANE:[a-z0-9_]+]] = {{.+}} {
# CHECK:   arith.subi %[[LANE]], %{{.+}} : index
# .at clamps the coordinate into the plane and reads the input; a Table is clamped too
# CHECK:   arith.maxsi
# CHECK:   arith.minsi
# CHECK:   memref.load %${u}[%{{.+}}] : memref<?xf64>
# CHECK-NOT: memref.load %${p}[
# CHECK:   arith.maxsi
# CHECK:   arith.minsi
# CHECK:   memref.load %${t}[%{{.+}}] : memref<?xf64>
# CHECK:   memref.store %{{.+}}, %${out}[%[[LANE]]] : memref<?xf64>
# CHECK: }
# CHECK-LABEL: func.func @ir_p_stencil_finish(${signature}) {
# CHECK-NOT: hawk.{{(load|reduce|store|scatter|cell|param|at|lane|cut_read)\b}}
"""

STENCIL_SCATTER = """
# CHECK-LABEL: func.func @ir_p_stencil_lanes(
# CHECK: scf.for %[[ROW:[a-z0-9_]+]] = {{.+}} {
# CHECK: scf.for %[[LANE:[a-z0-9_]+]] = {{.+}} {
# the scatter reads its key from the Index plane, checks it and (policy "auto" is compensated) adds into this
# chunk's private copy of the sink's companion: a float64 (sum, correction) pair per slot; or counts an error
# CHECK:   memref.load %${k}[%[[LANE]]] : memref<?xi32>
# CHECK:   arith.extsi %{{.+}} : i32 to i64
# CHECK:   scf.if %{{.+}} {
# CHECK:     memref.store %{{.+}}, %${bins:priv}[%{{.+}}] : memref<?xf64>
# CHECK:     memref.store %{{.+}}, %${bins:priv}[%{{.+}}] : memref<?xf64>
# CHECK:   } else {
# CHECK:     memref.store %{{.+}}, %${#err}[%{{.+}}] : memref<?xi64>
# CHECK:   }
# CHECK-LABEL: func.func @ir_p_stencil_finish(
# the finish merges the chunks' private pairs into the companion in chunk order, then folds the companion
# into the sink: (prior + sum) + correction, rounded once
# CHECK:   memref.load %${bins:priv}
# CHECK:   memref.store %{{.+}}, %${bins:comp}
# CHECK:   memref.load %${bins:comp}
# CHECK:   memref.load %${bins:comp}
# CHECK:   memref.store %{{.+}}, %${bins:sink}[%{{.+}}] : memref<?xf64>
"""


def test_lower_host_lanes_lowers_every_kind_of_plane(filecheck):
    text = ir_p_stencil.mlir(after="lower-host-lanes")
    filecheck(text, _with_buffers(STENCIL_LANES, ir_p_stencil))
    filecheck(text, _with_buffers(STENCIL_SCATTER, ir_p_stencil))


# ------------------------------------------------------------------ canonicalize


CANONICAL = """
# CHECK-LABEL: func.func @ir_p_total_lanes(
# the groups' inner loop, then the rest: in each, the two loads of v are one after cse; x * x reads it twice
# CHECK: scf.for %[[K:[a-z0-9_]+]] = %c0 to %c256 step %c1 {{.+}} {
# CHECK-NEXT: %[[AT:.+]] = arith.addi %{{.+}}, %[[K]] : index
# CHECK-NEXT: %[[Y:.+]] = memref.load %arg0[%[[AT]]] : memref<?xf64>
# CHECK-NEXT: %[[YY:.+]] = arith.mulf %[[Y]], %[[Y]] : f64
# CHECK-NEXT: arith.addf %{{.+}}, %[[YY]] fastmath<reassoc,contract> : f64
# CHECK-NEXT: scf.yield
# CHECK: scf.for %[[LANE:[a-z0-9_]+]] = {{.+}} {
# CHECK-NEXT: %[[X:.+]] = memref.load %arg0[%[[LANE]]] : memref<?xf64>
# CHECK-NEXT: %[[SQ:.+]] = arith.mulf %[[X]], %[[X]] : f64
# CHECK-NEXT: arith.addf %{{.+}}, %[[SQ]] fastmath<reassoc,contract> : f64
# CHECK-NEXT: scf.yield
"""


def test_canonicalize_cleans_up_the_lane_loop(filecheck):
    before = ir_p_total.mlir(after="lower-host-lanes")
    after = ir_p_total.mlir(after="canonicalize")
    filecheck(after, CANONICAL)
    assert before.count("memref.load %arg0") == 4 and after.count("memref.load %arg0") == 2
    assert len(after.splitlines()) < len(before.splitlines())


# ------------------------------------------------------------------ summation policies


@hawk.kernel
def ir_p_auto(v: Scalar, w: Scalar, avg: Mutable[Scalar], s: Mutable[Scalar]):
    avg = hawk.mean(v * w, where=w > 0.0)
    s = hawk.sum(v)


AUTO = """
# the sum accumulators of the lane loop (the masked mean's and the plain sum's) may be reassociated
# CHECK-LABEL: func.func @ir_p_auto_lanes(
# CHECK: scf.for
# CHECK: %[[M:.+]] = arith.select %{{.+}}, %{{.+}}, %{{.+}} : f64
# CHECK: arith.addf %{{.+}}, %[[M]] fastmath<reassoc,contract> : f64
# the mean's count: an exact integer count of the lanes the mask lets through
# CHECK: %[[C:.+]] = arith.extui %{{.+}} : i1 to i64
# CHECK: arith.addi %{{.+}}, %[[C]] : i64
# CHECK: %[[V:.+]] = memref.load
# CHECK: arith.addf %{{.+}}, %[[V]] fastmath<reassoc,contract> : f64
# CHECK: scf.yield
# the finish combines the chunks in chunk order: no reassociation there
# CHECK-LABEL: func.func @ir_p_auto_finish(
# CHECK-NOT: reassoc
# CHECK: arith.divf
# CHECK-NOT: reassoc
"""


def test_auto_sum_accumulators_are_reassociable(filecheck):
    filecheck(ir_p_auto.mlir(after="lower-host-lanes"), AUTO)


@hawk.kernel
def ir_p_compensated(v: Scalar) -> Scalar:
    return hawk.sum(v * 3.0, policy="compensated")


@hawk.kernel
def ir_p_ordered(v: Scalar, w: Scalar, avg: Mutable[Scalar]):
    avg = hawk.mean(v, where=w < 1.0, policy="ordered")


STRICT = """
# CHECK-NOT: reassoc
# CHECK-LABEL: func.func @{{.+}}_lanes(
# CHECK-NOT: reassoc
# CHECK: scf.for
# CHECK-NOT: reassoc
# CHECK: arith.addf %{{.+}}, %{{.+}} : f64
# CHECK-NOT: reassoc
# CHECK: scf.yield
# CHECK-NOT: reassoc
# CHECK-LABEL: func.func @{{.+}}_finish(
# CHECK-NOT: reassoc
"""


# "ordered" is exact (hawk/exact.py): full blocks add each lane's term into two-float chains with TwoSums on a
# vector of the 8 chains (strict adds), then deposit them, or the block's terms, into the chunk's exact
# accumulators (integer words); the finish adds the chunks' accumulators and rounds once. The deposit and the
# rounding are private functions of the module, called where they are needed (hawk/passes/exact_emit.py).
EXACT = """
# CHECK-NOT: reassoc
# CHECK-LABEL: func.func @{{.+}}_lanes(
# CHECK-NOT: reassoc
# CHECK: arith.addf %{{.+}}, %{{.+}} : vector<8xf64>
# CHECK-NOT: reassoc
# CHECK: call @__hawk_deposit_mi64_index_f64_i1(
# CHECK-NOT: reassoc
# CHECK-LABEL: func.func @{{.+}}_finish(
# CHECK-NOT: reassoc
# CHECK: call @__hawk_round_float64_mi64_index(
# CHECK-NOT: reassoc
# CHECK-LABEL: func.func private @__hawk_round_float64_mi64_index(
# CHECK-NOT: reassoc
# CHECK: arith.uitofp
# CHECK-NOT: reassoc
# CHECK-LABEL: func.func private @__hawk_deposit_mi64_index_f64_i1(
# CHECK-NOT: reassoc
# CHECK: arith.bitcast %{{.+}} : f64 to i64
# CHECK-NOT: reassoc
"""


@pytest.mark.parametrize("kernel", [ir_p_compensated, ir_p_ordered], ids=["compensated", "ordered"])
def test_strict_policies_do_not_reassociate(kernel, filecheck):
    want = EXACT if kernel is ir_p_ordered else STRICT
    filecheck(kernel.mlir(after="lower-host-lanes"), want)
    filecheck(kernel.mlir(after="canonicalize"), want)
    assert "reassoc" not in kernel.mlir(after="lower-to-llvm")


def test_reassoc_survives_into_llvm(filecheck):
    filecheck(ir_p_total.mlir(after="lower-to-llvm"), """
        # CHECK-LABEL: llvm.func @ir_p_total_lanes(
        # CHECK: llvm.fadd %{{.+}}, %{{.+}} {fastmathFlags = #llvm.fastmath<contract, reassoc>} : f64
        # CHECK-LABEL: llvm.func @ir_p_total_finish(
        # CHECK-NOT: fastmath
        """)


# ------------------------------------------------------------------ lower-to-llvm


@hawk.kernel
def ir_p_busy(g: Grid["row", "col":4], p: Vector[3], u: Scalar, k: Index, t: Table["j":4], c: Param,
              lanes: Mutable[Vector[3]], total: Mutable[Vector[3]], bins: Mutable["bin":6]):
    q = p * m.exp(-u) + p.at(col=0) * t.at(j=g.col)
    if u > c:
        q = q * 2.0
    for i in range(2):
        q = q + m.sqrt(m.abs(u)) * i
    lanes = q
    total = hawk.sum(q, where=u < 4.0, over="col")
    hawk.scatter(bins)[k] += m.dot(q, p)


NOT_LLVM = "{{[ \"](func|scf|cf|memref|arith|vector|math|ub|index|affine)\\.}}"
ONLY_LLVM = f"""
# CHECK-NOT: {NOT_LLVM}
# CHECK-LABEL: llvm.func @ir_p_busy_lanes(
# CHECK-NOT: {NOT_LLVM}
# CHECK: llvm.fadd
# CHECK-NOT: {NOT_LLVM}
# CHECK-LABEL: llvm.func @ir_p_busy_finish(
# CHECK-NOT: {NOT_LLVM}
# CHECK: llvm.return
# CHECK-NOT: {NOT_LLVM}
"""


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_lower_to_llvm_leaves_only_llvm_ops(dtype, filecheck):
    text = ir_p_busy.mlir(dtype=dtype, after="lower-to-llvm")
    filecheck(text, ONLY_LLVM)
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        names = set()
        module.operation.walk(lambda op: (names.add(op.name), ir.WalkResult.ADVANCE)[1])
    assert names - {"builtin.module"}, text
    assert all(n.startswith("llvm.") for n in names - {"builtin.module"}), sorted(names)


# ------------------------------------------------------------------ dumps


def _dump_names(kernel) -> list[str]:
    return [f"{kernel.name}.{k + 1:02d}.{name}.mlir" for k, name in enumerate(HOST)]


def test_dump_dir_gets_one_file_per_pass_in_order(tmp_path, monkeypatch):
    dump = tmp_path / "dump"
    ir_p_total.mlir(after="verify-hawk")  # its stages built first (see test_dump_stops_with_the_pipeline)
    monkeypatch.setenv("HAWK_DUMP_DIR", str(dump))
    final = ir_p_total.mlir(after="lower-to-llvm")
    names = sorted(p.name for p in dump.iterdir())
    assert names == _dump_names(ir_p_total)
    assert (dump / names[-1]).read_text() == final
    assert "hawk.reduce" in (dump / names[0]).read_text()
    assert "hawk.layout = " in (dump / names[1]).read_text()  # plan-buffers
    lowered = (dump / names[2]).read_text()
    assert "_lanes" in lowered and "hawk.reduce" not in lowered and "hawk.load" not in lowered
    for name, file in zip(HOST, names, strict=True):
        assert (dump / file).read_text() == ir_p_total.mlir(after=name), name


def test_dump_stops_with_the_pipeline(tmp_path, monkeypatch):
    ir_p_ok.mlir(after="verify-hawk")  # its stages built first (else their analysis dumps too, whichever test ran
    monkeypatch.setenv("HAWK_DUMP_DIR", str(tmp_path))  # before in this process: a flake under pytest-xdist)
    ir_p_ok.mlir(after="lower-host-lanes")
    assert sorted(p.name for p in tmp_path.iterdir()) == _dump_names(ir_p_ok)[:3]


def test_kernels_can_be_defined_while_dumping(tmp_path, monkeypatch):
    # HAWK_DUMP_DIR is set for a whole session (a notebook, a script): defining a kernel must still work
    monkeypatch.setenv("HAWK_DUMP_DIR", str(tmp_path))

    @hawk.kernel
    def ir_p_late(v: Scalar) -> Scalar:
        return hawk.max(v)

    ir_p_late.mlir(after="lower-to-llvm")
    assert set(_dump_names(ir_p_late)) <= {p.name for p in tmp_path.iterdir()}
