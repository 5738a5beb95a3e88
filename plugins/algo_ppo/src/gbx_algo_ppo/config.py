"""PPO's configuration (the ``algo.*`` section of a run when ``--algo ppo``).

Defaults target the bundled Game Boy stage 1: a gridworld-like screen where
the only reward is reaching the goal, with one agent step every 24 frames.
``docs/ppo.md`` explains each choice.
"""

from __future__ import annotations

from typing import Any

import attrs
from attrs import validators as v


def _help(text: str) -> dict[str, str]:
    return {"help": text}


def _positive_or_none(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"'{attribute.name}' must be > 0 or None: {value}")


def _unit_interval(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"'{attribute.name}' must be in [0, 1]: {value}")


@attrs.frozen(kw_only=True)
class PPOConfig:
    """Every knob of PPO; see docs/ppo.md."""

    num_envs: int = attrs.field(
        default=256, validator=v.gt(0), metadata=_help("parallel training envs (N)")
    )
    rollout_steps: int = attrs.field(
        default=128, validator=v.gt(0), metadata=_help("env steps per env per update (T)")
    )
    total_env_steps: int = attrs.field(
        default=0,
        validator=v.ge(0),
        metadata=_help("training budget in env steps over all envs; 0 = the run's --steps"),
    )
    gamma: float = attrs.field(
        default=0.995, validator=_unit_interval, metadata=_help("discount factor")
    )
    gae_lambda: float = attrs.field(
        default=0.95, validator=_unit_interval, metadata=_help("GAE lambda")
    )
    clip: float = attrs.field(
        default=0.2, validator=v.gt(0.0), metadata=_help("policy ratio clip range")
    )
    value_clip: float | None = attrs.field(
        default=None,
        validator=_positive_or_none,
        metadata=_help("clip range of value updates around the rollout values; None = off"),
    )
    lr: float = attrs.field(
        default=2.5e-4, validator=v.gt(0.0), metadata=_help("Adam learning rate")
    )
    lr_anneal: bool = attrs.field(
        default=True, metadata=_help("anneal the learning rate linearly to 0 over the budget")
    )
    adam_eps: float = attrs.field(default=1e-5, validator=v.gt(0.0), metadata=_help("Adam epsilon"))
    ent_coef: float = attrs.field(
        default=0.01, validator=v.ge(0.0), metadata=_help("entropy bonus coefficient")
    )
    vf_coef: float = attrs.field(
        default=0.5, validator=v.ge(0.0), metadata=_help("value loss coefficient")
    )
    max_grad_norm: float = attrs.field(
        default=0.5, validator=v.ge(0.0), metadata=_help("global gradient norm clip; 0 = off")
    )
    update_epochs: int = attrs.field(
        default=4, validator=v.gt(0), metadata=_help("passes over each rollout")
    )
    minibatches: int = attrs.field(
        default=4, validator=v.gt(0), metadata=_help("minibatches per epoch")
    )
    norm_adv: bool = attrs.field(
        default=True, metadata=_help("normalise advantages per minibatch")
    )
    norm_reward: bool = attrs.field(
        default=False,
        metadata=_help("scale rewards by a running std of the discounted return"),
    )
    eval_every: int = attrs.field(
        default=0, validator=v.ge(0), metadata=_help("evaluate every this many updates; 0 = off")
    )
    eval_episodes: int = attrs.field(
        default=32, validator=v.gt(0), metadata=_help("episodes per evaluation")
    )
    eval_greedy: bool = attrs.field(
        default=True, metadata=_help("periodic evaluations act greedily (else sample)")
    )
    checkpoint_every: int = attrs.field(
        default=50, validator=v.ge(0), metadata=_help("checkpoint every this many updates; 0 = off")
    )
    model: str = attrs.field(
        default="cnn", validator=v.min_len(1), metadata=_help("registered model name (cnn, impala)")
    )
    model_options: dict[str, Any] = attrs.field(
        factory=dict, metadata=_help("keyword options of the model builder, e.g. {hidden: 256}")
    )
    torch_compile: bool = attrs.field(
        default=False, metadata=_help("wrap the model in torch.compile")
    )
    cuda_graphs: bool = attrs.field(
        default=False, metadata=_help("replay the rollout forward pass as a CUDA graph (CUDA only)")
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
