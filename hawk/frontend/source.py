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

    def call_line(self, fn_name: str) -> int | None:
        """The first line of the kernel's file that calls a function named `fn_name` (`m.log1p(...)`,
        `hawk.math.log1p(...)` or `log1p(...)`): where a refusal made after lowering (which keeps no source
        locations) points the user."""
        lines = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                if name == fn_name:
                    lines.append(self.first_line + node.lineno - 1)
        return min(lines) if lines else None
