#!/usr/bin/env bash
# Set up .venv (scripts/setup.sh), install the peers (pip install -e '.[bench]': JAX, torch==2.13.0, Numba, Warp,
# matplotlib) when they are missing, then run the benchmark suite. Arguments go to the suite:
#   bash scripts/bench.sh                 # the default suite, isolated: each implementation in its own process
#                                         # (1e5, 1e6, 1e7 lanes, float64 and float32; --budget 1800 s for the cases)
#   bash scripts/bench.sh --in-process    # the same, every implementation in the suite's process
#   bash scripts/bench.sh --quick         # 1e5 and 1e6 lanes, 3 repeats, 2 rounds
#   bash scripts/bench.sh --sizes 1e6 --ops sum,histogram --out /tmp/bench
# A peer that cannot be installed is skipped by the suite, which prints why.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

say() { printf 'bench: %s\n' "$*" >&2; }

bash scripts/setup.sh

py=.venv/bin/python
peers_ok() { "$py" -c 'import jax, torch, numba, warp, matplotlib' >/dev/null 2>&1; }

# Try the install once per version of pyproject.toml: a peer that cannot be had here is not retried every run.
marker=.venv/.hawk-eagle-bench
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if ! peers_ok && [[ ! -f $marker || "$(cat "$marker")" != "$want" ]]; then
    say "installing the peers into .venv (pip install -e '.[bench]'; torch is pinned to the CPU wheel 2.13.0)"
    export PIP_DISABLE_PIP_VERSION_CHECK=1
    if ! PYTHONWARNINGS="ignore:Editable installation:UserWarning" "$py" -m pip install -q -e '.[bench]'; then
        say "the bench extra did not install as a whole; trying each peer on its own"
        # one requirement per line, from [project.optional-dependencies] bench in pyproject.toml
        "$py" - <<'PY' | while IFS= read -r req; do "$py" -m pip install -q "$req" || say "could not install $req: the suite will skip it"; done
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["bench"]))
PY
    fi
    printf '%s\n' "$want" >"$marker"
fi

# Isolated unless the arguments choose the mode (see benchmarks/README.md, "Two modes").
mode=--isolated
for a in "$@"; do
    if [[ $a == --in-process || $a == --isolated ]]; then mode=; fi
done
exec "$py" -m benchmarks.suite ${mode:+"$mode"} "$@"
