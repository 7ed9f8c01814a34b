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
# one pytest-xdist worker per core and one more, each test file on one worker (its module fixtures built once):
# the suite's CPU was idle a tenth of the time with one per core (workers waiting on the processes they start:
# torch ranks, JAX runs, notebook kernels); HAWK_TEST_WORKERS=0 runs everything in this process
workers="${HAWK_TEST_WORKERS:-$(( $(nproc) + 1 ))}"
exec .venv/bin/python -m pytest -q -n "$workers" --dist loadfile "$@"
