"""The torch.distributed fuzzer: the front-end fuzzer's kernels (tests/fuzz_kernels.py) on 20,000 lanes (3,000 rows of a
Grid) split unevenly over 4 gloo ranks (37 lanes or rows, then 40%, then all but one, then one), called through
`eagle.torch.wrap(kernel, group=...)`, every output that promises bits (tests/fuzz_threads.py `promised`) against the
one-process Plan.run's: a per-lane output (or a cell keeping the leading axis, a row max) the rank's own lanes, a cell
or sink the whole run's (tests/test_fuzz.py runs it). What the sharded path cannot run must be refused on every rank
alike, naming the kernel; anything else is a failure. The ranks hand the halves NaN-filled result buffers (`np.empty`
patched), so a buffer read before it is written shows.

    python tests/fuzz_ranks.py --seed 7 --start 0 --count 50 --dir /tmp/fz    # one JSON line per case
"""

from __future__ import annotations

import json
import os
import socket
import sys

import fuzz_kernels as fk
import numpy as np
from fuzz_sharded import LANE_PLANES, LANES, ROWS, mismatch, reference
from fuzz_threads import loose, near

RANKS = 4

__all__ = ["check_rank"]


def _cuts(n: int) -> list[int]:
    return [0, 37, int(n * 0.4), n - 1, n]


def _own_rows(plan, lane_dims: int) -> dict[str, int]:
    """The results that are each rank's own lanes, with how many trailing axes are lane axes: per-lane outputs
    (every lane axis), and cells keeping a leading block of axes (a row max: those axes), as the partition rule
    of eagle/distributed/jit_shard.py names them."""
    from eagle.distributed.jit_shard import _lane_outputs, _leading_kept

    return {**dict.fromkeys(_lane_outputs(plan), lane_dims), **_leading_kept(plan)}


def own_lanes(a: np.ndarray, axes: int, lo: int, hi: int) -> np.ndarray:
    """Lanes [lo, hi) of the leading lane axis of `a`, whose last `axes` axes are lane axes (payload axes first)."""
    return np.ascontiguousarray(a[(slice(None),) * (a.ndim - axes) + (slice(lo, hi),)])


def rank_planes(planes: dict, dims: int, lo: int, hi: int) -> dict:
    """A rank's planes: its lanes [lo, hi) of each per-lane plane (`dims` lane axes), the others whole; the Grid's
    row count left out (each rank's rows come from its planes)."""
    return {k: own_lanes(v, dims, lo, hi) if k in LANE_PLANES else v for k, v in planes.items() if k != "row"}


def check_rank(c, workdir: str, rank: int, group) -> dict:
    """Case `c` on this rank: its share of the lanes through eagle.torch.wrap against Plan.run over all of them."""
    import torch

    import eagle
    import eagle.torch
    from eagle.bridge import keyed_outputs

    ref = reference(c, os.path.join(workdir, f"rank{rank}.{c.name}.py"))
    if isinstance(ref, dict):
        return ref
    kernel, plan, planes, keep, want = ref
    out = fk.record(c)
    n = ROWS if "row" in c.planes else LANES
    lo, hi = _cuts(n)[rank:rank + 2]
    dims = 2 if "row" in c.planes else 1
    args = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
            for k, v in rank_planes(fk.fresh(planes), dims, lo, hi).items()}
    for k in keyed_outputs(plan):  # written by key: every rank passes the whole array (zeros, as one device starts)
        args.setdefault(k, torch.zeros(np.shape(want[k]), dtype=torch.from_numpy(np.asarray(want[k])).dtype))
    try:
        got = fk.named(eagle.torch.wrap(kernel, group=group)(**args), c)
    except Exception as exc:
        return refused(c, exc)
    own = _own_rows(plan, dims)
    for name in sorted(keep | loose(c)):
        w = np.asarray(want[name])
        if name in own:  # (payload axes first, then the lane axes: the rank's run of the leading one)
            w = own_lanes(w, own[name], lo, hi)
        why = (mismatch if name in keep else near)(name, got[name].numpy() if hasattr(got[name], "numpy")
                                                   else got[name], w, f"rank {rank} (lanes {lo}..{hi})")
        if why:
            return {**out, "status": "fail", "why": why}
    return {**out, "status": "ok", "why": f"{sorted(keep)} the same bits, {sorted(loose(c))} to rounding on {RANKS} "
                                          "uneven ranks"}


def refused(c, exc: BaseException) -> dict:
    """A rank's record for an exception of a sharded call: a refusal naming the kernel, or a failure."""
    import eagle

    if isinstance(exc, eagle.InputError):
        if c.name in str(exc) and fk.known_refusal(exc):
            return {**fk.record(c), "status": "refused", "why": str(exc)[:300]}
        return {**fk.record(c), "status": "fail", "why": f"InputError not naming the kernel or for no known reason: "
                                                        f"{exc}"}
    return fk.raised(c, exc)


def _rank(rank: int, port: int, a, check=None) -> None:
    import torch.distributed as dist

    check = check or check_rank

    real = np.empty

    def empty(shape, dtype=float, *args, **kwargs):  # result buffers that hold NaN, not zeros by luck
        arr = real(shape, dtype, *args, **kwargs)
        if arr.dtype.kind == "f":
            arr.fill(np.nan)
        return arr

    np.empty = empty
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=RANKS)
    with open(os.path.join(a.logs, f"rank{rank}.jsonl"), "w") as log:
        for i in range(a.start, a.start + a.count):
            print(json.dumps({"begin": i}), file=log, flush=True)
            c = fk.case(a.seed, i)
            if c.expect != "match":
                rec = {**fk.record(c), "status": "skipped", "why": f"expects {c.expect}"}
            else:
                with np.errstate(all="ignore"):
                    rec = check(c, a.dir, rank, dist.group.WORLD)
            print(json.dumps(rec), file=log, flush=True)
            dist.barrier()
    dist.destroy_process_group()


def main(argv=None, check=None, doc: str = __doc__) -> int:
    """Spawn the ranks over the case range, then print one line per case: a case fails if any rank failed it.
    `check(case, workdir, rank, group)`: what each rank does with a case (check_rank by default)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
    a = fk.runner_args(doc).parse_args(argv)
    import tempfile

    import torch.multiprocessing as mp

    a.dir = a.dir or tempfile.mkdtemp(prefix="hawk_fuzz_")
    a.logs = os.path.join(a.dir, f"ranks-{a.seed}-{a.start}-{os.getpid()}")  # (runners may share a.dir)
    os.makedirs(a.logs, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    died = None
    try:
        mp.spawn(_rank, args=(port, a, check), nprocs=RANKS, join=True)
    except Exception as exc:  # a rank died (or raised outside a case): reported at the case it had begun
        died = f"{type(exc).__name__}: {str(exc)[-600:]}"
    recs: dict[int, list[dict]] = {}
    begun = None
    for r in range(RANKS):
        path = os.path.join(a.logs, f"rank{r}.jsonl")
        for line in open(path) if os.path.exists(path) else ():
            rec = json.loads(line)
            if "begin" in rec:
                begun = rec["begin"] if begun is None or died is None else max(begun, rec["begin"])
                continue
            recs.setdefault(rec["index"], []).append(rec)
    for i in range(a.start, a.start + a.count):
        print(json.dumps({"begin": i}), flush=True)
        got = recs.get(i, [])
        bad = [r for r in got if r["status"] == "fail"]
        if bad:
            print(json.dumps(bad[0]), flush=True)
        elif len(got) == RANKS and len({r["status"] for r in got}) == 1:
            print(json.dumps(got[0]), flush=True)
        elif len(got) == RANKS:
            print(json.dumps({**got[0], "status": "fail", "why": f"ranks disagree: {[r['status'] for r in got]}"}),
                  flush=True)
        else:  # the ranks stopped before this case
            print(json.dumps({"index": i, "status": "fail", "what": "ranks", "tags": [],
                              "why": f"not every rank reported it ({died or 'no error'})"}), flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
