"""Helpers shared by the trainers (PPO and A2C; DreamerV3 too for RNG, env batch and step
metrics): one canonical copy of each.

* RNG state capture/restore, so a resumed run samples exactly what an
  uninterrupted one would have;
* the memory a model needs (parameters, optimiser moments, activations);
* categorical policy math that never reads the device from the host
  (log-probabilities, Gumbel-max sampling, explained variance, GAE);
* a side buffer that compacts the final observations of truncated envs on
  the device, so bootstrapping from ``info["final_obs"]`` needs no host sync;
* :func:`add_env_step`, how a trainer folds each env step into its metrics;
* saving and restoring the live env batch (observation, env state, the
  metrics accumulator's per-env episode sums) inside a checkpoint;
* :class:`StepWindow`, the preallocated ``[T, N]`` storage of on-policy
  steps (the trainer shell both algorithms share is :mod:`gbx_toolkit.on_policy`).

Everything tensor-valued here is a pure function of its inputs or works on
preallocated buffers; nothing reads back to the host except the memory check
and the restore paths, which run outside the hot loop.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import torch
from torch import nn

from gbx.api import StatefulEnv
from gbx.config import in_range
from gbx.errors import GbxError
from gbx_toolkit.metrics import MetricsAccumulator

__all__ = [
    "StepWindow",
    "TruncatedObsBuffer",
    "activation_bytes",
    "add_env_step",
    "capture_rng_state",
    "categorical_logprob",
    "check_step_budget",
    "compute_gae",
    "env_batch_state",
    "explained_variance",
    "field_help",
    "guarded_step",
    "model_bytes",
    "normalize_advantages",
    "restore_env_batch",
    "restore_rng_state",
    "sample_categorical",
    "seed_everything",
    "trunc_capacity",
    "window_bytes",
]

# ---------------------------------------------------------------------------
# Config fields both on-policy algorithms have
# ---------------------------------------------------------------------------


# attrs validators of the common fields (gbx.config.Range: finite and within bounds)
unit_interval = in_range(0.0, 1.0)
unit_interval_or_none = in_range(0.0, 1.0, optional=True)
positive_or_none = in_range(0.0, lo_open=True, optional=True)


def field_help(text: str) -> dict[str, str]:
    """attrs field metadata carrying the ``help`` text ``gbx config --explain`` shows."""
    return {"help": text}


def _field(default: Any, help: str, validator: Any = None) -> Any:
    return attrs.field(default=default, validator=validator, metadata=field_help(help))


def budget_field() -> Any:
    """``total_env_steps``: the training budget, 0 meaning the run's ``--steps``."""
    return _field(
        0, "training budget in env steps over all envs; 0 = the run's --steps",
        attrs.validators.ge(0),
    )


def ent_coef_field() -> Any:
    return _field(0.01, "entropy bonus coefficient", attrs.validators.ge(0.0))


def vf_coef_field() -> Any:
    return _field(0.5, "value loss coefficient", attrs.validators.ge(0.0))


def max_grad_norm_field() -> Any:
    return _field(0.5, "global gradient norm clip; 0 = off", attrs.validators.ge(0.0))


def model_field() -> Any:
    return _field("cnn", "registered model name (cnn, impala)", attrs.validators.min_len(1))


def model_options_field() -> Any:
    return attrs.field(
        factory=dict,
        metadata=field_help("keyword options of the model builder, e.g. {hidden: 256}"),
    )


# ---------------------------------------------------------------------------
# Random number generators
# ---------------------------------------------------------------------------


def seed_everything(seed: int, device: torch.device) -> torch.Generator:
    """Seed the global python/numpy/torch RNGs; return a seeded sampling generator on ``device``."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


def capture_rng_state(generator: torch.Generator) -> dict[str, Any]:
    """Global torch/numpy/python RNG states plus the trainer's own sampling ``generator``."""
    state: dict[str, Any] = {
        "torch_cpu": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
        "sampler": generator.get_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["torch_cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: Mapping[str, Any], generator: torch.Generator) -> None:
    """Inverse of :func:`capture_rng_state`."""
    torch.set_rng_state(state["torch_cpu"])
    # A checkpoint stores numpy's key array as a tensor (gbx.checkpoint_file).
    name, keys, *rest = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), *rest))
    random.setstate(state["python"])
    generator.set_state(state["sampler"])
    if "torch_cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["torch_cuda"])


# ---------------------------------------------------------------------------
# Step budget
# ---------------------------------------------------------------------------


def check_step_budget(
    total: int, minimum: int, *, algo: str, unit: str, from_algo_config: bool = False
) -> None:
    """Refuse a training budget of ``total`` env steps below ``minimum`` (one update).

    Such a run would train nothing and still end "completed". ``unit`` says what one
    update takes, e.g. ``"algo.num_envs x algo.rollout_steps"``; ``from_algo_config``
    names ``algo.total_env_steps`` instead of ``--steps`` as the setting to raise.
    """
    if total >= minimum:
        return
    setting = "algo.total_env_steps" if from_algo_config else "--steps"
    raise GbxError(
        f"{setting} {total} is less than one {algo} update ({minimum} env steps: {unit}); "
        f"pass {setting} {minimum} or more"
    )


# ---------------------------------------------------------------------------
# Memory budget of models
# ---------------------------------------------------------------------------


def model_bytes(model: nn.Module) -> int:
    """Parameters, gradients and an optimiser's two moments per parameter."""
    return 4 * sum(p.numel() * p.element_size() for p in model.parameters())


def activation_bytes(model: nn.Module, obs_shape: tuple[int, ...], batch: int) -> int:
    """Forward activations of a ``batch`` (kept for backward), measured on one sample."""
    total = 0

    def count(_m: nn.Module, _i: Any, out: Any) -> None:
        nonlocal total
        for t in out if isinstance(out, tuple) else (out,):
            if isinstance(t, torch.Tensor):
                total += t.numel() * 4

    device = next(model.parameters()).device
    handles = [m.register_forward_hook(count) for m in model.modules() if not list(m.children())]
    try:
        with torch.no_grad():
            model(torch.zeros((1, *obs_shape), dtype=torch.uint8, device=device))
    finally:
        for h in handles:
            h.remove()
    # Inputs as float, activations and their gradients.
    return batch * (2 * total + 4 * math.prod(obs_shape))


# ---------------------------------------------------------------------------
# Categorical policies and returns
# ---------------------------------------------------------------------------


def categorical_logprob(logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """Log-probability of integer ``actions`` ``[...]`` under ``logits`` ``[..., A]``."""
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)


def sample_categorical(logits: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Sample actions by the Gumbel-max trick: no host sync, works under graph capture."""
    u = torch.rand(logits.shape, device=logits.device, generator=generator)
    gumbel = -torch.log(-torch.log(u.clamp_min(1e-20)))
    return (logits.detach() + gumbel).argmax(-1)


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``1 - Var[target - predicted] / Var[target]``; NaN when the target has no variance."""
    var_target = target.float().var(unbiased=False)
    var_residual = (target.float() - predicted.float()).var(unbiased=False)
    nan = torch.full_like(var_target, float("nan"))
    return torch.where(var_target > 0, 1.0 - var_residual / var_target.clamp_min(1e-30), nan)


def guarded_step(
    optimizer: torch.optim.Optimizer,
    params: Sequence[nn.Parameter],
    guard: Any,
    *,
    max_grad_norm: float,
    **losses: torch.Tensor,
) -> torch.Tensor:
    """Watch ``losses`` and the gradient norm with ``guard``, clip, step; return the norm.

    Call after ``backward``. ``guard`` is a :class:`gbx_toolkit.guard.FiniteGuard`; it
    only records device flags here (no host read). ``max_grad_norm`` 0 means
    no clipping (the norm is still measured and watched).
    """
    for name, value in losses.items():
        guard.watch(name, value)
    if max_grad_norm > 0:
        grad_norm = nn.utils.clip_grad_norm_(params, max_grad_norm)
        guard.watch("grad_norm", grad_norm)
    else:
        grad_norm = guard.watch_grads("grad_norm", params)
    optimizer.step()
    return grad_norm


def normalize_advantages(advantages: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Zero mean, unit (population) standard deviation over all elements."""
    return (advantages - advantages.mean()) / (advantages.std(unbiased=False) + eps)


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    truncs: torch.Tensor,
    next_value: torch.Tensor,
    trunc_values: torch.Tensor,
    *,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimates and value targets, ``[T, N]`` each.

    Layout ``[T, N]`` (step, env). ``next_value`` ``[N]`` is the value of the
    observation after the last step. Where ``dones[t]`` the step has no
    successor; where ``truncs[t]`` (and not done) it bootstraps from
    ``trunc_values[t]``, the value of ``info["final_obs"]``. In both cases the
    recursion stops at the episode boundary, since ``obs[t+1]`` already
    belongs to the next episode (auto-reset).
    """
    steps = rewards.shape[0]
    dones_f = dones.to(rewards.dtype)
    truncs = truncs.bool()
    next_values = torch.cat([values[1:], next_value.unsqueeze(0)], dim=0)
    # The truncated state's value replaces the successor's (the next episode's start).
    bootstrap = torch.where(truncs, trunc_values, next_values)
    deltas = rewards + gamma * bootstrap * (1.0 - dones_f) - values
    carry = gamma * gae_lambda * (~(dones.bool() | truncs)).to(rewards.dtype)
    advantages = torch.empty_like(rewards)
    last = torch.zeros_like(next_value)
    for t in range(steps - 1, -1, -1):
        last = deltas[t] + carry[t] * last
        advantages[t] = last
    return advantages, advantages + values


# ---------------------------------------------------------------------------
# Final observations of truncated envs
# ---------------------------------------------------------------------------


def trunc_capacity(num_envs: int, steps: int) -> int:
    """Side-buffer slots for truncated observations per window of ``steps`` env steps.

    Room for one truncation per env every 8 steps (at least one per env);
    truncations beyond it fall back to the value of the state one step
    before the cut and are reported by :meth:`TruncatedObsBuffer.overflow`.
    """
    return num_envs * max(1, math.ceil(steps / 8))


class TruncatedObsBuffer:
    """Compacts ``final_obs`` of truncated envs into preallocated slots, without host syncs.

    Slot ``capacity`` is a sink for rows that are not truncated (or do not
    fit); ``positions`` holds the flat index ``t * num_envs + env`` of each
    stored observation, and ``steps * num_envs`` (one past the end of a
    ``[T, N]`` table) for unused slots, so a scatter into a table with one
    spare element at the end needs no masking.
    """

    def __init__(
        self, steps: int, num_envs: int, obs_shape: Sequence[int], device: torch.device | str
    ) -> None:
        self.steps = steps
        self.num_envs = num_envs
        self.device = torch.device(device)
        cap = trunc_capacity(num_envs, steps)
        self.capacity = cap
        kw: dict[str, Any] = {"device": self.device}
        self.obs = torch.zeros((cap + 1, *obs_shape), dtype=torch.uint8, **kw)
        self.positions = torch.full((cap + 1,), steps * num_envs, dtype=torch.int64, **kw)
        self.count = torch.zeros((), dtype=torch.int64, **kw)
        self._env_index = torch.arange(num_envs, dtype=torch.int64, **kw)
        self._sink = torch.full((num_envs,), cap, dtype=torch.int64, **kw)

    def start(self) -> None:
        """Forget the previous window's truncations."""
        self.positions.fill_(self.steps * self.num_envs)
        self.count.zero_()

    def add(self, t: int, trunc: torch.Tensor, final_obs: torch.Tensor) -> None:
        """Append the final observations of the envs truncated at window step ``t``."""
        trunc = trunc.to(torch.bool)
        rank = self.count + torch.cumsum(trunc.to(torch.int64), 0) - 1
        slot = torch.where(trunc & (rank < self.capacity), rank, self._sink)
        self.obs.index_copy_(0, slot, final_obs)
        self.positions.index_copy_(0, slot, t * self.num_envs + self._env_index)
        self.count += trunc.sum()
        # The sink slot must keep pointing at the spare element. fill_ launches a kernel;
        # assigning a Python number by index would copy it from the host and sync.
        self.positions[self.capacity :].fill_(self.steps * self.num_envs)

    def overflow(self) -> torch.Tensor:
        """Truncations beyond the capacity in this window (device scalar)."""
        return (self.count - self.capacity).clamp_min(0)

    def nbytes(self) -> int:
        return sum(x.numel() * x.element_size() for x in (self.obs, self.positions))

    @staticmethod
    def estimate_bytes(steps: int, num_envs: int, obs_shape: Sequence[int]) -> int:
        frame = math.prod(int(d) for d in obs_shape)
        return (trunc_capacity(num_envs, steps) + 1) * (frame + 8)


# ---------------------------------------------------------------------------
# Step metrics
# ---------------------------------------------------------------------------


def add_env_step(
    metrics: MetricsAccumulator,
    action: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    trunc: torch.Tensor,
    info: Mapping[str, Any],
    distance_keys: Sequence[str] = (),
) -> None:
    """Fold one ``env.step`` into the trainer's metrics: the one way every trainer counts
    its steps (episode sums, rates, actions, goal distance). An episode succeeded where
    ``info["success"]`` says so (else where it ends ``done``). Envs that report only
    distance percentiles (``distance_keys`` present in ``info``, no ``dist`` tensor) get
    their window means."""
    goal_dist = info.get("dist")
    success = info.get("success")  # the goal alone: envs with failure screens end done on them
    if not isinstance(success, torch.Tensor):
        success = done
    metrics.add_step(reward, done, trunc, reset_mask=info.get("reset_mask"), success=success,
                     actions=action,
                     dist=goal_dist if isinstance(goal_dist, torch.Tensor) else None)
    if not isinstance(goal_dist, torch.Tensor):
        stats = {k: info[k] for k in distance_keys if k in info}
        if stats:
            metrics.add_scalars(**stats)


# ---------------------------------------------------------------------------
# The live env batch inside checkpoints
# ---------------------------------------------------------------------------


def env_batch_state(
    env: Any, obs: torch.Tensor | None, metrics: MetricsAccumulator | None
) -> dict[str, Any] | None:
    """The current observation, the env's own state and the per-env episode sums.

    The env's state is saved when it declares :class:`gbx.api.StatefulEnv`.
    """
    if env is None or obs is None:
        return None
    state: dict[str, Any] = {"obs": obs.clone()}
    if isinstance(env, StatefulEnv):
        state["env"] = env.env_state_dict()
    if metrics is not None:
        state["metrics"] = metrics.state_dict()
    return state


def restore_env_batch(
    env: Any,
    state: Mapping[str, Any],
    metrics: MetricsAccumulator | None,
    device: torch.device,
    *,
    algo: str,
) -> torch.Tensor | None:
    """Restore what :func:`env_batch_state` saved; return the observation to continue from.

    Returns None (after a warning) when the env is not a :class:`gbx.api.StatefulEnv`
    or the checkpoint holds no env state: the caller keeps the observation of its
    fresh reset and episodes restart.
    """
    obs: torch.Tensor | None = None
    if "env" in state and isinstance(env, StatefulEnv):
        env.load_env_state_dict(state["env"])
        obs = state["obs"].to(device)
    else:
        print(
            f"{algo}: warning: the env cannot restore its state (it is not a "
            "gbx.api.StatefulEnv); resumed episodes start afresh",
            file=sys.stderr,
        )
    if "metrics" in state and metrics is not None:
        metrics.load_state_dict(state["metrics"])
    return obs


# ---------------------------------------------------------------------------
# On-policy step storage
# ---------------------------------------------------------------------------


class StepWindow:
    """Preallocated ``[T, N, ...]`` tensors of ``steps`` env steps of ``num_envs`` envs.

    ``logprobs`` (the behaviour policy's log-probabilities) is allocated only
    when asked for, and so is ``before_milestones`` (bool: the step's episode had not
    yet passed every milestone of a :class:`gbx.api.EpisodeProgressEnv`).
    ``trunc_values`` holds the bootstrap values of truncated steps; its flat view
    has one spare element at the end that absorbs the scatter of unused side-buffer
    slots (see :class:`TruncatedObsBuffer`).
    """

    def __init__(
        self,
        steps: int,
        num_envs: int,
        obs_shape: Sequence[int],
        device: torch.device | str,
        *,
        logprobs: bool = False,
        milestones: bool = False,
    ) -> None:
        t, n = steps, num_envs
        self.steps = t
        self.num_envs = n
        self.device = torch.device(device)
        dev = self.device
        self.obs = torch.zeros((t, n, *obs_shape), dtype=torch.uint8, device=dev)
        self.actions = torch.zeros((t, n), dtype=torch.int64, device=dev)
        self.logprobs: torch.Tensor | None = (
            torch.zeros((t, n), dtype=torch.float32, device=dev) if logprobs else None
        )
        self.before_milestones: torch.Tensor | None = (
            torch.zeros((t, n), dtype=torch.bool, device=dev) if milestones else None
        )
        self.rewards = torch.zeros((t, n), dtype=torch.float32, device=dev)
        self.dones = torch.zeros((t, n), dtype=torch.bool, device=dev)
        self.truncs = torch.zeros((t, n), dtype=torch.bool, device=dev)
        self.values = torch.zeros((t, n), dtype=torch.float32, device=dev)
        self.trunc_values_flat = torch.zeros(t * n + 1, dtype=torch.float32, device=dev)
        self.trunc_values = self.trunc_values_flat[: t * n].view(t, n)
        self.truncated = TruncatedObsBuffer(t, n, obs_shape, self.device)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        own = (self.obs, self.actions, self.logprobs, self.before_milestones, self.rewards,
               self.dones, self.truncs,
               self.values, self.trunc_values_flat, self.truncated.obs, self.truncated.positions)
        return tuple(x for x in own if x is not None)

    def nbytes(self) -> int:
        return sum(x.numel() * x.element_size() for x in self.tensors())


def window_bytes(
    steps: int, num_envs: int, obs_shape: Sequence[int], *, float_columns: int
) -> int:
    """Bytes of a :class:`StepWindow` plus an update's per-sample temporaries.

    Per sample: the uint8 observation, the int64 action, two flags and
    ``float_columns`` float32 values (stored columns and temporaries); plus
    the truncated-observation side buffer.
    """
    frame = math.prod(int(d) for d in obs_shape)
    per_sample = frame + 8 + float_columns * 4 + 2
    side = TruncatedObsBuffer.estimate_bytes(steps, num_envs, obs_shape)
    return steps * num_envs * per_sample + side
