"""Run in a fresh process by the suite: import time, then the time from eagle.deploy to the first result of a
small kernel. Run first with `--prime` on an empty HAWK_CACHE_DIR (another kernel: eagle's native runtime is built,
and the bytecode of every hawk and eagle module written, once per machine as `pip install` does), then without:
the kernel's cold compile;
then again with the same directory: a warm start from the disk cache. Each also times the first result of a
large kernel (ordered float32 vector and matrix sums: cold, then warm). Prints one JSON line; "bytecode" says
whether Python keeps compiled bytecode: with PYTHONDONTWRITEBYTECODE=1 every start compiles hawk's and eagle's
sources again, which dominates a warm start (the suite clears it and points PYTHONPYCACHEPREFIX at a temporary
folder, as an installed package has its bytecode)."""

from __future__ import annotations

import time

_t0 = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

import eagle  # noqa: E402
import hawk  # noqa: E402
from hawk import Matrix, Mutable, Scalar, Vector  # noqa: E402


@hawk.kernel
def sum_of_squares(x: Scalar) -> Scalar:
    return hawk.sum(x * x)


@hawk.kernel
def ordered_payloads(v: Vector[3], mm: Matrix[2, 2], tot: Mutable[Vector[3]], avg: Mutable[Vector[3]],
                     whole: Mutable[Matrix[2, 2]]):
    """A large library: ordered sums and a mean of vector and matrix payloads (chains, pairs, exact
    accumulators per component), whose float32 build once took over a minute."""
    tot = hawk.sum(v, policy="ordered")
    avg = hawk.mean(v, policy="ordered")
    whole = hawk.sum(mm, policy="ordered")


@hawk.kernel
def primer(x: Scalar) -> Scalar:
    return x * 2.0


def prime() -> None:
    """Another kernel's first run, timed from the process start (imports included): eagle's native runtime
    built into the cache; then the bytecode of every hawk and eagle module written (untimed), as an install
    byte-compiles a package. Without that, a cold compile would also compile the sources of the modules the
    primer did not import (the reduction lowerings: about 100 ms here), a cost a machine pays once."""
    ok = float(np.asarray(eagle.deploy(primer).run(x=np.ones(3)))[0]) == 2.0
    took = time.perf_counter() - _t0
    if not sys.dont_write_bytecode:
        import compileall
        from pathlib import Path

        for package in (hawk, eagle):
            ok &= bool(compileall.compile_dir(Path(package.__file__).parent, quiet=1))
    print(json.dumps({"prime_s": took, "ok": ok,
                      "bytecode": not sys.dont_write_bytecode}))


def main() -> None:
    t_import = time.perf_counter() - _t0
    x = np.arange(1000, dtype=np.float64)
    t0 = time.perf_counter()
    got = float(np.asarray(eagle.deploy(sum_of_squares).run(x=x))[0])
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    eagle.deploy(sum_of_squares).run(x=x)
    t_again = time.perf_counter() - t0
    ok = got == float(np.sum(x * x))
    v, mm = np.ones((3, 1000), np.float32), np.ones((4, 1000), np.float32)
    t0 = time.perf_counter()
    out = eagle.deploy(ordered_payloads).run(v=v, mm=mm)
    t_large = time.perf_counter() - t0
    ok &= all(float(np.asarray(a)[0]) == (1.0 if k.startswith("avg") else 1000.0) for k, a in out.items())
    print(json.dumps({"import_s": t_import, "first_result_s": t_first, "next_plan_s": t_again,
                      "large_first_result_s": t_large, "ok": ok,
                      "bytecode": not sys.dont_write_bytecode}))


if __name__ == "__main__":
    prime() if "--prime" in sys.argv[1:] else main()
