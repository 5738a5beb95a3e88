"""Pictures of the screen: PNG screenshots and GIF clips from shade frames.

Frames are shade indices 0..3 (``[144, 160]``, numpy or torch on any device);
they are mapped through a palette, scaled with nearest-neighbour and written
atomically (:func:`gbx.config.atomic_file`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from gbx.config import atomic_file

# The grey levels of test-ROM reference screenshots (white = shade 0), and the
# green tones of the original DMG screen.
PALETTES: dict[str, tuple[tuple[int, int, int], ...]] = {
    "grey": ((0xFF, 0xFF, 0xFF), (0xAA, 0xAA, 0xAA), (0x55, 0x55, 0x55), (0x00, 0x00, 0x00)),
    "green": ((0xE0, 0xF8, 0xD0), (0x88, 0xC0, 0x70), (0x34, 0x68, 0x56), (0x08, 0x18, 0x20)),
}


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


def shades_to_image(frame: Any, *, scale: int = 1, palette: str = "grey") -> Image.Image:
    """An RGB PIL image of a shade frame, each pixel drawn as a ``scale x scale`` block."""
    if palette not in PALETTES:
        raise ValueError(f"unknown palette {palette!r}; choose one of {', '.join(PALETTES)}")
    if scale < 1:
        raise ValueError(f"scale must be >= 1, got {scale}")
    lut = np.asarray(PALETTES[palette], dtype=np.uint8)
    rgb = lut[to_numpy_shades(frame)]
    if scale > 1:
        rgb = rgb.repeat(scale, axis=0).repeat(scale, axis=1)
    return Image.fromarray(rgb, mode="RGB")


def grey_levels(frame: Any) -> np.ndarray:
    """Shade indices -> 8-bit grey (0xFF, 0xAA, 0x55, 0x00), as reference screenshots use."""
    return np.asarray([0xFF, 0xAA, 0x55, 0x00], dtype=np.uint8)[to_numpy_shades(frame)]


def _atomic_save(path: Path, save: Any) -> Path:
    with atomic_file(path) as f:
        save(f)
    return path


def save_png(frame: Any, path: str | Path, *, scale: int = 1, palette: str = "grey") -> Path:
    """Write one shade frame as a PNG; return the path."""
    img = shades_to_image(frame, scale=scale, palette=palette)
    return _atomic_save(Path(path), lambda f: img.save(f, format="PNG"))


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
    images = [shades_to_image(f, scale=scale, palette=palette) for f in frames]
    if not images:
        raise ValueError("save_gif needs at least one frame")
    # A fixed 4-colour palette image keeps every frame's colours exact.
    pal_img = Image.new("P", (1, 1))
    flat = [c for rgb in PALETTES[palette] for c in rgb]
    pal_img.putpalette(flat + [0] * (768 - len(flat)))
    quantised = [im.quantize(palette=pal_img, dither=Image.Dither.NONE) for im in images]

    def save(f: Any) -> None:
        quantised[0].save(
            f,
            format="GIF",
            save_all=True,
            append_images=quantised[1:],
            duration=frame_ms,
            loop=loop,
            optimize=False,
        )

    return _atomic_save(Path(path), save)


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
