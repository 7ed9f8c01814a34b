"""The torch.distributed gradient fuzzer: the front-end fuzzer's kernels (tests/fuzz_kernels.py) differentiated through
`eagle.torch.wrap(kernel, group=...)` over 4 gloo ranks of very uneven sizes (tests/fuzz_ranks.py's: 37 lanes or rows,
then 40%, then all but one, then one), every gradient against the one-process `plan.reverse`, bit for bit
(tests/test_fuzz.py runs it).

Each rank's loss is `sum(ct * output)` over the float outputs it holds (its own lanes of a per-lane output or of a
cell keeping the leading axis; a cell or sink whole, the same on every rank), so `backward()` hands the kernel's
backward each output's cotangent, as `plan.reverse(ct)` is given it over the whole run. A per-lane plane's gradient
must be the rank's own lanes of plan.reverse's, a Param's, a Table's and a sink's prior content's the whole run's (the
adjoint's exact sums across the group, the same on every rank). Planes as tests/fuzz_sharded.py's, their special
values replaced by ordinary draws. What a sharded gradient cannot take must be refused by name on every rank alike.

    python tests/fuzz_ranks_grads.py --seed 7 --start 0 --count 50 --dir /tmp/fz    # one JSON line per case
"""

from __future__ import annotations

import os
import sys

import fuzz_kernels as fk
import numpy as np
from fuzz_ranks import RANKS, _cuts, _own_rows, main, own_lanes, rank_planes, refused
from fuzz_sharded import LANE_PLANES, LANES, ROWS, mismatch
from fuzz_sharded_grads import reverse_reference

__all__ = ["check_rank_grads"]

def check_rank_grads(c, workdir: str, rank: int, group) -> dict:
    """Case `c` on this rank: backward() through its share of the lanes against plan.reverse over all of them."""
    import torch

    import eagle.torch

    ref = reverse_reference(c, os.path.join(workdir, f"rank{rank}.{c.name}.py"), 29)
    if isinstance(ref, dict):
        return ref
    kernel, plan, planes, cts, want, wrt = ref
    out = fk.record(c)
    n = ROWS if "row" in c.planes else LANES
    lo, hi = _cuts(n)[rank:rank + 2]
    dims = 2 if "row" in c.planes else 1
    args, tracked = {}, {}
    for k, v in rank_planes(fk.fresh(planes), dims, lo, hi).items():
        if isinstance(v, np.ndarray):
            t = torch.from_numpy(v)
        else:
            t = torch.tensor(float(v), dtype=torch.float64) if k in wrt else v
        if k in wrt:
            t.requires_grad_(True)
            tracked[k] = t
        args[k] = t
    own = _own_rows(plan, dims)
    try:
        got = eagle.torch.wrap(kernel, group=group)(**args)
        got = got if isinstance(got, dict) else {next(iter(c.want)): got}
        loss = None
        for name, r in got.items():
            ct = cts.get(name)
            if ct is None or not torch.is_floating_point(r):
                continue
            ct = own_lanes(ct, own[name], lo, hi) if name in own else ct
            term = (r * torch.from_numpy(np.ascontiguousarray(ct)).reshape(r.shape)).sum()
            loss = term if loss is None else loss + term
        if loss is None or not loss.requires_grad:
            return {**out, "status": "skipped", "why": "no differentiable output on this rank"}
        loss.backward()
    except Exception as exc:
        return refused(c, exc)
    for name in wrt:
        w = want[name]
        if name in LANE_PLANES:
            w = own_lanes(w.reshape(np.shape(planes[name])), dims, lo, hi)
        t = tracked[name].grad
        g = np.zeros(np.shape(w)) if t is None else t.numpy()
        why = mismatch(f"d/d{name}", np.asarray(g, dtype=w.dtype).reshape(np.shape(w)), w,
                       f"rank {rank} (lanes {lo}..{hi})")
        if why:
            return {**out, "status": "fail", "why": why}
    return {**out, "status": "ok", "why": f"d/d{wrt} the same bits on {RANKS} uneven ranks"}


if __name__ == "__main__":
    sys.exit(main(check=check_rank_grads, doc=__doc__))
