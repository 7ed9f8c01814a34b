"""Write the inputs of the per-pass FileCheck tests (tests/ir/*.mlir) from small Python kernels.

Each generated file starts with `//` lines kept as they are (`// PASSES:` or `// TARGET:`, `// KERNEL:` and the
`// CHECK:` lines written by hand) and continues with the IR its pass takes: the kernel's hawk IR with its
facts (hawk/passes/plan.py), run through `prep` (the passes before the one under test), optionally one stage
of it. Run it after a change to the hawk IR's syntax:

    .venv/bin/python tests/ir/make_inputs.py            # rewrite every generated input
    .venv/bin/python tests/ir/make_inputs.py --check    # exit 1 if any input is out of date

Files without a `// KERNEL:` line are written by hand (an expected-error case, a small upstream-only one).
"""

import sys
from dataclasses import dataclass
from pathlib import Path

import hawk
import hawk.math as m
from hawk import Grid, Index, Mutable, Scalar

HERE = Path(__file__).parent


@hawk.kernel
def opt_staged(x: Scalar, w: Scalar, i: Index, total: Mutable[Scalar], c: Mutable[Scalar], bins: Mutable["b":8]):
    total = hawk.sum(x * w)
    c = x - hawk.mean(x)
    hawk.scatter(bins)[i] += x


@hawk.kernel
def opt_total(v: Scalar) -> Scalar:
    return hawk.sum(v * v)


@hawk.kernel
def opt_auto(x: Scalar, t: Mutable[Scalar]):
    t = hawk.sum(x)


@hawk.kernel
def opt_compensated(x: Scalar, t: Mutable[Scalar]):
    t = hawk.sum(x, policy="compensated")


@hawk.kernel
def opt_ordered(x: Scalar, t: Mutable[Scalar]):
    t = hawk.sum(x, policy="ordered")


@hawk.kernel
def opt_mean(x: Scalar, w: Scalar, avg: Mutable[Scalar]):
    avg = hawk.mean(x, where=w > 0.0)


@hawk.kernel
def opt_hist(k: Index, x: Scalar, bins: Mutable["bin":8]):
    hawk.scatter(bins)[k] += x


@hawk.kernel
def opt_hist_plain(k: Index, x: Scalar, bins: Mutable["bin":8]):
    hawk.scatter(bins, policy="plain")[k] += x


@hawk.kernel
def opt_rows(g: Grid["row", "col":64], x: Scalar) -> Scalar:
    return hawk.sum(x, over="col")


@hawk.kernel
def opt_scan(x: Scalar, start: Scalar, y: Mutable[Scalar]):
    y = hawk.scan(x * x, reset=start > 0.0)


@hawk.kernel
def opt_softmax(g: Grid["row", "col":16], x: Scalar, z: Mutable[Scalar]):
    top = hawk.max(x, over="col")
    ex = m.exp(x - top)
    z = ex / hawk.sum(ex, over="col")


@hawk.kernel
def opt_runs(lane: Grid["i"], k: Index, x: Scalar, y: Mutable[Scalar]):
    i = lane.i
    last = lane.extent("i") - 1
    start = (i == 0) | (k != k.at(m.max(i - 1, 0)))
    end = (i == last) | (k != k.at(m.min(i + 1, last)))
    y = m.where(end, hawk.scan(x, reset=start), 0.0)


@hawk.kernel
def opt_big_sink(k: Index, x: Scalar, big: Mutable["slot":40_000_000], small: Mutable["bin":8]) -> Scalar:
    hawk.scatter(big)[k] += x * 2.0  # (over PAIR_SLOTS slots: no private copies)
    hawk.scatter(small, policy="plain")[k % 8] += x
    return hawk.sum(x, policy="ordered")


@hawk.kernel
def opt_keyed_big(k: Index, d: Index, x: Scalar, big: Mutable["slot":40_000_000]):
    hawk.scatter(big)[k] += hawk.scan(x, by=d, keys=16)  # (its second stage: slot ranges)


@dataclass(frozen=True)
class Input:
    kernel: object
    prep: str = ""  # passes run before the one under test
    stage: int | None = None  # after split-stages in `prep`: keep this stage's func only


PLANNED = "verify-hawk,plan-buffers"
INPUTS = {
    "verify_hawk": Input(opt_staged),
    "split_stages": Input(opt_staged, "verify-hawk"),
    "plan_buffers": Input(opt_staged, "verify-hawk,split-stages", stage=0),
    "host_chunk_loop": Input(opt_total, PLANNED),
    "host_sink_private": Input(opt_hist, PLANNED),
    "host_scatter_plain": Input(opt_hist_plain, PLANNED),
    "host_reduce_auto": Input(opt_auto, PLANNED),
    "host_reduce_compensated": Input(opt_compensated, PLANNED),
    "host_reduce_ordered": Input(opt_ordered, PLANNED),
    "host_finish": Input(opt_mean, PLANNED),
    "gpu_tree": Input(opt_compensated, PLANNED),
    "gpu_slots": Input(opt_rows, PLANNED),
    "gpu_chunks": Input(opt_hist, PLANNED),
    "canonicalize": Input(opt_total, PLANNED + ",lower-host-lanes"),
    "lower_to_llvm": Input(opt_total, PLANNED + ",lower-host-lanes,speculate-ifs,scalarize-payloads,canonicalize"),
    "lower_finish_to_llvm": Input(opt_hist, PLANNED + ",lower-gpu-lanes,canonicalize"),
    "target_host": Input(opt_staged),
    "target_nvvm": Input(opt_hist),
    "split_scan": Input(opt_scan, "verify-hawk"),
    "split_sinks": Input(opt_big_sink, "verify-hawk"),
    "host_scan": Input(opt_scan, "verify-hawk,split-stages", stage=1),
    "host_scan_interior": Input(opt_runs, "verify-hawk,split-stages", stage=1),
    "host_scan_keyed_ranges": Input(opt_keyed_big, "verify-hawk,split-stages", stage=1),
    "split_block": Input(opt_softmax, "verify-hawk"),
    "host_block": Input(opt_softmax, "verify-hawk,split-stages"),
    "gpu_blocks": Input(opt_softmax, "verify-hawk,split-stages,plan-buffers"),
    "gpu_form": Input(opt_rows, PLANNED),
    "build_finish": Input(opt_mean, PLANNED),
    "build_finish_gpu": Input(opt_hist, PLANNED),
    "lower_chunk_loop": Input(opt_total, PLANNED + ",chunk-form,build-finish"),
    "chunk_form": Input(opt_rows, PLANNED),
    "chunk_form_chains": Input(opt_ordered, PLANNED),
    "chunk_form_gpu": Input(opt_ordered, PLANNED + ",gpu-form"),
    "map_lanes_gpu": Input(opt_compensated, PLANNED + ",gpu-form,build-finish{target=gpu}"),
}


def input_ir(entry: Input) -> str:
    """The IR a test file holds: the kernel's hawk IR with its facts, after `prep` (one stage if asked)."""
    from mlir import ir

    from hawk.ir.dialect import new_context
    from hawk.passes.base import kernel_funcs
    from hawk.passes.pipeline import Pipeline
    from hawk.passes.plan import annotate

    k = entry.kernel
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(k.hawk_ir())
        annotate(module, k.signature, k.outputs, k.default_spec())
        if entry.prep:
            Pipeline(entry.prep).run(module)
        if entry.stage is not None:
            module = ir.Module.parse(f"module {{\n{kernel_funcs(module)[entry.stage]}\n}}")
        return str(module)


def header(path: Path, name: str, entry: Input) -> list[str]:
    """The file's leading `//` lines, or a fresh header for a new file."""
    if path.exists():
        lines = path.read_text().splitlines()
        head = []
        for line in lines:
            if not line.startswith("//"):
                break
            head.append(line)
        return head
    return [f"// PASSES: {name.replace('_', '-')}", f"// KERNEL: {entry.kernel.name} (input written by "
            "tests/ir/make_inputs.py; edit the CHECK lines, not the IR)"]


def render(name: str, entry: Input) -> str:
    path = HERE / f"{name}.mlir"
    return "\n".join(header(path, name, entry)) + "\n\n" + input_ir(entry)


def main(argv: list[str]) -> int:
    stale = []
    for name, entry in INPUTS.items():
        path = HERE / f"{name}.mlir"
        text = render(name, entry)
        if path.exists() and path.read_text() == text:
            continue
        if "--check" in argv:
            stale.append(path.name)
        else:
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print(f"out of date (run tests/ir/make_inputs.py): {', '.join(stale)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
