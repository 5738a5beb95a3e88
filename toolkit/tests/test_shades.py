from __future__ import annotations

import pytest
import torch

from gbx_toolkit.shades import pack_shades, unpack_shades


def test_round_trip_and_layout() -> None:
    frames = torch.randint(0, 4, (3, 2, 72, 80), dtype=torch.uint8)
    packed = pack_shades(frames)
    assert packed.shape == (3, 2, 72, 20) and packed.dtype == torch.uint8
    assert torch.equal(unpack_shades(packed), frames)
    # pixel 4*j + i sits in bits 2*i..2*i+1 of byte j
    row = torch.tensor([1, 2, 3, 0, 3, 3, 3, 3], dtype=torch.uint8)
    assert pack_shades(row).tolist() == [1 | 2 << 2 | 3 << 4, 0xFF]


def test_width_must_divide_by_four() -> None:
    with pytest.raises(ValueError, match="divisible by 4"):
        pack_shades(torch.zeros(5, dtype=torch.uint8))
