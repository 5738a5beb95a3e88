"""PyBoy savestates of real games, both ways: the bundled gbx quest and flappyboy.

A ``.state`` file PyBoy saves after N frames of play loads in gbx, and a state gbx saves
(``save_pyboy_state``) loads in PyBoy; in both cases the next M frames, with the same
buttons fed to both emulators, give pixel-equal screens.

Frame alignment (docs/savestates.md): a gbx frame ends as VBlank starts (LY=144), a PyBoy
``tick()`` ten lines later as line 0 starts. A button pressed for gbx frame ``t`` is
therefore already held during the VBlank that precedes PyBoy's frame ``t``; the games read
the joypad in VBlank, so gbx gets each PyBoy frame's buttons one frame later (gbx frame
``t`` holds what PyBoy held in its frame ``t - 1``), which puts every press at the same
VBlank in both emulators.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from game_roms import rom_of

from gbx_gameboy import lockstep as ls
from gbx_gameboy import pyboy_state as ps
from gbx_gameboy.actions import BUTTON_BITS
from gbx_gameboy.env import DEFAULT_ROM
from gbx_gameboy.lockstep import buttons_at

pyboy = pytest.importorskip("pyboy", reason="PyBoy is the reference for its own state format")

# Buttons per game, each held 6 frames then released 6: the quest's hero walks through the
# house; flappyboy leaves its title screen (START) and flaps (A).
SEQUENCES = {
    "gbx_quest": ("DOWN", "RIGHT", "UP", "LEFT", "A", "RIGHT", "DOWN", "B"),
    "flappyboy": ("START", "A", None, "A", None, "A", "A", None),
}
# PyBoy runs its own boot ROM for its first ~300 frames; N is past it, M frames follow.
N, M = 400, 60


def buttons(game: str, frame: int) -> tuple[str, ...]:
    return buttons_at(SEQUENCES[game], frame)


def pyboy_frame(emu, names: tuple[str, ...]) -> np.ndarray:
    screen = ls.pyboy_frame(emu, names)
    assert screen is not None
    return screen


def gbx_frame(batch, names: tuple[str, ...]) -> np.ndarray:
    mask = torch.tensor([sum(BUTTON_BITS[n] for n in names)], dtype=torch.int32)
    batch.step_frames(mask, 1, 1, render_last=True)  # pressed for the frame, then released
    return batch.fb[0].numpy().copy()


def compare(emu, batch, game: str, first: int) -> int:
    """Run M frames in both; fail on the first screen that differs; return distinct screens."""
    seen = set()
    for t in range(1, M + 1):
        theirs = pyboy_frame(emu, buttons(game, first + t))
        ours = gbx_frame(batch, buttons(game, first + t - 1))
        if not np.array_equal(ours, theirs):
            rows = np.flatnonzero((ours != theirs).any(axis=1))
            pytest.fail(f"{game}: frame {t} after the load differs on {rows.size} rows "
                        f"(first {rows[0]})")
        seen.add(ours.tobytes())
    return len(seen)


def new_pyboy(rom: Path):
    return pyboy.PyBoy(str(rom), window="null", sound_emulated=False)


@pytest.mark.parametrize("game", ["gbx_quest", "flappyboy"])
def test_state_saved_by_pyboy_plays_on_in_gbx(tmp_path: Path, game: str) -> None:
    from gbx_gameboy.machine import GameBoyBatch

    rom = rom_of(game)
    emu = new_pyboy(rom)
    try:
        for frame in range(N):
            pyboy_frame(emu, buttons(game, frame))
        path = tmp_path / f"{game}.state"
        with path.open("wb") as fh:
            emu.save_state(fh)
        batch = GameBoyBatch(rom, 1, "cpu")
        ps.load_pyboy_state(batch, path.read_bytes(), source=str(path))
        # gbx's first frame after the load is PyBoy's first: both start at line 0.
        first = pyboy_frame(emu, buttons(game, N))
        assert np.array_equal(gbx_frame(batch, buttons(game, N)), first)
        assert compare(emu, batch, game, N) >= 10  # the game moved
    finally:
        emu.stop(save=False)


@pytest.mark.parametrize("game", ["gbx_quest", "flappyboy"])
def test_state_saved_by_gbx_plays_on_in_pyboy(tmp_path: Path, game: str) -> None:
    from gbx_gameboy.machine import GameBoyBatch

    rom = rom_of(game)
    batch = GameBoyBatch(rom, 1, "cpu")
    for frame in range(N):
        gbx_frame(batch, buttons(game, frame))
    path = tmp_path / f"{game}.state"
    path.write_bytes(ps.save_pyboy_state(batch, 0))
    emu = new_pyboy(rom)
    try:
        with path.open("rb") as fh:
            emu.load_state(fh)
        # A halted CPU: PyBoy's PC is on the HALT, gbx's past it (docs/savestates.md).
        assert emu.register_file.PC == batch.regs(0)["pc"] - (batch.regs(0)["halted"] == 1)
        pyboy_frame(emu, buttons(game, N - 1))  # PyBoy finishes the VBlank gbx stopped in
        assert compare(emu, batch, game, N - 1) >= 10
    finally:
        emu.stop(save=False)


def test_state_file_round_trips_through_both_emulators(tmp_path: Path) -> None:
    """PyBoy -> gbx -> PyBoy: the state gbx writes back holds PyBoy's CPU and RAM."""
    from gbx_gameboy.machine import GameBoyBatch

    emu = new_pyboy(DEFAULT_ROM)
    try:
        for frame in range(N):
            pyboy_frame(emu, buttons("gbx_quest", frame))
        buf = io.BytesIO()
        emu.save_state(buf)
        batch = GameBoyBatch(DEFAULT_ROM, 1, "cpu")
        ps.load_pyboy_state(batch, buf.getvalue())
        back = ps.parse(ps.save_pyboy_state(batch, 0), batch.cart)
        orig = ps.parse(buf.getvalue(), batch.cart)
        for key in ("A", "F", "B", "C", "D", "E", "HL", "SP", "PC", "IE", "wram", "hram",
                    "vram", "oam", "LCDC", "SCX", "SCY", "LY", "DIV", "TIMA"):
            assert back[key] == orig[key], key
    finally:
        emu.stop(save=False)
