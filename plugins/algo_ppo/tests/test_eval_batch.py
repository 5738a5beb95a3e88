"""Evaluation plays every episode at once: one eval env per episode, from the real start."""

from __future__ import annotations

from gbx.testing import InMemoryRunContext
from gbx_algo_ppo.config import PPOConfig
from gbx_algo_ppo.trainer import PPOTrainer
from gbx_toolkit.evaluation import MAX_EVAL_ENVS, eval_batch_size


def test_eval_builds_one_evaluation_env_per_episode() -> None:
    cfg = PPOConfig(num_envs=4, rollout_steps=8, model_options={"channels": [8, 16, 16],
                                                                "hidden": 16})
    ctx = InMemoryRunContext(cfg)
    out = PPOTrainer(cfg, ctx).evaluate(40, greedy=True)
    assert out["episodes"] == 40
    # One batch of 40 evaluation envs (not the 4 training envs, not one env per round),
    # built as non-training envs: the task's real start state (gbx.api.RealStartConfig).
    assert ctx.made_envs == [(40, False)]
    assert eval_batch_size(64) == 64 and eval_batch_size(10**6) == MAX_EVAL_ENVS
