"""The A2C trainer: step a short window on the device, take one optimiser step, repeat.

The imperative shell around :mod:`gbx_algo_a2c.returns`; what it shares with
PPO (seeding, model and optimiser, memory check, collection, bootstrapping,
evaluation, checkpoint state) is :class:`gbx_toolkit.on_policy.OnPolicyTrainer`.
Hot-path rules: neither the window's env steps nor the optimiser step read
the device from the host. Every ``log_every`` optimiser steps one record is
emitted with a single host read (the metrics accumulator's summary, which
also carries a "something was not finite" flag); only when that flag is set
does the non-finite guard spend more reads to describe the failure and stop
the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gbx import distributed as gdist
from gbx.api import RunContext
from gbx.memory import format_bytes
from gbx_algo_a2c import returns as rl
from gbx_algo_a2c.config import A2CConfig
from gbx_algo_a2c.window import Window, estimate_window_bytes
from gbx_toolkit.guard import FiniteGuard
from gbx_toolkit.on_policy import OnPolicyTrainer
from gbx_toolkit.rl_common import (
    activation_bytes,
    compute_gae,
    explained_variance,
    guarded_step,
    model_bytes,
)

__all__ = ["DISTANCE_PERCENTILES", "A2CTrainer", "required_bytes"]

# Per-step distance percentiles an env may report instead of per-env distances.
DISTANCE_PERCENTILES = ("dist_p10", "dist_p50", "dist_p90")
# Record key of the window's non-finite flag; consumed here, never emitted.
_NONFINITE = "nonfinite"


def required_bytes(cfg: A2CConfig, model: nn.Module, obs_shape: tuple[int, ...]) -> int:
    """Device bytes a run needs: window, model + optimiser, largest forward/backward."""
    widest = max(cfg.chunk_size, cfg.num_envs)  # acting and bootstrapping see N at once
    return (
        estimate_window_bytes(cfg.update_every, cfg.num_envs, obs_shape)
        + model_bytes(model)
        + activation_bytes(model, obs_shape, widest)
    )


class A2CTrainer(OnPolicyTrainer):
    """A2C bound to one run (implements :class:`gbx.api.Trainer`)."""

    algo = "a2c"
    distance_keys = DISTANCE_PERCENTILES

    def __init__(self, config: A2CConfig, ctx: RunContext) -> None:
        super().__init__(config, ctx)
        self.cfg: A2CConfig = config
        self.guard: FiniteGuard | None = None
        self._batch_stats: Callable[[], dict[str, Any]] | None = None
        self._unrecorded = 0  # optimiser steps since the last record
        self._record_started = time.perf_counter()

    @property
    def window(self) -> Window | None:
        return self.storage

    # -- setup -------------------------------------------------------------------

    def _build_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        cfg = self.cfg
        params = model.parameters()
        if cfg.optimizer == "adam":
            return torch.optim.Adam(params, lr=cfg.lr, eps=cfg.eps)
        return torch.optim.RMSprop(params, lr=cfg.lr, alpha=cfg.alpha, eps=cfg.eps)

    def _wrap_forward(self, model: nn.Module) -> nn.Module:
        # Several ranks (torchrun) start from rank 0's weights; _optimise averages gradients.
        return gdist.sync_parameters(model)

    def _setup_training(self) -> None:
        cfg = self.cfg
        env, obs_shape, model = self._setup_env(cfg.num_envs)
        window = estimate_window_bytes(cfg.update_every, cfg.num_envs, obs_shape)
        self._check_memory(
            required_bytes(cfg, model, obs_shape),
            fix="the window will not fit; lower algo.num_envs or algo.update_every, "
                "or raise algo.grad_accum",
            describe=f"{cfg.num_envs} envs x {cfg.update_every} steps per update, "
                     f"obs {obs_shape}; window {format_bytes(window)}",
        )
        self.guard = FiniteGuard(self.device)
        self._start_storage(Window(cfg.update_every, cfg.num_envs, obs_shape, self.device), env)

    # -- training ----------------------------------------------------------------

    def train(self) -> None:
        self._check_budget(self.cfg.batch_size, "algo.num_envs x algo.update_every")
        if self.env is None:
            self._setup_training()
        cfg = self.cfg
        total = self._total_env_steps()
        self._start_record_window()
        while self.env_steps + cfg.batch_size <= total and not self.ctx.should_stop():
            self._collect()
            self._optimise()
            # Records fall on multiples of log_every even after resuming from a run that
            # stopped between two, so the run's evaluations and checkpoints (made from
            # inside record) fall on the same records too.
            if self.opt_steps % cfg.log_every == 0:
                self._emit_record()
                self._start_record_window()
        if self._unrecorded:  # the budget ended inside a logging window
            self._emit_record()

    def _start_record_window(self) -> None:
        self._record_started = time.perf_counter()

    def _collect(self) -> None:
        """Step every env ``update_every`` times into the window: no host reads in here."""
        self._collect_with(self.forward_fn())

    def _bootstrap(self) -> torch.Tensor:
        """Values of the truncated states (into the window), then of the next observation."""
        return self._bootstrap_values(max(self.cfg.chunk_size, 1))

    def targets(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Advantages and value targets ``[T, N]`` of the collected window."""
        cfg, win = self.cfg, self.window
        assert win is not None
        next_value = self._bootstrap()
        if cfg.gae_lambda is not None:
            return compute_gae(
                win.rewards, win.values, win.dones, win.truncs, next_value, win.trunc_values,
                gamma=cfg.gamma, gae_lambda=cfg.gae_lambda,
            )
        ret = rl.nstep_returns(
            win.rewards, win.values, win.dones, win.truncs, next_value, win.trunc_values,
            gamma=cfg.gamma, n=cfg.horizon,
        )
        return ret - win.values, ret

    def _optimise(self) -> None:
        """One optimiser step on the window (device work only: no host reads)."""
        cfg = self.cfg
        win, acc, model, guard = self.window, self.metrics, self.model, self.guard
        assert win is not None and acc is not None and model is not None and guard is not None
        optimizer = self._optimizer()
        advantages, returns = self.targets()
        if cfg.norm_adv:
            advantages = rl.normalize_advantages(advantages)
        b_obs = win.obs.flatten(0, 1)
        b_actions = win.actions.flatten()
        b_adv = advantages.flatten()
        b_returns = returns.flatten()
        params = list(model.parameters())
        optimizer.zero_grad(set_to_none=False)
        scale = 1.0 / cfg.chunks
        sums = torch.zeros(3, device=self.device)  # policy, value, entropy over the window
        size = cfg.chunk_size
        for start in range(0, cfg.batch_size, size):
            part = slice(start, start + size)
            logits, values = model(b_obs[part])
            loss = rl.a2c_loss(
                logits, values, b_actions[part], b_adv[part], b_returns[part],
                vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef,
            )
            (loss.total * scale).backward()
            sums += torch.stack([loss.policy, loss.value, loss.entropy]).detach() * scale
            acc.add_policy(entropy=loss.per_sample_entropy.detach())
        policy_loss, value_loss, entropy = sums.unbind()
        gdist.average_gradients(params)  # across ranks, after every chunk's backward
        grad_norm = guarded_step(
            optimizer, params, guard, max_grad_norm=cfg.max_grad_norm,
            loss_policy=policy_loss, loss_value=value_loss, loss_entropy=entropy,
        )
        self.opt_steps += 1
        self._unrecorded += 1
        finite = torch.isfinite(torch.stack([policy_loss, value_loss, entropy, grad_norm]))
        acc.add_scalars(
            loss_policy=policy_loss,
            loss_value=value_loss,
            loss_entropy=-entropy,
            grad_norm=grad_norm.detach(),
            explained_variance=explained_variance(win.values, returns),
            trunc_overflow=win.truncated.overflow().float(),
            **{_NONFINITE: (~finite).any().float()},
        )
        acc.add_policy(value=win.values)
        lr = optimizer.param_groups[0]["lr"]
        env_steps = self.env_steps

        def batch_stats() -> dict[str, Any]:
            return {
                "opt_step": self.opt_steps,
                "env_steps": env_steps,
                "lr": lr,
                "obs": win.obs.float(),
                "rewards": win.rewards,
                "values": win.values,
                "advantages": advantages,
                "returns": returns,
            }

        self._batch_stats = batch_stats

    def _emit_record(self) -> None:
        """One host read: the window's summary; stop the run if anything was not finite."""
        acc, guard = self.metrics, self.guard
        assert acc is not None and guard is not None
        summary = acc.summary()
        nonfinite = float(summary.pop(_NONFINITE, 0.0))  # type: ignore[arg-type]
        if nonfinite > 0 or nonfinite != nonfinite:
            guard.check(self._batch_stats, step=self.env_steps)  # raises NonFiniteError
        guard.reset()
        seconds = max(time.perf_counter() - self._record_started, 1e-9)
        record: dict[str, Any] = {
            "step": self.env_steps,
            "env_steps": self.env_steps,
            "updates": self.opt_steps,
            "opt_steps": self.opt_steps,
            "lr": self._optimizer().param_groups[0]["lr"],
        }
        record.update(summary)
        record["ups"] = self._unrecorded / seconds  # env steps/s (sps): the run computes it
        self._unrecorded = 0
        self.ctx.record(record)
