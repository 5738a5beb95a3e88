"""The archive of cells: fixed-size device tables and the pure rules that update them.

Per cell (``capacity`` slots, plus one spare "sink" entry at index ``capacity`` that
absorbs the writes of envs with nothing to write, so no step needs a variable-size index):

* ``keys``: the cell id (``-1`` = empty slot);
* ``visits``: how many env steps ended in the cell;
* ``best``: the fewest env steps from the task's real start state to the cell seen so far;
  the slot's saved env state (kept by the env's :class:`gbx.api.EnvSnapshots`, same slot
  index) is the one that got there in ``best`` steps;
* ``found_at``: the explorer step at which the cell entered the archive;
* ``chosen``: how many episodes restarted from it;
* ``goal``: the goal distance of its saved state (when the env declares
  :class:`gbx.api.GoalDistanceEnv`; else 1);
* ``tries``, ``wins``: of the recent restarts from it that ended, how many, and how many
  of those reached the goal (both halved whenever ``tries`` passes the window, so they
  follow the policy as it learns).

Rules (all device work; nothing reads the device from the host):

* **Insert / improve.** An env that did not reset in this step and whose cell is new, or
  known but reached in fewer steps than ``best``, saves its state into the cell's slot.
  Among several envs in one cell the one with the fewest steps wins (ties: lowest env).
* **Eviction.** A new cell takes an empty slot; once the archive is full it replaces the
  cell with the most visits (ties: lowest slot), never a cell improved in the same step.
  The archive thus stays at ``capacity`` cells and forgets the best-explored ones first.
* **Selection weight** of an archived cell (restarts draw cells in proportion to it)::

      w = w_visits / sqrt(1 + visits)                       # rarely visited
        + w_recent * 0.5 ** ((now - found_at) / halflife)   # recently discovered
        + w_goal * exp(-(goal - min goal) / goal_scale)     # closest to the goal
        + w_frontier * 4 p (1 - p),  p = wins / tries       # sometimes won from

  (the goal term only with a goal-distance env; the frontier term only for cells with
  ended restarts). The frontier term is a reverse curriculum: the restarts go where the
  policy reaches the goal from about half the time, close to the goal at first and then,
  as it learns, farther back, where every other cell pays nothing for it.
* **Novelty.** After the inserts, each env's cell gains one visit; the count-based bonus
  is ``bonus / sqrt(visits)`` (a cell not in the archive counts as one visit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs
import torch

EMPTY = -1
_NOT_A_CANDIDATE = 1 << 62  # above every cell id (ids are < 2**62)
_PROTECTED = 1 << 62  # eviction priority of slots that may not be replaced this step
_EMPTY_FIRST = -(1 << 62)


@attrs.frozen
class Weighting:
    """The terms of the selection weight (see the module docstring)."""

    visits: float = 1.0
    recent: float = 0.0
    halflife: float = 100.0
    goal: float = 0.0
    goal_scale: float = 0.02
    frontier: float = 0.0
    frontier_window: float = 64.0


class Archive:
    """``capacity`` cells on one device (see the module docstring for the rules)."""

    STATE = ("keys", "visits", "best", "found_at", "chosen", "goal", "sorted_keys",
             "sorted_slots", "discovered", "tries", "wins")
    # Tables that archives saved before they existed lack; they load as empty.
    ADDED_LATER = ("tries", "wins")

    def __init__(self, capacity: int, num_envs: int, device: torch.device | str,
                 weighting: Weighting | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"archive capacity must be >= 1, got {capacity}")
        self.capacity = c = int(capacity)
        self.num_envs = n = int(num_envs)
        self.weighting = weighting or Weighting()
        dev = self.device = torch.device(device)
        i64 = torch.int64
        self.keys = torch.full((c + 1,), EMPTY, dtype=i64, device=dev)
        self.visits = torch.zeros(c + 1, dtype=i64, device=dev)
        self.best = torch.zeros(c + 1, dtype=i64, device=dev)
        self.found_at = torch.zeros(c + 1, dtype=i64, device=dev)
        self.chosen = torch.zeros(c + 1, dtype=i64, device=dev)
        self.goal = torch.ones(c + 1, dtype=torch.float32, device=dev)
        self.tries = torch.zeros(c + 1, dtype=torch.float32, device=dev)
        self.wins = torch.zeros(c + 1, dtype=torch.float32, device=dev)
        # keys in ascending order and the slot of each: the lookup table (searchsorted)
        self.sorted_keys = torch.full((c,), EMPTY, dtype=i64, device=dev)
        self.sorted_slots = torch.arange(c, dtype=i64, device=dev)
        self.discovered = torch.zeros((), dtype=i64, device=dev)  # cells ever added
        self._now = torch.zeros((), dtype=i64, device=dev)
        self._ones = torch.ones(n, dtype=i64, device=dev)
        self._zeros = torch.zeros(n, dtype=i64, device=dev)
        self._save = torch.full((n,), -1, dtype=i64, device=dev)
        # step buffers, so an update or a choice makes no tables of its own
        self._protected = torch.zeros(c + 1, dtype=torch.bool, device=dev)
        self._u = torch.zeros(n, dtype=torch.float64, device=dev)
        self._coin = torch.zeros(n, dtype=torch.float32, device=dev)
        self._fzeros = torch.zeros(n, dtype=torch.float32, device=dev)
        self._ended = torch.zeros(n, dtype=torch.float32, device=dev)
        self._won = torch.zeros(n, dtype=torch.float32, device=dev)
        self._ended_at = torch.zeros(n, dtype=torch.int64, device=dev)
        self._sinks = torch.full((n,), c, dtype=torch.int64, device=dev)
        self._over = torch.zeros(c + 1, dtype=torch.bool, device=dev)
        self._factor = torch.ones(c + 1, dtype=torch.float32, device=dev)

    # -- lookups ---------------------------------------------------------------------

    def lookup(self, cells: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(found bool [N], slot int64 [N])``; the slot is ``capacity`` (the sink) for
        cells not in the archive."""
        c = self.capacity
        pos = torch.searchsorted(self.sorted_keys, cells).clamp_max_(c - 1)
        found = self.sorted_keys[pos] == cells
        return found, torch.where(found, self.sorted_slots[pos], c)

    def size(self) -> torch.Tensor:
        """Cells in the archive (device scalar)."""
        return (self.keys[: self.capacity] >= 0).sum()

    def frontier_size(self) -> torch.Tensor:
        """Cells whose recent restarts reached the goal sometimes but not always (device
        scalar): where the frontier term sends restarts; 0 until restarts are scored."""
        c = self.capacity
        return ((self.wins[:c] > 0) & (self.wins[:c] < self.tries[:c])).sum()

    # -- insert / improve / evict --------------------------------------------------------

    def update(self, cells: torch.Tensor, can_save: torch.Tensor, steps: torch.Tensor,
               goal: torch.Tensor | None, now: int) -> torch.Tensor:
        """Insert new cells and improve known ones; return the slot each env must save its
        state into (``int64 [N]``, ``-1`` for none; no two envs share a slot).

        ``cells`` int64 ``[N]``; ``can_save`` bool ``[N]`` (envs whose state is the one
        their cell was computed from); ``steps`` int64 ``[N]`` from the real start;
        ``goal`` float32 ``[N]`` or None; ``now`` the explorer's step.
        """
        c = self.capacity
        found, slot = self.lookup(cells)
        better = found & (steps < self.best[slot])
        candidate = can_save & (~found | better)
        key = torch.where(candidate, cells, _NOT_A_CANDIDATE)
        # Envs ordered by (cell, steps): two stable sorts, the secondary key first.
        by_steps = torch.sort(steps, stable=True).indices
        by_cell = torch.sort(key[by_steps], stable=True)
        order = by_steps[by_cell.indices]
        ks = by_cell.values
        first = ks != _NOT_A_CANDIDATE
        first[1:] &= ks[1:] != ks[:-1]  # the fewest-steps env of each candidate cell
        found_o, slot_o = found[order], slot[order]
        new = first & ~found_o
        improve = first & found_o
        # Slots for new cells: empty ones first, then the most visited, never an improved one.
        prio = torch.where(self.keys[:c] < 0, _EMPTY_FIRST, -self.visits[:c])
        protected = self._protected.fill_(False)
        protected.scatter_(0, torch.where(improve, slot_o, c), True)
        prio = torch.where(protected[:c], _PROTECTED, prio)
        victims = torch.sort(prio, stable=True).indices
        # The r-th new cell of this step takes the r-th victim; beyond the last free or
        # replaceable slot, new cells wait for a later step.
        rank = torch.cumsum(new.to(torch.int64), 0) - 1
        new &= rank < c
        victim = victims[rank.clamp(0, c - 1)]
        new &= prio[victim] < _PROTECTED
        target = torch.where(improve, slot_o, torch.where(new, victim, -1))
        self._save.fill_(-1)
        self._save.scatter_(0, order, target)
        # Table writes; envs without a target write into the sink entry.
        sink = torch.where(target >= 0, target, c)
        self.keys.scatter_(0, sink, ks)
        self.best.scatter_(0, sink, steps[order])
        if goal is not None:
            self.goal.scatter_(0, sink, goal[order].to(torch.float32))
        fresh = torch.where(new, victim, c)
        self._now.fill_(now)
        self.visits.scatter_(0, fresh, self._zeros)
        self.chosen.scatter_(0, fresh, self._zeros)
        self.tries.scatter_(0, fresh, self._fzeros)
        self.wins.scatter_(0, fresh, self._fzeros)
        self.found_at.scatter_(0, fresh, self._now.expand(self.num_envs))
        self.discovered += new.sum()
        self._clear_sink()
        torch.sort(self.keys[:c], out=(self.sorted_keys, self.sorted_slots))
        return self._save

    def visit(self, cells: torch.Tensor) -> torch.Tensor:
        """Count one visit of each env's cell; return each env's visit count after it
        (``int64 [N]``; 1 for a cell not in the archive)."""
        found, slot = self.lookup(cells)
        self.visits.scatter_add_(0, slot, self._ones)
        counts = torch.where(found, self.visits[slot], 1)
        self._clear_sink()
        return counts

    def score(self, slots: torch.Tensor, ended: torch.Tensor, won: torch.Tensor) -> None:
        """Count the restarts that ended: env ``e`` in ``ended`` (bool ``[N]``) had restarted
        from slot ``slots[e]`` and reached the goal if ``won[e]``. Then halve both counts of
        every cell whose ``tries`` passed the window, so its rate follows the policy."""
        torch.where(ended, slots, self._sinks, out=self._ended_at)
        self._ended.copy_(ended)
        self._won.copy_(won).mul_(self._ended)
        self.tries.scatter_add_(0, self._ended_at, self._ended)
        self.wins.scatter_add_(0, self._ended_at, self._won)
        torch.gt(self.tries, self.weighting.frontier_window, out=self._over)
        self._factor.fill_(1.0).masked_fill_(self._over, 0.5)
        self.tries.mul_(self._factor)
        self.wins.mul_(self._factor)
        self._clear_sink()

    def _clear_sink(self) -> None:
        c = self.capacity
        self.keys[c:].fill_(EMPTY)
        for t in (self.visits, self.best, self.found_at, self.chosen, self.tries, self.wins):
            t[c:].zero_()
        self.goal[c:].fill_(1.0)

    # -- selection -------------------------------------------------------------------------

    def weights(self, now: int, use_goal: bool) -> torch.Tensor:
        """The selection weight of every slot, ``float64 [capacity]`` (0 for empty slots)."""
        c, w = self.capacity, self.weighting
        occupied = self.keys[:c] >= 0
        out = w.visits * torch.rsqrt(1.0 + self.visits[:c].to(torch.float64))
        if w.recent:
            age = (now - self.found_at[:c]).to(torch.float64)
            out = out + w.recent * torch.exp2(-age / w.halflife)
        if use_goal and w.goal:
            goal = self.goal[:c].to(torch.float64)
            nearest = torch.where(occupied, goal, math.inf).min()
            out = out + w.goal * torch.exp(-(goal - nearest) / w.goal_scale)
        if w.frontier:
            tries = self.tries[:c].to(torch.float64)
            rate = self.wins[:c].to(torch.float64) / tries.clamp_min(1e-9)
            out = out + w.frontier * torch.where(tries > 0, 4.0 * rate * (1.0 - rate), 0.0)
        return torch.where(occupied, out, 0.0)

    def choose(self, resetting: torch.Tensor, fraction: float, generator: torch.Generator,
               now: int, use_goal: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Which resetting envs restart from the archive, and from which slot.

        Returns ``(pick bool [N], slot int64 [N])``: each env in ``resetting`` picks the
        archive with probability ``fraction`` (when it holds a cell), and a slot drawn in
        proportion to :meth:`weights` (inverse-CDF sampling: no host read).
        """
        n = resetting.shape[0]
        cdf = torch.cumsum(self.weights(now, use_goal), 0)
        total = cdf[-1]
        u = torch.rand(n, generator=generator, device=self.device, dtype=torch.float64,
                       out=self._u)
        slot = torch.searchsorted(cdf, u * total, right=True).clamp_max_(self.capacity - 1)
        coin = torch.rand(n, generator=generator, device=self.device, out=self._coin)
        pick = resetting & (coin < fraction) & (total > 0)
        self.chosen.scatter_add_(0, torch.where(pick, slot, self.capacity), self._ones)
        self._clear_sink()
        return pick, slot

    # -- state -----------------------------------------------------------------------------

    def nbytes(self) -> int:
        own = [getattr(self, k) for k in self.STATE]
        own += [self._now, self._ones, self._zeros, self._save, self._protected, self._u,
                self._coin, self._fzeros, self._ended, self._won, self._ended_at, self._sinks,
                self._over, self._factor]
        return sum(t.numel() * t.element_size() for t in own)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k).clone() for k in self.STATE}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for key in self.STATE:
            dst, src = getattr(self, key), state.get(key)
            if src is None and key in self.ADDED_LATER:
                dst.zero_()
                continue
            if not isinstance(src, torch.Tensor) or src.shape != dst.shape:
                got = "missing" if not isinstance(src, torch.Tensor) else list(src.shape)
                raise ValueError(f"saved archive table {key!r} is {got}, this archive needs "
                                 f"{list(dst.shape)}: resume with the same explore.capacity")
            dst.copy_(src.to(device=dst.device, dtype=dst.dtype))
