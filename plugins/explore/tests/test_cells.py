"""Cell hashing: equal coarse pictures share a cell, different ones do not."""

from __future__ import annotations

import pytest
import torch
from gbx_explore.cells import CellHasher


def _frames(n: int = 4) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randint(0, 4, (n, 72, 80), generator=gen, dtype=torch.uint8)


def test_same_frame_same_cell_and_ids_are_stable_across_hashers() -> None:
    frames = _frames()
    a = CellHasher((72, 80), 9, 10, 8, 4, "cpu")
    b = CellHasher((72, 80), 9, 10, 8, 4, "cpu")
    first = a(frames).clone()
    assert torch.equal(first, a(frames.clone()))
    assert torch.equal(first, b(frames))
    assert bool((first >= 0).all()) and bool((first < 2**62).all())


def test_different_coarse_frames_get_different_cells() -> None:
    hasher = CellHasher((72, 80), 9, 10, 8, 64, "cpu")
    # 64 frames, each with one different 8x8 block dark: 64 different coarse pictures
    frames = torch.zeros(64, 72, 80, dtype=torch.uint8)
    for i in range(64):
        r, c = divmod(i, 10)
        frames[i, 8 * r : 8 * r + 8, 8 * c : 8 * c + 8] = 3
    cells = hasher(frames)
    assert cells.unique().numel() == 64


def test_sub_cell_noise_keeps_the_cell() -> None:
    hasher = CellHasher((72, 80), 9, 10, 8, 2, "cpu")
    base = torch.ones(72, 80, dtype=torch.uint8)  # every block at mean 1: level round(7/3)=2
    noisy = base.clone()
    noisy[3, 5] = 3  # one pixel in a 64-pixel block: mean 1 + 2/64, far from a level edge
    noisy[40, 41] = 0
    cells = hasher(torch.stack([base, noisy]))
    assert cells[0] == cells[1]
    levels = hasher.levels_of(torch.stack([base, noisy]))
    assert bool((levels == 2).all())


def test_a_block_crossing_half_a_level_changes_the_cell() -> None:
    hasher = CellHasher((72, 80), 9, 10, 8, 2, "cpu")
    base = torch.zeros(72, 80, dtype=torch.uint8)
    changed = base.clone()
    changed[0:8, 0:4] = 1  # block mean 0.5 shades: level round(0.5 * 7 / 3) = 1
    cells = hasher(torch.stack([base, changed]))
    assert cells[0] != cells[1]


def test_levels_are_rounded_block_means() -> None:
    hasher = CellHasher((4, 4), 2, 2, 4, 1, "cpu")  # levels 0..3 = shades
    frame = torch.tensor([[[0, 0, 3, 3], [0, 0, 3, 3], [1, 2, 2, 2], [1, 2, 2, 1]]],
                         dtype=torch.uint8)
    # block means 0, 3, 1.5, 1.75 -> round: 0, 3, 2, 2
    assert hasher.levels_of(frame).view(-1).tolist() == [0, 3, 2, 2]


def test_a_grid_that_does_not_divide_the_frame_is_refused() -> None:
    with pytest.raises(ValueError, match="does not divide"):
        CellHasher((72, 80), 7, 10, 8, 1, "cpu")
    with pytest.raises(ValueError, match="levels"):
        CellHasher((72, 80), 9, 10, 1, 1, "cpu")
