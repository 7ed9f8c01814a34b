"""Build, execute and check the teaching notebooks in notebooks/.

    .venv/bin/python scripts/notebooks.py build [NAME ...]   # sources -> .ipynb, executed, outputs stored
    .venv/bin/python scripts/notebooks.py check [NAME ...]   # execute afresh, compare with the stored outputs

Each notebook is written as a Python source, notebooks/src/NN_name.py, in the "percent" cell format: a line
`# %% [markdown]` starts a markdown cell (its lines are comments), `# %%` a code cell, and `# %% machine` a code
cell whose output depends on the machine (which GPU runtimes exist, device names): it must run without error
everywhere, but its text is not compared. Text before the first marker is the source file's own header.

Why sources: a notebook's JSON is awkward to review and edit; the sources are plain Python, linted with the rest.
`build` turns them into notebooks and executes each from a clean kernel running this interpreter (the venv's),
storing the outputs so the notebooks read well on a code host. `check` (tests/test_notebooks.py uses the same
functions) executes the committed notebook afresh, fails on any error, and compares every text output, after
`normalise`, with the stored one, so a stored output that went stale fails the suite.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SOURCES = NOTEBOOKS / "src"
MACHINE = "machine"  # the cell tag for outputs that depend on the machine
TIMEOUT_S = 300  # per cell

_MARKER = re.compile(r"^# %%(?P<rest>.*)$")


def sources() -> list[Path]:
    """The notebook sources, in order."""
    return sorted(SOURCES.glob("[0-9][0-9]_*.py"))


def notebook_path(source: Path) -> Path:
    return NOTEBOOKS / f"{source.stem}.ipynb"


def parse(text: str) -> nbformat.NotebookNode:
    """A notebook (without outputs) from a percent-format source."""
    cells: list[tuple[str, list[str], list[str]]] = []  # (kind, tags, lines)
    for line in text.splitlines():
        mark = _MARKER.match(line)
        if mark:
            rest = mark["rest"].strip()
            if rest == "[markdown]":
                cells.append(("markdown", [], []))
            elif rest in ("", MACHINE):
                cells.append(("code", [MACHINE] if rest else [], []))
            else:
                raise ValueError(f"unknown cell marker {line!r}: use '# %%', '# %% machine' or '# %% [markdown]'")
        elif cells:
            cells[-1][2].append(line)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for kind, tags, lines in cells:
        while lines and not lines[-1].strip():
            lines.pop()
        if kind == "markdown":
            body = "\n".join(re.sub(r"^# ?", "", ln) for ln in lines)
            nb.cells.append(nbformat.v4.new_markdown_cell(body))
        else:
            cell = nbformat.v4.new_code_cell("\n".join(lines))
            if tags:
                cell.metadata["tags"] = tags
            nb.cells.append(cell)
    for k, cell in enumerate(nb.cells):  # stable ids: a rebuild changes only what changed
        cell["id"] = f"cell-{k:02d}"
    return nb


def _kernel_manager(workdir: Path) -> KernelManager:
    """A kernel manager whose "python3" kernel runs this very interpreter (the venv's), with a headless
    matplotlib (the inline backend renders with Agg), a fixed hash seed and tracebacks without colour codes."""
    spec_dir = workdir / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                 "--InteractiveShell.colors=nocolor",  # plain tracebacks in a failing test's message
                 "--IPKernelApp.log_level=ERROR"],  # not the warnings of every routine shutdown
        "display_name": "Python 3 (hawk-eagle venv)",
        "language": "python",
        "env": {"PYTHONHASHSEED": "0", "MPLBACKEND": "module://matplotlib_inline.backend_inline"},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    ksm = KernelSpecManager(kernel_dirs=[str(workdir / "kernels")], ensure_native_kernel=False)
    # local sockets in the private folder: nothing listens on TCP, and nothing is left in the working tree
    return KernelManager(kernel_name="python3", kernel_spec_manager=ksm, transport="ipc", ip=str(workdir / "ipc"))


def execute(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Execute `nb` in place from a clean kernel (cwd notebooks/); raises CellExecutionError on any error."""
    with tempfile.TemporaryDirectory(prefix="hawk-nb-") as tmp:
        km = _kernel_manager(Path(tmp))
        client = NotebookClient(nb, km=km, timeout=TIMEOUT_S, record_timing=False,
                                resources={"metadata": {"path": str(NOTEBOOKS)}})
        client.execute()
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.execution_count = None  # numbering (and timing) add nothing to a stored notebook and churn diffs
            cell.metadata.pop("execution", None)
            for out in cell.outputs:
                if "execution_count" in out:  # an execute_result keeps the key (the format requires it)
                    out["execution_count"] = None
    return nb


_NORMALISE = [
    (re.compile(re.escape(str(ROOT))), "<repo>"),
    (re.compile(r"(/tmp|/var/folders)/[\w./+-]*"), "<tmp>"),
    (re.compile(r"0x[0-9a-fA-F]{6,}\b"), "0x<address>"),
    (re.compile(r"\b[0-9a-f]{16,}\b"), "<hash>"),
    (re.compile(r"[ \t]+$", re.M), ""),
]


def normalise(text: str) -> str:
    """Text with what legitimately varies between runs replaced: the repository's path, temporary paths, object
    addresses, hashes (of binaries compiled for this CPU) and trailing blanks. Numbers are left alone: the
    notebooks print no timings."""
    for pattern, repl in _NORMALISE:
        text = pattern.sub(repl, text)
    return text


def text_outputs(nb: nbformat.NotebookNode) -> list[tuple[str, list[str]]]:
    """Per compared code cell: its id and its outputs as normalised text (a picture counts as its mime type)."""
    rows = []
    for cell in nb.cells:
        if cell.cell_type != "code" or MACHINE in cell.metadata.get("tags", []):
            continue
        texts = []
        for out in cell.outputs:
            if out.output_type == "stream":
                texts.append(f"{out.name}: {normalise(out.text)}")
            elif out.output_type in ("execute_result", "display_data"):
                data = out.get("data", {})
                kinds = sorted(k for k in data if k.startswith("image/"))
                texts.append(normalise(data.get("text/plain", "")) + "".join(f" [{k}]" for k in kinds))
            elif out.output_type == "error":
                texts.append(f"error: {out.ename}: {out.evalue}")
        rows.append((cell["id"], texts))
    return rows


def merge_streams(nb: nbformat.NotebookNode) -> None:
    """Join consecutive outputs of one stream, so a cell's printing reads (and compares) as one block."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        merged = []
        for out in cell.outputs:
            if merged and out.output_type == "stream" and merged[-1].output_type == "stream" \
                    and merged[-1].name == out.name:
                merged[-1].text += out.text
            else:
                merged.append(out)
        cell.outputs = merged


def build(source: Path) -> Path:
    """Write notebooks/<name>.ipynb from its source, executed, with outputs stored."""
    nb = parse(source.read_text())
    execute(nb)
    merge_streams(nb)
    path = notebook_path(source)
    nbformat.write(nb, path)
    return path


def check(path: Path) -> list[str]:
    """Execute the stored notebook afresh; the differences between its stored and new text outputs."""
    stored = nbformat.read(path, as_version=4)
    fresh = execute(nbformat.read(path, as_version=4))
    merge_streams(fresh)
    problems = []
    old, new = dict(text_outputs(stored)), dict(text_outputs(fresh))
    if old.keys() != new.keys():
        problems.append(f"{path.name}: cells differ (stored {sorted(old)}, fresh {sorted(new)})")
    for cell_id in sorted(old.keys() & new.keys()):
        if old[cell_id] != new[cell_id]:
            problems.append(f"{path.name} {cell_id}: stored output\n{old[cell_id]}\nfresh output\n{new[cell_id]}")
    return problems


def stale_sources() -> list[str]:
    """Notebooks whose cells no longer match their source (a source edited without `build`)."""
    stale = []
    for source in sources():
        path = notebook_path(source)
        if not path.exists():
            stale.append(f"{path.name}: missing; run scripts/notebooks.py build")
            continue
        want = [(c.cell_type, c.source, c.metadata.get("tags", [])) for c in parse(source.read_text()).cells]
        have = [(c.cell_type, c.source, c.metadata.get("tags", [])) for c in nbformat.read(path, as_version=4).cells]
        if want != have:
            stale.append(f"{path.name}: differs from {source.relative_to(ROOT)}; run scripts/notebooks.py build")
    return stale


def _pick(names: list[str]) -> list[Path]:
    chosen = [s for s in sources() if not names or any(s.stem.startswith(n) or s.stem == n for n in names)]
    if not chosen:
        raise SystemExit(f"notebooks.py: no notebook source matches {names}; the sources are "
                         f"{[s.stem for s in sources()]}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("build", "check"))
    ap.add_argument("names", nargs="*", help="notebook names or prefixes (01, 02_sum...); default: all")
    args = ap.parse_args(argv)
    os.chdir(ROOT)
    failed = 0
    for source in _pick(args.names):
        if args.command == "build":
            print(f"built {build(source).relative_to(ROOT)}")
        else:
            problems = check(notebook_path(source))
            for p in problems:
                print(p)
            failed += bool(problems)
            print(f"{source.stem}: {'stale outputs' if problems else 'ok'}")
    if args.command == "check":
        for s in stale_sources():
            print(s)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
