"""Evaluation: one episode per env per round, device-side bookkeeping, random baseline."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gbx.toy import ToyConfig, make_toy_env
from gbx_toolkit.evaluation import evaluate_policy, run_episodes, summarize


class Corridor:
    """Env i reaches its goal after ``i + 1`` moves (action 1); truncated after ``max_steps``."""

    num_actions = 2
    obs_shape = (1, 1, 1)

    def __init__(self, num_envs: int, max_steps: int = 6) -> None:
        self.num_envs = num_envs
        self.device = torch.device("cpu")
        self.goal = torch.arange(1, num_envs + 1)
        self.max_steps = max_steps
        self.pos = torch.zeros(num_envs, dtype=torch.int64)
        self.t = torch.zeros(num_envs, dtype=torch.int64)
        self.resets = 0

    def _obs(self) -> torch.Tensor:
        return self.pos.to(torch.uint8).view(-1, 1, 1, 1)

    def reset(self) -> torch.Tensor:
        self.resets += 1
        self.pos.zero_()
        self.t.zero_()
        return self._obs()

    def step(self, actions: torch.Tensor) -> tuple[Any, ...]:
        self.pos += actions
        self.t += 1
        done = self.pos >= self.goal
        trunc = (self.t >= self.max_steps) & ~done
        reward = done.float() * 10.0 - 1.0
        ended = done | trunc
        self.pos = torch.where(ended, 0, self.pos)
        self.t = torch.where(ended, 0, self.t)
        return self._obs(), reward, done, trunc, {"reset_mask": ended}

    def close(self) -> None:
        pass


def always_move(obs: torch.Tensor) -> torch.Tensor:
    return torch.ones(obs.shape[0], dtype=torch.int64)


def never_move(obs: torch.Tensor) -> torch.Tensor:
    return torch.zeros(obs.shape[0], dtype=torch.int64)


def test_each_env_contributes_its_first_episode_only() -> None:
    env = Corridor(4)
    per = run_episodes(env, always_move, 4, check_every=1)
    # Env 0 finished four episodes before env 3 finished one; only first episodes count.
    assert per["length"] == [1.0, 2.0, 3.0, 4.0]
    assert per["success"] == [1.0] * 4
    assert per["return"] == [9.0, 8.0, 7.0, 6.0]
    s = summarize(per)
    assert s["success_rate"] == 1.0
    assert s["median_steps_to_goal"] == 2.5
    assert s["mean_return"] == 7.5


def test_rounds_cover_more_episodes_than_envs_and_truncation_is_failure() -> None:
    env = Corridor(3, max_steps=5)
    per = run_episodes(env, never_move, 7, check_every=4)
    assert env.resets == 3  # ceil(7 / 3) rounds, each from a reset
    assert len(per["length"]) == 7
    assert per["success"] == [0.0] * 7 and per["length"] == [5.0] * 7
    s = summarize(per)
    assert s["success_rate"] == 0.0 and s["median_steps_to_goal"] is None


def test_round_step_cap_reports_unfinished_episodes() -> None:
    env = Corridor(2, max_steps=1000)
    per = run_episodes(env, never_move, 2, check_every=1, max_round_steps=7)
    assert per["finished"] == [0.0, 0.0]
    assert per["length"] == [7.0, 7.0] and per["return"] == [-7.0, -7.0]


def test_evaluate_policy_adds_random_baseline_on_toy() -> None:
    env = make_toy_env(ToyConfig(grid=3, max_steps=12), 16, "cpu", seed=3)
    # A scripted optimal policy for the toy board: go down, then right (goal is bottom-right).
    def scripted(obs: torch.Tensor) -> torch.Tensor:
        return torch.full((obs.shape[0],), 4, dtype=torch.int64)  # DOWN only

    out = evaluate_policy(env, scripted, 32, greedy=True, seed=1)
    for key in ("success_rate", "median_steps_to_goal", "mean_return"):
        assert key in out and f"random_{key}" in out
    assert out["episodes"] == 32
    # DOWN alone succeeds only from the right-most column (3 of the 8 start cells).
    assert 0.0 < out["success_rate"] < 1.0
    assert 0.0 < out["random_success_rate"] <= 1.0
    # Seeded: a fresh env of the same seed (as every evaluation builds) gives the same figures.
    fresh = make_toy_env(ToyConfig(grid=3, max_steps=12), 16, "cpu", seed=3)
    again = evaluate_policy(fresh, scripted, 32, greedy=True, seed=1)
    assert again == out


def test_bad_episode_count() -> None:
    with pytest.raises(ValueError, match="episodes"):
        run_episodes(Corridor(2), always_move, 0)


def test_an_episode_ended_on_a_failure_screen_is_a_failure_not_a_success() -> None:
    cfg = ToyConfig(grid=4, random_start=False, failure_cell=1, failure_penalty=0.75,
                    progress_scale=0.0)
    env = make_toy_env(cfg, 3, "cpu", seed=0)
    # RIGHT from the top-left cell lands on the failure cell: done, but no success.
    summary = evaluate_policy(env, lambda obs: torch.full((obs.shape[0],), 6), 6, greedy=True,
                              baseline=False)
    assert summary["success_rate"] == 0.0 and summary["failure_rate"] == 1.0
    assert summary["mean_return"] == -0.75 and summary["mean_length"] == 1.0
    # DOWN then RIGHT along the left column and the bottom row reaches the goal.
    plan = [4, 4, 4, 6, 6, 6]
    t = [0]

    def walk(obs: torch.Tensor) -> torch.Tensor:
        a = plan[min(t[0], len(plan) - 1)]
        t[0] += 1
        return torch.full((obs.shape[0],), a)

    out = evaluate_policy(make_toy_env(cfg, 3, "cpu", seed=0), walk, 3, greedy=True,
                          baseline=False)
    assert out["success_rate"] == 1.0 and out["failure_rate"] == 0.0
