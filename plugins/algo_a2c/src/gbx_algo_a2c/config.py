"""A2C's configuration (the ``algo.*`` section of a run when ``--algo a2c``).

Defaults target very large env batches on one GPU (8,192 to 65,536 envs):
short windows, one optimiser step per window, a record every few steps.
``docs/a2c.md`` explains each choice.
"""

from __future__ import annotations

from typing import Any

import attrs
from attrs import validators as v

OPTIMIZERS = ("rmsprop", "adam")
# Largest forward/backward batch chosen by grad_accum=0.
AUTO_CHUNK = 8192


def _help(text: str) -> dict[str, str]:
    return {"help": text}


def _unit_interval(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"'{attribute.name}' must be in [0, 1]: {value}")


def _unit_interval_or_none(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None:
        _unit_interval(instance, attribute, value)


@attrs.frozen(kw_only=True)
class A2CConfig:
    """Every knob of A2C; see docs/a2c.md."""

    num_envs: int = attrs.field(
        default=8192, validator=v.gt(0), metadata=_help("parallel training envs (N)")
    )
    update_every: int = attrs.field(
        default=5, validator=v.gt(0),
        metadata=_help("env steps per env between optimiser steps (window length T)"),
    )
    n_step: int = attrs.field(
        default=0, validator=v.ge(0),
        metadata=_help("return length: bootstrap after at most this many steps; "
                       "0 = update_every (every step looks to the window's end)"),
    )
    gamma: float = attrs.field(
        default=0.99, validator=_unit_interval, metadata=_help("discount factor")
    )
    gae_lambda: float | None = attrs.field(
        default=None, validator=_unit_interval_or_none,
        metadata=_help("GAE lambda over the window; None = plain n-step returns"),
    )
    lr: float = attrs.field(default=7e-4, validator=v.gt(0.0), metadata=_help("learning rate"))
    optimizer: str = attrs.field(
        default="rmsprop", validator=v.in_(OPTIMIZERS), metadata=_help("rmsprop | adam")
    )
    eps: float = attrs.field(
        default=1e-5, validator=v.gt(0.0), metadata=_help("optimiser epsilon")
    )
    alpha: float = attrs.field(
        default=0.99, validator=_unit_interval,
        metadata=_help("RMSprop smoothing constant (ignored by adam)"),
    )
    ent_coef: float = attrs.field(
        default=0.01, validator=v.ge(0.0), metadata=_help("entropy bonus coefficient")
    )
    vf_coef: float = attrs.field(
        default=0.5, validator=v.ge(0.0), metadata=_help("value loss coefficient")
    )
    max_grad_norm: float = attrs.field(
        default=0.5, validator=v.ge(0.0), metadata=_help("global gradient norm clip; 0 = off")
    )
    norm_adv: bool = attrs.field(
        default=False, metadata=_help("normalise advantages over each window")
    )
    grad_accum: int = attrs.field(
        default=0, validator=v.ge(0),
        metadata=_help("chunks each window's batch is split into for forward/backward; "
                       "gradients add up to one optimiser step (bounds activation memory); "
                       f"0 = auto, the fewest chunks of at most {AUTO_CHUNK} samples"),
    )
    log_every: int = attrs.field(
        default=10, validator=v.gt(0),
        metadata=_help("optimiser steps per metrics record (one host read per record)"),
    )
    total_env_steps: int = attrs.field(
        default=0, validator=v.ge(0),
        metadata=_help("training budget in env steps over all envs; 0 = the run's --steps"),
    )
    eval_every: int = attrs.field(
        default=0, validator=v.ge(0),
        metadata=_help("evaluate every this many optimiser steps (a multiple of log_every); "
                       "0 = off"),
    )
    eval_episodes: int = attrs.field(
        default=32, validator=v.gt(0), metadata=_help("episodes per evaluation")
    )
    eval_greedy: bool = attrs.field(
        default=True, metadata=_help("periodic evaluations act greedily (else sample)")
    )
    checkpoint_every: int = attrs.field(
        default=500, validator=v.ge(0),
        metadata=_help("checkpoint every this many optimiser steps (a multiple of log_every); "
                       "0 = off"),
    )
    model: str = attrs.field(
        default="cnn", validator=v.min_len(1), metadata=_help("registered model name (cnn, impala)")
    )
    model_options: dict[str, Any] = attrs.field(
        factory=dict, metadata=_help("keyword options of the model builder, e.g. {hidden: 256}")
    )

    def __attrs_post_init__(self) -> None:
        if self.n_step > self.update_every:
            raise ValueError(
                f"'n_step' must be <= update_every ({self.update_every}): {self.n_step}"
            )
        if self.gae_lambda is not None and self.n_step not in (0, self.update_every):
            raise ValueError(
                f"'n_step' must be 0 when gae_lambda is set (GAE spans the window): {self.n_step}"
            )
        if self.grad_accum and self.batch_size % self.grad_accum:
            raise ValueError(
                f"'grad_accum' must divide num_envs * update_every = {self.batch_size}: "
                f"{self.grad_accum}"
            )
        for name in ("eval_every", "checkpoint_every"):
            value = getattr(self, name)
            if value % self.log_every:
                raise ValueError(
                    f"'{name}' must be a multiple of log_every ({self.log_every}): {value}"
                )

    @property
    def horizon(self) -> int:
        """The effective return length (``n_step``, or the whole window)."""
        return self.n_step or self.update_every

    @property
    def batch_size(self) -> int:
        """Samples per optimiser step."""
        return self.num_envs * self.update_every

    @property
    def chunks(self) -> int:
        """Forward/backward passes per optimiser step (``grad_accum`` resolved)."""
        if self.grad_accum:
            return self.grad_accum
        batch = self.batch_size
        return next(k for k in range(-(-batch // AUTO_CHUNK), batch + 1) if batch % k == 0)

    @property
    def chunk_size(self) -> int:
        """Samples per forward/backward pass."""
        return self.batch_size // self.chunks
