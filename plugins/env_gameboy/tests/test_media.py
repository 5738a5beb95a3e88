"""PNG and GIF writers keep the shades exact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageSequence

from gbx_gameboy.media import PALETTES, grey_levels, save_gif, save_png


def test_png_is_scaled_and_uses_the_palette(tmp_path: Path) -> None:
    frame = torch.randint(0, 4, (144, 160), dtype=torch.uint8)
    p = save_png(frame, tmp_path / "sub" / "shot.png", scale=2)
    img = np.asarray(Image.open(p).convert("RGB"))
    assert img.shape == (288, 320, 3)
    assert (img[::2, ::2, 0] == grey_levels(frame)).all()
    assert (img[1::2, 1::2, 0] == grey_levels(frame)).all()
    green = np.asarray(Image.open(save_png(frame, tmp_path / "g.png", palette="green")))
    assert tuple(green[0, 0]) == PALETTES["green"][int(frame[0, 0])]
    assert [q.name for q in tmp_path.iterdir()] != []  # no temp files left behind
    assert not [q for q in (tmp_path / "sub").iterdir() if q.name.startswith(".")]


def test_gif_round_trips_every_frame(tmp_path: Path) -> None:
    frames = [np.random.default_rng(i).integers(0, 4, (144, 160), dtype=np.uint8) for i in range(5)]
    p = save_gif(frames, tmp_path / "a.gif", frame_ms=40)
    read = [np.asarray(f.convert("L")) for f in ImageSequence.Iterator(Image.open(p))]
    assert len(read) == 5
    for want, got in zip(frames, read, strict=True):
        assert (got == grey_levels(want)).all()


def test_bad_frames_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"0\.\.3"):
        save_png(np.full((4, 4), 7, dtype=np.uint8), tmp_path / "x.png")
    with pytest.raises(ValueError, match="2-D"):
        save_png(np.zeros((1, 4, 4), dtype=np.uint8), tmp_path / "x.png")
    with pytest.raises(ValueError, match="at least one"):
        save_gif([], tmp_path / "x.gif")
