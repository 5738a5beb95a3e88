"""Keep the states envs reach at the goal, on the device, and write them as savestates.

A :class:`GoalStateRing` holds ``S`` slots of whole env states in a
:class:`~gbx_gameboy.snapshot.SnapshotBank`. On every step the envs that reached the
goal are copied into the next slots (a ring: the newest ``S`` goal states stay) by one
masked copy per array (:class:`~gbx_gameboy.snapshot.MaskedRestore`, the batch's
arrays being the source bank): the slot of each env comes from a prefix sum of the
``done`` mask on the device, so nothing is read on the host and nothing loops over
envs. :meth:`GoalStateRing.write` encodes the slots as gbx savestates (host side, at
checkpoints) and writes the distinct ones into a folder: a curriculum's next stage
starts from them (``env.start_states``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from gbx.config import write_atomic
from gbx_gameboy.snapshot import MaskedRestore, SnapshotBank, capture

GOAL_STATE_SUFFIX = ".gbxstate"


class GoalStateRing:
    """The newest ``slots`` goal states of a batch (see the module docstring)."""

    def __init__(self, batch_state: Mapping[str, torch.Tensor], num_envs: int, slots: int,
                 device: torch.device) -> None:
        if slots < 1:
            raise ValueError(f"goal state slots must be >= 1, got {slots}")
        self.slots = slots
        template = capture(batch_state, 0)
        self.bank = SnapshotBank.from_states([template] * slots, device)
        source = SnapshotBank(dict(batch_state), num_envs)
        self._copy = MaskedRestore(self.bank.arrays, source)
        dev = device
        self._rank = torch.zeros(num_envs, dtype=torch.int32, device=dev)
        self._target = torch.zeros(num_envs, dtype=torch.int64, device=dev)
        self._env_ids = torch.arange(num_envs, dtype=torch.int32, device=dev)
        self._which = torch.full((slots + 1,), -1, dtype=torch.int32, device=dev)  # + spare
        self.cursor = torch.zeros((), dtype=torch.int64, device=dev)
        self.filled = torch.zeros((), dtype=torch.int64, device=dev)

    def capture(self, done: torch.Tensor) -> None:
        """Copy the envs flagged in ``done`` into the next slots (at most ``slots`` per
        call); no host reads."""
        s = self.slots
        torch.cumsum(done, 0, dtype=torch.int32, out=self._rank)  # 1-based rank of each done
        count = self._rank[-1].to(torch.int64).clamp(max=s)
        # Env e (the r-th goal of this step) goes to slot (cursor + r - 1) % S; others and
        # goals beyond S this step go to the spare entry, which is never copied.
        torch.add(self._rank.to(torch.int64), self.cursor - 1, out=self._target)
        self._target.remainder_(s)
        self._target.masked_fill_(~done | (self._rank > s), s)
        self._which.fill_(-1)
        self._which.scatter_(0, self._target, self._env_ids)
        which = self._which[:s]
        self._copy.restore(which >= 0, which)
        self.cursor.add_(count).remainder_(s)
        self.filled.add_(count).clamp_(max=s)

    def write(self, folder: Path, encode: Any) -> int:
        """Write every distinct held state into ``folder`` as ``goal_<sha256 prefix>.gbxstate``
        (``encode(arrays) -> bytes`` makes the file), each atomically; files already there
        stay, and the folder never holds more than ``slots`` of them. Returns the number of
        goal state files the folder holds."""
        folder.mkdir(parents=True, exist_ok=True)
        have = {p.name for p in folder.glob(f"goal_*{GOAL_STATE_SUFFIX}")}
        for index in range(int(self.filled)):  # one host read, at checkpoints only
            if len(have) >= self.slots:
                break
            data = encode(self.bank.state(index))
            name = f"goal_{hashlib.sha256(data).hexdigest()[:16]}{GOAL_STATE_SUFFIX}"
            if name not in have:
                write_atomic(folder / name, data)
                have.add(name)
        return len(have)

    def state_dict(self) -> dict[str, Any]:
        return {"arrays": {k: t.clone() for k, t in self.bank.arrays.items()},
                "cursor": self.cursor.clone(), "filled": self.filled.clone()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        arrays = state.get("arrays")
        if not isinstance(arrays, Mapping) or set(arrays) != set(self.bank.arrays) or any(
                tuple(arrays[k].shape) != tuple(t.shape) for k, t in self.bank.arrays.items()):
            raise ValueError("the saved goal states do not fit env.save_goal_states: resume "
                             "with the env config the run was started with")
        for k, t in self.bank.arrays.items():
            t.copy_(arrays[k].to(t.device))
        self.cursor.copy_(state["cursor"])
        self.filled.copy_(state["filled"])
