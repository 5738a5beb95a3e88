"""Screens a button opens on a script's way that may pass for its goal
(:mod:`gbx_gameboy.look_alikes`, recorded by capture-goal and make-stages)."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from gbx_gameboy import capture as cap
from gbx_gameboy.game import solutions as sol
from gbx_gameboy.game.build import GAME_DIR, ROM_NAME
from gbx_gameboy.look_alikes import LookAlike, nearest_look_alike, presses_to_try
from gbx_gameboy.tasks import START_STATE, states_dir

ROM = GAME_DIR / ROM_NAME
WAY = ("DOWN", "DOWN", "LEFT", "LEFT", "DOWN")


def _script(steps: tuple[str, ...]) -> cap.Script:
    return cap.Script(steps=steps, frames_per_step=sol.STEP_FRAMES, hold=sol.HOLD_FRAMES)


def test_every_place_and_button_but_the_ways_own_end() -> None:
    tries = presses_to_try(("UP", "A"), ("A", "START"))
    assert tries == [(0, "A"), (0, "START"), (1, "START")]


def test_a_menu_that_looks_like_the_goal_is_found_where_it_opens() -> None:
    """The goal is the START menu opened after 3 steps of the way; the way itself ends
    elsewhere. The look-alike is that menu, at distance 0."""
    start = states_dir() / START_STATE
    menu = cap.play(cap.new_batch(ROM, start), _script((*WAY[:3], "START")))[-1]
    places: list = []
    cap.play(cap.new_batch(ROM, start), _script(WAY), states=places)
    assert len(places) == len(WAY)
    look = nearest_look_alike(ROM, _script(WAY), places, menu)
    assert look == LookAlike(0.0, 3, "START")
    assert "START after 3 steps" in (look.warning(0.05) or "")
    assert look.warning(0.0) is None


def test_no_way_no_look_alike() -> None:
    goal = np.zeros((72, 80), dtype=np.uint8)
    assert nearest_look_alike(ROM, cap.Script(presses=(("START", 30),)), [], goal) is None


def test_capture_goal_records_and_warns(tmp_path) -> None:
    """capture-goal writes the look-alike into meta.json, prints it, and warns on stderr
    when it is under 2 * tau."""
    from gbx_gameboy.capture import capture_goal_cmd

    out = tmp_path / "goal"
    args = ["--rom", str(ROM), "--state", str(states_dir() / START_STATE),
            "--steps", ",".join(WAY), "--out", str(out)]
    result = CliRunner().invoke(capture_goal_cmd, [*args, "--tau", "0.4"])
    assert result.exit_code == 0, result.output
    look = json.loads((out / "meta.json").read_text(encoding="utf-8"))["nearest_look_alike"]
    assert set(look) == {"distance", "after_steps", "button"} and look["distance"] < 0.8
    assert "nearest screen a button opens on the way" in result.stdout
    assert "warning: pressing" in result.stderr
    quiet = CliRunner().invoke(capture_goal_cmd, [*args, "--tau", "0.001"])
    assert quiet.exit_code == 0 and "warning" not in quiet.stderr


def test_the_places_must_match_the_way() -> None:
    import pytest

    goal = np.zeros((72, 80), dtype=np.uint8)
    with pytest.raises(ValueError, match="2 states for a way of 5 steps"):
        nearest_look_alike(ROM, _script(WAY), [None, None], goal)
