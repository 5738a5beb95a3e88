"""Where the game keeps its state: RAM addresses read from the built ``.sym`` file.

Goal checks and tests read these variables; names are the game source's labels
(``wRoom``, ``wX``, ``wY``, ``wState``, ``wHasGem``, ``wQuestDone``, ...).
"""

from __future__ import annotations

from pathlib import Path

from .build import GAME_DIR, SYM_NAME

STATE_WALK, STATE_TEXT, STATE_MENU, STATE_DONE = 0, 1, 2, 3


def parse_symbols(text: str) -> dict[str, int]:
    """``BB:AAAA name`` lines to ``name -> address``."""
    out: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            where, name = line.split()
            out[name] = int(where.split(":")[1], 16)
        except (ValueError, IndexError):
            raise ValueError(f"symbol file line {number} is not 'BB:AAAA name': {line!r}") from None
    return out


def load_symbols(path: Path = GAME_DIR / SYM_NAME) -> dict[str, int]:
    """The label addresses of the built game (run ``gbx gameboy build-roms`` if missing)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `gbx gameboy build-roms`")
    return parse_symbols(path.read_text(encoding="ascii"))
