"""Building blocks: LayerNorm+SiLU MLPs, the LayerNorm GRU cell, the shade-frame CNN
encoder and the categorical shade decoder."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gbx_algo_dreamer.precision import conv_autocast

NUM_SHADES = 4


def mlp(in_dim: int, units: int, layers: int) -> nn.Sequential:
    """``layers`` x (Linear -> LayerNorm -> SiLU); the output layer is added by the caller."""
    mods: list[nn.Module] = []
    dim = in_dim
    for _ in range(layers):
        mods += [nn.Linear(dim, units, bias=False), nn.LayerNorm(units), nn.SiLU()]
        dim = units
    return nn.Sequential(*mods)


class Head(nn.Module):
    """MLP torso plus a linear output; ``zero_init`` starts predictions at exactly zero
    (reward/critic heads: a flat two-hot distribution, i.e. a prediction of 0)."""

    def __init__(self, in_dim: int, units: int, layers: int, out_dim: int,
                 zero_init: bool = False) -> None:
        super().__init__()
        self.torso = mlp(in_dim, units, layers)
        self.out = nn.Linear(units if layers else in_dim, out_dim)
        if zero_init:
            nn.init.zeros_(self.out.weight)
            nn.init.zeros_(self.out.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.torso(x))


class LayerNormGRUCell(nn.Module):
    """GRU cell with one fused input/recurrent projection normalised by LayerNorm and the
    update gate biased towards keeping the state (``sigmoid(u - 1)``)."""

    def __init__(self, in_dim: int, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.proj = nn.Linear(in_dim + hidden, 3 * hidden, bias=False)
        self.norm = nn.LayerNorm(3 * hidden)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return gru_gates(self.norm(self.proj(torch.cat([x, h], -1))), h)


def gru_gates(parts: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """The GRU's next state from its normalised projection ``[..., 3 * hidden]`` (reset,
    candidate, update) and its state ``h``."""
    reset, cand, update = parts.split(h.shape[-1], -1)
    reset = torch.sigmoid(reset)
    cand = torch.tanh(reset * cand)
    update = torch.sigmoid(update - 1.0)
    return update * cand + (1.0 - update) * h


class ChannelNorm(nn.Module):
    """LayerNorm over the channel axis of ``[B, C, H, W]`` maps."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def _frame_geometry(height: int, width: int) -> tuple[int, int, int]:
    """Square side the frame is padded to and the padding of each axis (side % 16 == 0)."""
    side = -(-max(height, width) // 16) * 16
    return side, (side - height) // 2, (side - width) // 2


class ShadeEncoder(nn.Module):
    """``uint8 [B, K, H, W]`` shades -> embedding. Frames are centred in a square canvas
    whose side is a multiple of 16, then four stride-2 convolutions reach side / 16. The
    convolutions run at ``conv_dtype`` (``algo.conv_dtype``); the embedding is float32."""

    def __init__(self, frames: int, height: int, width: int, depth: int,
                 conv_dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.side, self.pad_h, self.pad_w = _frame_geometry(height, width)
        self.height, self.width = height, width
        self.conv_dtype = conv_dtype
        chans = [frames, depth, 2 * depth, 4 * depth, 8 * depth]
        mods: list[nn.Module] = []
        for cin, cout in zip(chans[:-1], chans[1:], strict=True):
            mods += [nn.Conv2d(cin, cout, 4, 2, 1, bias=False), ChannelNorm(cout), nn.SiLU()]
        self.net = nn.Sequential(*mods)
        self.out_dim = 8 * depth * (self.side // 16) ** 2

    def forward(self, shades: torch.Tensor) -> torch.Tensor:
        x = shades.to(torch.float32) / (NUM_SHADES - 1) - 0.5
        x = F.pad(x, (self.pad_w, self.side - self.width - self.pad_w,
                      self.pad_h, self.side - self.height - self.pad_h))
        with conv_autocast(x.device, self.conv_dtype):
            out = self.net(x)
        return out.flatten(1).float()


class ShadeDecoder(nn.Module):
    """Latent features -> logits ``[B, K, H, W, 4]`` of a categorical over the four
    shades of every pixel (mirror of :class:`ShadeEncoder`, cropped back to H x W). Its
    layers run at ``conv_dtype`` (``algo.conv_dtype``); the logits are float32."""

    def __init__(self, in_dim: int, frames: int, height: int, width: int, depth: int,
                 conv_dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.conv_dtype = conv_dtype
        self.side, self.pad_h, self.pad_w = _frame_geometry(height, width)
        self.frames, self.height, self.width = frames, height, width
        self.base = self.side // 16
        self.depth = depth
        self.inp = nn.Linear(in_dim, 8 * depth * self.base**2)
        chans = [8 * depth, 4 * depth, 2 * depth, depth]
        mods: list[nn.Module] = []
        for cin, cout in zip(chans[:-1], chans[1:], strict=True):
            mods += [nn.ConvTranspose2d(cin, cout, 4, 2, 1, bias=False), ChannelNorm(cout),
                     nn.SiLU()]
        mods.append(nn.ConvTranspose2d(depth, frames * NUM_SHADES, 4, 2, 1))
        self.net = nn.Sequential(*mods)

    def forward(self, feat: torch.Tensor) -> torch.Tensor:
        with conv_autocast(feat.device, self.conv_dtype):
            x = self.inp(feat).reshape(-1, 8 * self.depth, self.base, self.base)
            x = self.net(x)
        x = x.float()[:, :, self.pad_h:self.pad_h + self.height,
                      self.pad_w:self.pad_w + self.width]
        x = x.reshape(-1, self.frames, NUM_SHADES, self.height, self.width)
        return x.permute(0, 1, 3, 4, 2)
