"""``gbx bench emulator --emulator pyboy``: PyBoy plays the steps the gbx benchmark times."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from gbx_gameboy.actions import DOWN, LEFT, RIGHT, UP, A, B
from gbx_gameboy.bench import BUTTON_TABLE, button_indices, emulator_bench
from gbx_gameboy.pyboy_bench import PYBOY_BUTTONS, measure_pyboy


class FakePyBoy:
    """Records what the benchmark asks of PyBoy: presses, ticks, state loads."""

    log: list[tuple[Any, ...]] = []

    def __init__(self, rom: str, **kwargs: Any) -> None:
        FakePyBoy.log = [("init", kwargs.get("sound_emulated"))]

    def set_emulation_speed(self, speed: int) -> None:
        pass

    def tick(self, count: int, render: bool) -> None:
        self.log.append(("tick", count, render))

    def button_press(self, name: str) -> None:
        self.log.append(("press", name))

    def button_release(self, name: str) -> None:
        self.log.append(("release", name))

    def save_state(self, buf: Any) -> None:
        buf.write(b"state")

    def load_state(self, buf: Any) -> None:
        self.log.append(("load",))

    def stop(self, save: bool) -> None:
        pass


def test_the_table_is_the_actions_buttons_and_pyboy_names_each() -> None:
    assert BUTTON_TABLE == (0, RIGHT, LEFT, UP, DOWN, A, B)
    assert set(PYBOY_BUTTONS) == set(BUTTON_TABLE) and PYBOY_BUTTONS[0] is None


def test_each_env_replays_gbx_buttons_in_24_frame_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyboy

    monkeypatch.setattr(pyboy, "PyBoy", FakePyBoy)
    rec = measure_pyboy("game.gb", envs=3, frames=48, game=True, seed=5, warmup_steps=1)
    assert rec["envs"] == 3 and rec["frames_per_env"] == 48 and rec["emulator"] == "pyboy"
    assert rec["frames_per_s_per_env"] == pytest.approx(rec["frames_per_s"] / 3)
    log = FakePyBoy.log
    assert log[0] == ("init", False)  # sound off
    runs = [i for i, e in enumerate(log) if e == ("load",)]
    assert len(runs) == 3
    idx = button_indices(3, 3, 5)  # 1 warm-up + 2 timed steps per env
    for env, first in enumerate(runs):
        end = runs[env + 1] if env + 1 < len(runs) else len(log)
        run = log[first + 1:end]
        ticks = [e for e in run if e[0] == "tick"]
        assert sum(e[1] for e in ticks) == 3 * 24
        assert [e[2] for e in ticks] == [False, False, True] * 3  # the last frame drawn
        pressed = [e[1] for e in run if e[0] == "press"]
        want = [PYBOY_BUTTONS[BUTTON_TABLE[int(i)]] for i in idx[:, env]]
        assert pressed == [b for b in want if b]


def test_cli_runs_pyboy_and_refuses_gbx_only_options() -> None:
    pytest.importorskip("pyboy")
    res = CliRunner().invoke(emulator_bench, ["--envs", "2", "--frames", "24",
                                              "--warmup-steps", "1", "--emulator", "pyboy"])
    assert res.exit_code == 0, res.output
    rec = json.loads(res.output.strip().splitlines()[-1])
    assert rec["emulator"] == "pyboy" and rec["frames_per_cpu_s"] > 0
    res = CliRunner().invoke(emulator_bench, ["--emulator", "pyboy", "--kernel", "cuda"])
    assert res.exit_code == 2 and "--emulator" in res.output
