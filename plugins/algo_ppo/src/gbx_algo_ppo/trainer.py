"""The PPO trainer: collect on device, update, record (the run evaluates and checkpoints).

The imperative shell around :mod:`gbx_algo_ppo.losses`; what it shares with
A2C (seeding, model and optimiser, memory check, collection, bootstrapping,
evaluation, checkpoint state) is :class:`gbx_toolkit.on_policy.OnPolicyTrainer`.
Hot-path rules: the rollout loop never reads the device from the host; each
update ends with exactly two host reads (the non-finite guard's flag and the
metrics record), plus the budget/stop checks that use host-side counters only.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from gbx import distributed as gdist
from gbx.api import RunContext
from gbx.errors import ConfigError
from gbx.memory import format_bytes
from gbx_algo_ppo import losses
from gbx_algo_ppo.buffer import RolloutBuffer, estimate_buffer_bytes
from gbx_algo_ppo.config import PPOConfig
from gbx_toolkit.guard import FiniteGuard
from gbx_toolkit.models import require_model
from gbx_toolkit.on_policy import Forward, OnPolicyTrainer
from gbx_toolkit.rl_common import (
    activation_bytes,
    guarded_step,
    model_bytes,
)

__all__ = ["PPOTrainer"]


class _GraphedForward:
    """The rollout's no-grad forward pass replayed as a CUDA graph.

    Parameters are updated in place by the optimiser, so the captured graph
    always reads the current weights.
    """

    def __init__(self, model: nn.Module, example: torch.Tensor) -> None:
        self.static_obs = example.clone()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(3):  # warm up allocations and kernel selection
                model(self.static_obs)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph), torch.no_grad():
            self.static_out = model(self.static_obs)

    def __call__(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.static_obs.copy_(obs)
        self.graph.replay()
        logits, value = self.static_out
        return logits, value


class PPOTrainer(OnPolicyTrainer):
    """PPO bound to one run (implements :class:`gbx.api.Trainer`)."""

    algo = "ppo"
    # Envs without per-env distances may report the step's median distance.
    distance_keys = ("dist_p50",)

    def __init__(self, config: PPOConfig, ctx: RunContext) -> None:
        require_model(config.model)  # fail before any env or buffer is built
        super().__init__(config, ctx)
        self.cfg: PPOConfig = config
        self.updates = 0
        self.reward_stats = losses.RunningMeanStd(self.device)
        self.discounted: torch.Tensor | None = None
        self._rollout_forward: Forward | None = None
        # algo.anchor_coef: the policy the run started from (run.init_from), frozen, and
        # its log-probabilities on the update's samples
        self.anchor: nn.Module | None = None
        self._anchor_logprobs: torch.Tensor | None = None

    @property
    def buffer(self) -> RolloutBuffer | None:
        assert self.storage is None or isinstance(self.storage, RolloutBuffer)
        return self.storage

    # -- setup -------------------------------------------------------------------

    def _build_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam(model.parameters(), lr=self.cfg.lr, eps=self.cfg.adam_eps)

    def _wrap_forward(self, model: nn.Module) -> Forward:
        # Several ranks (torchrun): DDP, so backward averages gradients across them.
        model = gdist.wrap_model(model)
        return torch.compile(model) if self.cfg.torch_compile else model

    def _setup_training(self) -> None:
        cfg = self.cfg
        anchored = cfg.anchor_coef > 0
        if anchored and self.anchor is None:
            raise ConfigError(
                "algo.anchor_coef needs run.init_from: the anchor is the policy the run "
                "starts from (an earlier stage's run); set run.init_from or algo.anchor_coef=0")
        env, obs_shape, model = self._setup_env(cfg.num_envs)
        if anchored:
            self._track_milestones(env, "algo.anchor_coef")
        rollout = estimate_buffer_bytes(cfg.rollout_steps, cfg.num_envs, obs_shape)
        if anchored:  # the frozen copy and its log-probabilities of every sample
            rollout += model_bytes(model) + cfg.batch_size * (4 * env.num_actions + 1)
        self._check_memory(
            rollout + model_bytes(model) + activation_bytes(model, obs_shape, cfg.minibatch_size),
            fix="the rollout will not fit; lower algo.num_envs or algo.rollout_steps",
            describe=f"{cfg.num_envs} envs x {cfg.rollout_steps} steps, obs {obs_shape}; "
                     f"rollout buffer {format_bytes(rollout)}",
        )
        self.discounted = torch.zeros(cfg.num_envs, device=self.device)
        if anchored:
            self._anchor_logprobs = torch.zeros((cfg.batch_size, env.num_actions),
                                                device=self.device)
        self._start_storage(
            RolloutBuffer(cfg.rollout_steps, cfg.num_envs, obs_shape, self.device,
                          milestones=anchored),
            env,
        )
        if cfg.cuda_graphs:
            if self.device.type != "cuda":
                raise ValueError("algo.cuda_graphs=true needs a CUDA device: set run.device=cuda")
            assert self.obs is not None
            self._rollout_forward = _GraphedForward(self.model_or_fail(), self.obs)
        else:
            self._rollout_forward = self._forward

    # -- training ----------------------------------------------------------------

    def train(self) -> None:
        self._check_budget(self.cfg.batch_size, "algo.num_envs x algo.rollout_steps")
        if self.env is None:
            self._setup_training()
        cfg = self.cfg
        total = self._total_env_steps()
        per_update = cfg.batch_size
        total_updates = max(1, total // per_update)
        while self.env_steps + per_update <= total and not self.ctx.should_stop():
            started = time.perf_counter()
            if cfg.lr_anneal:
                frac = 1.0 - self.updates / total_updates
                for group in self._optimizer().param_groups:
                    group["lr"] = cfg.lr * max(frac, 0.0)
            self._collect()
            self._update()
            self.updates += 1
            # Between updates: the run may evaluate and checkpoint from inside record.
            self.ctx.record(self._record(time.perf_counter() - started))

    def _collect(self) -> None:
        """Fill the rollout buffer: no host reads in here."""
        assert self._rollout_forward is not None
        self._collect_with(self._rollout_forward)

    def _bootstrap(self) -> torch.Tensor:
        """Values of the truncated states, then of the observation after the rollout."""
        return self._bootstrap_values(self.cfg.minibatch_size)

    def _update(self) -> None:
        """Optimise on the collected rollout, then the guard's one host read."""
        guard, batch_stats = self._optimise()
        guard.check(batch_stats, step=self.env_steps)

    def _optimise(self) -> tuple[FiniteGuard, Callable[[], dict[str, Any]]]:
        """All device work of an update (no host reads); returns the pending guard."""
        cfg = self.cfg
        buf, acc, model = self.buffer, self.metrics, self.model
        assert buf is not None and acc is not None and model is not None
        assert buf.logprobs is not None
        forward = self.forward_fn()
        optimizer = self._optimizer()
        next_value = self._bootstrap()
        rewards = buf.rewards
        if cfg.norm_reward:
            assert self.discounted is not None
            rewards, self.discounted = losses.scale_rewards(
                rewards, buf.dones, buf.truncs, self.discounted, self.reward_stats,
                gamma=cfg.gamma,
            )
        advantages, returns = losses.compute_gae(
            rewards, buf.values, buf.dones, buf.truncs, next_value, buf.trunc_values,
            gamma=cfg.gamma, gae_lambda=cfg.gae_lambda,
        )
        b_obs = buf.obs.flatten(0, 1)
        b_actions = buf.actions.flatten()
        b_logprobs = buf.logprobs.flatten()
        b_values = buf.values.flatten()
        b_adv = advantages.flatten()
        b_returns = returns.flatten()
        guard = FiniteGuard(self.device)
        params = list(model.parameters())
        mb = cfg.minibatch_size
        anchor_logprobs = self._anchor_targets(b_obs)
        b_before = buf.before_milestones.flatten() if buf.before_milestones is not None \
            else None
        for _epoch in range(cfg.update_epochs):
            order = torch.randperm(
                cfg.batch_size, device=self.device, generator=self.generator
            )
            for start in range(0, cfg.batch_size, mb):
                idx = order[start : start + mb]
                logits, new_values = forward(b_obs[idx])
                new_logprob = losses.categorical_logprob(logits, b_actions[idx])
                entropy = losses.categorical_entropy(logits)
                mb_adv = b_adv[idx]
                if cfg.norm_adv:
                    mb_adv = losses.normalize_advantages(mb_adv)
                pol = losses.clipped_surrogate(
                    new_logprob, b_logprobs[idx], mb_adv, clip=cfg.clip
                )
                v_loss = losses.value_loss(
                    new_values, b_values[idx], b_returns[idx], clip=cfg.value_clip
                )
                ent = entropy.mean()
                loss = pol.loss + cfg.vf_coef * v_loss - cfg.ent_coef * ent
                if anchor_logprobs is not None and b_before is not None:
                    held, share = losses.anchor_kl(logits, anchor_logprobs[idx], b_before[idx])
                    loss = loss + cfg.anchor_coef * held
                    acc.add_scalars(anchor_kl=held.detach(), anchor_share=share)
                if cfg.uniform_kl_coef > 0:
                    floor = losses.uniform_kl(logits)
                    loss = loss + cfg.uniform_kl_coef * floor
                    acc.add_scalars(uniform_kl=floor.detach())
                optimizer.zero_grad(set_to_none=False)
                loss.backward()
                grad_norm = guarded_step(
                    optimizer, params, guard, max_grad_norm=cfg.max_grad_norm,
                    loss_policy=pol.loss, loss_value=v_loss, loss_entropy=ent,
                )
                self.opt_steps += 1
                acc.add_scalars(
                    loss_policy=pol.loss.detach(),
                    loss_value=v_loss.detach(),
                    loss_entropy=-ent.detach(),
                    approx_kl=pol.approx_kl,
                    clipfrac=pol.clipfrac,
                    grad_norm=grad_norm.detach(),
                )
                acc.add_policy(entropy=entropy.detach())

        def batch_stats() -> dict[str, Any]:
            return {
                "update": self.updates,
                "env_steps": self.env_steps,
                "lr": optimizer.param_groups[0]["lr"],
                "obs": buf.obs.float(),
                "rewards": buf.rewards,
                "values": buf.values,
                "advantages": advantages,
                "returns": returns,
                "logprobs": buf.logprobs,
            }

        acc.add_policy(value=buf.values)
        acc.add_scalars(
            explained_variance=losses.explained_variance(b_values, b_returns),
            trunc_overflow=buf.truncated.overflow().float(),
        )
        return guard, batch_stats

    def _anchor_targets(self, b_obs: torch.Tensor) -> torch.Tensor | None:
        """The anchor's log-probabilities of every sample of the update (None without an
        anchor), a minibatch at a time into the preallocated table."""
        out, anchor = self._anchor_logprobs, self.anchor
        if out is None or anchor is None:
            return None
        mb = self.cfg.minibatch_size
        with torch.no_grad():
            for start in range(0, b_obs.shape[0], mb):
                logits, _ = anchor(b_obs[start : start + mb])
                out[start : start + mb].copy_(torch.log_softmax(logits.float(), dim=-1))
        return out

    def _record(self, seconds: float) -> dict[str, Any]:
        acc = self.metrics
        assert acc is not None
        record: dict[str, Any] = {
            "step": self.env_steps,
            "env_steps": self.env_steps,
            "updates": self.updates,
            "opt_steps": self.opt_steps,
            "lr": self._optimizer().param_groups[0]["lr"],
        }
        summary = acc.summary()  # the one metrics read of this update
        record.update(summary)
        record["ups"] = 1.0 / max(seconds, 1e-9)  # env steps/s (sps) is the run's to compute
        return record

    # -- state ---------------------------------------------------------------------

    def _env_state(self) -> dict[str, Any] | None:
        state = super()._env_state()
        if state is not None and self.discounted is not None:
            state["discounted"] = self.discounted.clone()
        return state

    def _restore_env(self, state: Mapping[str, Any]) -> None:
        super()._restore_env(state)
        if "discounted" in state:
            self.discounted = state["discounted"].to(self.device)

    def _counters(self) -> dict[str, int]:
        return {**super()._counters(), "updates": self.updates}

    def _load_counters(self, counters: Mapping[str, Any]) -> None:
        super()._load_counters(counters)
        self.updates = int(counters["updates"])

    def state_dict(self) -> dict[str, Any]:
        state = {**super().state_dict(), "reward_stats": self.reward_stats.state_dict()}
        if self.anchor is not None:
            state["anchor"] = self.anchor.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.reward_stats.load_state_dict(state["reward_stats"])
        if "anchor" in state:  # a resumed run keeps the policy it started from
            self._hold_anchor()
            assert self.anchor is not None
            self.anchor.load_state_dict(state["anchor"])

    def init_weights(self, state: Mapping[str, Any], source: str) -> None:
        """The weights of another run (:class:`gbx.api.WeightInit`); with
        ``algo.anchor_coef`` they are also the anchor the run keeps them near."""
        super().init_weights(state, source)
        if self.cfg.anchor_coef > 0:
            self._hold_anchor()

    def _hold_anchor(self) -> None:
        """Freeze a copy of the current policy as the anchor."""
        anchor = copy.deepcopy(self.model_or_fail()).eval()
        anchor.requires_grad_(False)
        self.anchor = anchor
