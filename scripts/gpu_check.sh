#!/usr/bin/env bash
# The GPU check: build a bundle of nvvm artifacts here, run it on a machine with an NVIDIA GPU.
#
#   bash scripts/gpu_check.sh build [options]   # here (needs .venv with MLIR): writes build/gpu_check (< 64 MiB)
#   bash scripts/gpu_check.sh run   [options]   # on the GPU machine: Python 3.11+, NumPy, cuda-bindings; no MLIR
#
# The bundle holds, for the contract cases (reductions with each policy, where=, over=, Grid, vector and matrix
# cells, scatters with each policy, stores by key, a plain scatter into a sink large enough for float atomics,
# a histogram, .at gathers and stencils, split kernels, math) and the GPU
# benchmarks: the artifacts (host + nvvm builds), the contract inputs and the expected results computed here by the
# host build. `run` loads each artifact with hawk.load, runs it with target nvvm, compares (bitwise where the host's
# bits are promised, within a tolerance elsewhere), times it and prints a summary ending "N passed, N failed"
# within about 7 minutes (--budget, seconds, bounds the timing).
#
# On a lent GPU machine (the device tool), carry the bundle with the working tree:
#   run(command="bash scripts/gpu_check.sh run", carry=["build/gpu_check"], timeout_s=540)
#
# Options: build --out DIR --bench-lanes N --only CASE,... --no-bench --targets nvvm[,rocdl]
#          run   --bundle DIR --target nvvm|rocdl|host --budget S --only CASE,... --no-mlir --json FILE
# `run --target host` runs the same bundle on the CPU (tests/test_gpu_check.py does, so this stays working).
# PYTHON=/path/to/python picks the interpreter for `run` (default: .venv/bin/python if present, else python3).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

mode="${1:-}"
case "$mode" in
    build)
        shift
        [[ -x .venv/bin/python ]] || bash scripts/setup.sh
        exec .venv/bin/python scripts/gpu_check.py build "$@"
        ;;
    run)
        shift
        py="${PYTHON:-}"
        if [[ -z $py ]]; then
            if [[ -x .venv/bin/python ]]; then py=.venv/bin/python; else py=python3; fi
        fi
        export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
        exec "$py" scripts/gpu_check.py run "$@"
        ;;
    *)
        sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
