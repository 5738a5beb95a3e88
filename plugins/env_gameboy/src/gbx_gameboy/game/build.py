"""Build the bundled ROM: generate the assets, assemble the game, write ``.gb`` and ``.sym``.

``gbx gameboy build-roms`` runs :func:`build_roms_command`; ``python -m
gbx_gameboy.game.build`` does the same without the gbx CLI.  The output is byte-identical
on every run (no timestamps, no dictionaries in unordered form).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import click

from gbx.config import write_atomic

from ..asm import assemble_file_with_symbols, format_symbols
from ..resources import ROM_NAME, game_dir
from . import assets

GAME_DIR = game_dir()
SOURCE = GAME_DIR / "gbx_quest.asm"
SYM_NAME = "gbx_quest.sym"


@dataclass(frozen=True)
class BuiltRom:
    rom: bytes
    symbols: dict[str, tuple[int, int]]


def assemble_game(source: Path = SOURCE) -> BuiltRom:
    """Generate ``assets.inc`` in a scratch folder and assemble the game source with it."""
    with tempfile.TemporaryDirectory(prefix="gbx-quest-") as scratch:
        (Path(scratch) / "assets.inc").write_text(assets.generate(), encoding="utf-8")
        rom, symbols = assemble_file_with_symbols(source, include_dirs=[scratch])
    return BuiltRom(rom, symbols)


def build_roms(out_dir: Path = GAME_DIR) -> Path:
    """Assemble gbx quest into ``out_dir``; returns the ``.gb`` path."""
    built = assemble_game()
    out_dir.mkdir(parents=True, exist_ok=True)
    rom_path = out_dir / ROM_NAME
    write_atomic(rom_path, built.rom)
    write_atomic(out_dir / SYM_NAME, format_symbols(built.symbols))
    return rom_path


@click.command("build-roms")
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=GAME_DIR,
    show_default=True,
    help="Folder for gbx_quest.gb and gbx_quest.sym.",
)
def build_roms_command(out_dir: Path) -> None:
    """Assemble the bundled game gbx quest from its source."""
    path = build_roms(out_dir)
    click.echo(f"wrote {path} ({path.stat().st_size} bytes)")
