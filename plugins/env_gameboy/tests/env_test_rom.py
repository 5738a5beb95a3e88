"""A tiny ROM for env tests: a black 8x8 tile that slides right while any button is held.

Every VBlank the ROM reads the joypad, stores the pressed buttons at $C000
(high nibble: DOWN UP LEFT RIGHT, low nibble: START SELECT B A) and, when any
button is pressed, decrements SCX so the picture moves one pixel right per frame.
"""

from __future__ import annotations

from pathlib import Path

from gbx_gameboy.asm import assemble
from gbx_gameboy.microrom import LCD_OFF_START

SOURCE = """
HEADER_TITLE "GBX ENV TEST"
SECTION "vblank", ROM0[$0040]
    reti
""" + LCD_OFF_START + """
    ld hl, $8010
    ld b, 16
    ld a, $FF
.tile:
    ld [hl+], a
    dec b
    jr nz, .tile
    ld hl, $9800
    ld bc, $400
.map:
    xor a
    ld [hl+], a
    dec bc
    ld a, b
    or c
    jr nz, .map
    ld a, 1
    ld [$9800], a
    ld a, $E4
    ldh [$47], a
    xor a
    ldh [$42], a
    ldh [$43], a
    ld [$C000], a
    ld a, $91
    ldh [$40], a
    ld a, 1
    ldh [$FF], a
    ei
Loop:
    halt
    nop
    ld a, $20
    ldh [$00], a
    ldh a, [$00]
    ldh a, [$00]
    cpl
    and $0F
    swap a
    ld b, a
    ld a, $10
    ldh [$00], a
    ldh a, [$00]
    ldh a, [$00]
    cpl
    and $0F
    or b
    ld [$C000], a
    and a
    jr z, Loop
    ldh a, [$43]
    dec a
    ldh [$43], a
    jr Loop
"""


def write_env_test_rom(folder: Path) -> Path:
    path = folder / "envtest.gb"
    path.write_bytes(assemble(SOURCE))
    return path
