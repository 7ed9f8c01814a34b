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
# one pytest-xdist worker per core, each test file on one worker (its module fixtures built once);
# HAWK_TEST_WORKERS=0 runs everything in this process. (One worker more than cores, tried in stop 61 to fill the
# tenth of the time the CPU waits on started processes, took 23% more CPU time and 19% longer on two cores.)
exec .venv/bin/python -m pytest -q -n "${HAWK_TEST_WORKERS:-auto}" --dist loadfile "$@"
