"""The Game Boy plugin's clips and the observers' rollout GIFs share one encoder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gbx_gameboy")
pytest.importorskip("gbx_observers")


def test_both_callers_write_the_same_gif_bytes(tmp_path: Path) -> None:
    from gbx_gameboy.media import save_gif
    from gbx_observers.rollout import encode_gif

    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 4, size=(18, 20), dtype=np.uint8) for _ in range(3)]
    clip = save_gif(frames, tmp_path / "clip.gif", scale=2, palette="green", frame_ms=100)
    assert clip.read_bytes() == encode_gif(frames, scale=2, fps=10)
