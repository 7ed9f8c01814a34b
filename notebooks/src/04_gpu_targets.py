# Source of notebooks/04_gpu_targets.ipynb: edit here, then `.venv/bin/python scripts/notebooks.py build 04`.
# ruff: noqa: E402

# %% [markdown]
# # One kernel, four targets
#
# The same kernel source compiles for the CPU and for three kinds of GPU. `eagle.deploy(kernel, target=...)`
# picks one:
#
# | target | binary | compiles here | runs on |
# |---|---|---|---|
# | `host` | a shared library (LLVM, multi-threaded) | yes | this CPU |
# | `spirv` | a Vulkan SPIR-V module | yes | any Vulkan device; without a GPU, Mesa's lavapipe runs it on the CPU |
# | `nvvm` | PTX (checked by assembling it with `ptxas`) | yes, no CUDA install needed | an NVIDIA GPU with its driver |
# | `rocdl` | an AMD code object (LLVM 22 and lld) | yes | an AMD GPU with the ROCm (HIP) runtime |
#
# On a GPU, a sum over lanes is a workgroup tree (subgroup shuffles, then shared memory), a scatter adds into
# private copies, and the partial results are finished on the host. An `ordered` sum is exact (the exact sum of
# its terms, rounded once), so its bits match across targets whatever the split. Cells below that need a device
# skip with the reason when it is absent.

# %%
import tempfile
from pathlib import Path

import numpy as np

import eagle
import hawk
import hawk.artifact
import hawk.math as m
from hawk import Index, Mutable, Scalar, Vector
from hawk.targets import gpu_target

# %% [markdown]
# ## The kernel
#
# A small signal-statistics kernel: an ordered total of the energy, a per-lane output, and a scatter of each
# lane's value into one of eight bins by its `Index` key.

# %%
@hawk.kernel
def signal_stats(x: Scalar, band: Index, energy: Mutable[Scalar], soft: Mutable[Scalar],
                 per_band: Mutable["band":8]):
    energy = hawk.sum(x * x, policy="ordered")
    soft = x / m.sqrt(1.0 + x * x)
    hawk.scatter(per_band)[band] += x


rng = np.random.default_rng(404)
x = rng.normal(size=20_000)
band = rng.integers(0, 8, x.size).astype(np.int32)
want_bands = np.bincount(band, weights=x, minlength=8)

host = eagle.deploy(signal_stats).run(x=x, band=band)
print("host energy:", float(host["energy"][0]).hex(), " numpy:", float((x * x).sum()).hex())
print("soft   ok:", np.allclose(host["soft"], x / np.sqrt(1 + x * x)))
print("bands  ok:", np.allclose(host["per_band"], want_bands))

# %% [markdown]
# ## spirv: a GPU target you can run without a GPU
#
# The spirv target emits the same SPIR-V a Vulkan GPU would run. Without one, Mesa's lavapipe driver runs it on the
# CPU, so the GPU code path (workgroup trees, private copies, exact accumulators, the host finish) is exercised on
# any machine with `mesa-vulkan-drivers` installed. The ordered energy has the host's bits.

# %% machine
try:
    gpu = eagle.deploy(signal_stats, target="spirv").run(x=x, band=band)
except eagle.RuntimeMissing as why:
    print("spirv skipped:", why)
else:
    from eagle.targets.vulkan_runtime import VulkanRuntime

    print("Vulkan device:", VulkanRuntime.shared().device_name)
    print("energy:", float(gpu["energy"][0]).hex(), " same bits as the host:", gpu["energy"][0] == host["energy"][0])
    print("soft   ok:", np.allclose(gpu["soft"], host["soft"]))
    print("bands  ok:", np.allclose(gpu["per_band"], want_bands))

# %% [markdown]
# ## Keeping the data on the device
#
# Above, each run shipped `x` and `band` to the device and brought `soft` back: for a small kernel, those copies
# can cost more than the launch itself. `eagle.asarray(x, device="spirv")` copies an array to the device once
# and hands back an `eagle.array.DeviceArray`. A plan on that target reads such arrays where they lie, and when
# its inputs live on the device, its per-lane outputs are left there too, as device arrays that the next run
# can read directly. Cells (totals) are still finished on the host, so they come back as host arrays; only
# the few partial values they are made of cross over.
#
# The Vulkan runtime counts every copy between host and device
# (`eagle.targets.vulkan_runtime.transfers()`); `planes()` is how many of those moved a whole lane plane. The
# kernel below reads its own total (each lane is divided by the square root of the energy), so it runs as two
# stages; bound once to device arrays, it launches three times and no lane plane moves at all. The ordered
# energy has the host's bits, and the device-resident results have the bits of the same plan fed plain NumPy
# arrays.

# %% machine
@hawk.kernel
def normalised(x: Scalar, w: Scalar, energy: Mutable[Scalar]) -> Scalar:
    e = hawk.sum(x * x * w, policy="ordered")
    energy = e
    return x * w / m.sqrt(e)


w = rng.uniform(0.5, 1.5, x.size)
want = eagle.deploy(normalised).run(x=x, w=w)  # the host, on NumPy arrays
try:
    spirv = eagle.deploy(normalised, target="spirv")
    from_numpy = spirv.run(x=x, w=w)  # the same target fed host arrays: the lane planes travel every run
except eagle.RuntimeMissing as why:
    print("spirv skipped:", why)
else:
    from eagle.array import DeviceArray
    from eagle.targets.vulkan_runtime import transfers

    counter = transfers()
    dx, dw = eagle.asarray(x, device="spirv"), eagle.asarray(w, device="spirv")
    print("on the device:", type(dx).__name__, dx.device, dx.shape, dx.dtype)
    counter.reset()
    bound = spirv.bind(x=dx, w=dw)
    for _ in range(3):
        got = bound.launch()
    print("stages:", len(spirv.last_chunks), " lane planes copied in 3 launches:", counter.planes())
    print("result:", type(got["result"]).__name__, "on", got["result"].device,
          " energy:", type(got["energy"]).__name__, "on", got["energy"].device)
    same_energy = np.asarray(got["energy"]).tobytes() == np.asarray(want["energy"]).tobytes()
    same_result = got["result"].numpy().tobytes() == np.asarray(from_numpy["result"]).tobytes()
    print("energy: the host's bits:", same_energy, " result: the host-array run's bits:", same_result)
    print("result close to the host's:", np.allclose(got["result"].numpy(), want["result"], rtol=1e-14, atol=0))
    assert counter.planes() == 0 and isinstance(got["result"], DeviceArray) and same_energy and same_result
    counter.reset()
    again = spirv.run(x=got["result"], w=dw)  # one run's device output is the next run's input, in place
    print("chained run: result on", again["result"].device, "| lane planes copied:", counter.planes())
    assert counter.planes() == 0
    print("the one copy back, when asked:", again["result"].numpy()[:3], "| copies down:",
          counter.counts[("down", "array")])

# %% [markdown]
# ## Math functions on spirv
#
# A Vulkan shader's own math library (GLSL.std.450) is 32-bit only, with loose precision, so the spirv target
# compiles eagle's own float64 functions into each kernel: fdlibm's algorithms written without branches, within
# 1 to 3 ulps of the correctly rounded value (docs/devices.md). Below, a kernel that calls most of them runs on
# the host (the system's libm) and on spirv, and the largest difference is counted in ulps of the host's result.
# Two IEEE details are kept on purpose: `x / 0.0` is an infinity and `0.0 * inf` a NaN, as on the host, although
# lavapipe's shader compiler would fold a constant zero operand away (eagle computes such zeros at run time).
# `sin`, `cos` and `tan` reduce their argument in three exact steps up to `2^19 pi`; beyond that (up to the
# largest double) a lane takes the host's Payne-Hanek reduction, so huge arguments give the host's very bits.

# %% machine
NAMES = ("expm1", "log1p", "tanh", "sinh", "cosh", "pow", "erf", "sin", "atan2", "exp")


@hawk.kernel
def functions(x: Scalar) -> Vector[10]:
    return m.vec(m.expm1(x * 0.5), m.log1p(x * x), m.tanh(x), m.sinh(x * 0.25), m.cosh(x * 0.25),
                 m.pow(1.0 + x * x, 0.3 * x), m.erf(x), m.sin(3.0 * x), m.atan2(x, 1.5), m.exp(-x * x))


@hawk.kernel
def by_zero(x: Scalar) -> Scalar:
    return x / 0.0 + x * 0.0


grid = np.linspace(-6.0, 6.0, 2001)
on_host = np.asarray(eagle.deploy(functions).run(x=grid))
try:
    on_spirv = np.asarray(eagle.deploy(functions, target="spirv").run(x=grid))
except eagle.RuntimeMissing as why:
    print("spirv skipped:", why)
else:
    ulps = np.abs(on_spirv - on_host) / np.spacing(np.abs(on_host))  # (function, point)
    print(f"largest difference from the host's libm over {grid.size} points, in ulps:")
    print({name: int(u) for name, u in zip(NAMES, ulps.max(axis=1), strict=True)})
    special = np.array([1.0, -2.0, 0.0, np.inf])
    print("x / 0.0 + x * 0.0 on spirv:", np.asarray(eagle.deploy(by_zero, target="spirv").run(x=special)),
          " host:", np.asarray(eagle.deploy(by_zero).run(x=special)))
    huge = np.array([1e7, 1e22, 1e300])
    far = np.asarray(eagle.deploy(functions, target="spirv").run(x=huge))[7]  # sin(3x)
    print("sin(3x) of", huge, "on spirv:", far, " the host's bits:",
          far.tobytes() == np.asarray(eagle.deploy(functions).run(x=huge))[7].tobytes())

# %% [markdown]
# ## Compiling for every target
#
# `hawk.artifact.build` compiles a kernel ahead of time for any list of targets, whatever this machine has:
# compiling needs no GPU. `chips=` picks the GPU generation. `CHIP` below holds the defaults, `sm_80` (PTX for
# it also runs on every later NVIDIA GPU: the driver compiles it for the chip at hand) and `gfx90a` (an AMD code
# object runs only on its own chip: set yours, e.g. `gfx942` for an MI300). Each GPU build writes the device
# binary and, beside it, the stage's host finish. `cpu="portable"` compiles the host code (the host build and
# every GPU build's finish) for a generic CPU of this architecture, so the artifact loads on another machine; a
# build for this machine's own CPU is refused elsewhere, naming both CPUs.

# %%
CHIP = {"nvvm": "sm_80", "rocdl": "gfx90a"}
out = Path(tempfile.mkdtemp(prefix="hawk-gpu-"))
hawk.artifact.build(signal_stats, out, targets=("host", "spirv", "nvvm", "rocdl"), chips=CHIP, cpu="portable")
for path in sorted(out.iterdir()):
    print(path.name)

# %% [markdown]
# ### nvvm: PTX
#
# PTX is text, so it can be read. Its header names the PTX version and the chip, then comes the entry, which takes
# the planes' buffers. Counting a few instructions finds the pieces of the kernel: the square root of `soft`, the
# reads of the `Index` keys, and the adds and subtractions of the scatter (its default policy is compensated: each
# add also keeps the rounding error it made). Last, `ptxas` assembles it, as a driver would.

# %%
ptx_file = next(out.glob("*.nvvm.ptx"))
ptx = ptx_file.read_text().splitlines()
print("\n".join(line for line in ptx[:12] if line.strip()))
print("...")
for needle in ("sqrt.rn.f64", "ld.global.s32", "add.rn.f64", "sub.rn.f64"):
    first = next(line.strip() for line in ptx if needle in line)
    print(f"{sum(needle in line for line in ptx):>3} x {needle:<15} e.g.  {first}")
print(len(ptx), "lines of PTX")
cubin = gpu_target("nvvm", chip=CHIP["nvvm"]).check(ptx_file.read_bytes())   # ptxas, from the `gpu` extra
print(f"ptxas assembles it for {CHIP['nvvm']} (an ELF cubin):", cubin[:4] == b"\x7fELF")

# %% [markdown]
# ### rocdl and spirv: binary objects
#
# The AMD build is an ELF code object for the `amdgcn` architecture (`e_machine` 224, EM_AMDGPU), linked with
# `ld.lld` against ROCm's device libraries. The spirv build is a SPIR-V module (it starts with the magic number
# `0x07230203`), validated with `spirv-val` when it was compiled.

# %%
hsaco = next(out.glob("*.rocdl.hsaco")).read_bytes()
print("rocdl: ELF:", hsaco[:4] == b"\x7fELF", " e_machine:", int.from_bytes(hsaco[18:20], "little"))
spv = next(out.glob("*.spirv.spv")).read_bytes()
print(f"spirv: magic: 0x{int.from_bytes(spv[:4], 'little'):08x}", " whole 32-bit words:", len(spv) % 4 == 0)

# %% [markdown]
# ## Running on a real GPU
#
# On a machine with an NVIDIA GPU and its driver (plus the `cuda-bindings` package, in the `gpu` extra), or an AMD
# GPU with ROCm:
#
# ```python
# eagle.deploy(signal_stats, target="nvvm").run(x=x, band=band)                  # NVIDIA (chip="sm_90"...)
# eagle.deploy(signal_stats, target="rocdl", chip="gfx942").run(x=x, band=band)  # AMD: your GPU's chip
# eagle.deploy(signal_stats, target="auto").run(x=x, band=band)   # a GPU if one is present, else the host
# ```
#
# or load the artifact built above there: `hawk.load(dir, "signal_stats", target="nvvm")` needs NumPy and the GPU's
# runtime, not MLIR. `bash scripts/gpu_check.sh build` packs the whole contract suite as such a bundle, and
# `bash scripts/gpu_check.sh run` on the GPU machine checks it. The cell below tries each GPU target here; it
# prints why it skips one that this machine cannot run.

# %% machine
print("target='auto' picks:", eagle.deploy(signal_stats, target="auto").target)
for target in ("nvvm", "rocdl"):
    try:
        got = eagle.deploy(signal_stats, target=target, chip=CHIP[target]).run(x=x, band=band)
    except eagle.RuntimeMissing as why:
        print(f"{target}: skipped, {why}")
        continue
    print(f"{target}: energy same bits as the host: {got['energy'][0] == host['energy'][0]},",
          f"bands ok: {np.allclose(got['per_band'], want_bands)}")

# %% [markdown]
# The same from the artifact, through `hawk.load` (the path that needs no compiler):

# %% machine
for target in ("spirv", "nvvm", "rocdl"):
    try:
        loaded = hawk.load(out, "signal_stats", target=target)
        got = hawk.run(loaded, x=x, band=band)
    except eagle.RuntimeMissing as why:
        print(f"{target}: skipped, {why}")
        continue
    print(f"{target}: energy same bits as the host: {got['energy'][0] == host['energy'][0]}")
