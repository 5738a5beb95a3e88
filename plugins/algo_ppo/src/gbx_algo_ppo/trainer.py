"""The PPO trainer: collect on device, update, record, evaluate, checkpoint.

The imperative shell around :mod:`gbx_algo_ppo.losses`. Hot-path rules:
the rollout loop never reads the device from the host; each update ends
with exactly two host reads (the non-finite guard's flag and the metrics
record), plus the budget/stop checks that use host-side counters only.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np
import torch
from torch import nn

from gbx.api import Env, RunContext
from gbx.evaluation import evaluate_policy
from gbx.guard import FiniteGuard
from gbx.metrics import MetricsAccumulator
from gbx.models import build_model, require_model
from gbx.rl_common import (
    activation_bytes,
    capture_rng_state,
    check_memory,
    env_batch_state,
    format_bytes,
    model_bytes,
    restore_env_batch,
    restore_rng_state,
)
from gbx_algo_ppo import losses
from gbx_algo_ppo.buffer import RolloutBuffer, estimate_buffer_bytes
from gbx_algo_ppo.config import PPOConfig

# Eval envs are seeded apart from the training envs.
EVAL_SEED_OFFSET = 1_000_003


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


class PPOTrainer:
    """PPO bound to one run (implements :class:`gbx.api.Trainer`)."""

    def __init__(self, config: PPOConfig, ctx: RunContext) -> None:
        require_model(config.model)  # fail before any env or buffer is built
        self.cfg = config
        self.ctx = ctx
        self.device = torch.device(ctx.device)
        seed = int(ctx.seed)
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.env_steps = 0
        self.updates = 0
        self.opt_steps = 0
        self.model: nn.Module | None = None
        self.optimizer: torch.optim.Adam | None = None
        self.env: Env | None = None
        self.obs: torch.Tensor | None = None
        self.buffer: RolloutBuffer | None = None
        self.metrics: MetricsAccumulator | None = None
        self.reward_stats = losses.RunningMeanStd(self.device)
        self.discounted: torch.Tensor | None = None
        self._forward: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None
        self._rollout_forward: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None
        self._spec: tuple[tuple[int, ...], int] | None = None
        self._pending_env_state: Mapping[str, Any] | None = None
        self._baselines: dict[int, dict[str, Any]] = {}

    # -- setup -------------------------------------------------------------------

    def _setup_model(self, obs_shape: tuple[int, ...], num_actions: int) -> nn.Module:
        if self.model is not None:
            if self._spec != (obs_shape, num_actions):
                raise ValueError(
                    f"env gives obs {obs_shape} with {num_actions} actions but the model was "
                    f"built for {self._spec}: use the env config the checkpoint was trained on"
                )
            return self.model
        self._spec = (tuple(obs_shape), int(num_actions))
        model = build_model(self.cfg.model, obs_shape, num_actions, **self.cfg.model_options)
        self.model = model.to(self.device)
        self.optimizer = torch.optim.Adam(
            self.model.parameters(), lr=self.cfg.lr, eps=self.cfg.adam_eps
        )
        self._forward = torch.compile(self.model) if self.cfg.torch_compile else self.model
        return self.model

    def _total_env_steps(self) -> int:
        if self.cfg.total_env_steps:
            return self.cfg.total_env_steps
        return int(self.ctx.config.run.steps)

    def _setup_training(self) -> None:
        cfg = self.cfg
        env = self.ctx.make_env(cfg.num_envs)
        self.env = env
        obs_shape = tuple(int(d) for d in env.obs_shape)
        model = self._setup_model(obs_shape, env.num_actions)
        required = (
            estimate_buffer_bytes(cfg.rollout_steps, cfg.num_envs, obs_shape)
            + model_bytes(model)
            + activation_bytes(model, obs_shape, cfg.minibatch_size)
        )
        line = check_memory(
            required, self.device, algo="ppo",
            fix="the rollout will not fit; lower algo.num_envs or algo.rollout_steps",
        )
        rollout = estimate_buffer_bytes(cfg.rollout_steps, cfg.num_envs, obs_shape)
        print(
            f"ppo: {cfg.num_envs} envs x {cfg.rollout_steps} steps, obs {obs_shape}; "
            f"rollout buffer {format_bytes(rollout)}; {line}",
            file=sys.stderr,
            flush=True,
        )
        self.buffer = RolloutBuffer(cfg.rollout_steps, cfg.num_envs, obs_shape, self.device)
        self.metrics = MetricsAccumulator(cfg.num_envs, env.num_actions, self.device)
        self.discounted = torch.zeros(cfg.num_envs, device=self.device)
        self.obs = env.reset()
        if self._pending_env_state is not None:
            self._restore_env(self._pending_env_state)
            self._pending_env_state = None
        if cfg.cuda_graphs:
            if self.device.type != "cuda":
                raise ValueError("algo.cuda_graphs=true needs a CUDA device: set run.device=cuda")
            self._rollout_forward = _GraphedForward(self.model_or_fail(), self.obs)
        else:
            self._rollout_forward = self._forward

    def model_or_fail(self) -> nn.Module:
        if self.model is None:
            raise RuntimeError("the PPO model is not built yet: train, evaluate or load first")
        return self.model

    # -- acting ------------------------------------------------------------------

    def act(self, obs: torch.Tensor, *, greedy: bool = True) -> torch.Tensor:
        """Actions int64 ``[N]``: argmax of the policy, or a sample from it."""
        model = self.model_or_fail()
        with torch.no_grad():
            logits, _ = (self._forward if self._forward is not None else model)(obs.to(self.device))
        if greedy:
            return logits.argmax(-1)
        return losses.sample_categorical(logits, self.generator)

    # -- training ----------------------------------------------------------------

    def train(self) -> None:
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
            record = self._record(time.perf_counter() - started)
            self.ctx.record(record)
            if cfg.eval_every and self.updates % cfg.eval_every == 0:
                summary = self.evaluate(cfg.eval_episodes, greedy=cfg.eval_greedy)
                self.ctx.record_eval(
                    {"step": self.env_steps, "env_steps": self.env_steps,
                     "updates": self.updates, **summary}
                )
            if cfg.checkpoint_every and self.updates % cfg.checkpoint_every == 0:
                self.ctx.checkpoint(self.state_dict(), step=self.env_steps)
        # Keep the final policy too (budget reached or stop requested between checkpoints).
        if cfg.checkpoint_every and self.updates and self.updates % cfg.checkpoint_every:
            self.ctx.checkpoint(self.state_dict(), step=self.env_steps)

    def _optimizer(self) -> torch.optim.Adam:
        if self.optimizer is None:
            raise RuntimeError("the PPO optimiser is not built yet")
        return self.optimizer

    def _collect(self) -> None:
        """Fill the rollout buffer: no host reads in here."""
        env, buf, acc = self.env, self.buffer, self.metrics
        assert env is not None and buf is not None and acc is not None and self.obs is not None
        forward = self._rollout_forward
        assert forward is not None
        obs = self.obs
        buf.truncated.start()
        for t in range(self.cfg.rollout_steps):
            with torch.no_grad():
                logits, value = forward(obs)
                action = losses.sample_categorical(logits, self.generator)
                buf.logprobs[t] = losses.categorical_logprob(logits, action)
            buf.obs[t].copy_(obs)
            buf.actions[t] = action
            buf.values[t] = value
            obs, reward, done, trunc, info = env.step(action)
            buf.rewards[t] = reward
            buf.dones[t] = done
            buf.truncs[t] = trunc
            final_obs = info.get("final_obs")
            if final_obs is not None:
                buf.truncated.add(t, trunc, final_obs)
            dist = info.get("dist")
            acc.add_step(
                reward,
                done,
                trunc,
                reset_mask=info.get("reset_mask"),
                success=done,
                actions=action,
                dist=dist if isinstance(dist, torch.Tensor) else None,
            )
            if "dist_p50" in info and not isinstance(dist, torch.Tensor):
                acc.add_scalars(dist_p50=info["dist_p50"])
        self.obs = obs
        self.env_steps += self.cfg.batch_size

    def _bootstrap(self) -> torch.Tensor:
        """Values of the truncated states, then of the observation after the rollout."""
        buf = self.buffer
        assert buf is not None and self.obs is not None and self.model is not None
        forward = self._forward if self._forward is not None else self.model
        with torch.no_grad():
            # Default for truncations without final_obs (or beyond the side buffer):
            # the value of the state one step before the cut.
            buf.trunc_values.copy_(buf.values)
            side = buf.truncated
            chunk = self.cfg.minibatch_size
            for start in range(0, side.capacity, chunk):
                stop = min(start + chunk, side.capacity)
                _, v = forward(side.obs[start:stop])
                pos = side.positions[start:stop]
                # Unused slots point at the spare element past the end.
                buf.trunc_values_flat.scatter_(0, pos, v.float())
            _, next_value = forward(self.obs)
        return next_value.float()

    def _update(self) -> None:
        """Optimise on the collected rollout, then the guard's one host read."""
        guard, batch_stats = self._optimise()
        guard.check(batch_stats, step=self.env_steps)

    def _optimise(self) -> tuple[FiniteGuard, Callable[[], dict[str, Any]]]:
        """All device work of an update (no host reads); returns the pending guard."""
        cfg = self.cfg
        buf, acc, model = self.buffer, self.metrics, self.model
        assert buf is not None and acc is not None and model is not None
        forward = self._forward if self._forward is not None else model
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
                optimizer.zero_grad(set_to_none=False)
                loss.backward()
                guard.watch("loss_policy", pol.loss)
                guard.watch("loss_value", v_loss)
                guard.watch("loss_entropy", ent)
                if cfg.max_grad_norm > 0:
                    grad_norm = nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
                    guard.watch("grad_norm", grad_norm)
                else:
                    grad_norm = guard.watch_grads("grad_norm", params)
                optimizer.step()
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
        record["ups"] = 1.0 / max(seconds, 1e-9)
        record["sps"] = self.cfg.batch_size / max(seconds, 1e-9)
        return record

    # -- evaluation --------------------------------------------------------------

    def evaluate(self, episodes: int, *, greedy: bool = True) -> dict[str, Any]:
        """Greedy or sampled episodes on fresh eval envs, beside a random-policy baseline."""
        # One episode per eval env and round; rounds repeat beyond 1024 episodes.
        num = min(int(episodes), 1024)
        env = self.ctx.make_env(num, seed_offset=EVAL_SEED_OFFSET)
        try:
            self._setup_model(tuple(int(d) for d in env.obs_shape), env.num_actions)
            model = self.model_or_fail()
            was_training = model.training
            model.eval()
            try:
                # A separate generator keeps training's sampling stream untouched by evaluation.
                eval_gen = torch.Generator(device=self.device)
                eval_gen.manual_seed(int(self.ctx.seed) + EVAL_SEED_OFFSET)
                forward = self._forward if self._forward is not None else model

                def policy(obs: torch.Tensor) -> torch.Tensor:
                    logits, _ = forward(obs)
                    if greedy:
                        return logits.argmax(-1)
                    return losses.sample_categorical(logits, eval_gen)

                # Eval envs are seeded identically every time, so the random
                # baseline for a given episode count is computed once per run.
                cached = self._baselines.get(int(episodes))
                summary = evaluate_policy(
                    env, policy, int(episodes), greedy=greedy, baseline=cached is None,
                    seed=int(self.ctx.seed) + EVAL_SEED_OFFSET,
                )
                if cached is None:
                    cached = {k: v for k, v in summary.items() if k.startswith("random_")}
                    self._baselines[int(episodes)] = cached
                summary.update(cached)
                return summary
            finally:
                model.train(was_training)
        finally:
            env.close()

    # -- state ---------------------------------------------------------------------

    def _env_state(self) -> dict[str, Any] | None:
        state = env_batch_state(self.env, self.obs, self.metrics)
        if state is not None and self.discounted is not None:
            state["discounted"] = self.discounted.clone()
        return state

    def _restore_env(self, state: Mapping[str, Any]) -> None:
        obs = restore_env_batch(self.env, state, self.metrics, self.device, algo="ppo")
        if obs is not None:
            self.obs = obs
        if "discounted" in state:
            self.discounted = state["discounted"].to(self.device)

    def state_dict(self) -> dict[str, Any]:
        model = self.model_or_fail()
        return {
            "algo": "ppo",
            "config": attrs.asdict(self.cfg),
            "spec": {"obs_shape": list(self._spec[0]), "num_actions": self._spec[1]}
            if self._spec
            else None,
            "model": model.state_dict(),
            "optimizer": self._optimizer().state_dict(),
            "counters": {
                "env_steps": self.env_steps,
                "updates": self.updates,
                "opt_steps": self.opt_steps,
            },
            "reward_stats": self.reward_stats.state_dict(),
            "rng": capture_rng_state(self.generator),
            "env": self._env_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        spec = state.get("spec")
        if spec is None:
            raise ValueError("PPO checkpoint has no model spec: it was saved before training began")
        self._setup_model(tuple(spec["obs_shape"]), int(spec["num_actions"]))
        self.model_or_fail().load_state_dict(state["model"])
        self._optimizer().load_state_dict(state["optimizer"])
        counters = state["counters"]
        self.env_steps = int(counters["env_steps"])
        self.updates = int(counters["updates"])
        self.opt_steps = int(counters["opt_steps"])
        self.reward_stats.load_state_dict(state["reward_stats"])
        restore_rng_state(state["rng"], self.generator)
        env_state = state.get("env")
        if env_state is not None:
            if self.env is not None:
                self._restore_env(env_state)
            else:
                self._pending_env_state = env_state

