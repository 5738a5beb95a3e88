"""``gbx gameboy run --screenshot/--state/--press`` and ``gbx gameboy gif``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from click.testing import CliRunner
from env_test_rom import write_env_test_rom
from PIL import Image, ImageSequence

from gbx_gameboy.actions import press_schedule
from gbx_gameboy.cli import gameboy


def black_x(png: Path) -> int:
    """Leftmost column of the ROM's black tile in a 2x-scaled screenshot."""
    img = np.asarray(Image.open(png).convert("L"))[::2, ::2]
    return int(np.nonzero(img[0] == 0)[0][0])


def test_press_schedule_segments() -> None:
    segs = press_schedule([("RIGHT", 2), ("A", 4)], 20, hold=4)
    assert segs == [(2, 0), (2, 1), (2, 1 | 16), (2, 16), (12, 0)]
    assert sum(f for f, _ in segs) == 20
    assert press_schedule([("A", -3)], 5, hold=4) == [(1, 16), (4, 0)]


def test_screenshot_with_presses_and_state(tmp_path: Path) -> None:
    rom = write_env_test_rom(tmp_path)
    runner = CliRunner()
    still = tmp_path / "still.png"
    res = runner.invoke(gameboy, ["run", str(rom), "--frames", "10", "--screenshot", str(still)])
    assert res.exit_code == 0, res.output
    assert Image.open(still).size == (320, 288) and black_x(still) == 0
    moved = tmp_path / "moved.png"
    # RIGHT held 8 frames from frame 5: the tile slides 8 pixels.
    res = runner.invoke(gameboy, ["run", str(rom), "--frames", "20", "--press", "RIGHT@5",
                                  "--screenshot", str(moved)])
    assert res.exit_code == 0, res.output
    assert black_x(moved) == 8

    from gbx_gameboy.machine import GameBoyBatch
    from gbx_gameboy.savestate import save_state

    batch = GameBoyBatch(rom, 1, "cpu")
    batch.run_frames(5)
    batch.step_frames(torch.tensor([1], dtype=torch.int32), 3, 3)
    st = save_state(batch, 0, tmp_path / "s.gbxstate")
    shot = tmp_path / "from_state.png"
    res = runner.invoke(gameboy, ["run", str(rom), "--state", str(st), "--frames", "2",
                                  "--screenshot", str(shot)])
    assert res.exit_code == 0, res.output
    assert black_x(shot) == 3


def test_bad_press_and_state_are_one_line_errors(tmp_path: Path) -> None:
    rom = write_env_test_rom(tmp_path)
    res = CliRunner().invoke(gameboy, ["run", str(rom), "--press", "JUMP@3"])
    assert res.exit_code == 2 and "BUTTON@FRAME" in res.output
    bad = tmp_path / "bad.state"
    bad.write_bytes(b"nonsense")
    res = CliRunner().invoke(gameboy, ["run", str(rom), "--state", str(bad)])
    assert res.exit_code == 2 and "error" in res.output


def test_gif_command(tmp_path: Path) -> None:
    rom = write_env_test_rom(tmp_path)
    out = tmp_path / "a.gif"
    res = CliRunner().invoke(gameboy, ["gif", str(rom), "--frames", "24", "--every", "2",
                                       "--press", "LEFT@4", "--out", str(out)])
    assert res.exit_code == 0, res.output
    frames = [np.asarray(f.convert("L")) for f in ImageSequence.Iterator(Image.open(out))]
    # Identical consecutive frames may be merged by the GIF writer; motion must show.
    assert 2 <= len(frames) <= 12
    xs = {int(np.nonzero(f[0, ::2] == 0)[0][0]) for f in frames if (f == 0).any()}
    assert len(xs) > 1
