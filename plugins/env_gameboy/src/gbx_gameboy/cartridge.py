"""Cartridge header parsing and validation (pure Python, runs before any kernel launch)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from gbx.errors import GbxError

# Memory bank controller kinds understood by the kernel (memory.py).
MBC_NONE, MBC_1, MBC_2, MBC_3, MBC_5 = 0, 1, 2, 3, 5

# cartridge type byte (0x147) -> (mbc kind, has ram, has battery, has rtc)
CART_TYPES: dict[int, tuple[int, bool, bool, bool]] = {
    0x00: (MBC_NONE, False, False, False),
    0x01: (MBC_1, False, False, False),
    0x02: (MBC_1, True, False, False),
    0x03: (MBC_1, True, True, False),
    0x05: (MBC_2, True, False, False),
    0x06: (MBC_2, True, True, False),
    0x08: (MBC_NONE, True, False, False),
    0x09: (MBC_NONE, True, True, False),
    0x0F: (MBC_3, False, True, True),
    0x10: (MBC_3, True, True, True),
    0x11: (MBC_3, False, False, False),
    0x12: (MBC_3, True, False, False),
    0x13: (MBC_3, True, True, False),
    0x19: (MBC_5, False, False, False),
    0x1A: (MBC_5, True, False, False),
    0x1B: (MBC_5, True, True, False),
    0x1C: (MBC_5, False, False, False),
    0x1D: (MBC_5, True, False, False),
    0x1E: (MBC_5, True, True, False),
}
MBC_NAMES = {MBC_NONE: "ROM", MBC_1: "MBC1", MBC_2: "MBC2", MBC_3: "MBC3", MBC_5: "MBC5"}
RAM_SIZES = {0: 0, 1: 2048, 2: 8192, 3: 32768, 4: 131072, 5: 65536}
MBC2_RAM_BYTES = 512  # 512 half-bytes built into the MBC2 chip
MIN_ROM_BYTES = 0x8000


class RomError(GbxError, ValueError):
    """A ROM image that the emulator refuses to run."""


@dataclass(frozen=True)
class Cartridge:
    """Parsed header of a Game Boy ROM image plus the image itself."""

    data: bytes
    title: str
    cart_type: int
    mbc: int
    has_ram: bool
    has_battery: bool
    has_rtc: bool
    rom_bytes: int
    ram_bytes: int  # cartridge RAM the emulator maps (header size, MBC2 built-in, or 8 KiB floor)
    header_ram_bytes: int  # RAM size as declared by the header
    header_checksum: int
    global_checksum: int
    sha256: str

    @property
    def mbc_name(self) -> str:
        return MBC_NAMES[self.mbc]

    def info(self) -> dict[str, object]:
        """Header facts as a JSON-friendly dict."""
        return {
            "title": self.title,
            "cart_type": f"0x{self.cart_type:02X}",
            "mbc": self.mbc_name,
            "rom_bytes": self.rom_bytes,
            "ram_bytes": self.ram_bytes,
            "header_ram_bytes": self.header_ram_bytes,
            "battery": self.has_battery,
            "rtc": self.has_rtc,
            "header_checksum": f"0x{self.header_checksum:02X}",
            "global_checksum": f"0x{self.global_checksum:04X}",
            "sha256": self.sha256,
        }


def header_checksum(data: bytes) -> int:
    """The checksum over 0x134..0x14C that the boot ROM verifies."""
    x = 0
    for b in data[0x134:0x14D]:
        x = (x - b - 1) & 0xFF
    return x


def load_rom_bytes(rom: str | os.PathLike[str] | bytes | bytearray) -> bytes:
    """Read a ROM from a path or pass bytes through; one-line RomError on a bad path."""
    if isinstance(rom, bytes | bytearray | memoryview):
        return bytes(rom)
    path = os.fspath(rom)
    if not os.path.isfile(path):
        raise RomError(f"ROM file not found: {path} (pass the path of a .gb file)")
    with open(path, "rb") as fh:
        return fh.read()


def header_title(data: bytes) -> str:
    """The title in a ROM's header (0x134..0x143, up to the first NUL; other than printable
    ASCII shown as ``?``)."""
    raw = data[0x134:0x144].split(b"\x00")[0]
    return "".join(chr(c) if 32 <= c < 127 else "?" for c in raw).strip()


def parse_cartridge(rom: str | os.PathLike[str] | bytes | bytearray) -> Cartridge:
    """Validate a ROM image and return its parsed header; raises RomError on bad input."""
    data = load_rom_bytes(rom)
    if len(data) < MIN_ROM_BYTES:
        raise RomError(
            f"ROM is {len(data)} bytes; a Game Boy ROM is at least 32768 bytes (check the file)"
        )
    declared_sum = data[0x14D]
    actual_sum = header_checksum(data)
    if declared_sum != actual_sum:
        raise RomError(
            f"bad header checksum: header says 0x{declared_sum:02X}, bytes give 0x{actual_sum:02X}"
            " (corrupt or patched ROM; fix byte 0x14D)"
        )
    cart_type = data[0x147]
    if cart_type not in CART_TYPES:
        raise RomError(
            f"unsupported cartridge type 0x{cart_type:02X}; supported: ROM, MBC1, MBC2, MBC3, MBC5"
        )
    rom_code = data[0x148]
    if rom_code > 8:
        raise RomError(f"unsupported ROM size code 0x{rom_code:02X} at 0x148")
    rom_bytes = MIN_ROM_BYTES << rom_code
    if len(data) != rom_bytes:
        raise RomError(
            f"ROM size mismatch: header declares {rom_bytes} bytes, file has {len(data)}"
            " (truncated or padded file)"
        )
    ram_code = data[0x149]
    if ram_code not in RAM_SIZES:
        raise RomError(f"unsupported RAM size code 0x{ram_code:02X} at 0x149")
    mbc, has_ram, has_battery, has_rtc = CART_TYPES[cart_type]
    header_ram = RAM_SIZES[ram_code]
    ram_bytes = header_ram if has_ram else 0
    if mbc == MBC_2:
        ram_bytes = MBC2_RAM_BYTES
    elif has_ram and ram_bytes < 8192:
        # Some test ROMs declare RAM with size 0 yet write to A000: map one 8 KiB bank.
        ram_bytes = 8192
    return Cartridge(
        data=data,
        title=header_title(data),
        cart_type=cart_type,
        mbc=mbc,
        has_ram=has_ram,
        has_battery=has_battery,
        has_rtc=has_rtc,
        rom_bytes=rom_bytes,
        ram_bytes=ram_bytes,
        header_ram_bytes=header_ram,
        header_checksum=declared_sum,
        global_checksum=(data[0x14E] << 8) | data[0x14F],
        sha256=hashlib.sha256(data).hexdigest(),
    )
