"""gbx quest on gbx's own emulator: the full scripted quest passes every stage goal in
order, and the screen at each stage's goal equals PyBoy's pixel for pixel."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gbx_gameboy.actions import BUTTON_BITS
from gbx_gameboy.game import world
from gbx_gameboy.game.build import GAME_DIR, ROM_NAME
from gbx_gameboy.game.ram import STATE_DONE, load_symbols
from gbx_gameboy.game.solutions import HOLD_FRAMES, SOLUTIONS, STEP_FRAMES

pytestmark = pytest.mark.slow  # compiles the emulator's kernels (about a minute on a CPU)

BOOT_FRAMES = 20  # the game reaches its main loop 15 frames after $0100
PALETTE = (0xFFFFFF, 0xAAAAAA, 0x555555, 0x000000)  # shade 0..3 as PyBoy colours


def _goal_met(ram: dict[str, int], stage: world.Stage) -> bool:
    if stage.quest_done:
        return ram["wQuestDone"] == 1 and ram["wState"] == STATE_DONE
    ok = stage.room is None or ram["wRoom"] == stage.room
    return ok and (stage.has_gem is None or ram["wHasGem"] == int(stage.has_gem))


def test_full_quest_on_the_warp_emulator() -> None:
    from gbx_gameboy.machine import GameBoyBatch

    sym = load_symbols()
    batch = GameBoyBatch(str(GAME_DIR / ROM_NAME), 1, "cpu")
    batch.run_frames(BOOT_FRAMES)
    names = ("wRoom", "wHasGem", "wQuestDone", "wState")
    reached: dict[str, int] = {}
    actions = SOLUTIONS["finish_quest"]
    checkpoints = {len(SOLUTIONS[s.name]) for s in world.STAGES}
    warp_screens: dict[int, np.ndarray] = {}
    for i, button in enumerate(actions):
        batch.step_frames(
            torch.tensor([BUTTON_BITS[button]], dtype=torch.int32), STEP_FRAMES, HOLD_FRAMES
        )
        batch.synchronize()
        ram = {n: batch.read_memory(0, sym[n]) for n in names}
        for stage in world.STAGES:
            if stage.name not in reached and _goal_met(ram, stage):
                reached[stage.name] = i + 1
        if i + 1 in checkpoints:
            warp_screens[i + 1] = batch.fb[0].cpu().numpy().copy()
    expected = {s.name: len(SOLUTIONS[s.name]) for s in world.STAGES}
    assert reached == expected

    pyboy = pytest.importorskip("pyboy", reason="PyBoy gives the reference screen")
    emu = pyboy.PyBoy(
        str(GAME_DIR / ROM_NAME), window="null", sound_emulated=False, color_palette=PALETTE
    )
    try:
        emu.tick(200, False)  # PyBoy runs its own boot ROM first
        for i, button in enumerate(actions):
            emu.button_press(button.lower())
            emu.tick(HOLD_FRAMES, False)
            emu.button_release(button.lower())
            emu.tick(STEP_FRAMES - HOLD_FRAMES, True)
            if i + 1 in checkpoints:
                red = np.asarray(emu.screen.ndarray)[:, :, 0].astype(np.int64)
                pyboy_screen = 3 - red // 85  # 255, 170, 85, 0 -> shades 0..3
                differing = int((warp_screens[i + 1] != pyboy_screen).sum())
                assert differing == 0, f"after step {i + 1}: {differing} pixels differ"
    finally:
        emu.stop(save=False)
