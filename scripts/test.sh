#!/usr/bin/env bash
# Set up (if needed), then run the test suite. Arguments go to pytest: bash scripts/test.sh -x -k scatter
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
# one pytest-xdist worker per core, each test file on one worker (its module fixtures built once);
# HAWK_TEST_WORKERS=0 runs everything in this process
exec .venv/bin/python -m pytest -q -n "${HAWK_TEST_WORKERS:-auto}" --dist loadfile "$@"
