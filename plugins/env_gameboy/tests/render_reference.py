"""A slow, plain numpy DMG renderer used only to check the Warp renderer.

It works on whole planes instead of per-pixel tile lookups: the 256x256
background and window planes are decoded once per frame, objects are painted
in reverse priority order (lowest priority first) so the highest-priority
opaque pixel is the one left standing.
"""

from __future__ import annotations

import numpy as np

from gbx_gameboy.layout import (
    BGP,
    IO_OFF,
    LCDC,
    OAM_OFF,
    OBP0,
    OBP1,
    SCX,
    SCY,
    VRAM_OFF,
    WX,
    WY,
)


def decode_tile(vram: np.ndarray, addr: int, rows: int = 8) -> np.ndarray:
    """Tile at VRAM offset ``addr`` as a ``rows x 8`` array of colour indices."""
    raw = np.asarray(vram[addr:addr + 2 * rows], dtype=np.uint8)
    lo = np.unpackbits(raw[0::2, None], axis=1).astype(np.int64)  # MSB = leftmost pixel
    hi = np.unpackbits(raw[1::2, None], axis=1).astype(np.int64)
    return lo | (hi << 1)


def plane(vram: np.ndarray, map_off: int, unsigned: bool) -> np.ndarray:
    """The 256x256 colour-index plane of a tile map."""
    out = np.zeros((256, 256), dtype=np.int64)
    for ty in range(32):
        for tx in range(32):
            n = int(vram[map_off + ty * 32 + tx])
            addr = n * 16 if unsigned else 0x1000 + (n - 256 if n >= 128 else n) * 16
            out[ty * 8:ty * 8 + 8, tx * 8:tx * 8 + 8] = decode_tile(vram, addr)
    return out


def pal(p: int, c: np.ndarray | int):
    return (p >> (2 * np.asarray(c))) & 3


def render_frame(mem_env: np.ndarray, line_io: list[np.ndarray] | None = None) -> np.ndarray:
    """Render one env's ``mem`` column (``[MEM_BYTES]``) to ``[144, 160]`` shades.

    ``line_io`` optionally gives the IO block seen by each line (mid-frame
    register changes); otherwise the IO block of ``mem_env`` is used for all.
    """
    vram = mem_env[VRAM_OFF:VRAM_OFF + 0x2000]
    oam = mem_env[OAM_OFF:OAM_OFF + 160]
    fb = np.zeros((144, 160), dtype=np.uint8)
    win_line = 0
    planes: dict[tuple[int, bool], np.ndarray] = {}

    def cached_plane(map_off: int, unsigned: bool) -> np.ndarray:
        if (map_off, unsigned) not in planes:
            planes[(map_off, unsigned)] = plane(vram, map_off, unsigned)
        return planes[(map_off, unsigned)]

    for ly in range(144):
        io = line_io[ly] if line_io is not None else mem_env[IO_OFF:IO_OFF + 0x80]
        lcdc = int(io[LCDC])
        if not lcdc & 0x80:
            continue
        unsigned = bool(lcdc & 0x10)
        bg_on = bool(lcdc & 1)
        bg_plane = cached_plane(0x1C00 if lcdc & 0x08 else 0x1800, unsigned)
        win_plane = cached_plane(0x1C00 if lcdc & 0x40 else 0x1800, unsigned)
        xs = np.arange(160)
        bg = bg_plane[(ly + int(io[SCY])) & 255, (xs + int(io[SCX])) & 255]
        wx0 = int(io[WX]) - 7
        if bg_on and lcdc & 0x20 and ly >= int(io[WY]) and int(io[WX]) <= 166:
            cols = xs >= wx0
            bg = bg.copy()
            bg[cols] = win_plane[win_line, xs[cols] - wx0]
            win_line += 1
        if not bg_on:
            bg = np.zeros(160, dtype=np.int64)
        line = pal(int(io[BGP]), bg) if bg_on else np.zeros(160, dtype=np.int64)

        if lcdc & 0x02:
            h = 16 if lcdc & 0x04 else 8
            chosen = [i for i in range(40) if 0 <= ly - (int(oam[4 * i]) - 16) < h][:10]
            chosen.sort(key=lambda i: (int(oam[4 * i + 1]), i))
            obj_c = np.zeros(160, dtype=np.int64)
            obj_attr = np.zeros(160, dtype=np.int64)
            for i in reversed(chosen):
                y, x, t, a = (int(v) for v in oam[4 * i:4 * i + 4])
                tile = decode_tile(vram, (t & 0xFE if h == 16 else t) * 16, rows=h)
                if a & 0x40:
                    tile = tile[::-1]
                if a & 0x20:
                    tile = tile[:, ::-1]
                row = tile[ly - (y - 16)]
                for c in range(8):
                    sx = x - 8 + c
                    if 0 <= sx < 160 and row[c] != 0:
                        obj_c[sx] = row[c]
                        obj_attr[sx] = a
            for sx in range(160):
                if obj_c[sx] and (not obj_attr[sx] & 0x80 or bg[sx] == 0):
                    p = int(io[OBP1]) if obj_attr[sx] & 0x10 else int(io[OBP0])
                    line[sx] = pal(p, obj_c[sx])
        fb[ly] = line
    return fb
