"""``pyboy``, ``pyboy-goal`` and ``pyboy-quest-1..4``: the gbx envs with PyBoy emulating.

:class:`PyBoyEnv` holds a ``gameboy`` env (:class:`PyBoyGoalEnv`: a ``gameboy-goal``
env) built on a :class:`~gbx_env_pyboy.pool.PyBoyPool` handed to it as its emulators
(:class:`gbx_gameboy.env.Emulators`): the step (action codec, hold/release timing,
render of the last frame, 2x2-max downsampling, frame stack, truncation, masked reset,
``final_obs``) and the goal scoring (distance, ``done``, reward, ``info``) are that env's
own code, not a copy, and the PyBoy env forwards the env API to it.

Observations are made on the host; with a CUDA ``device`` they are copied there
after every step (this backend is the CPU baseline).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from pathlib import Path
from typing import Any, ClassVar

import attrs
import torch

from gbx.config import option
from gbx_env_pyboy.pool import PyBoyPool, default_workers
from gbx_env_pyboy.start import load_or_build
from gbx_gameboy.actions import BUTTON_BITS
from gbx_gameboy.cartridge import header_title
from gbx_gameboy.env import Emulators, GameBoyConfig, GameBoyEnv, resolve_rom
from gbx_gameboy.goal import GoalConfig, GoalEnv

_WORKERS_HELP = "worker processes (0: one per available CPU core, at most num_envs)"


def _workers_field() -> Any:
    return option(0, _WORKERS_HELP, attrs.validators.ge(0))


@attrs.frozen
class PyBoyConfig(GameBoyConfig):
    """The ``env`` section of ``pyboy``: the ``gameboy`` fields plus ``workers``."""

    workers: int = _workers_field()


@attrs.frozen
class PyBoyGoalConfig(GoalConfig):
    """The ``env`` section of ``pyboy-goal``: the ``gameboy-goal`` fields plus ``workers``."""

    workers: int = _workers_field()


def with_workers(config_cls: type, name: str, doc: str) -> type:
    """``config_cls`` (an attrs class) with a ``workers`` field added."""
    fields = {f.name: attrs.field(default=f.default, validator=f.validator,
                                  metadata=f.metadata, type=f.type)
              for f in attrs.fields(attrs.resolve_types(config_cls))}
    fields["workers"] = attrs.field(default=0, validator=attrs.validators.ge(0),
                                    metadata={"help": _WORKERS_HELP}, type=int)
    cls = attrs.make_class(name, fields, frozen=True)
    cls.__doc__ = doc
    cls.__module__ = __name__
    return cls


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _pyboy_version() -> str | None:
    try:
        return importlib.metadata.version("pyboy")
    except importlib.metadata.PackageNotFoundError:
        return None


class PyBoyEnv:
    """The ``gameboy`` env on a pool of PyBoy emulators (a :class:`gbx.api.Env`).

    Not a :class:`gbx.api.StatefulEnv`: the emulators live in worker processes, so a
    resumed run restarts its episodes (and says so).
    """

    scoring: ClassVar[type[GameBoyEnv]] = GameBoyEnv  # the env whose step runs on the pool
    name: ClassVar[str] = "pyboy"

    def __init__(self, config: Any, num_envs: int, device: torch.device | str,
                 seed: int = 0) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if config.random_noop_max:
            raise ValueError("the pyboy backend has no random starts; set env.random_noop_max=0")
        dev = torch.device(device)
        rom = resolve_rom(config.rom)
        state_sha256 = _sha256(Path(config.state).expanduser()) if config.state else None
        self.start = load_or_build(rom, config.state)
        workers = config.workers or default_workers(num_envs)
        self.pool = PyBoyPool(rom, self.start, num_envs, workers, dev, BUTTON_BITS)
        data = rom.read_bytes()
        emulators = Emulators(self.pool, self.pool, hashlib.sha256(data).hexdigest(),
                              state_sha256, header_title(data))
        try:
            self.env = self.scoring(config, num_envs, dev, seed, emulators=emulators)
        except BaseException:
            self.pool.close()
            raise
        self.config = config
        self.num_envs, self.num_actions = num_envs, self.env.num_actions
        self.obs_shape, self.device = self.env.obs_shape, self.env.device
        self._closed = False

    def reset(self) -> torch.Tensor:
        return self.env.reset()

    def step(self, actions: torch.Tensor) -> Any:
        return self.env.step(actions)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.pool.close()
            self.env.close()

    def meta(self) -> dict[str, Any]:
        out = self.env.meta()
        out.update({
            "env": self.name,
            "backend": "pyboy",
            "pyboy_version": _pyboy_version(),
            "workers": None if self._closed else self.pool.workers,
            "start_pyboy_state_sha256": self.start.sha256,
        })
        return out


class PyBoyGoalEnv(PyBoyEnv):
    """The ``gameboy-goal`` env (its scoring, ``info`` and meta) on a pool of PyBoy
    emulators."""

    scoring = GoalEnv
    name = "pyboy-goal"


def make_pyboy_env(config: Any, num_envs: int, device: Any, seed: int) -> PyBoyEnv:
    return PyBoyEnv(config, num_envs, device, seed)


def make_pyboy_goal_env(config: Any, num_envs: int, device: Any, seed: int) -> PyBoyGoalEnv:
    return PyBoyGoalEnv(config, num_envs, device, seed)
