"""The ROCDL target's code generation: gpu.module -> LLVM IR for amdgcn -> HSA code object (launching it through
HIP is eagle/targets/rocdl.py's).

The MLIR wheel's LLVM has no AMDGPU backend, so MLIR stops at LLVM IR (convert-gpu-to-rocdl, then
translate_module_to_llvmir) and Debian's LLVM 22 finishes: `llvm-link-22 --only-needed` pulls in the ROCm
device libraries (ockl for the work-group size, ocml for math), its shared library optimises and makes an object
for the chip in this process (hawk.targets.llvm_c: what `opt-22 -O3` and `llc-22 -O3` make, without two tool
start-ups) and `ld.lld-22 -shared` makes the code object HIP loads.

The device libraries' control variables (wavefront size, ISA version, ABI version, denormal and rounding
controls) are written here as a small LLVM module per chip instead of taken from the oclc_*.bc files, so that
chips the installed rocm-device-libs predates (gfx1100 and later) build too.

Options: chip (gfx90a default; gfx908, gfx942, gfx1030, gfx1100, ...).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from hawk.targets import llvm_c
from hawk.targets.gpu_vectors import lower_vectors

TRIPLE = "amdgcn-amd-amdhsa"
# LLVM 22's data layout for amdgcn (what `opt-22 -mtriple=amdgcn-amd-amdhsa` gives a module without one)
DATA_LAYOUT = ("e-m:e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-p7:160:256:256:32-"
               "p8:128:128:128:48-p9:192:256:256:32-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-"
               "v256:256-v512:512-v1024:1024-v2048:2048-n32:64-S32-A5-G1-ni:7:8:9")
# (LLVM 22 no longer knows gfx940 and gfx941, folded into gfx942: llc built generic code for them, which the check
# then refused with a puzzling message)
CHIPS = ("gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx950", "gfx1010", "gfx1030",
         "gfx1031", "gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151", "gfx1200", "gfx1201")
ABI_VERSION = 500  # code object v5, what LLVM 22 emits by default and ROCm >= 5.x loads
LLVM_SUFFIX = "-22"  # the Debian LLVM whose IR reader matches the MLIR wheel's LLVM (22.1)
DEVICE_LIBS = ("ockl", "ocml")
# n-D vector ops the GPU conversions do not lower themselves (the host pipeline's convert-vector-to-llvm does):
# multi-reductions (the same inner-parallel strategy as the host's lower-vector-multi-reduction, so the adds come
# in the same order), transposes, broadcasts and n-D from_elements, lowered to 1-D vector ops first.

PIPELINE = ("builtin.module(convert-math-to-rocdl{{chipset={chip}}},"
            "gpu.module(convert-scf-to-cf,math-expand-ops{{ops=tanh}},"
            "convert-gpu-to-rocdl{{chipset={chip} index-bitwidth=64 runtime=HIP}},canonicalize,cse,"
            "reconcile-unrealized-casts))")


def isa_version(chip: str) -> int:
    """__oclc_ISA_version for a chip: gfx90a -> 9010, gfx942 -> 9402, gfx1100 -> 11000 (major*1000 + minor*100 +
    stepping, the last two digits hexadecimal)."""
    m = re.fullmatch(r"gfx(\d+)([0-9a-f])([0-9a-f])", chip)
    if m is None:
        raise ValueError(f"rocdl chip {chip!r} is not a gfx name")
    return int(m.group(1)) * 1000 + int(m.group(2), 16) * 100 + int(m.group(3), 16)


def wave64(chip: str) -> bool:
    """gfx9 (GCN/CDNA) runs 64-wide wavefronts; gfx10 and later (RDNA) default to 32."""
    return isa_version(chip) < 10000


def controls(chip: str) -> str:
    """The device libraries' control constants for `chip`, as an LLVM IR module (replaces the oclc_*.bc files).
    IEEE behaviour throughout: no finite-only or unsafe math, denormals kept, correctly rounded f32 sqrt."""
    values = [("__oclc_finite_only_opt", "i8", 0), ("__oclc_unsafe_math_opt", "i8", 0), ("__oclc_daz_opt", "i8", 0),
              ("__oclc_correctly_rounded_sqrt32", "i8", 1), ("__oclc_wavefrontsize64", "i8", int(wave64(chip))),
              ("__oclc_ISA_version", "i32", isa_version(chip)), ("__oclc_ABI_version", "i32", ABI_VERSION)]
    lines = [f'target datalayout = "{DATA_LAYOUT}"', f'target triple = "{TRIPLE}"']
    for name, ty, v in values:
        align = 4 if ty == "i32" else 1
        lines.append(f"@{name} = linkonce_odr protected local_unnamed_addr addrspace(4) constant {ty} {v}, "
                     f"align {align}")
    return "\n".join(lines) + "\n"


def tool(name: str) -> str:
    """An LLVM 22 tool (llc-22, ld.lld-22, llvm-link-22, ...), or an error saying which package has it."""
    for cand in (f"{name}{LLVM_SUFFIX}", f"/usr/lib/llvm-22/bin/{name}"):
        p = shutil.which(cand)
        if p:
            return p
    pkg = "lld-22" if "lld" in name else "llvm-22"
    raise RuntimeError(f"the rocdl target needs {name}{LLVM_SUFFIX} (Debian package {pkg}; scripts/setup.sh "
                       "installs it)")


def device_libs_dir() -> Path:
    """Where the ROCm device-library bitcode lives (Debian rocm-device-libs, or a ROCm install)."""
    env = os.environ.get("HAWK_ROCM_DEVICE_LIBS")
    cands = [Path(env)] if env else []
    cands += [Path("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"), Path("/usr/lib/aarch64-linux-gnu/amdgcn/bitcode"),
              Path("/opt/rocm/amdgcn/bitcode")]
    for c in cands:
        if (c / "ockl.bc").exists() and (c / "ocml.bc").exists():
            return c
    raise RuntimeError("the rocdl target needs the ROCm device libraries (ockl.bc, ocml.bc): apt-get install "
                       "rocm-device-libs (scripts/setup.sh does), or set HAWK_ROCM_DEVICE_LIBS to their folder")


# LLVM's options for every AMDGPU compile in this process (command-line options of the library, set once):
# -amdgpu-unroll-threshold-private=0: AMDGPU otherwise unrolls loops over private arrays far more eagerly (to
# promote the arrays to registers); wide payloads' component loops over per-thread buffers then became straight-line
# code again, and a compensated Vector[64] sum took 20 s in llc. The code object version is the ABI's.
LLVM_OPTIONS = ("-amdgpu-unroll-threshold-private=0", f"--amdhsa-code-object-version={ABI_VERSION // 100}")


def llvm_c_api():
    """The in-process LLVM 22 with the AMDGPU backend and this target's options."""
    a = llvm_c.api("AMDGPU")
    llvm_c.set_options(a, LLVM_OPTIONS)
    return a


def _explained(words: str) -> str:
    """LLVM's words, with what to do where they are about private memory."""
    if "stack frame size" in words:  # private memory a thread: wide payloads' per-thread buffers
        words += (" -- the kernel needs more private memory per thread than the chip allows: its wide payloads'"
                  " per-thread state (a compensated sum keeps 18 float64 a component) is too large; use a"
                  " narrower payload here, or run it on 'nvvm' or 'host'")
    return words


def _run(cmd: list[str], what: str) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        words = _explained((r.stderr or r.stdout).strip()[:4000])
        raise RuntimeError(f"{what} failed ({Path(cmd[0]).name}): {words}")


class RocdlTarget:
    name = "rocdl"
    suffix = "hsaco"

    float_atomics = True  # global float atomic adds (a compare-and-swap loop where the chip has no native one)
    # wide payloads (more than hawk.passes.host_emit.WIDE_PAYLOAD components) take loops over components through
    # per-thread buffers in private memory: compile time about linear in the payload. A class constant, so the
    # binary cache key (target name, options, and the fingerprint of this source) covers it.
    wide_loops = True

    @property
    def subgroup(self) -> int:
        """A wavefront: the last levels of a workgroup's tree are register shuffles."""
        return 64 if wave64(self.chip) else 32

    def __init__(self, chip: str = "gfx90a"):
        if chip not in CHIPS:
            raise ValueError(f"rocdl chip {chip!r} is not known; pick one of {list(CHIPS)}")
        self.chip = chip

    @property
    def options(self) -> str:
        return f"chip={self.chip}"

    # ---- compile (needs MLIR and the LLVM 22 tools) ---------------------------------------------------------
    def llvm_ir(self, gpu_module: str) -> str:
        """The stage's kernel as LLVM IR text for amdgcn (before the device libraries are linked)."""
        from mlir import ir, passmanager
        from mlir.dialects import llvm

        from hawk.ir.dialect import new_context

        with new_context(), ir.Location.unknown():
            module = ir.Module.parse(gpu_module)
            lower_vectors(module)
            passmanager.PassManager.parse(PIPELINE.format(chip=self.chip)).run(module.operation)
            g = next(op for op in module.body.operations if op.operation.name == "gpu.module")
            out = ir.Module.create()
            out.operation.attributes["llvm.target_triple"] = ir.StringAttr.get(TRIPLE)
            out.operation.attributes["llvm.data_layout"] = ir.StringAttr.get(DATA_LAYOUT)
            for op in g.regions[0].blocks[0].operations:
                op.operation.clone(ir.InsertionPoint(out.body))
            left = set()
            out.operation.walk(lambda op: left.add(op.name) or ir.WalkResult.ADVANCE)
            left -= {"builtin.module"}
            left = sorted(n for n in left if not n.startswith(("llvm.", "rocdl.")))
            if left:  # translating them would crash the bindings, not raise
                raise RuntimeError(f"the rocdl lowering left ops that do not translate to LLVM IR: {left}")
            return str(llvm.translate_module_to_llvmir(out.operation))

    def linked(self, text: str, d: Path) -> Path:
        """The stage's LLVM IR `text` written in the folder `d`, with the device libraries it calls linked in: the
        file compile() optimises (k.ll as it is when it calls neither library, about half of the link time)."""
        (d / "k.ll").write_text(text)
        if not any(f"@__{lib}_" in text for lib in DEVICE_LIBS):
            return d / "k.ll"
        # --only-needed: pull in only what the kernel calls (and what that calls) from the libraries
        (d / "controls.ll").write_text(controls(self.chip))
        bitcode = [str(device_libs_dir() / f"{lib}.bc") for lib in DEVICE_LIBS]
        _run([tool("llvm-link"), "--only-needed", str(d / "k.ll"), *bitcode, str(d / "controls.ll"), "-o",
              str(d / "linked.bc")], "linking the ROCm device libraries")
        return d / "linked.bc"

    def compile(self, gpu_module: str) -> bytes:
        """The HSA code object (an ELF shared object) holding the stage's kernel."""
        text = self.llvm_ir(gpu_module)
        device_libs_dir()  # (needed or not by this stage: a build on a machine without them is refused alike)
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            linked, obj, co = self.linked(text, d), d / "k.o", d / "k.hsaco"
            # IR optimisation as MLIR's own GPU serializers do (O3), then code generation (as `opt -O3` and
            # `llc -O3` would, in this process: hawk.targets.llvm_c). It inlines the library calls; no fast-math
            # flag is added, so the ordered paths keep their separate, unfused adds.
            try:
                obj.write_bytes(llvm_c.object_code(llvm_c_api(), linked.read_bytes(), TRIPLE, self.chip,
                                                   f"compiling for {self.chip}"))
            except RuntimeError as exc:
                raise RuntimeError(_explained(str(exc))) from None
            _run([tool("ld.lld"), "-shared", str(obj), "-o", str(co)], "linking the code object")
            return co.read_bytes()

    def check(self, binary: bytes, entry: str | None = None) -> dict:
        """Check a code object offline: an AMDGPU ELF for this chip, no undefined symbols, and the kernel's
        descriptor `<entry>.kd` defined. Returns {"undefined": [], "kernels": [...]}; raises on a failure."""
        from hawk.targets import amd_elf

        try:
            obj = amd_elf.read(binary)
        except ValueError as exc:
            raise RuntimeError(f"the rocdl binary is not an AMDGPU ELF code object: {exc}") from None
        if obj.mach != amd_elf.MACH[self.chip]:
            have = next((c for c, m in amd_elf.MACH.items() if m == obj.mach), f"machine {obj.mach:#x}")
            raise RuntimeError(f"the code object is for {have}, not {self.chip}")
        if obj.undefined:
            raise RuntimeError(f"the {self.chip} code object has undefined symbols: {sorted(obj.undefined)}")
        kernels = sorted(n[:-3] for n in obj.defined if n.endswith(".kd"))
        if entry is not None and entry not in kernels:
            raise RuntimeError(f"the code object has no kernel descriptor {entry}.kd (it has {kernels})")
        if not kernels:
            raise RuntimeError("the code object holds no kernel")
        return {"undefined": [], "kernels": kernels}
