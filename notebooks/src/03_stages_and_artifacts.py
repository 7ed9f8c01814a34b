# Source of notebooks/03_stages_and_artifacts.ipynb: edit here, then `.venv/bin/python scripts/notebooks.py build 03`.
# ruff: noqa: E402

# %% [markdown]
# # Stages, artifacts and the other doors
#
# `eagle.deploy(kernel).run(...)` is the simplest way to run a kernel. This notebook walks through the rest:
#
# * how a kernel that reads its own total is cut into **stages**;
# * **artifacts**: kernels compiled ahead of time, with a JSON sidecar, loaded and run without the compiler
#   (`hawk.artifact.build_bundle`, `hawk.load`, `hawk.run`, the `hawk-artifact` command);
# * the **doors** of a deployed kernel: `bind` (allocate once, launch many times), `simulate` and `until_done`
#   (step loops), `eagle.reduce` and `eagle.Graph`.

# %%
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import eagle
import hawk
import hawk.artifact
import hawk.math as m
from hawk import Grid, Mutable, Param, Scalar

rng = np.random.default_rng(3)
np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## A kernel in stages
#
# `weights` turns raw scores into shares of their total. The share reads `hawk.sum(score)`, a value that exists
# only after every lane was added, so the kernel runs in two launches: the first computes the total (the cell
# `total`, which is also an output), the second reads it. When the total is not an output, as in `fraction`, the
# cell passed between the stages is an internal one (`cut0`), never handed back.

# %%
@hawk.kernel
def weights(score: Scalar, share: Mutable[Scalar], total: Mutable[Scalar]):
    total = hawk.sum(score)
    share = score / total


@hawk.kernel
def fraction(score: Scalar, share: Mutable[Scalar]):
    share = score / hawk.sum(score)


for kernel in (weights, fraction):
    for stage in kernel.stages():
        print(f"{stage.name:>11}: reads cells {list(stage.cells_in)}, writes cells {list(stage.cells_out)}")

score = rng.uniform(1.0, 5.0, size=8)
out = eagle.deploy(weights).run(score=score)
print("share:", np.asarray(out["share"]), " sums to", round(float(np.asarray(out["share"]).sum()), 12))
print("numpy:", score / score.sum())

# %% [markdown]
# ## An artifact: build once, run without the compiler
#
# `hawk.artifact.build_bundle` compiles every stage of each kernel for the targets and dtypes asked for and
# writes them into a directory, with a sidecar `NAME.json` that lists the planes, stages, cells and the sha256 of
# every binary. (`hawk.artifact.build` publishes kernels that run as one launch, and refuses a split kernel.)

# %%
folder = Path(tempfile.mkdtemp(prefix="hawk-artifact-"))
hawk.artifact.build_bundle([weights], folder, targets=("host",), dtypes=("float64", "float32"))
print(sorted(p.name for p in folder.iterdir()))

try:
    hawk.artifact.build(weights, folder, targets=("host",))
except ValueError as err:
    print("build refuses:", err)

# %% [markdown]
# The sidecar is plain JSON. Its `stages` say what runs in which order, `cells` which cells you get back
# (`internal: true` ones are passed between stages only), `builds` which file holds which stage.

# %%
sidecar = json.loads((folder / "weights.json").read_text())
print("fields :", sorted(sidecar))
print("planes :", [(p["name"], p["kind"]) for p in sidecar["planes"]["planes"]])
print("outputs:", sidecar["outputs"])
print("stages :", sidecar["stages"])
print("cells  :", sidecar["cells"])
print("builds :", [(b["stage"], b["dtype"], b["file"]) for b in sidecar["builds"]])

# %% [markdown]
# `hawk.load` checks the sidecar (format, version, every field, the content hash, each binary's sha256) and loads
# the binaries; `hawk.run` runs the stages in order with the same conventions as `eagle.deploy(...).run`. No MLIR
# is imported on this path: a machine with NumPy and a C runtime can run it. A split kernel runs over every lane,
# so `count=` is refused for it.

# %%
loaded = hawk.load(folder, "weights")
got = hawk.run(loaded, score=score)
print("hawk.run share:", np.asarray(got["share"]))
print("equal to eagle's run:", np.allclose(got["share"], out["share"]))
got32 = hawk.run(loaded, score=score.astype(np.float32))
print("float32 build too  :", np.asarray(got32["share"]).dtype)
try:
    hawk.run(loaded, score=score, count=4)
except ValueError as err:
    print("refused:", err)

# %% [markdown]
# In an artifact, every `auto` sum over all lanes is built as `ordered`, so its cells are the same bits on every
# run and thread count, and equal to `eagle.reduce(..., policy="ordered")` of the same terms:

# %%
ordered_total = np.zeros(1)
eagle.reduce(score, ordered_total, policy="ordered").launch()
print("artifact total:", float(got["total"][0]).hex(), " eagle.reduce:", float(ordered_total[0]).hex())

# %% [markdown]
# ## Float widths: `Plan.run` promotes, an artifact refuses
#
# A run computes in its float inputs' dtype. Given float32 and float64 inputs together, `Plan.run` promotes as
# NumPy, torch and JAX (with x64) do: the run is float64, and each float32 input is widened once, exactly, into a
# float64 copy (docs/semantics.md, "Float types of a run"). Every value in the body, sums included, is then
# float64: the bits of the same run with the float32 inputs converted by `astype(np.float64)` first. (NumPy's
# own `x32 * 3.0 + w64` differs in the last bits: a Python float does not widen `x32`, so NumPy rounds the
# product to float32 before adding the float64 `w64`.)

# %%
@hawk.kernel
def blend(x: Scalar, w: Scalar, y: Mutable[Scalar], dot: Mutable[Scalar]):
    y = x * 3.0 + w
    dot = hawk.sum(x * w, policy="ordered")


rng_w = np.random.default_rng(7)
x32 = rng_w.normal(size=6).astype(np.float32)
w64 = rng_w.normal(size=6)
mixed = eagle.deploy(blend).run(x=x32, w=w64)
widened = x32.astype(np.float64)
print("result dtypes:", np.asarray(mixed["y"]).dtype, np.asarray(mixed["dot"]).dtype,
      " NumPy's promotion:", np.result_type(x32, w64))
print("y bit for bit x32.astype(float64) * 3.0 + w64:", np.array_equal(mixed["y"], widened * 3.0 + w64))
print("y bit for bit NumPy's x32 * 3.0 + w64        :", np.array_equal(mixed["y"], x32 * 3.0 + w64))
print("dot:", float(mixed["dot"][0]).hex(), " math.fsum of the float64 products:",
      math.fsum((widened * w64).tolist()).hex())

# %% [markdown]
# An artifact is built per float dtype, and every float plane of its run has that one dtype, so it refuses the
# mix, naming both planes (no silent copy: widen the float32 input yourself, exactly, with `astype`). The JAX and
# torch bridges refuse it the same way (their calls read the framework's memory as it is).

# %%
hawk.artifact.build(blend, folder / "blend", targets=("host",), dtypes=("float64", "float32"))
blend_artifact = hawk.load(folder / "blend", "blend")
try:
    hawk.run(blend_artifact, x=x32, w=w64)
except eagle.InputError as err:
    print("refused:", err)
converted = hawk.run(blend_artifact, x=widened, w=w64)
print("with x widened first, the same bits as Plan.run:",
      all(np.array_equal(converted[k], mixed[k]) for k in ("y", "dot")))

# %% [markdown]
# ## The `hawk-artifact` command
#
# The same build from a shell: `hawk-artifact build --bundle --out DIR file.py:kernel` (or
# `python -m hawk.artifact ...`), and `hawk-artifact show DIR NAME` to check and summarise an artifact. Here the
# kernel lives in a small file written for the purpose. It reads its own mean, so a build without `--bundle`
# is refused (exit status 2, one line on stderr).

# %%
source = folder / "shapes.py"
source.write_text('''
import hawk
import hawk.math as m
from hawk import Mutable, Scalar


@hawk.kernel
def rms(x: Scalar, value: Mutable[Scalar]):
    value = m.sqrt(hawk.mean(x * x))
''')
command = str(Path(sys.executable).with_name("hawk-artifact"))


def hawk_artifact(*args: str, expect: int = 0) -> None:
    done = subprocess.run([command, *args], capture_output=True, text=True)
    print(f"$ hawk-artifact {' '.join(args)}".replace(str(folder), "<dir>"), f"(exit status {done.returncode})")
    print((done.stdout + done.stderr).replace(str(folder), "<dir>"))
    if done.returncode != expect:
        raise RuntimeError(f"hawk-artifact exited with {done.returncode}, expected {expect}")


hawk_artifact("build", "--out", str(folder / "cli"), f"{source}:rms", expect=2)

# %% [markdown]
# With `--bundle` it builds. `show` names the CPU the host code was compiled for, so this cell's output is this
# machine's.

# %% machine
hawk_artifact("build", "--bundle", "--out", str(folder / "cli"), f"{source}:rms")
hawk_artifact("show", str(folder / "cli"), "rms")

# %% [markdown]
# ## An artifact that carries its gradient
#
# `build(..., reverse=True)` also publishes the kernel's adjoint (docs/reverse.md, "Artifacts"), so a program that
# loads the artifact can differentiate it without the compiler: `loaded.reverse(cotangent, **planes)` hands back
# `plan.reverse`'s gradients, bit for bit. A stencil's gradient spans the lanes (each `u.at(...)` read sends its
# cotangent to a neighbour), so it is compiled for the grid it will run on (`reverse_extents=`), and the build
# publishes its gather form too: each lane collects its neighbours' shares in a plain lane kernel, instead of
# every lane scattering into an exact sink over the whole grid (the same bits, several times faster).

# %%
@hawk.kernel
def roughness(g: Grid["r", "c":16], u: Scalar, k: Param) -> Scalar:
    lap = u.at(r=g.r + 1) + u.at(r=g.r - 1) + u.at(c=g.c + 1) + u.at(c=g.c - 1) - 4.0 * u
    return k * lap * lap


hawk.artifact.build(roughness, folder / "rough", targets=("host",), reverse=True, reverse_extents=(12, 16))
surface = rng.normal(size=(12, 16))
weights_ct = rng.uniform(size=(12, 16))
loaded_rough = hawk.load(folder / "rough", "roughness")
published = loaded_rough.reverse(weights_ct, u=surface, k=0.5)
compiled = eagle.deploy(roughness).reverse(weights_ct, u=surface, k=0.5)
print("published kernels:", sorted(p.stem for p in (folder / "rough").glob("*.json")))
print("gradients equal plan.reverse's bit for bit:",
      all(np.asarray(published[x]).tobytes() == np.asarray(compiled[x]).tobytes() for x in ("u", "k")))
try:
    loaded_rough.reverse(np.ones((10, 16)), u=np.zeros((10, 16)), k=0.5)
except eagle.InputError as err:
    print(err)

# %% [markdown]
# ## `bind`: allocate once, launch many times
#
# `plan.bind(**planes)` checks the planes and allocates the outputs once; each `launch()` then costs a foreign
# call per stage (about a microsecond). It hands back the same result buffers every time, overwritten; copy a
# result to keep it. An input passed with the run's dtype is read where it lies, so changing it in place is seen
# by the next launch, and `bound.inputs` holds every input buffer (a `Param` is a one-element buffer there).

# %%
@hawk.kernel
def gain_stage(x: Scalar, gain: Param, y: Mutable[Scalar], energy: Mutable[Scalar]):
    y = gain * x
    energy = hawk.sum(y * y)


x = np.linspace(-1.0, 1.0, 5)
bound = eagle.deploy(gain_stage).bind(x=x, gain=2.0)
first = {k: np.array(v) for k, v in bound.launch().items()}
x[:] = x + 1.0                      # changed in place: the next launch reads it
bound.inputs["gain"][0] = 0.5       # a Param changes through bound.inputs
second = bound.launch()
print("first :", first["y"], first["energy"])
print("second:", np.asarray(second["y"]), np.asarray(second["energy"]))
print("numpy :", 0.5 * x, [float(((0.5 * x) ** 2).sum())])

# %% [markdown]
# ## `simulate`: a step loop without leaving compiled code between steps
#
# `plan.simulate(steps, carry={output: input})` runs the kernel `steps` times and copies each carried output into
# its input before the next step. The caller's arrays are not touched. Here: heat spreading along a rod whose ends
# are held at fixed temperatures.

# %%
@hawk.kernel
def heat_step(lane: Grid["cell"], u: Scalar, kappa: Param, cells: Param, u_next: Mutable[Scalar]):
    i = lane.cell
    if m.land(i > 0, i < cells - 1.0):
        u_next = u + kappa * (u.at(cell=i - 1) - 2.0 * u + u.at(cell=i + 1))
    else:
        u_next = u


CELLS, KAPPA = 60, 0.25
rod = np.zeros(CELLS)
rod[0], rod[-1] = 1.0, 0.2
rod[25:35] = 2.0                     # a hot patch in the middle
plan = eagle.deploy(heat_step)
profiles = {n: np.asarray(plan.simulate(n, carry={"u_next": "u"}, u=rod, kappa=KAPPA, cells=float(CELLS)))
            for n in (1, 20, 200, 2000)}

want = rod.copy()
for _ in range(200):
    want[1:-1] = want[1:-1] + KAPPA * (want[:-2] - 2.0 * want[1:-1] + want[2:])
print("200 steps equal the NumPy loop:", np.allclose(profiles[200], want), " rod untouched:", rod[30] == 2.0)

# %%
fig, ax = plt.subplots(figsize=(7, 2.8))
ax.plot(rod, "k:", label="start")
for n, profile in profiles.items():
    ax.plot(profile, label=f"{n} step{'s' if n > 1 else ''}")
ax.set_xlabel("cell")
ax.set_ylabel("temperature")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## `until_done`: step until a condition holds
#
# `plan.until_done(done, carry=...)` steps until `done` holds: the name of a scalar cell that becomes nonzero, or a
# function given each step's results. It returns the last results and the number of steps. Here the kernel also
# reports `settled`, 1 once no cell changes by more than a tolerance (a `hawk.min` over the lanes).

# %%
@hawk.kernel
def heat_until(lane: Grid["cell"], u: Scalar, kappa: Param, cells: Param, tol: Param,
               u_next: Mutable[Scalar], settled: Mutable[Scalar]):
    i = lane.cell
    if m.land(i > 0, i < cells - 1.0):
        v = u + kappa * (u.at(cell=i - 1) - 2.0 * u + u.at(cell=i + 1))
    else:
        v = u
    u_next = v
    settled = hawk.min(m.where(m.abs(v - u) < tol, 1.0, 0.0))


res, steps = eagle.deploy(heat_until).until_done("settled", carry={"u_next": "u"}, u=rod, kappa=KAPPA,
                                                 cells=float(CELLS), tol=1e-5)
print("settled after", steps, "steps; the middle cell is now", round(float(res["u_next"][30]), 4))
res, steps = eagle.deploy(heat_until).until_done(lambda r: r["u_next"][30] < 1.0, carry={"u_next": "u"}, u=rod,
                                                 kappa=KAPPA, cells=float(CELLS), tol=1e-5)
print("the middle cell drops under 1.0 after", steps, "steps")

# %% [markdown]
# The step loops run single-stage kernels: a split kernel is refused by name.

# %%
try:
    eagle.deploy(weights).simulate(3, score=score)
except eagle.InputError as err:
    print(err)

# %% [markdown]
# ## `eagle.reduce` and `eagle.Graph`
#
# `eagle.reduce(values, out, policy=)` is a sum as a launchable node: one sum of an `(n,)` array into a `(1,)`
# output, or one per row of a `(k, n)` array into `(k,)`. `eagle.Graph` strings nodes (bound launches, reduces)
# together; `build()` checks them once and `launch()` runs them in the order they were added, returning each
# node's results by name.

# %%
samples = rng.normal(size=(3, 1000))
row_totals = np.zeros(3)
graph = (eagle.Graph()
         .add_node(eagle.deploy(gain_stage).bind(x=samples[0], gain=3.0), name="gain")
         .add_node(eagle.reduce(samples, row_totals, policy="compensated"), name="rows")
         .build())
results = graph.launch()
print(graph)
energy = float(results["gain"]["energy"][0])
print("gain energy:", round(energy, 6), " numpy:", round(float(((3.0 * samples[0]) ** 2).sum()), 6))
print("row sums   :", results["rows"], " numpy:", samples.sum(axis=1))
