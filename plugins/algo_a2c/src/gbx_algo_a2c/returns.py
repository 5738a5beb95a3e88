"""A2C's pure math: n-step returns over a short window, and the actor-critic losses.

Time layout: tensors are ``[T, N]`` (window step, env). At step ``t`` the
agent saw ``obs[t]`` (value ``values[t]``), acted, received ``rewards[t]``
and the flags ``dones[t]`` (terminal: nothing follows) and ``truncs[t]``
(time limit: the future is estimated by ``trunc_values[t]``, the value of
``info["final_obs"]``). ``next_value`` ``[N]`` is the value of the
observation after the window. Nothing here reads the device from the host.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gbx_toolkit.metrics import categorical_entropy
from gbx_toolkit.rl_common import categorical_logprob, normalize_advantages

__all__ = ["A2CLoss", "a2c_loss", "normalize_advantages", "nstep_returns"]


def nstep_returns(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    truncs: torch.Tensor,
    next_value: torch.Tensor,
    trunc_values: torch.Tensor,
    *,
    gamma: float,
    n: int,
) -> torch.Tensor:
    """Bootstrapped returns of at most ``n`` steps, cut at the window's end, ``[T, N]``.

    ``G_t = r_t + gamma * r_{t+1} + ... + gamma^k * V`` where the sum stops
    after ``k = min(n, T - t)`` steps with ``V`` the value of the state
    reached, or earlier at an episode end: a terminal adds nothing more, a
    truncation adds ``gamma * trunc_values`` (never the value of the next
    episode's first observation, which auto-reset put at ``obs[t+1]``).
    A step both done and truncated counts as terminal.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    dones = dones.bool()
    truncs = truncs.bool() & ~dones
    ended = dones | truncs
    tail = torch.where(truncs, trunc_values, torch.zeros_like(rewards))
    # G^(k)_t = r_t + gamma * (tail_t if the episode ended at t else G^(k-1)_{t+1}),
    # with G^(0) = V and every G^(.)_T = next_value (the window's end).
    follow = torch.cat([values[1:], next_value.unsqueeze(0)], dim=0)
    returns = rewards
    for _k in range(n):
        returns = rewards + gamma * torch.where(ended, tail, follow)
        follow = torch.cat([returns[1:], next_value.unsqueeze(0)], dim=0)
    return returns


class A2CLoss(NamedTuple):
    total: torch.Tensor
    policy: torch.Tensor
    value: torch.Tensor
    entropy: torch.Tensor  # mean entropy (the bonus is ``-ent_coef * entropy``)
    per_sample_entropy: torch.Tensor


def a2c_loss(
    logits: torch.Tensor,
    values: torch.Tensor,
    actions: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    *,
    vf_coef: float,
    ent_coef: float,
) -> A2CLoss:
    """Policy gradient with a baseline, half squared value error and an entropy bonus.

    ``advantages`` and ``returns`` are targets: no gradient flows into them.
    """
    logp = categorical_logprob(logits, actions)
    entropy = categorical_entropy(logits)
    policy = -(logp * advantages.detach()).mean()
    value = 0.5 * (values - returns.detach()).square().mean()
    ent = entropy.mean()
    total = policy + vf_coef * value - ent_coef * ent
    return A2CLoss(total, policy, value, ent, entropy)
