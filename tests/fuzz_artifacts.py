"""The artifact fuzzer: the front-end fuzzer's kernels (tests/fuzz_kernels.py) published with
`hawk.artifact.build_bundle`, loaded back with `hawk.load` and run with `hawk.run`, each result against
`eagle.deploy(kernel, target=...).run(...)` on the same target: bit for bit where the result promises bits
(tests/fuzz_threads.py `promised`), else against the case's NumPy reference within its bound as the front-end
fuzzer checks, since an artifact builds every `policy="auto"` sum over all lanes as "ordered" (docs/artifacts.md).
tests/test_fuzz.py runs it."""

from __future__ import annotations

import os
import sys

import fuzz_kernels as fk
import numpy as np
from fuzz_threads import promised

__all__ = ["check_artifact"]


def check_artifact(c, workdir: str, target: str = "host") -> dict:
    """Publish case `c`, load it, run it; compare every result with Plan.run's bits."""
    import eagle
    import hawk
    import hawk.artifact

    out = fk.record(c)
    try:
        kernel = fk.load_kernel(c, os.path.join(workdir, f"{c.name}.py"))
        want = fk.named(eagle.deploy(kernel, target=target).run(**fk.fresh(c.planes)), c)
        where = os.path.join(workdir, f"art_{c.name}")
        idx = {n: str(c.planes[n].dtype) for n in ("k", "kb", "ks") if n in c.planes}  # (the planes' own widths)
        hawk.artifact.build_bundle([kernel], where, targets=(target,), index_dtypes=idx)
        got = fk.named(hawk.run(hawk.load(where, c.name, target=target), **fk.fresh(c.planes)), c)
    except Exception as exc:  # a refusal by name, or a bug
        return fk.raised(c, exc, (eagle.InputError,))
    if sorted(got) != sorted(want):
        return {**out, "status": "fail", "why": f"results {sorted(got)}, Plan.run's {sorted(want)}"}
    bits = promised(c)
    for k in want:
        a, b = np.asarray(want[k]), np.asarray(got[k])
        if a.shape != b.shape or a.dtype != b.dtype or (k in bits and a.tobytes() != b.tobytes()):
            return {**out, "status": "fail", "why": f"'{k}' differs from Plan.run's ({b.dtype}{b.shape} vs "
                                                    f"{a.dtype}{a.shape})"}
        val, mag, fuzzy = c.want[k]  # (an "auto" sum is ordered in an artifact: NumPy's reference, within bounds)
        why = None if k in bits else fk.close(b, np.asarray(val, dtype=np.float64), mag, fuzzy)
        if why:
            return {**out, "status": "fail", "why": f"'{k}' against NumPy: {why}"}
    return {**out, "status": "ok", "why": f"{sorted(bits)} bit for bit, the rest within the reference's bound"}


if __name__ == "__main__":
    sys.exit(fk.run_cases(check_artifact, __doc__))
