"""n-D vector ops (multi-reductions, transposes, n-D from_elements) lowered inside gpu.func kernels.

The host pipeline lowers them on func.func; the GPU conversions need them gone first, and the pass manager
cannot nest into gpu.func from Python, so a transform-dialect sequence does it for every GPU target.
"""

from __future__ import annotations

VECTOR_LOWERING = """
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["gpu.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %f {
      transform.apply_patterns.vector.lower_multi_reduction lowering_strategy = "innerparallel"
    } : !transform.any_op
    transform.apply_patterns to %f {
      transform.apply_patterns.vector.lower_transpose
      transform.apply_patterns.vector.lower_broadcast
      transform.apply_patterns.vector.lower_shape_cast
      transform.apply_patterns.vector.unroll_from_elements
      transform.apply_patterns.vector.unroll_to_elements
    } : !transform.any_op
    transform.yield
  }
}
"""


def lower_vectors(module) -> None:
    """Lower the n-D vector ops of every gpu.func in `module` (an ir.Module) to what the GPU conversions take."""
    from mlir import ir
    from mlir.dialects.transform import interpreter

    seq = ir.Module.parse(VECTOR_LOWERING)
    interpreter.apply_named_sequence(module.operation, seq.body.operations[0], seq.operation)
