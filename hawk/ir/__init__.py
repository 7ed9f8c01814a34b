"""The hawk dialect (dialect.py), its types (types.py), the accessors every reader of hawk IR uses (access.py)
and one door to create ops (build.py)."""

from hawk.ir import access
from hawk.ir.build import create, strs
from hawk.ir.dialect import is_hawk, new_context

__all__ = ["access", "create", "is_hawk", "new_context", "strs"]
