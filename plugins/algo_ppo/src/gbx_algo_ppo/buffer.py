"""PPO's rollout storage, preallocated once on the env's device.

Layout is ``[T, N, ...]`` (rollout step, env): a :class:`gbx_toolkit.rl_common.StepWindow`
that also keeps the behaviour policy's log-probabilities (and, for
``algo.anchor_coef``, whether each step came before the env's milestones). Truncated
episodes need the value of their last observation (``info["final_obs"]``);
since truncations are rare, those observations are compacted into a small
side buffer with device-side indices, so no step waits on the host to learn
how many envs were truncated.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gbx_toolkit.rl_common import StepWindow, window_bytes


class RolloutBuffer(StepWindow):
    """Preallocated rollout tensors on one device (with log-probabilities)."""

    def __init__(
        self,
        rollout_steps: int,
        num_envs: int,
        obs_shape: Sequence[int],
        device: torch.device | str,
        *,
        milestones: bool = False,
    ) -> None:
        super().__init__(rollout_steps, num_envs, obs_shape, device, logprobs=True,
                         milestones=milestones)
        self.rollout_steps = rollout_steps


def estimate_buffer_bytes(rollout_steps: int, num_envs: int, obs_shape: Sequence[int]) -> int:
    """Bytes :class:`RolloutBuffer` will allocate, plus the per-update temporaries.

    Per sample: the uint8 observation, int64 action, six float32 columns
    (logprob, reward, value, bootstrap, advantage, return) and two flags.
    """
    return window_bytes(rollout_steps, num_envs, obs_shape, float_columns=6)
