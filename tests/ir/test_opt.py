"""hawk-opt and the passes as units: every tests/ir/*.mlir file through hawk-opt, FileChecked (lit style), plus
the command line, the pipeline text and the layout attribute.

A test file's first lines say what to run: `// PASSES: a,b{opt=v}` or `// TARGET: host`; `// ERROR` when
hawk-opt must refuse the input (its one-line error is then what the CHECK lines match). The generated inputs
come from tests/ir/make_inputs.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hawk.abi.layout import layout_to_json
from hawk.opt import main
from hawk.passes.base import PassError, parse_pipeline, pipeline_text
from tests.ir.conftest import run_filecheck

HERE = Path(__file__).parent
FILES = sorted(HERE.glob("*.mlir"))


def _directives(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if not line.startswith("//"):
            break
        key, _, value = line[2:].strip().partition(":")
        if key in ("PASSES", "TARGET", "ERROR"):
            out[key] = value.strip()
    return out


def test_every_pass_has_a_filecheck_file():
    named = set()
    for f in FILES:
        for p in parse_pipeline(_directives(f).get("PASSES", "")):
            named.add(p.name)
    assert {"verify-hawk", "split-stages", "plan-buffers", "lower-host-lanes", "lower-gpu-lanes",
            "speculate-ifs", "gpu-form", "chunk-form", "build-finish", "lower-chunk-loop", "map-lanes-gpu"} <= named


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_mlir_file(path: Path, capsys):
    d = _directives(path)
    args = [str(path), "--target", d["TARGET"]] if "TARGET" in d else [str(path), "--passes", d["PASSES"]]
    rc = main(args)
    out, err = capsys.readouterr()
    if "ERROR" in d:
        assert rc != 0 and not out, (rc, out)
        assert len(err.strip().splitlines()) == 1, err
        run_filecheck(err, path.read_text())
    else:
        assert rc == 0, err
        run_filecheck(out, path.read_text())


def test_generated_inputs_are_current():
    r = subprocess.run([sys.executable, str(HERE / "make_inputs.py"), "--check"], capture_output=True, text=True,
                       timeout=600, cwd=HERE.parent.parent)
    assert r.returncode == 0, r.stdout + r.stderr


# ------------------------------------------------------------------ the command line


def _hawk_opt(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("hawk-opt")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "hawk.opt"]
    return subprocess.run([*cmd, *args], input=stdin, capture_output=True, text=True, timeout=600)


def test_list_passes_names_every_pass_with_a_line_and_the_targets():
    r = _hawk_opt("--list-passes")
    assert r.returncode == 0, r.stderr
    for name in ("verify-hawk", "split-stages", "plan-buffers", "lower-host-lanes", "speculate-ifs",
                 "canonicalize", "lower-to-llvm", "lower-finish-to-llvm"):
        assert f"\n  {name}\n      " in r.stdout, name
    assert "lower-gpu-lanes{subgroup=int atomics=bool wide=str}" in r.stdout
    assert "nvvm: verify-hawk,plan-buffers,lower-gpu-lanes{subgroup=32 atomics=true wide=true}" in r.stdout
    # the lowering's passes, and each target pipeline with its pass groups written out
    for name in ("gpu-form", "chunk-form{pairs=bool wide=bool}", "build-finish{target=str}", "lower-chunk-loop",
                 "map-lanes-gpu{subgroup=int atomics=bool wide=str}"):
        assert f"\n  {name}\n      " in r.stdout, name
    assert ("= verify-hawk,plan-buffers,chunk-form{pairs=true wide=true},build-finish{target=host},lower-chunk-loop,"
            "speculate-ifs,") in r.stdout
    assert ("= verify-hawk,plan-buffers,gpu-form,chunk-form{pairs=false wide=true},build-finish{target=gpu},"
            "map-lanes-gpu{subgroup=32 atomics=true wide=true},canonicalize,lower-finish-to-llvm") in r.stdout


def test_reads_standard_input():
    r = _hawk_opt("-", "--passes", "speculate-ifs", stdin=(HERE / "speculate_ifs.mlir").read_text())
    assert r.returncode == 0, r.stderr
    assert "arith.select %arg0" in r.stdout


@pytest.mark.parametrize("args, words", [
    (["--passes", "verify-hawk,lower-to-gpu"], "unknown pass 'lower-to-gpu'; known passes: "),
    (["--passes", "lower-gpu-lanes{subgroup=warp}"], "option 'subgroup' takes an integer, not 'warp'"),
    (["--passes", "lower-gpu-lanes{atomics=yes}"], "option 'atomics' takes true or false, not 'yes'"),
    (["--passes", "lower-gpu-lanes{wide=some}"], "option 'wide' takes one of false, true, tree, not 'some'"),
    (["--passes", "lower-gpu-lanes{lanes=4}"], "pass 'lower-gpu-lanes' has no option 'lanes'"),
    (["--passes", "lower-gpu-lanes{subgroup}"], "option 'subgroup': write option=value"),
    (["--passes", "lower-host-lanes"], "has no hawk.layout attribute (run plan-buffers first)"),
    # (a kernel func that reads its mean in its own body: lowering it unsplit aborted inside MLIR)
    (["--passes", "verify-hawk,plan-buffers,lower-host-lanes"],
     "kernel func 'opt_staged' reads the result of a hawk.reduce in its own body: run split-stages first"),
])
def test_bad_pipelines_are_refused_in_one_line(args, words):
    r = _hawk_opt(str(HERE / "verify_hawk.mlir"), *args)
    assert r.returncode != 0 and not r.stdout
    assert len(r.stderr.strip().splitlines()) == 1 and words in r.stderr, r.stderr


def test_ir_that_does_not_parse_is_refused_in_one_line():
    r = _hawk_opt("-", "--passes", "verify-hawk", stdin="module {\n  func.func @f() {\n    %x = \"hawk.nope\"()\n")
    assert r.returncode == 1 and not r.stdout
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("hawk-opt: -: "), r.stderr


def test_pipeline_text_round_trips():
    text = "verify-hawk,plan-buffers,lower-gpu-lanes{subgroup=64 atomics=true wide=tree},canonicalize"
    assert pipeline_text(parse_pipeline(text)) == text
    # options left out take their defaults, and are printed
    assert pipeline_text(parse_pipeline(" lower-gpu-lanes{ atomics=1 } ")) == \
        "lower-gpu-lanes{subgroup=0 atomics=true wide=false}"
    with pytest.raises(PassError, match="cannot read the pass pipeline"):
        parse_pipeline("verify-hawk;canonicalize")


# ------------------------------------------------------------------ the layout as an attribute


def test_layout_read_from_the_lowered_module_is_the_analysis():
    # the runtime's layout comes from the lowered module's hawk.layout attribute; it must be exactly what the
    # analysis found for the stage (plan-buffers alone), on the host and for a GPU
    from tests.ir.make_inputs import opt_hist, opt_staged

    for kernel in (opt_staged, opt_hist):
        spec = kernel.default_spec()
        for k in range(len(kernel.stages(spec))):
            planned = layout_to_json(kernel.layout(spec, k))
            assert layout_to_json(kernel.lowered(spec, k).layout) == planned
            assert layout_to_json(kernel.lowered_gpu(spec, k, 32, True, True).layout) == planned


def test_layout_attribute_round_trips_in_order():
    from mlir import ir

    from hawk.ir.dialect import new_context
    from hawk.passes.plan import layout_attr, layout_of_attr
    from tests.ir.make_inputs import opt_staged

    spec = opt_staged.default_spec()
    for k in range(len(opt_staged.stages(spec))):
        lay = opt_staged.layout(spec, k)
        with new_context():
            attr = ir.Attribute.parse(str(layout_attr(lay)))  # through text
            back = layout_of_attr(attr)
        assert layout_to_json(back) == layout_to_json(lay)
        assert list(back.outputs) == list(lay.outputs) and back.buffers == lay.buffers


def test_architecture_doc_lists_every_pass():
    from hawk.passes.pipeline import PASSES

    doc = (HERE.parent.parent / "docs" / "architecture.md").read_text()
    for name in PASSES:
        assert f"| `{name}" in doc, name


@pytest.mark.parametrize("target", ["rocdl", "spirv"])
def test_gpu_targets_lower_to_a_gpu_module_and_an_llvm_finish(target):
    from hawk.opt import run

    out = run(None, target=target, path=str(HERE / "target_nvvm.mlir"))
    run_filecheck(out, """
    # CHECK: module attributes {gpu.container_module, hawk.layout = {buffers = ["k:index:i32"
    # CHECK-NOT: func.func
    # CHECK: llvm.func @opt_hist_finish(
    # CHECK: gpu.module @opt_hist_gpu {
    # CHECK: gpu.func @opt_hist_lanes(
    # CHECK-NOT: hawk.
    """)


def test_dump_dir_gets_each_pass_of_a_hawk_opt_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HAWK_DUMP_DIR", str(tmp_path))
    assert main([str(HERE / "host_chunk_loop.mlir"), "--passes", "lower-host-lanes,canonicalize"]) == 0
    out = capsys.readouterr().out
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["opt_total.01.lower-host-lanes.mlir", "opt_total.02.canonicalize.mlir"]
    assert (tmp_path / names[1]).read_text() == out


def test_a_kernels_printed_ir_compiles_alone_to_the_compilers_code(tmp_path):
    # Kernel.mlir() carries the kernel's facts (and each stage of a split kernel its stage facts), so hawk-opt
    # --target host turns the printed text alone into the very LLVM IR the compiler builds for that stage
    from tests.ir.make_inputs import opt_hist, opt_staged

    for kernel in (opt_hist, opt_staged):
        spec = kernel.default_spec()
        stages = len(kernel.stages(spec))
        for k in range(stages):
            path = tmp_path / f"{kernel.name}.{k}.mlir"
            path.write_text(kernel.mlir(stage=k))
            r = _hawk_opt(str(path), "--target", "host")
            assert r.returncode == 0, r.stderr
            assert r.stdout.strip() == kernel.lowered(spec, k).llvm_ir.strip()
        assert kernel is opt_hist or stages > 1
