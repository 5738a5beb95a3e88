"""Golden snapshots of one env's state and masked restores into a batch.

The batch's state is a dict of named device tensors (``batch.state_tensors()``),
each holding every env along one axis: the interleaved per-env arrays
(``mem``, ``st``, ``tm``, ``cram``, ...) keep the env on the **last** axis,
the framebuffer ``fb`` keeps it on the **first**. An :class:`EnvState` is
one env's slice of every array (env axis removed).

A :class:`SnapshotBank` holds ``B`` env states stacked in the batch's layout
(env axis replaced by a bank axis). :class:`MaskedRestore` copies bank entry
``which[e]`` into env ``e`` for every env with ``which[e] >= 0``:

* one Warp kernel launch per array, over ``(C, N)`` threads (``C`` = a fixed
  number of lanes per env, 64); the threads of an env that is not being reset
  read one ``int32`` and exit, so the bytes copied are proportional to the
  number of envs reset, and the launch size is a small constant times ``N``;
* no index compaction (``torch.nonzero`` would sync with the host) and no
  Python loop over envs; ``which`` is computed on the device from the mask.

All arrays are restored as raw bytes (``tensor.view(torch.uint8)``), so one
kernel serves every dtype.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from gbx_gameboy.warp_setup import wp

wp.set_module_options({"enable_backward": False})

EnvState = dict[str, torch.Tensor]

LANES_PER_ENV = 64
ENV_FIRST = frozenset({"fb"})  # arrays laid out [num_envs, ...]; all others [..., num_envs]


def env_axis(name: str, tensor: torch.Tensor) -> int:
    """The axis of ``tensor`` that indexes envs (0 for ``fb``, the last axis otherwise)."""
    return 0 if name in ENV_FIRST else tensor.dim() - 1


def capture(state: Mapping[str, torch.Tensor], env: int) -> EnvState:
    """A device copy of env ``env``'s slice of every state array."""
    out: EnvState = {}
    for name, t in state.items():
        n = t.shape[env_axis(name, t)]
        if not 0 <= env < n:
            raise IndexError(f"env {env} out of range for a batch of {n} envs")
        out[name] = t.select(env_axis(name, t), env).clone()
    return out


def write_env(state: Mapping[str, torch.Tensor], env: int | None, values: EnvState) -> None:
    """Copy one env state into env ``env`` of the batch (all envs when ``env`` is None).

    One device copy per array; the arrays must match the batch's names and shapes.
    """
    check_compatible(state, values)
    for name, t in state.items():
        ax = env_axis(name, t)
        if env is None:
            v = values[name].to(device=t.device)
            t.copy_(v.unsqueeze(ax).expand_as(t))
        else:
            t.select(ax, env).copy_(values[name])


def check_compatible(state: Mapping[str, torch.Tensor], values: Mapping[str, torch.Tensor]) -> None:
    """Raise ValueError naming the first array whose name/shape/dtype does not match."""
    missing = sorted(set(state) - set(values))
    extra = sorted(set(values) - set(state))
    if missing or extra:
        raise ValueError(
            f"state arrays differ from the batch's: missing {missing}, unexpected {extra}"
        )
    for name, t in state.items():
        want = tuple(s for i, s in enumerate(t.shape) if i != env_axis(name, t))
        got = tuple(values[name].shape)
        if want != got or values[name].dtype != t.dtype:
            raise ValueError(
                f"state array {name!r} is {values[name].dtype}{list(got)}, "
                f"the batch needs {t.dtype}{list(want)}"
            )


class SnapshotBank:
    """``B`` env states stacked along the env axis of each array, on one device."""

    def __init__(self, arrays: dict[str, torch.Tensor], size: int) -> None:
        self.arrays = arrays
        self.size = size

    @classmethod
    def from_states(cls, states: list[EnvState], device: torch.device | str) -> SnapshotBank:
        if not states:
            raise ValueError("a snapshot bank needs at least one state")
        arrays = {}
        for name, first in states[0].items():
            ax = 0 if name in ENV_FIRST else first.dim()
            arrays[name] = torch.stack([s[name] for s in states], dim=ax).to(device).contiguous()
        return cls(arrays, len(states))

    def state(self, index: int) -> EnvState:
        return capture(self.arrays, index)


@wp.kernel
def _restore_env_last(
    dst: wp.array2d(dtype=wp.uint8),
    src: wp.array2d(dtype=wp.uint8),
    which: wp.array(dtype=wp.int32),
    elem: int,
    lanes: int,
):
    # dst is (rows, N * elem), src (rows, B * elem): env e owns columns e*elem .. e*elem+elem-1.
    lane, env = wp.tid()
    b = which[env]
    if b < 0:
        return
    for r in range(lane, dst.shape[0], lanes):
        for k in range(elem):
            dst[r, env * elem + k] = src[r, b * elem + k]


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


def _bytes_2d(t: torch.Tensor, env_first: bool) -> torch.Tensor:
    """A contiguous tensor as a 2-D uint8 view: (envs, bytes) or (rows, envs * elem)."""
    if not t.is_contiguous():
        raise ValueError("state arrays must be contiguous to be restored in place")
    if env_first:
        return t.reshape(t.shape[0], -1).view(torch.uint8)
    return t.reshape(-1, t.shape[-1]).view(torch.uint8)


class MaskedRestore:
    """Restore chosen bank entries into flagged envs of a batch, on the device.

    Build once per (batch state, bank); every call then launches one kernel per
    array and allocates nothing.
    """

    def __init__(self, state: Mapping[str, torch.Tensor], bank: SnapshotBank) -> None:
        name0, t0 = next(iter(state.items()))
        self.num_envs = t0.shape[env_axis(name0, t0)]
        for name, t in state.items():
            check_compatible({name: t}, {name: bank.arrays[name].select(env_axis(name, t), 0)})
        self.bank = bank
        self.device = t0.device
        wp.init()
        self._wp_device = wp.device_from_torch(self.device)
        self.which = torch.full((self.num_envs,), -1, dtype=torch.int32, device=self.device)
        self._which_wp = wp.from_torch(self.which, dtype=wp.int32)
        self._jobs: list[tuple[bool, wp.array, wp.array, int]] = []
        for name, t in state.items():
            first = name in ENV_FIRST
            dst = wp.from_torch(_bytes_2d(t, first), dtype=wp.uint8)
            src = wp.from_torch(_bytes_2d(bank.arrays[name], first), dtype=wp.uint8)
            self._jobs.append((first, dst, src, t.element_size()))
        self._idx = torch.zeros((self.num_envs,), dtype=torch.int32, device=self.device)
        self._gen = torch.Generator(device=self.device)
        self._none = torch.tensor(-1, dtype=torch.int32, device=self.device)
        self._scalar = torch.tensor(0, dtype=torch.int32, device=self.device)

    def seed(self, seed: int) -> None:
        self._gen.manual_seed(seed)

    def restore(self, mask: torch.Tensor, index: torch.Tensor | int = 0) -> None:
        """Envs with ``mask[e]`` get bank entry ``index`` (an int or an int32 ``[N]`` tensor)."""
        if isinstance(index, int):
            if not 0 <= index < self.bank.size:
                raise IndexError(f"bank index {index} out of range for a bank of {self.bank.size}")
            self._scalar.fill_(index)
            torch.where(mask, self._scalar, self._none, out=self.which)
        else:
            torch.where(mask, index.to(torch.int32), self._none, out=self.which)
        self._launch()

    def restore_random(self, mask: torch.Tensor) -> None:
        """Envs with ``mask[e]`` get a uniformly random bank entry (device RNG, no sync)."""
        torch.randint(
            0, self.bank.size, (self.num_envs,), generator=self._gen, out=self._idx,
            device=self.device, dtype=torch.int32,
        )
        torch.where(mask, self._idx, self._none, out=self.which)
        self._launch()

    def _launch(self) -> None:
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
                    _restore_env_last, dim=(LANES_PER_ENV, self.num_envs),
                    inputs=[dst, src, self._which_wp, elem, LANES_PER_ENV],
                    device=self._wp_device, stream=stream,
                )
