"""PPO's pure math: advantages, losses and diagnostics.

Every function here is a pure function of tensors on one device; none reads
back to the host, so they can sit inside the training hot path. The math
shared with other on-policy algorithms (GAE, categorical log-probabilities
and sampling, explained variance) lives in :mod:`gbx_toolkit.rl_common` and is
re-exported here so PPO's whole loss toolbox is importable from one place.

Time layout: tensors are ``[T, N]`` (rollout step, env). At step ``t`` the
agent saw ``obs[t]`` (value ``values[t]``), acted, received ``rewards[t]``
and the flags ``dones[t]`` (terminal: nothing follows) and ``truncs[t]``
(time limit: the episode was cut, its future is estimated by the value of
the truncated state ``trunc_values[t]``, i.e. the value of ``final_obs``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from gbx_toolkit.metrics import categorical_entropy
from gbx_toolkit.rl_common import (
    categorical_logprob,
    compute_gae,
    explained_variance,
    normalize_advantages,
    sample_categorical,
)

__all__ = [
    "PolicyLoss",
    "RunningMeanStd",
    "anchor_kl",
    "categorical_entropy",
    "categorical_logprob",
    "clipped_surrogate",
    "compute_gae",
    "explained_variance",
    "normalize_advantages",
    "sample_categorical",
    "scale_rewards",
    "uniform_kl",
    "value_loss",
]


class PolicyLoss(NamedTuple):
    loss: torch.Tensor
    approx_kl: torch.Tensor
    clipfrac: torch.Tensor


def clipped_surrogate(
    new_logprob: torch.Tensor,
    old_logprob: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip: float,
) -> PolicyLoss:
    """PPO's clipped policy loss (to minimise), with its KL and clip-fraction diagnostics.

    ``approx_kl`` is the low-variance estimator ``E[(r - 1) - log r]`` of
    KL(old || new); ``clipfrac`` the share of samples whose ratio left
    ``[1 - clip, 1 + clip]``.
    """
    log_ratio = new_logprob - old_logprob
    ratio = log_ratio.exp()
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip, 1.0 + clip) * advantages
    loss = -torch.minimum(unclipped, clipped).mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1.0) - log_ratio).mean()
        clipfrac = ((ratio - 1.0).abs() > clip).float().mean()
    return PolicyLoss(loss, approx_kl, clipfrac)


def value_loss(
    new_values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    *,
    clip: float | None = None,
) -> torch.Tensor:
    """Half mean squared error to the returns; with ``clip``, the pessimistic clipped variant."""
    error = (new_values - returns).square()
    if clip is None:
        return 0.5 * error.mean()
    clipped_values = old_values + (new_values - old_values).clamp(-clip, clip)
    clipped_error = (clipped_values - returns).square()
    return 0.5 * torch.maximum(error, clipped_error).mean()


def anchor_kl(
    logits: torch.Tensor, anchor_logprobs: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """KL(anchor || policy) averaged over the masked samples, and the masked share.

    ``logits`` ``[B, A]`` are the policy's, ``anchor_logprobs`` ``[B, A]`` the
    log-probabilities of the policy the run started from, ``mask`` bool ``[B]`` the
    samples the anchor holds (0 loss when none is masked). KL(anchor || policy) is what
    grows when the policy stops choosing what the anchor chose: it weighs each action
    by the anchor's probability, so the anchor's choices are kept and its unlikely
    actions are free to change.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    kl = (anchor_logprobs.exp() * (anchor_logprobs - logp)).sum(-1)
    weight = mask.to(kl.dtype)
    count = weight.sum()
    return (kl * weight).sum() / count.clamp(min=1.0), count / weight.numel()


def uniform_kl(logits: torch.Tensor) -> torch.Tensor:
    """KL(uniform || policy) averaged over the batch (``logits`` ``[B, A]``).

    Its gradient on an action's logit is ``(p - 1/A) / B``: an action the policy all but
    never takes is pulled up by about ``1/A`` however small its probability, where the
    entropy's pull, ``p (log p + H)``, vanishes with ``p``. So no action's probability
    collapses to nothing, and an action a state needs that an earlier stage taught the
    policy never to take there is still sampled now and then.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -logp.mean(-1).mean() - math.log(logits.shape[-1])


class RunningMeanStd:
    """Running mean/variance of a scalar stream, kept on the device (parallel merge)."""

    def __init__(self, device: torch.device | str, eps: float = 1e-4) -> None:
        self.mean = torch.zeros((), dtype=torch.float64, device=device)
        self.var = torch.ones((), dtype=torch.float64, device=device)
        self.count = torch.full((), eps, dtype=torch.float64, device=device)

    def update(self, x: torch.Tensor) -> None:
        x = x.detach().double().flatten()
        batch_mean = x.mean()
        batch_var = x.var(unbiased=False)
        n = float(x.numel())
        delta = batch_mean - self.mean
        total = self.count + n
        m2 = self.var * self.count + batch_var * n + delta.square() * self.count * n / total
        self.mean = self.mean + delta * n / total
        self.var = m2 / total
        self.count = total

    @property
    def std(self) -> torch.Tensor:
        return self.var.sqrt()

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"mean": self.mean.clone(), "var": self.var.clone(), "count": self.count.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        device = self.mean.device
        self.mean = state["mean"].to(device, torch.float64)
        self.var = state["var"].to(device, torch.float64)
        self.count = state["count"].to(device, torch.float64)


def scale_rewards(
    rewards: torch.Tensor,
    dones: torch.Tensor,
    truncs: torch.Tensor,
    discounted: torch.Tensor,
    stats: RunningMeanStd,
    *,
    gamma: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Divide ``rewards [T, N]`` by the running std of the discounted return.

    ``discounted`` ``[N]`` is the per-env running discounted return carried
    between rollouts; it restarts at episode ends. Returns the scaled rewards
    and the updated carry. Rewards are only scaled (not centred), so the sign
    of the sparse goal reward is kept.
    """
    running = discounted
    history = torch.empty_like(rewards)
    ended = (dones | truncs).to(rewards.dtype)
    for t in range(rewards.shape[0]):
        running = running * gamma + rewards[t]
        history[t] = running
        running = running * (1.0 - ended[t])
    stats.update(history)
    scale = (stats.std + 1e-8).to(rewards.dtype)
    return rewards / scale, running
