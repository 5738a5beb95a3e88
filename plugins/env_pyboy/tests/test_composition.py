"""The PyBoy envs' composition and start-state cache key, without pyboy: a stand-in pool
takes the worker processes' place."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from gbx.api import StatefulEnv
from gbx.testing import check_env
from gbx_env_pyboy import env as pyboy_env
from gbx_env_pyboy import start
from gbx_env_pyboy.start import StartState
from gbx_gameboy.env import DEFAULT_ROM, GameBoyEnv
from gbx_gameboy.goal import GoalEnv

SCREEN = (144, 160)


class FakePool:
    """A PyBoyPool stand-in: every screen shows ``buttons & 3`` after a step."""

    instances: list[FakePool] = []

    def __init__(self, rom: Path, start_state: StartState, num_envs: int, workers: int,
                 device: torch.device, button_bits: dict[str, int]) -> None:
        self.workers = workers
        self.start_fb = torch.from_numpy(start_state.screen).to(device)
        self.fb = self.start_fb.expand(num_envs, *SCREEN).clone()
        self._faulted = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.steps: list[tuple[int, int]] = []
        self.closed = 0
        FakePool.instances.append(self)

    def step_frames(self, buttons: torch.Tensor, frames: int, release: int,
                    render_last: bool = True) -> None:
        self.steps.append((frames, release))
        self.fb.copy_((buttons & 3).to(torch.uint8).view(-1, 1, 1).expand_as(self.fb))

    def faulted(self) -> torch.Tensor:
        return self._faulted

    def restore(self, mask: torch.Tensor, index: int = 0) -> None:
        torch.where(mask.view(-1, 1, 1), self.start_fb, self.fb, out=self.fb)

    def close(self) -> None:
        self.closed += 1


@pytest.fixture
def fake_pool(monkeypatch: pytest.MonkeyPatch) -> type[FakePool]:
    screen = np.zeros(SCREEN, dtype=np.uint8)
    fake_start = StartState(b"state", screen, hashlib.sha256(b"state").hexdigest())
    monkeypatch.setattr(pyboy_env, "PyBoyPool", FakePool)
    monkeypatch.setattr(pyboy_env, "load_or_build", lambda rom, state: fake_start)
    FakePool.instances.clear()
    return FakePool


def test_the_pyboy_env_holds_a_gameboy_env_on_its_pool(fake_pool: type[FakePool]) -> None:
    assert not issubclass(pyboy_env.PyBoyEnv, GameBoyEnv)  # composed, not inherited
    config = pyboy_env.PyBoyConfig(max_steps=5, frames_per_step=4, release_after_frames=2,
                                   workers=3)
    check_env(pyboy_env.PyBoyEnv(config, 3, "cpu"), steps=12)  # the env contract; closes it
    assert fake_pool.instances[0].closed == 1
    env = pyboy_env.PyBoyEnv(config, 3, "cpu")
    pool = fake_pool.instances[1]
    assert type(env.env) is GameBoyEnv and env.env.batch is pool and env.env.restorer is pool
    assert not isinstance(env, StatefulEnv)  # the emulators live in other processes
    with pytest.raises(TypeError, match="cannot save"):
        env.env.env_state_dict()
    # the gameboy env's own step drives the pool: its timing, and its 2x2 max of the screen
    env.reset()
    obs, _, _, _, info = env.step(torch.tensor([0, 1, 2]))
    assert pool.steps == [(4, 2)]
    codes = env.env.codec.encode(torch.tensor([0, 1, 2])) & 3
    assert torch.equal(obs[:, -1], codes.to(torch.uint8).view(-1, 1, 1).expand(3, 72, 80))
    meta = env.meta()
    assert meta["env"] == "pyboy" and meta["backend"] == "pyboy" and meta["workers"] == 3
    assert meta["rom_sha256"] == hashlib.sha256(DEFAULT_ROM.read_bytes()).hexdigest()
    assert meta["start_pyboy_state_sha256"] == hashlib.sha256(b"state").hexdigest()
    assert meta["rom_title"] == "GBX QUEST"  # the header, read as the Warp env reads it
    env.close()
    env.close()
    assert pool.closed == 1


def test_the_goal_env_scores_on_the_pool(fake_pool: type[FakePool]) -> None:
    from gbx_env_pyboy.tasks import make_stage_env

    env = make_stage_env("pyboy-quest-1", 2, "cpu", 0, workers=1, info_mode="full")
    assert type(env.env) is GoalEnv and not isinstance(env, StatefulEnv)
    env.reset()
    _, reward, done, trunc, info = env.step(torch.zeros(2, dtype=torch.int64))
    assert info["dist"].shape == (2,) and reward.dtype == torch.float32
    assert env.meta()["env"] == "pyboy-goal" and "goal_sha256" in env.meta()
    env.close()


def test_the_random_start_option_is_refused_before_any_worker_starts(
        fake_pool: type[FakePool]) -> None:
    with pytest.raises(ValueError, match="random_noop_max=0"):
        pyboy_env.PyBoyEnv(pyboy_env.PyBoyConfig(random_noop_max=3), 2, "cpu")
    assert fake_pool.instances == []


def test_cache_key_is_the_inputs_bytes_and_declared_versions() -> None:
    versions = start.converter_versions()
    key = start.cache_key(b"rom", b"state", versions)
    assert key == start.cache_key(b"rom", b"state", dict(versions))
    others = {start.cache_key(b"rom2", b"state", versions),
              start.cache_key(b"rom", b"state2", versions),
              start.cache_key(b"rom", None, versions),
              start.cache_key(b"rom", b"state", {**versions, "conversion": -1})}
    assert key not in others and len(others) == 4
    from gbx_gameboy import pyboy_state, savestate

    assert versions == {"pyboy_state": pyboy_state.PYBOY_STATE_VERSION,
                        "conversion": pyboy_state.CONVERSION_VERSION,
                        "savestate": savestate.FORMAT_VERSION}


def test_start_states_are_cached_by_that_key(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GBX_CACHE_DIR", str(tmp_path))
    built: list[Any] = []

    def fake_build(rom: Path, state: str) -> StartState:
        built.append((rom, state))
        return StartState(b"made", np.full(SCREEN, 2, dtype=np.uint8),
                          hashlib.sha256(b"made").hexdigest())

    monkeypatch.setattr(start, "build", fake_build)
    rom = tmp_path / "game.gb"
    rom.write_bytes(b"\0" * 0x150)
    first = start.load_or_build(rom, "")
    again = start.load_or_build(rom, "")
    assert len(built) == 1 and again.pyboy_state == first.pyboy_state == b"made"
    assert np.array_equal(again.screen, first.screen)
    [stored] = (tmp_path / "pyboy-start").glob("*.state")
    assert stored.stem == start.cache_key(rom.read_bytes(), None, start.converter_versions())
    # a new declared conversion version makes a new start state; the ROM's bytes too
    from gbx_gameboy import pyboy_state

    monkeypatch.setattr(pyboy_state, "CONVERSION_VERSION", pyboy_state.CONVERSION_VERSION + 1)
    start.load_or_build(rom, "")
    rom.write_bytes(b"\1" * 0x150)
    start.load_or_build(rom, "")
    assert len(built) == 3
