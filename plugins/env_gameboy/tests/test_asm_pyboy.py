"""An assembled ROM runs: PyBoy executes it (no logo check) and the results land in WRAM."""

from __future__ import annotations

from pathlib import Path

import pytest

from gbx_gameboy.asm import assemble

pyboy = pytest.importorskip("pyboy", reason="PyBoy is the reference runner for this test")

# MBC1 ROM with 4 banks: bank 0 copies one marker byte from banks 2 and 3 into WRAM, then
# stores a sum computed with CB ops and a call/ret, and halts with interrupts off.
SOURCE = """
HEADER_TITLE "ASM SMOKE"
HEADER_CART_TYPE $01
HEADER_ROM_SIZE 1
SECTION "entry", ROM0[$0100]
    nop
    jp Main
SECTION "main", ROM0[$0150]
Main:
    di
    ld sp, $DFFF
    ld a, 2
    ld [$2000], a           ; MBC1: select ROM bank 2
    ld a, [Marker]
    ld [$C000], a
    ld a, 3
    ld [$2000], a
    ld a, [Marker]
    ld [$C001], a
    ld b, 5
    call Triple
    ld [$C002], a
    ld a, %0001_0000
    swap a
    set 7, a
    ld [$C003], a
.done:
    halt
    jr .done
Triple:                     ; a = 3 * b
    ld a, b
    add a, a
    add a, b
    ret
SECTION "bank2", ROMX[$4000], BANK[2]
Marker:
    db $B2
SECTION "bank3", ROMX[$4000], BANK[3]
    db $B3
"""


def test_assembled_rom_runs_in_pyboy(tmp_path: Path) -> None:
    path = tmp_path / "smoke.gb"
    path.write_bytes(assemble(SOURCE))
    emu = pyboy.PyBoy(str(path), window="null", sound_emulated=False)
    try:
        emu.tick(240, False)  # PyBoy's own boot ROM runs first; it does not check the logo
        got = [emu.memory[0xC000 + i] for i in range(4)]
    finally:
        emu.stop(save=False)
    assert got == [0xB2, 0xB3, 15, 0x81]
