"""Actor and critic trained on trajectories imagined by the world model."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from gbx_algo_dreamer.config import DreamerConfig
from gbx_algo_dreamer.math_ops import (
    ReturnNorm,
    lambda_returns,
    sample_categorical,
    twohot_mean,
    twohot_nll,
    uniform_noise,
    unimix_logits,
)
from gbx_algo_dreamer.networks import Head
from gbx_algo_dreamer.world_model import Latent, WorldModel
from gbx_toolkit.metrics import categorical_entropy


class Actor(nn.Module):
    def __init__(self, feat_dim: int, units: int, layers: int, num_actions: int,
                 unimix: float) -> None:
        super().__init__()
        self.net = Head(feat_dim, units, layers, num_actions)
        self.unimix = unimix
        # small output scale: the initial policy is close to uniform
        with torch.no_grad():
            self.net.out.weight.mul_(0.01)
            self.net.out.bias.zero_()

    def forward(self, feat: torch.Tensor) -> torch.Tensor:
        return unimix_logits(self.net(feat), self.unimix)


# Behavior.imagine_step with the world model bound and without its generator: (deter,
# stoch, features, action noise, latent noise) -> (deter, stoch, features, action)
ImagineStep = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]

# (start states, generator) -> (features [H+1, N, F], actions [H, N]): the rollout of
# Behavior.imagine at the configured horizon, eager or captured
Imagine = Callable[[Latent, torch.Generator | None], tuple[torch.Tensor, torch.Tensor]]

# Behavior.targets with the world model bound, eager or compiled: (features, start
# continues, bins) -> (rewards, values, returns, weights)
Targets = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]

# Behavior.policy_terms, eager or compiled: (features, actions, weights, returns, values,
# return scale, bins) -> (actor loss, critic loss, entropies, advantages)
PolicyTerms = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]


@dataclass
class BehaviorOutput:
    actor_loss: torch.Tensor
    critic_loss: torch.Tensor
    scalars: dict[str, torch.Tensor]


class Behavior(nn.Module):
    def __init__(self, feat_dim: int, num_actions: int, cfg: DreamerConfig) -> None:
        super().__init__()
        size = cfg.preset()
        self.cfg = cfg
        self.num_actions = num_actions
        self.actor = Actor(feat_dim, size.units, size.layers, num_actions, cfg.unimix)
        self.critic = Head(feat_dim, size.units, size.layers, cfg.bins, zero_init=True)
        self.slow_critic = copy.deepcopy(self.critic).requires_grad_(False)
        # made once: a tensor built from a Python list per update is a host-to-device copy
        self.register_buffer("report_quantiles", torch.tensor([0.05, 0.5, 0.95]),
                             persistent=False)
        self.report_quantiles: torch.Tensor

    @torch.no_grad()
    def update_slow_critic(self) -> None:
        rate = 1.0 - self.cfg.slow_critic_decay
        for slow, fast in zip(self.slow_critic.parameters(), self.critic.parameters(),
                              strict=True):
            slow.lerp_(fast, rate)

    def imagine_step(self, wm: WorldModel, deter: torch.Tensor, stoch: torch.Tensor,
                     feat: torch.Tensor, act_noise: torch.Tensor | None,
                     lat_noise: torch.Tensor | None, generator: torch.Generator | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of :meth:`imagine` on plain tensors: the actor picks an action from
        ``feat`` (the features of ``(deter, stoch)``) and the prior takes it; returns the
        next ``(deter, stoch, feat)`` and the action. In this form, with the noise given,
        ``torch.compile`` takes it whole (``algo.fuse_steps``)."""
        act = sample_categorical(self.actor(feat), generator, act_noise)
        state, _ = wm.rssm.img_step(Latent(deter, stoch),
                                    F.one_hot(act, self.num_actions).float(), generator,
                                    lat_noise)
        return state.deter, state.stoch, state.feat(), act

    @torch.no_grad()
    def imagine(self, wm: WorldModel, start: Latent, horizon: int,
                generator: torch.Generator | None = None,
                noise: tuple[torch.Tensor, torch.Tensor] | None = None,
                step: ImagineStep | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Roll the prior forward from ``start`` (flat batch) with actions from the actor.

        Returns features ``[H+1, N, F]`` of steps 0..H and actions ``[H, N]`` taken at
        steps 0..H-1. No gradients flow: the actor learns by REINFORCE (discrete actions).
        ``noise`` (:meth:`imagination_noise`) replaces the draws from ``generator``;
        ``step`` replaces :meth:`imagine_step` with ``wm`` bound (a compiled copy of it)
        and needs ``noise``.
        """
        if step is not None and noise is None:
            raise ValueError("a replaced step takes its randomness as input: pass noise")
        deter, stoch, feat = start.deter, start.stoch, start.feat()
        feats = [feat]
        actions = []
        for h in range(horizon):
            act_noise, lat_noise = (None, None) if noise is None else (noise[0][h],
                                                                     noise[1][h])
            if step is None:
                deter, stoch, feat, act = self.imagine_step(wm, deter, stoch, feat, act_noise,
                                                            lat_noise, generator)
            else:
                deter, stoch, feat, act = step(deter, stoch, feat, act_noise, lat_noise)
            feats.append(feat)
            actions.append(act)
        return torch.stack(feats), torch.stack(actions)

    def imagination_noise(self, wm: WorldModel, starts: int, horizon: int,
                          device: torch.device, generator: torch.Generator | None
                          ) -> tuple[torch.Tensor, torch.Tensor]:
        """Uniforms of a rollout, ``[H, N, A]`` for the actions and ``[H, N, S, C]`` for the
        latents, drawn in :meth:`imagine`'s order (action, then latent, per step)."""
        acts, lats = [], []
        for _ in range(horizon):
            acts.append(uniform_noise((starts, self.num_actions), device, generator))
            lats.append(uniform_noise((starts, wm.rssm.stoch, wm.rssm.classes), device,
                                      generator))
        return torch.stack(acts), torch.stack(lats)

    @torch.no_grad()
    def targets(self, wm: WorldModel, feats: torch.Tensor, start_cont: torch.Tensor,
                bins: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """What the actor and critic learn from on rollout features ``[H+1, N, F]``:
        predicted rewards ``[H, N]``, values ``[H+1, N]``, lambda-returns ``[H, N]`` and the
        weight ``[H+1, N]`` of each step (the probability that the imagined trajectory is
        still alive there). In this form ``torch.compile`` takes it whole
        (``algo.fuse_steps``)."""
        cfg = self.cfg
        rewards = twohot_mean(wm.reward(feats[1:]), bins)
        cont = (wm.cont(feats[1:]).squeeze(-1) > 0).float()  # mode of the continue head
        cont = torch.cat([start_cont[None], cont], 0)
        discount = cfg.gamma * cont
        weight = torch.cumprod(discount, 0) / cfg.gamma
        values = twohot_mean(self.critic(feats), bins)
        returns = lambda_returns(rewards, values, discount[1:], cfg.lam)
        return rewards, values, returns, weight

    def policy_terms(self, feats: torch.Tensor, actions: torch.Tensor, weight: torch.Tensor,
                     returns: torch.Tensor, values: torch.Tensor, scale: torch.Tensor,
                     bins: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The actor's REINFORCE loss and the critic's loss (with its slow-critic
        regulariser) given :meth:`targets` and the return scale: ``(actor loss, critic
        loss, action entropies, advantages)``. In this form ``torch.compile`` takes it whole
        (``algo.fuse_steps``)."""
        cfg = self.cfg
        adv = ((returns - values[:-1]) / scale).detach()
        logits = self.actor(feats[:-1])
        logp = torch.log_softmax(logits, -1).gather(-1, actions[..., None]).squeeze(-1)
        ent = categorical_entropy(logits)
        w = weight[:-1]
        actor_loss = (w * -(logp * adv + cfg.entropy_scale * ent)).mean()
        critic_logits = self.critic(feats[:-1])
        with torch.no_grad():
            slow_target = twohot_mean(self.slow_critic(feats[:-1]), bins)
        critic_nll = twohot_nll(critic_logits, returns, bins)
        slow_nll = twohot_nll(critic_logits, slow_target, bins)
        critic_loss = (w * (critic_nll + cfg.slow_critic_reg * slow_nll)).mean()
        return actor_loss, critic_loss, ent, adv

    def loss(self, wm: WorldModel, start: Latent, start_cont: torch.Tensor,
             bins: torch.Tensor, retnorm: ReturnNorm,
             generator: torch.Generator | None = None,
             imagine: Imagine | None = None, targets: Targets | None = None,
             terms: PolicyTerms | None = None) -> BehaviorOutput:
        """Actor and critic losses on rollouts from ``start``; ``imagine`` replaces the eager
        rollout (``algo.compile``: a captured graph, :mod:`gbx_algo_dreamer.graphs`),
        ``targets`` and ``terms`` replace :meth:`targets` (with ``wm`` bound) and
        :meth:`policy_terms` (compiled copies of them)."""
        cfg = self.cfg
        if imagine is None:
            feats, actions = self.imagine(wm, start, cfg.horizon, generator)
        else:
            feats, actions = imagine(start, generator)
        if targets is None:
            rewards, values, returns, weight = self.targets(wm, feats, start_cont, bins)
        else:
            rewards, values, returns, weight = targets(feats, start_cont, bins)
        # the return scale's running statistics stay outside the compiled programs: a
        # quantile and an in-place update of state that outlives the update
        scale = retnorm.update(returns)
        actor_loss, critic_loss, ent, adv = (terms or self.policy_terms)(
            feats, actions, weight, returns, values, scale, bins)
        pct = torch.quantile(returns.reshape(-1), self.report_quantiles)
        scalars = {
            "loss_actor": actor_loss.detach(),
            "loss_critic": critic_loss.detach(),
            "action_entropy": ent.detach().mean(),
            "imag_value_mean": values.mean(),
            "imag_value_std": values.std(),
            "advantage_mean": adv.mean(),
            "advantage_std": adv.std(),
            "return_p05": pct[0],
            "return_p50": pct[1],
            "return_p95": pct[2],
            "return_scale": scale,
            "imag_reward_mean": rewards.mean(),
        }
        return BehaviorOutput(actor_loss, critic_loss, scalars)
