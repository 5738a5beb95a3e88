"""A2C's configuration (the ``algo.*`` section of a run when ``--algo a2c``).

Defaults target very large env batches on one GPU (8,192 to 65,536 envs):
short windows, one optimiser step per window, a record every few steps.
``docs/a2c.md`` explains each choice.
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
    unit_interval,
    unit_interval_or_none,
    vf_coef_field,
)

OPTIMIZERS = ("rmsprop", "adam")
# Largest forward/backward batch chosen by grad_accum=0.
AUTO_CHUNK = 8192


@attrs.frozen(kw_only=True)
class A2CConfig:
    """Every knob of A2C; see docs/a2c.md."""

    num_envs: int = attrs.field(
        default=8192, validator=v.gt(0), metadata=field_help("parallel training envs (N)")
    )
    update_every: int = attrs.field(
        default=5, validator=v.gt(0),
        metadata=field_help("env steps per env between optimiser steps (window length T)"),
    )
    n_step: int = attrs.field(
        default=0, validator=v.ge(0),
        metadata=field_help("return length: bootstrap after at most this many steps; "
                       "0 = update_every (every step looks to the window's end)"),
    )
    gamma: float = attrs.field(
        default=0.99, validator=unit_interval, metadata=field_help("discount factor")
    )
    gae_lambda: float | None = attrs.field(
        default=None, validator=unit_interval_or_none,
        metadata=field_help("GAE lambda over the window; None = plain n-step returns"),
    )
    lr: float = attrs.field(default=7e-4, validator=v.gt(0.0), metadata=field_help("learning rate"))
    optimizer: str = attrs.field(
        default="rmsprop", validator=v.in_(OPTIMIZERS), metadata=field_help("rmsprop | adam")
    )
    eps: float = attrs.field(
        default=1e-5, validator=v.gt(0.0), metadata=field_help("optimiser epsilon")
    )
    alpha: float = attrs.field(
        default=0.99, validator=unit_interval,
        metadata=field_help("RMSprop smoothing constant (ignored by adam)"),
    )
    ent_coef: float = ent_coef_field()
    vf_coef: float = vf_coef_field()
    max_grad_norm: float = max_grad_norm_field()
    norm_adv: bool = attrs.field(
        default=False, metadata=field_help("normalise advantages over each window")
    )
    grad_accum: int = attrs.field(
        default=0, validator=v.ge(0),
        metadata=field_help("chunks each window's batch is split into for forward/backward; "
                       "gradients add up to one optimiser step (bounds activation memory); "
                       f"0 = auto, the fewest chunks of at most {AUTO_CHUNK} samples"),
    )
    log_every: int = attrs.field(
        default=10, validator=v.gt(0),
        metadata=field_help("optimiser steps per metrics record (one host read per record)"),
    )
    total_env_steps: int = budget_field()
    model: str = model_field()
    model_options: dict[str, Any] = model_options_field()

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
