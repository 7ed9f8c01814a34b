"""The hawk dialect: typed planes as block arguments; well-formed hawk ops verify, malformed ones are refused by
the IRDL verifier, and verify-hawk refuses what IRDL cannot say (value types against plane types, key counts)."""

import pytest
from mlir import ir

import hawk
from hawk import Grid, Mutable, Param, Scalar, Table
from hawk.errors import KernelError
from hawk.ir import access, create, is_hawk, new_context
from hawk.ir.types import hawk_type, parts
from hawk.passes.verify import verify_hawk

TYPES = """
!x = !hawk.plane<f64, array<i64>, ["row"]>
!v = !hawk.plane<f32, array<i64: 3>, ["a", "b"]>
!p = !hawk.scalar<f64, array<i64>>
!t = !hawk.table<f64, array<i64>, ["k"]>
!y = !hawk.output<f64, array<i64>, ["row"]>
!s = !hawk.sink<f64, array<i64>, ["bin"]>
!s2 = !hawk.sink<f64, array<i64>, ["i", "j"]>
!c = !hawk.total<f64, array<i64>, []>
"""

# One function using every hawk op once, in the generic form the front end prints.
EVERY_OP = TYPES + """
func.func @every_op(%xp: !x {hawk.name = "x"}, %pp: !p {hawk.name = "p"}, %tp: !t {hawk.name = "t"},
                    %yp: !y {hawk.name = "y"}, %bins: !s {hawk.name = "bins"}, %total: !c {hawk.name = "total"},
                    %cut: !c {hawk.name = "cut0"}) attributes {hawk.kernel, hawk.axes = ["row"]} {
  %r = "hawk.lane"() {axis = "row"} : () -> i64
  %l = "hawk.extent"() {axis = "row"} : () -> i64
  %x = "hawk.load"(%xp) : (!x) -> f64
  %p = "hawk.param"(%pp) : (!p) -> f64
  %n = "hawk.at"(%xp, %r) {axes = ["#"]} : (!x, i64) -> f64
  %u = "hawk.at"(%tp, %r) {axes = ["k"]} : (!t, i64) -> f64
  %e = "hawk.cut_read"(%cut) : (!c) -> f64
  %s = arith.addf %x, %n : f64
  "hawk.store"(%yp, %s) : (!y, f64) -> ()
  %m = arith.cmpf ogt, %x, %p : f64
  %t = "hawk.reduce"(%x, %m) {kind = "sum", over = ["row"], policy = "auto"} : (f64, i1) -> f64
  "hawk.cell"(%total, %t) : (!c, f64) -> ()
  "hawk.scatter"(%bins, %x, %r) {mode = "add", policy = "plain"} : (!s, f64, i64) -> ()
  return
}
"""
EVERY_OP_CHECKS = """
# CHECK-LABEL: func.func @every_op(
# CHECK-SAME: %[[XP:[a-z0-9]+]]: !hawk.plane<f64, array<i64>, ["row"]> {hawk.name = "x"}
# CHECK-SAME: !hawk.total<f64, array<i64>, []> {hawk.name = "cut0"}) attributes {hawk.axes = ["row"], hawk.kernel
# CHECK: %[[R:.+]] = "hawk.lane"() {axis = "row"} : () -> i64
# CHECK: "hawk.extent"() {axis = "row"} : () -> i64
# CHECK: %[[X:.+]] = "hawk.load"(%[[XP]]) : (!hawk.plane<f64, array<i64>, ["row"]>) -> f64
# CHECK: %[[P:.+]] = "hawk.param"(%{{.+}}) : (!hawk.scalar<f64, array<i64>>) -> f64
# CHECK: "hawk.at"(%[[XP]], %[[R]]) {axes = ["#"]} : (!hawk.plane<f64, array<i64>, ["row"]>, i64) -> f64
# CHECK: "hawk.cut_read"(%{{.+}}) : (!hawk.total<f64, array<i64>, []>) -> f64
# CHECK: "hawk.store"(%{{.+}}, %{{.+}}) : (!hawk.output<f64, array<i64>, ["row"]>, f64) -> ()
# CHECK: %[[T:.+]] = "hawk.reduce"(%[[X]], %{{.+}}) {kind = "sum", over = ["row"], policy = "auto"}
# CHECK: "hawk.cell"(%{{.+}}, %[[T]]) : (!hawk.total<f64, array<i64>, []>, f64) -> ()
# CHECK: "hawk.scatter"(%{{.+}}, %[[X]], %[[R]]) {mode = "add", policy = "plain"}
"""


def _rejection(text: str) -> str | None:
    """The verifier's complaint about `text` (parsing runs the verifier too), or None when it verifies."""
    with new_context() as ctx, ir.Location.unknown():
        ctx.emit_error_diagnostics = False
        try:
            module = ir.Module.parse(text)
            module.operation.verify()
        except ir.MLIRError as exc:
            return str(exc)
    return None


ARGS = ('%xp: !x {hawk.name = "x"}, %vp: !v {hawk.name = "v"}, %pp: !p {hawk.name = "p"}, '
        '%yp: !y {hawk.name = "y"}, %sp: !s {hawk.name = "s"}, %s2: !s2 {hawk.name = "s2"}, '
        '%cp: !c {hawk.name = "c"}')


def _in_func(body: str) -> str:
    return TYPES + f"func.func @k({ARGS}) attributes {{hawk.kernel, hawk.axes = [\"row\"]}} {{\n" + body + \
        "\n  return\n}\n"


def _ops(module) -> list:
    ops = []
    module.operation.walk(lambda op: (ops.append(op), ir.WalkResult.ADVANCE)[1])
    return ops


def test_every_hawk_op_verifies(filecheck):
    assert _rejection(EVERY_OP) is None
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(EVERY_OP)
        assert module.operation.verify()
        filecheck(str(module), EVERY_OP_CHECKS)
        ops = _ops(module)
        hawk_ops = sorted({op.name for op in ops if op.name.startswith("hawk.")})
        assert hawk_ops == ["hawk.at", "hawk.cell", "hawk.cut_read", "hawk.extent", "hawk.lane", "hawk.load",
                            "hawk.param", "hawk.reduce", "hawk.scatter", "hawk.store"]
        named = {op.name: access.plane_name(op) for op in ops if op.name in ("hawk.load", "hawk.param",
                                                                          "hawk.store")}
        assert named == {"hawk.load": "x", "hawk.param": "p", "hawk.store": "y"}
        scatter = next(op for op in ops if op.name == "hawk.scatter")
        assert access.sink_name(scatter) == "bins" and access.scatter_mode(scatter) == "add"
        assert access.stored_value(scatter).owner.name == "hawk.load" and len(access.scatter_keys(scatter)) == 1
        cut = next(op for op in ops if op.name == "hawk.cut_read")
        assert access.cell_name(cut) == "cut0" and access.coord_axes(cut) == []
        verify_hawk(module)


def test_hawk_ops_need_the_hawk_dialect():
    # a bare context does not know hawk: an unregistered hawk op is refused, not silently accepted
    with ir.Context(), ir.Location.unknown():
        with pytest.raises(ir.MLIRError, match="unregistered dialect|hawk"):
            ir.Module.parse('func.func @k() {\n%r = "hawk.lane"() {axis = "row"} : () -> i64\nreturn\n}')


def test_unknown_hawk_op_is_refused():
    msg = _rejection(_in_func('%r = "hawk.median"(%xp) : (!x) -> f64'))
    assert msg is not None and "hawk.median" in msg


def test_types_print_and_read_back():
    with new_context(), ir.Location.unknown():
        t = hawk_type("sink", ir.F32Type.get(), (2, 3), ("bin", "k"))
        assert str(t) == '!hawk.sink<f32, array<i64: 2, 3>, ["bin", "k"]>'
        p = parts(t)
        assert (p.kind, p.elem, p.shape, p.axes) == ("sink", ir.F32Type.get(), (2, 3), ("bin", "k"))
        assert str(p.value_type()) == "vector<2x3xf32>"
        assert parts(hawk_type("scalar", ir.F64Type.get())).axes == ()
        with pytest.raises(ValueError, match="unknown hawk type kind"):
            hawk_type("lanes", ir.F64Type.get())


# every kind, policy and mode the dialect admits verifies
@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("policy", ["auto", "compensated", "plain", "ordered"])
def test_reduce_kinds_and_policies_verify(kind, policy):
    body = ('%x = "hawk.load"(%vp) : (!v) -> vector<3xf32>\n'
            f'%t = "hawk.reduce"(%x) {{kind = "{kind}", over = ["a", "b"], policy = "{policy}"}} '
            ': (vector<3xf32>) -> vector<3xf32>')
    assert _rejection(_in_func(body)) is None


@pytest.mark.parametrize("mode", ["add", "set"])
def test_scatter_modes_verify(mode):
    body = ('%x = "hawk.load"(%xp) : (!x) -> f64\n%k = arith.constant 2 : i64\n'
            f'"hawk.scatter"(%s2, %x, %k, %k) {{mode = "{mode}", policy = "auto"}} : (!s2, f64, i64, i64) -> ()')
    assert _rejection(_in_func(body)) is None


X = '%x = "hawk.load"(%xp) : (!x) -> f64\n'
K64 = "%k = arith.constant 1 : i64\n"

MALFORMED = {
    "reduce kind median": (X + '%t = "hawk.reduce"(%x) {kind = "median", over = ["i"], policy = "auto"} '
                               ': (f64) -> f64', '"median"'),
    "reduce policy fast": (X + '%t = "hawk.reduce"(%x) {kind = "sum", over = ["i"], policy = "fast"} '
                               ': (f64) -> f64', '"fast"'),
    "reduce over a string": (X + '%t = "hawk.reduce"(%x) {kind = "sum", over = "i", policy = "auto"} '
                                 ': (f64) -> f64', "builtin.array"),
    "reduce without over": (X + '%t = "hawk.reduce"(%x) {kind = "sum", policy = "auto"} : (f64) -> f64',
                            '"over"'),
    "reduce changes type": (X + '%t = "hawk.reduce"(%x) {kind = "sum", over = ["i"], policy = "auto"} '
                                ': (f64) -> f32', "f32"),
    "reduce i32 mask": (X + '%m = arith.constant 1 : i32\n%t = "hawk.reduce"(%x, %m) {kind = "sum", over = ["i"], '
                            'policy = "auto"} : (f64, i32) -> f64', "i1"),
    "lane returns f64": ('%r = "hawk.lane"() {axis = "row"} : () -> f64', "i64"),
    "lane returns index": ('%r = "hawk.lane"() {axis = "row"} : () -> index', "i64"),
    "lane axis not a string": ('%r = "hawk.lane"() {axis = 0 : i64} : () -> i64', "builtin.string"),
    "lane without axis": ('%r = "hawk.lane"() : () -> i64', '"axis"'),
    "extent returns f64": ('%r = "hawk.extent"() {axis = "row"} : () -> f64', "i64"),
    "extent without axis": ('%r = "hawk.extent"() : () -> i64', '"axis"'),
    "load without plane": ('%x = "hawk.load"() : () -> f64', "operand"),
    "load of a number": ('%c = arith.constant 1.0 : f64\n%x = "hawk.load"(%c) : (f64) -> f64', "f64"),
    "load of a sink": ('%x = "hawk.load"(%sp) : (!s) -> f64', "hawk.sink"),
    "param of a plane": ('%x = "hawk.param"(%xp) : (!x) -> f64', "hawk.plane"),
    "at i32 coordinate": ('%k = arith.constant 1 : i32\n%y = "hawk.at"(%xp, %k) {axes = ["#"]} '
                          ': (!x, i32) -> f64', "i64"),
    "at axes a string": (K64 + '%y = "hawk.at"(%xp, %k) {axes = "#"} : (!x, i64) -> f64', "builtin.array"),
    "at of an output": (K64 + '%y = "hawk.at"(%yp, %k) {axes = ["#"]} : (!y, i64) -> f64', "hawk.output"),
    "store with a result": (X + '%y = "hawk.store"(%yp, %x) : (!y, f64) -> f64', "0 results"),
    "store into an input": (X + '"hawk.store"(%xp, %x) : (!x, f64) -> ()', "hawk.plane"),
    "cell into an output": (X + '"hawk.cell"(%yp, %x) : (!y, f64) -> ()', "hawk.output"),
    "cut_read of a sink": ('%x = "hawk.cut_read"(%sp) : (!s) -> f64', "hawk.sink"),
    "scatter mode max": (X + K64 + '"hawk.scatter"(%sp, %x, %k) {mode = "max", policy = "auto"} '
                                   ': (!s, f64, i64) -> ()', '"max"'),
    "scatter policy fast": (X + K64 + '"hawk.scatter"(%sp, %x, %k) {mode = "add", policy = "fast"} '
                                      ': (!s, f64, i64) -> ()', '"fast"'),
    "scatter i32 key": (X + '%k = arith.constant 1 : i32\n"hawk.scatter"(%sp, %x, %k) {mode = "add", '
                            'policy = "auto"} : (!s, f64, i32) -> ()', "i64"),
    "scatter into an output": (X + K64 + '"hawk.scatter"(%yp, %x, %k) {mode = "add", policy = "auto"} '
                                         ': (!y, f64, i64) -> ()', "hawk.output"),
    "scan op pow": (X + '%y = "hawk.scan"(%x) {op = "pow", mode = "inclusive"} : (f64) -> f64', '"pow"'),
    "scan mode both": (X + '%y = "hawk.scan"(%x) {op = "add", mode = "both"} : (f64) -> f64', '"both"'),
    "scan without mode": (X + '%y = "hawk.scan"(%x) {op = "add"} : (f64) -> f64', '"mode"'),
    "scan i32 reset": (X + '%r = arith.constant 1 : i32\n%y = "hawk.scan"(%x, %r) {op = "add", mode = "inclusive"} '
                           ': (f64, i32) -> f64', "'i32' does not satisfy"),  # (i1 reset or i64 key)
    "scan changes type": (X + '%y = "hawk.scan"(%x) {op = "max", mode = "inclusive"} : (f64) -> f32', "f32"),
    "scan_totals into an output": (X + '"hawk.scan_totals"(%yp, %x) {op = "add"} : (!y, f64) -> ()', "hawk.output"),
    "scan_apply of a sink": (X + '%y = "hawk.scan_apply"(%sp, %x) {op = "min", mode = "exclusive"} '
                                 ': (!s, f64) -> f64', "hawk.sink"),
}


def test_scan_ops_verify_and_answer_their_accessors():
    body = (X + '%f = arith.cmpf ogt, %x, %x : f64\n'
            '%a = "hawk.scan"(%x, %f) {op = "min", mode = "exclusive"} : (f64, i1) -> f64\n'
            '"hawk.scan_totals"(%cp, %a) {op = "add"} : (!c, f64) -> ()\n'
            '%b = "hawk.scan_apply"(%cp, %a) {op = "add", mode = "inclusive"} : (!c, f64) -> f64')
    text = _in_func(body)
    assert _rejection(text) is None
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)  # (kept alive while its ops are read)
        ops = {op.name: op for op in _ops(module)}
        scan, totals, apply = ops["hawk.scan"], ops["hawk.scan_totals"], ops["hawk.scan_apply"]
        assert (access.scan_op(scan), access.scan_mode(scan)) == ("min", "exclusive")
        assert access.scan_reset(scan).owner.name == "arith.cmpf" and access.scan_reset(apply) is None
        assert access.scan_value(totals) == scan.results[0] and access.scan_cell(totals) == "c"
        assert (access.scan_op(apply), access.scan_mode(apply), access.scan_cell(apply)) == ("add", "inclusive", "c")


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_hawk_op_is_refused(case):
    body, expect = MALFORMED[case]
    msg = _rejection(_in_func(body))
    assert msg is not None, f"{case}: the verifier accepted\n{body}"
    assert expect in msg, msg


# what IRDL cannot say: verify-hawk checks a value against its plane's type, and key / coordinate counts
TYPE_ERRORS = {
    "load of f32 from an f64 plane": ('%x = "hawk.load"(%xp) : (!x) -> f32', "f32", "'x'"),
    "load of a scalar from a vector plane": ('%x = "hawk.load"(%vp) : (!v) -> f32', "vector<3xf32>", "'v'"),
    "store of f32 into an f64 output": ('%c = arith.constant 1.0 : f32\n"hawk.store"(%yp, %c) : (!y, f32) -> ()',
                                        "f32", "'y'"),
    "scatter with one key into a two-axis sink": (X + K64 + '"hawk.scatter"(%s2, %x, %k) {mode = "add", '
                                                  'policy = "auto"} : (!s2, f64, i64) -> ()', "1 keys", "'s2'"),
    "at with two coordinates for a flat index": (K64 + '%y = "hawk.at"(%xp, %k, %k) {axes = ["#"]} '
                                                 ': (!x, i64, i64) -> f64', "2 coordinates", "'x'"),
    "cut_read of the wrong payload": ('%x = "hawk.cut_read"(%cp) : (!c) -> vector<2xf64>', "vector<2xf64>",
                                      "'c'"),
}


@pytest.mark.parametrize("case", sorted(TYPE_ERRORS))
def test_verify_hawk_refuses_values_that_do_not_match_their_plane(case):
    body, got, name = TYPE_ERRORS[case]
    assert _rejection(_in_func(body)) is None  # IRDL accepts it ...
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(_in_func(body))
        with pytest.raises(KernelError) as excinfo:  # ... verify-hawk does not, naming the kernel and the plane
            verify_hawk(module)
    msg = str(excinfo.value)
    assert got in msg and name in msg and "k" == excinfo.value.kernel, msg


@pytest.mark.parametrize("name, attrs, results, operand_types", [
    ("hawk.reduce", {"kind": "median", "over": ["i"], "policy": "auto"}, ["f64"], ["f64"]),
    ("hawk.lane", {"axis": "row"}, ["f64"], []),
    ("hawk.scatter", {"mode": "max", "policy": "auto"}, [], ["sink", "f64", "i64"]),
    ("hawk.scatter", {"mode": "add", "policy": "auto"}, [], ["plane", "f64", "i64"]),
])
def test_verify_refuses_ops_built_without_the_parser(name, attrs, results, operand_types):
    # ir.Operation.create does not verify: the op lands in the module and module.verify() must refuse it
    with new_context() as ctx, ir.Location.unknown():
        ctx.emit_error_diagnostics = False
        module = ir.Module.parse(_in_func(X + K64))
        func_op = module.body.operations[0]
        block = func_op.regions[0].blocks[0]
        x, k = block.operations[0].result, block.operations[1].result
        operands = {"f64": x, "i64": k, "plane": block.arguments[0], "sink": block.arguments[4]}
        assert module.operation.verify()
        with ir.InsertionPoint(block.operations[2]):
            create(name, [operands[t] for t in operand_types], [ir.Type.parse(t) for t in results], attrs)
        with pytest.raises(ir.MLIRError, match="does not satisfy the constraint|expected 'i64'|expected base"):
            module.operation.verify()


# ------------------------------------------------------------------ the front end's output is valid hawk IR


@hawk.kernel
def ir_dialect_mix(g: Grid["row", "col":4], x: Scalar, t: Table["k":3], p: Param, y: Mutable[Scalar],
                   bins: Mutable["bin":4]):
    y = x.at(col=g.col + 1) + t.at(k=g.col) * p
    hawk.scatter(bins)[g.col] += x


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_front_end_ir_reparses_and_verifies(dtype):
    text = ir_dialect_mix.mlir(dtype=dtype)
    assert _rejection(text) is None
    f = "f64" if dtype == "float64" else "f32"
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        assert str(module) == text  # the printed form round-trips
        ops = _ops(module)
        at = [op for op in ops if is_hawk(op, "at")]
        assert [access.plane_name(op) for op in at] == ["x", "t"]
        assert [access.coord_axes(op) for op in at] == [["row", "col"], ["k"]]
        assert [access.plane_type(op).kind for op in at] == ["plane", "table"]
        assert is_hawk(at[0]) and not is_hawk(at[0], "load") and not is_hawk(ops[-1])  # the module itself
        kfunc = access.kernel_func(module)
        assert access.kernel_axes(kfunc) == ["row", "col"]
        types = {n: str(a.type) for n, a in zip(("x", "t", "p", "y", "bins"), kfunc.regions[0].blocks[0].arguments,
                                                 strict=True)}
        assert types == {"x": f'!hawk.plane<{f}, array<i64>, ["row", "col"]>',
                         "t": f'!hawk.table<{f}, array<i64>, ["k"]>', "p": f"!hawk.scalar<{f}, array<i64>>",
                         "y": f'!hawk.output<{f}, array<i64>, ["row", "col"]>',
                         "bins": f'!hawk.sink<{f}, array<i64>, ["bin"]>'}
        verify_hawk(module)


def test_filecheck_helper_reports_a_mismatch(filecheck):
    text = "%a = hawk\n%b = eagle\n"
    filecheck(text, "# CHECK: %[[A:.+]] = hawk\n# CHECK-NEXT: %b = eagle")
    with pytest.raises(pytest.fail.Exception, match="FileCheck failed"):
        filecheck(text, "# CHECK: %b = eagle\n# CHECK-NEXT: %a = hawk")
