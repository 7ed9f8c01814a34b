"""One direction between the packages: hawk (the language and the compiler, each target's code generation
included) never imports eagle; eagle (the runtime) reads hawk only through hawk.abi, which imports neither MLIR
nor the front end.

Allowed exceptions, each checked here by name:
- the documented lazy forwarding of the contract's names `hawk.load`, `hawk.run` (hawk/__init__.py) and
  `hawk.artifact.load` / `run` / `LoadedKernel` (hawk/artifact/__init__.py) to eagle.artifact: they import eagle
  only when called, never when a hawk module is imported;
- eagle/algorithms and eagle/kernels are written as hawk kernels, so they import the public language (`hawk`,
  `hawk.math`), nothing else of it.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HAWK, EAGLE = ROOT / "hawk", ROOT / "eagle"

# eagle's modules written as hawk kernels: they may import the public language
LANGUAGE_USERS = ("eagle/algorithms/", "eagle/kernels.py")
LANGUAGE = {"hawk", "hawk.math"}
# the only places in hawk that name eagle: lazy forwarding functions (bodies run when called, not on import)
FORWARDING = {"hawk/__init__.py": {"__getattr__"}, "hawk/artifact/__init__.py": {"__getattr__"}}


def _fresh(code: str) -> dict:
    """Run `code` in a fresh interpreter (the repository first on the path); it prints one JSON value."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _modules(root: Path) -> list[str]:
    out = []
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__main__":  # running it is the CLI, not importing
            continue
        if parts[-1] == "__init__":
            parts.pop()
        out.append(".".join(parts))
    return out


def _imports(tree: ast.AST) -> list[tuple[str, int, ast.AST]]:
    """(module imported, line, node) for every import statement; `from a import b` gives a.b when b is a module
    of ours (so `from hawk.abi import cache` counts as hawk.abi.cache), else a."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, node) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                path = ROOT / Path(*sub.split("."))
                is_mod = path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()
                out.append((sub if is_mod else node.module, node.lineno, node))
    return out


def _top_level_functions(tree: ast.Module) -> dict[ast.AST, str]:
    """Each node inside a top-level function -> that function's name."""
    owner = {}
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            for node in ast.walk(fn):
                owner[node] = fn.name
    return owner


def test_importing_every_hawk_module_leaves_eagle_out():
    mods = _modules(HAWK)
    assert "hawk.abi.layout" in mods and "hawk.targets.host" in mods and "hawk.compiler" in mods
    got = _fresh(
        "import importlib, json, sys\n"
        f"mods = {mods!r}\n"
        "failed = {}\n"
        "for m in mods:\n"
        "    try:\n"
        "        importlib.import_module(m)\n"
        "    except Exception as exc:\n"
        "        failed[m] = repr(exc)\n"
        "print(json.dumps({'eagle': sorted(m for m in sys.modules if m == 'eagle' or m.startswith('eagle.')),\n"
        "                  'failed': failed}))\n")
    assert got["failed"] == {}, f"hawk modules that do not import: {got['failed']}"
    assert got["eagle"] == [], f"importing hawk's modules imported eagle: {got['eagle']}"


def test_hawk_names_eagle_only_in_the_documented_forwarding_functions():
    """An AST scan of hawk/**/*.py: an import of eagle sits only inside the forwarding `__getattr__` of
    hawk/__init__.py and hawk/artifact/__init__.py (lazy: run when `hawk.load` etc. are first used)."""
    bad = []
    for f in sorted(HAWK.rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        tree = ast.parse(f.read_text(), rel)
        owner = _top_level_functions(tree)
        for name, line, node in _imports(tree):
            if name == "eagle" or name.startswith("eagle."):
                if owner.get(node) not in FORWARDING.get(rel, set()):
                    bad.append(f"{rel}:{line}: imports {name}")
    assert not bad, "hawk imports eagle:\n" + "\n".join(bad)


def test_the_forwarding_names_reach_eagle_when_used():
    """hawk.load / hawk.run and hawk.artifact's load / run / LoadedKernel are eagle.artifact's own."""
    got = _fresh(
        "import json, sys, hawk, hawk.artifact\n"
        "before = 'eagle' in sys.modules\n"
        "import eagle.artifact as a\n"
        "same = [hawk.load is a.load, hawk.run is a.run, hawk.artifact.load is a.load, hawk.artifact.run is a.run,\n"
        "        hawk.artifact.LoadedKernel is a.LoadedKernel, hawk.artifact.read is a.read]\n"
        "print(json.dumps({'before': before, 'same': same}))\n")
    assert got == {"before": False, "same": [True] * 6}


def test_eagle_imports_hawk_only_through_hawk_abi():
    """An AST scan of eagle/**/*.py: every import of hawk is of hawk.abi, except the public language (`hawk`,
    `hawk.math`) in the modules written as hawk kernels (eagle/algorithms, eagle/kernels.py)."""
    bad = []
    for f in sorted(EAGLE.rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        for name, line, _ in _imports(ast.parse(f.read_text(), rel)):
            if not (name == "hawk" or name.startswith("hawk.")):
                continue
            if name == "hawk.abi" or name.startswith("hawk.abi."):
                continue
            if rel.startswith(LANGUAGE_USERS) and name in LANGUAGE:
                continue
            bad.append(f"{rel}:{line}: imports {name}")
    assert not bad, "eagle reaches hawk other than through hawk.abi:\n" + "\n".join(bad)


def test_the_language_users_are_where_the_scan_expects_them():
    """The exemption above names real files (a renamed module would silently lose its check)."""
    assert (ROOT / "eagle/algorithms").is_dir() and (ROOT / "eagle/kernels.py").is_file()


def test_hawk_abi_imports_neither_mlir_nor_the_front_end_nor_eagle():
    mods = _modules(HAWK / "abi")
    assert {"hawk.abi", "hawk.abi.layout", "hawk.abi.signature", "hawk.abi.exact", "hawk.abi.cache"} <= set(mods)
    got = _fresh(
        "import importlib, json, sys\n"
        f"for m in {mods!r}:\n"
        "    importlib.import_module(m)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('mlir', 'eagle')\n"
        "                        or m.startswith(('hawk.frontend', 'hawk.compiler', 'hawk.ir', 'hawk.passes')))))\n")
    assert got == [], f"hawk.abi pulled in {got}"


def test_targets_code_generation_never_reaches_back_into_the_front_end():
    """hawk/targets/ turns lowered IR into binaries: it reads hawk.abi, hawk.errors, hawk.ir and itself, never the
    front end or the compiler's Kernel (it is handed the kernel object)."""
    bad = []
    for f in sorted((HAWK / "targets").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        for name, line, _ in _imports(ast.parse(f.read_text(), rel)):
            if name.startswith(("hawk.frontend", "hawk.compiler", "hawk.signature", "eagle")) or name == "eagle":
                bad.append(f"{rel}:{line}: imports {name}")
    assert not bad, "\n".join(bad)


def test_importing_hawk_and_eagle_loads_no_mlir():
    got = _fresh("import json, sys, hawk, eagle, hawk.artifact\n"
                 "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'mlir')))\n")
    assert got == []
