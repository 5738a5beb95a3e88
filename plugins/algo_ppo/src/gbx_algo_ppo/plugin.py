"""Entry point of the ``gbx-algo-ppo`` distribution (``[project.entry-points.gbx] ppo``)."""

from __future__ import annotations

from typing import Any

from gbx import hookimpl
from gbx_algo_ppo.config import PPOConfig
from gbx_algo_ppo.trainer import PPOTrainer


@hookimpl
def register_algorithms(register: Any) -> None:
    register(
        "ppo",
        PPOTrainer,
        PPOConfig,
        description="Proximal Policy Optimisation (clipped surrogate, GAE) on device rollouts",
    )

