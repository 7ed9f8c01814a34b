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
        `hawk.math.log1p(...)` or `log1p(...)`), directly or through the @hawk.func helpers it calls: where a
        refusal made after lowering (which keeps no source locations) points the user."""
        lines = [self.first_line + node.lineno - 1 for node in ast.walk(self.tree)
                 if isinstance(node, ast.Call) and self.calls(node, fn_name, set())]
        return min(lines) if lines else None

    def calls(self, node: ast.Call, fn_name: str, seen: set) -> bool:
        """Whether the call `node` is a call of `fn_name`, or of a @hawk.func whose body calls it."""
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        if name == fn_name:
            return True
        helper = self.closure.get(name, self.globals.get(name)) if isinstance(f, ast.Name) else None
        if not getattr(type(helper), "_hawk_func", False) or helper in seen:
            return False
        seen.add(helper)
        src = helper.source
        return any(isinstance(n, ast.Call) and src.calls(n, fn_name, seen) for n in ast.walk(src.tree))
