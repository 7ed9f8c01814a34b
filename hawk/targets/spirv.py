"""The SPIR-V target's code generation: gpu.module -> spirv.module (Vulkan, SPIR-V 1.5) -> SPIR-V words, checked by
spirv-val (launched by eagle/targets/vulkan_runtime.py; lavapipe runs it on a machine without a GPU).

The kernel keeps the shape lower_gpu gives it: one `<stage>_lanes` entry point, workgroups of
`hawk.abi.layout.WORKGROUP` invocations (its workgroup arrays become Workgroup variables). Argument k is a storage
buffer at (set 0, binding k) holding a runtime array of its element type, so the runtime binds buffers in
argument order.

Exactness: every floating-point arithmetic instruction is decorated NoContraction, so a Vulkan driver neither
fuses a multiply into an add nor rewrites `(a + b) + c`; a lane's terms are then the host's bits, and an ordered
sum deposits them into exact integer accumulators (hawk/exact.py) that the host finish rounds once: bitwise
equal to the host's. Threads that share an accumulator add with 64-bit integer atomics (Int64Atomics; the
Vulkan runtime enables shaderBufferInt64Atomics).
Vulkan lets a driver round float32 division and sqrt 2.5 ulps off (and promises no more for float64, though the GPUs
we know and lavapipe round float64 ones correctly): float32 ones are computed in float64 and rounded once, which is
exactly the IEEE float32 result (see spirv_math). Denormals are left to the driver's
default (lavapipe keeps them; so do NVIDIA and AMD for float64, float32 may flush on some drivers).

Math: GLSL.std.450 (the only math library a Vulkan shader has) works in 32 bits only, with Vulkan's loose precision
rules, and has no erf; hawk/targets/spirv_math.py compiles its own exp, log, exp2, log2, log10, sin, cos, tan,
asin, acos, atan and atan2 (float64: within 1-2 ulps), hawk/targets/spirv_math64.py float64 expm1, log1p, sinh,
cosh, tanh, erf and pow on those (within 1-3 ulps; pow through a double-double logarithm), and the float32 calls
of all of them run in float64, rounded once. Math it lacks (NO_SPIRV: erfc and cbrt, which the front end does not
make today) is refused at compile time with the function named, rather than silently run at lower precision.
sin/cos/tan of |x| > 2^19 pi take the host's Payne-Hanek reduction (the host's bits), in a branch only such lanes
take.

Workarounds for this MLIR (22.1.8) and for Mesa's lavapipe, in hawk/targets/spirv_lower.py (the last two below):
- scf.for with iter_args that runs zero times returns garbage (llvm/llvm-project#211981): such loops are guarded;
- lavapipe (Mesa 22.3) miscompiles comparisons of OpSConvert'ed values: sign extensions become xor/sub;
- lavapipe ends every loop of an invocation after 65535 trips in all, silently: loops over lanes are unrolled
  (so an invocation takes ~500k lanes), and a canary loop at the end of the kernel sets a status word the runtime
  checks, so a launch past the budget is refused instead of returning wrong numbers;
- 2-D vectors and vector.multi_reduction do not convert: vectors are scalarised (in the host's order);
- spirv-update-vce lowers the version to 1.0, which cannot list storage buffers in the entry point: reset to 1.5;
  it also misses Int64Atomics for 64-bit atomics, which fix_version adds;
- lavapipe loses AcquireRelease atomic adds in loops when whole SIMD groups of a workgroup have left the loop:
  atomics are made relaxed (relax_atomics), all the ordering they need;
- lavapipe folds `x * 0.0` and `x / 0.0` to 0 when the zero is a constant (IEEE: NaN or +-inf for some x), even
  with NoContraction and SignedZeroInfNanPreserve: constant zero operands become zeros computed at run time
  (hawk/targets/spirv_zeros.py).
The kernel gets one extra argument after its own: eagle's status buffer (i64 x 3), bound by the runtime.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from hawk.abi.layout import WORKGROUP
from hawk.abi.targets import SPIRV_SUBGROUPS as SUBGROUPS

VERSION = "v1.5"  # SPIR-V 1.5 = Vulkan 1.2: storage buffers listed in the entry point interface, no extension needed
CAPABILITIES = ("Shader", "Int64", "Float64", "Int64Atomics")
EXTENSIONS = ("SPV_KHR_storage_buffer_storage_class",)
VALIDATE_ENV = "vulkan1.2"
UNROLL = 8  # innermost loops: 8x fewer trips against lavapipe's loop budget (see spirv_lower)

SHUFFLE_CAPABILITIES = ("GroupNonUniform", "GroupNonUniformShuffle", "GroupNonUniformShuffleRelative")


def target_env(subgroup: int = 0) -> str:
    """The SPIR-V target environment; with a subgroup size, the shuffles it needs and that size."""
    caps = CAPABILITIES + (SHUFFLE_CAPABILITIES if subgroup else ())
    limits = f"subgroup_size = {subgroup}" if subgroup else ""
    return (f"#spirv.target_env<#spirv.vce<{VERSION}, [{', '.join(caps)}], [{', '.join(EXTENSIONS)}]>, "
            f"api=Vulkan, #spirv.resource_limits<{limits}>>")

LOWER = ("builtin.module(gpu.module(arith-expand,convert-math-to-spirv),convert-gpu-to-spirv{use-64bit-index=true},"
         "spirv.module(spirv-lower-abi-attrs,spirv-update-vce,canonicalize,cse))")
SERIALIZE = "builtin.module(gpu-module-to-binary{format=bin})"

# math with no GLSL.std.450 instruction at any width, and none of eagle's own (hawk/targets/spirv_math.py and
# spirv_math64.py lower the rest before this check, float64 included)
NO_SPIRV = {"erfc", "cbrt"}  # (the front end makes neither today)
# what a kernel author wrote for each math op (powf comes from `**` or hawk.math.pow)
SPELLING = {"powf": "pow"}

# SPIR-V float instructions that round: each is decorated NoContraction
FP_OPS = {"spirv.FAdd", "spirv.FSub", "spirv.FMul", "spirv.FDiv", "spirv.FRem", "spirv.FMod", "spirv.FNegate",
          "spirv.VectorTimesScalar", "spirv.MatrixTimesScalar", "spirv.MatrixTimesVector", "spirv.MatrixTimesMatrix",
          "spirv.VectorTimesMatrix", "spirv.Dot"}


class SpirvTarget:
    """Options: subgroup (default 0: none). A Vulkan device's subgroup size is known only at run time (lavapipe's
    is 8, GPUs' 32 or 64) and MLIR lowers gpu.shuffle to SPIR-V only at one size, so by default a workgroup's tree
    stays in shared memory and the binary runs on every device; subgroup=N compiles register shuffles for
    subgroups of N and runs only where the device's subgroup size is N (checked before the first launch);
    subgroup="device" asks this machine's Vulkan device (0 when there is none or it cannot shuffle)."""

    name = "spirv"
    suffix = "spv"
    float_atomics = False  # core Vulkan has none (lavapipe: float32 only, through an extension)
    # wide payloads take component loops in the tree form only (about 16 lanes a thread; the long loops are
    # unrolled 8x, spirv_lower.unroll_innermost_loops): lavapipe counts every loop trip against its
    # per-invocation budget (spirv_lower.add_loop_canary), and a chunk-form thread's lanes (a thousand or more:
    # ordered and compensated sums, scatters) with loops run out of it from about Vector[64]; those stay one op per
    # component. Part of `options`, so of the binary's cache key.
    wide_loops = "tree"

    def __init__(self, subgroup: int | str = 0):
        if subgroup == "device":  # the runtime's question: eagle.targets.spirv.device_subgroup() answers it
            raise ValueError("spirv subgroup='device' names this machine's Vulkan device: ask "
                             "eagle.targets.spirv.device_subgroup() for its size and pass that")
        if subgroup not in SUBGROUPS:
            raise ValueError(f"spirv subgroup={subgroup!r}: pick one of {list(SUBGROUPS)} (0: no shuffles)")
        self.env = VALIDATE_ENV
        self.subgroup = subgroup

    @property
    def options(self) -> str:
        sg = f",subgroup={self.subgroup}" if self.subgroup else ""
        wide = f",wide={self.wide_loops}" if self.wide_loops else ""
        return f"spirv={VERSION},wg={WORKGROUP},unroll={UNROLL}{sg}{wide}"

    def compile(self, gpu_module: str) -> bytes:
        """SPIR-V words (little-endian bytes) for the stage's kernel."""
        from mlir import ir, passmanager

        from hawk.ir.dialect import new_context
        from hawk.targets.spirv_lower import (
            Unsupported,
            add_loop_canary,
            expand_sign_extensions,
            guard_zero_trip_loops,
            scalarize,
            unroll_innermost_loops,
        )
        from hawk.targets.spirv_math import lower_math
        from hawk.targets.spirv_zeros import opaque_zeros

        # per-thread buffers (wide payloads' component loops) are Function-class variables in SPIR-V
        gpu_module = gpu_module.replace("#gpu.address_space<private>", "#spirv.storage_class<Function>")
        with new_context(), ir.Location.unknown():
            module = ir.Module.parse(gpu_module)
            g = _only(module, "gpu.module")
            for f in _funcs(g):
                workgroup_allocs(f)  # first: later steps add arguments (the status buffer)
            try:
                scalarize(g)
                # folded first, so that every float zero MLIR can prove is a constant for opaque_zeros to hide
                passmanager.PassManager.parse("builtin.module(gpu.module(canonicalize))").run(module.operation)
                for f in _funcs(g):
                    status = add_loop_canary(f)
                    lower_math(f, status)
                    opaque_zeros(f, status)
            except Unsupported as exc:
                raise RuntimeError(f"spirv target: cannot lower the kernel: {exc}") from exc
            refuse_math(g)
            unroll_innermost_loops(g, UNROLL)
            guard_zero_trip_loops(g)
            expand_sign_extensions(g)
            env = target_env(self.subgroup)
            g.operation.attributes["spirv.target_env"] = ir.Attribute.parse(env)
            abi = ir.Attribute.parse(f"#spirv.entry_point_abi<workgroup_size = [{WORKGROUP}, 1, 1]>")
            for f in _funcs(g):
                f.operation.attributes["spirv.entry_point_abi"] = abi
                n = len(f.regions[0].blocks[0].arguments)
                f.operation.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(
                    {"spirv.interface_var_abi": ir.Attribute.parse(f"#spirv.interface_var_abi<(0, {k})>")})
                    for k in range(n)])
            passmanager.PassManager.parse(LOWER).run(module.operation)
            s = _only(module, "spirv.module")
            no_contraction(s)
            relax_atomics(s)
            fix_version(s)
            # gpu-module-to-binary serialises the spirv.module found inside a gpu.module with a SPIR-V target
            text = (f"module attributes {{gpu.container_module}} {{\ngpu.module @{g.sym_name.value} [{env}] {{\n"
                    f"{s}\n}}\n}}\n")
            del g, s
            module = ir.Module.parse(text)
            passmanager.PassManager.parse(SERIALIZE).run(module.operation)
            from mlir.dialects import gpu

            b = _only(module, "gpu.binary")
            return bytes(gpu.ObjectAttr(b.attributes["objects"][0]).object)

    def check(self, binary: bytes) -> bytes:
        """Validate with spirv-val for Vulkan 1.2; the binary, or an error with spirv-val's words."""
        val = shutil.which("spirv-val")
        if val is None:
            raise RuntimeError("spirv-val not found: apt-get install spirv-tools")
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "k.spv"
            path.write_bytes(binary)
            r = subprocess.run([val, "--target-env", self.env, str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"spirv-val ({self.env}) refused the SPIR-V: {(r.stderr or r.stdout).strip()}")
        return binary


def _funcs(gpu_module) -> list:
    return [f for f in gpu_module.regions[0].blocks[0].operations if f.operation.name == "gpu.func"]


def _only(module, name: str):
    ops = [op for op in module.body.operations if op.operation.name == name]
    if len(ops) != 1:
        raise RuntimeError(f"spirv target: expected one {name} in the module, found {len(ops)}")
    return ops[0]


def refuse_math(gpu_module) -> None:
    """Refuse math this target cannot compute at the kernel's precision, naming the function."""
    from mlir import ir

    from hawk.errors import KernelError

    bad: list[tuple[str, str, tuple[str | None, int | None]]] = []

    def visit(op):
        name = op.name
        if name.startswith("math."):
            fn = name[5:]
            t = op.results[0].type if len(op.results) else None
            elem = _element(t)
            if fn in NO_SPIRV:
                dtype = {"f64": "float64", "f32": "float32", "f16": "float16"}.get(str(elem), str(elem))
                bad.append((SPELLING.get(fn, fn), dtype, _source_line(op.location)))
        return ir.WalkResult.ADVANCE

    gpu_module.operation.walk(visit)
    if bad:
        fn, dtype, (file, line) = bad[0]
        names = ", ".join(sorted({f"hawk.math.{f}" for f, _, _ in bad}))
        kernel = gpu_module.sym_name.value.removesuffix("_gpu")
        why = "GLSL.std.450, the only math library a Vulkan shader has, has no such function, nor has eagle's own"
        err = KernelError(f"target 'spirv' cannot compute {names} on {dtype} lanes: {why}. Run this kernel on "
                          f"target 'host', 'nvvm' or 'rocdl'",
                          kernel=kernel, file=file, line=line)
        err.call = fn  # Kernel.located finds the user's line of the call when the IR kept no location
        raise err


def _source_line(loc) -> tuple[str | None, int | None]:
    """The user's file and line an op came from (the front end gives every op a file location; lowering may wrap
    it in fused or named locations), or (None, None)."""
    m = re.search(r'"([^"]+)":(\d+):\d+', str(loc))
    return (m.group(1), int(m.group(2))) if m and m.group(1) != "-" else (None, None)


def workgroup_allocs(f) -> None:
    """Workgroup attributions of a gpu.func (which convert-gpu-to-spirv cannot take) as memref.alloc in the
    Workgroup storage class at the top of the kernel, which it turns into Workgroup variables."""
    from mlir import ir
    from mlir.dialects import memref

    if "workgroup_attributions" not in f.attributes:
        return
    count = ir.IntegerAttr(f.attributes["workgroup_attributions"]).value
    block = f.regions[0].blocks[0]
    inputs = len(ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value).inputs)
    space = ir.Attribute.parse("#spirv.storage_class<Workgroup>")
    for k in reversed(range(inputs, inputs + count)):
        arg = block.arguments[k]
        t = ir.MemRefType(arg.type)
        with ir.InsertionPoint.at_block_begin(block), f.location:
            alloc = memref.AllocOp(ir.MemRefType.get(t.shape, t.element_type, memory_space=space), [], [])
        arg.replace_all_uses_with(alloc.result)
        block.erase_argument(k)
    del f.attributes["workgroup_attributions"]


def no_contraction(spirv_module) -> None:
    """Decorate every rounding float instruction NoContraction (the serializer emits OpDecorate for the attr)."""
    from mlir import ir

    unit = ir.UnitAttr.get()

    def visit(op):
        if op.name in FP_OPS:
            op.attributes["no_contraction"] = unit
        return ir.WalkResult.ADVANCE

    spirv_module.operation.walk(visit)


def relax_atomics(spirv_module) -> None:
    """Give every atomic instruction relaxed memory semantics (MLIR emits AcquireRelease).

    The kernels' atomics are integer adds into exact accumulators (hawk/exact.py) that nothing reads before the
    launch ends, so they need atomicity only, no ordering. And lavapipe (Mesa 22.3) loses AcquireRelease atomic
    adds inside a loop once a whole SIMD group of the workgroup has left the loop (idle threads of a partly used
    workgroup): every trip after the second went missing; relaxed ones are all kept."""
    from mlir import ir

    relaxed = ir.Attribute.parse("#spirv.memory_semantics<None>")

    def visit(op):
        if op.name.startswith("spirv.Atomic") and "semantics" in op.attributes:
            op.attributes["semantics"] = relaxed
        return ir.WalkResult.ADVANCE

    spirv_module.operation.walk(visit)


def fix_version(spirv_module) -> None:
    """spirv-update-vce picks the lowest version the ops need (often 1.0), but the entry point lists storage
    buffers in its interface, which only 1.4+ allows: keep the capabilities and extensions, reset the version.
    It also misses Int64Atomics for 64-bit atomics (the exact accumulators' shared adds), which is added here."""
    from mlir import ir

    vce = str(spirv_module.operation.attributes["vce_triple"])
    vce = re.sub(r"<v\d+\.\d+", f"<{VERSION}", vce)
    if _atomics64(spirv_module) and "Int64Atomics" not in vce:
        vce = re.sub(r"\[", "[Int64Atomics, ", vce, count=1)
    spirv_module.operation.attributes["vce_triple"] = ir.Attribute.parse(vce)


def _atomics64(spirv_module) -> bool:
    """Whether any spirv.Atomic* op works on 64-bit integers."""
    from mlir import ir

    found = []

    def visit(op):
        if op.name.startswith("spirv.Atomic") and any(isinstance(r.type, ir.IntegerType) and
                                                      r.type.width == 64 for r in op.results):
            found.append(op.name)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    spirv_module.operation.walk(visit)
    return bool(found)


def _element(t):
    from mlir import ir

    if t is None:
        return None
    try:
        return ir.ShapedType(t).element_type
    except ValueError:
        return t
