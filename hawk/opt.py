"""`hawk-opt`: run named passes over a hawk `.mlir` file and print the result (like mlir-opt, for hawk's passes).

    hawk-opt FILE.mlir --passes verify-hawk,plan-buffers,lower-host-lanes     (FILE `-`: standard input)
    hawk-opt FILE.mlir --target host|nvvm|rocdl|spirv                         (that target's whole pipeline)
    hawk-opt --list-passes

The input is a hawk module whose kernel func carries its facts (hawk.signature, hawk.outputs, hawk.spec; see
hawk/passes/plan.py): `Kernel.mlir()` prints one (each stage of a split kernel with its hawk.stage facts:
`Kernel.mlir(stage=k)`), and tests/ir/make_inputs.py writes the test inputs that way. `--target` first splits
a staged kernel, then lowers each stage in its own module, printing them one after another separated by
`// -----`. Any error prints one line and exits non-zero.
"""

from __future__ import annotations

import argparse
import sys

from hawk.errors import KernelError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hawk-opt", description="Run hawk passes over a .mlir file.")
    p.add_argument("file", nargs="?", help="the input .mlir file, or - for standard input")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--passes", help="a pass pipeline: name,name{option=value ...},...")
    group.add_argument("--target", choices=("host", "nvvm", "rocdl", "spirv"),
                       help="run that target's whole default pipeline (staged kernels: one module per stage)")
    p.add_argument("--list-passes", action="store_true", help="print every pass with a one-line description")
    p.add_argument("-o", "--output", help="write the result here instead of standard output")
    return p


def list_passes() -> str:
    from hawk.passes.pipeline import TARGETS, expanded, known_passes, target_pipeline

    lines = [f"  {name}\n      {summary}" for name, summary in known_passes().items()]
    lines.append("Target pipelines (--target), then the passes they run:")
    lines += [f"  {t}: {target_pipeline(t)}\n      = {expanded(target_pipeline(t))}" for t in TARGETS]
    return "Passes (--passes a,b{option=value},...):\n" + "\n".join(lines) + "\n"


def run(text: str | None, passes: str | None = None, target: str | None = None, path: str | None = None) -> str:
    """The module in `text` (or in the file at `path`, whose name then locates errors) after `passes` (a
    pipeline) or after `target`'s default pipeline, as text."""
    from mlir import ir

    from hawk.ir.dialect import new_context
    from hawk.passes.base import kernel_funcs
    from hawk.passes.pipeline import Pipeline, target_pipeline

    pipe = Pipeline(target_pipeline(target) if target else (passes or ""))  # a bad pipeline fails before parsing
    with new_context() as ctx, ir.Location.unknown():
        ctx.allow_unregistered_dialects = False
        module = ir.Module.parse(text) if path is None else ir.Module.parseFile(path)
        if target is None:
            return str(pipe.run(module))
        Pipeline("split-stages").run(module)
        out = []
        for func in kernel_funcs(module):
            stage = ir.Module.parse(f"module {{\n{func}\n}}")
            out.append(str(pipe.run(stage)))
        return "// -----\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.list_passes:
        sys.stdout.write(list_passes())
        return 0
    if args.file is None:
        print("hawk-opt: give an input file (or - for standard input), or --list-passes", file=sys.stderr)
        return 2
    if args.passes is None and args.target is None:
        print("hawk-opt: give --passes a,b,... or --target host|nvvm|rocdl|spirv", file=sys.stderr)
        return 2
    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file).read()
    except OSError as exc:
        print(f"hawk-opt: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        result = run(text, args.passes, args.target, None if args.file == "-" else args.file)
    except KernelError as exc:  # verify-hawk and the analysis refuse kernels this way
        print(f"hawk-opt: error: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # PassError, a missing fact, a bad option
        print(f"hawk-opt: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - MLIRError (a parse or verifier failure) and the like: one line
        first = str(exc).strip().splitlines()
        print(f"hawk-opt: {args.file}: {' '.join(s.strip() for s in first[:3])}", file=sys.stderr)
        return 1
    if args.output:
        with open(args.output, "w") as f:
            f.write(result)
    else:
        sys.stdout.write(result if result.endswith("\n") else result + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
