"""PyBoy's RGB screen -> Game Boy shade indices (0 = white .. 3 = black).

PyBoy draws the four DMG shades with its default palette (white, light grey, dark
grey, black: red channel 255, 153, 85, 0). The emulator's palette registers have
already been applied, so the screen's colour is the shade the game chose.
"""

from __future__ import annotations

import numpy as np

PYBOY_SHADE_RED = (255, 153, 85, 0)  # red channel of shades 0..3 in PyBoy's default palette


def red_to_shade_lut() -> np.ndarray:
    """``uint8 [256]``: red channel value -> nearest shade index."""
    levels = np.array(PYBOY_SHADE_RED, dtype=np.int16)
    values = np.arange(256, dtype=np.int16)[:, None]
    return np.abs(values - levels[None, :]).argmin(axis=1).astype(np.uint8)


LUT = red_to_shade_lut()


def screen_to_shades(screen: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Shades ``uint8 [144, 160]`` of a PyBoy screen ``uint8 [144, 160, 3|4]``, into ``out``."""
    return np.take(LUT, screen[:, :, 0], out=out)
