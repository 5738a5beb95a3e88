"""``gbx bench emulator --emulator pyboy``: PyBoy on the work the gbx benchmark times.

One PyBoy (sound off, as the ``pyboy`` env runs it) plays every env of the batch in turn:
boot, START held 5 frames of a 24-frame step (the state after it saved once), then per
env, from that state, the warm-up and timed 24-frame steps with that env's buttons,
drawn from the same generator, table and seed as :func:`gbx_gameboy.bench.measure`
(held for the first half of the step), rendering only each step's last frame. Only the
timed steps are timed. PyBoy boots through its own boot ROM, so its START lands a few
frames later in the game than gbx's; what follows is the same kind of play.
"""

from __future__ import annotations

import io
import os
import tempfile
import time
from typing import Any

from gbx_gameboy.actions import DOWN, LEFT, RIGHT, UP, A, B
from gbx_gameboy.bench import (
    BOOT_FRAMES,
    BUTTON_TABLE,
    STEP_FRAMES,
    WARMUP_STEPS,
    button_indices,
    record_head,
)

# bench.measure's button table, by PyBoy's button names (index 0: no button).
PYBOY_BUTTONS: dict[int, str | None] = {0: None, RIGHT: "right", LEFT: "left", UP: "up",
                                        DOWN: "down", A: "a", B: "b"}


def _step(emu: Any, button: str | None, render: bool) -> None:
    """One 24-frame step: ``button`` held for the first half, only the last frame drawn."""
    half = STEP_FRAMES // 2
    if button:
        emu.button_press(button)
    emu.tick(half, False)
    if button:
        emu.button_release(button)
    emu.tick(STEP_FRAMES - half - 1, False)
    emu.tick(1, render)


def measure_pyboy(rom: bytes | str, envs: int, frames: int, game: bool, seed: int = 0,
                  warmup_steps: int = WARMUP_STEPS) -> dict[str, Any]:
    """The JSON record of PyBoy on ``envs`` runs of the benchmark's steps (see the module)."""
    from importlib.metadata import version

    from pyboy import PyBoy

    n_steps = max(1, frames // STEP_FRAMES)
    idx = button_indices(envs, warmup_steps + n_steps, seed)
    path = rom
    tmp = None
    if isinstance(rom, bytes):
        tmp = tempfile.NamedTemporaryFile(suffix=".gb", delete=False)
        tmp.write(rom)
        tmp.close()
        path = tmp.name
    emu = PyBoy(str(path), window="null", sound_emulated=False)
    try:
        emu.set_emulation_speed(0)
        emu.tick(BOOT_FRAMES, False)
        if game:
            emu.button_press("start")
            emu.tick(5, False)
            emu.button_release("start")
            emu.tick(STEP_FRAMES - 5, False)
        start = io.BytesIO()
        emu.save_state(start)
        run_s = 0.0
        cpu_s = 0.0
        for env in range(envs):
            start.seek(0)
            emu.load_state(start)
            buttons = [PYBOY_BUTTONS[BUTTON_TABLE[int(i)]] if game else None
                       for i in idx[:, env]]
            for i in range(warmup_steps):
                _step(emu, buttons[i], True)
            c0 = time.process_time()
            t0 = time.perf_counter()
            for i in range(warmup_steps, warmup_steps + n_steps):
                _step(emu, buttons[i], True)
            run_s += time.perf_counter() - t0
            cpu_s += time.process_time() - c0
    finally:
        emu.stop(save=False)
        if tmp is not None:
            os.unlink(tmp.name)
    env_frames = envs * n_steps * STEP_FRAMES
    return {
        **record_head("pyboy", rom, game, envs, n_steps, warmup_steps),
        "device": "cpu",
        "threads": 1,
        "sound_emulated": False,
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "frames_per_s": env_frames / run_s,
        "frames_per_s_per_env": env_frames / run_s / envs,
        "run_s": run_s,
        "process_cpu_s": cpu_s,
        "frames_per_cpu_s": env_frames / cpu_s if cpu_s > 0 else None,
        "pyboy": version("pyboy"),
    }
