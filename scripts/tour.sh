#!/usr/bin/env bash
# Set up (if needed), then run the tour: a few kernels, each result printed next to NumPy's.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
exec .venv/bin/python tour.py "$@"
