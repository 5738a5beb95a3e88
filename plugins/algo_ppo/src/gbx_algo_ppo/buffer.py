"""PPO's rollout storage, preallocated once on the env's device.

Layout is ``[T, N, ...]`` (rollout step, env). Truncated episodes need the
value of their last observation (``info["final_obs"]``); since truncations
are rare, those observations are compacted into a small side buffer
(:class:`gbx.rl_common.TruncatedObsBuffer`) with device-side indices, so no
step waits on the host to learn how many envs were truncated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from gbx.rl_common import TruncatedObsBuffer


class RolloutBuffer:
    """Preallocated rollout tensors on one device."""

    def __init__(
        self,
        rollout_steps: int,
        num_envs: int,
        obs_shape: Sequence[int],
        device: torch.device | str,
    ) -> None:
        t, n = rollout_steps, num_envs
        self.rollout_steps = t
        self.num_envs = n
        self.device = torch.device(device)
        dev = self.device
        self.obs = torch.zeros((t, n, *obs_shape), dtype=torch.uint8, device=dev)
        self.actions = torch.zeros((t, n), dtype=torch.int64, device=dev)
        self.logprobs = torch.zeros((t, n), dtype=torch.float32, device=dev)
        self.rewards = torch.zeros((t, n), dtype=torch.float32, device=dev)
        self.dones = torch.zeros((t, n), dtype=torch.bool, device=dev)
        self.truncs = torch.zeros((t, n), dtype=torch.bool, device=dev)
        self.values = torch.zeros((t, n), dtype=torch.float32, device=dev)
        # Bootstrap values of truncated steps; the spare element at the end absorbs
        # the scatter of unused side-buffer slots.
        self.trunc_values_flat = torch.zeros(t * n + 1, dtype=torch.float32, device=dev)
        self.trunc_values = self.trunc_values_flat[: t * n].view(t, n)
        self.truncated = TruncatedObsBuffer(t, n, obs_shape, self.device)

    def nbytes(self) -> int:
        own = (
            self.obs,
            self.actions,
            self.logprobs,
            self.rewards,
            self.dones,
            self.truncs,
            self.values,
            self.trunc_values_flat,
        )
        return sum(x.numel() * x.element_size() for x in own) + self.truncated.nbytes()


def estimate_buffer_bytes(rollout_steps: int, num_envs: int, obs_shape: Sequence[int]) -> int:
    """Bytes :class:`RolloutBuffer` will allocate, plus the per-update temporaries.

    Per sample: the uint8 observation, int64 action, six float32 columns
    (logprob, reward, value, bootstrap, advantage, return) and two flags.
    """
    frame = math.prod(int(d) for d in obs_shape)
    per_sample = frame + 8 + 6 * 4 + 2
    side = TruncatedObsBuffer.estimate_bytes(rollout_steps, num_envs, obs_shape)
    return rollout_steps * num_envs * per_sample + side
