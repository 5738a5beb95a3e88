"""Shade frames as pictures: the palettes, RGB mapping, PNG and GIF encoding.

A frame is ``uint8 [H, W]`` shade indices 0..3 (0 lightest). Every picture the
project writes (screenshots, clips, rollout GIFs, failure media) is encoded here
and written with :func:`gbx.config.write_atomic`. Pillow is imported on use: the
plugins that draw pictures depend on it, the core does not.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

# The grey levels of test-ROM reference screenshots (white = shade 0), and the
# green tones of the original DMG screen.
PALETTES: dict[str, tuple[tuple[int, int, int], ...]] = {
    "grey": ((0xFF, 0xFF, 0xFF), (0xAA, 0xAA, 0xAA), (0x55, 0x55, 0x55), (0x00, 0x00, 0x00)),
    "green": ((0xE0, 0xF8, 0xD0), (0x88, 0xC0, 0x70), (0x34, 0x68, 0x56), (0x08, 0x18, 0x20)),
}


def _checked(frame: np.ndarray, scale: int, palette: str) -> np.ndarray:
    if palette not in PALETTES:
        raise ValueError(f"unknown palette {palette!r}; choose one of {', '.join(PALETTES)}")
    if scale < 1:
        raise ValueError(f"scale must be >= 1, got {scale}")
    arr = np.asarray(frame)
    if arr.ndim != 2:
        raise ValueError(f"a frame must be 2-D [H, W] shade indices, got shape {arr.shape}")
    if arr.size and int(arr.max()) > 3:
        raise ValueError("a frame must hold shade indices 0..3; got values above 3")
    arr = arr.astype(np.uint8, copy=False)
    return arr.repeat(scale, axis=0).repeat(scale, axis=1) if scale > 1 else arr


def shades_to_rgb(frame: np.ndarray, *, scale: int = 1, palette: str = "grey") -> np.ndarray:
    """``uint8 [H*scale, W*scale, 3]``: each shade through ``palette``, nearest-neighbour scaled."""
    shades = _checked(frame, scale, palette)
    return np.asarray(PALETTES[palette], dtype=np.uint8)[shades]


def encode_png(frame: np.ndarray, *, scale: int = 1, palette: str = "grey") -> bytes:
    """One frame as RGB PNG bytes."""
    from PIL import Image

    buffer = io.BytesIO()
    rgb = shades_to_rgb(frame, scale=scale, palette=palette)
    Image.fromarray(rgb, mode="RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def encode_gif(frames: Sequence[np.ndarray], *, scale: int = 1, palette: str = "grey",
               frame_ms: int = 50, loop: int = 0) -> bytes:
    """Frames as animated GIF bytes, ``frame_ms`` each (``loop`` 0 repeats forever)."""
    from PIL import Image

    if not frames:
        raise ValueError("a GIF needs at least one frame")
    shaded = [_checked(frame, scale, palette) for frame in frames]
    # Palette images of the shade indices themselves: the 4 colours stay exact.
    flat = [c for rgb in PALETTES[palette] for c in rgb]
    images = []
    for shades in shaded:
        image = Image.fromarray(shades, mode="P")
        image.putpalette(flat)
        images.append(image)
    buffer = io.BytesIO()
    images[0].save(buffer, format="GIF", save_all=True, append_images=images[1:],
                   duration=frame_ms, loop=loop, optimize=False)
    return buffer.getvalue()
