"""Host-side views of the tiled per-env arrays (see layout.py).

A tiled tensor is shaped ``(tiles, rows, TILE)``; env ``e`` owns column ``e % TILE`` of
tile ``e // TILE``. One env's rows are a strided view; one row across all envs is
``tiles * TILE`` values of which the first ``num_envs`` are real envs.
"""

from __future__ import annotations

import torch

from gbx_gameboy.layout import TILE, TILE_SHIFT, tiles_for


def env_rows(t: torch.Tensor, env: int) -> torch.Tensor:
    """Env ``env``'s rows of a tiled tensor: a ``(rows,)`` view (writes go to the batch)."""
    tiles = t.shape[0]
    if not 0 <= env < tiles * TILE:
        raise IndexError(f"env {env} out of range for {tiles} tiles of {TILE} envs")
    return t[env >> TILE_SHIFT, :, env & (TILE - 1)]


def row_of_envs(t: torch.Tensor, row: int, num_envs: int) -> torch.Tensor:
    """Row ``row`` of the first ``num_envs`` envs, ``(num_envs,)`` (a copy)."""
    return t[:, row, :].reshape(-1)[:num_envs]


def untile(t: torch.Tensor, num_envs: int) -> torch.Tensor:
    """``(rows, num_envs)``: every env's rows side by side (a copy)."""
    return t.permute(1, 0, 2).reshape(t.shape[1], -1)[:, :num_envs]


def tile_envs(x: torch.Tensor) -> torch.Tensor:
    """Stack ``(num_envs, rows)`` per-env rows into a new contiguous tiled tensor (the
    columns of the last tile past ``num_envs`` are zero)."""
    n, rows = x.shape
    padded = x.new_zeros((tiles_for(n) * TILE, rows))
    padded[:n] = x
    return padded.reshape(-1, TILE, rows).permute(0, 2, 1).contiguous()
