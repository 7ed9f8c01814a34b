"""The split fuzzer: the front-end fuzzer's kernels (tests/fuzz_kernels.py) on 20,011 lanes (3,001 rows of a Grid),
run whole on one thread and split into many chunks on several threads, and every output that promises bits
compared bit for bit (tests/test_fuzz.py runs it).

What promises bits whatever the thread count and chunking (docs/semantics.md): per-lane outputs computed without
a non-ordered total, `hawk.max`/`hawk.min` and ordered sums and means, scatters with `policy="ordered"` or `=`
(the last writer in lane order), scans (fixed blocks from lane 0). Sums and scatters under `auto`, `compensated`
and `plain` promise a bound, not bits: where nothing else depends on them they are compared to rounding (`loose`),
else left out. A share of the cases (F32_SHARE) runs on float32 planes, the kernel's float32 specialisation. Each
run's chunks are read back (`plan.last_chunks`); a case whose split runs did not really split is reported as
"unsplit", not as passed.

    python tests/fuzz_threads.py --seed 7 --start 0 --count 50 --dir /tmp/fz    # one JSON line per case
"""

from __future__ import annotations

import os
import re
import sys

import fuzz_kernels as fk
import numpy as np
from fuzz_grammar import BINS, COLS, TABLE

LANES, ROWS = 20011, 3001  # a plain kernel's lanes (not a multiple of a 1024-lane block); a Grid kernel's rows
SPLITS = ((1, None), (3, 64), (2, 1000))  # (threads, min_chunk): whole, then two other splits
F32_SHARE = 0.35  # cases run on float32 planes (the kernel's float32 specialisation; the grammar's NumPy values are
# float64, which the split runs need not match: they are compared with each other)

__all__ = ["check_split", "promised"]


def _sums_and_scatter(src: str):
    """A case's sums (each with the rest of its line: its policy=) and its first scatter into `bins` (a match: the
    call's arguments, then `+=` or `=`), or None."""
    return re.findall(r"hawk\.(?:sum|mean)\(.*", src), re.search(r"hawk\.scatter\(bins(.*?)\)\[.*?\] (\+=|=)", src)


def promised(c) -> set[str]:
    """The outputs of case `c` whose bits must not depend on the split."""
    sums, scatter = _sums_and_scatter(c.source)
    loose_sum = any('policy="ordered"' not in line for line in sums)
    out = set()
    for name in c.want:
        if name == "result":
            if not (c.what.startswith("staged") and loose_sum):
                out.add(name)
        elif name == "total":
            if not sums or not loose_sum:
                out.add(name)
        elif name == "bins" and scatter is not None:
            if scatter.group(2) == "=" or 'policy="ordered"' in scatter.group(1):
                out.add(name)
        elif name in ("out", "io", "ko"):  # (io: an integer output, exact; ko: written by key, one lane a position)
            out.add(name)
    return out


def loose(c) -> set[str]:
    """The outputs of case `c` that a split may round differently but must not otherwise change (a total or a
    sink added into with a policy that promises no bits, where nothing else in the kernel is such a sum, so no
    comparison or key can turn a rounding into a jump): compared to rounding (`near`)."""
    for v in c.planes.values():  # (huge values cancel in one order and not in another: nothing to compare)
        if isinstance(v, np.ndarray) and v.dtype.kind == "f" and not np.all(np.abs(v) <= 1e6):
            return set()
    sums, scatter = _sums_and_scatter(c.source)
    out = set()
    if "total" in c.want and len(sums) == 1 and 'policy="ordered"' not in sums[0] and "hawk.reduce" not in c.source:
        out.add("total")
    if "bins" in c.want and scatter is not None and scatter.group(2) == "+=" and not sums and \
            'policy="ordered"' not in scatter.group(1):
        out.add("bins")
    return out - promised(c)


def near(name: str, got, want, split: str) -> str | None:
    """Why output `name` of a split run differs from the one-device run's by more than rounding, if it does: NaN
    and infinities where it has them, finite values within 1e-7 (float32: 1e-4) of the output's largest finite
    magnitude (a term dropped or added twice moves a value by far more)."""
    rel = 1e-4 if np.asarray(want).dtype == np.float32 else 1e-7
    g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if g.shape == w.shape:
        fin = np.isfinite(w)
        scale = float(np.max(np.abs(w[fin]), initial=0.0)) + 1e-300
        same = np.where(fin, np.abs(g - w) <= rel * scale, (g == w) | (np.isnan(g) & np.isnan(w)))
        if np.all(same):
            return None
    return (f"{name}: {split} give {g.shape} {g.reshape(-1)[:3].tolist()}..., one device {w.shape} "
            f"{w.reshape(-1)[:3].tolist()}... (beyond rounding)")


def big_planes(c, rng) -> dict:
    """Planes like the case's, on LANES lanes (ROWS rows of a Grid); Tables, Params and sinks as they were."""
    grid = "row" in c.planes
    shape = (ROWS, COLS) if grid else (LANES,)
    lanes = int(np.prod(shape))
    x = rng.normal(size=shape) * 2.0
    wild = c.planes["x"][~np.isfinite(c.planes["x"]) | (np.abs(c.planes["x"]) > 1e6)]
    x.reshape(-1)[rng.integers(lanes, size=wild.size)] = wild  # the case's special values, elsewhere
    d = {"x": x, "y": rng.uniform(-3.0, 3.0, size=shape), "k": rng.integers(0, lanes, size=shape).astype(np.int64),
         "kb": rng.integers(0, BINS, size=shape).astype(np.int32), "p": c.planes["p"],
         "v": rng.normal(size=(3, *shape)), "tb": rng.normal(size=TABLE)}
    if "bins" in c.planes:
        d["bins"] = np.array(c.planes["bins"])
    if "ks" in c.planes:  # (a Sorted[Index] plane: long runs of each key on these lanes, -1 first)
        d["ks"] = np.sort(rng.integers(-1, BINS, size=lanes)).reshape(shape)
    if "out" in c.planes:
        d["out"] = rng.normal(size=shape)
    if grid:
        d["row"] = ROWS
    return d


def _bits(a) -> bytes:
    return np.ascontiguousarray(np.asarray(a)).tobytes()


def check_split(c, workdir: str, target: str = "host") -> dict:
    """Run case `c` whole and split; compare the promised outputs' bits, and the loose ones to rounding."""
    import eagle

    out = fk.record(c)
    keep = promised(c) if "p" in c.planes else set()  # (not the Vector[1024] cases)
    lax = loose(c) if "p" in c.planes else set()
    if not keep and not lax:
        return {**out, "status": "skipped", "why": "no bits promised, nothing to compare to rounding"}
    planes = big_planes(c, np.random.default_rng([c.seed, c.index, 11]))
    narrow = np.random.default_rng([c.seed, c.index, 13]).random() < F32_SHARE
    if narrow:  # every float plane and sink in float32: the kernel compiled for float32, split the same way
        planes = {k: v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
                  for k, v in planes.items()}
    runs, chunks = [], []
    try:
        kernel = fk.load_kernel(c, os.path.join(workdir, f"{c.name}.py"))
        for threads, min_chunk in SPLITS:
            plan = eagle.deploy(kernel, target=target, threads=threads, min_chunk=min_chunk)
            runs.append(fk.named(plan.run(**fk.fresh(planes)), c))
            chunks.append(tuple(plan.last_chunks))
    except eagle.InputError as exc:  # keys outside the sink on these planes: refused by name, as on the case's
        if "'bins'" in str(exc) and c.name in str(exc):
            return {**out, "status": "skipped", "why": "key refused"}
        return {**out, "status": "fail", "why": f"InputError: {exc}"}
    except Exception as exc:  # anything else is a bug (a KernelError too: the case compiles unsplit)
        return fk.raised(c, exc)
    for name in sorted(keep):
        for (threads, min_chunk), run, ch in zip(SPLITS[1:], runs[1:], chunks[1:], strict=True):
            if _bits(run[name]) != _bits(runs[0][name]):
                a, b = np.asarray(runs[0][name]).reshape(-1), np.asarray(run[name]).reshape(-1)
                where = "shapes differ" if a.shape != b.shape else "at " + str(np.flatnonzero(
                    (a.view(np.uint8).reshape(a.size, -1) != b.view(np.uint8).reshape(b.size, -1)).any(1))[:3])
                return {**out, "status": "fail",
                        "why": f"{name}: threads={threads} min_chunk={min_chunk} (chunks {ch}) differs from one "
                               f"thread (chunks {chunks[0]}) {where}: {b[:3].tolist()}... vs {a[:3].tolist()}..."}
    for name in sorted(lax):
        for (threads, min_chunk), run in zip(SPLITS[1:], runs[1:], strict=True):
            why = near(name, run[name], runs[0][name], f"threads={threads} min_chunk={min_chunk}")
            if why is not None:
                return {**out, "status": "fail", "why": why}
    if max(max(ch, default=1) for ch in chunks[1:]) < 2:
        return {**out, "status": "unsplit", "why": f"chunks {chunks}"}
    return {**out, "status": "ok", "why": f"{sorted(keep)} the same bits, {sorted(lax)} to rounding; chunks {chunks}"
            + ("; float32" if narrow else "")}


if __name__ == "__main__":
    sys.exit(fk.run_cases(check_split, __doc__))
