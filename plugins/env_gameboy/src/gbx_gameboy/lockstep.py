"""Lockstep comparison with PyBoy on a real game: same start state, same buttons, screens
compared at fixed intervals (``gbx gameboy lockstep``).

PyBoy boots through its own boot ROM, so the two emulators are aligned through a savestate:
PyBoy plays the first ``warmup`` frames of the script, saves its state, and gbx loads it
(``pyboy_state.load_pyboy_state``). From there both run the same scripted buttons.

Alignment: PyBoy's state is saved as a ``tick()`` ends, when line 0 starts, and it
loads into gbx at that point of the picture. gbx then runs each of PyBoy's frames as one
``step_cycles`` launch up to the same emulated cycle as PyBoy's frame ended on (PyBoy's
cycle counter, counted from the load: 70224 cycles a frame with the LCD on, fewer in a frame
where the game turns the LCD off), with that frame's buttons held from its first cycle to
its last, exactly as PyBoy holds them; each launch draws the picture of the lines it runs.
Inputs therefore change at the same emulated cycle in both emulators, whatever line of the
frame the game reads the joypad on.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# Each entry of a script is held for HOLD frames and released for HOLD frames; None presses
# nothing. The default script is a seeded random walk over every button (directions twice as
# often), long enough that a game sees varied input over thousands of frames.
_WALK = ("A", "B", "START", None, "UP", "DOWN", "LEFT", "RIGHT", "UP", "DOWN", "LEFT", "RIGHT")


def random_script(seed: int = 0, length: int = 997) -> tuple[str | None, ...]:
    """A reproducible random script (``length`` entries, each from the walk's choices)."""
    rng = np.random.default_rng(seed)
    return tuple(_WALK[i] for i in rng.integers(0, len(_WALK), size=length))


HOLD = 6
WARMUP_FRAMES = 400  # past PyBoy's boot ROM (about 300 frames) and into the game
# PyBoy's default DMG colours (0xFF, 0x99, 0x55, 0x00) -> shade indices 0..3.
_SHADE = np.zeros(256, np.uint8)
_SHADE[[255, 153, 85, 0]] = [0, 1, 2, 3]


def buttons_at(script: Sequence[str | None], frame: int) -> tuple[str, ...]:
    """The buttons the script holds in frame ``frame``."""
    if frame % (2 * HOLD) >= HOLD or not script:
        return ()
    name = script[(frame // (2 * HOLD)) % len(script)]
    return () if name is None else (name,)


def parse_script(spec: str) -> tuple[str | None, ...]:
    """``"START,A,,DOWN"`` -> ("START", "A", None, "DOWN"); an empty entry presses nothing."""
    from gbx_gameboy.actions import BUTTON_BITS

    out: list[str | None] = []
    for item in spec.split(","):
        name = item.strip().upper()
        if name and (name not in BUTTON_BITS or name == "NOOP"):
            raise ValueError(
                f"bad button {item.strip()!r} in the script: use A, B, START, SELECT, UP, DOWN, "
                "LEFT, RIGHT, or an empty entry for no button"
            )
        out.append(name or None)
    return tuple(out)


@dataclass
class Check:
    frame: int  # frames after the load
    equal: bool
    rows: int  # rows that differ
    first_row: int  # first row that differs, -1 when equal
    pixels: int  # pixels that differ


@dataclass
class LockstepResult:
    rom: str
    frames: int
    every: int
    warmup: int
    checks: list[Check] = field(default_factory=list)
    distinct_screens: int = 0  # different gbx screens among the checks (the game moved)

    @property
    def differing(self) -> list[Check]:
        return [c for c in self.checks if not c.equal]

    def to_json(self) -> dict[str, Any]:
        return {
            "rom": self.rom, "frames": self.frames, "every": self.every, "warmup": self.warmup,
            "checks": len(self.checks), "equal": sum(c.equal for c in self.checks),
            "distinct_screens": self.distinct_screens,
            "first_difference": asdict(self.differing[0]) if self.differing else None,
            "differences": [asdict(c) for c in self.differing],
        }


def pyboy_frame(emu: Any, names: tuple[str, ...], render: bool = True) -> np.ndarray | None:
    """One PyBoy frame with ``names`` held; its screen as shade indices when ``render``."""
    for n in names:
        emu.button_press(n.lower())
    emu.tick(1, render)
    for n in names:
        emu.button_release(n.lower())
    return _SHADE[np.asarray(emu.screen.ndarray)[..., 0]] if render else None


def _gbx_frame(batch: Any, names: tuple[str, ...], cycles: int, render: bool) -> np.ndarray | None:
    import torch

    from gbx_gameboy.actions import BUTTON_BITS

    mask = torch.tensor([sum(BUTTON_BITS[n] for n in names)], dtype=torch.int32,
                        device=batch.fb.device)
    batch.step_cycles(mask, cycles, render=render)
    if not render:
        return None
    if not batch.read_memory(0, 0xFF40) & 0x80:
        # The LCD is off as the frame ends: the screen is blank, which PyBoy's picture
        # shows; gbx's framebuffer holds only the lines drawn (none since the LCD went off).
        return np.zeros((144, 160), np.uint8)
    return batch.fb[0].cpu().numpy().copy()


def _pyboy_cycles(emu: Any) -> int:
    """PyBoy's CPU cycle counter (its savestate's ``cpu_cycles``)."""
    return int(emu._cycles())


def run_lockstep(
    rom: str | Path, frames: int = 10_000, every: int = 60,
    script: Sequence[str | None] | None = None, warmup: int = WARMUP_FRAMES,
    device: str = "cpu",
) -> LockstepResult:
    """Play ``frames`` frames in PyBoy and gbx from the same state; compare every ``every``."""
    from pyboy import PyBoy

    from gbx_gameboy.machine import GameBoyBatch
    from gbx_gameboy.pyboy_state import load_pyboy_state

    script = random_script() if script is None else script
    result = LockstepResult(str(rom), frames, every, warmup)
    seen: set[bytes] = set()
    emu = PyBoy(str(rom), window="null", sound_emulated=False)
    try:
        for frame in range(warmup):
            pyboy_frame(emu, buttons_at(script, frame), False)
        buf = io.BytesIO()
        emu.save_state(buf)
        batch = GameBoyBatch(rom, 1, device)
        load_pyboy_state(batch, buf.getvalue(), source=f"PyBoy state of {rom}")
        start = int(batch.cycle_count[0])
        pb_start = _pyboy_cycles(emu)
        for t in range(frames):
            render = (t + 1) % every == 0
            names = buttons_at(script, warmup + t)
            theirs = pyboy_frame(emu, names, render)
            # Up to the cycle where PyBoy's frame ended: a launch may overshoot it by a few
            # cycles (it stops at an instruction boundary); the next one is shorter by as much.
            cycles = start + _pyboy_cycles(emu) - pb_start - int(batch.cycle_count[0])
            ours = _gbx_frame(batch, names, cycles, render)
            if ours is None or theirs is None:
                continue
            diff = ours != theirs
            rows = np.flatnonzero(diff.any(axis=1))
            result.checks.append(Check(t + 1, rows.size == 0, int(rows.size),
                                       int(rows[0]) if rows.size else -1, int(diff.sum())))
            seen.add(ours.tobytes())
    finally:
        emu.stop(save=False)
    result.distinct_screens = len(seen)
    return result
