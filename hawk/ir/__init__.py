"""The hawk dialect and small helpers to build and read its ops."""

from hawk.ir.build import create, strs
from hawk.ir.dialect import attr_str, attr_strs, is_hawk, new_context

__all__ = ["attr_str", "attr_strs", "create", "is_hawk", "new_context", "strs"]
