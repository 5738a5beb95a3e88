"""`gbx gameboy conformance` counts the ROMs done on a progress bar (stderr)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from gbx.progress import PROGRESS_ENV
from gbx_gameboy import conformance as conf
from gbx_gameboy.cli import gameboy


@pytest.fixture
def fake_roms(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[conf.RomCase]:
    # The ROM runs themselves are the conformance suite's business; here each "passes".
    cases = conf.select(["cpu_instrs/individual/01", "cpu_instrs/individual/02"])
    monkeypatch.setenv("GBX_TESTROMS", str(tmp_path))
    monkeypatch.setattr(conf, "run_case",
                        lambda case, device, root, kernel="auto": conf.RomResult(
                            case, True, 60, "Passed"))
    return cases


def test_progress_bar_counts_the_roms(fake_roms, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "always")
    res = CliRunner().invoke(gameboy, ["conformance", "--json", "cpu_instrs/individual/01",
                                       "cpu_instrs/individual/02"])
    assert res.exit_code == 0, res.output
    assert [r["cpu"]["result"] for r in json.loads(res.stdout)] == ["pass"] * len(fake_roms)
    err = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", res.stderr)
    assert "conformance ROMs" in err and f"{len(fake_roms)}/{len(fake_roms)}" in err


def test_quiet_draws_nothing(fake_roms, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "always")
    res = CliRunner().invoke(gameboy, ["conformance", "--quiet", "cpu_instrs/individual/01"])
    assert res.exit_code == 0 and res.stderr == ""
    assert "CPU: 1/1 passed" in res.stdout
