"""The short window of env steps A2C learns from, preallocated once on the env's device.

Only ``update_every`` steps of ``num_envs`` envs live here, whatever the
training budget, so device memory is flat in the number of steps trained.
The storage itself is :class:`gbx_toolkit.rl_common.StepWindow`.
"""

from __future__ import annotations

from collections.abc import Sequence

from gbx_toolkit.rl_common import StepWindow, window_bytes

# A2C's window is the shared on-policy storage without log-probabilities.
Window = StepWindow


def estimate_window_bytes(steps: int, num_envs: int, obs_shape: Sequence[int]) -> int:
    """Bytes :class:`Window` allocates plus the update's per-sample temporaries.

    Per sample: the uint8 observation, int64 action, float32 reward, value and
    bootstrap, two flags, and four float32 temporaries of the update
    (returns, advantages and two of the n-step recursion).
    """
    return window_bytes(steps, num_envs, obs_shape, float_columns=3 + 4)
