"""The trainer shell the on-policy algorithms (PPO, A2C) share.

:class:`OnPolicyTrainer` does everything around an algorithm's update: seeding, the
model and optimiser, the memory check, collecting steps into a
:class:`gbx_toolkit.rl_common.StepWindow` without host reads, bootstrapping truncated episodes,
``evaluate`` and the checkpoint state (the run calls both on its schedule). A subclass
implements its update.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, cast

import attrs
import torch
from torch import nn

from gbx.api import Env, EpisodeProgressEnv, RunContext, WindowMetrics
from gbx.errors import ConfigError
from gbx.memory import check_memory
from gbx.seeds import Stream, derive
from gbx_toolkit.evaluation import (
    eval_batch_size,
    eval_generator,
    eval_seed,
    evaluate_policy,
    make_eval_env,
)
from gbx_toolkit.metrics import MetricsAccumulator
from gbx_toolkit.models import build_model
from gbx_toolkit.rl_common import (
    StepWindow,
    add_env_step,
    capture_rng_state,
    categorical_logprob,
    check_step_budget,
    env_batch_state,
    restore_env_batch,
    restore_rng_state,
    sample_categorical,
    seed_everything,
)

__all__ = ["OnPolicyTrainer"]

# ---------------------------------------------------------------------------
# The on-policy trainer shell
# ---------------------------------------------------------------------------

Forward = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class OnPolicyTrainer:
    """What PPO and A2C share around their updates (a :class:`gbx.api.Trainer` base).

    A subclass sets :attr:`algo` (the name in messages and checkpoints) and
    :attr:`distance_keys` (the per-step distance statistics an env may report in
    ``info`` that the records average), and implements
    :meth:`_build_optimizer`. Its config needs ``model``, ``model_options``,
    ``total_env_steps`` and ``batch_size``. ``_collect`` fills
    :attr:`storage` (a :class:`StepWindow`) without host reads;
    ``_bootstrap_values`` computes the values of truncated states and of
    the observation after the window.
    """

    algo: ClassVar[str] = "on-policy"
    distance_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: Any, ctx: RunContext) -> None:
        self.cfg = config
        self.ctx = ctx
        self.device = torch.device(ctx.device)
        self.generator = seed_everything(derive(ctx.seed, Stream.TRAIN_RNG), self.device)
        self.env_steps = 0
        self.opt_steps = 0
        self.model: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.env: Env | None = None
        self.obs: torch.Tensor | None = None
        self.storage: StepWindow | None = None
        self.metrics: MetricsAccumulator | None = None
        self._forward: Forward | None = None
        self._spec: tuple[tuple[int, ...], int] | None = None
        self._pending_env_state: Mapping[str, Any] | None = None
        self._baselines: dict[int, dict[str, Any]] = {}
        self._milestone_env: EpisodeProgressEnv | None = None

    def failure_context(self, env_index: int = 0) -> dict[str, Any]:
        """The last rollout of one env for failure bundles: frames ``[T, H, W]`` (newest
        stacked frame of each step) and the actions taken, copied to the host."""
        buf = self.storage
        if buf is None:
            return {}
        context: dict[str, Any] = {"actions": buf.actions[:, env_index].detach().cpu()}
        if buf.obs.dim() == 5:  # [T, N, K, H, W] pixel observations
            context["frames"] = buf.obs[:, env_index, -1].detach().cpu()
        return context

    # -- model -------------------------------------------------------------------

    def _build_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        raise NotImplementedError

    def _wrap_forward(self, model: nn.Module) -> Forward:
        """The callable that runs the model (a subclass may compile it)."""
        return model

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
        self.optimizer = self._build_optimizer(self.model)
        self._forward = self._wrap_forward(self.model)
        return self.model

    def model_or_fail(self) -> nn.Module:
        if self.model is None:
            raise RuntimeError(
                f"the {self.algo.upper()} model is not built yet: train, evaluate or load first"
            )
        return self.model

    def _optimizer(self) -> torch.optim.Optimizer:
        if self.optimizer is None:
            raise RuntimeError(f"the {self.algo.upper()} optimiser is not built yet")
        return self.optimizer

    def forward_fn(self) -> Forward:
        """The model's forward pass (compiled when the subclass wraps it)."""
        return self._forward if self._forward is not None else self.model_or_fail()

    def _total_env_steps(self) -> int:
        if self.cfg.total_env_steps:
            return int(self.cfg.total_env_steps)
        return int(self.ctx.config.run.steps)

    def _check_budget(self, per_update: int, unit: str) -> None:
        """Refuse a budget below one update (``per_update`` env steps), before allocating."""
        check_step_budget(self._total_env_steps(), per_update, algo=self.algo, unit=unit,
                          from_algo_config=bool(self.cfg.total_env_steps))

    # -- setup -------------------------------------------------------------------

    def _setup_env(self, num_envs: int) -> tuple[Env, tuple[int, ...], nn.Module]:
        """Make the training envs and the model that fits them."""
        env = self.ctx.make_env(num_envs, training=True)
        self.env = env
        obs_shape = tuple(int(d) for d in env.obs_shape)
        return env, obs_shape, self._setup_model(obs_shape, env.num_actions)

    def _track_milestones(self, env: Env, setting: str) -> None:
        """Have :meth:`_collect_with` fill the storage's ``before_milestones`` from the
        env's :class:`gbx.api.EpisodeProgressEnv`; an env without milestones is a one-line
        error naming ``setting`` (what needs them)."""
        progress = env.episode_progress() if isinstance(env, EpisodeProgressEnv) else None
        if progress is None:
            raise ConfigError(
                f"{setting} needs an env with milestones (gbx.api.EpisodeProgressEnv, e.g. a "
                "Game Boy goal env with env.milestone_dirs) and this env has none: name the "
                f"screens on the way in env.milestone_dirs, or set {setting}=0")
        self._milestone_env = cast(EpisodeProgressEnv, env)

    def _check_memory(self, required: int, *, fix: str, describe: str) -> None:
        """Refuse a run that will not fit; print one line on what it allocates."""
        line = check_memory(required, self.device, algo=self.algo, fix=fix)
        print(f"{self.algo}: {describe}; {line}", file=sys.stderr, flush=True)

    def _start_storage(self, storage: StepWindow, env: Env) -> None:
        """Adopt ``storage``, reset the envs and apply a pending resumed env state."""
        self.storage = storage
        self.metrics = MetricsAccumulator(storage.num_envs, env.num_actions, self.device)
        if isinstance(env, WindowMetrics):  # e.g. an explorer's archive statistics
            self.metrics.add_source(env.window_metrics)
        self.obs = env.reset()
        if self._pending_env_state is not None:
            self._restore_env(self._pending_env_state)
            self._pending_env_state = None

    # -- acting ------------------------------------------------------------------

    def act(self, obs: torch.Tensor, *, greedy: bool = True) -> torch.Tensor:
        """Actions int64 ``[N]``: argmax of the policy, or a sample from it."""
        forward = self.forward_fn()
        with torch.no_grad():
            logits, _ = forward(obs.to(self.device))
        if greedy:
            return logits.argmax(-1)
        return sample_categorical(logits, self.generator)

    def _collect_with(self, forward: Forward) -> None:
        """Step every env ``storage.steps`` times into the storage: no host reads in here."""
        env, buf, acc = self.env, self.storage, self.metrics
        assert env is not None and buf is not None and acc is not None and self.obs is not None
        obs = self.obs
        buf.truncated.start()
        # The milestones the acting episodes have passed (gbx.api.EpisodeProgressEnv; the
        # subclass that asked for the column checked the env has them).
        before_all, progress = buf.before_milestones, self._milestone_env
        for t in range(buf.steps):
            with torch.no_grad():
                logits, value = forward(obs)
                action = sample_categorical(logits, self.generator)
                if buf.logprobs is not None:
                    buf.logprobs[t] = categorical_logprob(logits, action)
            buf.obs[t].copy_(obs)
            passed = progress.episode_progress() if progress is not None else None
            if before_all is not None and passed is not None:
                before = before_all[t]
                torch.all(passed, dim=0, out=before)
                before.logical_not_()
            buf.actions[t] = action
            buf.values[t] = value
            obs, reward, done, trunc, info = env.step(action)
            buf.rewards[t] = reward
            buf.dones[t] = done
            buf.truncs[t] = trunc
            final_obs = info.get("final_obs")
            if final_obs is not None:
                buf.truncated.add(t, trunc, final_obs)
            add_env_step(acc, action, reward, done, trunc, info, self.distance_keys)
        self.obs = obs
        self.env_steps += buf.steps * buf.num_envs

    def _bootstrap_values(self, chunk: int) -> torch.Tensor:
        """Values of the truncated states (into the storage), then of the next observation.

        Side-buffer observations are evaluated ``chunk`` at a time.
        """
        buf = self.storage
        assert buf is not None and self.obs is not None
        forward = self.forward_fn()
        side = buf.truncated
        with torch.no_grad():
            # Default for truncations without final_obs (or beyond the side buffer):
            # the value of the state one step before the cut.
            buf.trunc_values.copy_(buf.values)
            for start in range(0, side.capacity, chunk):
                stop = min(start + chunk, side.capacity)
                _, v = forward(side.obs[start:stop])
                # Unused slots point at the spare element past the end.
                buf.trunc_values_flat.scatter_(0, side.positions[start:stop], v.float())
            _, next_value = forward(self.obs)
        return next_value.float()

    # -- evaluation --------------------------------------------------------------

    def evaluate(
        self, episodes: int, *, greedy: bool = True, baseline: bool = True
    ) -> dict[str, Any]:
        """Greedy or sampled episodes on fresh eval envs, beside a random-policy baseline
        (``baseline=False`` leaves it out unless this run has already computed it)."""
        env = make_eval_env(self.ctx, eval_batch_size(episodes))
        try:
            self._setup_model(tuple(int(d) for d in env.obs_shape), env.num_actions)
            model = self.model_or_fail()
            was_training = model.training
            model.eval()
            try:
                # A separate generator keeps training's sampling stream untouched by evaluation.
                eval_gen = eval_generator(self.ctx, self.device)
                forward = self.forward_fn()

                def policy(obs: torch.Tensor) -> torch.Tensor:
                    logits, _ = forward(obs)
                    if greedy:
                        return logits.argmax(-1)
                    return sample_categorical(logits, eval_gen)

                # Eval envs are seeded identically every time, so the random
                # baseline for a given episode count is computed once per run.
                cached = self._baselines.get(int(episodes))
                summary = evaluate_policy(
                    env, policy, int(episodes), greedy=greedy,
                    baseline=baseline and cached is None,
                    seed=eval_seed(self.ctx),
                )
                if cached is None and baseline:
                    cached = {k: v for k, v in summary.items() if k.startswith("random_")}
                    self._baselines[int(episodes)] = cached
                summary.update(cached or {})
                return summary
            finally:
                model.train(was_training)
        finally:
            env.close()

    # -- state ---------------------------------------------------------------------

    def _env_state(self) -> dict[str, Any] | None:
        return env_batch_state(self.env, self.obs, self.metrics)

    def _restore_env(self, state: Mapping[str, Any]) -> None:
        obs = restore_env_batch(self.env, state, self.metrics, self.device, algo=self.algo)
        if obs is not None:
            self.obs = obs

    def _counters(self) -> dict[str, int]:
        return {"env_steps": self.env_steps, "opt_steps": self.opt_steps}

    def _load_counters(self, counters: Mapping[str, Any]) -> None:
        self.env_steps = int(counters["env_steps"])
        self.opt_steps = int(counters["opt_steps"])

    def state_dict(self) -> dict[str, Any]:
        """Model, optimiser, counters, RNG streams and the live env batch."""
        model = self.model_or_fail()
        return {
            "algo": self.algo,
            "config": attrs.asdict(self.cfg),
            "spec": {"obs_shape": list(self._spec[0]), "num_actions": self._spec[1]}
            if self._spec
            else None,
            "model": model.state_dict(),
            "optimizer": self._optimizer().state_dict(),
            "counters": self._counters(),
            "rng": capture_rng_state(self.generator),
            "env": self._env_state(),
        }

    def init_weights(self, state: Mapping[str, Any], source: str) -> None:
        """:class:`gbx.api.WeightInit`: the model weights of another run's checkpoint state
        (same algorithm and model config; the env must give the same observation shape and
        actions). Optimiser, counters, random streams and envs stay fresh."""
        if state.get("algo") != self.algo:
            raise ValueError(f"{source} holds a {state.get('algo')} state, not {self.algo}")
        spec = state.get("spec")
        if spec is None:
            raise ValueError(f"{source} was saved before training began (no model spec)")
        theirs = {k: state.get("config", {}).get(k) for k in ("model", "model_options")}
        ours = {"model": self.cfg.model, "model_options": dict(self.cfg.model_options)}
        if theirs != ours:
            raise ValueError(f"its model is {theirs}, this run builds {ours}: set "
                             "algo.model / algo.model_options as in that run")
        self._setup_model(tuple(spec["obs_shape"]), int(spec["num_actions"]))
        self.model_or_fail().load_state_dict(state["model"])

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        spec = state.get("spec")
        if spec is None:
            raise ValueError(
                f"{self.algo.upper()} checkpoint has no model spec: "
                "it was saved before training began"
            )
        self._setup_model(tuple(spec["obs_shape"]), int(spec["num_actions"]))
        self.model_or_fail().load_state_dict(state["model"])
        self._optimizer().load_state_dict(state["optimizer"])
        self._load_counters(state["counters"])
        restore_rng_state(state["rng"], self.generator)
        env_state = state.get("env")
        if env_state is not None:
            if self.env is not None:
                self._restore_env(env_state)
            else:
                self._pending_env_state = env_state
