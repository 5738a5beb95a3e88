"""gbx quest on gbx's emulator, the screens the pixel tasks tell apart: carrying the gem
lights every room one shade, so a screen with the gem differs from the same place without
it in most of its pixels, not only in the corner icon (which the 72x80 observation barely
shows); and no menu or text box opened on a stage's way passes for its goal screen."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from gbx_gameboy import capture as cap
from gbx_gameboy.actions import BUTTON_BITS
from gbx_gameboy.game import solutions as sol
from gbx_gameboy.game.build import GAME_DIR, ROM_NAME
from gbx_gameboy.tasks import STAGE_TASKS, START_STATE, states_dir

BGP = 0xFF47
NORMAL, CAVE = 0b11100100, 0b11111001  # the rooms' own shades (docs/game.md)
LIT_NORMAL, LIT_CAVE = 0b10010000, 0b10100100  # each shade one step lighter, 0 stays 0


def _stage(number: int):  # noqa: ANN202 - a StageTask
    return next(t for t in STAGE_TASKS if t.number == number)


def test_the_shown_palette_follows_the_gem() -> None:
    """BGP: the cave's own shades before the gem, lit from the step that takes it, lit in
    the meadow on the way home, and the end screen's own once the quest is complete."""
    batch = cap.new_batch(GAME_DIR / ROM_NAME, states_dir() / START_STATE)
    to_gem = len(_stage(3).solution)
    seen: dict[int, int] = {}
    for i, button in enumerate(_stage(4).solution, start=1):
        batch.step_frames(torch.tensor([BUTTON_BITS[button]], dtype=torch.int32),
                          sol.STEP_FRAMES, sol.HOLD_FRAMES)
        batch.synchronize()
        seen[i] = batch.read_memory(0, BGP)
    assert seen[1] == NORMAL  # the house
    assert seen[to_gem - 1] == CAVE  # one block before the gem
    assert seen[to_gem] == LIT_CAVE  # on the gem, its text box open
    assert LIT_NORMAL in [seen[i] for i in range(to_gem, len(seen))]  # outside, carrying it
    assert seen[len(seen)] == NORMAL  # the quest-complete screen


def test_screens_with_the_gem_are_far_from_those_without() -> None:
    """Every screen of the scripted way home is farther from every screen of the way there
    than the stages' goal tau (0.05): pixel goals, cells and policies can tell them apart."""
    script = cap.Script(steps=_stage(4).solution, frames_per_step=sol.STEP_FRAMES,
                        hold=sol.HOLD_FRAMES)
    frames = cap.play(cap.new_batch(GAME_DIR / ROM_NAME, states_dir() / START_STATE), script)
    to_gem = len(_stage(3).solution)
    there = np.stack(frames[: to_gem - 1]).astype(np.float32)
    back = np.stack(frames[to_gem:-1]).astype(np.float32)
    nearest = (np.abs(back[:, None] - there[None]).mean(axis=(2, 3)) / 3).min(axis=1)
    assert len(nearest) == len(_stage(4).solution) - to_gem - 1
    assert nearest.min() > _stage(4).tau


@pytest.mark.parametrize("number", [1, 2, 3, 4])
def test_no_button_on_the_way_shows_a_look_alike_of_the_goal(number: int) -> None:
    """A, B, START and SELECT pressed at every place of a stage's scripted way
    (``meta.json``'s ``nearest_look_alike``, which make-stages writes and test_stages keeps
    current) show nothing within twice the goal's tau. In the game before the carried gem
    lit the rooms, START two blocks from the gem was 0.026 from stage 3's goal (tau 0.05):
    a policy could 'find the gem' without taking it."""
    task = _stage(number)
    meta = json.loads((task.goal_dir(states_dir()) / "meta.json").read_text(encoding="utf-8"))
    look = meta["nearest_look_alike"]
    assert look["distance"] > 2 * task.tau, look


def _fewest_steps(to_room: int, to_item: bool) -> int:
    """Breadth-first search over the rooms' blocks from the hero's start (house, (4,2)):
    one step per block, doors move between rooms, walls, people and pits block."""
    from collections import deque

    from gbx_gameboy.game import world

    def attr(room: int, x: int, y: int) -> int:
        r = world.ROOMS[room]
        if not (0 <= x < r.width and 0 <= y < r.height) or any(
                a.x == x and a.y == y for a in r.actors):
            return world.WALL
        return r.legend[r.rows[y][x]].attr

    start = (0, 4, 2)
    seen = {start: 0}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        room, x, y = here
        if room == to_room and (not to_item or attr(room, x, y) == world.ITEM):
            return seen[here]
        for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            kind = attr(room, x + dx, y + dy)
            if kind in (world.WALL, world.HAZARD):
                continue
            there = (room, x + dx, y + dy)
            if kind == world.DOOR:
                door = next(d for d in world.ROOMS[room].doors
                            if (d.x, d.y) == (x + dx, y + dy))
                there = (door.to_room, door.to_x, door.to_y)
            if there not in seen:
                seen[there] = seen[here] + 1
                queue.append(there)
    raise AssertionError("unreachable")


def test_the_scripted_ways_are_shortest() -> None:
    """Stages 1-3's scripted ways are as short as any (village 9, meadow 24, gem 46): an
    evaluation that reaches a stage's goal in fewer steps matched some other screen."""
    assert _fewest_steps(1, to_item=False) == len(_stage(1).solution) == 9
    assert _fewest_steps(2, to_item=False) == len(_stage(2).solution) == 24
    assert _fewest_steps(3, to_item=True) == len(_stage(3).solution) == 46
