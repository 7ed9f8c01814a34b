"""The NVVM target's code generation: gpu.module -> PTX (MLIR's NVPTX serializer, libdevice embedded), checked
into a cubin by ptxas. Launching it (cuda-bindings) is eagle/targets/nvvm.py's.

Options: chip (sm_80 default; sm_90, ...). PTX version per chip stays within what ptxas 12.9 knows.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from hawk.targets.gpu_vectors import lower_vectors

CHIPS = {"sm_70": "+ptx70", "sm_75": "+ptx70", "sm_80": "+ptx80", "sm_86": "+ptx80", "sm_89": "+ptx80",
         "sm_90": "+ptx80", "sm_100": "+ptx86", "sm_120": "+ptx87"}
PIPELINE = ("builtin.module(gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm{index-bitwidth=64 has-redux=true},"
            "convert-math-to-llvm,canonicalize,cse,reconcile-unrealized-casts),gpu-module-to-binary{format=isa})")


class NvvmTarget:
    name = "nvvm"
    suffix = "ptx"
    subgroup = 32  # a warp: the last levels of a workgroup's tree are register shuffles
    float_atomics = True  # atom.global.add.f32/f64: plain scatters into sinks too large to privatise
    # wide payloads (more than hawk.passes.host_emit.WIDE_PAYLOAD components) take loops over components through
    # per-thread buffers in private memory: compile time about linear in the payload. A class constant, so the
    # binary cache key (target name, options, and the fingerprint of this source) covers it.
    wide_loops = True

    def __init__(self, chip: str = "sm_80"):
        if chip not in CHIPS:
            raise ValueError(f"nvvm chip {chip!r} is not known; pick one of {sorted(CHIPS)}")
        self.chip = chip

    @property
    def options(self) -> str:
        return f"chip={self.chip}"

    def compile(self, gpu_module: str) -> bytes:
        """PTX text for the stage's kernel."""
        from mlir import ir, passmanager  # MLIR only to compile: loading and launching PTX needs none
        from mlir.dialects import gpu

        from hawk.ir.dialect import new_context

        with new_context(), ir.Location.unknown():
            module = ir.Module.parse(gpu_module)
            lower_vectors(module)
            g = next(op for op in module.body.operations if op.operation.name == "gpu.module")
            g.operation.attributes["targets"] = ir.Attribute.parse(
                f'[#nvvm.target<chip = "{self.chip}", features = "{CHIPS[self.chip]}", O = 3>]')
            passmanager.PassManager.parse(PIPELINE).run(module.operation)
            g = next(op for op in module.body.operations if op.operation.name == "gpu.binary")
            return bytes(gpu.ObjectAttr(g.attributes["objects"][0]).object)

    def check(self, ptx: bytes) -> bytes:
        """Assemble the PTX with ptxas for this chip; the cubin, or an error with ptxas's words."""
        ptxas = find_ptxas()
        with tempfile.TemporaryDirectory() as d:
            src, out = Path(d) / "k.ptx", Path(d) / "k.cubin"
            src.write_bytes(ptx)
            r = subprocess.run([ptxas, "--gpu-name", self.chip, str(src), "-o", str(out)], capture_output=True,
                               text=True)
            if r.returncode != 0:
                raise RuntimeError(f"ptxas refused the PTX for {self.chip}: {r.stderr.strip()}")
            return out.read_bytes()


def find_ptxas() -> str:
    """ptxas from the pip nvidia-cuda-nvcc wheel, else from PATH."""
    try:
        import nvidia.cuda_nvcc as nvcc

        for base in getattr(nvcc, "__path__", []):
            p = Path(base) / "bin" / "ptxas"
            if p.exists():
                return str(p)
    except ImportError:
        pass
    p = shutil.which("ptxas")
    if p:
        return p
    raise RuntimeError("ptxas not found: pip install nvidia-cuda-nvcc-cu12 (scripts/setup.sh does)")
