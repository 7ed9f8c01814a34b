"""Reading a published artifact: its sidecar checked (JSON Schema, consistency, content hash) and every binary's
bytes verified against the sha256 the sidecar records. Nothing is loaded or run here, and nothing here imports
MLIR, NumPy or the runtime: the loader (eagle/artifact.py) loads the bytes checked here, and `hawk-artifact show`
describes them."""

from __future__ import annotations

from pathlib import Path

from hawk.abi.artifact.format import (
    ArtifactError,
    check_header,
    check_sidecar,
    is_name,
    parse,
    sha256_bytes,
)
from hawk.abi.artifact.format import content_hash as compute_content_hash


class Artifact:
    """A checked sidecar and the verified bytes of its binaries (nothing loaded or run yet)."""

    def __init__(self, directory: Path, sidecar: dict, binaries: dict[str, bytes]):
        self.directory, self.sidecar, self.binaries = directory, sidecar, binaries


def read(directory, name: str, content_hash: str | None = None) -> Artifact:
    """Read and check `<directory>/<name>.json` and its binaries. Raises ArtifactError on anything amiss.

    `content_hash=`, when given, pins the artifact: one whose content hash differs is refused (use the hash you
    recorded when you built or received it).
    """
    d = Path(directory)
    if not is_name(name):
        raise ArtifactError(f"{name!r} is not a kernel name: hawk.load takes the artifact directory and the "
                            "kernel's name, e.g. hawk.load(dir, 'energy')")
    path = d / f"{name}.json"
    where = str(path)
    if not path.is_file():
        there = sorted(p.stem for p in d.glob("*.json")) if d.is_dir() else None
        hint = f"; it holds {there}" if there else ("" if there is not None else f"; {d} is not a directory")
        raise ArtifactError(f"{where}: no sidecar for kernel '{name}' in {d}{hint}")
    data = parse(path.read_bytes(), where)
    check_header(data, where, name)
    check_sidecar(data, where)
    actual = compute_content_hash(data)
    if actual != data["content_hash"]:
        raise ArtifactError(f"{where}: the content hash does not match the sidecar ({data['content_hash'][:16]}... "
                            f"recorded, {actual[:16]}... computed): the sidecar was changed after it was built")
    if content_hash is not None and content_hash != data["content_hash"]:
        raise ArtifactError(f"{where}: the artifact's content hash is {data['content_hash']}, not the pinned "
                            f"{content_hash}")
    binaries = {}
    for b in data["builds"]:
        f = d / b["file"]
        if f.is_symlink():
            raise ArtifactError(f"{where}: binary {b['file']!r} is a symbolic link; an artifact's binaries are plain "
                                "files in its directory")
        if not f.is_file():
            raise ArtifactError(f"{where}: binary {b['file']!r} (stage {b['stage']}, {b['dtype']}, {b['target']}) is "
                                f"missing from {d}")
        blob = f.read_bytes()
        if sha256_bytes(blob) != b["sha256"]:
            raise ArtifactError(f"{where}: binary {b['file']!r} does not match the sidecar (its sha256 is "
                                f"{sha256_bytes(blob)[:16]}..., the sidecar records {b['sha256'][:16]}...): it was "
                                "changed or replaced after the build")
        binaries[b["file"]] = blob
        if "device" in b:
            dev = b["device"]
            binaries[dev["finish"]] = _read_checked(d, dev["finish"], dev["finish_sha256"], where,
                                                    f"the host finish of stage {b['stage']}, {b['dtype']}, "
                                                    f"{b['target']}")
    return Artifact(d, data, binaries)


def _read_checked(d: Path, file: str, sha: str, where: str, what: str) -> bytes:
    f = d / file
    if f.is_symlink():
        raise ArtifactError(f"{where}: binary {file!r} is a symbolic link; an artifact's binaries are plain files in "
                            "its directory")
    if not f.is_file():
        raise ArtifactError(f"{where}: binary {file!r} ({what}) is missing from {d}")
    blob = f.read_bytes()
    if sha256_bytes(blob) != sha:
        raise ArtifactError(f"{where}: binary {file!r} does not match the sidecar (its sha256 is "
                            f"{sha256_bytes(blob)[:16]}..., the sidecar records {sha[:16]}...): it was changed or "
                            "replaced after the build")
    return blob
