"""Golden snapshots of one env's state and masked restores into a batch.

The batch's state is a dict of named device tensors (``batch.state_tensors()``). The
framebuffer ``fb`` keeps the env on its **first** axis, ``(N, 144, 160)``; every other
array is **tiled**, ``(tiles, rows, TILE)`` (layout.py, tiles.py). An :class:`EnvState`
is one env's slice of every array: ``fb`` as ``(144, 160)``, the others as ``(rows,)``.

A :class:`SnapshotBank` holds ``B`` env states in the batch's layout (the bank entries
take the place of envs). :class:`MaskedRestore` copies bank entry ``which[e]`` into env
``e`` for every env with ``which[e] >= 0``:

* one Warp kernel launch per array, over ``(C, N)`` threads (``C`` = a fixed
  number of lanes per env, 64); the threads of an env that is not being reset
  read one ``int32`` and exit, so the bytes copied are proportional to the
  number of envs reset, and the launch size is a small constant times ``N``; on the
  CPU device a mask that flags no env launches nothing;
* no index compaction (``torch.nonzero`` would sync with the host) and no
  Python loop over envs; ``which`` is computed on the device from the mask.

All arrays are restored as raw bytes (``tensor.view(torch.uint8)``), so one
kernel serves every dtype. Saving envs into a bank is the same copy the other way round:
a :class:`MaskedRestore` whose "batch" is the bank and whose "bank" is the batch
(``SnapshotBank.empty`` makes the zeroed bank; ``gbx_gameboy.env_snapshots``).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from gbx_gameboy.layout import TILE, TILE_SHIFT, tiles_for
from gbx_gameboy.tiles import env_rows, tile_envs
from gbx_gameboy.warp_setup import wp

wp.set_module_options({"enable_backward": False})

EnvState = dict[str, torch.Tensor]

LANES_PER_ENV = 64
ENV_FIRST = frozenset({"fb"})  # arrays laid out [num_envs, ...]; all others are tiled


def env_count(state: Mapping[str, torch.Tensor]) -> int:
    """Envs a state dict holds: ``fb``'s first axis, else every column of the tiles."""
    if "fb" in state:
        return int(state["fb"].shape[0])
    return int(next(iter(state.values())).shape[0]) * TILE


def env_slice(name: str, t: torch.Tensor, env: int) -> torch.Tensor:
    """Env ``env``'s part of array ``name`` (a view)."""
    return t[env] if name in ENV_FIRST else env_rows(t, env)


def env_shape(name: str, t: torch.Tensor) -> tuple[int, ...]:
    """Shape of one env's part of array ``name``."""
    return tuple(t.shape[1:]) if name in ENV_FIRST else (int(t.shape[1]),)


def capture(state: Mapping[str, torch.Tensor], env: int) -> EnvState:
    """A device copy of env ``env``'s slice of every state array."""
    n = env_count(state)
    if not 0 <= env < n:
        raise IndexError(f"env {env} out of range for a batch of {n} envs")
    return {name: env_slice(name, t, env).clone() for name, t in state.items()}


def write_env(state: Mapping[str, torch.Tensor], env: int | None, values: EnvState) -> None:
    """Copy one env state into env ``env`` of the batch (all envs when ``env`` is None).

    One device copy per array; the arrays must match the batch's names and shapes.
    """
    check_compatible(state, values)
    for name, t in state.items():
        v = values[name].to(device=t.device)
        if env is not None:
            env_slice(name, t, env).copy_(v)
        elif name in ENV_FIRST:
            t.copy_(v.unsqueeze(0).expand_as(t))
        else:
            t.copy_(v[None, :, None].expand_as(t))


def check_compatible(state: Mapping[str, torch.Tensor], values: Mapping[str, torch.Tensor]) -> None:
    """Raise ValueError naming the first array whose name/shape/dtype does not match."""
    missing = sorted(set(state) - set(values))
    extra = sorted(set(values) - set(state))
    if missing or extra:
        raise ValueError(
            f"state arrays differ from the batch's: missing {missing}, unexpected {extra}"
        )
    for name, t in state.items():
        want = env_shape(name, t)
        got = tuple(values[name].shape)
        if want != got or values[name].dtype != t.dtype:
            raise ValueError(
                f"state array {name!r} is {values[name].dtype}{list(got)}, "
                f"the batch needs {t.dtype}{list(want)}"
            )


class SnapshotBank:
    """``B`` env states in the batch's layout (tiled, or ``fb``-style env-first), on one
    device."""

    def __init__(self, arrays: dict[str, torch.Tensor], size: int) -> None:
        self.arrays = arrays
        self.size = size

    @classmethod
    def from_states(cls, states: list[EnvState], device: torch.device | str) -> SnapshotBank:
        if not states:
            raise ValueError("a snapshot bank needs at least one state")
        arrays = {}
        for name in states[0]:
            stacked = torch.stack([s[name] for s in states]).to(device)
            arrays[name] = stacked.contiguous() if name in ENV_FIRST else tile_envs(stacked)
        return cls(arrays, len(states))

    @classmethod
    def empty(cls, like: Mapping[str, torch.Tensor], size: int) -> SnapshotBank:
        """A zeroed bank of ``size`` entries with the arrays, dtypes and layout of the
        batch state ``like`` (slots to save envs into)."""
        if size < 1:
            raise ValueError(f"a snapshot bank needs at least one entry, got {size}")
        arrays = {}
        for name, t in like.items():
            shape = (size, *t.shape[1:]) if name in ENV_FIRST else \
                (tiles_for(size), int(t.shape[1]), TILE)
            arrays[name] = torch.zeros(shape, dtype=t.dtype, device=t.device)
        return cls(arrays, size)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.arrays.values())

    def state(self, index: int) -> EnvState:
        if not 0 <= index < self.size:
            raise IndexError(f"bank index {index} out of range for a bank of {self.size}")
        return {name: env_slice(name, t, index).clone() for name, t in self.arrays.items()}


@wp.kernel
def _restore_env_tiled(
    dst: wp.array3d(dtype=wp.uint8),
    src: wp.array3d(dtype=wp.uint8),
    which: wp.array(dtype=wp.int32),
    elem: int,
    lanes: int,
):
    # dst is (tiles, rows, TILE * elem), src (bank tiles, rows, TILE * elem): env e owns
    # bytes (e % TILE) * elem ... + elem - 1 of every row of tile e // TILE.
    lane, env = wp.tid()
    b = which[env]
    if b < 0:
        return
    dt = env >> TILE_SHIFT
    dc = (env & (TILE - 1)) * elem
    bt = b >> TILE_SHIFT
    bc = (b & (TILE - 1)) * elem
    for r in range(lane, dst.shape[1], lanes):
        for k in range(elem):
            dst[dt, r, dc + k] = src[bt, r, bc + k]


@wp.kernel
def _restore_env_first(
    dst: wp.array2d(dtype=wp.uint8),
    src: wp.array2d(dtype=wp.uint8),
    which: wp.array(dtype=wp.int32),
    lanes: int,
):
    # dst is (N, bytes), src (B, bytes); the lanes of one env stride over its bytes.
    env, lane = wp.tid()
    b = which[env]
    if b < 0:
        return
    for c in range(lane, dst.shape[1], lanes):
        dst[env, c] = src[b, c]


def _bytes_view(t: torch.Tensor, env_first: bool) -> torch.Tensor:
    """A contiguous tensor as uint8: (envs, bytes), or tiled (tiles, rows, TILE * elem)."""
    if not t.is_contiguous():
        raise ValueError("state arrays must be contiguous to be restored in place")
    if env_first:
        return t.reshape(t.shape[0], -1).view(torch.uint8)
    return t.view(torch.uint8)


class MaskedRestore:
    """Restore chosen bank entries into flagged envs of a batch, on the device.

    Build once per (batch state, bank); every call then launches one kernel per
    array and allocates nothing.
    """

    def __init__(self, state: Mapping[str, torch.Tensor], bank: SnapshotBank) -> None:
        t0 = next(iter(state.values()))
        self.num_envs = env_count(state)
        check_compatible(state, bank.state(0))
        self.bank = bank
        self.device = t0.device
        wp.init()
        self._wp_device = wp.device_from_torch(self.device)
        self.which = torch.full((self.num_envs,), -1, dtype=torch.int32, device=self.device)
        self._which_wp = wp.from_torch(self.which, dtype=wp.int32)
        self._jobs: list[tuple[bool, wp.array, wp.array, int]] = []
        for name, t in state.items():
            first = name in ENV_FIRST
            dst = wp.from_torch(_bytes_view(t, first), dtype=wp.uint8)
            src = wp.from_torch(_bytes_view(bank.arrays[name], first), dtype=wp.uint8)
            self._jobs.append((first, dst, src, t.element_size()))
        self._idx = torch.zeros((self.num_envs,), dtype=torch.int32, device=self.device)
        self._gen = torch.Generator(device=self.device)
        self._none = torch.tensor(-1, dtype=torch.int32, device=self.device)
        self._scalar = torch.tensor(0, dtype=torch.int32, device=self.device)
        self._any = torch.tensor(False, device=self.device)
        self._head = 0  # no split: restore_random draws uniformly over the bank (split())
        self._head_fraction = 0.0

    def seed(self, seed: int) -> None:
        self._gen.manual_seed(seed)

    def split(self, head: int, head_fraction: float) -> None:
        """Make :meth:`restore_random` draw among the bank's first ``head`` entries with
        probability ``head_fraction`` and among the others otherwise (uniformly within
        each part), instead of one uniform draw over the whole bank."""
        if not 0 < head < self.bank.size:
            raise ValueError(f"a split needs 0 < head < {self.bank.size} (the bank's size), "
                             f"got {head}")
        self._head = head
        self._head_fraction = float(head_fraction)
        self._idx_tail = torch.zeros_like(self._idx)
        self._u = torch.zeros(self.num_envs, dtype=torch.float32, device=self.device)
        self._take_head = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self._fraction = torch.tensor(self._head_fraction, dtype=torch.float32,
                                      device=self.device)

    def generator_state(self) -> torch.Tensor:
        """The state of the random stream :meth:`restore_random` draws from (for checkpoints)."""
        return self._gen.get_state()

    def set_generator_state(self, state: torch.Tensor) -> None:
        self._gen.set_state(state)

    def restore(self, mask: torch.Tensor, index: torch.Tensor | int = 0) -> None:
        """Envs with ``mask[e]`` get bank entry ``index`` (an int or an int32 ``[N]`` tensor)."""
        if isinstance(index, int):
            if not 0 <= index < self.bank.size:
                raise IndexError(f"bank index {index} out of range for a bank of {self.bank.size}")
            self._scalar.fill_(index)
            torch.where(mask, self._scalar, self._none, out=self.which)
        else:
            torch.where(mask, index.to(torch.int32), self._none, out=self.which)
        self._launch(mask)

    def restore_random(self, mask: torch.Tensor) -> None:
        """Envs with ``mask[e]`` get a random bank entry (device RNG, no sync): uniform,
        or as :meth:`split` set."""
        if self._head == 0:
            torch.randint(
                0, self.bank.size, (self.num_envs,), generator=self._gen, out=self._idx,
                device=self.device, dtype=torch.int32,
            )
        else:
            torch.randint(0, self._head, (self.num_envs,), generator=self._gen,
                          out=self._idx, device=self.device, dtype=torch.int32)
            torch.randint(self._head, self.bank.size, (self.num_envs,), generator=self._gen,
                          out=self._idx_tail, device=self.device, dtype=torch.int32)
            self._u.uniform_(generator=self._gen)
            torch.lt(self._u, self._fraction, out=self._take_head)
            torch.where(self._take_head, self._idx, self._idx_tail, out=self._idx)
        torch.where(mask, self._idx, self._none, out=self.which)
        self._launch(mask)

    def _launch(self, mask: torch.Tensor) -> None:
        # On the CPU a mask that flags no env is seen at once (no device to wait for), and
        # the launches, a pass over every env each, are skipped. (The draws above are made
        # either way, so the random stream does not depend on it.)
        if self.device.type == "cpu" and not bool(torch.any(mask, out=self._any)):
            return
        # Run on torch's current stream so the kernels see ``which`` (written by torch) in order.
        stream = wp.stream_from_torch(self.device) if self.device.type == "cuda" else None
        for first, dst, src, elem in self._jobs:
            if first:
                wp.launch(
                    _restore_env_first, dim=(self.num_envs, LANES_PER_ENV),
                    inputs=[dst, src, self._which_wp, LANES_PER_ENV], device=self._wp_device,
                    stream=stream,
                )
            else:
                wp.launch(
                    _restore_env_tiled, dim=(LANES_PER_ENV, self.num_envs),
                    inputs=[dst, src, self._which_wp, elem, LANES_PER_ENV],
                    device=self._wp_device, stream=stream,
                )
