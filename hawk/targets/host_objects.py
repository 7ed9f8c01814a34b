"""Native objects shared by host stages that are the same code under other names.

Kernels often differ in their names only: the same body in two tests, a library's kernels and a user's, a
gradient's stage beside a forward one. Their stages' LLVM-dialect modules then differ only in the stage's own
symbols (`@<stage>_lanes`, `@<stage>_finish`, ...), and compiling each again costs 50-250 ms (LLVM's O3 and code
generation: most of a cold start). So a stage is compiled with its symbols written `@hawk_same_code_<suffix>`, the
object is kept under the hash of that text (in memory and in the disk cache, sealed like every entry), and each
stage takes a copy with its own names put back into the symbol table (hawk.targets.elf.renamed): the same machine
code, byte for byte, as compiling it under its name, since a name changes no instruction.

A module where the stage's name is written anywhere else (a string constant, a symbol of exactly that name) is
compiled as it is, unshared.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path

from hawk.abi import cache
from hawk.targets import elf

PLACEHOLDER = "hawk_same_code"
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_memory: dict[str, bytes] = {}
_lock = threading.Lock()


def same_code(text: str, stage: str) -> str | None:
    """The module text with the stage's symbols renamed to the placeholder's and without the layout eagle reads
    (the module's `hawk.layout` attribute: names and roles of the planes, which LLVM ignores), or None when it
    cannot be shared: the stage's name is written elsewhere in it, or the placeholder already is."""
    if PLACEHOLDER in text or not stage.isidentifier():
        return None
    shared = re.sub(rf"@{re.escape(stage)}(?=_\w)", "@" + PLACEHOLDER, _without_layout(text))
    if re.search(rf"@{re.escape(stage)}\b", shared) or any(stage in s for s in _STRING.findall(shared)):
        return None
    return shared


def _without_layout(text: str) -> str:
    """The text without the `hawk.layout = {...}` entry of the module's attributes (unchanged if it has none)."""
    head = "module attributes {"
    at = text.find("hawk.layout = {")
    if not text.startswith(head) or at < 0 or "\n" in text[:at]:
        return text
    depth, i = 0, at + len("hawk.layout = ")
    while i < len(text):
        c = text[i]
        if c == '"':
            i = _STRING.match(text, i).end()
            continue
        depth += (c == "{") - (c == "}")
        i += 1
        if depth == 0:
            break
    before, rest = text[:at], text[i:]
    if rest.startswith(", "):
        return before + rest[2:]
    return (before[:-2] if before.endswith(", ") else before) + rest


def write_object(text: str, stage: str, cpu: str | None, compile_object: Callable[[str, Path, str | None], None],
                 obj: Path) -> None:
    """Write the stage's native object at `obj`: the shared one of its text (built with `compile_object` on a
    miss) with the stage's names, or, where the text cannot be shared, its own."""
    shared = same_code(text, stage)
    if shared is None:
        compile_object(text, obj, cpu)
        return
    prefix = PLACEHOLDER + "_"

    def rename(name: str) -> str | None:
        for lead in ("", "_mlir_"):  # (the packed wrappers: _mlir_<function>)
            if name.startswith(lead + prefix):
                return f"{lead}{stage}_{name[len(lead + prefix):]}"
        return None

    obj.write_bytes(elf.renamed(_shared_object(shared, cpu, compile_object, obj), rename))


def _shared_object(shared: str, cpu: str | None, compile_object, obj: Path) -> bytes:
    """The object of the shared text: from memory, else the disk cache (checked against its seal), else compiled
    into `obj` and kept in both. Processes that need the same one at once build it once (cache.building)."""
    key = cache.key(shared, "host object", cpu or "this machine", cache.host_key())
    with _lock:
        data = _memory.get(key)
    if data is not None:
        return data
    d = cache.cache_dir()
    path = d / f"same-code-{key}.o" if d else None
    with cache.building(path):
        data = cache.read_entry(path) if path is not None else None
        if data is None:
            compile_object(shared, obj, cpu)
            data = obj.read_bytes()
            if path is not None:
                cache.write_entry(path, data)
    with _lock:
        _memory[key] = data
    return data
