"""What hawk's MLIR contexts load, and why building an op can never meet a dialect that is not loaded.

new_context loads a short list of dialects instead of every registered one (about 10 ms a context, several per
kernel). An op built from Python of a dialect that is not loaded aborts the process, so the list must cover every
dialect whose Python op builders hawk imports, and every generic op goes through hawk.ir.build.create, which loads
its dialect first. These tests hold the sources to that rule.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from mlir import ir
from mlir._mlir_libs._mlir import globals as mlir_globals

from hawk.ir.build import create
from hawk.ir.dialect import BUILDER_DIALECTS, new_context

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for d in ("hawk", "eagle") for p in (ROOT / d).rglob("*.py"))


def test_every_dialect_whose_builders_hawk_imports_is_loaded_by_every_context():
    imported = set()
    for path in SOURCES:
        for names in re.findall(r"^\s*from mlir\.dialects import ([\w, ]+)$", path.read_text(), re.M):
            imported |= {n.strip() for n in names.split(",")}
    assert imported, "the scan found no dialect imports: the pattern is stale"
    assert imported <= set(BUILDER_DIALECTS), f"add {sorted(imported - set(BUILDER_DIALECTS))} to BUILDER_DIALECTS"
    assert not [p for p in SOURCES if re.search(r"^\s*import mlir\.dialects\.", p.read_text(), re.M)]
    ctx = new_context()
    for name in BUILDER_DIALECTS:
        assert name == "builtin" or ctx.is_registered_operation(f"{name}.{_an_op(name)}"), name


def _an_op(dialect: str) -> str:
    return {"func": "return", "arith": "addf", "scf": "yield", "memref": "load", "vector": "broadcast",
            "gpu": "barrier", "llvm": "return", "irdl": "dialect", "math": "sqrt", "cf": "br", "index": "add"}[dialect]


def test_generic_ops_are_built_in_one_place():
    users = [p.relative_to(ROOT) for p in SOURCES if "Operation.create(" in p.read_text()]
    assert users == [Path("hawk/ir/build.py")], users


def test_create_loads_the_dialect_of_an_op_it_builds():
    ctx = new_context()
    assert not ctx.is_registered_operation("spirv.Undef")  # else this test proves nothing
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            op = create("spirv.Undef", results=[ir.F32Type.get()])
        assert ctx.is_registered_operation("spirv.Undef")
        assert "spirv.Undef" in str(module) and op.verify()


def test_parsed_text_loads_what_it_names():
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse("spirv.module Logical GLSL450 {}")
        assert module.operation.verify()


def test_hawk_ops_and_types_find_their_python_module():
    # without it the bindings retry a failed import of mlir.dialects.hawk for every hawk op and type they return
    assert mlir_globals._check_dialect_module_loaded("hawk")


def test_a_context_without_the_list_would_abort():
    """The reason for create's load: in a fresh process, a generic op of an unloaded dialect kills it."""
    code = ("from mlir import ir\n"
            "ctx = ir.Context(load_on_create_dialects=['builtin'])\n"
            "with ctx, ir.Location.unknown():\n"
            "    m = ir.Module.create()\n"
            "    with ir.InsertionPoint(m.body):\n"
            "        ir.Operation.create('spirv.Undef', results=[ir.F32Type.get()])\n"
            "print('built')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "built" not in run.stdout, (run.returncode, run.stdout, run.stderr[-500:])
