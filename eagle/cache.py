"""eagle's view of the compile cache (kept in hawk.cache, which the compiler shares)."""

from hawk.cache import (
    VERSION,
    cache_dir,
    compiler_fingerprint,
    entry_ok,
    host_cpu,
    host_key,
    key,
    machine,
    read_entry,
    write_atomic,
    write_entry,
)

__all__ = ["VERSION", "cache_dir", "compiler_fingerprint", "entry_ok", "host_cpu", "host_key", "key", "machine",
           "read_entry", "write_atomic", "write_entry"]
