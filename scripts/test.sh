#!/usr/bin/env bash
# Set up (if needed), then run the test suite. Arguments go to pytest: bash scripts/test.sh -x -k scatter
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
