"""Goal capture: script parsing, goal files, the capture-goal command, and the bundled ROM
booting and answering input (screens checked against stored, eye-checked pictures)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from gbx_gameboy import capture as cap
from gbx_gameboy.env import DEFAULT_ROM
from gbx_gameboy.tasks import STAGE_TASKS, START_STATE, states_dir

EXPECTED = Path(__file__).resolve().parent / "expected"


def test_parse_steps_and_compact_form_round_trip() -> None:
    steps = cap.parse_steps("down*3, LEFT,A*1,noop")
    assert steps == ["DOWN", "DOWN", "DOWN", "LEFT", "A", "NOOP"]
    script = cap.Script.parse("START@60", "DOWN*3,LEFT,A,NOOP")
    assert script.describe()["steps"] == "DOWN*3,LEFT,A,NOOP"
    assert script.describe()["presses"] == "START@60"
    assert cap.parse_steps(script.describe()["steps"]) == steps
    for bad in ("JUMP", "DOWN*x", "A*"):
        with pytest.raises(ValueError, match="bad step"):
            cap.parse_steps(bad)
    with pytest.raises(ValueError, match="hold"):
        cap.Script.parse(steps="A", hold=30)


def test_load_goal_refuses_bad_templates(tmp_path: Path) -> None:
    with pytest.raises(cap.GoalError, match="capture-goal"):
        cap.load_goal(tmp_path / "missing")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "goal.npy").write_bytes(cap.npy_bytes(np.full((4, 4), 3, np.uint8)) )
    (bad / "meta.json").write_text("{not json")
    with pytest.raises(cap.GoalError, match="not valid JSON"):
        cap.load_goal(bad)
    np.save(bad / "goal.npy", np.full((4, 4), 7, np.uint8))
    (bad / "meta.json").write_text("{}")
    with pytest.raises(cap.GoalError, match="above 3"):
        cap.load_goal(bad)
    np.save(bad / "goal.npy", np.zeros((4, 4), np.float32))
    with pytest.raises(cap.GoalError, match="uint8"):
        cap.load_goal(bad)
    ok = cap.load_goal(STAGE_TASKS[0].goal_dir() / "goal.npy")  # a bare .npy path works too
    assert ok.template.shape == (72, 80) and ok.tau == STAGE_TASKS[0].tau


def test_capture_goal_command_reproduces_stage_one(tmp_path: Path) -> None:
    from gbx_gameboy.capture import capture_goal_cmd

    out = tmp_path / "goal"
    res = CliRunner().invoke(capture_goal_cmd, [
        "--rom", str(DEFAULT_ROM), "--state", str(states_dir() / START_STATE),
        "--steps", "DOWN*5,LEFT*3,DOWN", "--tau", "0.05", "--out", str(out),
    ])
    assert res.exit_code == 0, res.output
    png = out / "goal.png"
    assert f"check the goal picture: {png}" in res.output
    assert Image.open(png).size == (80 * cap.PNG_SCALE, 72 * cap.PNG_SCALE)
    stage1 = STAGE_TASKS[0].goal_dir()
    assert (out / "goal.npy").read_bytes() == (stage1 / "goal.npy").read_bytes()
    meta = json.loads((out / "meta.json").read_text())
    assert meta["rom_sha256"] == cap.sha256_file(DEFAULT_ROM)
    assert meta["script"]["steps"] == "DOWN*5,LEFT*3,DOWN" and meta["tau"] == 0.05
    bad = CliRunner().invoke(capture_goal_cmd, [
        "--rom", str(DEFAULT_ROM), "--press", "JUMP@3", "--out", str(out)])
    assert bad.exit_code != 0 and "bad button press" in bad.output


def _shades_of(png: Path) -> np.ndarray:
    grey = np.asarray(Image.open(png).convert("L"))
    return (3 - grey.astype(np.int64) // 85).astype(np.uint8)  # 255,170,85,0 -> 0..3


def test_bundled_rom_boots_and_answers_input() -> None:
    """Power-on -> play screen; DOWN walks one block; START opens the menu."""
    batch = cap.new_batch(DEFAULT_ROM, None)
    cap.play(batch, cap.Script(settle=19))
    shots = {"quest_boot": batch.fb[0].numpy().copy()}
    cap.play(batch, cap.Script(steps=("DOWN",)))
    shots["quest_after_down"] = batch.fb[0].numpy().copy()
    cap.play(batch, cap.Script(steps=("START",)))
    shots["quest_menu"] = batch.fb[0].numpy().copy()
    for name, screen in shots.items():
        want = _shades_of(EXPECTED / f"{name}.png")
        assert int((screen != want).sum()) == 0, f"{name}: screen differs from {name}.png"
    assert (shots["quest_boot"] != shots["quest_after_down"]).any()
