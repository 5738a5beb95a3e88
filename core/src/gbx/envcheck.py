"""Checks of what an env returns, at the boundary between env and trainer.

Used by the run loop when ``run.debug`` is set, and by
:func:`gbx.testing.check_env`. Each check raises :class:`EnvContractError`
with one line naming the offending output and what was expected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


class EnvContractError(AssertionError):
    """An env output does not follow the :class:`gbx.api.Env` contract."""


def _same_device(a: torch.device, b: torch.device) -> bool:
    return a.type == b.type and (a.index or 0) == (b.index or 0)


def _check_tensor(
    name: str, value: Any, dtype: torch.dtype, shape: tuple[int, ...], device: torch.device
) -> None:
    if not isinstance(value, torch.Tensor):
        raise EnvContractError(f"{name}: expected a torch.Tensor, got {type(value).__name__}")
    if value.dtype != dtype:
        raise EnvContractError(f"{name}: expected dtype {dtype}, got {value.dtype}")
    if tuple(value.shape) != shape:
        raise EnvContractError(f"{name}: expected shape {list(shape)}, got {list(value.shape)}")
    if not _same_device(value.device, device):
        raise EnvContractError(f"{name}: expected device {device}, got {value.device}")


def check_obs(env: Any, obs: Any, name: str = "obs") -> None:
    """Observations: ``uint8 [num_envs, *obs_shape]`` on ``env.device``."""
    _check_tensor(name, obs, torch.uint8, (env.num_envs, *env.obs_shape), env.device)


def check_reset_output(env: Any, obs: Any) -> None:
    check_obs(env, obs, "reset() obs")


def check_step_output(env: Any, output: Any, *, check_values: bool = True) -> None:
    """Check ``env.step(...)`` output: types, dtypes, shapes, device and info keys.

    ``check_values`` also reads values on the host (shade range, finite
    rewards); that synchronises with the device, so only debug runs use it.
    """
    if not isinstance(output, tuple) or len(output) != 5:
        raise EnvContractError("step(): expected a 5-tuple (obs, reward, done, trunc, info)")
    obs, reward, done, trunc, info = output
    n = env.num_envs
    check_obs(env, obs, "step() obs")
    _check_tensor("step() reward", reward, torch.float32, (n,), env.device)
    _check_tensor("step() done", done, torch.bool, (n,), env.device)
    _check_tensor("step() trunc", trunc, torch.bool, (n,), env.device)
    if not isinstance(info, Mapping):
        raise EnvContractError(f"step() info: expected a dict, got {type(info).__name__}")
    if "reset_mask" not in info:
        raise EnvContractError("step() info: missing 'reset_mask' (bool [N], done | trunc)")
    _check_tensor("info['reset_mask']", info["reset_mask"], torch.bool, (n,), env.device)
    if "final_obs" in info:
        check_obs(env, info["final_obs"], "info['final_obs']")
    if not check_values:
        return
    if not torch.equal(info["reset_mask"], done | trunc):
        raise EnvContractError("info['reset_mask'] must equal done | trunc")
    if bool((done & trunc).any()):
        raise EnvContractError("done and trunc are both set for one env; trunc must exclude done")
    if not bool(torch.isfinite(reward).all()):
        raise EnvContractError("step() reward: contains NaN or inf")
    if obs.numel() and int(obs.max()) > 3 and len(env.obs_shape) == 3:
        raise EnvContractError(f"step() obs: pixel shades must be 0..3, got max {int(obs.max())}")


class CheckedEnv:
    """Wraps an env and checks every ``reset``/``step`` output (debug runs)."""

    def __init__(self, env: Any) -> None:
        self._env = env
        self.num_envs = env.num_envs
        self.num_actions = env.num_actions
        self.obs_shape = tuple(env.obs_shape)
        self.device = torch.device(env.device)

    def reset(self) -> torch.Tensor:
        obs = self._env.reset()
        check_reset_output(self, obs)
        return obs

    def step(self, actions: torch.Tensor) -> Any:
        _check_tensor("step() actions", actions, torch.int64, (self.num_envs,), self.device)
        out = self._env.step(actions)
        check_step_output(self, out)
        return out

    def close(self) -> None:
        self._env.close()

    def __getattr__(self, name: str) -> Any:  # meta() and env-specific extras
        return getattr(self._env, name)
