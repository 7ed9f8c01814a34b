"""The sidecar's JSON Schema (sidecar.schema.json, shipped with the package) and a small validator for it.

The schema is standard JSON Schema (draft 2020-12): any validator can check a sidecar with it. Loading an artifact
must need nothing but NumPy and a C runtime, so hawk validates with this module instead of the jsonschema package:
it implements exactly the keywords the schema uses (type, enum, const, pattern, maxLength, minimum, maximum,
properties, required, additionalProperties, propertyNames, items, prefixItems, minItems, maxItems, uniqueItems,
oneOf, not, local $ref) and refuses a schema with any other keyword, so it cannot silently skip a rule. The tests
check it against jsonschema on every sidecar they build and on every refusal they provoke. "integer" means a JSON
integer (not 3.0, not true): the runtime uses extents and key positions as Python ints.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from typing import Any

SCHEMA_FILE = "sidecar.schema.json"
_KNOWN = {"$schema", "$id", "$defs", "$ref", "title", "description", "type", "enum", "const", "pattern", "maxLength",
          "minimum", "maximum", "properties", "required", "additionalProperties", "propertyNames", "items",
          "prefixItems", "minItems", "maxItems", "uniqueItems", "oneOf", "not"}
_TYPES = {"object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list),
          "string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
          "null": lambda v: v is None, "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
          "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)}


class Invalid(ValueError):
    """A value that does not fit the schema: `path` (keys and indices), `message`, and what the rule wants."""

    def __init__(self, path: tuple, message: str, want: str | None = None):
        super().__init__(message)
        self.path, self.message, self.want = path, message, want


@functools.cache
def schema() -> dict:
    """The sidecar's JSON Schema, checked to use only the keywords this validator implements."""
    s = json.loads(resources.files("hawk.abi.artifact").joinpath(SCHEMA_FILE).read_text())
    _check_keywords(s, "#")
    return s


def _check_keywords(s, where: str) -> None:
    if not isinstance(s, dict):
        return
    unknown = set(s) - _KNOWN
    if unknown:
        raise RuntimeError(f"internal error: {SCHEMA_FILE} uses {sorted(unknown)} at {where}, which hawk's sidecar "
                           "validator does not implement")
    for k, v in s.items():
        if k in ("properties", "$defs"):
            for name, sub in v.items():
                _check_keywords(sub, f"{where}/{k}/{name}")
        elif k in ("items", "additionalProperties", "propertyNames", "not"):
            _check_keywords(v, f"{where}/{k}")
        elif k in ("prefixItems", "oneOf"):
            for i, sub in enumerate(v):
                _check_keywords(sub, f"{where}/{k}/{i}")


def validate(value: Any) -> None:
    """Raise Invalid for the first rule `value` breaks (depth first, in the schema's order)."""
    root = schema()
    _validate(value, root, root, ())


def _short(v: Any) -> str:
    text = json.dumps(v) if not isinstance(v, str) else repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def _validate(v: Any, s: dict, root: dict, path: tuple) -> None:  # noqa: C901 (one branch per keyword)
    if "$ref" in s:
        ref = s["$ref"]
        if not ref.startswith("#/$defs/"):
            raise RuntimeError(f"internal error: {SCHEMA_FILE} has a non-local $ref {ref!r}")
        _validate(v, root["$defs"][ref[len("#/$defs/"):]], root, path)
    want = s.get("description")
    if "type" in s and not _TYPES[s["type"]](v):
        raise Invalid(path, f"{_short(v)} is not of type {s['type']!r}", want)
    if "const" in s and (v != s["const"] or type(v) is not type(s["const"])):
        raise Invalid(path, f"{_short(s['const'])} was expected, got {_short(v)}")
    if "enum" in s and not any(v == e and type(v) is type(e) for e in s["enum"]):
        raise Invalid(path, f"{_short(v)} is not one of {s['enum']}")
    if isinstance(v, str):
        if "pattern" in s and not re.search(s["pattern"], v):
            raise Invalid(path, f"{_short(v)} does not match {s['pattern']!r}", want)
        if "maxLength" in s and len(v) > s["maxLength"]:
            raise Invalid(path, f"{_short(v)} is longer than {s['maxLength']} characters", want)
    if _TYPES["number"](v):
        if "minimum" in s and v < s["minimum"]:
            raise Invalid(path, f"{v} is less than the minimum of {s['minimum']}", want)
        if "maximum" in s and v > s["maximum"]:
            raise Invalid(path, f"{v} is greater than the maximum of {s['maximum']}", want)
    if "not" in s:
        try:
            _validate(v, s["not"], root, path)
        except Invalid:
            pass
        else:
            raise Invalid(path, f"{_short(v)} should not be valid under {json.dumps(s['not'])}", want)
    if "oneOf" in s:
        fits = []
        for sub in s["oneOf"]:
            try:
                _validate(v, sub, root, path)
                fits.append(sub)
            except Invalid:
                pass
        if len(fits) != 1:
            raise Invalid(path, f"{_short(v)} is not valid under {'any' if not fits else 'more than one'} of the "
                                "given schemas", want)
    if isinstance(v, dict):
        for k in s.get("required", ()):
            if k not in v:
                raise Invalid(path, f"{k!r} is a required property")
        props = s.get("properties", {})
        extra = [k for k in v if k not in props]
        if s.get("additionalProperties") is False and extra:
            raise Invalid(path, f"Additional properties are not allowed ({_short(extra[0])} was unexpected)")
        for k, x in v.items():
            if "propertyNames" in s:
                try:
                    _validate(k, s["propertyNames"], root, path)
                except Invalid as exc:
                    raise Invalid(path, f"the key {exc.message}", exc.want) from None
            if k in props:
                _validate(x, props[k], root, (*path, k))
            elif isinstance(s.get("additionalProperties"), dict):
                _validate(x, s["additionalProperties"], root, (*path, k))
    if isinstance(v, list):
        if "minItems" in s and len(v) < s["minItems"]:
            raise Invalid(path, f"{_short(v)} should be non-empty" if s["minItems"] == 1 else
                          f"{_short(v)} is too short (at least {s['minItems']} items)")
        if "maxItems" in s and len(v) > s["maxItems"]:
            raise Invalid(path, f"{_short(v)} is too long (at most {s['maxItems']} items)")
        if s.get("uniqueItems") and len({json.dumps(x, sort_keys=True) for x in v}) != len(v):
            raise Invalid(path, f"{_short(v)} has non-unique elements")
        prefix = s.get("prefixItems", [])
        for i, x in enumerate(v):
            sub = prefix[i] if i < len(prefix) else s.get("items")
            if sub is not None:
                _validate(x, sub, root, (*path, i))
