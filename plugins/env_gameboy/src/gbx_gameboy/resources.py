"""Files shipped inside the ``gbx_gameboy`` package: the bundled ROM and the stage files.

Everything is found through :mod:`importlib.resources`, so an installed wheel works
without a source checkout: ``roms/gbx_quest/`` holds the game (``.gb``, ``.sym``, source)
and ``states/`` the stages' start savestate, goal templates and index. An editable install
resolves to the same folders in the source tree, where ``gbx gameboy build-roms`` and
``gbx gameboy make-stages`` regenerate them.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

PACKAGE = "gbx_gameboy"
GAME_DIR_PARTS = ("roms", "gbx_quest")
ROM_NAME = "gbx_quest.gb"
STATES_DIR_NAME = "states"


def package_path(*parts: str) -> Path:
    """The filesystem path of a file or folder inside the installed ``gbx_gameboy`` package.

    The emulator and the savestate code open these files by name (and ``make-stages``
    writes into ``states/``), so the package must be installed as plain files, as pip does;
    a zipped import gets a one-line error saying so.
    """
    root = resources.files(PACKAGE)
    if not isinstance(root, Path):
        raise RuntimeError(
            f"{PACKAGE} is imported from an archive ({root}); install it with pip "
            "so that its data files are plain files"
        )
    return root.joinpath(*parts)


def game_dir() -> Path:
    """Folder of the bundled game: ``gbx_quest.gb``, ``gbx_quest.sym`` and its source."""
    return package_path(*GAME_DIR_PARTS)


def bundled_rom() -> Path:
    """The bundled game ROM, ``gbx_quest.gb``."""
    return game_dir() / ROM_NAME


def bundled_states_dir() -> Path:
    """The stages' files shipped with the package (start state, goal folders, index)."""
    return package_path(STATES_DIR_NAME)
