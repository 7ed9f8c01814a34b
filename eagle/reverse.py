"""The reverse door: `plan.reverse(cotangent, **planes)` gives the gradients of a kernel's outputs, weighted by
`cotangent`, with respect to its float inputs.

The work is one or two hawk kernels made from the forward kernel's hawk IR (hawk/reverse): the adjoint, and for
sinks stored into with `=` a "winners" kernel that finds the lane that won each slot. A Plan's gradient of a
stencil (planes read with `.at` at constant offsets) runs in gather form instead of the adjoint (hawk/reverse/
gather.py: a shares adjoint, a gather kernel and, with Params, a Param sums kernel), with the adjoint's bits; a
call whose gather flags a lane (its pair erred) reruns the adjoint. All are deployed like any kernel (same
target, threads, chunking; compiled and cached per stage), so a gradient run is as deterministic as a forward
one: every sum across lanes in the adjoint is an ordered (exact) sum. This module only checks the
request, shapes the cotangents into the adjoint's planes and the gradients back into the inputs' shapes.

The same door serves a loaded artifact built with `reverse=True` (hawk.artifact): there the adjoint, winners and
gather-form kernels are loaded artifacts and the adjoint's planes (`Info`) come from the sidecar; nothing here
imports MLIR unless a Plan asks for its adjoint to be made.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from eagle.array import Array
from eagle.errors import InputError
from eagle.stage import run_stages
from hawk.abi.reverse import INFO_FIELDS, Info, info_from_json, info_to_json, win_components  # noqa: F401  (the door's names)


@dataclass(frozen=True)
class Forward:
    """What the door needs of the forward kernel, whether a Plan or a loaded artifact runs it."""

    name: str
    signature: object
    outputs: dict
    reads: object = None  # () -> the outputs whose initial contents the body reads (asked only by the reverse)

    @property
    def init(self) -> frozenset[str]:
        """The outputs whose initial contents the kernel reads: inputs of its adjoint, and (floats) differentiable
        like a passed sink's initial contents."""
        return frozenset(self.reads()) if self.reads is not None else frozenset()

    @property
    def float_init(self) -> tuple[str, ...]:
        """Those of `init` whose initial contents have a gradient (float outputs), sorted."""
        return tuple(sorted(n for n in self.init if not self.signature.get(n).integer))

    @property
    def keyed(self) -> tuple[str, ...]:
        """The float outputs written by key (hawk.scatter(out)[k] = v), sorted: their cotangents are per position,
        and their initial contents (kept where no lane stores) are differentiable like a sink's."""
        return tuple(sorted(n for n, mode in self.outputs.items() if str(mode).startswith("scatter")
                            and self.signature.get(n) is not None and not self.signature.get(n).integer))

    def positions(self, planes: dict, extents: tuple[int, ...]) -> tuple:
        """(name, length) of each float output written by key: the array passed for it, or the lane shape's."""
        return tuple((n, math.prod(np.shape(planes[n])) if planes.get(n) is not None else math.prod(extents))
                     for n in self.keyed)  # (np.shape: a traced JAX array's too)


def forward_of(runner) -> Forward:
    k = getattr(runner, "kernel", None)
    if k is not None:  # a Plan
        return Forward(k.name, k.signature, k.outputs, k.initial_reads)
    rev = getattr(runner, "_reverse", None)  # a LoadedKernel: its sidecar's reverse record says
    return Forward(runner.name, runner.signature, runner.outputs, lambda: rev.info.init if rev is not None else ())


def adjoint_inputs(fwd: Forward, planes: dict, extents: tuple[int, ...], dtype, xp=np) -> dict:
    """The forward's planes that its adjoint reads: every input, and the initial contents of the outputs the body
    reads before assigning (the arrays passed, or the zeros the forward read when omitted; an integer output's
    as int64 unless int32/int64: the adjoint reads it as an Index plane). Sinks and other outputs are left out."""
    sig, init = fwd.signature, fwd.init
    out = {n: v for n, v in planes.items() if sig.get(n) is None or sig.get(n).kind not in ("output", "sink")}
    for y in sorted(init):
        p = sig.get(y)
        v = planes.get(y)
        if p.integer:
            v = xp.zeros(tuple(extents), np.int64) if v is None else xp.asarray(v)
            out[y] = v if np.dtype(v.dtype) in (np.dtype(np.int32), np.dtype(np.int64)) else v.astype(np.int64)
        else:
            pay = p.payload.shape
            shape = (*pay, *extents) if len(pay) < 2 else (math.prod(pay), *extents)
            out[y] = xp.zeros(shape, dtype) if v is None else v
    return out


def _fail(fwd: Forward, msg: str, plane: str | None = None) -> InputError:
    who = f"plane '{plane}' of " if plane else ""
    return InputError(f"{who}kernel '{fwd.name}': reverse: {msg}")


def split_args(runner, cotangent, wrt, planes: dict) -> tuple[object, object, dict]:
    """(cotangent, wrt, planes) from `reverse(cotangent, wrt, /, **planes)`: a kernel with a plane named
    `cotangent` or `wrt` passes that plane by keyword and the argument positionally; otherwise the keyword is the
    argument (so `wrt=("x",)` keeps working)."""
    fwd = forward_of(runner)
    planes = dict(planes)
    for arg in ("cotangent", "wrt"):
        if arg in planes and fwd.signature.get(arg) is None:
            if (cotangent if arg == "cotangent" else wrt) is not None:
                raise _fail(fwd, f"{arg} is given twice (positionally and as {arg}=)")
            if arg == "cotangent":
                cotangent = planes.pop(arg)
            else:
                wrt = planes.pop(arg)
    if cotangent is None:
        clash = " (the kernel has a plane named 'cotangent': pass the cotangent positionally)" \
            if fwd.signature.get("cotangent") is not None else ""
        raise _fail(fwd, f"no cotangent given: pass an array shaped like run's result, or a dict by output name "
                         f"({{}} for all zero){clash}")
    return cotangent, wrt, planes


def choose_wrt(fwd: Forward, wrt, given: dict, built: tuple[str, ...] | None = None
               ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(inputs the adjoint differentiates, sinks whose initial contents get a gradient). `built`: the inputs a
    loaded artifact's adjoint was built for (None for a Plan, which builds the adjoint it is asked for)."""
    sig = fwd.signature
    floats = [p.name for p in sig.planes if p.kind in ("lane", "param", "table")]
    init = fwd.float_init  # outputs whose initial contents are read
    keyed = fwd.keyed  # outputs written by key: their initial contents as a sink's (kept where no lane stores)
    if wrt is None:  # (an output's initial contents, as a sink's, when passed)
        kwrt = tuple(floats) + tuple(n for n in init if n in given) if built is None else \
            tuple(n for n in built if n not in init or n in given)
        return kwrt, tuple(n for n in given if sig.get(n) is not None and (sig.get(n).kind == "sink" or n in keyed))
    names = (wrt,) if isinstance(wrt, str) else tuple(wrt)
    for n in names:
        p = sig.get(n)
        if p is None:
            raise _fail(fwd, f"wrt= names '{n}', which is not a plane; its float inputs are {floats}")
        if p.kind in ("index", "grid") or (p.kind == "output" and p.integer):
            what = "an integer output (Mutable[Index])" if p.kind == "output" else \
                "an integer plane (keys, indices, extents)"
            raise _fail(fwd, f"is {what} and has no gradient: leave it out of wrt=", n)
        if p.kind == "output" and n not in init and n not in keyed:
            raise _fail(fwd, "is an output whose initial contents the kernel never reads (each lane assigns it "
                             "before any read), so they have no gradient; wrt= names inputs (its cotangent is the "
                             "cotangent= argument)", n)
        if built is not None and p.kind != "sink" and n not in keyed and n not in built:
            raise _fail(fwd, f"this artifact's reverse was built for {list(built)}: rebuild it with "
                             f"reverse=(..., '{n}') to differentiate it", n)
    return (tuple(n for n in names if sig.get(n).kind in ("lane", "param", "table", "output") and n not in keyed),
            tuple(n for n in names if sig.get(n).kind == "sink" or n in keyed))


def adjoint_for(plan, wrt: tuple[str, ...], extents: tuple[int, ...], positions: tuple = ()):
    """The adjoint kernel (and the winners kernel, if any) deployed like `plan`, made once per wrt (and lane
    extents, when the adjoint depends on them; and the lengths of the float outputs written by key)."""
    import eagle

    kernel = plan.kernel
    cache = plan.__dict__.setdefault("_reverse", {})
    ext = extents if kernel.adjoint_needs_extents(wrt) else None
    key = (wrt, ext, positions)
    if key not in cache:
        made = kernel.__dict__.setdefault("_adjoints", {})  # the kernels, shared by every plan of `kernel`
        if key not in made:
            made[key] = kernel.adjoint(wrt, ext, positions)  # (adjoint, design, winners or None): hawk/reverse
        adj, design, win = made[key]
        opts = dict(threads=plan.threads, min_chunk=plan.min_chunk, **getattr(plan, "options", {}))
        cache[key] = (eagle.deploy(adj, plan.target, **opts), design,
                      eagle.deploy(win, plan.target, **opts) if win is not None else None)
    return cache[key]


def gather_for(plan, wrt: tuple[str, ...], extents: tuple[int, ...]):
    """(shares adjoint plan, design, gather plan, Param sums plan or None, Gather) for a stencil's gradient in
    gather form (hawk/reverse/gather.py), deployed like `plan`, or None when no plane of `wrt` is read at constant
    offsets only (Scalar and Vector planes alike)."""
    import eagle

    kernel = plan.kernel
    cache = plan.__dict__.setdefault("_gather", {})
    if not kernel.adjoint_needs_extents(wrt):
        return None
    key = (wrt, extents)
    if key not in cache:
        made = kernel.__dict__.setdefault("_gathers", {})
        if key not in made:
            made[key] = kernel.gather_adjoint(wrt, extents)
        got = made[key]
        if got is not None:
            adj, design, gk, sk, g = got
            opts = dict(threads=plan.threads, min_chunk=plan.min_chunk, **getattr(plan, "options", {}))
            got = (eagle.deploy(adj, plan.target, **opts), design, eagle.deploy(gk, plan.target, **opts),
                   eagle.deploy(sk, plan.target, **opts) if sk is not None else None, g)
        cache[key] = got
    return cache[key]


def cotangents(fwd: Forward, design, cotangent, extents: tuple[int, ...], dtype, xp=np,
               strict: bool = True) -> dict:
    """The adjoint's cotangent planes from the cotangents of the forward's results (a missing one is zero): the
    one shaping of plan.reverse, the torch and the JAX bridges. `xp`: the array module to build them with (NumPy,
    or jax.numpy inside a traced JAX backward, where no host copy may be taken). `strict`: refuse a name that is
    not an output (what a caller passed); a bridge passes every result of its call, some without a cotangent."""
    sig = fwd.signature
    names = list(design.ct)
    if not isinstance(cotangent, Mapping):
        if not names:
            ints = sorted(p.name for p in sig.planes if p.integer)
            raise _fail(fwd, f"the kernel has no float result to differentiate (an integer output, {ints}, takes "
                             f"no cotangent)")
        if len(names) != 1:
            raise _fail(fwd, f"the kernel has outputs {sorted(names)}: pass cotangent= as a dict by output name")
        cotangent = {names[0]: cotangent}
    given = dict(cotangent)
    for out in names:  # a vector cell's components, as run hands them back
        size = math.prod(design.payload[out])
        if design.ct_kind[out] == "table" and out in fwd.outputs and out not in given \
                and all(f"{out}_{k}" in given for k in range(size)):
            given[out] = xp.concatenate([xp.asarray(given.pop(f"{out}_{k}"), dtype=dtype).reshape(-1)
                                         for k in range(size)])
    unknown = [n for n in given if n not in design.ct]
    if unknown and strict:
        spec = fwd.signature.get(unknown[0])
        if spec is not None and spec.integer:
            raise _fail(fwd, f"cotangent names '{unknown[0]}', an integer output (Mutable[Index]), which has no "
                             f"cotangent: leave it out; the outputs that take one are {sorted(names)}")
        raise _fail(fwd, f"cotangent names '{unknown[0]}', which is not an output; the outputs are {sorted(names)}")
    out_planes = {}
    positions = getattr(design, "positions", {})
    for out in names:
        if out in positions:  # written by key: a cotangent per position of the array (any shape, read flat)
            n = positions[out]
            a = xp.zeros((n,), dtype) if out not in given else xp.asarray(given[out])
            if a.size != n:
                raise _fail(fwd, f"the cotangent of '{out}' must hold one value per position of its array ({n}), "
                                 f"got shape {a.shape}")
            a = xp.asarray(a, dtype=dtype).reshape(n)
            out_planes[design.ct[out]] = np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a
            continue
        kind, pay = design.ct_kind[out], design.payload[out]
        labels = [a.label for a in sig.lane_axes()]
        kept = tuple(extents[labels.index(a)] for a in design.kept.get(out, ()))
        if out in fwd.outputs and kind == "lane":
            want = (*pay, *extents)
        elif out in fwd.outputs:
            want = (*pay, *kept) if kept else (math.prod(pay),)
        else:
            want = (*pay, *(a.extent for a in sig.get(out).axes))
        a = xp.zeros(want, dtype) if out not in given else xp.asarray(given[out])
        if a.dtype.kind != "f":
            a = a.astype(dtype)
        if a.size != math.prod(want) or not _fits(tuple(a.shape), want, len(pay)):
            raise _fail(fwd, f"the cotangent of '{out}' must be shaped {want} (as run hands it back), got {a.shape}")
        a = xp.asarray(a, dtype=dtype)
        if isinstance(a, np.ndarray):
            a = np.ascontiguousarray(a)
        if kind == "param":
            out_planes[design.ct[out]] = a.reshape(-1)[:1]
        elif kind == "lane":
            out_planes[design.ct[out]] = a.reshape(want) if len(pay) < 2 else a.reshape(math.prod(pay), *extents)
        else:  # a Table: payload components first (flattened), then the sink's or kept cell's axes
            axes = kept if out in fwd.outputs else tuple(a_.extent for a_ in sig.get(out).axes)
            size = math.prod(pay)
            out_planes[design.ct[out]] = a.reshape(((size,) if size > 1 or not axes else ()) + axes)
    return out_planes


_REPEATED = ("%ld position(s) of this output, written by key, were stored more than once (first: position %ld, %ld "
             "stores); which store's value remained there is not specified, so neither is its gradient: store each "
             "position once (key -1 for a lane that stores nothing), or store into a sink, where the last lane wins")


def repeats_format(fwd: Forward, out: str) -> str:
    """The refusal of a position stored twice in output `out` as a printf format (positions stored more than once,
    the first of them, its count): Python's % and eagle/call_plan.c's check inside a traced JAX backward."""
    return str(_fail(fwd, _REPEATED, out))


def winner_fills(design, sig, dtype, xp=np) -> dict:
    """The winners kernel's sinks before its run (`sig`: a signature holding the sinks' axes): -1, no store yet,
    in every component of every slot (hawk.abi.reverse.win_components: the store's number and its loops' passes,
    in parts), components first."""
    return {s: xp.full((win_components(design.passes.get(s, 0)), *(a.extent for a in sig.get(s).axes)), -1.0,
                       dtype) for s in design.win}


def unstored_positions(ct, counts, xp=np):
    """An output written by key's initial-content gradient: its cotangent `ct` where no lane stored, zero where
    one did (`counts`: the winners kernel's stores counted into each position; a sharded run's summed over every
    shard)."""
    return xp.where(counts == 0, ct, xp.zeros_like(ct))


def unstored_prior(ct, wins, xp=np):
    """A stored sink's prior-content gradient: its cotangent `ct` where no lane stored, zero where one did
    (`wins`: the winners kernel's result for the sink, whose first component is -1 where no lane stored; a
    stored number's low part is never negative)."""
    return xp.where(wins[0] < 0, ct, xp.zeros_like(ct))


def refuse_repeats(fwd: Forward, counts: dict) -> None:
    """Refuse, by plane, a gradient through an output written by key where some position was stored more than
    once: which store's value remained there is not specified (docs/semantics.md), so neither is its gradient."""
    for out, c in counts.items():
        over = np.flatnonzero(c > 1)
        if over.size:
            p = int(over[0])
            raise InputError(repeats_format(fwd, out) % (over.size, p, int(c[p])))


def _fits(shape: tuple, want: tuple, payload_dims: int) -> bool:
    """Whether a cotangent of the right size is laid out as `want`: that shape, flat, or with the payload's axes
    flattened into one (axes of length 1 aside). A same-size array of another shape (a Vector cell's (slots,
    components) for (components, slots)) would be read in the wrong order: refused."""
    def bare(s):
        return tuple(d for d in s if d != 1)

    flat_payload = (math.prod(want[:payload_dims]), *want[payload_dims:])
    return len(bare(shape)) <= 1 or bare(shape) in (bare(want), bare(flat_payload))


class _Prepared:
    """One kernel's launch with its planes bound and buffers allocated once (as plan.bind does). `runner`: a Plan,
    or a loaded artifact (its `prepare_run`)."""

    def __init__(self, runner, planes: dict, span: tuple[int, int] | None = None):
        self.runner = runner
        self.bound = runner.binder.bind(planes)
        lo, hi = span or (0, self.bound.lanes)  # (lanes outside a span keep their zeros)
        prepare = getattr(runner, "prepare_run", None) or runner.stages
        self.stages, self.results = prepare(self.bound, lo, hi)

    def set(self, name: str, a: np.ndarray) -> None:
        """Write an input of the next launch (into the buffer bound for it, which this module owns)."""
        self.bound.arrays[name][...] = np.asarray(a).reshape(-1)

    def launch(self) -> dict[str, np.ndarray]:
        run_stages(self.stages)
        self.runner.last_chunks = tuple(st.nchunks for st in self.stages)
        return {k: np.asarray(v) for k, v in self.results.items()}


def plan_source(plan, gather: bool = True):
    """The adjoint of a Plan: made (and compiled) for exactly the inputs asked for; with `gather=False` a stencil
    keeps the scatter adjoint (the gather form's reference in tests)."""
    def source(fwd: Forward, kwrt: tuple[str, ...], extents: tuple[int, ...], positions: tuple = ()):
        return adjoint_for(plan, kwrt, extents, positions)

    source.built = None
    source.gather = (lambda kwrt, extents: gather_for(plan, kwrt, extents)) if gather else (lambda *_: None)
    return source


class Reverse:
    """The reverse of one plan for one set of planes: the adjoint (and winners) launches prepared once; each call
    takes a cotangent and hands back the gradients (in buffers reused by the next call, as plan.bind's results).
    `source(fwd, wrt, extents)` gives (adjoint runner, its planes, winners runner or None), and
    `source.gather(wrt, extents)` a stencil's gather form (gather_for's tuple) or None; a Plan's by default, or a
    loaded artifact's (eagle/artifact.ReverseSource)."""

    def __init__(self, plan, planes: dict, wrt=None, source=None, refresh: tuple[str, ...] = (),
                 span: tuple[int, int] | None = None):
        source = source or plan_source(plan)
        self.span = span  # a launch bound to lanes [lo, hi): the adjoint's lanes run there only
        self.source = source
        self.plan, self.planes = plan, dict(planes)
        fwd = self.fwd = forward_of(plan)
        sig = fwd.signature
        b = plan.binder.bind(self.planes)  # the forward's own checks: names, shapes, dtypes, extents
        kernel = getattr(plan, "kernel", None)
        if kernel is not None:  # and its keys read from Index planes (else the winners kernel's words would say it)
            for k in range(kernel.stage_count):
                plan.binder.check_keys(kernel.layout(b.spec, k), b)
        self.dtype, self.extents = b.dtype, b.extents
        self.kwrt, self.swrt = choose_wrt(fwd, wrt, b.given, source.built)
        positions = self.positions = fwd.positions(self.planes, b.extents)
        adj, self.design, win = source(fwd, self.kwrt, b.extents, positions)
        inputs = adjoint_inputs(fwd, self.planes, b.extents, b.dtype)
        zero = cotangents(fwd, self.design, {}, b.extents, b.dtype)
        self.fills = winner_fills(self.design, sig, b.dtype)
        self.wins = {s: f.copy() for s, f in self.fills.items()}
        # outputs written by key: the winners kernel counts the stores into each position (from zeros)
        self.counted = {n: np.zeros(size, b.dtype) for n, size in positions}
        self.counts: dict = {}
        if span is not None:  # (eagle/reverse_range.py: what a span cannot run)
            from eagle.reverse_range import span_refusal

            why = span_refusal(self.design, (adj, win))
            if why is not None:
                raise _fail(fwd, f"this launch is bound to lanes [{span[0]}, {span[1]}) of {b.lanes} "
                                 f"(base=/count=), and {why}: bind without base= and count= to differentiate "
                                 "every lane")
        self.win_run = _Prepared(win, {**inputs, **self.fills, **self.counted}, span) if win is not None else None
        tables = {self.design.win[s]: w for s, w in self.wins.items()}
        got = source.gather(self.kwrt, b.extents) if self.kwrt else None
        self.gather_run = self.sums_run = self.exact_run = None
        self.exact_calls = 0  # calls the gather form handed to the scatter adjoint (a pair erred)
        if got is not None:  # a stencil: shares, then the gather; the scatter adjoint if a lane's pair erred
            adj, self.design, gk, sk, self.gather = got
        self.adj_run = _Prepared(adj, {**inputs, **zero, **tables}, span) if self.kwrt else None
        if got is not None:
            def shares(names):
                out = {}
                for s in names:
                    a = np.asarray(self.adj_run.results[s])  # (a Vector plane's shares: components first)
                    out[s] = a.reshape(b.extents if a.size == math.prod(b.extents) else (-1, *b.extents))
                return out

            # bound to the share outputs themselves: no copies
            self.gather_run = _Prepared(gk, shares(self.gather.shares))
            self.sums_run = _Prepared(sk, shares(self.gather.sums.values())) if sk is not None else None
        self.exact_planes = {**inputs, **zero, **tables}
        # planes written again into the adjoint's buffers at every call: a bound launch's copies of the outputs the
        # body reads before assigning, which change with each launch (eagle/doors.py)
        self.refresh = refresh

    def __call__(self, cotangent) -> dict[str, Array]:
        fwd, design, sig = self.fwd, self.design, self.fwd.signature
        for n in self.refresh:
            for run in (self.win_run, self.adj_run, self.exact_run):
                if run is not None and n in run.bound.arrays:
                    run.set(n, self.planes[n])
        cts = cotangents(fwd, design, cotangent, self.extents, self.dtype)
        if not isinstance(cotangent, Mapping):  # one output (cotangents() checked it)
            cotangent = {next(iter(design.ct)): cotangent}
        if self.win_run is not None:
            for f in self.fills.values():
                f[...] = -1.0
            for f in self.counted.values():
                f[...] = 0.0
            got = self.win_run.launch()
            for s in design.win:
                self.wins[s][...] = got[s]
                if self.adj_run is not None:
                    self.adj_run.set(design.win[s], got[s])
            self.counts = {n: np.asarray(got[n]).reshape(-1) for n in self.counted}
            refuse_repeats(fwd, self.counts)
        results = {}
        if self.adj_run is not None:  # (wrt= may name sinks only)
            for name, a in cts.items():
                self.adj_run.set(name, a)
            results = self.adj_run.launch()
            self.plan.last_reverse_chunks = self.adj_run.runner.last_chunks
            if self.gather_run is not None:
                results = self.gathered(results, cts)
        grads = {}
        for x in self.kwrt:
            shape = (1,) if sig.get(x).kind == "param" else np.shape(self.planes[x]) if x in self.planes else \
                np.shape(self.exact_planes[x])  # (an omitted output's initial contents: the zeros read)
            grads[x] = Array(results[design.grad[x]].reshape(shape))
        for s in self.swrt:  # a sink's initial contents: added to (the cotangent), or replaced where a lane stored
            if s in self.counts:  # an output written by key: its content stays where no lane stored
                shape = np.shape(self.planes[s]) if self.planes.get(s) is not None else tuple(self.extents)
                g = unstored_positions(cts[design.ct[s]], self.counts[s])
                grads[s] = Array(np.array(g, dtype=self.dtype).reshape(shape))
                continue
            shape = (*design.payload.get(s, ()), *(a.extent for a in sig.get(s).axes))
            ct = np.broadcast_to(np.asarray(cotangent.get(s, 0.0), self.dtype), shape)
            if s in design.win:
                ct = unstored_prior(ct, self.wins[s])
            grads[s] = Array(np.array(ct, dtype=self.dtype))
        return grads

    def gathered(self, results: dict, cts: dict) -> dict:
        """The gathered planes' gradients from the gather kernel, or, where some lane's pair erred (a term not
        finite, or a sum past the pair's reach), every gradient from the scatter adjoint's exact accumulators."""
        g = self.gather
        got = self.gather_run.launch()
        self.plan.last_reverse_chunks += self.gather_run.runner.last_chunks
        if not np.asarray(got[g.flag]).max() > 0:
            sums = self.sums_run.launch() if self.sums_run is not None else {}
            if self.sums_run is not None:
                self.plan.last_reverse_chunks += self.sums_run.runner.last_chunks
            return {**results, **{g.grad[x]: got[g.grad[x]] for x in g.grad}, **sums}
        if self.exact_run is None:
            adj, _, _ = self.source(self.fwd, self.kwrt, self.extents, self.positions)
            self.exact_run = _Prepared(adj, self.exact_planes, self.span)
        self.exact_calls += 1
        for name, a in cts.items():
            self.exact_run.set(name, a)
        for s in self.design.win:
            self.exact_run.set(self.design.win[s], self.wins[s])
        out = self.exact_run.launch()
        self.plan.last_reverse_chunks += self.exact_run.runner.last_chunks
        return out


def reverse(plan, cotangent, wrt=None, planes: dict | None = None) -> dict[str, Array]:
    """Gradients by input name, each an eagle.Array shaped like the input (a Param's: one element)."""
    cotangent, wrt, planes = split_args(plan, cotangent, wrt, planes or {})
    return Reverse(plan, planes, wrt)(cotangent)


def reverse_bound(launch, cotangent, wrt=None) -> dict[str, Array]:
    """`plan.bind(**planes).reverse(cotangent)`: the adjoint's launches are bound once per wrt and reused. A
    launch bound to a lane range (base=/count=) is differentiated as the run over the planes' slices, or by the
    adjoint run over the same lanes (eagle/reverse_range.py)."""
    lanes = launch.bound.lanes
    lo, hi = getattr(launch, "lane_span", (0, lanes))
    span = None if (lo, hi) == (0, lanes) else (lo, hi)
    if span is not None:  # a lane range: its slices' reverse where they compute the same, else the adjoint's span
        from eagle.reverse_range import by_slices, pass_through, range_reverse

        fwd = forward_of(launch.plan)
        if by_slices(launch.plan.kernel, fwd.keyed):
            got = range_reverse(launch, cotangent, wrt, lo, hi,
                                lambda planes, ct, wrt: Reverse(launch.plan, planes, wrt)(ct))
            return pass_through(got, cotangent, fwd, lo, hi, lanes)
    cache = launch.__dict__.setdefault("_reverse", {})
    key = None if wrt is None else ((wrt,) if isinstance(wrt, str) else tuple(wrt))
    if key not in cache:  # (an output the body reads before assigning: its contents when the last launch began)
        initial = getattr(launch, "initial", {})
        cache[key] = Reverse(launch.plan, {**launch.planes, **initial}, wrt, refresh=tuple(initial), span=span)
    got = cache[key](cotangent)
    return got if span is None else pass_through(got, cotangent, fwd, lo, hi, lanes)
