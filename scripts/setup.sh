#!/usr/bin/env bash
# Set up hawk/eagle on a fresh Debian/Ubuntu machine; safe to run again (fast when nothing changed).
#
#   1. system packages (apt-get, only when something is missing),
#   2. a virtual environment in .venv (Python >= 3.11),
#   3. `pip install -e '.[test,gpu,notebooks]'` (the suite executes notebooks/), skipped while .venv's marker
#      matches the hash of pyproject.toml.
#
# Environment: PYTHON=/path/to/python3.x picks the interpreter for a new .venv.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

say() { printf 'setup: %s\n' "$*" >&2; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# One setup at a time per checkout (tour.sh and test.sh may start together).
if command -v flock >/dev/null 2>&1; then
    lock="${TMPDIR:-/tmp}/hawk-eagle-setup.$(id -u).$(printf '%s' "$root" | cksum | cut -d' ' -f1).lock"
    exec 9>"$lock"
    flock 9
fi

# ---------------------------------------------------------------------------------------------------------
# Debian packages.
# APT_PACKAGES: packages every machine needs, checked with dpkg (apt-get runs only when one is missing).
# The GPU toolchains the tests use without a GPU:
#   llvm-22 lld-22 rocm-device-libs   AMD code objects (libLLVM.so.22.1 in process, llvm-link-22, ld.lld-22;
#                                     ockl/ocml bitcode)
#   spirv-tools                       spirv-val
#   mesa-vulkan-drivers libvulkan1    lavapipe: runs the SPIR-V target on the CPU
# (ptxas comes from the pip extra `gpu`: nvidia-cuda-nvcc-cu12.)
APT_PACKAGES=(llvm-22 lld-22 rocm-device-libs spirv-tools mesa-vulkan-drivers libvulkan1)
# A C compiler: build-essential, installed only when `cc` is missing.
# ---------------------------------------------------------------------------------------------------------

missing=()
if ! command -v cc >/dev/null 2>&1; then
    missing+=(build-essential)
fi
if ((${#APT_PACKAGES[@]})) && command -v dpkg-query >/dev/null 2>&1; then
    for pkg in "${APT_PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$pkg")
        fi
    done
fi

apt_install() {
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then sudo=(sudo -n); fi
    say "installing Debian packages: $*"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

need_packages() {
    # $@: Debian packages that are missing; install them or explain how.
    if ! command -v apt-get >/dev/null 2>&1; then
        die "missing system packages: $*
  (no apt-get here: install their equivalents with your package manager)"
    fi
    if [[ $(id -u) -eq 0 ]] || { command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; }; then
        apt_install "$@"
    else
        die "missing system packages: $*
  install them as root, then run this script again:
    sudo apt-get update && sudo apt-get install -y --no-install-recommends $*"
    fi
}

if ((${#missing[@]})); then
    need_packages "${missing[@]}"
fi

# ---------------------------------------------------------------------------------------------------------
# Python >= 3.11 and .venv.
# ---------------------------------------------------------------------------------------------------------

py_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; }

venv=.venv
if [[ -x $venv/bin/python ]] && ! py_ok "$venv/bin/python"; then
    say "$venv uses a Python older than 3.11 (or a broken one): recreating it"
    rm -rf "$venv"
fi

if [[ ! -x $venv/bin/python ]]; then
    python=""
    if [[ -n ${PYTHON:-} ]] && ! py_ok "$PYTHON"; then
        die "PYTHON=$PYTHON is not a working Python >= 3.11"
    fi
    for cand in ${PYTHON:+"$PYTHON"} python3.13 python3.12 python3.11 python3; do
        if command -v "$cand" >/dev/null 2>&1 && py_ok "$cand"; then
            python="$(command -v "$cand")"
            break
        fi
    done
    if [[ -z $python ]]; then
        found="$(command -v python3 >/dev/null 2>&1 && python3 --version 2>&1 || echo 'no python3')"
        die "hawk/eagle needs Python >= 3.11 (found: $found).
  Install one (Debian 12: apt-get install python3 python3-venv; Ubuntu 22.04: python3.11 python3.11-venv)
  or point PYTHON at it: PYTHON=/path/to/python3.11 bash scripts/setup.sh"
    fi
    if ! "$python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
        # Debian splits venv/ensurepip out of the interpreter package.
        ver="$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
        need_packages "python$ver-venv"
    fi
    say "creating $venv with $python ($("$python" --version 2>&1))"
    "$python" -m venv "$venv"
fi

# ---------------------------------------------------------------------------------------------------------
# pip install -e '.[test,gpu,notebooks]', skipped when the marker holds the current hash of pyproject.toml (and of
# the Python version and the list of top-level packages).
# ---------------------------------------------------------------------------------------------------------

marker="$venv/.hawk-eagle-installed"
want="$("$venv/bin/python" - <<'PY'
import hashlib, pathlib, sys
h = hashlib.sha256(pathlib.Path("pyproject.toml").read_bytes())
h.update(sys.version.encode())
# An editable install records which top-level folders are regular packages: redo it when that changes.
h.update(repr(sorted(str(p) for p in pathlib.Path(".").glob("*/__init__.py"))).encode())
print(h.hexdigest())
PY
)"

if [[ -f $marker && "$(cat "$marker")" == "$want" ]]; then
    exit 0
fi

say "installing hawk-eagle, its test and notebook tools and GPU toolchain wheels into $venv (pip install -e '.[test,gpu,notebooks,bridges]')"
rm -f "$marker"
export PIP_DISABLE_PIP_VERSION_CHECK=1
# (setuptools warns at every editable install that a folder named like the package shadows it: by design here)
PYTHONWARNINGS="ignore:Editable installation:UserWarning" "$venv/bin/python" -m pip install -q -e '.[test,gpu,notebooks,bridges]'
printf '%s\n' "$want" >"$marker"
say "done"
