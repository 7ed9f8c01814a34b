"""Where compiled kernels and what the compiler learned about them are kept: in memory for this process and
on disk across processes.

The key hashes everything that changes the binary: the hawk IR (which embeds the dtypes), the target, its options
and the compiler version. Set HAWK_CACHE_DIR to move the disk cache; HAWK_CACHE_DIR="" turns it off.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

VERSION = "0.1.0"


@functools.cache
def compiler_fingerprint() -> str:
    """A hash of the compiler's own source, so that a changed lowering never reuses an old binary."""
    h = hashlib.sha256()
    import eagle
    import hawk

    for pkg in (hawk, eagle):
        root = Path(pkg.__file__).parent
        for f in sorted(root.rglob("*.py")):
            h.update(f.relative_to(root).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in (VERSION, compiler_fingerprint(), *parts):
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def cache_dir() -> Path | None:
    env = os.environ.get("HAWK_CACHE_DIR")
    if env == "":
        return None
    d = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hawk"
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return d
