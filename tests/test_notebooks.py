"""The teaching notebooks (notebooks/*.ipynb): each executes from a clean kernel without an error, and its stored
text outputs are the ones a fresh run gives (after scripts/notebooks.py's `normalise`; cells tagged `machine`
are executed but not compared). Rebuild them with `.venv/bin/python scripts/notebooks.py build`.

Also: the notebooks match their sources in notebooks/src, the executing kernel is this interpreter (the venv's),
and the source format and normalisation behave as documented in notebooks/README.md.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    try:
        import nbclient  # noqa: F401
        import nbformat  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"executing the notebooks needs the `notebooks` extra ({exc}): run bash scripts/setup.sh")
    spec = importlib.util.spec_from_file_location("hawk_notebooks_script", ROOT / "scripts" / "notebooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def tool():
    return _tool()


NAMES = sorted(p.stem for p in (ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py"))


def test_every_notebook_is_here():
    assert NAMES == ["01_across_lanes", "02_sum_contract", "03_stages_and_artifacts", "04_gpu_targets",
                     "05_reverse", "06_jax", "07_torch", "08_warp", "09_sharded", "10_algorithms",
                     "11_inside_the_compiler"]


def test_notebooks_match_their_sources(tool):
    assert tool.stale_sources() == []


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_and_its_stored_outputs_are_current(tool, name):
    path = ROOT / "notebooks" / f"{name}.ipynb"
    problems = tool.check(path)  # raises nbclient's CellExecutionError, with the traceback, on any error
    assert not problems, "stale stored outputs: run `.venv/bin/python scripts/notebooks.py build " \
        f"{name}` and review the diff\n" + "\n".join(problems)


def test_every_code_cell_of_a_stored_notebook_has_been_run(tool):
    """A stored notebook is valid and holds outputs (it reads on a code host without running it): every code cell
    that prints or draws has its output stored, and no cell holds an error."""
    import nbformat

    for name in NAMES:
        nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
        nbformat.validate(nb)  # a well-formed notebook, as code hosts and JupyterLab expect
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code, name
        silent = [c["id"] for c in code if not c.outputs and not _defines_only(c.source)]
        assert not silent, f"{name}: cells without stored output {silent}"
        assert not any(o.output_type == "error" for c in code for o in c.outputs), name
        assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs) or name.startswith("04"), \
            f"{name}: no stored plot"


def _defines_only(source: str) -> bool:
    """Cells that only import or define (kernels, helpers) print nothing by design."""
    return "print(" not in source and "plt.show()" not in source


def test_the_kernel_runs_this_interpreter(tool):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("import sys, matplotlib\nprint(sys.executable)\n"
                                              "print(matplotlib.get_backend())"))
    tool.execute(nb)
    lines = nb.cells[0].outputs[0].text.splitlines()
    assert lines[0] == sys.executable
    assert "inline" in lines[1] or lines[1].lower() == "agg", lines[1]  # headless: no display needed


def test_a_failing_cell_fails_the_run(tool):
    import nbclient
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("raise ValueError('deliberate')"))
    with pytest.raises(nbclient.exceptions.CellExecutionError, match="deliberate"):
        tool.execute(nb)


def test_source_format(tool):
    nb = tool.parse("# header, not a cell\n# %% [markdown]\n# # Title\n#\n# text `x`\n\n# %%\nx = 1\n\n\n"
                    "# %% machine\nprint(x)\n")
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "code"]
    assert nb.cells[0].source == "# Title\n\ntext `x`"
    assert nb.cells[1].source == "x = 1" and "tags" not in nb.cells[1].metadata
    assert nb.cells[2].metadata["tags"] == ["machine"]
    assert nb.metadata["kernelspec"]["name"] == "python3"
    with pytest.raises(ValueError, match="unknown cell marker"):
        tool.parse("# %% [raw]\nx\n")


def test_normalise_replaces_only_what_varies(tool):
    text = (f"{ROOT}/notebooks/x.py /tmp/hawk-artifact-ab_12/cli/rms.json <obj at 0x7f3a2b1c9d10> "
            "content hash a88b4fa28b93b557 k=0.49 0x1.36e27c28cd4e8p+14 12345  \n")
    assert tool.normalise(text) == ("<repo>/notebooks/x.py <tmp> <obj at 0x<address>> content hash <hash> "
                                    "k=0.49 0x1.36e27c28cd4e8p+14 12345\n")
