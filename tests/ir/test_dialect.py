"""The hawk dialect: well-formed hawk ops verify, malformed ones are refused by the IRDL verifier."""

import pytest
from mlir import ir

import hawk
from hawk import Grid, Mutable, Param, Scalar, Table
from hawk.ir import attr_str, attr_strs, create, is_hawk, new_context

# One function using every hawk op once, in the generic form the front end prints.
EVERY_OP = """
func.func @every_op() attributes {hawk.kernel} {
  %r = "hawk.lane"() {axis = "row"} : () -> i64
  %x = "hawk.load"() {plane = "x"} : () -> f64
  %p = "hawk.param"() {plane = "p"} : () -> f64
  %n = "hawk.at"(%r) {axes = ["#"], plane = "x"} : (i64) -> f64
  %s = arith.addf %x, %n : f64
  "hawk.store"(%s) {plane = "y"} : (f64) -> ()
  %m = arith.cmpf ogt, %x, %p : f64
  %t = "hawk.reduce"(%x, %m) {kind = "sum", over = ["row"], policy = "auto"} : (f64, i1) -> f64
  "hawk.cell"(%t) {name = "total"} : (f64) -> ()
  "hawk.scatter"(%x, %r) {mode = "add", policy = "plain", sink = "bins"} : (f64, i64) -> ()
  return
}
"""
EVERY_OP_CHECKS = """
# CHECK-LABEL: func.func @every_op() attributes {hawk.kernel}
# CHECK: %[[R:.+]] = "hawk.lane"() {axis = "row"} : () -> i64
# CHECK: %[[X:.+]] = "hawk.load"() {plane = "x"} : () -> f64
# CHECK: %[[P:.+]] = "hawk.param"() {plane = "p"} : () -> f64
# CHECK: "hawk.at"(%[[R]]) {axes = ["#"], plane = "x"} : (i64) -> f64
# CHECK: "hawk.store"(%{{.+}}) {plane = "y"} : (f64) -> ()
# CHECK: %[[M:.+]] = arith.cmpf ogt, %[[X]], %[[P]] : f64
# CHECK: %[[T:.+]] = "hawk.reduce"(%[[X]], %[[M]]) {kind = "sum", over = ["row"], policy = "auto"} : (f64, i1) -> f64
# CHECK: "hawk.cell"(%[[T]]) {name = "total"} : (f64) -> ()
# CHECK: "hawk.scatter"(%[[X]], %[[R]]) {mode = "add", policy = "plain", sink = "bins"} : (f64, i64) -> ()
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


def _in_func(body: str) -> str:
    return "func.func @k() {\n" + body + "\n  return\n}\n"


def test_every_hawk_op_verifies(filecheck):
    assert _rejection(EVERY_OP) is None
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(EVERY_OP)
        assert module.operation.verify()
        filecheck(str(module), EVERY_OP_CHECKS)
        names = []
        module.operation.walk(lambda op: (names.append(op.name), ir.WalkResult.ADVANCE)[1])
        hawk_ops = sorted({n for n in names if n.startswith("hawk.")})
        assert hawk_ops == ["hawk.at", "hawk.cell", "hawk.lane", "hawk.load", "hawk.param", "hawk.reduce",
                            "hawk.scatter", "hawk.store"]


def test_hawk_ops_need_the_hawk_dialect():
    # a bare context does not know hawk: an unregistered hawk op is refused, not silently accepted
    with ir.Context(), ir.Location.unknown():
        with pytest.raises(ir.MLIRError, match="unregistered dialect"):
            ir.Module.parse(_in_func('%r = "hawk.lane"() {axis = "row"} : () -> i64'))


def test_unknown_hawk_op_is_refused():
    msg = _rejection(_in_func('%r = "hawk.median"() {plane = "x"} : () -> f64'))
    assert msg is not None and "hawk.median" in msg


# every kind, policy and mode the dialect admits verifies
@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("policy", ["auto", "compensated", "plain", "ordered"])
def test_reduce_kinds_and_policies_verify(kind, policy):
    body = ('%x = "hawk.load"() {plane = "x"} : () -> vector<3xf32>\n'
            f'%t = "hawk.reduce"(%x) {{kind = "{kind}", over = ["a", "b"], policy = "{policy}"}} '
            ': (vector<3xf32>) -> vector<3xf32>')
    assert _rejection(_in_func(body)) is None


@pytest.mark.parametrize("mode", ["add", "set"])
def test_scatter_modes_verify(mode):
    body = ('%x = "hawk.load"() {plane = "x"} : () -> f64\n%k = arith.constant 2 : i64\n'
            f'"hawk.scatter"(%x, %k, %k) {{mode = "{mode}", policy = "auto", sink = "s"}} : (f64, i64, i64) -> ()')
    assert _rejection(_in_func(body)) is None


X = '%x = "hawk.load"() {plane = "x"} : () -> f64\n'
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
    "load without plane": ('%x = "hawk.load"() : () -> f64', '"plane"'),
    "param plane not a string": ('%x = "hawk.param"() {plane = ["p"]} : () -> f64', "builtin.string"),
    "at i32 coordinate": (X + '%k = arith.constant 1 : i32\n%y = "hawk.at"(%k) {axes = ["#"], plane = "x"} '
                              ': (i32) -> f64', "i64"),
    "at axes a string": (X + K64 + '%y = "hawk.at"(%k) {axes = "#", plane = "x"} : (i64) -> f64', "builtin.array"),
    "store with a result": (X + '%y = "hawk.store"(%x) {plane = "y"} : (f64) -> f64', "0 results"),
    "cell name not a string": (X + '"hawk.cell"(%x) {name = 1 : i64} : (f64) -> ()', "builtin.string"),
    "scatter mode max": (X + K64 + '"hawk.scatter"(%x, %k) {mode = "max", policy = "auto", sink = "s"} '
                                   ': (f64, i64) -> ()', '"max"'),
    "scatter policy fast": (X + K64 + '"hawk.scatter"(%x, %k) {mode = "add", policy = "fast", sink = "s"} '
                                      ': (f64, i64) -> ()', '"fast"'),
    "scatter i32 key": (X + '%k = arith.constant 1 : i32\n"hawk.scatter"(%x, %k) {mode = "add", policy = "auto", '
                            'sink = "s"} : (f64, i32) -> ()', "i64"),
    "scatter without sink": (X + K64 + '"hawk.scatter"(%x, %k) {mode = "add", policy = "auto"} : (f64, i64) -> ()',
                             '"sink"'),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_hawk_op_is_refused(case):
    body, expect = MALFORMED[case]
    msg = _rejection(_in_func(body))
    assert msg is not None, f"{case}: the verifier accepted\n{body}"
    assert expect in msg, msg


@pytest.mark.parametrize("name, attrs, results, operand_types", [
    ("hawk.reduce", {"kind": "median", "over": ["i"], "policy": "auto"}, ["f64"], ["f64"]),
    ("hawk.lane", {"axis": "row"}, ["f64"], []),
    ("hawk.scatter", {"sink": "s", "mode": "max", "policy": "auto"}, [], ["f64", "i64"]),
])
def test_verify_refuses_ops_built_without_the_parser(name, attrs, results, operand_types):
    # ir.Operation.create does not verify: the op lands in the module and module.verify() must refuse it
    with new_context() as ctx, ir.Location.unknown():
        ctx.emit_error_diagnostics = False
        module = ir.Module.parse(_in_func('%x = "hawk.load"() {plane = "x"} : () -> f64\n' + K64))
        block = module.body.operations[0].regions[0].blocks[0]
        x, k = block.operations[0].result, block.operations[1].result
        operands = {"f64": x, "i64": k}
        assert module.operation.verify()
        with ir.InsertionPoint(block.operations[2]):
            create(name, [operands[t] for t in operand_types], [ir.Type.parse(t) for t in results], attrs)
        with pytest.raises(ir.MLIRError, match="does not satisfy the constraint|expected 'i64'"):
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
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        assert str(module) == text  # the printed form round-trips
        ops = []
        module.operation.walk(lambda op: (ops.append(op), ir.WalkResult.ADVANCE)[1])
        at = [op for op in ops if is_hawk(op, "at")]
        assert [attr_str(op, "plane") for op in at] == ["x", "t"]
        assert [attr_strs(op, "axes") for op in at] == [["row", "col"], ["k"]]
        assert is_hawk(at[0]) and not is_hawk(at[0], "load") and not is_hawk(ops[-1])  # the module itself


def test_filecheck_helper_reports_a_mismatch(filecheck):
    text = "%a = hawk\n%b = eagle\n"
    filecheck(text, "# CHECK: %[[A:.+]] = hawk\n# CHECK-NEXT: %b = eagle")
    with pytest.raises(pytest.fail.Exception, match="FileCheck failed"):
        filecheck(text, "# CHECK: %b = eagle\n# CHECK-NEXT: %a = hawk")
