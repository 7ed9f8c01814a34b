"""Processes that need the same compiled kernel at once build it once (hawk.abi.cache.building).

torch ranks, JAX processes and test workers on one machine start the same kernels together. Each used to find the
cache empty and compile the kernel itself (four gloo ranks: four LLVM builds of every kernel); now the first holds
the entry's lock while it builds, and the others wait for it and load what it sealed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hawk.abi import cache

ROOT = Path(__file__).resolve().parent.parent

# A process that builds one kernel when told to start, its host build slowed by a second (so the others surely
# find the cache empty while it runs) and recorded in builds.log.
CHILD = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    import numpy as np
    import eagle, hawk
    from eagle.targets import host
    from hawk import Mutable, Scalar

    work = Path(sys.argv[1])

    @hawk.kernel
    def cl_norm(x: Scalar, total: Mutable[Scalar]):
        total = hawk.sum(x * x, policy="ordered")

    real = host._build_into

    def slow(so, name, build):
        with open(work / "builds.log", "a") as f:
            f.write(f"{os.getpid()} {name}\\n")
        time.sleep(1.0)
        return real(so, name, build)

    host._build_into = slow
    plan = eagle.deploy(cl_norm)
    (work / f"ready-{os.getpid()}").touch()
    while not (work / "start").exists():
        time.sleep(0.005)
    out = plan.run(x=np.arange(1000.0))
    print(float(np.asarray(out["total"] if isinstance(out, dict) else out).reshape(-1)[0]))
""")


def _children(tmp_path: Path, n: int, cache_dir: str) -> list[str]:
    (tmp_path / "child.py").write_text(CHILD)
    env = {**os.environ, "HAWK_CACHE_DIR": cache_dir, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, str(tmp_path / "child.py"), str(tmp_path)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready-*"))) < n and time.monotonic() < deadline:
        if any(p.poll() not in (None, 0) for p in procs):
            break
        time.sleep(0.01)
    (tmp_path / "start").touch()  # (all at once: each finds the cache empty)
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        outs.append(out.strip())
    return outs


def test_processes_that_start_together_build_a_kernel_once(tmp_path):
    outs = _children(tmp_path, 3, str(tmp_path / "cache"))
    assert outs == [str(float(sum(i * i for i in range(1000))))] * 3
    builds = (tmp_path / "builds.log").read_text().splitlines()
    assert len(builds) == 1, builds  # one process built; two waited, then loaded its sealed library
    assert list((tmp_path / "cache" / cache.LOCKS).glob("cl_norm*.lock"))


def test_without_a_cache_each_process_builds_its_own(tmp_path):
    """The contrast that makes the test above meaningful: with HAWK_CACHE_DIR="" nothing is shared or held."""
    outs = _children(tmp_path, 2, "")
    assert len(set(outs)) == 1
    assert len((tmp_path / "builds.log").read_text().splitlines()) == 2


def test_a_lock_held_too_long_is_given_up(monkeypatch, tmp_path):
    """A holder that never finishes (a stuck build) does not block others for good: after BUILD_WAIT_S they build
    on their own."""
    import fcntl

    entry = tmp_path / "k-1.so"
    with cache.building(entry):
        held = os.open(tmp_path / cache.LOCKS / "k-1.so.lock", os.O_RDWR)
        with pytest.raises(BlockingIOError):
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # (held: another descriptor cannot take it)
        monkeypatch.setattr(cache, "BUILD_WAIT_S", 0.05)
        t0 = time.monotonic()
        with cache.building(entry):
            waited = time.monotonic() - t0
        assert 0.05 <= waited < 5.0
    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # (released when the holder left)
    os.close(held)


def test_a_lock_of_a_process_that_died_is_free(tmp_path):
    entry = tmp_path / "k-2.so"
    code = (f"import os, sys; sys.path.insert(0, {str(ROOT)!r}); from hawk.abi import cache; "
            f"from pathlib import Path; cm = cache.building(Path({str(entry)!r})); cm.__enter__(); os._exit(3)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 3
    t0 = time.monotonic()
    with cache.building(entry):
        pass
    assert time.monotonic() - t0 < 1.0  # (the dead process's lock went with it)
