"""Where a kernel's code lives: its AST, file and first line, and its Python namespace (no MLIR here)."""

from __future__ import annotations

import ast
import inspect
import textwrap

from hawk.errors import KernelError


def read_def(fn, what: str, **who: str) -> tuple[str, ast.FunctionDef, str, int]:
    """The def of `fn` as its file holds it now: (dedented text, its ast, file, first line with decorators).
    `what` is the decorator ("@hawk.kernel"), `who` names it in errors (kernel= or func=). The source is
    read from disk when the decorator runs, so a file edited since it was imported gives other lines than the
    def: refused by name rather than misread (a kernel body from another function's lines)."""
    file = inspect.getsourcefile(fn) or fn.__code__.co_filename
    try:
        lines, first = inspect.getsourcelines(fn)
    except OSError as exc:
        raise KernelError("its source is not available (define it in a file or a notebook cell)",
                          file=file, line=fn.__code__.co_firstlineno, **who) from exc
    text = textwrap.dedent("".join(lines))
    try:
        body = ast.parse(text).body
    except SyntaxError:  # (lines cut out of a file edited since: not even Python)
        body = []
    fdef = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fdef is None or fdef.name != fn.__code__.co_name:  # (__name__ may be set after the def)
        raise KernelError(f"the source at this line is not the def of '{fn.__code__.co_name}' (was the file edited "
                          f"after it was imported?): re-import the module or restart, and decorate a def with {what}",
                          file=file, line=first, **who)
    return text, fdef, file, first


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
