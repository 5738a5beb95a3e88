"""Cells: a coarse picture of a frame, hashed to one integer, on the device.

A frame ``uint8 [N, H, W]`` of shades 0..3 is cut into ``rows x cols`` blocks; each block's
mean shade is rounded to one of ``levels`` levels (``round(mean / 3 * (levels - 1))``), and
the ``rows * cols`` levels are hashed to one non-negative ``int64``. Two frames that differ
only inside blocks, by less than half a level of a block's mean, share a cell (a blinking
cursor, a one-pixel sprite step); frames whose coarse pictures differ get different cells
(up to hash collisions, about 1 in 2**62 per pair).

The hash is two independent random linear forms of the levels, each reduced modulo a
prime below 2**31 and packed into 62 bits. Each form is computed exactly in float64:
levels < 16, multipliers < 2**31 and at most 4096 blocks keep every sum below 2**47, so a
matrix product gives the exact integer (no int64 overflow, no host work), whatever the
device.
"""

from __future__ import annotations

import torch

MAX_LEVELS = 16
MAX_BLOCKS = 4096
_PRIMES = (2_147_483_629, 2_147_483_587)  # the two largest primes below 2**31
_SHIFT = 31


def _check_grid(h: int, w: int, rows: int, cols: int, levels: int) -> None:
    if not 2 <= levels <= MAX_LEVELS:
        raise ValueError(f"cell levels must be in 2..{MAX_LEVELS}, got {levels}")
    if rows < 1 or cols < 1 or rows * cols > MAX_BLOCKS:
        raise ValueError(f"cell grid {rows}x{cols} must have 1..{MAX_BLOCKS} blocks")
    if h % rows or w % cols:
        raise ValueError(
            f"cell grid {rows}x{cols} does not divide the {h}x{w} frame; choose "
            f"explore.cell_rows dividing {h} and explore.cell_cols dividing {w}")


class CellHasher:
    """Frames ``uint8 [N, H, W]`` -> cell ids ``int64 [N]`` (see the module docstring).

    Multipliers come from a fixed seed, so a cell id means the same picture in every run
    and after a resume. Buffers are allocated once for ``num_envs`` frames.
    """

    def __init__(self, frame_hw: tuple[int, int], rows: int, cols: int, levels: int,
                 num_envs: int, device: torch.device | str, seed: int = 0x6278) -> None:
        h, w = (int(d) for d in frame_hw)
        _check_grid(h, w, rows, cols, levels)
        self.rows, self.cols, self.levels = rows, cols, levels
        self.block = (h // rows, w // cols)
        dev = torch.device(device)
        gen = torch.Generator().manual_seed(seed)
        mult = torch.randint(1, 2**31, (rows * cols, 2), generator=gen, dtype=torch.int64)
        self._mult = mult.to(torch.float64).to(dev)
        self._primes = torch.tensor(_PRIMES, dtype=torch.int64, device=dev)
        self._sums = torch.zeros((num_envs, rows, cols), dtype=torch.int64, device=dev)
        self._levels = torch.zeros((num_envs, rows * cols), dtype=torch.float64, device=dev)
        self._forms = torch.zeros((num_envs, 2), dtype=torch.float64, device=dev)
        self._ints = torch.zeros((num_envs, 2), dtype=torch.int64, device=dev)
        self.out = torch.zeros(num_envs, dtype=torch.int64, device=dev)

    def levels_of(self, frames: torch.Tensor) -> torch.Tensor:
        """Quantised block means ``int64 [N, rows, cols]`` in ``0..levels-1`` (a buffer)."""
        n, h, w = frames.shape
        bh, bw = self.block
        blocks = frames.view(n, self.rows, bh, self.cols, bw)
        torch.sum(blocks, dim=(2, 4), dtype=torch.int64, out=self._sums)
        # round(sum / area / 3 * (L - 1)) in integers: floor((2 s (L-1) + 3 area) / (6 area))
        area = bh * bw
        s = self._sums
        s.mul_(2 * (self.levels - 1)).add_(3 * area).floor_divide_(6 * area)
        return s

    def __call__(self, frames: torch.Tensor) -> torch.Tensor:
        """Cell ids of ``frames`` (``uint8 [N, H, W]``), non-negative ``int64 [N]`` (a buffer
        overwritten by the next call)."""
        q = self.levels_of(frames)
        self._levels.copy_(q.view(q.shape[0], -1))
        torch.matmul(self._levels, self._mult, out=self._forms)  # exact: sums < 2**47
        self._ints.copy_(self._forms)
        self._ints.remainder_(self._primes)
        torch.add(self._ints[:, 1], self._ints[:, 0], alpha=1 << _SHIFT, out=self.out)
        return self.out
