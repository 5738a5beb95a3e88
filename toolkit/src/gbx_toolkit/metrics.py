"""Training metrics computed on the device, shared by every algorithm.

The functions here are pure: tensors in, tensors out, on the tensors' own
device, with no host transfer. :class:`MetricsAccumulator` gathers a logging
window (a rollout or several updates) into preallocated device buffers and
reads them back to the host exactly once per emitted record, so a trainer on
CUDA never stalls the GPU to log.

Record keys produced by :meth:`MetricsAccumulator.summary` follow the
``train_log.jsonl`` schema (see ``docs/observability.md``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

DEFAULT_QUANTILES: tuple[float, float, float] = (0.1, 0.5, 0.9)


def rate(mask: torch.Tensor) -> torch.Tensor:
    """Fraction of True entries of a boolean (or 0/1) tensor, as a 0-d float32 tensor."""
    if mask.numel() == 0:
        return torch.zeros((), dtype=torch.float32, device=mask.device)
    return mask.to(torch.float32).mean()


def percentiles(
    values: torch.Tensor, quantiles: Sequence[float] = DEFAULT_QUANTILES
) -> torch.Tensor:
    """Quantiles of all entries of ``values`` (linear interpolation), float32 ``[len(q)]``.

    Same definition as ``torch.quantile``'s default, but computed by sorting
    and indexing at positions known on the host (from the shape), because
    ``torch.quantile`` validates ``q`` on the device and so syncs on CUDA.
    ``values`` must not be empty: the caller knows how many samples it has
    without asking the device, so it can skip the call instead.
    """
    n = values.numel()
    if n == 0:
        raise ValueError("percentiles() got an empty tensor; skip the call without samples")
    ordered = torch.sort(values.reshape(-1).to(torch.float32)).values
    picked = []
    for q in quantiles:
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile {q} is outside [0, 1]")
        pos = q * (n - 1)
        lo = int(pos)
        hi = min(lo + 1, n - 1)
        frac = pos - lo
        # lerp is exact when both neighbours are equal and monotone in ``frac``, so
        # ascending quantiles give ascending values (a*(1-f) + b*f can be off by one ulp
        # and put p50 above p90 on ties); the clamp keeps it between its neighbours.
        low, high = ordered[lo], ordered[hi]
        picked.append(torch.lerp(low, high, frac).clamp(min=low, max=high))
    return torch.stack(picked)


def histogram(indices: torch.Tensor, num_bins: int) -> torch.Tensor:
    """Counts of each integer in ``[0, num_bins)`` as int64 ``[num_bins]``.

    Uses ``scatter_add_`` rather than ``torch.bincount`` because bincount's
    output length depends on the data, which forces a device-to-host sync on
    CUDA. Indices outside the range are an error (a device assert on CUDA).
    """
    flat = indices.reshape(-1).to(torch.int64)
    counts = torch.zeros(num_bins, dtype=torch.int64, device=flat.device)
    return counts.scatter_add_(0, flat, torch.ones_like(flat))


def categorical_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of categorical distributions given by ``logits [..., A]``; shape ``[...]``."""
    log_p = torch.log_softmax(logits.to(torch.float32), dim=-1)
    return -(log_p.exp() * log_p).sum(dim=-1)


def mean_std(values: torch.Tensor) -> torch.Tensor:
    """Population mean and standard deviation of all entries, float32 ``[2]``."""
    flat = values.reshape(-1).to(torch.float32)
    mean = flat.mean()
    std = (flat - mean).square().mean().sqrt()
    return torch.stack([mean, std])


# Slots of the packed device sum vector. Keeping every running sum in one
# float64 vector makes the per-record read-back a single transfer; float64
# keeps counts exact up to 2**53.
_REWARD = 1  # slot 0 is unused: env steps are counted on the host
_DONE = 2
_TRUNC = 3
_RESET = 4
_EPISODES = 5
_SUCCESS = 6
_RETURN = 7
_LENGTH = 8
_ENTROPY = 9
_ENTROPY_N = 10
_VALUE = 11
_VALUE_SQ = 12
_VALUE_N = 13
_NUM_FIXED = 14


class MetricsAccumulator:
    """Aggregates per-step and per-update statistics of a logging window on the device.

    Every ``add_*`` call only launches device work on preallocated buffers;
    the number of samples seen is tracked on the host from tensor shapes, so
    nothing waits for the device. :meth:`summary` reads everything back in one
    transfer, returns a record dict and starts a new window.

    Per-env running episode return and length persist across windows, so an
    episode spanning two records is counted once, when it ends.
    """

    def __init__(
        self,
        num_envs: int,
        num_actions: int,
        device: torch.device | str,
        *,
        dist_capacity: int = 65536,
        max_extras: int = 32,
    ) -> None:
        if num_envs <= 0 or num_actions <= 0:
            raise ValueError("MetricsAccumulator needs num_envs > 0 and num_actions > 0")
        self.num_envs = num_envs
        self.num_actions = num_actions
        self.device = torch.device(device)
        self._extra_base = _NUM_FIXED + num_actions
        self._max_extras = max_extras
        size = self._extra_base + 2 * max_extras  # each extra: sum and count
        self._sums = torch.zeros(size, dtype=torch.float64, device=self.device)
        # Running return (row 0) and length (row 1) of each env's current episode.
        self._episode = torch.zeros(2, num_envs, dtype=torch.float32, device=self.device)
        self._ep_return = self._episode[0]
        self._ep_length = self._episode[1]
        self._dist = torch.zeros(dist_capacity, dtype=torch.float32, device=self.device)
        self._dist_capacity = dist_capacity
        self._no_success = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self._ones = torch.ones(num_envs, dtype=torch.float64, device=self.device)
        self._extra_slots: dict[str, int] = {}
        # Callables returning {name: 0-d device tensor or number} (gbx.api.WindowMetrics):
        # read in the record's single transfer.
        self._sources: list[Callable[[], Mapping[str, Any]]] = []
        self._dist_cursor = 0  # host-side ring position: known from shapes, no sync
        self._dist_count = 0
        self._window_steps = 0

    # -- adding (device work only) -------------------------------------------------

    def add_step(
        self,
        reward: torch.Tensor,
        done: torch.Tensor,
        trunc: torch.Tensor,
        *,
        reset_mask: torch.Tensor | None = None,
        success: torch.Tensor | None = None,
        actions: torch.Tensor | None = None,
        dist: torch.Tensor | None = None,
    ) -> None:
        """Account one env step of the whole batch (all tensors ``[num_envs]``).

        ``reset_mask`` defaults to ``done | trunc``; ``success`` flags envs whose
        episode ended in success at this step; ``dist`` is a per-env distance
        to the goal, sampled for the window's percentiles.
        """
        # Few, batched kernels: this runs every env step, and each launch costs
        # host time even though nothing waits for the device.
        reward = reward if reward.dtype == torch.float32 else reward.to(torch.float32)
        ended = done | trunc
        if reset_mask is None:
            reset_mask = ended
        success_ended = ended & success if success is not None else self._no_success
        self._ep_return.add_(reward)
        self._ep_length.add_(1.0)
        # Rows in the order of the slots _REWARD.._SUCCESS (stack promotes bools to float).
        rows = torch.stack([reward, done, trunc, reset_mask, ended, success_ended])
        ended_returns = self._episode @ rows[4]  # return and length sums of ended episodes
        self._sums[_REWARD : _LENGTH + 1].add_(torch.cat([rows.sum(dim=1), ended_returns]))
        self._episode.masked_fill_(ended, 0.0)
        if actions is not None:
            self.add_actions(actions)
        if dist is not None:
            self._add_dist(dist)
        self._window_steps += reward.numel()

    def add_actions(self, actions: torch.Tensor) -> None:
        """Count actions (int ``[...]`` in ``[0, num_actions)``) into the action histogram."""
        hist = self._sums[_NUM_FIXED : _NUM_FIXED + self.num_actions]
        flat = actions.reshape(-1)
        if flat.dtype != torch.int64:
            flat = flat.to(torch.int64)
        if flat.numel() == self.num_envs:
            ones = self._ones
        else:
            ones = torch.ones_like(flat, dtype=torch.float64)
        hist.scatter_add_(0, flat, ones)

    def add_policy(
        self, *, entropy: torch.Tensor | None = None, value: torch.Tensor | None = None
    ) -> None:
        """Account per-sample policy entropy and value estimates (any shape)."""
        if entropy is not None:
            self._sums[_ENTROPY] += entropy.to(torch.float64).sum()
            self._sums[_ENTROPY_N] += float(entropy.numel())
        if value is not None:
            v = value.to(torch.float64)
            self._sums[_VALUE] += v.sum()
            self._sums[_VALUE_SQ] += v.square().sum()
            self._sums[_VALUE_N] += float(value.numel())

    def add_scalars(self, **scalars: torch.Tensor | float) -> None:
        """Average algorithm-specific scalars (losses, KL, ...) over the window.

        A NaN or infinite value counts as not added: some scalars are undefined on
        some batches (explained variance when every return is equal), and the window
        reports the mean of the defined ones, or leaves the key out. Losses that turn
        non-finite are caught by :class:`gbx_toolkit.guard.FiniteGuard`, not here.
        """
        for name, value in scalars.items():
            slot = self._extra_slots.get(name)
            if slot is None:
                if len(self._extra_slots) >= self._max_extras:
                    raise ValueError(
                        f"more than {self._max_extras} extra scalars; raise max_extras"
                    )
                slot = self._extra_base + 2 * len(self._extra_slots)
                self._extra_slots[name] = slot
            if isinstance(value, torch.Tensor):
                mean = value.detach().to(torch.float64).mean()
                defined = torch.isfinite(mean)  # stays on the device: no host read
                self._sums[slot] += torch.where(defined, mean, 0.0)
                self._sums[slot + 1] += defined.to(torch.float64)
            elif math.isfinite(float(value)):
                self._sums[slot] += float(value)
                self._sums[slot + 1] += 1.0

    def add_source(self, source: Callable[[], Mapping[str, Any]]) -> None:
        """Add ``source()``'s values to every record (``window_metrics`` of a
        :class:`gbx.api.WindowMetrics`): its tensors come back in the same transfer."""
        self._sources.append(source)

    def _add_dist(self, dist: torch.Tensor) -> None:
        flat = dist.reshape(-1).to(torch.float32)
        n = flat.numel()
        if n >= self._dist_capacity:  # keep the newest samples only
            flat = flat[n - self._dist_capacity :]
            n = self._dist_capacity
        first = min(n, self._dist_capacity - self._dist_cursor)
        self._dist[self._dist_cursor : self._dist_cursor + first].copy_(flat[:first])
        if first < n:
            self._dist[: n - first].copy_(flat[first:])
        self._dist_cursor = (self._dist_cursor + n) % self._dist_capacity
        self._dist_count = min(self._dist_count + n, self._dist_capacity)

    # -- reading (one host sync) -----------------------------------------------------

    def summary(self) -> dict[str, float | int | list[int]]:
        """Return the window's record fields and start a new window.

        Reads the device exactly once. Keys whose inputs were never added in
        this window are left out rather than reported as zero or NaN.
        """
        parts = [self._sums]
        has_dist = self._dist_count > 0
        if has_dist:
            parts.append(percentiles(self._dist[: self._dist_count]).to(torch.float64))
        extra: dict[str, float] = {}
        names: list[str] = []
        for source in self._sources:
            for name, value in source().items():
                if isinstance(value, torch.Tensor):
                    names.append(name)
                    parts.append(value.detach().reshape(1).to(torch.float64))
                else:
                    extra[name] = value
        host = torch.cat(parts).tolist()  # the single device-to-host transfer
        if names:
            extra.update(zip(names, host[len(host) - len(names):], strict=True))
            host = host[: len(host) - len(names)]
        record = self._record_from(host, has_dist)
        record.update(extra)
        self.reset_window()
        return record

    def _record_from(
        self, host: list[float], has_dist: bool
    ) -> dict[str, float | int | list[int]]:
        steps = self._window_steps
        out: dict[str, float | int | list[int]] = {}
        if steps > 0:
            out["reward_mean"] = host[_REWARD] / steps
            out["done_rate"] = host[_DONE] / steps
            out["trunc_rate"] = host[_TRUNC] / steps
            out["reset_rate"] = host[_RESET] / steps
        episodes = int(host[_EPISODES])
        out["episodes"] = episodes
        if episodes > 0:
            out["success_rate"] = host[_SUCCESS] / episodes
            out["episode_return_mean"] = host[_RETURN] / episodes
            out["episode_length_mean"] = host[_LENGTH] / episodes
        if host[_ENTROPY_N] > 0:
            out["entropy_mean"] = host[_ENTROPY] / host[_ENTROPY_N]
        if host[_VALUE_N] > 0:
            mean = host[_VALUE] / host[_VALUE_N]
            var = max(host[_VALUE_SQ] / host[_VALUE_N] - mean * mean, 0.0)
            out["value_mean"] = mean
            out["value_std"] = var**0.5
        hist = [int(c) for c in host[_NUM_FIXED : _NUM_FIXED + self.num_actions]]
        if any(hist):
            out["action_hist"] = hist
        for name, slot in self._extra_slots.items():
            if host[slot + 1] > 0:
                out[name] = host[slot] / host[slot + 1]
        if has_dist:
            tail = len(host) - 3
            out["dist_p10"], out["dist_p50"], out["dist_p90"] = host[tail : tail + 3]
        return out

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Per-env running episode sums, so an episode spanning a checkpoint is counted once.

        The window itself is not saved: a resumed run starts a fresh window.
        """
        return {"ep_return": self._ep_return.clone(), "ep_length": self._ep_length.clone()}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        for key, target in (("ep_return", self._ep_return), ("ep_length", self._ep_length)):
            value = state[key]
            if tuple(value.shape) != tuple(target.shape):
                raise ValueError(
                    f"accumulator state {key!r} has shape {tuple(value.shape)}, expected "
                    f"{tuple(target.shape)}; resume with the same num_envs"
                )
            target.copy_(value)

    def reset_window(self) -> None:
        """Clear the window's sums (running per-env episode state is kept)."""
        self._sums.zero_()
        self._dist_cursor = 0
        self._dist_count = 0
        self._window_steps = 0
