"""A small PPO setup the tests share: a tiny CNN on the toy env, and a briefly trained
policy's checkpoint state (what ``run.init_from`` loads)."""

from __future__ import annotations

from typing import Any

from gbx.testing import InMemoryRunContext, roundtrip
from gbx.toy import ToyConfig
from gbx_algo_ppo.config import PPOConfig
from gbx_algo_ppo.trainer import PPOTrainer

SMALL = {"channels": (8, 16, 16), "hidden": 32}
TOY = ToyConfig(max_steps=12)


def small_config(**over: Any) -> PPOConfig:
    base: dict[str, Any] = dict(num_envs=8, rollout_steps=16, minibatches=2, update_epochs=2,
                                lr=1e-3, model_options=SMALL, lr_anneal=False)
    base.update(over)
    return PPOConfig(**base)


def trained_state() -> dict[str, Any]:
    """The checkpoint state of a policy trained for two updates on the toy env."""
    cfg = small_config()
    ctx = InMemoryRunContext(cfg, steps=2 * cfg.batch_size, env_config=TOY)
    return roundtrip(ctx.run(PPOTrainer(cfg, ctx)).state_dict())
