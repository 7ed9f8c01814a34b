"""Where a kernel's code lives: its AST, file and first line, and its Python namespace (no MLIR here)."""

from __future__ import annotations

import ast


class Source:
    """Where a kernel's code lives: its AST, file and first line, and its Python namespace."""

    def __init__(self, fn, tree: ast.FunctionDef, file: str, first_line: int, name: str):
        self.fn, self.tree, self.file, self.first_line, self.name = fn, tree, file, first_line, name
        closure = {}
        if fn.__closure__:
            for n, cell in zip(fn.__code__.co_freevars, fn.__closure__, strict=False):
                try:
                    closure[n] = cell.cell_contents
                except ValueError:
                    pass
        self.closure = closure
        self.globals = fn.__globals__
