"""The size of a stage's lowered code, a guard for build time (which grows with it; no timed test here).

The exact deposit of policy="ordered" is about 45 ops (three deposits for a float32 accumulator fed float64
values), and the rare paths that call it (a chunk's pairs at its end, a block's parts when its pairs lose a bit, a
group's spilled lanes) once emitted one unrolled copy per vector entry, component and call: an ordered float32
Vector[3] and Matrix[2, 2] kernel lowered to 163,000 lines of LLVM-dialect IR and took 77 s to build. Those paths
now park their values in a small buffer and deposit in a loop (ordered_chains._deposit_wide, scatters.spill_lanes,
scatters.add_each). The bounds are about twice today's sizes: a failure means a path is unrolled again.
"""

import pytest
from test_exact_ordered import xo_payload
from test_ordered_kept_nested import xn_vec
from test_sorted_ordered_runs import so_run

CASES = [  # (kernel, dtype, most lines of the lowered stage; 1b3043c had 34225, 163547, 14672, 6888)
    (xo_payload, "float64", 14_000),
    (xo_payload, "float32", 24_000),
    (xn_vec, "float32", 8_500),
    (so_run, "float32", 11_500),
]


@pytest.mark.parametrize("kernel, dtype, most", CASES, ids=lambda c: getattr(c, "name", str(c)))
def test_ordered_rare_paths_are_loops_not_unrolled_copies(kernel, dtype, most):
    lowered = kernel.lowered(kernel.spec_for(dtype, {}), 0)
    lines = len(lowered.llvm_ir.splitlines())
    assert lines <= most, (f"{kernel.name} ({dtype}) lowers to {lines} lines of LLVM-dialect IR (at most {most}): "
                           "a rare path is emitted as unrolled copies again")
