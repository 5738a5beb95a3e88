"""The short window of env steps A2C learns from, preallocated once on the env's device.

Only ``update_every`` steps of ``num_envs`` envs live here, whatever the
training budget, so device memory is flat in the number of steps trained.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from gbx.rl_common import TruncatedObsBuffer


class Window:
    """``[T, N, ...]`` tensors of one window plus the truncated-observation side buffer."""

    def __init__(
        self, steps: int, num_envs: int, obs_shape: Sequence[int], device: torch.device | str
    ) -> None:
        t, n = steps, num_envs
        self.steps = t
        self.num_envs = n
        self.device = torch.device(device)
        dev = self.device
        self.obs = torch.zeros((t, n, *obs_shape), dtype=torch.uint8, device=dev)
        self.actions = torch.zeros((t, n), dtype=torch.int64, device=dev)
        self.rewards = torch.zeros((t, n), dtype=torch.float32, device=dev)
        self.dones = torch.zeros((t, n), dtype=torch.bool, device=dev)
        self.truncs = torch.zeros((t, n), dtype=torch.bool, device=dev)
        self.values = torch.zeros((t, n), dtype=torch.float32, device=dev)
        # Bootstrap values of truncated steps, plus one spare element that absorbs
        # the scatter of unused side-buffer slots.
        self.trunc_values_flat = torch.zeros(t * n + 1, dtype=torch.float32, device=dev)
        self.trunc_values = self.trunc_values_flat[: t * n].view(t, n)
        self.truncated = TruncatedObsBuffer(t, n, obs_shape, self.device)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return (self.obs, self.actions, self.rewards, self.dones, self.truncs, self.values,
                self.trunc_values_flat, self.truncated.obs, self.truncated.positions)

    def nbytes(self) -> int:
        return sum(x.numel() * x.element_size() for x in self.tensors())


def estimate_window_bytes(steps: int, num_envs: int, obs_shape: Sequence[int]) -> int:
    """Bytes :class:`Window` allocates plus the update's per-sample temporaries.

    Per sample: the uint8 observation, int64 action, float32 reward, value and
    bootstrap, two flags, and four float32 temporaries of the update
    (returns, advantages and two of the n-step recursion).
    """
    frame = math.prod(int(d) for d in obs_shape)
    per_sample = frame + 8 + 3 * 4 + 2 + 4 * 4
    return steps * num_envs * per_sample + TruncatedObsBuffer.estimate_bytes(
        steps, num_envs, obs_shape
    )
