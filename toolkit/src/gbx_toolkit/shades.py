"""Game Boy shade frames packed four pixels per byte (replay storage).

Shade indices are 0..3, so a byte holds four of them: pixel ``4*j + i`` of a
row lands in bits ``2*i .. 2*i+1`` of byte ``j``. Replay buffers of pixel
algorithms store frames this way (a quarter of the memory); both functions are
pure torch, run on any device and allocate only their output.
"""

from __future__ import annotations

import torch

_SHIFTS: dict[torch.device, torch.Tensor] = {}


def pack_shades(frames: torch.Tensor) -> torch.Tensor:
    """uint8 ``[..., W]`` with values 0..3 (``W % 4 == 0``) -> uint8 ``[..., W // 4]``."""
    width = frames.shape[-1]
    if width % 4:
        raise ValueError(f"pack_shades needs a width divisible by 4, got {width}")
    q = frames.reshape(*frames.shape[:-1], width // 4, 4) & 3
    return q[..., 0] | (q[..., 1] << 2) | (q[..., 2] << 4) | (q[..., 3] << 6)


def unpack_shades(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_shades`: uint8 ``[..., W // 4]`` -> uint8 ``[..., W]``."""
    shifts = _SHIFTS.get(packed.device)
    if shifts is None:
        shifts = torch.tensor([0, 2, 4, 6], dtype=torch.uint8, device=packed.device)
        _SHIFTS[packed.device] = shifts
    return ((packed.unsqueeze(-1) >> shifts) & 3).reshape(*packed.shape[:-1], packed.shape[-1] * 4)
