"""Shade packing for replay: four 2-bit shade indices per byte along the last axis.

Pixel ``4*j + i`` of a row lands in bits ``2*i .. 2*i+1`` of byte ``j``: the same layout
as ``gbx_gameboy.obs`` (a test checks both agree bit for bit when that plugin is
installed). It lives here so this plugin runs with only gbx-core installed.
"""

from __future__ import annotations

import torch

_SHIFTS = (0, 2, 4, 6)


def pack_shades(frames: torch.Tensor) -> torch.Tensor:
    """uint8 ``[..., W]`` with values 0..3 (``W % 4 == 0``) -> uint8 ``[..., W // 4]``."""
    if frames.shape[-1] % 4:
        raise ValueError(f"pack_shades needs a width divisible by 4, got {frames.shape[-1]}")
    q = frames.reshape(*frames.shape[:-1], frames.shape[-1] // 4, 4)
    return (q[..., 0] | (q[..., 1] << 2) | (q[..., 2] << 4) | (q[..., 3] << 6)).to(torch.uint8)


def unpack_shades(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_shades`: uint8 ``[..., W // 4]`` -> uint8 ``[..., W]``."""
    parts = [(packed >> s) & 3 for s in _SHIFTS]
    return torch.stack(parts, dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 4)
