"""gbx plugin: Proximal Policy Optimisation on batched device envs."""

from __future__ import annotations

from gbx_algo_ppo.config import PPOConfig

__all__ = ["PPOConfig"]
