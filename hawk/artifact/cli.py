"""The artifact command line: `python -m hawk.artifact` or `hawk-artifact`.

    hawk-artifact build [--bundle] [--target host] [--dtype float64 ...] [--index-dtype PLANE=int64 ...]
                        [--cpu native|portable] [--reverse [--reverse-extents N,M] [--reverse-positions OUT=N,...]]
                        --out DIR module:kernel ...
    hawk-artifact show DIR NAME

A `module` is a dotted module importable from the current directory, or a path to a .py file. Errors print one
line, `hawk-artifact: error: ...`, and exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

PROG = "hawk-artifact"


class UsageError(Exception):
    """A one-line error for the user; the command exits with status 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Publish hawk kernels ahead of time, and inspect published ones.",
        epilog="See docs/artifacts.md for what an artifact directory holds.")
    sub = p.add_subparsers(dest="command", metavar="{build,show}")
    sub.required = True
    b = sub.add_parser(
        "build", help="compile kernels into an artifact directory",
        description="Compile each module:kernel into DIR: one binary per (stage, dtype, target) and a JSON "
                    "sidecar DIR/<kernel>.json. A module is a dotted name importable from the current directory or "
                    "a path to a .py file.")
    b.add_argument("kernels", nargs="+", metavar="module:kernel", help="the kernels to publish")
    b.add_argument("--out", "-o", required=True, metavar="DIR", help="the artifact directory (created if missing)")
    b.add_argument("--bundle", action="store_true",
                   help="publish kernels with all their stages (needed for a kernel that reads a reduced value)")
    b.add_argument("--target", action="append", metavar="TARGET",
                   help="a target to build for (repeatable; default: host)")
    b.add_argument("--dtype", action="append", choices=("float32", "float64"),
                   help="a float dtype to build for (repeatable; default: float64)")
    b.add_argument("--cpu", choices=("native", "portable"), default="native",
                   help="host code for this machine's CPU (default) or for the architecture's generic CPU")
    b.add_argument("--index-dtype", action="append", default=[], metavar="PLANE=int32|int64",
                   help="the key dtype of an Index plane (repeatable; default: int32)")
    b.add_argument("--reverse", action="store_true",
                   help="also publish each kernel's adjoint, so that the loaded kernel has .reverse (docs/reverse.md)")
    b.add_argument("--reverse-extents", metavar="N[,M]", default=None,
                   help="the lane extents an adjoint whose gradient spans the lanes is built for (with --reverse)")
    b.add_argument("--reverse-positions", metavar="OUT=N[,OUT=N]", default=None,
                   help="the array length of each float output written by key, which its adjoint is built for "
                        "(with --reverse)")
    s = sub.add_parser("show", help="check an artifact and print its sidecar summary",
                       description="Check DIR/NAME.json and its binaries, and print what the sidecar describes.")
    s.add_argument("dir", metavar="DIR")
    s.add_argument("name", metavar="NAME", help="the kernel's name")
    return p


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _import(module: str):
    """The module a spec names: a .py path (or any path with a separator), else a dotted name from the cwd."""
    looks_like_path = module.endswith(".py") or os.sep in module or (os.altsep is not None and os.altsep in module)
    if looks_like_path:
        path = Path(module)
        if not path.is_file():
            raise UsageError(f"cannot import {module!r}: no such file")
        modname = "_hawk_artifact_" + "".join(c if c.isalnum() else "_" for c in str(path.resolve()))
        spec = importlib.util.spec_from_file_location(modname, path)
        if spec is None or spec.loader is None:
            raise UsageError(f"cannot import {module!r}: not a Python file")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod  # so that dataclasses, pickling and inspect see it like any module
        sys.path.insert(0, str(path.resolve().parent))  # its sibling imports work as when run as a script
        try:
            spec.loader.exec_module(mod)
        except (Exception, SystemExit) as exc:
            sys.modules.pop(modname, None)
            raise UsageError(f"cannot import {module!r}: {type(exc).__name__}: {_one_line(exc)}") from None
        return mod
    if not all(part.isidentifier() for part in module.split(".")):
        raise UsageError(f"{module!r} is neither a dotted module name nor a path to a .py file")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(module)
    except (Exception, SystemExit) as exc:
        raise UsageError(f"cannot import module {module!r}: {type(exc).__name__}: {_one_line(exc)}") from None


def _kernel(spec: str):
    module, sep, name = spec.rpartition(":")
    if not sep or not module or not name:
        raise UsageError(f"{spec!r} is not module:kernel (e.g. mykernels:energy or path/to/file.py:energy)")
    if not name.isidentifier():
        raise UsageError(f"{spec!r}: {name!r} is not a Python name")
    from hawk.compiler import Kernel

    mod = _import(module)
    if not hasattr(mod, name):
        raise UsageError(f"{spec!r}: module {module!r} has no {name!r}")
    k = getattr(mod, name)
    if not isinstance(k, Kernel):
        raise UsageError(f"{spec!r} is a {type(k).__name__}, not a @hawk.kernel")
    return k


def _index_dtypes(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        plane, sep, dt = item.partition("=")
        if not sep or not plane.isidentifier() or dt not in ("int32", "int64"):
            raise UsageError(f"--index-dtype {item!r}: write PLANE=int32 or PLANE=int64")
        out[plane] = dt
    return out


def _positions(text: str) -> dict[str, int]:
    """--reverse-positions OUT=N[,OUT=N] as {output: length}."""
    got = {}
    for item in text.split(","):
        name, eq, n = item.partition("=")
        if not eq or not name.strip() or not n.strip().isdigit():
            raise UsageError(f"--reverse-positions takes OUT=N[,OUT=N] (an output's name and its array length), "
                             f"got {item!r}")
        got[name.strip()] = int(n)
    return got


def _out_dir(out: str) -> Path:
    """--out as a directory this process can write in (created if missing), or a one-line UsageError."""
    if not out.strip():  # an unset shell variable (--out "$DIR") would publish into the current directory
        raise UsageError(f"--out {out!r} is empty: give a directory to publish into (--out . for this one)")
    d = Path(out)
    try:
        for p in (d, *d.parents):
            if p.exists() and not p.is_dir():
                what = "is a file, not a directory" if p == d else f"lies under {str(p)!r}, which is a file"
                raise UsageError(f"--out {out!r} {what}: give a directory to publish into")
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out!r}: the directory cannot be created ({exc.strerror or exc})") from None
    try:
        fd, probe = tempfile.mkstemp(dir=d, prefix=".hawk-artifact-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(f"--out {out!r}: cannot write in this directory ({exc.strerror or exc})") from None
    return d


def _build(args) -> int:
    from hawk.artifact import builder

    targets = tuple(args.target or ("host",))
    bad = [t for t in targets if t not in builder.BUILDERS]
    if bad:
        raise UsageError(f"unknown target {bad[0]!r}: the targets hawk.artifact builds are {builder.known_targets()}")
    dtypes = tuple(args.dtype or ("float64",))
    idx = _index_dtypes(args.index_dtype)
    kernels = [_kernel(s) for s in args.kernels]
    if not args.bundle:
        for k in kernels:
            if k.stage_count > 1:
                raise UsageError(f"kernel '{k.name}' runs in {k.stage_count} stages (it reads a value reduced over "
                                 "every lane) and build publishes one launch: pass --bundle to publish it with all "
                                 "its stages")
    out = _out_dir(args.out)
    try:
        ext = None if args.reverse_extents is None else tuple(int(e) for e in args.reverse_extents.split(","))
        pos = None if args.reverse_positions is None else _positions(args.reverse_positions)
        paths = builder.build_bundle(kernels, out, targets=targets, dtypes=dtypes, index_dtypes=idx, cpu=args.cpu,
                                     reverse=args.reverse, reverse_extents=ext, reverse_positions=pos)
    except (ValueError, TypeError) as exc:
        raise UsageError(_one_line(exc)) from None
    except OSError as exc:  # the directory became unwritable, or the disk is full
        raise UsageError(f"--out {args.out!r}: writing the artifact failed ({exc.strerror or exc})") from None
    from hawk.abi.artifact.read import read

    for k, path in zip(kernels, paths, strict=True):
        sc = read(path.parent, k.name).sidecar
        print(f"{path}: kernel {k.name}, {len(sc['stages'])} stage(s) x {len(dtypes)} dtype(s) x "
              f"{len(targets)} target(s), content hash {sc['content_hash'][:16]}")
    return 0


def _show(args) -> int:
    from hawk.abi.artifact.format import ArtifactError, describe
    from hawk.abi.artifact.read import read

    try:
        art = read(args.dir, args.name)
    except ArtifactError as exc:
        raise UsageError(_one_line(exc)) from None
    print(f"{Path(args.dir) / (args.name + '.json')}")
    print(describe(art.sidecar))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _build(args) if args.command == "build" else _show(args)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
