"""Pixel art to Game Boy tile bytes.

Art is written as strings, one character per pixel: ``.`` colour 0 (white, or transparent
in sprites), ``-`` colour 1, ``+`` colour 2, ``#`` colour 3 (black).  A tile is 8x8 pixels,
stored as 16 bytes: per row, the low bit-plane byte then the high bit-plane byte.
"""

from __future__ import annotations

from collections.abc import Sequence

SHADES = {".": 0, "-": 1, "+": 2, "#": 3}
Grid = list[list[int]]


def parse_art(rows: Sequence[str], width: int, height: int) -> Grid:
    """Parse ``height`` strings of ``width`` art characters into colour indices."""
    if len(rows) != height or any(len(r) != width for r in rows):
        sizes = [len(r) for r in rows]
        raise ValueError(f"art must be {width}x{height}, got {len(rows)} rows of {sizes}")
    try:
        return [[SHADES[ch] for ch in row] for row in rows]
    except KeyError as err:
        raise ValueError(f"unknown art character {err} (use . - + #)") from None


def tile_bytes(grid: Grid, x0: int = 0, y0: int = 0) -> bytes:
    """Encode the 8x8 block of ``grid`` at (x0, y0) as 2bpp tile data."""
    out = bytearray()
    for y in range(y0, y0 + 8):
        low = high = 0
        for x in range(x0, x0 + 8):
            colour = grid[y][x]
            low = low << 1 | (colour & 1)
            high = high << 1 | (colour >> 1)
        out += bytes((low, high))
    return bytes(out)


def split16(grid: Grid) -> list[bytes]:
    """A 16x16 grid as four tiles: top-left, top-right, bottom-left, bottom-right."""
    return [tile_bytes(grid, 0, 0), tile_bytes(grid, 8, 0), tile_bytes(grid, 0, 8),
            tile_bytes(grid, 8, 8)]


def blank(colour: int, size: int = 16) -> Grid:
    return [[colour] * size for _ in range(size)]


def overlay(base: Grid, rows: Sequence[str], x0: int, y0: int) -> Grid:
    """Draw art ``rows`` onto a copy of ``base``; spaces keep the base pixel."""
    out = [row[:] for row in base]
    for dy, row in enumerate(rows):
        for dx, ch in enumerate(row):
            if ch != " ":
                out[y0 + dy][x0 + dx] = SHADES[ch]
    return out
