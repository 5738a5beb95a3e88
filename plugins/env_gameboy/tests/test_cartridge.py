"""Cartridge header validation: bad ROMs are refused with one-line RomErrors before any launch."""

from __future__ import annotations

import pytest

from gbx_gameboy.cartridge import RomError, header_checksum, parse_cartridge
from gbx_gameboy.microrom import micro_rom


def _fix_checksum(data: bytearray) -> bytearray:
    data[0x14D] = header_checksum(bytes(data))
    return data


def test_parses_a_good_rom() -> None:
    rom = micro_rom("    DONE", cart_type=0x03, ram_size=3)
    cart = parse_cartridge(rom)
    assert cart.title == "MICRO"
    assert cart.mbc_name == "MBC1" and cart.has_battery and cart.has_ram
    assert cart.rom_bytes == len(rom) == 32768
    assert cart.ram_bytes == 32768
    assert cart.header_checksum == rom[0x14D]
    assert len(cart.sha256) == 64
    assert cart.info()["cart_type"] == "0x03"


def test_bad_header_checksum_is_refused() -> None:
    rom = bytearray(micro_rom("    DONE"))
    rom[0x14D] ^= 0xFF
    with pytest.raises(RomError, match="header checksum") as exc:
        parse_cartridge(bytes(rom))
    assert "\n" not in str(exc.value)


def test_size_mismatch_is_refused() -> None:
    rom = micro_rom("    DONE")
    with pytest.raises(RomError, match="size mismatch"):
        parse_cartridge(rom + bytes(0x8000))
    rom2 = _fix_checksum(bytearray(rom))
    rom2[0x148] = 1  # declares 64 KiB
    with pytest.raises(RomError, match="size mismatch"):
        parse_cartridge(bytes(_fix_checksum(rom2)))


def test_unsupported_cartridge_type_is_refused() -> None:
    rom = bytearray(micro_rom("    DONE"))
    rom[0x147] = 0xFC  # pocket camera
    with pytest.raises(RomError, match="unsupported cartridge type 0xFC"):
        parse_cartridge(bytes(_fix_checksum(rom)))


def test_too_small_and_missing_files_are_refused(tmp_path) -> None:
    with pytest.raises(RomError, match="at least 32768"):
        parse_cartridge(b"\x00" * 100)
    with pytest.raises(RomError, match="not found"):
        parse_cartridge(tmp_path / "nope.gb")


def test_mbc1_ram_declared_zero_still_maps_8k() -> None:
    cart = parse_cartridge(micro_rom("    DONE", cart_type=0x02, ram_size=0))
    assert cart.header_ram_bytes == 0 and cart.ram_bytes == 8192


def test_machine_refuses_bad_rom_before_launch() -> None:
    from gbx_gameboy.machine import GameBoyBatch

    rom = bytearray(micro_rom("    DONE"))
    rom[0x14D] ^= 1
    with pytest.raises(RomError):
        GameBoyBatch(bytes(rom), 1, "cpu")
