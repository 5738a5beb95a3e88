"""gbx_gameboy: a batched Game Boy (DMG) emulator in NVIDIA Warp, and its gbx plugin.

Import :class:`gbx_gameboy.machine.GameBoyBatch` for the emulator; this package's import
stays light (no Warp) so the plugin can be discovered cheaply.
"""

from __future__ import annotations

__all__: list[str] = []
