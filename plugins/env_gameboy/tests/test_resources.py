"""The bundled ROM and stage files are found inside the installed package."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from gbx_gameboy import resources as res
from gbx_gameboy import tasks
from gbx_gameboy.env import DEFAULT_ROM


def test_bundled_files_live_in_the_package() -> None:
    package = Path(str(resources.files("gbx_gameboy")))
    assert res.bundled_rom() == package / "roms" / "gbx_quest" / "gbx_quest.gb"
    assert DEFAULT_ROM == res.bundled_rom()
    assert res.bundled_rom().read_bytes()[0x134:0x13C] != b"\0" * 8  # a cartridge header
    states = res.bundled_states_dir()
    assert states == package / "states"
    index = json.loads((states / tasks.INDEX_FILE).read_text())
    for row in index["stages"]:
        assert (states / row["goal_dir"] / "goal.npy").is_file()
    assert (states / tasks.START_STATE).is_file()


def test_states_dir_defaults_to_the_package_and_obeys_the_override(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(tasks.STATES_ENV_VAR, raising=False)
    assert tasks.states_dir() == res.bundled_states_dir()
    monkeypatch.setenv(tasks.STATES_ENV_VAR, str(tmp_path))
    assert tasks.states_dir() == tmp_path
    assert tasks.STAGE_TASKS[0].goal_dir() == tmp_path / tasks.STAGE_TASKS[0].dir_name


def test_stage_defaults_point_into_the_package() -> None:
    cfg = tasks.STAGE_CONFIGS["gbx-quest-1"]()
    assert Path(cfg.state) == res.bundled_states_dir() / tasks.START_STATE
    assert Path(cfg.goal_dir).parent == res.bundled_states_dir()


def test_a_zipped_package_gets_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class ZipRoot:  # what importlib.resources returns for a package inside a zip archive
        def __str__(self) -> str:
            return "gbx.zip/gbx_gameboy/"

    monkeypatch.setattr(res.resources, "files", lambda _pkg: ZipRoot())
    with pytest.raises(RuntimeError, match="install it with pip"):
        res.package_path("states")
