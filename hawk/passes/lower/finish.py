"""The finish function of a stage (`@<k>_finish`), run once on the host after every chunk (or GPU thread or
workgroup) has run its lanes: it combines the chunk partials of sums over every lane in chunk order, adds up the
exact accumulators of ordered sums and rounds them once (docs/ordered.md), combines the private copies of sinks
in order (stores: the last chunk that stored a slot), folds companions into their slots and divides means by
their counts.

Built by the `build-finish` pass (`finish_func`) before a driver lowers the lanes, for every target the same way
(a GPU stage's finish runs on the host too): all it needs is the stage's Layout (where each reduction's chunk
partials sit in #scratch: `finish_accs`), the user's combiners and the forms of the stage's scans."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func, scf

from hawk.abi.layout import Layout, chunk_slots, sum_policy
from hawk.ir.access import kernel_func, scan_cell, scan_op, scan_value
from hawk.ir.dialect import is_hawk
from hawk.passes import exact_emit
from hawk.passes.host_emit import _EQ, size
from hawk.passes.lower import finish_slots, folds, scan, scatters, wide
from hawk.passes.lower.context import Lowering

_NE = 1


def finish_func(module: ir.Module, layout: Layout, ftype: ir.Type, itypes: dict[str, ir.Type],
                target: str = "host") -> None:
    """Add `@<k>_finish` to a module that holds the stage's kernel func (hawk ops, its Layout planned), after
    every op there; the kernel func and the combiners stay for the lanes' lowering. `target` "gpu": every
    ordered term was deposited into the accumulators (no two-float pairs to add first)."""
    kfunc = kernel_func(module)
    cx = Lowering(module, layout, ftype, itypes, target, exact_pairs=target == "host")
    folds.collect_folds(cx, kfunc)
    cx.full = finish_accs(cx)
    cx.scans = scan_forms(kfunc.regions[0].blocks[0])
    with ir.InsertionPoint(module.body), kfunc.location:
        fin = func.FuncOp(f"{layout.name}_finish", (cx.arg_types(), []))
    build_finish(cx, fin)


def finish_accs(cx: Lowering) -> list:
    """Each every-lane reduction as the finish reads it (a state.Acc): its policy, components, where its chunk
    partials start in #scratch (in layout order, `chunk_slots` each; state.plan_state writes the lanes' there),
    where an ordered sum's accumulators start in a chunk's #exact words, and whether its payload is wide (the
    finish takes component loops then, whatever the lanes did)."""
    from hawk.passes.lower.state import Acc

    e = cx.e
    out, off, exact_off = [], 0, 0
    for r in cx.lay.reductions:
        if r.kept or r.kind == "fold":
            continue
        n = size(r.payload)
        pol = r.kind if r.kind in ("max", "min") else sum_policy(r.policy, False)
        acc = Acc(r, pol, n, off, -1, pol != "ordered" and e.wide(r.payload))
        if pol == "ordered":
            acc.exact_at = exact_off
            exact_off += n * exact_emit.words_of(e.f)
        off += chunk_slots(r)
        out.append(acc)
    return out


def scan_forms(body: ir.Block) -> dict:
    """Each scan cell whose block totals (or lanes) this stage writes: (operator, value type, form), form
    "blocks", "lanes" / "lanes+flags" (reverse), ("keyed", keys, order) or ("rkeyed", keys), in op order
    (scan.form_of, which scan.plan_scans reads too)."""
    from hawk.passes.lower.scan import form_of

    return {scan_cell(op): (scan_op(op), scan_value(op).type, form_of(op)) for op in body.operations
            if is_hawk(op, "scan_totals")}


def build_finish(cx: Lowering, finish) -> None:
    e = cx.e
    entry = finish.add_entry_block()
    cx.bufs = cx.args(finish)
    with ir.InsertionPoint(entry), finish.location:
        cx.read_meta()
        scratch = cx.bufs[("#scratch", "scratch")]
        width = e.c(max(cx.lay.width, 1))
        for acc in cx.full:
            r = acc.r
            t = e.f64
            if acc.wide and acc.policy != "ordered":  # a loop over components (lower_host.finish_wide)
                wide.finish_wide(cx, acc, width)
                continue
            if acc.policy == "ordered":
                finish_ordered(cx, acc, scratch, width)
                continue
            else:
                stored = acc.n * (2 if acc.policy == "compensated" else 1)
            count = 1 if r.kind == "mean" else 0
            inits = [e.identity(r.kind, t)] * acc.n if acc.policy != "ordered" else []
            inits += [e.cf(0.0, t)] * (acc.n if acc.policy == "compensated" else 0) + [e.cf(0.0, t)] * count
            loop = scf.ForOp(e.c(0), cx.chunk, e.c(1), inits)
            with ir.InsertionPoint(loop.body):
                base = e.add_i(e.mul_i(loop.induction_variable, width), e.c(acc.chunk))
                cur = list(loop.inner_iter_args)
                part = [e.load(scratch, e.add_i(base, e.c(k))) for k in range(stored + count)]
                out = []
                if acc.policy == "compensated":
                    for c in range(acc.n):
                        ns, nc = e.neumaier(cur[c], cur[acc.n + c], part[c])
                        out.append(ns)
                        cur[acc.n + c] = e.add(nc, part[acc.n + c])
                    out += cur[acc.n:2 * acc.n]
                elif acc.policy != "ordered":
                    out = [e.add(cur[c], part[c]) if acc.policy == "fast" else
                           e.extremum(acc.policy, cur[c], part[c]) for c in range(acc.n)]
                if count:
                    out.append(e.add(cur[-1], part[-1]))
                scf.YieldOp(out)
            res = list(loop.results)
            if acc.policy == "compensated":
                vals = [compensated_value(e, res[c], res[acc.n + c]) for c in range(acc.n)]
            elif acc.policy != "ordered":
                vals = res[:acc.n]
            vals = [e.narrow(v, e.f) if v.type != e.f else v for v in vals]
            if count:
                n = e.narrow(res[-1], e.f) if res[-1].type != e.f else res[-1]
                vals = [e.op("arith.divf", v, e.bcast(n, v.type)) for v in vals]
            cell = cx.bufs[(r.cell, "cell")]
            for k, v in enumerate(vals):
                (e.vstore if isinstance(v.type, ir.VectorType) else e.store)(v, cell, e.c(k))
        finish_private(cx)
        folds.finish_folds(cx)
        scan.finish_scans(cx)  # scans' block totals into block offsets (hawk/passes/lower/scan.py)
        finish_companions(cx)
        for r in cx.lay.reductions:
            if r.kept and r.kind == "mean":
                finish_kept_mean(cx, r)
        canonical_nans(cx)
        func.ReturnOp([])


def compensated_value(e, s: ir.Value, c: ir.Value) -> ir.Value:
    """A compensated total from its (sum, correction): s + c, or s alone when s is inf or NaN (a block's chain
    that overflowed leaves a NaN correction behind; IEEE addition of the terms gives s there)."""
    inf = e.cf(float("inf"), s.type)
    return e.select(e.cmpf(4, e.abs(s), inf), e.add(s, c), s)  # olt: false for inf and NaN


def finish_ordered(cx: Lowering, acc, scratch: ir.Value, width: ir.Value) -> None:
    """An ordered sum over every lane, component by component (a loop): its exact total, divided once by the
    lane count for a mean (counted exactly, per chunk, in #scratch)."""
    e = cx.e
    count = None
    if acc.r.kind == "mean":
        loop = scf.ForOp(e.c(0), cx.chunk, e.c(1), [e.cf(0.0, e.f64)])
        with ir.InsertionPoint(loop.body):
            at = e.add_i(e.mul_i(loop.induction_variable, width), e.c(acc.chunk))
            scf.YieldOp([e.add(loop.inner_iter_args[0], e.load(scratch, at))])
        count = e.narrow(loop.results[0], e.f)
    cell = cx.bufs[(acc.r.cell, "cell")]
    each = scf.ForOp(e.c(0), e.c(acc.n), e.c(1), [])
    with ir.InsertionPoint(each.body):
        c = each.induction_variable
        v = exact_total(cx, acc, c)
        e.store(v if count is None else e.op("arith.divf", v, count), cell, c)
        scf.YieldOp([])


def exact_total(cx: Lowering, acc, c: ir.Value) -> ir.Value:
    """Component c of an ordered sum over every lane: every chunk's exact accumulator added into chunk 0's,
    rounded once to the kernel's float type."""
    e = cx.e
    exact = cx.bufs[("#exact", "exact")]
    width = cx.lay.exact_width(exact_emit.fmt(e.f))
    first = e.add_i(e.c(acc.exact_at), e.mul_i(c, e.c(exact_emit.words_of(e.f))))
    loop = scf.ForOp(e.c(1), cx.chunk, e.c(1), [])
    with ir.InsertionPoint(loop.body):
        exact_emit.accumulate(e, exact, first, exact, e.add_i(first, e.mul_i(loop.induction_variable,
                                                                             e.c(width))), e.f)
        scf.YieldOp([])
    return exact_emit.round_acc(e, exact, first, e.f)


def finish_exact(cx: Lowering, name: str) -> None:
    """An ordered sink or kept cell, slot by slot: the exact sum of the slot's shared accumulator, each chunk's
    (high, low) pair (float64) and (a sink's) prior content, rounded once into the slot; a kept mean's counts
    (after its values) go to its count plane. When no term went to the accumulators (their count word is zero),
    a slot's few floats are added by TwoSums into one float64 pair that holds their sum exactly, which
    finish_slots.round_pair rounds; otherwise (or when that pair loses a bit, or its float32 rounding is not
    sure) they are deposited into the slot's accumulator (a float32 kernel's pair values as float32 parts),
    which is rounded and zeroed again. A kept cell without pairs per chunk takes that fast path for each slot a
    host chunk parked a pair for (reduce_kept.park: one chunk held every term of the slot). On the host, slots
    go eight at a time first (finish_slots.groups), the rest one by one."""
    e = cx.e
    exact = cx.bufs[(name, "exact")]
    w = exact_emit.words_of(e.f)
    is_sink = (name, "sink") in cx.bufs
    target = cx.bufs[(name, "sink")] if is_sink else cx.bufs[(name, "cell")]
    values = e.dim(target)
    parts = [(target, e.c(0), values)]
    if (name, "count") in cx.bufs:
        parts.append((cx.bufs[(name, "count")], values, e.add_i(values, e.dim(cx.bufs[(name, "count")]))))
    pairs = cx.bufs.get((name, "pairs"))
    slots = parts[-1][2]  # (a copy's values; a sink's copies lie Layout.stride apart)
    if is_sink and name in cx.lay.private:
        slots = e.c(cx.lay.stride(name))
    copies = e.op("arith.divui", e.dim(pairs), e.mul_i(slots, e.c(2))) if pairs is not None else e.c(0)
    spill_at = e.op("arith.subi", e.dim(exact), e.c(1))
    quiet = e.cmpi(_EQ, e.load(exact, spill_at), e.c(0, e.i64))
    if not cx.exact_pairs or pairs is None:  # every term went to the accumulators (GPU threads; no pairs)
        quiet = e.c(0, e.i1)
    parked = cx.bufs.get((name, "parked")) if cx.exact_pairs else None  # a kept slot's pair (reduce_kept.park)
    for out, first, last in parts:
        def one_slot(i: ir.Value, out=out, first=first) -> None:
            j = e.op("arith.subi", i, first)
            terms = [e.load(out, j)] if is_sink else []
            f64 = e.f64
            fast_ok = quiet
            if parked is not None:  # (every term of the slot is that pair, none is in the accumulator)
                at = e.mul_i(i, e.c(2))
                phi, plo = e.load(parked, at), e.load(parked, e.add_i(at, e.c(1)))
                fast_ok = e.cmpi(_NE, e.op("arith.ori", e.op("arith.bitcast", phi, t=e.i64),
                                           e.op("arith.bitcast", plo, t=e.i64)), e.c(0, e.i64))
            fast = scf.IfOp(fast_ok, [f64, f64, e.i1], has_else=True)
            with ir.InsertionPoint(fast.then_block):
                hi, lo, ok = e.cf(0.0, f64), e.cf(0.0, f64), e.c(1, e.i1)
                if parked is not None:
                    hi, lo = phi, plo
                for x in terms:
                    hi, lo, ok = scatters.pair_add(cx, hi, lo, ok, e.widen(x, f64))
                if pairs is not None:
                    each = scf.ForOp(e.c(0), copies, e.c(1), [hi, lo, ok])
                    with ir.InsertionPoint(each.body):
                        at = e.mul_i(e.add_i(e.mul_i(each.induction_variable, slots), i), e.c(2))
                        hi, lo, ok = each.inner_iter_args
                        hi, lo, ok = scatters.pair_add(cx, hi, lo, ok, e.load(pairs, at))
                        hi, lo, ok = scatters.pair_add(cx, hi, lo, ok, e.load(pairs, e.add_i(at, e.c(1))))
                        scf.YieldOp([hi, lo, ok])
                    hi, lo, ok = each.results
                scf.YieldOp([hi, lo, ok])
            with ir.InsertionPoint(fast.else_block):
                scf.YieldOp([e.cf(0.0, f64), e.cf(0.0, f64), e.c(0, e.i1)])
            hi, lo, ok = fast.results
            value, ok = finish_slots.round_pair(cx, hi, lo, ok)
            done = scf.IfOp(ok, [e.f], has_else=True)
            with ir.InsertionPoint(done.then_block):
                scf.YieldOp([value])
            with ir.InsertionPoint(done.else_block):
                base = e.mul_i(i, e.c(w))
                for x in terms:
                    exact_emit.deposit(e, exact, base, x)
                for v in (phi, plo) if parked is not None else ():  # (a float32 tie the pair cannot settle; zeros if
                    exact_emit.deposit_as(e, exact, base, v, e.f)  # nothing was parked)
                for _ in () if pairs is None else (1,):
                    each = scf.ForOp(e.c(0), copies, e.c(1), [])
                    with ir.InsertionPoint(each.body):
                        at = e.mul_i(e.add_i(e.mul_i(each.induction_variable, slots), i), e.c(2))
                        for v in (e.load(pairs, at), e.load(pairs, e.add_i(at, e.c(1)))):
                            exact_emit.deposit_as(e, exact, base, v, e.f)
                        scf.YieldOp([])
                v = exact_emit.round_acc(e, exact, base, e.f)
                exact_emit.clear(e, exact, base, e.f)
                scf.YieldOp([v])
            e.store(done.results[0], out, j)
            if parked is not None:  # (zeroed again for the next launch)
                at = e.mul_i(i, e.c(2))
                e.store(e.cf(0.0, f64), parked, at)
                e.store(e.cf(0.0, f64), parked, e.add_i(at, e.c(1)))

        start = first
        if cx.exact_pairs and (pairs is not None or parked is not None):  # eight slots at a time first
            start = finish_slots.groups(cx, out, first, last, is_sink, parked, pairs, copies, slots, quiet, one_slot)
        loop = scf.ForOp(start, last, e.c(1), [])
        with ir.InsertionPoint(loop.body):
            one_slot(loop.induction_variable)
            scf.YieldOp([])
    e.store(e.c(0, e.i64), exact, spill_at)


def finish_private(cx: Lowering) -> None:
    """Add the private copies of each sink, in order, into the sink (plain), or its companion (compensated:
    Neumaier pairs); ordered sinks and kept cells from their exact accumulators (finish_exact)."""
    e = cx.e
    for name in cx.lay.exact_names():
        finish_exact(cx, name)
    for name, slots in cx.lay.private.items():
        if name in cx.lay.exact_names():
            continue
        priv = cx.bufs[(name, "priv")]
        stride = cx.lay.stride(name)  # (from one chunk's copy to the next)
        n, m = e.c(slots), e.c(stride)
        if (name, "mark") in cx.bufs:
            finish_stores(cx, name, priv, cx.bufs[(name, "mark")], n, m)
            continue
        if (name, "comp") in cx.bufs and (name, "cell") in cx.bufs:
            finish_cell_pairs(cx, name, priv, slots)
            continue
        if (name, "cell") in cx.bufs:
            finish_cell_copies(cx, name, priv, n)
            continue
        policy = cx.lay.policy_of(name)
        compensated = policy == "compensated"
        target = cx.bufs[(name, "comp")] if policy != "plain" else cx.bufs[(name, "sink")]
        copies = e.op("arith.divui", e.dim(priv), e.c(stride * (2 if compensated else 1)))  # (a GPU adding
        # atomically into a large plain sink allocates it none: eagle.targets.device; CLIFF)
        each = scf.ForOp(e.c(0), copies, e.c(1), [])  # copy by copy, over every slot: each slot still takes its
        with ir.InsertionPoint(each.body):  # copies in order (the bits of slot by slot), and the inner loop reads
            c = each.induction_variable  # one copy straight, so it vectorizes (1024 slots, one copy: 1.35 -> ~0.1 us)
            loop = scf.ForOp(e.c(0), n, e.c(1), [])
            with ir.InsertionPoint(loop.body):
                i = loop.induction_variable
                if compensated:  # (pairs side by side, or sums then corrections: Layout.pairs_side_by_side)
                    at, at_c, off = _pair_places(cx, name, i, n)
                    base = e.add_i(e.mul_i(c, e.c(2 * stride)), at)
                    ns, nc = e.neumaier(e.load(target, at), e.load(target, at_c), e.load(priv, base))
                    e.store(ns, target, at)
                    e.store(e.add(nc, e.load(priv, e.add_i(base, off))), target, at_c)
                else:
                    e.store(e.add(e.load(target, i), e.load(priv, e.add_i(e.mul_i(c, m), i))), target, i)
                scf.YieldOp([])
            scf.YieldOp([])


def _pair_places(cx: Lowering, name: str, i: ir.Value, n: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """Slot i's sum and correction in a compensated companion of n slots, and how far a copy's correction lies
    after its sum: side by side (1), or sums then corrections (n apart in the companion, a copy's stride apart in
    the copies): Layout.pairs_side_by_side."""
    e = cx.e
    if cx.lay.pairs_side_by_side(name):
        at = e.mul_i(i, e.c(2))
        return at, e.add_i(at, e.c(1)), e.c(1)
    return i, e.add_i(i, n), e.c(cx.lay.stride(name)) if name in cx.lay.private else n


def finish_cell_copies(cx: Lowering, name: str, priv: ir.Value, n: ir.Value) -> None:
    """A kept cell from its copies, in copy order (as many as the launch made: the host and a GPU chunk form
    one per chunk, a GPU slots form one, each slot written by its own thread). The first copy is combined with
    the identity, not with the cell's content (which starts each launch at the identity): a one-chunk host
    launch hands the cell itself as its only copy, started at the identity (eagle.launch.Launcher.buffers,
    `alias_cells`), which then already holds the result: its pass is skipped."""
    e = cx.e
    r = next(r for r in cx.lay.reductions if r.cell == name)
    cell = cx.bufs[(name, "cell")]
    copies = e.op("arith.divui", e.dim(priv), n)
    values = e.dim(cell)
    parts = [(cell, e.c(0), values)]
    if r.kind == "mean":  # a mean's copies hold its counts after its values
        parts.append((cx.bufs[(name, "count")], values, n))
    for target, first, last in parts:  # copy by copy, over every slot (each slot still takes its copies in
        # order, so the bits are those of slot by slot; the inner loop reads one copy straight: it vectorizes)
        first_copies = e.op("arith.minui", copies, e.c(1))
        if target is cell:  # (a one-chunk host launch's cell is its own copy, from the identity: done already)
            first_copies = e.select(e.cmpi(_EQ, e.address(priv), e.address(cell)), e.c(0), first_copies)
        for lo, hi, opening in ((e.c(0), first_copies, True), (e.c(1), copies, False)):
            each = scf.ForOp(lo, hi, e.c(1), [])
            with ir.InsertionPoint(each.body):
                loop = scf.ForOp(first, last, e.c(1), [])
                with ir.InsertionPoint(loop.body):
                    i = loop.induction_variable
                    at = e.op("arith.subi", i, first)
                    part = e.load(priv, e.add_i(e.mul_i(each.induction_variable, n), i))
                    old = e.identity(r.kind, part.type) if opening else e.load(target, at)
                    e.store(e.combine_kind(r.kind, old, part), target, at)
                    scf.YieldOp([])
                scf.YieldOp([])


def finish_cell_pairs(cx: Lowering, name: str, priv: ir.Value, slots: int) -> None:
    """A compensated kept cell from its chunks' (sum, correction) copies, in chunk order: each slot's sums by
    Neumaier steps into its companion pair, the corrections added to the pair's correction (as a compensated
    sink's copies are folded); finish_companions then rounds each pair into the cell. A mean's counts (after its
    values in each copy's sums: whole numbers, exact) are added into its count plane."""
    e = cx.e
    cell, comp = cx.bufs[(name, "cell")], cx.bufs[(name, "comp")]
    values, p = e.dim(cell), e.c(slots)
    copies = e.op("arith.divui", e.dim(priv), e.c(2 * slots))
    loop = scf.ForOp(e.c(0), values, e.c(1), [])
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        at_c = e.add_i(i, values)
        chunks = scf.ForOp(e.c(0), copies, e.c(1), [e.load(comp, i), e.load(comp, at_c)])
        with ir.InsertionPoint(chunks.body):
            base = e.add_i(e.mul_i(chunks.induction_variable, e.c(2 * slots)), i)
            s, c = e.neumaier(*chunks.inner_iter_args, e.load(priv, base))
            scf.YieldOp([s, e.add(c, e.load(priv, e.add_i(base, p)))])
        e.store(chunks.results[0], comp, i)
        e.store(chunks.results[1], comp, at_c)
        scf.YieldOp([])
    if (name, "count") not in cx.bufs:
        return
    cnt = cx.bufs[(name, "count")]
    loop = scf.ForOp(values, p, e.c(1), [])
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        at = e.op("arith.subi", i, values)
        chunks = scf.ForOp(e.c(0), copies, e.c(1), [e.load(cnt, at)])
        with ir.InsertionPoint(chunks.body):
            part = e.load(priv, e.add_i(e.mul_i(chunks.induction_variable, e.c(2 * slots)), i))
            scf.YieldOp([e.add(chunks.inner_iter_args[0], e.narrow(part, e.f))])
        e.store(chunks.results[0], cnt, at)
        scf.YieldOp([])


def finish_stores(cx: Lowering, name: str, priv: ir.Value, mark: ir.Value, n: ir.Value, m: ir.Value) -> None:
    """Each slot of a stored-into sink from the last chunk that stored into it (else it keeps its content); a
    sink also added into adds, in chunk order, the copies of the chunks that stored nothing into the slot.
    n: its slots; m: from one chunk's copy (and marks) to the next."""
    e = cx.e
    sink = cx.bufs[(name, "sink")]
    loop = scf.ForOp(e.c(0), n, e.c(1), [])
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        chunks = scf.ForOp(e.c(0), cx.chunk, e.c(1), [e.load(sink, i)])
        with ir.InsertionPoint(chunks.body):
            at = e.add_i(e.mul_i(chunks.induction_variable, m), i)
            stored = e.cmpi(_NE, e.load(mark, at), e.c(0, e.i64))
            cur, mine = chunks.inner_iter_args[0], e.load(priv, at)
            if name in cx.lay.mixed:  # a chunk that stored nothing here adds its copy (CLIFF: large_sinks), which
                cur = e.add(cur, mine)  # starts at -0.0: untouched, it leaves the slot's bits as they were
            scf.YieldOp([e.select(stored, mine, cur)])
        e.store(chunks.results[0], sink, i)
        scf.YieldOp([])


def finish_companions(cx: Lowering) -> None:
    """Fold each compensated companion into its slot: slot = (prior + sum) + correction, rounded once to the
    slot's type; a zero correction is not added, so a slot whose prior and terms are all -0.0 ends -0.0 (the
    companion's sum starts at -0.0; its corrections, formed by subtractions, end +0.0)."""
    e = cx.e
    for (name, role), comp in cx.bufs.items():
        if role != "comp":
            continue
        target = cx.bufs.get((name, "sink"), cx.bufs.get((name, "cell")))
        n = e.dim(target)
        loop = scf.ForOp(e.c(0), n, e.c(1), [])
        with ir.InsertionPoint(loop.body):
            i = loop.induction_variable
            at, at_c, _ = _pair_places(cx, name, i, n)
            total = e.add(e.widen(e.load(target, i), e.f64), e.load(comp, at))
            fix = e.load(comp, at_c)  # (a zero correction is left out: -0.0 + +0.0 would be +0.0)
            total = e.select(e.cmpf(1, fix, e.cf(0.0, e.f64)), total, e.add(total, fix))  # (oeq)
            e.store(e.narrow(total, e.f), target, i)
            scf.YieldOp([])


_UNO = 14  # arith.cmpf's "unordered": a NaN


def canonical_nans(cx: Lowering) -> None:
    """A float max/min or mean result (over every lane or per kept slot) that is NaN becomes the canonical quiet
    NaN: which of several NaNs the lanes held wins depends on how the lanes were split into chunks and vectors,
    the bits of max and min are promised on every thread count and target, and so are an ordered mean's, whose
    mean of no lanes is 0 / 0 (x86's default NaN has the sign bit set; other targets' differ)."""
    e = cx.e
    for r in cx.lay.reductions:
        if r.kind not in ("max", "min", "mean") or (r.cell, "cell") not in cx.bufs:
            continue
        buf = cx.bufs[(r.cell, "cell")]
        t = ir.MemRefType(buf.type).element_type
        if not isinstance(t, (ir.F32Type, ir.F64Type)):
            continue
        loop = scf.ForOp(e.c(0), e.dim(buf), e.c(1), [])
        with ir.InsertionPoint(loop.body):
            v = e.load(buf, loop.induction_variable)
            e.store(e.select(e.cmpf(_UNO, v, v), e.cf(float("nan"), t), v), buf, loop.induction_variable)
            scf.YieldOp([])


def finish_kept_mean(cx: Lowering, r) -> None:
    e = cx.e
    out, cnt = cx.bufs[(r.cell, "cell")], cx.bufs[(r.cell, "count")]
    n = e.dim(cnt)
    loop = scf.ForOp(e.c(0), n, e.c(1), [])
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        c = e.load(cnt, i)
        for p in range(size(r.payload)):
            at = e.add_i(e.mul_i(e.c(p), n), i)
            e.store(e.op("arith.divf", e.load(out, at), c), out, at)
        scf.YieldOp([])
