"""A small pixel env for CPU tests, the shared run-context stand-in on it, and the small
``dreamer_v3`` config the trainer tests run."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from gbx.testing import InMemoryRunContext
from gbx_algo_dreamer.config import DreamerConfig


class DotEnv:
    """A dot on a shade canvas moved by 5 actions towards a fixed goal corner.

    Obs uint8 [N, K, H, W] (shade 3 = dot, 1 = goal); reward 1 and done at the goal,
    trunc at ``max_steps``; envs reset themselves (``reset_mask``, ``final_obs``).
    """

    num_actions = 5

    def __init__(self, num_envs: int, device: str = "cpu", seed: int = 0,
                 shape: tuple[int, int, int] = (1, 16, 16), max_steps: int = 12) -> None:
        self.num_envs, self.obs_shape, self.device = num_envs, shape, torch.device(device)
        self.max_steps = max_steps
        self.gen = torch.Generator().manual_seed(seed)
        self.pos = torch.zeros(num_envs, 2, dtype=torch.int64)
        self.t = torch.zeros(num_envs, dtype=torch.int64)
        self.cell = 4

    def _grid(self) -> tuple[int, int]:
        return self.obs_shape[1] // self.cell, self.obs_shape[2] // self.cell

    def _render(self) -> torch.Tensor:
        k, h, w = self.obs_shape
        obs = torch.zeros(self.num_envs, k, h, w, dtype=torch.uint8)
        gh, gw = self._grid()
        c = self.cell
        obs[:, :, (gh - 1) * c:gh * c, (gw - 1) * c:gw * c] = 1
        for i in range(self.num_envs):
            y, x = self.pos[i].tolist()
            obs[i, :, y * c:(y + 1) * c, x * c:(x + 1) * c] = 3
        return obs

    def _respawn(self, mask: torch.Tensor) -> None:
        n = int(mask.sum())
        if n:
            gh, gw = self._grid()
            self.pos[mask] = torch.stack([torch.randint(0, gh - 1, (n,), generator=self.gen),
                                          torch.randint(0, gw - 1, (n,), generator=self.gen)], 1)
            self.t[mask] = 0

    def reset(self) -> torch.Tensor:
        self._respawn(torch.ones(self.num_envs, dtype=torch.bool))
        return self._render()

    def step(self, actions: torch.Tensor):
        moves = torch.tensor([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]])
        gh, gw = self._grid()
        self.pos = self.pos + moves[actions.cpu()]
        self.pos[:, 0].clamp_(0, gh - 1)
        self.pos[:, 1].clamp_(0, gw - 1)
        self.t += 1
        done = (self.pos[:, 0] == gh - 1) & (self.pos[:, 1] == gw - 1)
        trunc = (self.t >= self.max_steps) & ~done
        reward = done.float()
        final = self._render()
        reset = done | trunc
        self._respawn(reset)
        obs = self._render()
        info = {"reset_mask": reset, "final_obs": final, "success": done.clone()}
        return obs, reward, done, trunc, info

    def close(self) -> None:
        pass

    def env_state_dict(self) -> dict[str, Any]:
        return {"pos": self.pos.clone(), "t": self.t.clone(), "gen": self.gen.get_state()}

    def load_env_state_dict(self, state: Mapping[str, Any]) -> None:
        self.pos, self.t = state["pos"].clone(), state["t"].clone()
        self.gen.set_state(state["gen"])


def dot_context(run_dir: Path | None = None, *, seed: int = 0,
                env_shape: tuple[int, int, int] = (1, 16, 16),
                max_records: int | None = None) -> InMemoryRunContext:
    """The shared run-context stand-in (:class:`gbx.testing.InMemoryRunContext`) on
    :class:`DotEnv`; ``max_records`` records stop the run (like ``--steps``)."""
    return InMemoryRunContext(
        run_dir=run_dir, seed=seed, stop_after_records=max_records,
        env_factory=lambda num_envs, env_seed: DotEnv(num_envs, seed=env_seed, shape=env_shape))


def load_state(checkpoint: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    """The trainer state of one of the context's checkpoints ``(step, state)``."""
    return checkpoint[1]


def small_cfg(**kw: Any) -> DreamerConfig:
    """A tiny model on 4 envs that makes a few updates in 48 env steps; ``kw`` overrides."""
    base: dict[str, Any] = dict(size="tiny", num_envs=4, batch_size=4, batch_length=8,
                                train_ratio=16.0, replay_capacity=512, learning_starts=32,
                                record_every=8, total_env_steps=48)
    base.update(kw)
    return DreamerConfig(**base)
