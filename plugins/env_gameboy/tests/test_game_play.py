"""gbx quest runs in PyBoy: scripted solutions reach every stage, the screens tell the
stages apart, one step moves one block, text box and menu open and close, and random play
leaves the first room now and then."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest

from gbx_gameboy.game import art, assets, world
from gbx_gameboy.game.build import GAME_DIR, ROM_NAME
from gbx_gameboy.game.ram import STATE_DONE, STATE_MENU, STATE_TEXT, STATE_WALK, load_symbols
from gbx_gameboy.game.solutions import (
    ACTIONS,
    HOLD_FRAMES,
    INTO_PIT,
    LEAVE_HOUSE,
    SOLUTIONS,
    STEP_FRAMES,
    TALK_AND_MENU,
    TO_CAVE,
    TO_MEADOW,
)

pyboy = pytest.importorskip("pyboy", reason="PyBoy runs the game until gbx's emulator does")

SYM = load_symbols()


class Game:
    """The game in PyBoy, stepped with the env's semantics (hold 8 of 24 frames)."""

    def __init__(self, start_state: bytes) -> None:
        self.emu = pyboy.PyBoy(str(GAME_DIR / ROM_NAME), window="null", sound_emulated=False)
        self.emu.load_state(io.BytesIO(start_state))

    def step(self, button: str) -> None:
        name = button.lower()
        self.emu.button_press(name)
        self.emu.tick(HOLD_FRAMES, False)
        self.emu.button_release(name)
        self.emu.tick(STEP_FRAMES - HOLD_FRAMES, True)

    def ram(self, name: str) -> int:
        return int(self.emu.memory[SYM[name]])

    def screen(self) -> np.ndarray:
        return np.asarray(self.emu.screen.ndarray)[:, :, :3].copy()

    def close(self) -> None:
        self.emu.stop(save=False)


@pytest.fixture(scope="module")
def start_state() -> bytes:
    """Power on, let PyBoy's boot ROM run, stop once the game's main loop has started."""
    emu = pyboy.PyBoy(str(GAME_DIR / ROM_NAME), window="null", sound_emulated=False)
    try:
        for _ in range(600):
            emu.tick(1, False)
            if emu.memory[SYM["wRoomW"]] == world.ROOMS[0].width:
                break
        else:
            pytest.fail("the game never loaded its first room")
        emu.tick(2, False)
        buf = io.BytesIO()
        emu.save_state(buf)
        return buf.getvalue()
    finally:
        emu.stop(save=False)


@pytest.fixture
def game(start_state: bytes):  # type: ignore[no-untyped-def]
    g = Game(start_state)
    yield g
    g.close()


def goal_met(game: Game, stage: world.Stage) -> bool:
    if stage.quest_done:
        return game.ram("wQuestDone") == 1 and game.ram("wState") == STATE_DONE
    ok = stage.room is None or game.ram("wRoom") == stage.room
    if stage.has_gem is not None:
        ok = ok and game.ram("wHasGem") == int(stage.has_gem)
    return ok


@pytest.mark.parametrize("stage", world.STAGES, ids=[s.name for s in world.STAGES])
def test_solution_reaches_the_stage_goal_on_its_last_step(game: Game, stage: world.Stage) -> None:
    actions = SOLUTIONS[stage.name]
    assert set(actions) <= set(ACTIONS)
    for button in actions[:-1]:
        game.step(button)
    assert not goal_met(game, stage)
    game.step(actions[-1])
    assert goal_met(game, stage)


def test_stage_goal_screens_are_distinct(start_state: bytes) -> None:
    screens = {}
    for stage in world.STAGES:
        g = Game(start_state)
        for button in SOLUTIONS[stage.name]:
            g.step(button)
        screens[stage.name] = g.screen()
        g.close()
    g = Game(start_state)
    screens["start"] = g.screen()
    g.close()
    names = list(screens)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            differing = np.any(screens[a] != screens[b], axis=2).mean()
            assert differing > 0.05, f"{a} and {b} screens differ in only {differing:.1%} of pixels"


def test_one_step_moves_exactly_one_block(game: Game) -> None:
    x, y, py = game.ram("wX"), game.ram("wY"), game.ram("wPY")
    game.step("DOWN")
    assert (game.ram("wX"), game.ram("wY"), game.ram("wPY")) == (x, y + 1, py + 16)
    assert game.ram("wMoveCount") == 0
    game.step("RIGHT")
    assert (game.ram("wX"), game.ram("wY")) == (x + 1, y + 1)
    for _ in range(3):  # (5,3) -> (5,1), then the wall in row 0 blocks the third step
        game.step("UP")
    assert game.ram("wY") == 1  # the top wall stops the player at row 1
    assert game.ram("wFacing") == 1  # FACE_UP


def test_text_box_and_menu_open_and_close(game: Game) -> None:
    walking = game.screen()
    states = []
    screens = []
    for button in TALK_AND_MENU:
        game.step(button)
        states.append(game.ram("wState"))
        screens.append(game.screen())
    walk, text, menu = STATE_WALK, STATE_TEXT, STATE_MENU
    assert states == [walk, walk, text, walk, text, walk, menu, walk, menu, menu, walk]
    box = slice(104, 144)  # the window's rows on screen
    text_box, closed, menu_box = screens[2][box], screens[3][box], screens[6][box]
    assert np.any(text_box != closed) and np.any(menu_box != text_box)
    assert np.array_equal(screens[4][box], text_box)
    for i in (5, 7, 10):
        assert np.array_equal(screens[i][box], closed)
    assert not np.array_equal(walking, screens[2])


def test_carried_gem_shows_in_the_corner(start_state: bytes) -> None:
    g = Game(start_state)
    try:
        for button in SOLUTIONS["fetch_gem"]:
            g.step(button)
        corner = g.screen()[0:16, 144:160].reshape(-1, 3).sum(axis=1)
        hud = [g.emu.memory[0xFE00 + i] for i in range(16, 20)]  # OAM slot 4
    finally:
        g.close()
    gem_tile = assets.sprite_tiles()[0]["gem"]
    assert hud == [16, 152, gem_tile, 0]
    outline = sum(row.count("#") for row in art.GEM)
    assert (corner == corner.min()).sum() >= outline // 2  # the gem's black outline is drawn


def test_a_pit_in_the_cave_ends_the_game_with_the_game_over_screen(game: Game) -> None:
    """Stepping onto a pit block shows the game-over screen for good: the state is done,
    the quest is not, and no button changes the screen any more."""
    for button in LEAVE_HOUSE + TO_MEADOW + TO_CAVE + INTO_PIT[:-2]:
        game.step(button)
    assert game.ram("wGameOver") == 0 and game.ram("wState") == STATE_WALK
    game.step(INTO_PIT[-2])  # UP, into the pit
    assert game.ram("wGameOver") == 1 and game.ram("wState") == STATE_DONE
    assert game.ram("wQuestDone") == 0
    over = game.screen()
    for button in ("UP", "A", "START", "LEFT"):
        game.step(button)
        assert np.array_equal(game.screen(), over)
    # a full-screen box, unlike any room: its border is the screen's edge
    assert len(np.unique(over.reshape(-1, 3), axis=0)) == 2


@pytest.mark.slow
def test_random_play_leaves_the_house_now_and_then(start_state: bytes) -> None:
    rng = random.Random(1234)
    episodes, steps = 24, 300
    successes = 0
    g = Game(start_state)
    try:
        for _ in range(episodes):
            g.emu.load_state(io.BytesIO(start_state))
            for _ in range(steps):
                g.step(rng.choice(ACTIONS))
                if g.ram("wRoom") == world.VILLAGE:
                    successes += 1
                    break
    finally:
        g.close()
    assert 1 <= successes <= episodes // 2
