"""Built-in actor-critic networks over Game Boy shade frames.

Every model maps observations ``uint8 [N, K, H, W]`` (shade indices 0..3,
``K`` stacked frames) to ``(logits float32 [N, A], value float32 [N])``.
Inputs are scaled with ``obs.float() / 3`` inside the model so callers pass
raw environment tensors and nothing is converted on the host.

Two builders are registered through the ``register_models`` hook (the ``toolkit``
entry point of ``gbx-toolkit``):

``cnn``
    Three-layer convolutional torso in the style of the classic Atari agents
    (8x8/4, 4x4/2, 3x3/1) and one hidden layer.
``impala``
    IMPALA-style residual torso (conv, max-pool, two residual blocks per
    stage), better suited to larger, more varied screens.

Weights use orthogonal initialisation: sqrt(2) gain for hidden layers, 0.01
for the policy head (near-uniform first policy) and 1 for the value head.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from gbx import hookimpl

SHADE_MAX = 3.0


def _orthogonal(layer: nn.Module, gain: float) -> nn.Module:
    if isinstance(layer, (nn.Conv2d, nn.Linear)):
        nn.init.orthogonal_(layer.weight, gain)
        if layer.bias is not None:
            nn.init.zeros_(layer.bias)
    return layer


def _check_obs_shape(obs_shape: Sequence[int], num_actions: int) -> tuple[int, int, int]:
    if len(obs_shape) != 3:
        raise ValueError(
            f"model needs obs_shape (K, H, W), got {tuple(obs_shape)}: use a pixel env"
        )
    if num_actions < 1:
        raise ValueError(f"num_actions must be >= 1, got {num_actions}")
    k, h, w = (int(v) for v in obs_shape)
    return k, h, w


class ActorCritic(nn.Module):
    """A torso producing features, and linear policy and value heads."""

    def __init__(self, torso: nn.Module, feature_dim: int, num_actions: int) -> None:
        super().__init__()
        self.torso = torso
        self.policy_head = _orthogonal(nn.Linear(feature_dim, num_actions), 0.01)
        self.value_head = _orthogonal(nn.Linear(feature_dim, 1), 1.0)
        self.num_actions = num_actions

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.torso(obs.float() / SHADE_MAX)
        return self.policy_head(features), self.value_head(features).squeeze(-1)


def _conv_out(size: int, kernel: int, stride: int) -> int:
    return (size - kernel) // stride + 1


def build_cnn(
    obs_shape: Sequence[int],
    num_actions: int,
    *,
    channels: Sequence[int] = (32, 64, 64),
    hidden: int = 512,
) -> ActorCritic:
    """Atari-style CNN actor-critic; ``channels`` of the three conv layers."""
    k, h, w = _check_obs_shape(obs_shape, num_actions)
    if len(channels) != 3:
        raise ValueError(f"model 'cnn' needs 3 channel counts, got {tuple(channels)}")
    c1, c2, c3 = (int(c) for c in channels)
    oh = _conv_out(_conv_out(_conv_out(h, 8, 4), 4, 2), 3, 1)
    ow = _conv_out(_conv_out(_conv_out(w, 8, 4), 4, 2), 3, 1)
    if oh < 1 or ow < 1:
        raise ValueError(f"frames {h}x{w} are too small for model 'cnn': use >= 36x36")
    gain = math.sqrt(2.0)
    torso = nn.Sequential(
        _orthogonal(nn.Conv2d(k, c1, 8, stride=4), gain),
        nn.ReLU(),
        _orthogonal(nn.Conv2d(c1, c2, 4, stride=2), gain),
        nn.ReLU(),
        _orthogonal(nn.Conv2d(c2, c3, 3, stride=1), gain),
        nn.ReLU(),
        nn.Flatten(),
        _orthogonal(nn.Linear(c3 * oh * ow, hidden), gain),
        nn.ReLU(),
    )
    return ActorCritic(torso, hidden, num_actions)


class _ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        gain = math.sqrt(2.0)
        self.conv0 = _orthogonal(nn.Conv2d(channels, channels, 3, padding=1), gain)
        self.conv1 = _orthogonal(nn.Conv2d(channels, channels, 3, padding=1), gain)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv0(torch.relu(x))
        y = self.conv1(torch.relu(y))
        return x + y


class _ImpalaStage(nn.Module):
    def __init__(self, in_channels: int, channels: int) -> None:
        super().__init__()
        self.conv = _orthogonal(nn.Conv2d(in_channels, channels, 3, padding=1), math.sqrt(2.0))
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.res0 = _ResidualBlock(channels)
        self.res1 = _ResidualBlock(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.res1(self.res0(self.pool(self.conv(x))))


def build_impala(
    obs_shape: Sequence[int],
    num_actions: int,
    *,
    channels: Sequence[int] = (16, 32, 32),
    hidden: int = 256,
) -> ActorCritic:
    """IMPALA-style residual actor-critic (one stage per entry of ``channels``)."""
    k, h, w = _check_obs_shape(obs_shape, num_actions)
    if not channels:
        raise ValueError("model 'impala' needs at least one stage in channels")
    stages: list[nn.Module] = []
    in_c = k
    for c in channels:
        stages.append(_ImpalaStage(in_c, int(c)))
        in_c = int(c)
        h, w = (h + 1) // 2, (w + 1) // 2  # max-pool 3/2 with padding 1 halves, rounding up
    torso = nn.Sequential(
        *stages,
        nn.ReLU(),
        nn.Flatten(),
        _orthogonal(nn.Linear(in_c * h * w, hidden), math.sqrt(2.0)),
        nn.ReLU(),
    )
    return ActorCritic(torso, hidden, num_actions)


ModelBuilder = Callable[..., nn.Module]

BUILTIN_MODELS: dict[str, tuple[ModelBuilder, str]] = {
    "cnn": (build_cnn, "Atari-style 3-layer CNN actor-critic (options: channels, hidden)"),
    "impala": (build_impala, "IMPALA-style residual CNN actor-critic (options: channels, hidden)"),
}


@hookimpl
def register_models(register: Any) -> None:
    for name, (builder, description) in BUILTIN_MODELS.items():
        register(name, builder, description=description)


def require_model(name: str) -> Callable[..., nn.Module]:
    """The builder registered as ``name``; a one-line ConfigError listing the known names."""
    from gbx.errors import ConfigError
    from gbx.plugins import get_host

    registry = get_host().registry
    models = registry.models
    spec = models.get(name)
    clash = registry.clash("model", name)
    if clash is not None:
        raise clash
    if spec is not None:
        return spec.builder
    # The toolkit's own networks also serve a host that did not load the toolkit's entry
    # point (GBX_PLUGINS=ppo selects the algorithm, not the distributions it depends on).
    if name in BUILTIN_MODELS:
        return BUILTIN_MODELS[name][0]
    known = ", ".join(sorted(set(models) | set(BUILTIN_MODELS)))
    raise ConfigError(f"unknown model {name!r}: registered models are {known}")


def build_model(
    name: str, obs_shape: Sequence[int], num_actions: int, **options: Any
) -> nn.Module:
    """Build the model registered as ``name`` (built-in or from any plugin)."""
    from gbx.errors import ConfigError

    builder = require_model(name)
    try:
        return builder(tuple(obs_shape), int(num_actions), **options)
    except TypeError as exc:
        raise ConfigError(f"model {name!r} rejected its options {options!r}: {exc}") from exc
