"""Reading an AMD GPU code object (an ELF64 shared object) in Python: its chip and its symbols.

The rocdl target checks every code object it builds (an AMDGPU ELF for the chip asked for, no undefined symbols,
the stage's kernel descriptor defined). Two LLVM tools per check (llvm-nm, llvm-readelf) cost about 50 ms of
process start-up, more than the check itself; the few header and symbol-table fields it needs are read here.
"""

from __future__ import annotations

from dataclasses import dataclass

from hawk.targets import elf

EM_AMDGPU = 224
# EF_AMDGPU_MACH_AMDGCN_* (the low byte of e_flags), from LLVM's BinaryFormat/ELF.h, for the chips
# hawk.targets.rocdl.CHIPS lists (tests/test_rocdl_tools.py checks each against what llc-22 writes)
MACH = {"gfx900": 0x02C, "gfx906": 0x02F, "gfx908": 0x030, "gfx90a": 0x03F, "gfx942": 0x04C, "gfx950": 0x04F,
        "gfx1010": 0x033, "gfx1030": 0x036, "gfx1031": 0x037, "gfx1100": 0x041, "gfx1101": 0x046, "gfx1102": 0x047,
        "gfx1150": 0x043, "gfx1151": 0x04A, "gfx1200": 0x048, "gfx1201": 0x04E}


@dataclass(frozen=True)
class CodeObject:
    """What a check needs of an AMDGPU ELF: its machine byte, and its defined and undefined symbol names."""

    mach: int
    defined: frozenset[str]
    undefined: frozenset[str]


def read(binary: bytes) -> CodeObject:
    """Parse an AMDGPU ELF64 little-endian code object; ValueError says what is wrong with it."""
    f = elf.read(binary)
    if f.machine != EM_AMDGPU:
        raise ValueError(f"not an AMDGPU ELF (e_machine {f.machine})")
    return CodeObject(f.flags & 0xFF, f.defined, f.undefined)
