"""Slots of saved Game Boy env states (:class:`gbx.api.EnvSnapshots`), on the device.

A slot holds everything an env's future depends on: every emulator array of the batch
(the same set a reset restores from the start state: memory, cart RAM, registers, timers,
serial buffer, APU, framebuffer), the env's frame stack and its episode's progress
(:meth:`GameBoyEnv.episode_progress`: a goal env's milestones passed). The per-episode
counters are not saved: a restored env starts a new episode in the saved state, with its
step counter (``max_steps``) at 0 and, for goal envs, the distance and consecutive-steps
counters taken afresh from its first frame (as after any reset). Its milestones are those
its first frame is under (as after any reset) and those the saved episode had passed: a
restart between a milestone and the goal does not earn the milestone again by walking
back to it.

Saving and restoring are masked copies (:class:`gbx_gameboy.snapshot.MaskedRestore`, one
Warp launch per array, bytes copied proportional to the envs involved) driven by slot
indices on the device: no host reads, no Python loop over envs, no allocation per call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from gbx_gameboy.obs import extract_obs
from gbx_gameboy.snapshot import MaskedRestore, SnapshotBank

if TYPE_CHECKING:
    from gbx_gameboy.env import GameBoyEnv


class GameBoySnapshots:
    """``capacity`` saved env states of one :class:`gbx_gameboy.env.GameBoyEnv` batch."""

    def __init__(self, env: GameBoyEnv, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"snapshot capacity must be >= 1, got {capacity}")
        self.env = env
        self.capacity = capacity
        n, dev = env.num_envs, env.device
        state = env.batch.state_tensors()
        self.bank = SnapshotBank.empty(state, capacity)
        with env._on_torch_stream():
            self._load = MaskedRestore(state, self.bank)  # slots -> envs
            # envs -> slots: the same masked copy with the bank as the destination batch
            self._store = MaskedRestore(self.bank.arrays, SnapshotBank(dict(state), n))
        # Frame stacks of the slots, plus a spare row that absorbs the envs not saved.
        self._stack = torch.zeros((capacity + 1, *env.obs_shape), dtype=torch.uint8, device=dev)
        self.stack = self._stack[:capacity]
        self._source = torch.full((capacity + 1,), -1, dtype=torch.int64, device=dev)
        self._env_ids = torch.arange(n, dtype=torch.int64, device=dev)
        self._env_stack = torch.zeros_like(env.stack.buffer)
        # The episode progress of the slots (plus the spare row), and a restore's gather.
        progress = env.episode_progress()
        self._progress: torch.Tensor | None = None
        self._env_progress: torch.Tensor | None = None
        if progress is not None:
            self._progress = torch.zeros((progress.shape[0], capacity + 1),
                                         dtype=progress.dtype, device=dev)
            self._env_progress = torch.zeros_like(progress)

    def save(self, slots: torch.Tensor) -> None:
        """Env ``e`` -> slot ``slots[e]`` where ``slots[e] >= 0`` (int64 ``[N]``)."""
        env, cap = self.env, self.capacity
        self._source.fill_(-1)
        self._source.scatter_(0, torch.where(slots >= 0, slots, cap), self._env_ids)
        source = self._source[:cap]
        has = source >= 0
        with env._on_torch_stream():
            self._store.restore(has, source)
        rows = torch.where(slots >= 0, slots, cap)
        self._stack.index_copy_(0, rows, env.stack.buffer)
        progress = env.episode_progress()
        if self._progress is not None and progress is not None:
            self._progress.index_copy_(1, rows, progress)

    def restore(self, slots: torch.Tensor) -> torch.Tensor:
        """Slot ``slots[e]`` -> env ``e`` where ``slots[e] >= 0``, as a new episode; returns
        the batch's observations."""
        env = self.env
        take = slots >= 0
        source = slots.clamp_min(0)
        with env._on_torch_stream():
            self._load.restore(take, source)
        torch.index_select(self.stack, 0, source, out=self._env_stack)
        buf = env.stack.buffer
        torch.where(take.view(-1, 1, 1, 1), self._env_stack, buf, out=buf)
        env._steps.masked_fill_(take, 0)
        frame = extract_obs(env.batch.fb, env.config.obs_size, env._frame)
        env.on_reset(take, frame)
        progress = env.episode_progress()
        if self._progress is not None and self._env_progress is not None \
                and progress is not None:
            # what the saved episode had achieved, besides what the first frame shows
            torch.index_select(self._progress, 1, source, out=self._env_progress)
            self._env_progress.logical_and_(take)
            progress.logical_or_(self._env_progress)
        return buf

    def tensors(self) -> dict[str, torch.Tensor]:
        out = {f"emulator.{k}": t for k, t in self.bank.arrays.items()}
        out["stack"] = self.stack
        if self._progress is not None:
            out["progress"] = self._progress[:, : self.capacity]
        return out

    def nbytes(self) -> int:
        own = [self._stack, self._source, self._env_ids, self._env_stack]
        own += [t for t in (self._progress, self._env_progress) if t is not None]
        extra = sum(t.numel() * t.element_size() for t in own)
        return self.bank.nbytes() + extra + 3 * 4 * max(self.capacity, self.env.num_envs)
