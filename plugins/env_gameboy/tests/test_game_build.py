"""gbx quest builds reproducibly from its source, and its data is consistent."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gbx_gameboy.asm.image import global_checksum, header_checksum
from gbx_gameboy.game import assets, world
from gbx_gameboy.game.build import GAME_DIR, ROM_NAME, SYM_NAME, build_roms, build_roms_command
from gbx_gameboy.game.font import encode_text
from gbx_gameboy.game.ram import load_symbols, parse_symbols


def test_rebuild_is_byte_identical_to_the_committed_rom(tmp_path: Path) -> None:
    built = build_roms(tmp_path)
    assert built.read_bytes() == (GAME_DIR / ROM_NAME).read_bytes()
    assert (tmp_path / SYM_NAME).read_text() == (GAME_DIR / SYM_NAME).read_text()


def test_build_command_writes_the_rom(tmp_path: Path) -> None:
    result = CliRunner().invoke(build_roms_command, ["--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and (tmp_path / ROM_NAME).stat().st_size == 32 * 1024


def test_gbx_gameboy_build_roms_is_the_build_command(tmp_path: Path) -> None:
    """`gbx gameboy build-roms` (what `make roms` calls) reaches the same build."""
    from gbx.cli import build_cli
    from gbx.plugins import load_plugins

    result = CliRunner().invoke(build_cli(load_plugins()),
                                ["gameboy", "build-roms", "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / ROM_NAME).read_bytes() == (GAME_DIR / ROM_NAME).read_bytes()


def test_rom_header() -> None:
    rom = (GAME_DIR / ROM_NAME).read_bytes()
    assert rom[0x134:0x13D] == b"GBX QUEST"
    assert (rom[0x147], rom[0x148], rom[0x149]) == (0, 0, 0)  # ROM only, 32 KiB, no RAM
    assert rom[0x104:0x134] == bytes(48)
    assert rom[0x14D] == header_checksum(rom)
    assert rom[0x14E] << 8 | rom[0x14F] == global_checksum(rom)
    assert rom[0x100:0x104] == bytes([0x00, 0xC3]) + (0x150).to_bytes(2, "little")


def test_symbols_name_the_game_state() -> None:
    symbols = load_symbols()
    for name in ("wRoom", "wX", "wY", "wState", "wHasGem", "wQuestDone", "wShadowOAM"):
        assert 0xC000 <= symbols[name] < 0xE000
    assert symbols["MainLoop"] < 0x4000
    with pytest.raises(ValueError, match="line 1"):
        parse_symbols("nonsense\n")


def test_asset_generation_is_deterministic_and_fits() -> None:
    text = assets.generate()
    assert text == assets.generate()
    bank = assets.TileBank()
    for room in world.ROOMS:
        for block in room.legend.values():
            bank.block(block.draw())
    assert len(bank.tiles) < 110  # frame, star and gem tiles need the rest of the 128


def test_world_validation_names_the_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    world.validate()
    house = world.ROOMS[0]
    broken = world.Room(house.name, house.rows, house.legend, house.actors, doors=())
    monkeypatch.setattr(world, "ROOMS", (broken, *world.ROOMS[1:]))
    with pytest.raises(ValueError, match=r"room house \(1,8\): door without a target"):
        world.validate()


def test_text_must_fit_the_box_and_the_font() -> None:
    assert encode_text("hi!", 5) == b"HI!  "
    with pytest.raises(ValueError, match="longer than 18"):
        encode_text("X" * 19, 18)
    with pytest.raises(ValueError, match="without a glyph"):
        encode_text("50%", 18)


def test_solutions_use_the_seven_actions_and_env_timing() -> None:
    from gbx_gameboy.game import solutions

    assert solutions.ACTIONS == ("A", "B", "START", "UP", "DOWN", "LEFT", "RIGHT")
    assert set(solutions.SOLUTIONS) == {s.name for s in world.STAGES}
    leave = solutions.SOLUTIONS["leave_house"]
    assert solutions.action_indices(leave[:2]) == [4, 4]  # DOWN
    assert solutions.as_presses(leave[:1]) == [("DOWN", 8, 16)]
    lengths = [len(solutions.SOLUTIONS[s.name]) for s in world.STAGES]
    assert lengths == sorted(lengths) and lengths[0] < 20 < lengths[-1]
