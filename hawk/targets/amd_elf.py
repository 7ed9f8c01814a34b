"""Reading an AMD GPU code object (an ELF64 shared object) in Python: its chip and its symbols.

The rocdl target checks every code object it builds (an AMDGPU ELF for the chip asked for, no undefined symbols,
the stage's kernel descriptor defined). Two LLVM tools per check (llvm-nm, llvm-readelf) cost about 50 ms of
process start-up, more than the check itself; the few header and symbol-table fields it needs are read here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

EM_AMDGPU = 224
SHT_SYMTAB, SHT_DYNSYM = 2, 11
SHN_UNDEF = 0
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
    if binary[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    if binary[4] != 2 or binary[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF")
    try:
        (e_machine,) = struct.unpack_from("<H", binary, 18)
        (e_flags,) = struct.unpack_from("<I", binary, 48)
        (e_shoff,) = struct.unpack_from("<Q", binary, 40)
        e_shentsize, e_shnum = struct.unpack_from("<HH", binary, 58)
        if e_machine != EM_AMDGPU:
            raise ValueError(f"not an AMDGPU ELF (e_machine {e_machine})")
        sections = [struct.unpack_from("<IIQQQQIIQQ", binary, e_shoff + i * e_shentsize) for i in range(e_shnum)]
        defined: set[str] = set()
        undefined: set[str] = set()
        for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
            if kind not in (SHT_SYMTAB, SHT_DYNSYM) or not entsize:
                continue
            str_off, str_size = sections[link][4], sections[link][5]
            strings = binary[str_off:str_off + str_size]
            for at in range(offset + entsize, offset + size, entsize):  # entry 0 is the null symbol
                st_name, _info_b, _other, st_shndx = struct.unpack_from("<IBBH", binary, at)
                name = strings[st_name:strings.index(b"\0", st_name)].decode()
                if name:
                    (undefined if st_shndx == SHN_UNDEF else defined).add(name)
    except (struct.error, IndexError) as exc:
        raise ValueError(f"a truncated or malformed ELF ({exc})") from None
    return CodeObject(e_flags & 0xFF, frozenset(defined), frozenset(undefined))
