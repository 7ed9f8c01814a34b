"""Passes as units: a `ModulePass` is a named class whose dataclass fields are its typed options, kept in one
registry and composed by a textual pipeline such as `verify-hawk,lower-gpu-lanes{subgroup=32 atomics=true}`;
a `PassGroup` runs several passes under one name.

`parse_pipeline` turns that text into pass objects and `pipeline_text` prints them back the same way (every
option, in field order), so a pipeline is a value that can be logged, cached and handed to `hawk-opt`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, get_type_hints

from mlir import ir, passmanager


class PassError(ValueError):
    """A pipeline that cannot be built: an unknown pass, an unknown option, a value of the wrong type."""


@dataclasses.dataclass
class ModulePass:
    """One transformation of a module, in place. Subclasses are dataclasses: each field is an option."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""  # one line: what the pass does, for `hawk-opt --list-passes`
    choices: ClassVar[dict[str, tuple[str, ...]]] = {}  # str options limited to these words

    def apply(self, module: ir.Module) -> None:
        raise NotImplementedError

    def __str__(self) -> str:
        fields = dataclasses.fields(self)
        if not fields:
            return self.name
        return f"{self.name}{{{' '.join(f'{f.name}={_show(getattr(self, f.name))}' for f in fields)}}}"

    @classmethod
    def from_options(cls, options: dict[str, str]) -> ModulePass:
        """The pass with its options parsed from text (`subgroup=32` -> int 32, `atomics=true` -> True)."""
        hints = get_type_hints(cls)
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {}
        for key, text in options.items():
            if key not in fields:
                known = ", ".join(sorted(fields)) or "none"
                raise PassError(f"pass '{cls.name}' has no option '{key}' (its options: {known})")
            values[key] = _parse_value(cls, key, hints[key], text)
        return cls(**values)


def _show(v: object) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _parse_value(cls: type[ModulePass], key: str, kind: type, text: str) -> object:
    if kind is bool:
        if text not in ("true", "false", "1", "0"):
            raise PassError(f"pass '{cls.name}' option '{key}' takes true or false, not {text!r}")
        return text in ("true", "1")
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise PassError(f"pass '{cls.name}' option '{key}' takes an integer, not {text!r}") from None
    allowed = cls.choices.get(key)
    if allowed is not None and text not in allowed:
        raise PassError(f"pass '{cls.name}' option '{key}' takes one of {', '.join(allowed)}, not {text!r}")
    return text


PASSES: dict[str, type[ModulePass]] = {}


def register(cls: type[ModulePass]) -> type[ModulePass]:
    """Class decorator: make the pass known by its name to pipelines and `hawk-opt`."""
    if not cls.name or cls.name in PASSES:
        raise ValueError(f"pass class {cls.__name__} needs a unique name (got {cls.name!r})")
    PASSES[cls.name] = cls
    return cls


class PassGroup(ModulePass):
    """A pass that runs other passes in order under one name (`lower-host-lanes` is build-finish, then
    lower-chunk-loop), the IR verified after each; its options are handed to the passes it runs."""

    def passes(self) -> list[ModulePass]:
        raise NotImplementedError

    def apply(self, module: ir.Module) -> None:
        for p in self.passes():
            p.apply(module)
            if not module.operation.verify():  # (raises with the reason)
                raise RuntimeError(f"internal error: pass {p.name} (in {self.name}) left invalid IR")


class UpstreamPass(ModulePass):
    """A pass made of upstream MLIR passes, run through MLIR's own pass manager."""

    pipeline: ClassVar[str] = ""

    def apply(self, module: ir.Module) -> None:
        passmanager.PassManager.parse(self.pipeline).run(module.operation)


_ITEM = re.compile(r"\s*([A-Za-z0-9_.-]+)\s*(?:\{([^{}]*)\})?\s*(?:,|$)")


def parse_pipeline(text: str) -> list[ModulePass]:
    """Pass objects from `a,b{opt=v other=w},c`; raises PassError naming what is wrong."""
    from hawk.passes import lower_units, plan, units  # noqa: F401  (importing them registers their passes)

    out: list[ModulePass] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _ITEM.match(text, pos)
        if m is None or m.end() == pos:
            raise PassError(f"cannot read the pass pipeline {text!r} at {text[pos:]!r}: write name or "
                            "name{option=value ...}, separated by commas")
        name, opts = m.group(1), m.group(2)
        if name not in PASSES:
            raise PassError(f"unknown pass '{name}'; known passes: {', '.join(sorted(PASSES))}")
        options = {}
        for word in (opts or "").split():
            key, eq, value = word.partition("=")
            if not eq or not key:
                raise PassError(f"pass '{name}' option {word!r}: write option=value")
            options[key] = value
        out.append(PASSES[name].from_options(options))
        pos = m.end()
    return out


def pipeline_text(passes: list[ModulePass]) -> str:
    return ",".join(str(p) for p in passes)


def kernel_funcs(module: ir.Module) -> list:
    """The module's kernel functions (func.func with the unit attribute hawk.kernel), in order."""
    return [op for op in module.body.operations if op.operation.name == "func.func" and "hawk.kernel" in
            op.operation.attributes]
