"""Sections, their placement in the address space, and the final ROM image with its header."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

from .errors import AsmError

BANK_SIZE = 0x4000
HEADER_CHECKSUM = 0x14D
GLOBAL_CHECKSUM = 0x14E


@dataclass(frozen=True)
class Region:
    name: str
    start: int
    end: int  # exclusive
    banks: range
    holds_data: bool  # ROM regions hold bytes; RAM regions only reserve space


REGIONS = {
    r.name: r
    for r in (
        Region("ROM0", 0x0000, 0x4000, range(1), True),
        Region("ROMX", 0x4000, 0x8000, range(1, 512), True),
        Region("VRAM", 0x8000, 0xA000, range(1), False),
        Region("SRAM", 0xA000, 0xC000, range(16), False),
        Region("WRAM0", 0xC000, 0xD000, range(1), False),
        Region("WRAMX", 0xD000, 0xE000, range(1, 2), False),
        Region("HRAM", 0xFF80, 0xFFFF, range(1), False),
    )
}


@dataclass
class Section:
    name: str
    region: Region
    address: int | None  # None: floating, placed after the first pass
    bank: int | None
    file: str
    line: int
    data: bytearray = field(default_factory=bytearray)
    size: int = 0  # bytes emitted or reserved so far

    def emit(self, values: list[int] | bytes, file: str, line: int) -> None:
        if not self.region.holds_data:
            raise AsmError(
                f"section '{self.name}' is {self.region.name}: only 'ds' allowed", file, line
            )
        self.data.extend(values)
        self.size += len(values)

    def reserve(self, count: int, fill: list[int] | None) -> None:
        if self.region.holds_data:
            pattern = fill or [0]
            self.data.extend(pattern[i % len(pattern)] for i in range(count))
        self.size += count

    @property
    def placed(self) -> bool:
        return self.address is not None and self.bank is not None


def _check_fits(sec: Section) -> None:
    assert sec.address is not None
    if sec.address < sec.region.start or sec.address + sec.size > sec.region.end:
        raise AsmError(
            f"section '{sec.name}' (${sec.address:04X}+{sec.size}) does not fit in "
            f"{sec.region.name} ${sec.region.start:04X}-${sec.region.end - 1:04X}",
            sec.file, sec.line,
        )


def place_sections(sections: list[Section]) -> None:
    """Give floating sections an address (first fit, in source order) and check overlaps."""
    for sec in sections:
        if sec.bank is None and len(sec.region.banks) == 1:
            sec.bank = sec.region.banks[0]
        if sec.bank is not None and sec.bank not in sec.region.banks:
            raise AsmError(f"bank {sec.bank} invalid for {sec.region.name}", sec.file, sec.line)
        if sec.address is not None:
            _check_fits(sec)
    used: dict[tuple[str, int], list[tuple[int, int, Section]]] = {}
    for sec in sections:
        if sec.placed:
            assert sec.address is not None and sec.bank is not None
            used.setdefault((sec.region.name, sec.bank), []).append(
                (sec.address, sec.address + sec.size, sec)
            )
    for spans in used.values():
        spans.sort(key=lambda s: (s[0], s[2].line))
        for (_, end_a, a), (start_b, _, b) in pairwise(spans):
            if start_b < end_a:
                raise AsmError(
                    f"section '{b.name}' overlaps section '{a.name}' at ${start_b:04X}",
                    b.file, b.line,
                )
    for sec in sections:
        if sec.placed:
            continue
        banks = [sec.bank] if sec.bank is not None else list(sec.region.banks)
        for bank in banks:
            spans = sorted(used.get((sec.region.name, bank), []), key=lambda s: s[0])
            cursor = sec.region.start
            for start, end, _ in spans:
                if start - cursor >= sec.size:
                    break
                cursor = max(cursor, end)
            if sec.region.end - cursor >= sec.size:
                sec.address, sec.bank = cursor, bank
                span = (cursor, cursor + sec.size, sec)
                used.setdefault((sec.region.name, bank), []).append(span)
                break
        else:
            message = f"no room for section '{sec.name}' ({sec.size} bytes)"
            raise AsmError(message, sec.file, sec.line)


@dataclass
class HeaderField:
    """A header byte range set by a ``HEADER_*`` directive."""

    offset: int
    data: bytes
    directive: str
    file: str
    line: int


def rom_size_code_for(num_banks: int) -> int:
    code = 0
    while (2 << code) < num_banks:
        code += 1
    return code


def build_rom(sections: list[Section], header: list[HeaderField], origin: str) -> bytes:
    """Lay ROM sections out by bank, apply header fields, pad, and fix both checksums."""
    rom_sections = [s for s in sections if s.region.holds_data and s.size]
    last_bank = max((s.bank or 0 for s in rom_sections), default=0)
    size_field = next((h for h in header if h.offset == 0x148), None)
    if size_field is not None:
        code = size_field.data[0]
        if code > 8:
            raise AsmError(f"ROM size code {code} invalid (0..8)", size_field.file, size_field.line)
        if (2 << code) <= last_bank:
            raise AsmError(
                f"ROM size code {code} holds {2 << code} banks but bank {last_bank} is used",
                size_field.file, size_field.line,
            )
    else:
        code = rom_size_code_for(last_bank + 1)
        header = [*header, HeaderField(0x148, bytes([code]), "automatic ROM size", origin, 0)]
    rom = bytearray((2 << code) * BANK_SIZE)
    written = bytearray(len(rom))  # 1 where a section wrote a byte
    for sec in rom_sections:
        assert sec.address is not None and sec.bank is not None
        base = sec.bank * BANK_SIZE + (sec.address - sec.region.start)
        rom[base : base + sec.size] = sec.data
        written[base : base + sec.size] = b"\x01" * sec.size
    for field_ in header:
        for i, value in enumerate(field_.data):
            at = field_.offset + i
            if written[at] and rom[at] not in (0, value):
                raise AsmError(
                    f"{field_.directive} conflicts with section data at ${at:04X}",
                    field_.file, field_.line,
                )
            rom[at] = value
    checksum_area = range(HEADER_CHECKSUM, GLOBAL_CHECKSUM + 2)
    if any(written[i] and rom[i] for i in checksum_area):
        raise AsmError("section data writes the checksum bytes $014D-$014F (leave them 0)", origin)
    rom[HEADER_CHECKSUM] = header_checksum(rom)
    total = global_checksum(rom)
    rom[GLOBAL_CHECKSUM] = total >> 8
    rom[GLOBAL_CHECKSUM + 1] = total & 0xFF
    return bytes(rom)


def header_checksum(rom: bytes | bytearray) -> int:
    """The byte at $014D: ``x = x - rom[i] - 1`` over $0134-$014C."""
    value = 0
    for byte in rom[0x134:0x14D]:
        value = (value - byte - 1) & 0xFF
    return value


def global_checksum(rom: bytes | bytearray) -> int:
    """16-bit sum of every ROM byte except the two checksum bytes themselves."""
    return (sum(rom) - rom[GLOBAL_CHECKSUM] - rom[GLOBAL_CHECKSUM + 1]) & 0xFFFF
