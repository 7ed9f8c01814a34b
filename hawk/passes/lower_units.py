"""The lowering as passes: each step from a planned hawk kernel func to upstream dialects is a unit that reads
IR and writes IR, so each runs alone under `hawk-opt --passes` and has its own FileCheck test (tests/ir/).

  gpu-form          the kernel func gets `hawk.gpu_form`: the GPU form its Layout takes (tree | slots | chunks
                    | blocks, hawk.abi.layout.gpu_form), a decision the GPU lowering then reads from the IR
  chunk-form        the kernel func gets `hawk.chunk_form`: the loop shape a chunk of lanes runs in (flat | blocked
                    | nested | column | rows | scan, hawk/passes/chunk_form.py), which the chunk-loop lowering
                    reads (host chunks; GPU threads of the "chunks" form)
  build-finish      `@<k>_finish` (host code on every target) from the stage's `hawk.layout`, the user's
                    combiners and its scans' forms; the kernel func stays (hawk/passes/lower/finish.py)
  lower-chunk-loop  the kernel func -> `@<k>_lanes` for the host: one chunk's lanes in the loop shape
                    `hawk.chunk_form` names, every hawk op lowered by its rule (hawk/passes/lower_host.py)
  map-lanes-gpu     the kernel func -> a gpu.module kernel in the form `hawk.gpu_form` names, every hawk op
                    lowered by its "gpu" rule (hawk/passes/lower_gpu.py, lower_gpu_tree.py, lower/block.py)

`lower-host-lanes` and `lower-gpu-lanes{...}` (the names the target pipelines, `Kernel.mlir(after=...)` and
`$HAWK_DUMP_DIR` use) are pass groups: chunk-form, build-finish then lower-chunk-loop; gpu-form,
chunk-form{pairs=false}, build-finish{target=gpu} then map-lanes-gpu. The layout moves from the kernel func
onto the module in build-finish and the lowerings (plan.py `take_layout`), where it stays for the runtime once
the kernel func is gone.
"""

from __future__ import annotations

import dataclasses

from mlir import ir

from hawk.passes.base import ModulePass, PassGroup, kernel_funcs, register
from hawk.passes.plan import func_layout, take_layout, types_of


@register
@dataclasses.dataclass
class GpuForm(ModulePass):
    name = "gpu-form"
    summary = ("write hawk.gpu_form on each planned kernel func: the GPU form its layout takes (tree, slots, "
               "chunks or blocks)")

    def apply(self, module: ir.Module) -> None:
        from hawk.passes.lower_gpu import write_form

        for func in kernel_funcs(module):
            write_form(func, func_layout(func), types_of(func)[0])


@register
@dataclasses.dataclass
class ChunkForm(ModulePass):
    name = "chunk-form"
    summary = ("write hawk.chunk_form on each planned kernel func: the loop shape a chunk of lanes runs in (flat, "
               "blocked, nested, column, rows or scan); GPU funcs only in the chunks form")

    pairs: bool = True  # ordered sums over every lane keep two-float chains (the host's lowering)
    wide: bool = True  # payloads of more than WIDE_PAYLOAD components take component loops

    def apply(self, module: ir.Module) -> None:
        from hawk.passes import chunk_form
        from hawk.passes.lower_gpu import FORM

        for func in kernel_funcs(module):
            layout = func_layout(func)
            attrs = func.operation.attributes
            if FORM in attrs and ir.StringAttr(attrs[FORM]).value != "chunks":
                continue  # a GPU form without a chunk loop (tree, slots, blocks)
            chunk_form.write(func, layout, self.pairs, self.wide)


@register
@dataclasses.dataclass
class BuildFinish(ModulePass):
    name = "build-finish"
    summary = ("add @<k>_finish (host code for every target) from hawk.layout: chunk partials combined in chunk "
               "order, exact sums rounded, private copies, folds, scans, companions, means; the kernel func stays")
    choices = {"target": ("host", "gpu")}

    target: str = "host"  # gpu: every ordered term went to the exact accumulators (no two-float pairs)

    def apply(self, module: ir.Module) -> None:
        from hawk.passes.lower.finish import finish_func

        func, layout = take_layout(module, self.name)
        ftype, itypes = types_of(func)
        finish_func(module, layout, ftype, itypes, self.target)


@register
@dataclasses.dataclass
class LowerChunkLoop(ModulePass):
    name = "lower-chunk-loop"
    summary = ("the kernel func -> @<k>_lanes for the host: one chunk's lanes in the loop shape hawk.chunk_form "
               "names, each hawk op lowered by its rule, chunk partials into #scratch (scf, memref, arith, vector)")

    def apply(self, module: ir.Module) -> None:
        from hawk.passes.lower_host import lower_host

        func, layout = take_layout(module, self.name)
        ftype, itypes = types_of(func)
        lower_host(module, layout, ftype, itypes)


@register
@dataclasses.dataclass
class MapLanesGpu(ModulePass):
    name = "map-lanes-gpu"
    summary = ("the kernel func -> a gpu.module kernel in the form hawk.gpu_form names (tree, slots, chunks, "
               "blocks), each hawk op lowered by its gpu rule")
    choices = {"wide": ("false", "true", "tree")}

    subgroup: int = 0  # threads that shuffle registers (a warp, a wavefront); 0: shared memory only
    atomics: bool = False  # float atomic adds into global memory (plain scatters into large sinks)
    wide: str = "false"  # wide payloads through component loops: true, tree (that form only), false

    def apply(self, module: ir.Module) -> None:
        from hawk.passes.lower_gpu import lower_gpu, read_form

        func, layout = take_layout(module, self.name)
        ftype, itypes = types_of(func)
        wide = {"true": True, "false": False}.get(self.wide, self.wide)
        lower_gpu(module, layout, ftype, itypes, read_form(func, self.name), self.subgroup, self.atomics, wide)


@register
@dataclasses.dataclass
class LowerHostLanes(PassGroup):
    name = "lower-host-lanes"
    summary = "the host's lowering: chunk-form, build-finish{target=host}, then lower-chunk-loop"

    def passes(self) -> list[ModulePass]:
        return [ChunkForm(), BuildFinish("host"), LowerChunkLoop()]


@register
@dataclasses.dataclass
class LowerGpuLanes(PassGroup):
    name = "lower-gpu-lanes"
    summary = ("a GPU target's lowering: gpu-form, chunk-form{pairs=false}, build-finish{target=gpu}, then "
               "map-lanes-gpu with these options")
    choices = {"wide": ("false", "true", "tree")}

    subgroup: int = 0
    atomics: bool = False
    wide: str = "false"

    def passes(self) -> list[ModulePass]:
        chunks = ChunkForm(pairs=False, wide=self.wide == "true")  # (wide "tree": not in the chunks form)
        return [GpuForm(), chunks, BuildFinish("gpu"), MapLanesGpu(self.subgroup, self.atomics, self.wide)]
