"""The acting side: the posterior filter over live env streams plus the actor."""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from gbx_algo_dreamer.math_ops import sample_categorical, twohot_mean
from gbx_algo_dreamer.world_model import RSSM, Latent
from gbx_toolkit.metrics import categorical_entropy


class ActingModel(Protocol):
    """What the player reads of a world model: the encoder and the RSSM."""

    @property
    def num_actions(self) -> int: ...

    @property
    def rssm(self) -> RSSM: ...

    def embed(self, obs: torch.Tensor) -> torch.Tensor: ...


class ActingPolicy(Protocol):
    """What the player reads of the behaviour: the actor, and the critic for logging."""

    @property
    def actor(self) -> nn.Module: ...

    @property
    def critic(self) -> nn.Module: ...


class Player:
    """Recurrent policy state for ``num_envs`` streams; resets a stream on ``is_first``.

    ``wm`` and ``behavior`` are the live modules, or a :class:`~gbx_algo_dreamer.engine.
    PlayerWeights` copy of them when collection runs beside training.
    """

    def __init__(self, wm: ActingModel, behavior: ActingPolicy, num_envs: int,
                 device: torch.device) -> None:
        self.wm, self.behavior = wm, behavior
        self.num_envs, self.num_actions = num_envs, wm.num_actions
        self.state = wm.rssm.initial(num_envs).detach()
        self.prev_action = torch.zeros(num_envs, self.num_actions, device=device)

    @torch.no_grad()
    def step(self, obs: torch.Tensor, is_first: torch.Tensor, *, greedy: bool = False,
             generator: torch.Generator | None = None, fixed_action: int | None = None,
             bins: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Filter ``obs`` into the state and pick actions.

        Returns ``(actions int64 [N], entropy [N], value [N] or None)``; the value is
        computed only when ``bins`` is given (for logging).
        """
        embed = self.wm.embed(obs)
        state, _, _ = self.wm.rssm.obs_step(self.state, self.prev_action, embed, is_first,
                                            generator)
        feat = state.feat()
        logits = self.behavior.actor(feat)
        if fixed_action is not None:
            action = torch.full((self.num_envs,), fixed_action, dtype=torch.int64,
                                device=obs.device)
        elif greedy:
            action = logits.argmax(-1)
        else:
            action = sample_categorical(logits, generator)
        value = twohot_mean(self.behavior.critic(feat), bins) if bins is not None else None
        self.state = Latent(state.deter, state.stoch)
        self.prev_action = F.one_hot(action, self.num_actions).float()
        return action, categorical_entropy(logits), value

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"deter": self.state.deter.clone(), "stoch": self.state.stoch.clone(),
                "prev_action": self.prev_action.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        dev = self.prev_action.device
        self.state = Latent(state["deter"].to(dev).clone(), state["stoch"].to(dev).clone())
        self.prev_action = state["prev_action"].to(dev).clone()
