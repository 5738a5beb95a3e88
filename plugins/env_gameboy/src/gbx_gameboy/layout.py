"""Per-env state layout of the batched Game Boy, shared by every kernel.

All per-env memory is *interleaved*: arrays are shaped ``(bytes, num_envs)``
so that when the threads of a warp touch the same address (the common case:
the same game reads the same HRAM variable or IO register) the accesses of
consecutive envs are consecutive in memory and coalesce into one transaction.

``mem`` holds every small per-env region in one ``uint8`` array:

==========  =============  ==========================
offset      size           Game Boy address range
==========  =============  ==========================
VRAM_OFF    0x2000         0x8000-0x9FFF
WRAM_OFF    0x2000         0xC000-0xDFFF (echo E000-FDFF)
OAM_OFF     0x00A0         0xFE00-0xFE9F
IO_OFF      0x0080         0xFF00-0xFF7F
HRAM_OFF    0x0080         0xFF80-0xFFFF (0xFFFF is IE)
==========  =============  ==========================

Cartridge RAM lives in its own ``uint8`` array ``cram`` shaped
``(max(cart_ram_bytes, 1), num_envs)``, sized from the ROM header.
The ROM is one read-only ``uint8`` array shared by all envs.
The framebuffer is ``fb`` shaped ``(num_envs, 144, 160)``, ``uint8`` shade
indices 0..3 after the palette (BGP/OBP0/OBP1) mapping.
"""

from __future__ import annotations

VRAM_OFF = 0x0000
WRAM_OFF = 0x2000
OAM_OFF = 0x4000
IO_OFF = 0x40A0
HRAM_OFF = 0x4120  # 0xFF80..0xFFFF; IE (0xFFFF) is the last byte
MEM_BYTES = 0x41A0

SCREEN_H = 144
SCREEN_W = 160

# IO register offsets inside the IO block (address - 0xFF00)
P1, SB, SC, DIV, TIMA, TMA, TAC, IF = 0x00, 0x01, 0x02, 0x04, 0x05, 0x06, 0x07, 0x0F
LCDC, STAT, SCY, SCX, LY, LYC, DMA, BGP, OBP0, OBP1, WY, WX = (
    0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4A, 0x4B,
)
