"""PPO's rollout storage, preallocated once on the env's device.

Layout is ``[T, N, ...]`` (rollout step, env). Truncated episodes need the
value of their last observation (``info["final_obs"]``); since truncations
are rare, those observations are compacted into a small side buffer
(``trunc_obs``) with device-side indices, so no step waits on the host to
learn how many envs were truncated.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import torch

from gbx.errors import GbxError


class MemoryBudgetError(GbxError):
    """The run's buffers would not fit in the device's free memory."""


def trunc_capacity(num_envs: int, rollout_steps: int) -> int:
    """Side-buffer slots for truncated observations per rollout.

    Room for one truncation per env every 8 steps (12.5% of the observation
    storage); truncations beyond it fall back to the value of the state one
    step before the cut and are counted in the ``trunc_overflow`` metric.
    """
    return num_envs * max(1, math.ceil(rollout_steps / 8))


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
        kw = {"device": self.device}
        self.obs = torch.zeros((t, n, *obs_shape), dtype=torch.uint8, **kw)
        self.actions = torch.zeros((t, n), dtype=torch.int64, **kw)
        self.logprobs = torch.zeros((t, n), dtype=torch.float32, **kw)
        self.rewards = torch.zeros((t, n), dtype=torch.float32, **kw)
        self.dones = torch.zeros((t, n), dtype=torch.bool, **kw)
        self.truncs = torch.zeros((t, n), dtype=torch.bool, **kw)
        self.values = torch.zeros((t, n), dtype=torch.float32, **kw)
        # Bootstrap values of truncated steps; one spare slot at the end absorbs
        # writes of unused side-buffer slots.
        self.trunc_values_flat = torch.zeros(t * n + 1, dtype=torch.float32, **kw)
        self.trunc_values = self.trunc_values_flat[: t * n].view(t, n)
        cap = trunc_capacity(n, t)
        self.trunc_capacity = cap
        # Slot ``cap`` is a sink for non-truncated rows.
        self.trunc_obs = torch.zeros((cap + 1, *obs_shape), dtype=torch.uint8, **kw)
        self.trunc_pos = torch.full((cap + 1,), t * n, dtype=torch.int64, **kw)
        self.trunc_count = torch.zeros((), dtype=torch.int64, **kw)
        self._env_index = torch.arange(n, dtype=torch.int64, **kw)
        self._sink = torch.full((n,), cap, dtype=torch.int64, **kw)

    def start_rollout(self) -> None:
        self.trunc_pos.fill_(self.rollout_steps * self.num_envs)
        self.trunc_count.zero_()

    def add_truncated(self, t: int, trunc: torch.Tensor, final_obs: torch.Tensor) -> None:
        """Append the final observations of the envs truncated at step ``t`` (no sync)."""
        trunc = trunc.to(torch.bool)
        rank = self.trunc_count + torch.cumsum(trunc.to(torch.int64), 0) - 1
        slot = torch.where(trunc & (rank < self.trunc_capacity), rank, self._sink)
        self.trunc_obs.index_copy_(0, slot, final_obs)
        self.trunc_pos.index_copy_(0, slot, t * self.num_envs + self._env_index)
        self.trunc_count += trunc.sum()
        # The sink slot must keep pointing at the spare value slot.
        self.trunc_pos[self.trunc_capacity] = self.rollout_steps * self.num_envs

    def overflow(self) -> torch.Tensor:
        """Truncations beyond the side buffer's capacity in this rollout (device scalar)."""
        return (self.trunc_count - self.trunc_capacity).clamp_min(0)

    def nbytes(self) -> int:
        return sum(
            x.numel() * x.element_size()
            for x in (
                self.obs,
                self.actions,
                self.logprobs,
                self.rewards,
                self.dones,
                self.truncs,
                self.values,
                self.trunc_values_flat,
                self.trunc_obs,
                self.trunc_pos,
            )
        )


def estimate_buffer_bytes(rollout_steps: int, num_envs: int, obs_shape: Sequence[int]) -> int:
    """Bytes :class:`RolloutBuffer` will allocate, plus the per-update temporaries.

    Per sample: the uint8 observation, int64 action, six float32 columns
    (logprob, reward, value, bootstrap, advantage, return) and two flags.
    """
    frame = math.prod(int(d) for d in obs_shape)
    samples = rollout_steps * num_envs
    per_sample = frame + 8 + 6 * 4 + 2
    side = (trunc_capacity(num_envs, rollout_steps) + 1) * (frame + 8)
    return samples * per_sample + side


def available_bytes(device: torch.device) -> int | None:
    """Free memory on ``device`` (None when it cannot be determined)."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type == "cpu":
        try:  # MemAvailable counts reclaimable page cache, unlike free pages
            with open("/proc/meminfo", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    return None


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GiB"


def check_memory(required: int, device: torch.device, *, headroom: float = 0.9) -> str:
    """Return a one-line memory summary, or raise :class:`MemoryBudgetError` if it won't fit."""
    free = available_bytes(device)
    if free is None:
        return f"needs ~{format_bytes(required)} on {device} (free memory unknown)"
    line = f"needs ~{format_bytes(required)} on {device}, {format_bytes(free)} free"
    if required > headroom * free:
        raise MemoryBudgetError(
            f"ppo {line}: the rollout will not fit; lower algo.num_envs or algo.rollout_steps"
        )
    return line
