"""``pyboy``, ``pyboy-goal`` and ``pyboy-quest-1..4``: the gbx envs with PyBoy emulating.

:class:`PyBoyEnv` is the ``gameboy`` env with its emulator batch replaced by a
:class:`~gbx_env_pyboy.pool.PyBoyPool`: the step (action codec, hold/release
timing, render of the last frame, 2x2-max downsampling, frame stack, truncation,
masked reset, ``final_obs``) is the ``gameboy`` env's own code, not a copy.
:class:`PyBoyGoalEnv` adds the ``gameboy-goal`` scoring the same way (its class
comes first in the method order), so distance, ``done``, reward and ``info`` are
computed by the one implementation of both backends.

Observations are made on the host; with a CUDA ``device`` they are copied there
after every step (this backend is the CPU baseline).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
from pathlib import Path
from typing import Any, cast

import attrs
import torch

from gbx.config import option
from gbx_env_pyboy.pool import PyBoyPool, default_workers
from gbx_env_pyboy.start import load_or_build
from gbx_gameboy.actions import BUTTON_BITS, make_codec
from gbx_gameboy.env import GameBoyConfig, GameBoyEnv, resolve_rom
from gbx_gameboy.goal import GoalConfig, GoalEnv
from gbx_gameboy.obs import obs_hw

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


class PyBoyEnv(GameBoyEnv):
    """The ``gameboy`` env on a pool of PyBoy emulators.

    Not a :class:`gbx.api.StatefulEnv`: the emulators live in worker processes, so a
    resumed run restarts its episodes (and says so). ``None`` withdraws the methods
    inherited from the Warp env, which ``isinstance(env, StatefulEnv)`` then reports.
    """

    # The base class types these as methods; withdrawing them is the point here.
    env_state_dict = None  # type: ignore[assignment]
    load_env_state_dict = None  # type: ignore[assignment]

    def __init__(self, config: Any, num_envs: int, device: torch.device | str,
                 seed: int = 0) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if config.random_noop_max:
            raise ValueError("the pyboy backend has no random starts; set env.random_noop_max=0")
        self.config = config
        self.num_envs = n = num_envs
        self.device = dev = torch.device(device)
        rom = resolve_rom(config.rom)
        self.rom_sha256 = _sha256(rom)
        self.state_sha256 = _sha256(Path(config.state).expanduser()) if config.state else None
        self.start = load_or_build(rom, config.state)
        self.codec = make_codec(config.action_codec, dev)
        self.num_actions = self.codec.num_actions
        hw = obs_hw(config.obs_size)
        self.obs_shape = (config.stack_k, *hw)
        workers = config.workers or default_workers(n)
        self.pool = PyBoyPool(rom, self.start, n, workers, dev, BUTTON_BITS)
        # The base env steps ``batch`` and restores through ``restorer.restore``: the pool
        # offers both with the same signatures.
        self.batch = cast(Any, self.pool)
        self.restorer = cast(Any, self.pool)
        self.random_start = False
        self._allocate_step_buffers(n, hw)

    def _on_torch_stream(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()  # no Warp launches here

    def close(self) -> None:
        if self.batch is not None:
            self.pool.close()
        super().close()

    def meta(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "env": "pyboy",
            "backend": "pyboy",
            "pyboy_version": importlib.metadata.version("pyboy"),
            "workers": self.pool.workers if self.batch is not None else None,
            "rom": str(cfg.rom),
            "rom_sha256": self.rom_sha256,
            "state": cfg.state or None,
            "state_sha256": self.state_sha256,
            "start_pyboy_state_sha256": self.start.sha256,
            "action_codec": cfg.action_codec,
            "buttons": list(self.codec.buttons),
            "frames_per_step": cfg.frames_per_step,
            "release_after_frames": cfg.release_after_frames,
            "obs_size": cfg.obs_size,
            "stack_k": cfg.stack_k,
            "max_steps": cfg.max_steps,
        }


class PyBoyGoalEnv(GoalEnv, PyBoyEnv):
    """``gameboy-goal`` scoring over :class:`PyBoyEnv` (method order: goal, pyboy, gameboy)."""

    env_state_dict = None  # type: ignore[assignment]  # not a StatefulEnv (see PyBoyEnv)
    load_env_state_dict = None  # type: ignore[assignment]

    def meta(self) -> dict[str, Any]:
        out = super().meta()
        out["env"] = "pyboy-goal"
        return out


def make_pyboy_env(config: Any, num_envs: int, device: Any, seed: int) -> PyBoyEnv:
    return PyBoyEnv(config, num_envs, device, seed)


def make_pyboy_goal_env(config: Any, num_envs: int, device: Any, seed: int) -> PyBoyGoalEnv:
    return PyBoyGoalEnv(config, num_envs, device, seed)
