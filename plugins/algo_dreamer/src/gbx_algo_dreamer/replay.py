"""Device replay: one ring buffer per env stream holding packed shade frames.

Each record ``i`` of a stream is ``(obs_i, action that led to obs_i, reward received on
arriving, is_first, is_terminal)``. An env step writes one record per stream and a second
one for streams that reset (the first frame of the next episode), so every stream has its
own write cursor; all writes are vectorised scatters, with no host transfer.

Writes happen in two phases: :meth:`stage` fills slots past the committed end and
:meth:`commit` publishes them. Sampling only ever reads committed slots and keeps
``RESERVED`` slots of distance from the write cursor, so a write in progress is never
read, even when the ring wraps.

Several env steps may be staged before one commit (the overlapped engine stages a whole
chunk while training samples): the replay is then built with ``reserved`` equal to
``RESERVED`` times the steps staged per commit, so the sampler keeps clear of all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gbx_toolkit.shades import pack_shades, unpack_shades

RESERVED = 2  # slots a stage may touch past the committed end (record + reset record)


@dataclass
class Batch:
    obs: torch.Tensor  # uint8 [B, L, K, H, W]
    actions: torch.Tensor  # int64 [B, L]
    rewards: torch.Tensor  # float32 [B, L]
    is_first: torch.Tensor  # bool [B, L]
    is_terminal: torch.Tensor  # bool [B, L]
    stream: torch.Tensor  # int64 [B]
    index: torch.Tensor  # int64 [B, L] ring slots


class Replay:
    def __init__(self, num_streams: int, capacity_per_stream: int,
                 obs_shape: tuple[int, int, int], device: torch.device | str,
                 reserved: int = RESERVED) -> None:
        frames, height, width = obs_shape
        if width % 4:
            raise ValueError(f"replay packs 4 pixels per byte; frame width {width} is not "
                             "divisible by 4")
        if reserved < RESERVED or capacity_per_stream < reserved + 2:
            raise ValueError(f"replay capacity per stream {capacity_per_stream} is too small "
                             f"for {reserved} reserved slots")
        self.reserved = reserved  # slots past the committed end that staging may touch
        self.device = torch.device(device)
        self.num_streams, self.capacity = num_streams, capacity_per_stream
        self.obs_shape = (frames, height, width)
        n, c = num_streams, capacity_per_stream
        self.obs = torch.zeros(n, c, frames, height, width // 4, dtype=torch.uint8,
                               device=self.device)
        self.actions = torch.zeros(n, c, dtype=torch.int16, device=self.device)
        self.rewards = torch.zeros(n, c, dtype=torch.float32, device=self.device)
        self.is_first = torch.zeros(n, c, dtype=torch.bool, device=self.device)
        self.is_terminal = torch.zeros(n, c, dtype=torch.bool, device=self.device)
        # per-stream counters: records ever staged (cursor) and ever committed
        self.cursor = torch.zeros(n, dtype=torch.int64, device=self.device)
        self.committed = torch.zeros(n, dtype=torch.int64, device=self.device)
        self._rows = torch.arange(n, device=self.device)

    @staticmethod
    def bytes_needed(num_streams: int, capacity_per_stream: int,
                     obs_shape: tuple[int, int, int]) -> int:
        frames, height, width = obs_shape
        per_record = frames * height * (width // 4) + 2 + 4 + 1 + 1
        return num_streams * capacity_per_stream * per_record

    # -- writing -------------------------------------------------------------------

    def _put(self, slot: torch.Tensor, obs: torch.Tensor, action: torch.Tensor,
             reward: torch.Tensor, first: torch.Tensor, terminal: torch.Tensor) -> None:
        idx = (self._rows, slot % self.capacity)
        self.obs[idx] = pack_shades(obs)
        self.actions[idx] = action.to(torch.int16)
        self.rewards[idx] = reward.to(torch.float32)
        self.is_first[idx] = first
        self.is_terminal[idx] = terminal

    def stage_first(self, obs: torch.Tensor) -> None:
        """Stage the first record of every stream (after ``env.reset()``)."""
        zeros = torch.zeros(self.num_streams, device=self.device)
        true = torch.ones(self.num_streams, dtype=torch.bool, device=self.device)
        self._put(self.cursor, obs, zeros.long(), zeros, true, ~true)
        self.cursor += 1

    def stage(self, arrived_obs: torch.Tensor, action: torch.Tensor, reward: torch.Tensor,
              terminal: torch.Tensor, reset: torch.Tensor, next_obs: torch.Tensor) -> None:
        """Stage one env step of every stream.

        ``arrived_obs`` is the frame the action led to (the final frame of an ending
        episode); streams with ``reset`` also get a first record holding ``next_obs``.
        """
        self._put(self.cursor, arrived_obs, action, reward, torch.zeros_like(terminal),
                  terminal)
        # unconditional second write: for streams that did not reset it lands on the slot
        # the next step overwrites, past the committed end, so it is never sampled
        zeros = torch.zeros_like(reward)
        self._put(self.cursor + 1, next_obs, torch.zeros_like(action), zeros, reset,
                  torch.zeros_like(terminal))
        self.cursor += 1 + reset.to(torch.int64)

    def commit(self) -> None:
        """Publish every staged record to the sampler."""
        self.committed.copy_(self.cursor)

    # -- reading -------------------------------------------------------------------

    def valid(self) -> torch.Tensor:
        """Sampleable records per stream: committed, and clear of in-flight slots."""
        return torch.clamp(self.committed, max=self.capacity - self.reserved)

    def sample(self, batch: int, length: int, generator: torch.Generator | None = None,
               streams: torch.Tensor | None = None) -> Batch:
        """``batch`` sequences of ``length`` consecutive committed records.

        Streams are drawn in proportion to their number of valid start positions (only
        from ``streams`` when given). Every sequence starts with ``is_first`` forced
        True: the model starts from its initial state there.
        """
        valid = self.valid()
        starts_per_stream = torch.clamp(valid - length + 1, min=0).to(torch.float32)
        if streams is not None:
            mask = torch.zeros_like(starts_per_stream)
            mask[streams] = 1.0
            starts_per_stream = starts_per_stream * mask
        # callers guarantee at least one stream has a full sequence (host-side count)
        stream = torch.multinomial(starts_per_stream + 1e-12 * (starts_per_stream.sum() == 0),
                                   batch, replacement=True, generator=generator)
        u = torch.rand(batch, device=self.device, generator=generator)
        offset = torch.floor(u * starts_per_stream[stream]).to(torch.int64)
        oldest = self.committed[stream] - valid[stream]
        start = oldest + offset
        steps = start[:, None] + torch.arange(length, device=self.device)[None]
        slot = steps % self.capacity
        rows = stream[:, None].expand_as(slot)
        first = self.is_first[rows, slot].clone()
        first[:, 0] = True
        return Batch(
            obs=unpack_shades(self.obs[rows, slot]),
            actions=self.actions[rows, slot].to(torch.int64),
            rewards=self.rewards[rows, slot],
            is_first=first,
            is_terminal=self.is_terminal[rows, slot],
            stream=stream,
            index=slot,
        )

    # -- persistence ---------------------------------------------------------------

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k).clone() for k in
                ("obs", "actions", "rewards", "is_first", "is_terminal", "cursor", "committed")}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for k, v in state.items():
            mine = getattr(self, k)
            if mine.shape != v.shape:
                raise ValueError(f"replay {k} has shape {tuple(v.shape)} in the checkpoint but "
                                 f"{tuple(mine.shape)} here; use the same algo.replay_capacity "
                                 "and algo.num_envs to resume")
            mine.copy_(v)
