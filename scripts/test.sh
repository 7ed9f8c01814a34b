#!/usr/bin/env bash
# Set up (if needed), then run the test suite. Arguments go to pytest: bash scripts/test.sh -x -k scatter
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
# The suite starts a few hundred Python processes (xdist workers, fuzz runners, torch ranks, JAX runs, notebook
# kernels, GPU build workers). With PYTHONDONTWRITEBYTECODE set (some images set it) each of them compiled hawk's,
# eagle's and the tests' sources again: about 16% of the CPU time of the tests that start processes. Bytecode
# goes to the usual __pycache__ folders (ignored by git).
unset PYTHONDONTWRITEBYTECODE
# XLA compiles the tests' JAX programs (jax.grad references, the bridges' glue around hawk's calls) with its LLVM
# back end at level 0: the JAX-heavy tests spent a third of their CPU time in XLA's optimiser (warm hawk cache:
# 210 -> 145 s). hawk's own bits do not depend on it; XLA's transcendental functions may differ in the last bit
# between its levels, and the suite's comparisons with JAX (within tolerances) hold at both.
export XLA_FLAGS="--xla_backend_optimization_level=0${XLA_FLAGS:+ $XLA_FLAGS}"
# one pytest-xdist worker per core, each test file on one worker (its module fixtures built once);
# HAWK_TEST_WORKERS=0 runs everything in this process. (One worker more than cores, tried in stop 61 to fill the
# tenth of the time the CPU waits on started processes, took 23% more CPU time and 19% longer on two cores.)
exec .venv/bin/python -m pytest -q -n "${HAWK_TEST_WORKERS:-auto}" --dist loadfile "$@"
