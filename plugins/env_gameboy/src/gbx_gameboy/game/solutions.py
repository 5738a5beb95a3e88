"""Scripted solutions of the gbx quest stages, in the environment's step semantics.

One env step is ``STEP_FRAMES`` = 24 frames; the chosen button is held for the first
``HOLD_FRAMES`` = 8 frames and released for the rest.  The game moves the player one block
per step (16 frames at one pixel per frame), so each direction step below is one block.

Each stage's solution starts from the game's first frame of play (the main loop running,
the player in the house) and ends in a state where the stage's goal holds.  Stage goals are
in :data:`gbx_gameboy.game.world.STAGES`.
"""

from __future__ import annotations

STEP_FRAMES = 24
HOLD_FRAMES = 8
ACTIONS = ("A", "B", "START", "UP", "DOWN", "LEFT", "RIGHT")


def _run(*moves: tuple[str, int]) -> tuple[str, ...]:
    return tuple(button for button, count in moves for _ in range(count))


# house (4,2) -> (4,7) -> (1,7) -> door (1,8); arrive in the village at (5,3)
LEAVE_HOUSE = _run(("DOWN", 5), ("LEFT", 3), ("DOWN", 1))
# village (5,3) -> path down, east, down, east to the gate (15,8); arrive in the meadow (1,5)
TO_MEADOW = _run(("DOWN", 2), ("RIGHT", 6), ("DOWN", 3), ("RIGHT", 4))
# meadow (1,5) -> (11,5) -> north to the cave mouth (11,0); arrive in the cave at (5,8)
TO_CAVE = _run(("RIGHT", 10), ("UP", 5))
# cave (5,8) -> (5,5) -> east onto the gem (9,5); A closes "YOU FOUND THE GEM!"
TAKE_GEM = _run(("UP", 3), ("RIGHT", 4), ("A", 1))
# cave (5,8) -> west along the bottom row to (2,8), up into the pit at (2,7): game over
# (one more step lets the game-over screen settle)
INTO_PIT = _run(("LEFT", 3), ("UP", 1), ("B", 1))
# back out of the cave, across the meadow to the west gate; arrive in the village at (14,8)
BACK_TO_VILLAGE = _run(("LEFT", 4), ("DOWN", 4), ("DOWN", 4), ("LEFT", 11))
# village (14,8) -> (9,6) facing the elder at (8,6); A talks, A closes: quest complete
GIVE_GEM = _run(("LEFT", 3), ("UP", 2), ("LEFT", 2), ("A", 2))

SOLUTIONS: dict[str, tuple[str, ...]] = {
    "leave_house": LEAVE_HOUSE,
    "reach_meadow": LEAVE_HOUSE + TO_MEADOW,
    "fetch_gem": LEAVE_HOUSE + TO_MEADOW + TO_CAVE + TAKE_GEM + BACK_TO_VILLAGE,
    "finish_quest": LEAVE_HOUSE + TO_MEADOW + TO_CAVE + TAKE_GEM + BACK_TO_VILLAGE + GIVE_GEM,
}

# In the house: walk up to mom; talk (A) and close with B, talk and close with A; open the
# START menu and close it with START, open it, press A (no effect), close it with B.
TALK_AND_MENU = _run(
    ("RIGHT", 2), ("A", 1), ("B", 1), ("A", 2), ("START", 2), ("START", 1), ("A", 1), ("B", 1)
)


def action_indices(buttons: tuple[str, ...]) -> list[int]:
    """Buttons as indices into :data:`ACTIONS` (the 7-button action set)."""
    return [ACTIONS.index(b) for b in buttons]


def as_presses(buttons: tuple[str, ...]) -> list[tuple[str, int, int]]:
    """Buttons as ``(button, hold_frames, wait_frames)``: held 8 frames, then 16 released."""
    return [(b, HOLD_FRAMES, STEP_FRAMES - HOLD_FRAMES) for b in buttons]
