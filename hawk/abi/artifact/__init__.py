"""The artifact format: a sidecar's fields, its JSON Schema and checks, binaries' descriptions and content hashes.

The builder (hawk/artifact/builder.py) writes it and the loader (eagle/artifact.py) reads it; neither MLIR nor
the compiler is needed to check it.
"""
