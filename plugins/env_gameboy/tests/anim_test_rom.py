"""A tiny ROM whose picture and RAM change every frame (for state round trips).

Every VBlank the ROM scrolls the background one pixel (SCX += 1), counts
frames at $C000, stores DIV at $C001 and TIMA at $C002 (the timer runs at
16 cycles per tick), so a state that lands a frame or a timer phase off shows.
"""

from __future__ import annotations

from pathlib import Path

from gbx_gameboy.asm import assemble
from gbx_gameboy.microrom import LCD_OFF_START

SOURCE_TEMPLATE = """
HEADER_TITLE "GBX ANIM TEST"
HEADER_CART_TYPE {cart_type}
HEADER_RAM_SIZE $02
SECTION "vblank", ROM0[$0040]
    jp VBlank
""" + LCD_OFF_START + """
    ld hl, $8000
    ld bc, $1000
.tiles:
    ld a, l
    xor h
    ld [hl+], a
    dec bc
    ld a, b
    or c
    jr nz, .tiles
    ld hl, $9800
    ld bc, $400
.map:
    ld a, l
    and $3F
    ld [hl+], a
    dec bc
    ld a, b
    or c
    jr nz, .map
    ld a, $E4
    ldh [$47], a
    xor a
    ldh [$42], a
    ldh [$43], a
    ld [$C000], a
    ld a, $0A
    ld [$0000], a
    ld a, $05
    ldh [$07], a
    ld a, $91
    ldh [$40], a
    ld a, 1
    ldh [$FF], a
    xor a
    ldh [$0F], a
    ei
    nop
Loop:
    halt
    nop
    jr Loop
VBlank:
    ldh a, [$43]
    inc a
    ldh [$43], a
    ld a, [$C000]
    inc a
    ld [$C000], a
    ld [$A000], a
    ldh a, [$04]
    ld [$C001], a
    ldh a, [$05]
    ld [$C002], a
    reti
"""


def write_anim_test_rom(folder: Path, cart_type: int = 0x03) -> Path:
    """Write the ROM with cartridge type ``cart_type`` (it needs RAM: MBC1/3/5 with RAM)."""
    path = folder / f"anim_{cart_type:02x}.gb"
    path.write_bytes(assemble(SOURCE_TEMPLATE.replace("{cart_type}", f"${cart_type:02X}")))
    return path
