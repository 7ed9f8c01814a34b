"""A seeded generator of hawk kernels with NumPy references, and the runner that checks them (tests/test_fuzz.py).

Case `i` of seed `s` is drawn from `np.random.default_rng([s, i])` alone, so any case is reproduced by its two
numbers. Each case is one kernel's module source, its planes and what it must do: match a NumPy reference
computed here while generating (values and error scales are evaluated alongside the source), raise
`hawk.KernelError` at a known line (deliberately wrong kernels), or raise `eagle.InputError` naming a sink
(scatter keys outside it). Run as a script it checks a range of cases, one JSON line per case:

    python tests/fuzz_kernels.py --seed 7 --start 0 --count 50 --dir /tmp/fz    # check cases 0..49
    python tests/fuzz_kernels.py --seed 7 --start 12 --show                     # print case 12's module
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import traceback

import numpy as np
from fuzz_grammar import BINS, COLS, KNOWN, REL, ROWS, TABLE, VECTOR_SCATTERS, Case, E, Grammar, N, absf, near, union

_HEAD = ("import hawk\nimport hawk.math as m\n"
         "from hawk import Grid, Index, Mutable, Param, Scalar, Sorted, Table, Vector\n"
         f"\nN = {N}\nB = {BINS}\n\n\n")
_HEAD_LINES = _HEAD.count("\n")

__all__ = ["KEYS_OUTSIDE", "KNOWN", "REFUSALS", "case", "check", "close", "fresh", "known_refusal", "load_kernel",
           "main", "named", "raised", "record", "run_cases", "runner_args"]


class Gen(Grammar):
    """Whole kernels: statements, then a per-lane result, a reduction, a scatter or a deliberately wrong line."""

    # ---- statements ------------------------------------------------------------------------------------
    def local(self, e: E) -> str:
        name = f"t{self.tmp}"
        self.tmp += 1
        self.lines.append(f"    {name} = {e.src}")
        # (a constant stays one: the front end folds it through the name, and refuses a constant division by zero)
        self.locals[name] = E(name, e.val, e.kind, e.mag, e.const, e.fuzzy, e.exact)
        return name

    def body_stmts(self, depth: int):
        for _ in range(int(self.rng.integers(0, 4))):
            r = self.rng.random()
            if r < 0.5:
                self.local(self.f(depth) if self.rng.random() < 0.8 else self.i(depth))
            elif r < 0.55:
                self.if_loop_stmt(depth)
            elif r < 0.75:
                self.if_stmt(depth)
            else:
                self.for_stmt(depth)

    def if_stmt(self, depth: int):
        c = self.b(depth - 1)
        a, b = self.f(depth - 1), self.f(depth - 1)
        name = f"t{self.tmp}"
        self.tmp += 1
        self.lines += [f"    if {c.src}:", f"        {name} = {a.src}", "    else:", f"        {name} = {b.src}"]
        v = np.where(c.val, a.val, b.val)
        self.locals[name] = E(name, v, "f", np.where(c.val, a.mag, b.mag), False, union(c, a, b), a.sure and b.sure)

    def if_loop_stmt(self, depth: int):
        """An if whose then side runs a for loop (its term may read .at: the reverse takes the loop out of the if)."""
        c = self.b(depth - 1)
        b = self.f(depth - 1)
        start, before = len(self.lines), dict(self.locals)
        self.for_stmt(depth, plain=True)
        acc = next(n for n in self.locals if n not in before)
        a = self.locals.pop(acc)
        body = ["    " + line for line in self.lines[start:]]
        del self.lines[start:]
        name = f"t{self.tmp}"
        self.tmp += 1
        self.lines += [f"    if {c.src}:", *body, f"        {name} = {acc}", "    else:", f"        {name} = {b.src}"]
        v = np.where(c.val, a.val, b.val)
        self.locals[name] = E(name, v, "f", np.where(c.val, a.mag, b.mag), False, union(c, a, b))

    def for_stmt(self, depth: int, plain: bool = False):
        acc = f"t{self.tmp}"
        self.tmp += 1
        r = self.rng.random()
        if r < 0.1 and not plain:
            self.tags.add("range_float")
            self.lines += [f"    {acc} = 0.0", "    for j in range(2.5):", f"        {acc} = {acc} + x"]
            if self.refusal_line is None:
                self.refusal_line = _HEAD_LINES + 3 + len(self.lines) - 2
            self.locals[acc] = E(acc, self.data["x"] * 2.0, "f", absf(self.data["x"]) * 2.0)
            return
        if r < 0.55:
            lo, hi = int(self.rng.integers(-2, 2)), int(self.rng.integers(0, 5))
            step = int(self.pick([1, 1, 2, -1]))
            if step < 0:
                lo, hi = hi, lo
            trips = [np.full(self.shape, j) for j in range(lo, hi, step)]
            head = f"range({lo}, {hi}, {step})" if step != 1 else f"range({lo}, {hi})"
            masks = [np.ones(self.shape, bool)] * len(trips)
            n = None
        else:  # a per-lane trip count
            n = self.i(0)
            if self.rng.random() < 0.5:
                n = E("m.index(x, 5)", np.where(np.isnan(self.data["x"]), 0,
                                                 np.clip(np.floor(self.data["x"]), 0, 4)).astype(np.int64), "i",
                      None, False, self.jump_int(self.env["x"]))
            top = int(max(0, np.max(n.val)))
            trips = [np.full(self.shape, j) for j in range(top)]
            masks = [n.val > j for j in range(top)]
            head = f"range({n.src})"
        term = self.f(max(depth - 1, 0))
        form = self.rng.random()
        self.lines += [f"    {acc} = 0.0", f"    for j in {head}:"]
        v, mag = np.zeros(self.shape), np.zeros(self.shape)
        with np.errstate(all="ignore"):
            if form < 0.5:
                self.lines.append(f"        {acc} = {acc} + {term.src} * j")
                for j, mk in zip(trips, masks, strict=True):
                    step = term.val * j
                    v = np.where(mk, v + step, v)
                    mag = np.where(mk, mag + term.mag * np.abs(j), mag)
            else:
                self.lines.append(f"        {acc} += m.max({term.src}, m.to_float(j))")
                for j, mk in zip(trips, masks, strict=True):
                    step = np.maximum(term.val, j.astype(np.float64))
                    v = np.where(mk, v + step, v)
                    mag = np.where(mk, mag + np.maximum(term.mag, np.abs(j)), mag)
        self.locals[acc] = E(acc, v, "f", mag + np.abs(v), False, union(term, n) if n is not None else term.fuzzy)

    # ---- whole kernels ---------------------------------------------------------------------------------
    def module(self, header: str) -> str:
        """The case's module: imports, the funcs the body calls, then the kernel."""
        return _HEAD + "".join(self.funcs) + "@hawk.kernel\n" + header + "\n" + "\n".join(self.lines) + "\n"

    def func_lines(self) -> int:
        """Lines the funcs take before the kernel (a refusal's line moves down by them)."""
        return sum(f.count("\n") for f in self.funcs)

    def signature(self, extra: str, ret: str | None) -> str:
        params = ([f'lane: Grid["row", "col":{COLS}]'] if self.grid else []) + \
            ["x: Scalar", "y: Scalar", "k: Index", "kb: Index", "p: Param", "v: Vector[3]",
             f'tb: Table["slot":{TABLE}]'] + ([extra] if extra else [])
        return f"def {self.name}({', '.join(params)})" + (f" -> {ret}:" if ret else ":")

    def make(self) -> Case:
        r = self.rng
        self.grid = r.random() < 0.25
        self.name = f"fz_{self.seed}_{self.index}"
        self.refusal_line = None
        self.planes()
        depth = int(r.integers(1, 4))
        shape_kind = r.random()
        want: dict = {}
        expect = "match"
        line = None
        what = ""
        if shape_kind < 0.12:
            return self.wrong(depth)
        if shape_kind < 0.14:
            return self.wide_vector()
        self.body_stmts(depth)
        if shape_kind < 0.45 and self.rng.random() < 0.25:  # a scan's running values, perhaps scattered too
            header, what, expect = self.scan(depth, want)
        elif shape_kind < 0.45 and self.rng.random() < 0.2:  # a vector made in the lane, returned
            header, what = self.vector_result(depth, want)
        elif shape_kind < 0.45:  # a per-lane result: a float, or an integer or truth value made a float
            r = self.rng.random()
            e = self.f(depth) if r < 0.8 else (self.i(depth) if r < 0.9 else self.b(depth))
            if e.kind == "i" and self.rng.random() < 0.5:  # or an integer stored into a Mutable[Index] output
                self.lines.append(f"    io = {e.src}")
                header = self.signature("io: Mutable[Index]", None)
                want["io"] = (e.val.astype(np.int64), None, e.fuzzy)
                what = "per-lane integer output"
            elif e.kind == "f" and self.rng.random() < 0.2:  # or compacted: written by key where a mask keeps
                header, what = self.compaction(e, depth, want)
            else:
                self.lines.append(f"    return {e.src}")
                header = self.signature("", "Scalar")
                val = e.val.astype(np.float64)
                want["result"] = (val, e.mag if e.kind == "f" else None, e.fuzzy)
                what = f"per-lane ({e.kind})"
        elif shape_kind < 0.55:  # a Mutable per-lane output, passed with contents and updated in a loop
            start = self.rng.normal(size=self.shape)
            self.data["out"] = start.copy()
            e = self.f(max(depth - 1, 0))
            reps = int(self.rng.integers(1, 4))
            self.lines += [f"    for j in range({reps}):", f"        out = out * 0.5 + {e.src}"]
            v, mag = start.copy(), np.abs(start)
            with np.errstate(all="ignore"):
                for _ in range(reps):
                    v = v * 0.5 + e.val
                    mag = mag * 0.5 + e.mag
            header = self.signature("out: Mutable[Scalar]", None)
            want["out"] = (v, mag, e.fuzzy)
            what = "Mutable per-lane output"
        elif shape_kind < 0.78:  # a reduction, perhaps with a per-lane output beside it
            header, what = self.reduction(depth, want)
        else:
            header, what, expect = self.scatter(depth, want)
        if self.refusal_line is not None:  # range(2.5): Python refuses it, so must hawk, at the for
            expect, line = "kernel_error", self.refusal_line + self.func_lines()
        src = self.module(header)
        return Case(self.seed, self.index, self.name, src, self.plane_args(), expect, want, line, self.tags, what)

    def plane_args(self) -> dict:
        d = dict(self.data)
        if self.grid:
            d["row"] = ROWS
        return d

    def reduction(self, depth: int, want: dict):
        kind = self.pick(["sum", "sum", "mean", "max", "min"])
        e = self.f(depth)
        c = self.b(max(depth - 1, 0)) if self.rng.random() < 0.7 else None
        over = None
        if self.grid and self.rng.random() < 0.5:
            over = self.pick(['"col"', '"row"', "-1"])
        policy = self.pick([None, "auto", "compensated", "ordered"]) if kind in ("sum", "mean") else None
        args = [e.src] + ([f"where={c.src}"] if c is not None else []) + ([f"over={over}"] if over else []) + \
            ([f'policy="{policy}"'] if policy else [])
        mask = c.val if c is not None else np.ones(self.shape, bool)
        axis = None if over is None else (1 if over in ('"col"', "-1") else 0)
        with np.errstate(all="ignore"):
            vals = np.where(mask, e.val, {"sum": 0.0, "mean": 0.0, "max": -np.inf, "min": np.inf}[kind])
            mag = np.where(mask, e.mag + np.abs(e.val), 0.0)
            if kind in ("sum", "mean"):
                if np.any(mask & np.isnan(e.val)):
                    vals = np.where(mask, e.val, 0.0)
                tot = np.sum(vals, axis=axis)
                cnt = np.sum(mask, axis=axis)
                v = tot if kind == "sum" else tot / cnt
                m_ = np.sum(mag, axis=axis) / (1 if kind == "sum" else np.maximum(cnt, 1))
            else:
                v = (np.max if kind == "max" else np.min)(vals, axis=axis)
                m_ = np.max(mag, axis=axis)
        v, m_ = np.atleast_1d(v).astype(np.float64), np.atleast_1d(m_)
        call = f"hawk.{kind}({', '.join(args)})"
        if kind != "mean" and self.frng.random() < 0.4:  # (the funcs' stream: the kernel's draws stay)
            call, v, m_, e = self.fold(e, c, over, mask, axis)
            kind, policy = "fold", None
        if policy == "compensated" and (np.any(mask & np.isinf(e.val)) or np.any(np.isinf(v))):
            self.tags.add("compensated_inf")  # an infinite term or total
        lanes_fz = union(e, c)  # a fuzzy term or mask makes the total (per kept slot) fuzzy
        fz = None if lanes_fz is None else np.atleast_1d(np.any(lanes_fz, axis=axis))
        staged = over is None and kind in ("sum", "mean", "fold") and self.rng.random() < 0.3
        if over is not None and self.frng.random() < 0.7:  # a kept total read later in the body: over the
            # columns a block reduction (a row fits a workgroup), over the rows a cell read by a second stage
            g = self.f(max(depth - 1, 0))
            self.lines.append(f"    s = {call}")
            self.lines.append(f"    return {g.src} * s")
            at = (lambda a: np.asarray(a)[:, None]) if axis == 1 else (lambda a: np.asarray(a)[None, :])
            sv, sm = np.broadcast_to(at(v), self.shape), np.broadcast_to(at(m_), self.shape)
            with np.errstate(all="ignore"):
                want["result"] = (g.val * sv, g.mag * absf(sv) + absf(g.val) * sm,
                                  union(g, None if fz is None else np.broadcast_to(at(fz), self.shape)))
            return self.signature("", "Scalar"), f"staged {kind} over {over}, read in the body"
        if staged:  # read the total later in the body: a second stage
            g = self.f(max(depth - 1, 0))
            self.lines.append(f"    s = {call}")
            self.lines.append(f"    return {g.src} * s")
            with np.errstate(all="ignore"):
                out = g.val * v[0]
                want["result"] = (out, g.mag * absf(v[0]) + absf(g.val) * m_[0],
                                  union(g, None if fz is None else np.broadcast_to(fz[0], self.shape)))
            return self.signature("", "Scalar"), f"staged {kind}"
        self.lines.append(f"    total = {call}")
        want["total"] = (v, m_, fz)
        extra = "total: Mutable[Scalar]"
        if self.rng.random() < 0.4:
            g = self.f(max(depth - 1, 0))
            self.lines.append(f"    return {g.src}")
            want["result"] = (g.val, g.mag, g.fuzzy)
            return self.signature(extra, "Scalar"), f"{kind} over {over} + per-lane"
        return self.signature(extra, None), f"{kind} over {over}"

    # combiners for hawk.reduce: neither associative nor commutative, bounded by their operands (so a fold over
    # many lanes neither overflows nor grows its error), each with NumPy's own arithmetic beside it
    _FOLDS = (("a * {c} + b", lambda c: lambda a, b: a * c + b),
              ("(a + b) * 0.5", lambda c: lambda a, b: (a + b) * 0.5),
              ("a - b", lambda c: lambda a, b: a - b),
              ("m.sqrt(a * a + b * b)", lambda c: lambda a, b: np.sqrt(a * a + b * b)),
              ("m.max(a, b * {c})", lambda c: lambda a, b: np.maximum(a, b * c)))

    def scan_func(self, exclusive: bool):
        """A @hawk.func combiner for hawk.scan, as (its name, NumPy's step, the identity= an exclusive scan takes):
        one of the folds' combiners (bounded by its operands). From the funcs' stream."""
        r = self.frng
        src, make = self._FOLDS[int(r.integers(len(self._FOLDS)))]
        k = float(r.choice([0.5, -0.5, 0.75]))
        name = f"fold{self.nfunc}"
        self.nfunc += 1
        self.funcs.append(f"@hawk.func\ndef {name}(a, b):\n    return {src.format(c=k)}\n\n\n")
        return name, make(k), float(r.choice([0.0, 1.5, -2.0])) if exclusive else None

    def fold(self, e, c, over, mask, axis):
        """`hawk.reduce` of `e` with a fresh @hawk.func combiner (where= and over= as drawn, identity= with where=),
        and its value and error scale per kept slot by the documented order: over every lane, each 1024-lane
        block's kept lanes folded left to right, then the blocks' results in block order; keeping axes, each
        slot's lanes in lane order. From the funcs' stream."""
        r = self.frng
        builtin = r.random() < 0.35
        if builtin:  # a hawk.math built-in: its identity for an empty slice, no identity= taken
            name, op, unit, e = self.builtin_fold(e)
        else:
            src, make = self._FOLDS[int(r.integers(len(self._FOLDS)))]
            k = float(r.choice([0.5, -0.5, 0.75]))
            op = make(k)
            name = f"fold{self.nfunc}"
            self.nfunc += 1
            self.funcs.append(f"@hawk.func\ndef {name}(a, b):\n    return {src.format(c=k)}\n\n\n")
        vals, keep = np.asarray(e.val, np.float64), np.broadcast_to(mask, self.shape)
        if axis is None:
            slots = [(vals.reshape(-1), keep.reshape(-1), 1024)]
        else:
            moved = np.moveaxis(vals, axis, -1), np.moveaxis(keep, axis, -1)  # (each kept slot's lanes in order)
            slots = [(moved[0][j], moved[1][j], None) for j in range(moved[0].shape[0])]
        # identity= whenever a slice may be empty: under where= (the runners draw planes of their own, on which a
        # mask may keep nothing), and at random otherwise
        identity = None if builtin else \
            float(r.choice([0.0, 1.5, -2.0])) if c is not None or r.random() < 0.3 else None
        out = []
        with np.errstate(all="ignore"):
            for xs, kp, block in slots:
                step = block or max(xs.size, 1)
                parts = [_left_fold(op, xs[b:b + step][kp[b:b + step]]) for b in range(0, xs.size, step)]
                acc = _left_fold(op, [p for p in parts if p is not None])
                out.append((unit if builtin else identity) if acc is None else acc)
            mag = np.where(mask, e.mag + np.abs(e.val), 0.0)
            if name == "m.mul":  # a product's error scale: the product of the factors' magnitudes (1 if none)
                m_ = 2.0 * np.prod(np.where(mask, mag, 1.0), axis=axis)
            else:
                m_ = 2.0 * (np.sum(mag, axis=axis) + (abs(identity) if identity is not None else 0.0))
        args = [name, e.src] + ([f"where={c.src}"] if c is not None else []) + \
            ([f"over={over}"] if over else []) + ([f"identity={identity!r}"] if identity is not None else [])
        return f"hawk.reduce({', '.join(args)})", np.array(out, np.float64), np.atleast_1d(m_), e

    def builtin_fold(self, e):
        """A hawk.math combiner for hawk.reduce, as (name, NumPy fold step, empty-slice value, the folded value):
        m.add, m.mul, m.min, m.max of `e`, or m.land / m.lor of whether it is positive (the result a float 1.0 or
        0.0; lanes near 0 are fuzzy, as a comparison's). From the funcs' stream."""
        names = ["m.add", "m.mul", "m.min", "m.max", "m.land", "m.lor"]
        name = names[int(self.frng.integers(len(names)))]
        step, unit = {"m.add": (lambda a, b: a + b, 0.0), "m.mul": (lambda a, b: a * b, 1.0),
                      "m.min": (np.minimum, np.inf), "m.max": (np.maximum, -np.inf),
                      "m.land": (lambda a, b: float(bool(a) and bool(b)), 1.0),
                      "m.lor": (lambda a, b: float(bool(a) or bool(b)), 0.0)}[name]
        if name in ("m.land", "m.lor"):
            with np.errstate(all="ignore"):
                jump = None if e.sure else near(absf(e.val), e.mag + absf(e.val))
                e = E(f"({e.src}) > 0.0", (e.val > 0.0).astype(np.float64), "f", np.zeros(self.shape), False,
                      union(e, jump), True)
        return name, step, unit, e

    def scatter(self, depth: int, want: dict):
        policy = self.pick([None, "auto", "compensated", "plain", "ordered"])
        mode = "=" if self.rng.random() < 0.25 else "+="
        if mode == "=" and policy == "ordered":
            policy = None
        v = self.f(depth)
        r = self.rng.random()
        sorted_keys = r < 0.12  # (keys from a Sorted[Index] plane: its runs summed in registers, sorted_runs.py)
        if sorted_keys:  # (drawn from an rng of their own: the case's other draws stay as they were)
            ks = np.sort(np.random.default_rng([self.seed, self.index, 3]).integers(-1, BINS, self.shape), axis=None)
            self.data["ks"] = ks.reshape(self.shape)
            key = E("ks", self.data["ks"], "i")
        elif r < 0.3:
            key = E("kb", self.data["kb"].astype(np.int64), "i")
        elif r < 0.6:
            a = self.i(max(depth - 1, 0))
            key = E(f"({a.src}) % B", np.mod(a.val, BINS), "i", None, False, a.fuzzy)
        elif r < 0.85:
            a = self.f(max(depth - 1, 0))
            with np.errstate(all="ignore"):
                kv = np.where(np.isnan(a.val), 0, np.clip(np.floor(a.val), 0, BINS - 1)).astype(np.int64)
            key = E(f"m.index({a.src}, B)", kv, "i", None, False, union(a, self.jump_int(a)))
        else:  # may fall outside the sink: key -1 adds (or stores) nothing, any other outside key is an error
            c = int(self.rng.integers(1, 3))
            key = E(f"kb - {c}", self.data["kb"].astype(np.int64) - c, "i")
        loop = self.rng.random() < 0.25  # (stores too: a lane's later pass wins over its earlier one)
        call = f"hawk.scatter(bins{', policy=' + repr(policy).replace(chr(39), chr(34)) if policy else ''})"
        carried = None
        # a Vector[2] payload, (v, v * c) with c a power of two (exact: the second component's reference is the
        # first's times c): drawn from an rng of its own, so the case's other draws stay as they were
        own = np.random.default_rng([self.seed, self.index, 4])
        scale = float(own.choice([0.5, -2.0, -0.25])) if own.random() < VECTOR_SCATTERS else None
        value = v.src if scale is None else f"m.vec({v.src}, ({v.src}) * {scale})"
        if loop:
            self.lines += ["    for j in range(2):", f"        {call}[({key.src} + j) % B] {mode} {value}"]
            keys = [np.mod(key.val + j, BINS) for j in range(2)]
            if self.rng.random() < 0.4:  # the loop also carries a value read after a total: a later stage
                carried = f"t{self.tmp}"  # recomputes the loop for it, and must not scatter again
                self.tmp += 1
                self.lines.insert(len(self.lines) - 2, f"    {carried} = 0.0")
                self.lines += [f"        {carried} = {carried} + {v.src}", f"    return {carried} - hawk.max(y)"]
                with np.errstate(all="ignore"):
                    want["result"] = (v.val * 2.0 - np.max(self.data["y"]),
                                      2.0 * (v.mag + np.abs(v.val)) + np.max(np.abs(self.data["y"])), v.fuzzy)
        else:
            self.lines.append(f"    {call}[{key.src}] {mode} {value}")
            keys = [key.val]
        again = None  # the same sink again after a total is read: a second stage adds to what the first finished
        if not loop and mode == "+=" and self.rng.random() < 0.25 and scale is None:
            self.lines.append(f"    {call}[{key.src}] += ({v.src}) * 0.5 - hawk.max(y)")
            with np.errstate(all="ignore"):
                again = (v.val * 0.5 - np.max(self.data["y"]), 0.5 * (v.mag + np.abs(v.val)) +
                         np.max(np.abs(self.data["y"])))
        start = self.rng.normal(size=BINS) if self.rng.random() < 0.5 else None
        comps = [1.0] if scale is None else [1.0, scale]  # (a Vector[2] payload's second component is v * c)
        if start is not None:
            self.data["bins"] = start.copy() if scale is None else np.stack([start * c for c in comps])
        expect = "match"
        outside = [kk for kk in keys if np.any((kk < 0) | (kk >= BINS))]
        if outside:
            bad = np.concatenate([kk.reshape(-1) for kk in outside])
            bad = bad[(bad < 0) | (bad >= BINS)]
            if np.all(bad == -1):
                self.tags.add("key_minus1")
            else:
                expect = "input_error"
        outs, mags = [], []
        with np.errstate(all="ignore"):  # in the forward's order: lane by lane, each lane's passes in turn
            flat_ks = [kk.reshape(-1) for kk in keys]
            for c in comps:  # (each component from its own prior, its terms scaled as the kernel scales them)
                out = np.zeros(BINS) if start is None else start * c
                mag = np.abs(out)
                stages = [(v.val.reshape(-1) * c, (v.mag + np.abs(v.val)).reshape(-1) * abs(c))]
                if again is not None:
                    stages.append((np.broadcast_to(again[0], v.val.shape).reshape(-1),
                                   np.broadcast_to(again[1], v.val.shape).reshape(-1)))
                for flat_v, flat_m in stages:
                    for lane in range(flat_ks[0].size):
                        for flat_k in flat_ks:
                            s = flat_k[lane]
                            if not 0 <= s < BINS:
                                continue
                            if mode == "+=":
                                out[s] += flat_v[lane]
                                mag[s] += flat_m[lane]
                            else:
                                out[s], mag[s] = flat_v[lane], flat_m[lane]
                outs.append(out)
                mags.append(mag)
        out, mag = (outs[0], mags[0]) if scale is None else (np.stack(outs), np.stack(mags))
        if policy in (None, "auto", "compensated") and (np.any(np.isinf(v.val)) or np.any(np.isinf(out)) or
                                                        (again is not None and np.any(np.isinf(again[0])))):
            self.tags.add("compensated_inf")  # an infinite term or total (a scatter's "auto" is compensated)
        fz = None
        if key.fuzzy is not None and np.any(key.fuzzy):  # a lane may add into another bin: no bin is sure
            fz = np.ones(BINS, bool)
        elif v.fuzzy is not None and np.any(v.fuzzy):
            fz = np.zeros(BINS, bool)
            for kk in keys:
                sel = kk[v.fuzzy]
                fz[sel[(sel >= 0) & (sel < BINS)]] = True
        want["bins"] = (out, mag, fz)
        what = f"scatter {mode} policy={policy}" + (" in a for loop" if loop else "") + \
            (" + a carried value after a total" if carried else "") + (" + again after a total" if again else "")
        what += " by sorted keys" if sorted_keys else ""
        what += f" of Vector[2] (v, v * {scale})" if scale is not None else ""
        extra = 'bins: Mutable["bin":B]' + (", ks: Sorted[Index]" if sorted_keys else "")
        return self.signature(extra, "Scalar" if carried else None), what, expect

    def compaction(self, e, depth: int, want: dict):
        """`e` of the lanes a mask keeps, written by key into an output (left out: the lane shape, zeros) at the
        positions a scan numbers them, in flat lane order: distinct positions, so every value is one lane's.
        A fuzzy mask may move any position: then every one is fuzzy."""
        c = self.b(max(depth - 1, 0))
        self.lines += [f"    kq = {c.src}", "    aq = m.where(kq, hawk.scan(m.where(kq, 1, 0)) - 1, -1)",
                       f"    hawk.scatter(ko)[aq] = {e.src}"]
        keep = np.broadcast_to(c.val, self.shape).reshape(-1)
        n = int(keep.sum())
        out, mag = np.zeros(keep.size), np.zeros(keep.size)
        out[:n] = np.broadcast_to(e.val, self.shape).reshape(-1)[keep]
        mag[:n] = np.broadcast_to(e.mag + absf(e.val), self.shape).reshape(-1)[keep]
        fz = None
        if c.fuzzy is not None and np.any(c.fuzzy):
            fz = np.ones(self.shape, bool)
        elif e.fuzzy is not None and np.any(e.fuzzy):
            fz = np.zeros(keep.size, bool)
            fz[:n] = np.broadcast_to(e.fuzzy, self.shape).reshape(-1)[keep]
            fz = fz.reshape(self.shape)
        want["ko"] = (out.reshape(self.shape), mag.reshape(self.shape), fz)
        return self.signature("ko: Mutable[Scalar]", None), "compaction written by key"

    def scan(self, depth: int, want: dict):
        """`c = hawk.scan(e, ...)`: add, mul, min or max, float or integer, maybe exclusive, reversed or segmented
        (reset by an integer test: never fuzzy), returned and maybe scattered into the bins by `kb`. Lanes are
        fewer than a scan block, so the reference is NumPy's sequential fold in flat lane order (docs/semantics.md
        "Scans"); a fuzzy term makes every lane after it (in the scan's direction) fuzzy."""
        r = self.rng
        op = self.pick(["add", "add", "min", "max"])
        if op == "add" and self.frng.random() < 0.2:  # a running product (the funcs' stream: the kernel's draws stay)
            op = "mul"
        e = self.f(depth) if r.random() < 0.75 else self.i(depth)
        excl, rev = r.random() < 0.3, r.random() < 0.25
        reset = r.random() < 0.3
        keyed = not reset and r.random() < 0.3  # by=kb - 1: B - 1 keys and lanes left out (key -1)
        shift = 2 if keyed and r.random() < 0.15 else 1  # by=kb - 2: a key of -2 refuses the run
        func_ident = fname = None
        if op == "add" and e.kind == "f" and not keyed and self.frng.random() < 0.4:  # a scan by a func of ours
            op = "func"
            fname, fold, func_ident = self.scan_func(excl)
        args = [e.src] + ([f"op=m.{op}"] if op not in ("add", "func") else []) + \
            ([f"op={fname}"] if op == "func" else []) + (["exclusive=True"] if excl else []) + \
            ([f"identity={func_ident!r}"] if op == "func" and excl else []) + \
            (["reverse=True"] if rev else []) + (["reset=k % 3 == 0"] if reset else []) + \
            ([f"by=kb - {shift}, keys={BINS - 1}"] if keyed else [])
        flags = (self.data["k"] % 3 == 0).reshape(-1) if reset else np.zeros(e.val.size, bool)
        keys = (self.data["kb"].astype(np.int64) - 1).reshape(-1) if keyed else np.zeros(e.val.size, np.int64)
        expect = "input_error" if shift == 2 and np.any(self.data["kb"] == 0) else "match"
        val = np.broadcast_to(e.val, self.shape).reshape(-1)
        mag = np.broadcast_to(e.mag + np.abs(e.val), self.shape).reshape(-1) if e.kind == "f" else np.zeros(val.size)
        if op == "func":
            ident = func_ident
        elif e.kind == "f":
            ident = {"add": -0.0, "mul": 1.0, "min": np.inf, "max": -np.inf}[op]
        else:
            ident = {"add": 0, "mul": 1, "min": np.iinfo(np.int64).max, "max": np.iinfo(np.int64).min}[op]
        if op != "func":
            fold = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}[op]
        out = np.empty(val.size, dtype=np.float64 if e.kind == "f" else np.int64)
        scale = np.zeros(val.size)
        order = range(val.size - 1, -1, -1) if rev else range(val.size)
        runs: dict = {}  # key -> (running value, its magnitude); one key (0) when not keyed
        for i in order:
            # a forward segment starts at a flagged lane; run down, the lane below a flagged one starts afresh
            if flags[i] if not rev else (i + 1 < val.size and flags[i + 1]):
                runs.clear()
            if keys[i] < 0:  # a lane left out: the identity, and nothing added
                out[i], scale[i] = ident, 0.0
                continue
            run, run_mag, count = runs.get(int(keys[i]), (None, 0.0, 0))
            before, before_mag = (ident, 0.0) if run is None else (run, run_mag * count)
            with np.errstate(all="ignore"):  # (int64 products wrap, as the kernel's do)
                run = val[i] if run is None else fold(run, val[i])
                # a product's error: each factor's relative error, so the factors' magnitudes' product per factor;
                # a func's (bounded by its operands, as fold's): the sum of the magnitudes folded
                run_mag = run_mag + mag[i] if op == "add" else run_mag + mag[i] + abs(val[i]) if op == "func" else \
                    (mag[i] if count == 0 else run_mag * mag[i]) if op == "mul" else max(run_mag, mag[i])
            count += 1
            runs[int(keys[i])] = (run, run_mag, count)
            out[i] = before if excl else run
            if op == "mul":
                scale[i] = before_mag if excl else run_mag * count
            elif op == "func":  # (twice the magnitudes, as fold's; an exclusive run's first lane: the identity)
                scale[i] = 2.0 * ((before_mag / max(count - 1, 1)) if excl else run_mag)
            else:
                scale[i] = (run_mag - (mag[i] if op == "add" else 0.0)) if excl else run_mag
        fz = None
        if e.fuzzy is not None and np.any(e.fuzzy):
            lanes = np.broadcast_to(e.fuzzy, self.shape).reshape(-1)
            spread = np.logical_or.accumulate(lanes[::-1] if rev else lanes)
            fz = (spread[::-1] if rev else spread).reshape(self.shape)
        self.lines.append(f"    c = hawk.scan({', '.join(args)})")
        res = out.astype(np.float64).reshape(self.shape)
        self.lines.append("    return c" if e.kind == "f" else "    return m.to_float(c)")
        want["result"] = (res, scale.reshape(self.shape) if e.kind == "f" else None, fz)
        what = f"scan op={op} {e.kind} exclusive={excl} reverse={rev} reset={reset} keyed={keyed}"
        if r.random() < 0.4:  # the running values scattered: a stage that scatters a scan's values
            self.lines.insert(len(self.lines) - 1, "    hawk.scatter(bins)[kb] += " +
                              ("c" if e.kind == "f" else "m.to_float(c)"))
            bins = np.zeros(BINS)
            bmag = np.zeros(BINS)
            for s, v, m_ in zip(self.data["kb"].reshape(-1).tolist(), res.reshape(-1).tolist(),
                                scale.tolist(), strict=True):
                bins[s] += v
                bmag[s] += m_ + abs(v)
            bfz = np.ones(BINS, bool) if fz is not None else None
            want["bins"] = (bins, bmag if e.kind == "f" else bmag + 1.0, bfz)
            what += " + scatter"
            return self.signature('bins: Mutable["bin":B]', "Scalar"), what, expect
        return self.signature("", "Scalar"), what, expect

    def vector_result(self, depth: int, want: dict):
        """`return m.vec(e0, ..., ek)` (2 to 12 components: wider than 8 is a wide payload), maybe times a float
        or plus the Vector[3] plane's components summed: a Vector[k] output, components first."""
        k = int(self.pick([2, 3, 4, 5, 9, 12]))
        parts = [self.f(max(depth - 1, 0)) for _ in range(k)]
        src = f"m.vec({', '.join(p.src for p in parts)})"
        val = np.stack([np.broadcast_to(p.val, self.shape) for p in parts])
        mag = np.stack([np.broadcast_to(p.mag, self.shape) for p in parts])
        fz = [p.fuzzy for p in parts]
        form = self.rng.random()
        with np.errstate(all="ignore"):
            if form < 0.35:  # scaled by a lane value
                e = self.f(max(depth - 1, 0))
                src = f"{src} * ({e.src})"
                mag = mag * absf(e.val) + absf(val) * e.mag
                val = val * e.val
                fz = [union(f, e) for f in fz]
            elif form < 0.55:  # plus a float made of the Vector[3] plane
                src = f"{src} + v.sum()"
                vs = self.data["v"].sum(axis=0)
                val, mag = val + vs, mag + absf(self.data["v"]).sum(axis=0) + absf(val)
        lanes = [np.zeros(self.shape, bool) if f is None else np.broadcast_to(f, self.shape) for f in fz]
        self.lines.append(f"    return {src}")
        want["result"] = (val, mag, np.stack(lanes) if any(f is not None for f in fz) else None)
        return self.signature("", f"Vector[{k}]"), f"Vector[{k}] made in the lane"

    def wide_vector(self) -> Case:
        """A Vector[1024] plane folded in the lane."""
        self.tags.add("vector_1024")
        w = self.rng.normal(size=(1024, N))
        src = (_HEAD + "@hawk.kernel\n" + f"def {self.name}(w: Vector[1024], x: Scalar) -> Scalar:\n"
               "    return w.sum() * x\n")
        x = self.rng.normal(size=N)
        val = w.sum(axis=0) * x
        mag = np.abs(w).sum(axis=0) * np.abs(x)
        return Case(self.seed, self.index, self.name, src, {"w": w, "x": x}, "match",
                    {"result": (val, mag, None)}, None, self.tags, "Vector[1024]")

    _WRONG = [
        ("bad name", "    t99 = zz_nowhere + 1.0"),
        ("bad hawk.math name", "    t99 = m.no_such_fn(x)"),
        ("float lane index", "    t99 = x.at(1.5)"),
        ("float Index key", "    t99 = k.at(x)"),
        ("assign an input", "    x = 2.0"),
        ("while", "    while x > 0.0:\n        pass"),
        ("list", "    t99 = [x, y]"),
        ("lambda", "    t99 = lambda: x"),
        ("dict", "    t99 = {1: x}"),
        ("index a scalar", "    t99 = x[0]"),
        ("reduce in an if", "    if x > 0.0:\n        t99 = hawk.sum(x)"),
        ("where arity", "    t99 = m.where(x > 0.0, 1.0)"),
        ("sqrt arity", "    t99 = m.sqrt(x, y)"),
        ("del", "    del k"),
        ("import", "    import os"),
        ("matmul", "    t99 = x @ y"),
        ("is", "    t99 = m.where(x is y, 1.0, 0.0)"),
        ("attribute", "    t99 = x.foo"),
        ("print", "    t99 = print(x)"),
        ("range value", "    t99 = range(3)"),
        ("for over list", "    for j in [1, 2]:\n        pass"),
        ("shape clash", "    t99 = m.vec(x, y) + m.vec(x, y, x)"),
        ("logic of floats", "    t99 = m.land(x, y)"),
        ("invert float", "    t99 = ~x"),
        ("shift", "    t99 = k << 2"),
        ("string arithmetic", "    t99 = \"a\" + x"),
        ("scatter into a plane", "    hawk.scatter(x)[0] += 1.0"),
        ("where not bool", "    t99 = hawk.sum(x, where=x)"),
        ("over bad axis", "    t99 = hawk.sum(x, over=\"nope\")"),
        ("try", "    try:\n        t99 = x\n    except Exception:\n        t99 = y"),
        ("with", "    with x:\n        pass"),
        ("starred", "    t99 = m.max(*x)"),
        ("huge int", "    t99 = k + 123456789012345678901234567890"),
        ("string constant call", "    t99 = m.sqrt(\"x\")"),
        ("bad policy", "    t99 = hawk.sum(x, policy=\"fast\")"),
        ("global", "    global N"),
        ("walrus", "    t99 = (q := x)"),
        ("set", "    t99 = {x, y}"),
        ("fstring", "    t99 = f\"{x}\""),
        ("chained assign", "    t98 = t99 = x"),
        ("yield", "    yield x"),
        ("nonlocal-free name in loop", "    for j in range(3):\n        t99 = zz_nowhere * j"),
    ]

    def wrong(self, depth: int) -> Case:
        what, stmt = self.pick(self._WRONG)
        if what == "huge int":
            self.tags.add("huge_const")
        self.body_stmts(max(depth - 1, 0))
        pos = len(self.lines)
        self.lines.append(stmt)
        e = self.f(max(depth - 1, 0))
        self.lines.append(f"    return {e.src}")
        header = self.signature("", "Scalar")
        src = self.module(header)
        first = _HEAD_LINES + 3 + sum(s.count("\n") + 1 for s in self.lines[:pos])
        if what in ("reduce in an if", "nonlocal-free name in loop"):
            first += 1  # the error is the inner statement's
        if self.refusal_line is not None:  # a range(2.5) before the wrong statement is refused first
            first = min(first, self.refusal_line)
        first += self.func_lines()
        return Case(self.seed, self.index, self.name, src, self.plane_args(), "kernel_error", {}, first,
                    self.tags, f"wrong: {what}")


def _left_fold(op, items):
    """op(op(x0, x1), x2)...: the first item taken as it is; None for no items."""
    acc = None
    for x in items:
        acc = x if acc is None else op(acc, x)
    return acc


def case(seed: int, index: int) -> Case:
    """Case `index` of `seed` (NumPy's overflow and invalid-value warnings are part of the reference: quiet)."""
    with np.errstate(all="ignore"):
        return Gen(seed, index).make()


# ---- checking one case (in the runner process) -------------------------------------------------------------


def close(got: np.ndarray, want: np.ndarray, mag: np.ndarray | None, fuzzy: np.ndarray | None) -> str | None:
    """None when `got` matches `want`: exactly (mag None), or within REL of the error scale; NaN meets NaN and
    infinities match exactly. Fuzzy lanes (within rounding of a jump) are not compared."""
    if np.size(got) != np.size(want):
        return f"shape {np.shape(got)} != {want.shape}"
    got = np.asarray(got, dtype=np.float64).reshape(want.shape)
    rel = REL
    if mag is None:
        bad = ~((got == want) | (np.isnan(got) & np.isnan(want)))
    else:
        with np.errstate(all="ignore"):
            tol = rel * (np.broadcast_to(mag, want.shape) + np.abs(want)) + 1e-300
            fin = np.isfinite(want) & np.isfinite(tol)
            bad = np.where(np.isnan(want), ~np.isnan(got),
                           np.where(fin, ~(np.abs(got - want) <= tol),
                                    np.where(np.isinf(want), got != want, False)))
    if fuzzy is not None:
        bad = bad & ~np.broadcast_to(fuzzy, want.shape)
    if np.any(bad):
        j = np.flatnonzero(bad.reshape(-1))
        return (f"{j.size} of {want.size} differ; first at {j[:3].tolist()}: got "
                f"{got.reshape(-1)[j[:3]].tolist()} want {want.reshape(-1)[j[:3]].tolist()}")
    return None


def load_kernel(c: Case, path: str):
    """Write the case's module to `path` and import it (kernels are read from their source file); the kernel."""
    with open(path, "w") as fh:
        fh.write(c.source)
    spec = importlib.util.spec_from_file_location(c.name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, c.name)


def check(c: Case, workdir: str, target: str = "host") -> dict:
    """Write the case's module, import it (which compiles the kernel's front end), run it, compare."""
    import eagle
    import hawk

    path = os.path.join(workdir, f"{c.name}.py")
    out = record(c)
    given = fresh(c.planes)
    try:
        kernel = load_kernel(c, path)
        res = eagle.deploy(kernel, target=target).run(**given)
    except hawk.KernelError as exc:
        msg = str(exc)
        if exc.line is None or not msg.startswith(f"{path}:{exc.line}:"):
            return {**out, "status": "fail", "why": f"KernelError without file:line: {msg}"}
        if c.expect == "kernel_error":
            if c.line is not None and exc.line != c.line:
                return {**out, "status": "fail", "why": f"KernelError at line {exc.line}, not {c.line}: {msg}"}
            return {**out, "status": "ok", "why": "refused"}
        return {**out, "status": "fail", "why": f"valid kernel refused: {msg}"}
    except eagle.InputError as exc:
        changed = [k for k, v in given.items() if isinstance(v, np.ndarray) and
                   np.asarray(v).tobytes() != np.asarray(c.planes[k]).tobytes()]
        if changed:  # a refused run leaves every array the caller passed as it was
            return {**out, "status": "fail", "why": f"refused, but the caller's '{changed[0]}' was written: {exc}"}
        if c.expect == "input_error" and ("'bins'" in str(exc) or "keyed hawk.scan" in str(exc)):
            return {**out, "status": "ok", "why": "key refused"}
        return {**out, "status": "fail", "why": f"InputError: {exc}"}
    except Exception as exc:  # anything else is a bug: the kind and where it came from
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        return {**out, "status": "fail",
                "why": f"{type(exc).__name__}: {str(exc)[:300]} (at {os.path.basename(tb.filename)}:{tb.lineno})"}
    if c.expect == "kernel_error":
        return {**out, "status": "fail", "why": "expected a KernelError, the kernel compiled and ran"}
    if c.expect == "input_error":
        return {**out, "status": "fail", "why": "expected an InputError for a key outside the sink, it ran"}
    got = res if isinstance(res, dict) else {next(iter(c.want)): res}
    if sorted(got) != sorted(c.want):
        return {**out, "status": "fail", "why": f"outputs {sorted(got)} != {sorted(c.want)}"}
    for name, (val, mag, fuzzy) in c.want.items():
        why = close(np.asarray(got[name]), np.asarray(val, dtype=np.float64), mag, fuzzy)
        if why:
            return {**out, "status": "fail", "why": f"{name}: {why}"}
    return {**out, "status": "ok", "why": "match"}


def fresh(planes: dict) -> dict:
    """Copies of a case's arrays (a run may write the outputs and sinks it is given), numbers as they are."""
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in planes.items()}


def named(res, c: Case) -> dict[str, np.ndarray]:
    """A run's results by name (a kernel with one output hands back its array alone)."""
    if isinstance(res, dict):
        return {k: np.asarray(v) for k, v in res.items()}
    return {next(iter(c.want)): np.asarray(res)}


def runner_args(doc: str) -> argparse.ArgumentParser:
    """The options a runner script takes: which cases (seed, start, count), where to write them, which target."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--target", default=os.environ.get("HAWK_FUZZ_TARGET", "host"), help="eagle target to run on")
    return ap


def record(c: Case) -> dict:
    """The head of a case's JSON line: its number, what it is, its known-class tags."""
    return {"index": c.index, "what": c.what, "tags": sorted(c.tags)}


# The refusals a generated kernel may meet by design, by the words that say why: a kernel with only integer results
# has nothing to differentiate, and neither a keyed min/max scan (or order="key") nor a product or a fold by a
# func keeping more than MAX_KEYS slots of trailing lane axes has a gradient rule; a sharded run cannot split a
# plane read with .at(...) at any lane, nor an output written by key (positions, not lanes) that the caller leaves
# out inside shard_map (every shard stores into the whole array passed; its gradient is refused), nor a fold keeping
# lane axes other than a leading block, nor one keeping those without
# identity=, nor a row cell (a row fold read later in the body) beside scans or folds over every lane (whole
# blocks; beside `lane.row` and neighbours it runs, and differentiates, since 2026-12-07:
# eagle/distributed/rows.py). A runner that meets any other refusal reports a failure, even when it names the
# kernel: an internal error can name the kernel too.
REFUSALS = (
    r"the kernel has no float result to differentiate",
    r"the reverse differentiates a keyed hawk\.scan \(by=\) only with op=m\.add, m\.mul or a @hawk\.func and "
    r"order=\"lane\"",
    r"the reverse differentiates (a product \(hawk\.reduce with m\.mul\)|a fold by a @hawk\.func) keeping lane axes "
    r"that do not lead the grid's axes for at most \d+ slots",
    r"keeps lane axes \[.*\] and has no identity=: an empty slot would be refused by the one shard holding it",
    r"hawk\.reduce folds keep none\), so shards cannot combine it",
    r"keeps the leading lane axis, and the kernel scans or folds over every lane, so its shards run whole blocks",
    r"is read with \.at\(\.\.\.\) at a \w+ that is not this lane's own \w+ plus a constant, which can reach any "
    r"lane",
    r"written by key \(hawk\.scatter\(\w+\)\[k\] = v\), has positions, not lanes, so sharded runs",
    r"written by key \(hawk\.scatter\(\w+\)\[k\] = v\), its positions are not lanes: a sharded run writes into "
    r"the whole array passed",
    # a launch bound to a lane range (fuzz_reverse.py's range mode) whose lanes read other lanes or coordinates
    r"bound to lanes \[\d+, \d+\) of \d+ \(base=/count=\), and (its adjoint runs in \d+ stages|cell '\w+' keeps a "
    r"lane axis)",
)


# A runner that draws its own planes may draw keys outside a sink: refused as the forward refuses any such run.
KEYS_OUTSIDE = r"holds key -?\d+, outside "


def known_refusal(exc: BaseException, also: tuple[str, ...] = ()) -> bool:
    """Whether `exc` says one of REFUSALS' reasons or `also`'s (and nothing says it is internal)."""
    text = str(exc)
    return "internal error" not in text and any(re.search(p, text) for p in REFUSALS + also)


def raised(c: Case, exc: BaseException, refusals: tuple = ()) -> dict:
    """A runner's record for an exception: a refusal of a type in `refusals` that names the kernel and gives one
    of REFUSALS' reasons is "refused" (one without the name, or for another reason, fails); anything else is a
    bug: its kind and where it came from."""
    out = record(c)
    if isinstance(exc, refusals):
        if c.name not in str(exc):
            return {**out, "status": "fail", "why": f"refusal without the kernel's name: {str(exc)[:300]}"}
        if not known_refusal(exc):
            return {**out, "status": "fail", "why": f"refused for a reason no generated kernel should meet: "
                                                    f"{str(exc)[:300]}"}
        return {**out, "status": "refused", "why": str(exc)[:200]}
    tb = traceback.extract_tb(exc.__traceback__)[-1]
    return {**out, "status": "fail",
            "why": f"{type(exc).__name__}: {str(exc)[:300]} (at {os.path.basename(tb.filename)}:{tb.lineno})"}


def workdir_of(a: argparse.Namespace) -> str:
    """A runner's working directory: --dir (made if missing), else a fresh temporary one."""
    import tempfile

    workdir = a.dir or tempfile.mkdtemp(prefix="hawk_fuzz_")
    os.makedirs(workdir, exist_ok=True)
    return workdir


def run_cases(check_fn, doc: str, argv=None) -> int:
    """A runner script's loop (tests/fuzz_reverse.py, fuzz_threads.py, fuzz_bridges.py, fuzz_artifacts.py):
    `check_fn(case, workdir, target)` on each case of the range that must run (the others are skipped), one JSON
    line each, after a line naming the case it begins (for crash reports)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository: hawk, eagle
    a = runner_args(doc).parse_args(argv)
    workdir = workdir_of(a)
    for i in range(a.start, a.start + a.count):
        print(json.dumps({"begin": i}), flush=True)
        c = case(a.seed, i)
        if c.expect != "match":
            print(json.dumps({**record(c), "status": "skipped", "why": f"expects {c.expect}"}), flush=True)
            continue
        with np.errstate(all="ignore"):
            print(json.dumps(check_fn(c, workdir, a.target)), flush=True)
    return 0


def run_drawn_cases(case_of, check_fn, doc: str, argv=None, doors: tuple[str, ...] = ()) -> int:
    """The loop of a runner that draws cases of its own (tests/fuzz_algorithms.py, fuzz_exact_scatters.py,
    fuzz_exact_sums.py): `case_of(seed, i)` each case of the range; with --show, print what each runs; else one
    JSON line each from `check_fn(case, workdir, target)` (and `door=`, the --door chosen, for a runner that
    names `doors`: the first is the default), after a line naming the case it begins (for crash reports)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
    ap = runner_args(doc)
    ap.add_argument("--show", action="store_true", help="print what each case runs instead of running it")
    if doors:
        ap.add_argument("--door", choices=doors, default=doors[0], help="how each case runs")
    a = ap.parse_args(argv)
    workdir = workdir_of(a)
    through = {"door": a.door} if doors else {}
    for i in range(a.start, a.start + a.count):
        c = case_of(a.seed, i)
        if a.show:
            print(f"# case {a.seed}:{i}: {c.what}")
            continue
        print(json.dumps({"begin": i}), flush=True)
        with np.errstate(all="ignore"):
            print(json.dumps(check_fn(c, workdir, a.target, **through)), flush=True)
    return 0


def main(argv=None) -> int:
    ap = runner_args(__doc__)
    ap.add_argument("--show", action="store_true", help="print the cases' modules instead of running them")
    ap.add_argument("--skip", default=os.environ.get("HAWK_FUZZ_SKIP", ""),
                    help="comma-separated known-class tags to leave out (see KNOWN)")
    a = ap.parse_args(argv)
    skip = {t for t in a.skip.split(",") if t}
    workdir = workdir_of(a)
    for i in range(a.start, a.start + a.count):
        c = case(a.seed, i)
        if a.show:
            print(f"# case {a.seed}:{i} expect={c.expect} line={c.line} tags={sorted(c.tags)} ({c.what})")
            print(c.source)
            continue
        if c.tags & skip:
            print(json.dumps({"index": i, "status": "skipped", "tags": sorted(c.tags)}), flush=True)
            continue
        print(json.dumps({"begin": i}), flush=True)
        print(json.dumps(check(c, workdir, a.target)), flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
