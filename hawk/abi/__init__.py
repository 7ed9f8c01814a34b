"""hawk.abi: what the runtime (eagle) needs to know of a compiled kernel, with neither MLIR nor the front end.

- `hawk.abi.layout`: the Layout (buffers in call order with roles and dtypes, reductions, sinks, private copies,
  GPU launch forms) and its JSON form, which an artifact's sidecar carries;
- `hawk.abi.signature`: PlaneSpec and Signature, a kernel's planes as data (read back from JSON too);
- `hawk.abi.exact`: the exact accumulator's word counts (policy="ordered");
- `hawk.abi.cache`: cache keys, the cache directory, sealed entries and the host CPU a binary is built for.

eagle imports hawk only through this package (tests/test_imports.py checks it); nothing here imports MLIR,
hawk.frontend or eagle.
"""
