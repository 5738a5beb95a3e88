"""The real games the PyBoy comparisons play: the bundled quest and flappyboy."""

from __future__ import annotations

from pathlib import Path

import pytest

from gbx_gameboy import conformance as conf
from gbx_gameboy.env import DEFAULT_ROM

FLAPPYBOY = conf.testroms_dir() / "games" / "flappyboy" / "flappyboy.gb"


def rom_of(game: str) -> Path:
    """The ROM of "gbx_quest" or "flappyboy" (skips the test when flappyboy is absent)."""
    if game == "flappyboy":
        if not FLAPPYBOY.is_file():
            pytest.skip(f"flappyboy not found at {FLAPPYBOY} (shared test ROMs)")
        return FLAPPYBOY
    return DEFAULT_ROM
