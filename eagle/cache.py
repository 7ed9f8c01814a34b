"""eagle's view of the compile cache (kept in hawk.cache, which the compiler shares)."""

from hawk.cache import VERSION, cache_dir, compiler_fingerprint, key

__all__ = ["VERSION", "cache_dir", "compiler_fingerprint", "key"]
