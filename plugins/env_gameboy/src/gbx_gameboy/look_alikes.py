"""Screens that may pass for a goal: what each button shows at every place of a script's way.

A goal screen that is itself a box drawn over a room (a text box, a menu) can be matched
by another box over the same room: in an earlier gbx quest, the START menu opened two
blocks before the gem was 0.026 from stage 3's goal (the gem's text box over the same
cave, tau 0.05), and policies learned to open the menu instead of taking the gem. The
scripted way itself cannot show this (its nearest other screen was 0.12), so this module
presses every button once at every place of the way and measures the screens that shows.

The caller plays the way once on one env, keeping its state before each step
(:func:`gbx_gameboy.capture.play` with ``states``); then one batch, one env per (place,
button), restores those states and plays the one press, as the envs step. The result is
recorded in a goal's ``meta.json`` (``nearest_look_alike``) by ``gbx gameboy
capture-goal`` and ``make-stages``; capture-goal warns when it is under ``2 * tau``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gbx_gameboy.actions import BUTTON_BITS

# The buttons that open boxes in most games (directions move, and the way already shows
# where they lead).
BOX_BUTTONS: tuple[str, ...] = ("A", "B", "START", "SELECT")
# Envs per batch: the states restored into one batch are this many copies at most.
CHUNK = 256


@dataclass(frozen=True)
class LookAlike:
    """The screen nearest the goal that pressing ``button`` after ``after_steps`` steps of
    the way shows, at goal distance ``distance``."""

    distance: float
    after_steps: int
    button: str

    def describe(self) -> dict[str, Any]:
        return {"distance": round(self.distance, 6), "after_steps": self.after_steps,
                "button": self.button}

    def warning(self, tau: float) -> str | None:
        """A one-line warning when the screen is under ``2 * tau`` (else None)."""
        if self.distance >= 2 * tau:
            return None
        return (f"pressing {self.button} after {self.after_steps} steps of the way shows a "
                f"screen {self.distance:.4f} from the goal (tau {tau}): a policy can reach "
                "the goal that way; choose another goal screen or a smaller tau")


def presses_to_try(way: Sequence[str], buttons: Sequence[str]) -> list[tuple[int, str]]:
    """The (steps walked, button) pairs to try: every place of the way before its end, each
    button, leaving out the pair that is the way's own last step (that one is the goal).
    At the last place another button may finish the way too (B closes a box as A does);
    :func:`nearest_look_alike` leaves out the presses there that show the goal itself."""
    last = len(way) - 1
    return [(k, b) for k in range(len(way)) for b in buttons
            if not (k == last and way[last] == b)]


def nearest_look_alike(
    rom: str | Path, script: Any, places: Sequence[Any], goal: np.ndarray, *,
    buttons: Sequence[str] = BOX_BUTTONS, obs_size: str = "72x80", device: str = "cpu",
) -> LookAlike | None:
    """The screen nearest ``goal`` among those each of ``buttons`` shows at every place of
    ``script``'s steps (a :class:`gbx_gameboy.capture.Script`); ``places`` holds the env
    state before each step, as :func:`gbx_gameboy.capture.play` collects them. None for a
    script without steps."""
    from gbx.goal_math import goal_distance
    from gbx_gameboy.machine import GameBoyBatch
    from gbx_gameboy.obs import extract_obs, obs_hw
    from gbx_gameboy.snapshot import write_env

    way = tuple(script.steps)
    if not way:
        return None
    if len(places) != len(way):
        raise ValueError(f"{len(places)} states for a way of {len(way)} steps: collect them "
                         "with capture.play(..., states=[])")
    target = torch.from_numpy(np.ascontiguousarray(goal))
    tries = presses_to_try(way, buttons)
    best: LookAlike | None = None
    for start in range(0, len(tries), CHUNK):
        chunk = tries[start : start + CHUNK]
        batch = GameBoyBatch(str(rom), len(chunk), device)
        arrays = batch.state_tensors()
        for env, (k, _) in enumerate(chunk):
            write_env(arrays, env, places[k])
        bits = torch.tensor([BUTTON_BITS[b] for _, b in chunk], dtype=torch.int32,
                            device=batch.fb.device)
        batch.step_frames(bits, script.frames_per_step, script.hold, render_last=True)
        out = torch.empty((len(chunk), *obs_hw(obs_size)), dtype=torch.uint8,
                          device=batch.fb.device)
        dist = goal_distance(extract_obs(batch.fb, obs_size, out).cpu(), target)
        ends = torch.tensor([k == len(way) - 1 for k, _ in chunk])
        dist[ends & (dist == 0)] = float("inf")  # the goal itself, by another last button
        i = int(dist.argmin())
        if best is None or float(dist[i]) < best.distance:
            best = LookAlike(float(dist[i]), chunk[i][0], chunk[i][1])
    return best
