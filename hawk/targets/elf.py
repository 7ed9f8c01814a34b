"""The few fields of an ELF64 little-endian file hawk reads in Python: machine, flags, and defined and undefined
symbol names (an AMD code object's check, and whether a host kernel's object calls into any library); and the one
edit it makes, renaming the symbols of a relocatable object (hawk/targets/host_objects.py)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

SHT_SYMTAB, SHT_DYNSYM = 2, 11
SHN_UNDEF = 0


@dataclass(frozen=True)
class Elf:
    machine: int
    flags: int
    defined: frozenset[str]
    undefined: frozenset[str]


def read(binary: bytes) -> Elf:
    """Parse an ELF64 little-endian file; ValueError says what is wrong with it."""
    if binary[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    if binary[4] != 2 or binary[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF")
    try:
        (e_machine,) = struct.unpack_from("<H", binary, 18)
        (e_shoff,) = struct.unpack_from("<Q", binary, 40)
        (e_flags,) = struct.unpack_from("<I", binary, 48)
        e_shentsize, e_shnum = struct.unpack_from("<HH", binary, 58)
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
    return Elf(e_machine, e_flags, frozenset(defined), frozenset(undefined))


def renamed(binary: bytes, rename: Callable[[str], str | None]) -> bytes:
    """A copy of the ELF64 little-endian object `binary` whose symbol table entries carry `rename(name)` where it
    is not None. The new names go into a copy of the symbol string table, which is put at the end of the file and
    which keeps every old string where it was (section names may share the table); relocations name symbols by
    index, so nothing else changes. ValueError for what `read` refuses."""
    read(binary)  # (checks what it is)
    out = bytearray(binary)
    (e_shoff,) = struct.unpack_from("<Q", binary, 40)
    e_shentsize, e_shnum = struct.unpack_from("<HH", binary, 58)
    header = [e_shoff + i * e_shentsize for i in range(e_shnum)]
    tables: dict[int, bytearray] = {}
    for at in header:
        _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize = struct.unpack_from("<IIQQQQIIQQ",
                                                                                                   binary, at)
        if kind != SHT_SYMTAB or not entsize:
            continue
        str_off, str_size = struct.unpack_from("<QQ", binary, header[link] + 24)
        strings = tables.setdefault(link, bytearray(binary[str_off:str_off + str_size]))
        for entry in range(offset + entsize, offset + size, entsize):
            (st_name,) = struct.unpack_from("<I", binary, entry)
            new = rename(strings[st_name:strings.index(b"\0", st_name)].decode())
            if new is not None:
                struct.pack_into("<I", out, entry, len(strings))
                strings += new.encode() + b"\0"
    for link, strings in tables.items():
        struct.pack_into("<QQ", out, header[link] + 24, len(out), len(strings))
        out += strings
    return bytes(out)
