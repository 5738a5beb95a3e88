"""Pictures of the screen: PNG screenshots and GIF clips from shade frames.

Frames are shade indices 0..3 (``[144, 160]``, numpy or torch on any device);
they are encoded by :mod:`gbx_toolkit.pictures` and written with
:func:`gbx.config.write_atomic`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from gbx.config import write_atomic
from gbx_toolkit.pictures import PALETTES, encode_gif, encode_png

__all__ = ["PALETTES", "grey_levels", "record_frames", "save_gif", "save_png", "to_numpy_shades"]


def to_numpy_shades(frame: Any) -> np.ndarray:
    """A ``uint8 [H, W]`` numpy array of shade indices from a numpy array or torch tensor."""
    if hasattr(frame, "detach"):
        frame = frame.detach().to("cpu").numpy()
    arr = np.asarray(frame)
    if arr.ndim != 2:
        raise ValueError(f"a frame must be 2-D [H, W] shade indices, got shape {arr.shape}")
    if arr.size and int(arr.max()) > 3:
        raise ValueError("a frame must hold shade indices 0..3; got values above 3")
    return arr.astype(np.uint8, copy=False)


def grey_levels(frame: Any) -> np.ndarray:
    """Shade indices -> 8-bit grey (0xFF, 0xAA, 0x55, 0x00), as reference screenshots use."""
    return np.asarray([0xFF, 0xAA, 0x55, 0x00], dtype=np.uint8)[to_numpy_shades(frame)]


def save_png(frame: Any, path: str | Path, *, scale: int = 1, palette: str = "grey") -> Path:
    """Write one shade frame as a PNG; return the path."""
    return write_atomic(path, encode_png(to_numpy_shades(frame), scale=scale, palette=palette))


def save_gif(
    frames: Iterable[Any],
    path: str | Path,
    *,
    scale: int = 1,
    palette: str = "grey",
    frame_ms: int = 50,
    loop: int = 0,
) -> Path:
    """Write a sequence of shade frames as an animated GIF (``frame_ms`` per frame)."""
    shades = [to_numpy_shades(f) for f in frames]
    if not shades:
        raise ValueError("save_gif needs at least one frame")
    return write_atomic(path, encode_gif(shades, scale=scale, palette=palette,
                                         frame_ms=frame_ms, loop=loop))


def record_frames(
    batch: Any, frames: int, every: int = 1, presses: list[tuple[str, int]] | None = None,
    env: int = 0,
) -> list[np.ndarray]:
    """Run ``batch`` for ``frames`` frames; return env ``env``'s screen every ``every`` frames."""
    from gbx_gameboy.actions import run_with_presses

    if frames < 1 or every < 1:
        raise ValueError(f"frames and every must be >= 1, got {frames} and {every}")
    shots: list[np.ndarray] = []
    presses = presses or []
    done = 0
    while done < frames:
        chunk = min(every, frames - done)
        # Shift the schedule so frame numbers stay absolute across chunks.
        window = [(b, f - done) for b, f in presses if done - 8 < f < done + chunk]
        run_with_presses(batch, chunk, window, render_last=True)
        shots.append(to_numpy_shades(batch.fb[env]).copy())
        done += chunk
    return shots
