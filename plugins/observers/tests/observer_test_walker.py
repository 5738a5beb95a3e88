"""A test-only algorithm whose policy is a fixed action cycle stored in its state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import torch

from gbx import hookimpl


@attrs.frozen
class WalkerConfig:
    pass


class WalkerTrainer:
    """``act`` repeats ``cycle`` (restored by ``load_state_dict``); no learning."""

    def __init__(self, config: WalkerConfig, ctx: Any) -> None:
        self.ctx = ctx
        self.cycle: list[int] = [6, 4]  # RIGHT, DOWN
        self.calls = 0

    def act(self, obs: torch.Tensor, *, greedy: bool = True) -> torch.Tensor:
        action = self.cycle[self.calls % len(self.cycle)]
        self.calls += 1
        return torch.full((obs.shape[0],), action, dtype=torch.int64, device=obs.device)

    def train(self) -> None:
        # One evaluation, so observers that act at evaluations (gif) run inside a real run.
        self.ctx.record_eval({"env_steps": 0, "success_rate": 0.0})

    def evaluate(
        self, episodes: int, *, greedy: bool = True, baseline: bool = True
    ) -> dict[str, Any]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {"cycle": list(self.cycle)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.cycle = list(state["cycle"])


class CrashingTrainer(WalkerTrainer):
    """Steps the env a few times, then fails: its last frames go into the failure bundle."""

    def train(self) -> None:
        env = self.ctx.make_env(1)
        obs = env.reset()
        self.frames = [obs[0, -1].clone()]
        for _ in range(3):
            obs = env.step(self.act(obs))[0]
            self.frames.append(obs[0, -1].clone())
        raise RuntimeError("the model blew up")

    def failure_context(self) -> dict[str, Any]:
        return {"frames": torch.stack(self.frames), "actions": [6, 4, 6]}


@hookimpl
def register_algorithms(register: Any) -> None:
    register("walker", WalkerTrainer, WalkerConfig, description="fixed action cycle (tests)")
    register("crasher", CrashingTrainer, WalkerConfig, description="fails after 3 steps (tests)")
