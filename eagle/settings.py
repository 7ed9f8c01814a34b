"""Run settings that come from an argument or an environment variable: checked once, refused in one line.

`threads=` / $EAGLE_THREADS (host threads; default every core) and `min_chunk=` / $EAGLE_MIN_CHUNK (the fewest
lanes a host chunk takes; tests shrink it so that small runs split into chunks). A refusal is a ValueError naming
the setting as the user wrote it; callers put the kernel in front. $EAGLE_NATIVE=0 runs host stages on the Python
thread pool instead of the native executor (eagle/native), to compare the two.
"""

from __future__ import annotations

import os

import numpy as np

MIN_CHUNK = 1 << 14  # lanes below which handing a chunk to another thread costs more than it saves: the native
# executor hands a chunk over in about a microsecond (a waking thread: tens), and 16384 lanes take ~5-10 us to sum,
# so 1e5 lanes already run on two cores
PYTHON_POOL_MIN_CHUNK = 1 << 19  # the default where the native executor is unavailable: the Python pool takes
# ~10 us a handoff
MIN_CHUNK_ENV = "EAGLE_MIN_CHUNK"
THREADS_ENV = "EAGLE_THREADS"
NATIVE_ENV = "EAGLE_NATIVE"


def is_whole(v) -> bool:
    """A whole number as a count may be given: a Python or NumPy integer, not a bool (nor a float or string,
    which would be truncated or parsed)."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def whole_setting(value, option: str, env: str, default: int, unit: str) -> int:
    """`value` (the argument `option`), else $`env`, else `default`: a whole number >= 1 of `unit`."""
    where = f"{option}="
    if value is None:
        text = os.environ.get(env, "").strip()
        if not text:
            return default
        where = f"${env}"
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{where} must be a whole number of {unit} >= 1, got {text!r}") from None
    if not is_whole(value) or value < 1:
        raise ValueError(f"{where} must be a whole number of {unit} >= 1, got {value!r}")
    return int(value)


def threads_setting(value=None) -> int:
    """Host threads: `threads=`, else $EAGLE_THREADS, else the CPU count."""
    return whole_setting(value, "threads", THREADS_ENV, os.cpu_count() or 1, "threads")


def chosen_chunk(min_chunk: int | None) -> bool:
    """Whether the caller chose the chunk size (`min_chunk=`, or $EAGLE_MIN_CHUNK set): then the launcher takes it
    as it is; else its default rule also keeps chunks as long as their private copies (eagle/launch.py)."""
    return min_chunk is not None or os.environ.get(MIN_CHUNK_ENV, "") != ""


def min_chunk_setting(value=None) -> int:
    """The fewest lanes a host chunk takes: `min_chunk=`, else $EAGLE_MIN_CHUNK, else MIN_CHUNK (PYTHON_POOL_MIN_CHUNK
    where the native executor is unavailable). Chunk boundaries stay aligned to ordered blocks, kept spans and
    ordered scatter segments whatever it is."""
    return whole_setting(value, "min_chunk", MIN_CHUNK_ENV, _default_min_chunk() if value is None else MIN_CHUNK,
                         "lanes")


def _default_min_chunk() -> int:
    from eagle import native  # (eagle.native reads this module's settings)

    return MIN_CHUNK if native.library() is not None else PYTHON_POOL_MIN_CHUNK


def native_setting() -> bool:
    """Whether host stages may run on the native executor: yes unless $EAGLE_NATIVE is 0, off, no or false."""
    return os.environ.get(NATIVE_ENV, "").strip().lower() not in ("0", "off", "no", "false")
