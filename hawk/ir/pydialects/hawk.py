"""The hawk dialect's Python module, as MLIR's bindings look it up: empty, since hawk builds its ops generically.

Without one, the bindings search `mlir.dialects.hawk` afresh (a failed import is not cached) every time they hand
back a hawk op or type: about 60 us each, a quarter of the time it took to build a kernel's hawk IR."""
