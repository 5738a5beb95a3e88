"""PPO's configuration (the ``algo.*`` section of a run when ``--algo ppo``).

Defaults target the bundled Game Boy stage 1: a gridworld-like screen where
the only reward is reaching the goal, with one agent step every 24 frames.
``docs/ppo.md`` explains each choice.
"""

from __future__ import annotations

from typing import Any

import attrs
from attrs import validators as v

from gbx_toolkit.rl_common import (
    budget_field,
    ent_coef_field,
    field_help,
    max_grad_norm_field,
    model_field,
    model_options_field,
    positive_or_none,
    unit_interval,
    vf_coef_field,
)


@attrs.frozen(kw_only=True)
class PPOConfig:
    """Every knob of PPO; see docs/ppo.md."""

    num_envs: int = attrs.field(
        default=256, validator=v.gt(0), metadata=field_help("parallel training envs (N)")
    )
    rollout_steps: int = attrs.field(
        default=128, validator=v.gt(0), metadata=field_help("env steps per env per update (T)")
    )
    total_env_steps: int = budget_field()
    gamma: float = attrs.field(
        default=0.995, validator=unit_interval, metadata=field_help("discount factor")
    )
    gae_lambda: float = attrs.field(
        default=0.95, validator=unit_interval, metadata=field_help("GAE lambda")
    )
    clip: float = attrs.field(
        default=0.2, validator=v.gt(0.0), metadata=field_help("policy ratio clip range")
    )
    value_clip: float | None = attrs.field(
        default=None,
        validator=positive_or_none,
        metadata=field_help("clip range of value updates around the rollout values; None = off"),
    )
    lr: float = attrs.field(
        default=2.5e-4, validator=v.gt(0.0), metadata=field_help("Adam learning rate")
    )
    lr_anneal: bool = attrs.field(
        default=True, metadata=field_help("anneal the learning rate linearly to 0 over the budget")
    )
    anchor_coef: float = attrs.field(
        default=0.0,
        validator=v.ge(0.0),
        metadata=field_help(
            "weight of KL(start policy || policy) on the steps before the env's milestones: "
            "keeps run.init_from's way to an earlier stage's goal while the run learns what "
            "comes after; 0 = off (needs run.init_from and env.milestone_dirs)"
        ),
    )
    uniform_kl_coef: float = attrs.field(
        default=0.0,
        validator=v.ge(0.0),
        metadata=field_help(
            "weight of KL(uniform || policy): pulls every action's logit up by about "
            "1/actions however unlikely the action is (the entropy bonus's pull vanishes "
            "with its probability), so no action is ruled out for good; 0 = off"
        ),
    )
    adam_eps: float = attrs.field(
        default=1e-5, validator=v.gt(0.0), metadata=field_help("Adam epsilon")
    )
    ent_coef: float = ent_coef_field()
    vf_coef: float = vf_coef_field()
    max_grad_norm: float = max_grad_norm_field()
    update_epochs: int = attrs.field(
        default=4, validator=v.gt(0), metadata=field_help("passes over each rollout")
    )
    minibatches: int = attrs.field(
        default=4, validator=v.gt(0), metadata=field_help("minibatches per epoch")
    )
    norm_adv: bool = attrs.field(
        default=True, metadata=field_help("normalise advantages per minibatch")
    )
    norm_reward: bool = attrs.field(
        default=False,
        metadata=field_help("scale rewards by a running std of the discounted return"),
    )
    model: str = model_field()
    model_options: dict[str, Any] = model_options_field()
    torch_compile: bool = attrs.field(
        default=False, metadata=field_help("wrap the model in torch.compile")
    )
    cuda_graphs: bool = attrs.field(
        default=False,
        metadata=field_help("replay the rollout forward pass as a CUDA graph (CUDA only)"),
    )

    def __attrs_post_init__(self) -> None:
        batch = self.num_envs * self.rollout_steps
        if batch % self.minibatches:
            raise ValueError(
                f"'minibatches' must divide num_envs * rollout_steps = {batch}: {self.minibatches}"
            )

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.rollout_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.minibatches
