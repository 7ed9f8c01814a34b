"""Errors raised while a kernel is read, checked or lowered.

A `KernelError` always starts with ``file:line:`` of the user's source, names the kernel and says what to write
instead, so an editor can jump to the line and the user can fix it without reading docs.
"""

from __future__ import annotations


class KernelError(AttributeError):
    """A kernel (or a retired name) that hawk refuses.

    It subclasses AttributeError only so that ``hawk.all_samples`` behaves like a missing attribute for tools
    such as ``hasattr``; catch it as ``hawk.KernelError``.
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 kernel: str | None = None, func: str | None = None, called_from: str | None = None):
        self.file, self.line, self.kernel, self.text = file, line, kernel, message
        self.func, self.called_from = func, called_from
        where = f"{file}:{line}: " if file and line else ""
        if func:  # inside a @hawk.func: its own line, and the chain of calls that led there
            who, tail = f"func '{func}': ", f" (called from {called_from})" if called_from else ""
        else:
            who, tail = (f"kernel '{kernel}': " if kernel else ""), ""
        super().__init__(f"{where}{who}{message}{tail}")

    def __str__(self) -> str:  # AttributeError's str would quote the name only
        return self.args[0]


class RetiredImportError(ImportError):
    """``from hawk import Accum`` (or another retired name): the same ``file:line:`` rewrite message as
    ``hawk.Accum``. It is an ImportError because Python replaces an AttributeError raised while importing a name
    by a bare "cannot import name", which would lose the rewrite."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None, name: str | None = None):
        self.file, self.line, self.text = file, line, message
        where = f"{file}:{line}: " if file and line else ""
        super().__init__(f"{where}{message}", name=name)
