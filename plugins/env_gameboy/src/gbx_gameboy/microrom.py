"""Wrap a snippet of SM83 assembly into a bootable ROM (for tests and benchmarks).

The snippet starts at ``Main`` (0x0150) right after the usual ``nop; jp Main`` entry.
``DONE`` is a macro that parks the CPU for good (``di`` + ``halt`` with IE cleared).
"""

from __future__ import annotations

# The start of a test ROM that draws its own picture: the entry jump, then ``Main``
# waits for VBlank and turns the LCD off so VRAM can be filled freely.
LCD_OFF_START = """SECTION "entry", ROM0[$0100]
    nop
    jp Main
SECTION "main", ROM0[$0150]
Main:
    di
    ld sp, $DFFF
.waitvb:
    ldh a, [$44]
    cp 144
    jr c, .waitvb
    xor a
    ldh [$40], a
"""

PRELUDE = """
MACRO DONE
    di
    xor a
    ldh [$FF], a
.park\\@:
    halt
    jr .park\\@
ENDM
"""


def micro_rom(body: str, *, cart_type: int = 0, ram_size: int = 0, extra: str = "") -> bytes:
    """Assemble ``body`` as the program at Main; ``extra`` may add more sections."""
    from gbx_gameboy.asm import assemble

    src = (
        f"HEADER_TITLE \"MICRO\"\nHEADER_CART_TYPE {cart_type}\nHEADER_RAM_SIZE {ram_size}\n"
        f"{PRELUDE}\n"
        'SECTION "entry", ROM0[$0100]\n    nop\n    jp Main\n'
        'SECTION "main", ROM0[$0150]\nMain:\n'
        f"{body}\n{extra}\n"
    )
    return assemble(src)
