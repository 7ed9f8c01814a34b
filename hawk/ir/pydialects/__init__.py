"""Where MLIR's Python bindings look for the Python module of a dialect they meet (see hawk.ir.dialect)."""
