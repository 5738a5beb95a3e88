"""The A2C trainer: step a short window on the device, take one optimiser step, repeat.

The imperative shell around :mod:`gbx_algo_a2c.returns`. Hot-path rules:
neither the window's env steps nor the optimiser step read the device from
the host. Every ``log_every`` optimiser steps one record is emitted with a
single host read (the metrics accumulator's summary, which also carries a
"something was not finite" flag); only when that flag is set does the
non-finite guard spend more reads to describe the failure and stop the run.
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
from gbx.models import build_model
from gbx.rl_common import (
    activation_bytes,
    capture_rng_state,
    check_memory,
    compute_gae,
    env_batch_state,
    explained_variance,
    format_bytes,
    model_bytes,
    restore_env_batch,
    restore_rng_state,
    sample_categorical,
)
from gbx_algo_a2c import returns as rl
from gbx_algo_a2c.config import A2CConfig
from gbx_algo_a2c.window import Window, estimate_window_bytes

# Eval envs are seeded apart from the training envs.
EVAL_SEED_OFFSET = 1_000_003
# Per-step distance percentiles an env may report instead of per-env distances.
DIST_PERCENTILES = ("dist_p10", "dist_p50", "dist_p90")
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


class A2CTrainer:
    """A2C bound to one run (implements :class:`gbx.api.Trainer`)."""

    def __init__(self, config: A2CConfig, ctx: RunContext) -> None:
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
        self.opt_steps = 0
        self.model: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.env: Env | None = None
        self.obs: torch.Tensor | None = None
        self.window: Window | None = None
        self.metrics: MetricsAccumulator | None = None
        self.guard: FiniteGuard | None = None
        self._batch_stats: Callable[[], dict[str, Any]] | None = None
        self._unrecorded = 0  # optimiser steps since the last record
        self._record_started = time.perf_counter()
        self._record_env_steps = 0
        self._spec: tuple[tuple[int, ...], int] | None = None
        self._pending_env_state: Mapping[str, Any] | None = None

    # -- setup -------------------------------------------------------------------

    def _setup_model(self, obs_shape: tuple[int, ...], num_actions: int) -> nn.Module:
        if self.model is not None:
            if self._spec != (obs_shape, num_actions):
                raise ValueError(
                    f"env gives obs {obs_shape} with {num_actions} actions but the model was "
                    f"built for {self._spec}: use the env config the checkpoint was trained on"
                )
            return self.model
        cfg = self.cfg
        self._spec = (tuple(obs_shape), int(num_actions))
        model = build_model(cfg.model, obs_shape, num_actions, **cfg.model_options)
        self.model = model.to(self.device)
        params = self.model.parameters()
        if cfg.optimizer == "adam":
            self.optimizer = torch.optim.Adam(params, lr=cfg.lr, eps=cfg.eps)
        else:
            self.optimizer = torch.optim.RMSprop(params, lr=cfg.lr, alpha=cfg.alpha, eps=cfg.eps)
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
        line = check_memory(
            required_bytes(cfg, model, obs_shape), self.device, algo="a2c",
            fix="the window will not fit; lower algo.num_envs or algo.update_every, "
                "or raise algo.grad_accum",
        )
        window_bytes = estimate_window_bytes(cfg.update_every, cfg.num_envs, obs_shape)
        print(
            f"a2c: {cfg.num_envs} envs x {cfg.update_every} steps per update, obs {obs_shape}; "
            f"window {format_bytes(window_bytes)}; {line}",
            file=sys.stderr,
            flush=True,
        )
        self.window = Window(cfg.update_every, cfg.num_envs, obs_shape, self.device)
        self.metrics = MetricsAccumulator(cfg.num_envs, env.num_actions, self.device)
        self.guard = FiniteGuard(self.device)
        self.obs = env.reset()
        if self._pending_env_state is not None:
            self._restore_env(self._pending_env_state)
            self._pending_env_state = None

    def model_or_fail(self) -> nn.Module:
        if self.model is None:
            raise RuntimeError("the A2C model is not built yet: train, evaluate or load first")
        return self.model

    def _optimizer(self) -> torch.optim.Optimizer:
        if self.optimizer is None:
            raise RuntimeError("the A2C optimiser is not built yet")
        return self.optimizer

    # -- acting ------------------------------------------------------------------

    def act(self, obs: torch.Tensor, *, greedy: bool = True) -> torch.Tensor:
        """Actions int64 ``[N]``: argmax of the policy, or a sample from it."""
        model = self.model_or_fail()
        with torch.no_grad():
            logits, _ = model(obs.to(self.device))
        if greedy:
            return logits.argmax(-1)
        return sample_categorical(logits, self.generator)

    # -- training ----------------------------------------------------------------

    def train(self) -> None:
        if self.env is None:
            self._setup_training()
        cfg = self.cfg
        total = self._total_env_steps()
        self._start_record_window()
        while self.env_steps + cfg.batch_size <= total and not self.ctx.should_stop():
            self._collect()
            self._optimise()
            # Records fall on multiples of log_every even after resuming from a run that
            # stopped between two, so evaluations and checkpoints stay on their schedule.
            if self.opt_steps % cfg.log_every == 0:
                self._emit_record()
                if cfg.eval_every and self.opt_steps % cfg.eval_every == 0:
                    self._periodic_eval()
                if cfg.checkpoint_every and self.opt_steps % cfg.checkpoint_every == 0:
                    self.ctx.checkpoint(self.state_dict(), step=self.env_steps)
                self._start_record_window()
        if self._unrecorded:  # the budget ended inside a logging window
            self._emit_record()

    def _start_record_window(self) -> None:
        self._record_started = time.perf_counter()
        self._record_env_steps = self.env_steps

    def _collect(self) -> None:
        """Step every env ``update_every`` times into the window: no host reads in here."""
        env, win, acc, model = self.env, self.window, self.metrics, self.model
        assert env is not None and win is not None and acc is not None and model is not None
        assert self.obs is not None
        obs = self.obs
        win.truncated.start()
        for t in range(win.steps):
            with torch.no_grad():
                logits, value = model(obs)
                action = sample_categorical(logits, self.generator)
            win.obs[t].copy_(obs)
            win.actions[t] = action
            win.values[t] = value
            obs, reward, done, trunc, info = env.step(action)
            win.rewards[t] = reward
            win.dones[t] = done
            win.truncs[t] = trunc
            final_obs = info.get("final_obs")
            if final_obs is not None:
                win.truncated.add(t, trunc, final_obs)
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
            if not isinstance(dist, torch.Tensor):
                # Envs that report only percentiles: the record gets their window means.
                stats = {k: info[k] for k in DIST_PERCENTILES if k in info}
                if stats:
                    acc.add_scalars(**stats)
        self.obs = obs
        self.env_steps += self.cfg.batch_size

    def _bootstrap(self) -> torch.Tensor:
        """Values of the truncated states (into the window), then of the next observation."""
        win, model = self.window, self.model
        assert win is not None and model is not None and self.obs is not None
        side = win.truncated
        with torch.no_grad():
            # Default for truncations without final_obs (or beyond the side buffer):
            # the value of the state one step before the cut.
            win.trunc_values.copy_(win.values)
            chunk = max(self.cfg.chunk_size, 1)
            for start in range(0, side.capacity, chunk):
                stop = min(start + chunk, side.capacity)
                _, v = model(side.obs[start:stop])
                # Unused slots point at the spare element past the end.
                win.trunc_values_flat.scatter_(0, side.positions[start:stop], v.float())
            _, next_value = model(self.obs)
        return next_value.float()

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
        guard.watch("loss_policy", policy_loss)
        guard.watch("loss_value", value_loss)
        guard.watch("loss_entropy", entropy)
        if cfg.max_grad_norm > 0:
            grad_norm = nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            guard.watch("grad_norm", grad_norm)
        else:
            grad_norm = guard.watch_grads("grad_norm", params)
        optimizer.step()
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
        record["sps"] = (self.env_steps - self._record_env_steps) / seconds
        record["ups"] = self._unrecorded / seconds
        self._unrecorded = 0
        self.ctx.record(record)

    def _periodic_eval(self) -> None:
        cfg = self.cfg
        summary = self.evaluate(cfg.eval_episodes, greedy=cfg.eval_greedy)
        self.ctx.record_eval(
            {"step": self.env_steps, "env_steps": self.env_steps, "opt_steps": self.opt_steps,
             **summary}
        )

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
                # A separate generator keeps training's sampling stream untouched.
                eval_gen = torch.Generator(device=self.device)
                eval_gen.manual_seed(int(self.ctx.seed) + EVAL_SEED_OFFSET)

                def policy(obs: torch.Tensor) -> torch.Tensor:
                    logits, _ = model(obs)
                    if greedy:
                        return logits.argmax(-1)
                    return sample_categorical(logits, eval_gen)

                return evaluate_policy(
                    env, policy, int(episodes), greedy=greedy,
                    seed=int(self.ctx.seed) + EVAL_SEED_OFFSET,
                )
            finally:
                model.train(was_training)
        finally:
            env.close()

    # -- state ---------------------------------------------------------------------

    def _restore_env(self, state: Mapping[str, Any]) -> None:
        obs = restore_env_batch(self.env, state, self.metrics, self.device, algo="a2c")
        if obs is not None:
            self.obs = obs

    def state_dict(self) -> dict[str, Any]:
        """Everything to resume exactly; taken at record boundaries (empty metrics window)."""
        model = self.model_or_fail()
        return {
            "algo": "a2c",
            "config": attrs.asdict(self.cfg),
            "spec": {"obs_shape": list(self._spec[0]), "num_actions": self._spec[1]}
            if self._spec
            else None,
            "model": model.state_dict(),
            "optimizer": self._optimizer().state_dict(),
            "counters": {"env_steps": self.env_steps, "opt_steps": self.opt_steps},
            "rng": capture_rng_state(self.generator),
            "env": env_batch_state(self.env, self.obs, self.metrics),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        spec = state.get("spec")
        if spec is None:
            raise ValueError("A2C checkpoint has no model spec: it was saved before training began")
        self._setup_model(tuple(spec["obs_shape"]), int(spec["num_actions"]))
        self.model_or_fail().load_state_dict(state["model"])
        self._optimizer().load_state_dict(state["optimizer"])
        counters = state["counters"]
        self.env_steps = int(counters["env_steps"])
        self.opt_steps = int(counters["opt_steps"])
        restore_rng_state(state["rng"], self.generator)
        env_state = state.get("env")
        if env_state is not None:
            if self.env is not None:
                self._restore_env(env_state)
            else:
                self._pending_env_state = env_state
