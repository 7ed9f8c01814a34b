"""Write the final lowered IR of many kernels, one file per kernel, variant and stage, to compare two trees.

A refactoring of the passes (hawk/passes/) that must not change the code any target gets is checked by running
this script on the tree before and after the change and diffing the two folders:

    .venv/bin/python scripts/lowering_corpus.py /tmp/before            # the tree the script sits in
    PYTHONPATH=/tmp/old_tree .venv/bin/python /tmp/old_tree/scripts/lowering_corpus.py /tmp/before
    diff -r /tmp/before /tmp/after

The kernels: tests/ir/cache_kernels.py, tests/ir/make_inputs.py, the kernels defined at module level in
tests/test_*.py (modules that cannot be imported here are skipped and listed) and `--fuzz N` cases of the fuzz
generator (tests/fuzz_kernels.py, seed 7). The variants: host (float64, float32, auto sums ordered as artifact
builds make them) and the GPU targets' pipelines with each target's default options (nvvm also in float32,
spirv also with subgroup=8). A variant a kernel refuses writes the error's first line instead, so refusals are
compared too. Only the compiler's passes run: nothing is built, launched or cached here.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = ("test_bridge_", "test_dist_", "test_notebooks", "test_cli", "test_bench_smoke", "test_card",
        "test_gpu_check", "test_ci_machine")
VARIANTS = ("host", "host32", "hostord", "nvvm", "nvvm32", "rocdl", "spirv", "spirv8")


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


_SEEN: set[int] = set()


def _kernels_of(mod, origin: str) -> list[tuple[str, object]]:
    """The kernels a module defines or imports (each kernel object once over all modules)."""
    from hawk.compiler import Kernel

    out = []
    for value in vars(mod).values():
        if isinstance(value, Kernel) and id(value) not in _SEEN:
            _SEEN.add(id(value))
            out.append((origin, value))
    return out


def collect(fuzz: int, only: str | None) -> tuple[list[tuple[str, object]], list[str]]:
    """(origin, kernel) pairs in a fixed order, and the modules skipped with why."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    found, skipped = [], []
    files = [ROOT / "tests/ir/cache_kernels.py", ROOT / "tests/ir/make_inputs.py"]
    files += sorted(p for p in (ROOT / "tests").glob("test_*.py") if not p.name.startswith(SKIP))
    for path in files:
        if only and only not in path.stem:
            continue
        origin = path.stem
        try:
            mod = _import(path, f"_corpus_{origin}")
        except BaseException as exc:  # noqa: BLE001  (a module that needs what this machine lacks)
            skipped.append(f"{origin}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            continue
        found += _kernels_of(mod, origin)
    if fuzz:
        import tempfile

        from fuzz_kernels import case

        tmp = Path(tempfile.mkdtemp(prefix="hawk-corpus-"))
        for i in range(fuzz):
            c = case(7, i)
            if c.expect != "match":
                continue
            path = tmp / f"{c.name}.py"
            path.write_text(c.source)
            try:
                mod = _import(path, f"_corpus_fuzz_{i}")
            except BaseException as exc:  # noqa: BLE001
                skipped.append(f"fuzz {i}: {type(exc).__name__}")
                continue
            found += _kernels_of(mod, f"fuzz{i:03d}")
    return found, skipped


def lower(kernel, variant: str) -> list[str]:
    """The final lowered text of each stage of `kernel` for `variant`."""
    from hawk.targets import gpu_target

    dtype = "float32" if variant.endswith("32") else "float64"
    spec = kernel.spec_for(dtype, {}, "ordered" if variant == "hostord" else "fast")
    n = len(kernel.stages(spec))
    out = []
    for k in range(n):
        if variant.startswith("host"):
            low = kernel.lowered(spec, k)
            out.append(low.llvm_ir)
            continue
        name = variant.rstrip("0123456789") if variant != "spirv8" else "spirv"
        t = gpu_target(name, subgroup=8) if variant == "spirv8" else gpu_target(name)
        low = kernel.lowered_gpu(spec, k, t.subgroup, t.float_atomics, t.wide_loops)
        out.append(low.gpu_module + "\n// ---- finish\n" + low.finish_llvm_ir)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="folder to write (created)")
    p.add_argument("--fuzz", type=int, default=60, help="fuzz cases to add (seed 7, cases 0..N-1)")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--only", help="only test modules whose name contains this")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    kernels, skipped = collect(args.fuzz, args.only)
    import hawk

    print(f"hawk from {Path(hawk.__file__).parent}; {len(kernels)} kernels; skipped: {skipped}", flush=True)
    variants = args.variants.split(",")
    errors = 0
    for origin, kernel in kernels:
        for v in variants:
            try:
                texts = lower(kernel, v)
            except Exception as exc:  # noqa: BLE001  (a refusal is part of what is compared)
                first = str(exc).splitlines()[0] if str(exc) else ""
                texts = [f"ERROR {type(exc).__name__}: {first}\n"]
                errors += 1
            for k, text in enumerate(texts):
                (out / f"{origin}.{kernel.name}.{v}.s{k}.mlir").write_text(text)
    print(f"{len(kernels)} kernels x {len(variants)} variants in {time.time() - t0:.0f} s ({errors} refused)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
