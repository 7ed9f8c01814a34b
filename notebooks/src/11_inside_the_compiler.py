# Source of notebooks/11_inside_the_compiler.ipynb: edit here, then `.venv/bin/python scripts/notebooks.py build 11`.
# ruff: noqa: E402

# %% [markdown]
# # Inside the compiler
#
# Between a Python function and machine code, a hawk kernel is MLIR text you can print, save, edit and feed back
# in. This notebook follows one kernel through the compiler (docs/architecture.md has the map):
#
# * the **hawk IR**: a function whose planes are typed block arguments, one lane's code in hawk ops;
# * **stages**: where a reduced value is read, the kernel is cut in two launches (`split-stages`);
# * **passes** as units, run by name (`hawk-opt --passes`, or `hawk.opt.run` from Python);
# * **decisions written in the IR**: the buffer layout (`hawk.layout`), how a GPU maps lanes onto threads
#   (`hawk.gpu_form`) and which loop a chunk of lanes runs in on the host (`hawk.chunk_form`); a decision
#   written by hand is taken when it fits the stage and refused in one line when it does not;
# * **text in, the same binary out**: the printed IR alone, through `hawk-opt --target host`, gives the very LLVM
#   IR the compiler builds.

# %%
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import eagle
import hawk
from hawk import Grid, Mutable, Scalar
from hawk.opt import run as hawk_opt

rng = np.random.default_rng(11)

# %% [markdown]
# ## The hawk IR of a kernel
#
# `centre` subtracts the mean. `Kernel.mlir()` prints its hawk IR: the planes `x` and `y` are block arguments
# whose types say what they are (`!hawk.plane` an input, `!hawk.output` a per-lane output; the element type,
# payload shape and lane axes follow), the body is one lane's code in hawk ops beside upstream `arith`, and the
# facts the compiler needs from Python (signature, outputs, the float and index types) ride along as attributes,
# so the text alone can be compiled.

# %%
@hawk.kernel
def centre(x: Scalar, y: Mutable[Scalar]):
    y = x - hawk.mean(x)


def show_func(text: str) -> None:
    """The kernel func of `text`, readably: its arguments one per line, its attribute names, its ops."""
    head = re.search(r"func\.func @(\w+)\((.*?)\) attributes \{(.*?)\} \{\n(.*?)\n  \}", text, re.S)
    fn, args, attrs, body = head.groups()
    print(f"func @{fn}(")
    for arg in re.split(r", (?=%arg)", args):
        print(f"    {arg}")
    names = re.findall(r"(hawk\.\w+)(?= =|,|$)", attrs)
    print(f") attributes: {', '.join(names)}")
    for line in body.splitlines():
        print(f"  {line.strip()}")


show_func(centre.hawk_ir(centre.default_spec()))

# %% [markdown]
# ## Stages
#
# The lane code reads `hawk.mean(x)`, which exists only once every lane was added: `split-stages` cuts the
# kernel there into two launches. The first writes the mean into an internal cell (`cut0`), the second reads it
# (`hawk.cut_read`). `Kernel.mlir(stage=k)` prints each stage with its own facts (`hawk.stage`).

# %%
for k, st in enumerate(centre.stages()):
    print(f"stage {k}: {st.name}, reads cells {list(st.cells_in)}, writes cells {list(st.cells_out)}")
print()
show_func(centre.mlir(stage=1))

# %% [markdown]
# A reduction over a fixed-extent `Grid` axis read in the same body is different: its slot's lanes are few and
# known, so it stays in its stage (a `hawk.block_reduce`: a loop over the row on the host, a workgroup on a GPU).

# %%
@hawk.kernel
def row_share(g: Grid["row", "col":4], x: Scalar, share: Mutable[Scalar]):
    share = x / hawk.sum(x, over="col")


split = hawk_opt(row_share.mlir(), passes="verify-hawk,split-stages")
print("stages:", row_share.stage_count)
print([line.strip().split("(")[0] for line in split.splitlines() if '"hawk.' in line])

# %% [markdown]
# ## Passes, one at a time
#
# Every step from hawk IR to the LLVM dialect is a registered pass with a name, typed options and a one-line
# summary (`hawk-opt --list-passes` prints them all, with each target's pipeline). `hawk.opt.run(text,
# passes=...)` runs a pipeline on text and returns text; the IR is verified after every pass.

# %%
from hawk.passes.pipeline import expanded, known_passes, target_pipeline

for name, summary in known_passes().items():
    print(f"{name.split('{')[0]:21} {summary[:84]}{'...' if len(summary) > 84 else ''}")
print()
print("host:", expanded(target_pipeline("host")))

# %% [markdown]
# `plan-buffers` decides the stage's buffers (their order is the ABI between compiled code and the runtime, roles
# such as `in`, `cell`, `scratch`, and which sinks get private copies) and writes them on the kernel func as
# `hawk.layout`. The runtime binds what it reads back from the lowered module.

# %%
planned = hawk_opt(centre.mlir(stage=0), passes="verify-hawk,plan-buffers")
buffers = re.search(r"hawk\.layout = \{buffers = \[(.*?)\]", planned).group(1)
print("stage 0 buffers:", buffers)

# %% [markdown]
# ## Decisions written in the IR
#
# Two passes write how the lanes will run: `gpu-form` (GPU targets: a workgroup tree over strided lanes, a
# thread per kept slot, a chunk of lanes per thread, or a workgroup per block) and `chunk-form` (the loop a
# chunk of lanes runs in: one flat loop, blocks whose lanes feed chains for compensated and ordered sums, a
# loop per kept slot, rows of a grid, scan blocks). The lowerings read them from the IR; nothing else decides.

# %%
@hawk.kernel
def total(x: Scalar) -> Scalar:
    return hawk.sum(x)


@hawk.kernel
def exact_total(x: Scalar) -> Scalar:
    return hawk.sum(x, policy="ordered")


@hawk.kernel
def row_max(g: Grid["row", "col":64], x: Scalar) -> Scalar:
    return hawk.max(x, over="col")


@hawk.kernel
def column_min(g: Grid["row", "col":16], x: Scalar) -> Scalar:
    return hawk.min(x, over="row")


@hawk.kernel
def laplace(g: Grid["row", "col":32], u: Scalar) -> Scalar:
    return u.at(col=g.col - 1) + u.at(col=g.col + 1) - 2.0 * u


def decision(text: str, attr: str) -> str:
    return re.search(rf'{attr} = "(\w+)"', text).group(1)


print(f"{'kernel':12} {'host chunk form':16} gpu form")
for kernel in (total, exact_total, row_max, column_min, laplace):
    text = kernel.mlir()
    host = hawk_opt(text, passes="verify-hawk,plan-buffers,chunk-form")
    gpu = hawk_opt(text, passes="verify-hawk,plan-buffers,gpu-form")
    print(f"{kernel.name:12} {decision(host, 'hawk.chunk_form'):16} {decision(gpu, 'hawk.gpu_form')}")

# %% [markdown]
# ## A decision written by hand
#
# An attribute in the IR can be edited like any text. `row_max` runs a loop per row (`nested`: the row's maximum
# in registers); the plain `flat` loop is a slower form every such stage can take, and the lowering accepts it:
# its chunk function then has one loop instead of two. A form that does not fit the stage is refused in one
# line that says what to write.

# %%
chosen = hawk_opt(row_max.mlir(), passes="verify-hawk,plan-buffers,chunk-form")
for form in ("nested", "flat"):
    lowered = hawk_opt(chosen.replace('"nested"', f'"{form}"'), passes="build-finish,lower-chunk-loop")
    lanes = lowered[lowered.index("func.func @row_max_lanes"):lowered.index("func.func @row_max_finish")]
    print(f"{form:7}: {lanes.count('scf.for')} scf.for in @row_max_lanes")
try:
    hawk_opt(chosen.replace('"nested"', '"column"'), passes="build-finish,lower-chunk-loop")
except ValueError as exc:
    print("refused:", exc)

# %% [markdown]
# ## Text in, the same binary out
#
# `hawk-opt FILE --target host` runs the host's whole pipeline on a file. Fed the text `Kernel.mlir(stage=k)`
# prints, it gives exactly the LLVM IR the compiler builds for that stage, and the compiled kernel agrees with
# NumPy.

# %%
spec = centre.default_spec()
with tempfile.TemporaryDirectory() as tmp:
    for k in range(centre.stage_count):
        path = Path(tmp) / f"centre.{k}.mlir"
        path.write_text(centre.mlir(stage=k))
        cmd = [sys.executable, "-m", "hawk.opt", str(path), "--target", "host"]
        llvm = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        print(f"stage {k}: hawk-opt --target host == the compiler's LLVM IR:",
              llvm.strip() == centre.lowered(spec, k).llvm_ir.strip())

x = rng.standard_normal(1000)
y = np.asarray(eagle.deploy(centre).run(x=x))
print("y == x - x.mean() to 1e-14:", bool(np.max(np.abs(y - (x - x.mean()))) < 1e-14))

# %% [markdown]
# ## Where to look next
#
# * `Kernel.mlir(after="lower-host-lanes")` shows a stage after any pass of the host pipeline (below: the
#   second stage's chunk function: a loop over its lanes `[lo, hi)` that reads `x`, subtracts the mean read
#   once before the loop, and writes `y`; it is there twice: for outputs of 48 MiB or more the loop runs in
#   blocks of 1024 lanes, each hinting first the lines of `x` a block on (the loop of step 64: one prefetch a
#   line), into a buffer that non-temporal stores copy out, hawk/passes/lower/stream.py), and
#   `HAWK_DUMP_DIR=dir` writes every pass's output of every compile to `dir`.
# * `tests/ir/*.mlir` hold one FileCheck test per pass, each starting from a `.mlir` file.
# * docs/architecture.md lists the passes and modules, and how to add an op, a pass or a target.

# %% [markdown]
# The size of stage 1 on its way down: its operations after each pass of the host pipeline. The lowering group
# adds the chunk loop (and its streamed copy), its reads of the run's facts (`#meta`) and the finish;
# `canonicalize` drops what nothing uses (most of those reads, here); `lower-to-llvm` turns each structured op
# into LLVM's (a loop into branches).

# %%
from mlir import ir

from hawk.ir.dialect import new_context
from hawk.passes.pipeline import HOST


def count_ops(text: str) -> int:
    """Operations in a module (every nested one, the module itself not counted)."""
    with new_context(), ir.Location.unknown():
        found = []
        ir.Module.parse(text).operation.walk(lambda op: found.append(op) or ir.WalkResult.ADVANCE)
        return len(found) - 1


ops = [count_ops(centre.mlir(after=p, stage=1)) for p in HOST]
fig, ax = plt.subplots(figsize=(8, 3))
ax.bar(range(len(HOST)), ops)
ax.set_xticks(range(len(HOST)), HOST, rotation=30, ha="right")
ax.set_ylabel("operations")
ax.set_title("centre, stage 1: operations after each host pass")
fig.tight_layout()
plt.show()
print(dict(zip(HOST, ops, strict=True)))

# %%
after = centre.mlir(after="lower-host-lanes", stage=1)
lanes = after[after.index("func.func @centre_2_lanes"):after.index("func.func @centre_2_finish")]
keep = ("func.func", "scf.for", "memref.load %arg0", "memref.load %arg2", "arith.subf", "memref.store")
print("\n".join(line for line in lanes.splitlines() if any(k in line for k in keep)))
