"""The ``archive`` explorer: an env wrapper around a run's training envs.

Each step, after the wrapped env stepped (all on the device, no host reads):

1. the cell of every env's newest frame (``info["final_obs"]``, the frame the step
   reached, also for envs that finished) is hashed (:mod:`gbx_explore.cells`);
2. envs that did not finish insert new cells, or improve known ones, in the archive and
   save their full state into the cell's slot (:mod:`gbx_explore.archive`);
3. every env's cell gains a visit; the intrinsic reward ``bonus / sqrt(visits)`` is added
   to the extrinsic reward the trainer sees;
4. with ``explore_steps`` set, an episode that started from an archived cell ends
   (truncated) after that many steps: short bursts of play from the frontier, Go-Explore's
   "return, then explore", instead of whole episodes that reset in lockstep;
5. of the envs that finished, a ``start_fraction`` restart from archived cells drawn by
   the selection weight; the rest keep the start state the env reset them to, or, for
   the episodes the explorer ended, one of the states the env started from
   (``HOME_SLOTS`` of them, saved when the batch was first reset).

With ``scout_steps``, the first training step is preceded by that many steps of
uniformly random play in which every finished episode or burst restarts from an archived
cell, the episodes under way from the start states being cut to bursts too (Go-Explore's
exploration phase; random buttons go farther from a cell than a policy that already knows
the way to somewhere else). The trainer sees none of it: the env's state is saved before
(:meth:`gbx.api.StatefulEnv.env_state_dict`) and put back after, so training starts from
the observation it was given, with the archive filled.

Each env carries its step count from the real start state (an env restarted from a
cell inherits the cell's ``best``), which ranks the saved states of a cell.

With an env that tells where its episodes began (:class:`gbx.api.StartOriginEnv`) each
env also carries its origin: whether its episode descends from one of the curriculum's
start states or from the real start; an env restarted from a cell, or from a start state
the explorer saved, takes the origin of the state it restarts from. The records count the
ended episodes that began at the real start, and their successes, apart (the
training-time view of what an evaluation measures), and likewise those that began at a
curriculum start state. With ``split_by_start`` the origin is one more input of the cell
id (the id is XORed with a fixed 62-bit salt), so the two kinds of episode never share a
cell.

The trainer's records get the explorer's statistics through
:class:`gbx.api.WindowMetrics`; its state (archive tables, saved env states, step
counts, random stream) is part of :meth:`env_state_dict`, so a resumed run continues
exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch

from gbx.api import (
    EnvMeta,
    EnvSnapshots,
    EpisodeProgressEnv,
    GoalDistanceEnv,
    SnapshotEnv,
    StartOriginEnv,
)
from gbx.errors import ConfigError
from gbx_explore.archive import Archive, Weighting
from gbx_explore.cells import CellHasher
from gbx_explore.config import ArchiveConfig

(_EXTRINSIC, _INTRINSIC, _STARTS, _RESETS, _REAL_EPISODES, _REAL_SUCCESSES,
 _STATE_EPISODES, _STATE_SUCCESSES, _REAL_MILESTONES, _STATE_MILESTONES,
 _RESTART_EPISODES, _RESTART_SUCCESSES) = range(12)
# Start states kept for the episodes the explorer ends itself (explore_steps): the env's
# own reset draws from its start bank (the real start, a curriculum's states), and so many
# of those draws cover a bank of that size with room to spare.
HOME_SLOTS = 64
# Scouting looks at its goal count (one read on the host) once per this many steps.
SCOUT_CHECK_EVERY = 16
# The per-env counters the scouting puts back as they were.
_PER_ENV = ("steps", "since", "from_cell", "origin", "start_slot")
# XORed into the cell id of a screen reached from a curriculum's start state
# (split_by_start): a fixed odd value below 2**62, so ids stay non-negative and stable.
ORIGIN_SALT = 0x2D3B_6A91_C5E7_0F4B


class ArchiveExplorer:
    """A :class:`gbx.api.Env` wrapping a :class:`gbx.api.SnapshotEnv` batch."""

    def __init__(self, config: ArchiveConfig, env: SnapshotEnv, *, seed: int) -> None:
        self.split = bool(config.split_by_start)
        # Origins are followed whenever the env tells them (the real-start episode counts
        # need them); they enter the cell id only with split_by_start.
        self.track = isinstance(env, StartOriginEnv)
        # The milestones passed, forwarded to the trainer (gbx.api.EpisodeProgressEnv).
        self._progress = env if isinstance(env, EpisodeProgressEnv) else None
        if self.split and not self.track:
            raise ConfigError(
                "explore.split_by_start needs an env with the gbx.api.StartOriginEnv "
                "capability (it says where each episode began); this env lacks it: set "
                "explore.split_by_start=false")
        self.config = config
        self.env: Any = cast(Any, env)  # a gbx.api.Env that is also a SnapshotEnv
        self.num_envs = n = int(self.env.num_envs)
        self.num_actions = int(self.env.num_actions)
        self.obs_shape = tuple(int(d) for d in self.env.obs_shape)
        self.device = dev = torch.device(self.env.device)
        h, w = self.obs_shape[-2:]
        self.hasher = CellHasher((h, w), config.cell_rows, config.cell_cols, config.levels,
                                 n, dev)
        self.archive = Archive(config.capacity, n, dev, Weighting(
            visits=config.weight_visits, recent=config.weight_recent,
            halflife=config.recent_halflife, goal=config.weight_goal,
            goal_scale=config.goal_scale, frontier=config.weight_frontier,
            frontier_window=config.frontier_window))
        self.slots: EnvSnapshots = env.snapshot_slots(config.capacity)
        self.homes = min(n, HOME_SLOTS)
        self.home_slots: EnvSnapshots = env.snapshot_slots(self.homes)
        self._home_save = torch.where(torch.arange(n, device=dev) < self.homes,
                                      torch.arange(n, device=dev), -1)
        self.use_goal = isinstance(env, GoalDistanceEnv)
        self.generator = torch.Generator(device=dev)
        self.generator.manual_seed(int(seed))
        self.t = 0  # explorer steps (batch steps), counted on the host
        self.steps = torch.zeros(n, dtype=torch.int64, device=dev)  # from the real start
        self.since = torch.zeros(n, dtype=torch.int64, device=dev)  # since the (re)start
        self.from_cell = torch.zeros(n, dtype=torch.bool, device=dev)  # started from a cell
        self.start_slot = torch.zeros(n, dtype=torch.int64, device=dev)  # ... in this slot
        self._cell_ended = torch.zeros(n, dtype=torch.bool, device=dev)
        self._no_success = torch.zeros(n, dtype=torch.bool, device=dev)
        self._end = torch.zeros(n, dtype=torch.bool, device=dev)  # ended by explore_steps
        self._trunc = torch.zeros(n, dtype=torch.bool, device=dev)
        self._reset = torch.zeros(n, dtype=torch.bool, device=dev)
        self._home = torch.zeros(n, dtype=torch.int64, device=dev)  # home slot per env
        self._all = torch.ones(n, dtype=torch.bool, device=dev)
        self._reward = torch.zeros(n, dtype=torch.float32, device=dev)
        self._bonus = torch.zeros(n, dtype=torch.float32, device=dev)
        self._sums = torch.zeros(_RESTART_SUCCESSES + 1, dtype=torch.float64, device=dev)
        self._real = torch.zeros(n, dtype=torch.bool, device=dev)  # ended at the real start
        self._state = torch.zeros(n, dtype=torch.bool, device=dev)  # ... at a start state
        self._start_fraction = config.start_fraction
        self.scouted = config.scout_steps == 0  # done, or nothing to do
        self._scout_sums = torch.zeros(2, dtype=torch.float64, device=dev)  # steps, goals
        self._window_steps = 0
        # Origins (with a StartOriginEnv): per env, per archive slot (+ the sink) and per
        # home slot.
        self.origin = torch.zeros(n, dtype=torch.int64, device=dev)
        self.slot_origin = torch.zeros(config.capacity + 1, dtype=torch.int64, device=dev)
        self.home_origin = torch.zeros(self.homes, dtype=torch.int64, device=dev)
        self._salt = torch.zeros(n, dtype=torch.int64, device=dev)
        self._saved_to = torch.zeros(n, dtype=torch.int64, device=dev)

    # -- Env API -----------------------------------------------------------------------

    def reset(self) -> torch.Tensor:
        obs = self.env.reset()
        self.home_slots.save(self._home_save)
        self.steps.zero_()
        self.since.zero_()
        self.from_cell.zero_()
        if self.track:
            self.origin.copy_(self.env.from_start_states())
            self.home_origin.copy_(self.origin[: self.homes])
        self._observe(obs, self._all)
        return obs

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        if not self.scouted:
            self._scout()
        obs, reward, done, trunc, info = self.env.step(actions)
        env_reset = info["reset_mask"]
        final = info.get("final_obs")
        reached = final if isinstance(final, torch.Tensor) else obs
        self.steps += 1
        self.since += 1
        counts = self._observe(reached, ~env_reset)
        torch.rsqrt(counts.to(torch.float32), out=self._bonus)
        self._bonus.mul_(self.config.bonus)
        reset = env_reset
        if self.config.explore_steps > 0:
            # Bursts from a cell end here; the env has not reset them (final_obs already
            # holds the frame they reached), so they restart below like a finished episode.
            torch.ge(self.since, self.config.explore_steps, out=self._end)
            self._end.logical_and_(self.from_cell).logical_and_(~env_reset)
            torch.logical_or(trunc, self._end, out=self._trunc)
            torch.logical_or(env_reset, self._end, out=self._reset)
            trunc, reset = self._trunc, self._reset
            info["reset_mask"] = reset
        # Episodes that ended this step and began at the task's real start: not from a
        # cell, not from a curriculum state (counted before the restarts below).
        torch.eq(self.origin, 0, out=self._real)
        self._real.logical_and_(reset).logical_and_(self.from_cell.logical_not())
        # ... and those that began at a curriculum start state (an earlier stage's goal)
        torch.ne(self.origin, 0, out=self._state)
        self._state.logical_and_(reset).logical_and_(self.from_cell.logical_not())
        # ... and the restarts from archived cells that ended (bursts included): how often
        # the policy reaches the goal from where the archive sends it
        torch.logical_and(reset, self.from_cell, out=self._cell_ended)
        success = info.get("success")
        if isinstance(success, torch.Tensor):
            real_successes = self._real.logical_and(success).sum()
            state_successes = self._state.logical_and(success).sum()
            restart_successes = self._cell_ended.logical_and(success).sum()
        else:
            real_successes = state_successes = restart_successes = self._real.new_zeros(
                (), dtype=torch.int64)
        # ... and the milestones they passed (env.milestone_dirs; the env's count is taken
        # before its reset clears the ended episodes' flags): whether the episodes from the
        # real start still get as far as an earlier stage's goal
        milestones = info.get("milestones")
        if isinstance(milestones, torch.Tensor):
            real_milestones = (milestones * self._real).sum()
            state_milestones = (milestones * self._state).sum()
        else:
            real_milestones = state_milestones = real_successes.new_zeros(())
        if self.config.weight_frontier:
            # Restarts from cells that ended: their cells' success counts.
            self.archive.score(self.start_slot, self._cell_ended,
                               success if isinstance(success, torch.Tensor)
                               else self._no_success)
        pick, slot = self.archive.choose(reset, self._start_fraction, self.generator,
                                         self.t, self.use_goal)
        torch.where(pick, slot, self.start_slot, out=self.start_slot)
        obs = self.slots.restore(torch.where(pick, slot, -1))
        home = None
        if self.config.explore_steps > 0:
            torch.randint(0, self.homes, (self.num_envs,), generator=self.generator,
                          out=self._home)
            self._home.masked_fill_(~self._end | pick, -1)
            obs = self.home_slots.restore(self._home)
            home = self._home
        if self.track:
            carry_origins(self.origin, env_reset, self.env.from_start_states(), pick, slot,
                          self.slot_origin, home, self.home_origin)
        start_steps = torch.where(pick, self.archive.best[slot], 0)
        torch.where(reset, start_steps, self.steps, out=self.steps)
        self.since.masked_fill_(reset, 0)
        torch.where(reset, pick, self.from_cell, out=self.from_cell)
        torch.add(reward, self._bonus, out=self._reward)
        self._sums += torch.stack([reward.sum(), self._bonus.sum(), pick.sum(), reset.sum(),
                                   self._real.sum(), real_successes, self._state.sum(),
                                   state_successes, real_milestones, state_milestones,
                                   self._cell_ended.sum(), restart_successes])
        self._window_steps += self.num_envs
        self.t += 1
        info["reward_extrinsic"] = reward
        info["reward_intrinsic"] = self._bonus
        info["archive_start"] = pick
        return obs, self._reward, done, trunc, info

    def _scout(self) -> None:
        """Play ``scout_steps`` steps of random buttons (fewer once ``scout_goals`` goals
        were reached), every restart from an archived cell, then put the env and the
        per-env counters back as they were (the archive, its saved states and the step
        clock keep what the scouting found)."""
        self.scouted = True
        env_state = self.env.env_state_dict()
        mine = {k: getattr(self, k).clone() for k in _PER_ENV}
        self._start_fraction = 1.0
        # The episodes under way (from the start states) end after explore_steps too, so
        # restarts from cells begin at once rather than after env.max_steps.
        self.from_cell.fill_(True)
        actions = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
        enough = self.config.scout_goals
        played = 0
        try:
            while played < self.config.scout_steps:
                torch.randint(0, self.num_actions, (self.num_envs,), generator=self.generator,
                              out=actions)
                info = self.step(actions)[4]
                played += 1
                success = info.get("success")
                if isinstance(success, torch.Tensor):
                    self._scout_sums[1] += success.sum()
                # before training starts, so this read stalls no training step
                if (enough and played % SCOUT_CHECK_EVERY == 0
                        and float(self._scout_sums[1]) >= enough):
                    break
        finally:
            self._start_fraction = self.config.start_fraction
        self._scout_sums[0] += played * self.num_envs
        self.env.load_env_state_dict(env_state)
        for key, saved in mine.items():
            getattr(self, key).copy_(saved)
        self._sums.zero_()  # the first training record counts training steps only
        self._window_steps = 0

    def _observe(self, obs: torch.Tensor, can_save: torch.Tensor) -> torch.Tensor:
        """Archive the cells of ``obs`` (inserts and improvements of the envs in
        ``can_save``, whose state is the one ``obs`` shows); return the visit counts."""
        cells = self.hasher(obs[:, -1])
        if self.split:
            torch.mul(self.origin, ORIGIN_SALT, out=self._salt)
            cells.bitwise_xor_(self._salt)
        goal = self.env.goal_distance() if isinstance(self.env, GoalDistanceEnv) else None
        save = self.archive.update(cells, can_save, self.steps, goal, self.t)
        self.slots.save(save)
        if self.track:  # each saved state's origin goes with it (the sink takes the rest)
            self._saved_to.copy_(save).masked_fill_(save < 0, self.archive.capacity)
            self.slot_origin.scatter_(0, self._saved_to, self.origin)
        return self.archive.visit(cells)

    def close(self) -> None:
        self.env.close()

    def episode_progress(self) -> torch.Tensor | None:
        """The wrapped env's milestones passed (:class:`gbx.api.EpisodeProgressEnv`; None
        without them): an env restarted from a cell or from a saved start state took the
        progress saved with that state, so the wrapped env's buffer holds it already."""
        return self._progress.episode_progress() if self._progress is not None else None

    # -- records and metadata -----------------------------------------------------------

    def nbytes(self) -> int:
        """Device bytes of the archive tables, the saved env states and the buffers."""
        own = (self.steps, self._reward, self._bonus, self._sums, self._all, self.since,
               self.from_cell, self.start_slot, self._cell_ended, self._no_success,
               self._end, self._trunc, self._reset, self._home_save, self._home,
               self.origin, self.slot_origin, self.home_origin, self._salt, self._saved_to,
               self._real, self._state)
        hasher = (self.hasher._sums, self.hasher._levels, self.hasher._mult,
                  self.hasher._forms, self.hasher._ints, self.hasher.out)
        return (self.archive.nbytes() + self.slots.nbytes() + self.home_slots.nbytes()
                + sum(t.numel() * t.element_size() for t in (*own, *hasher)))

    def window_metrics(self) -> dict[str, Any]:
        """The explorer's record fields over the steps since the previous call
        (:class:`gbx.api.WindowMetrics`): device tensors, read with the record."""
        steps = max(self._window_steps, 1)
        sums = self._sums.clone()
        self._sums.zero_()
        self._window_steps = 0
        return {
            "explore_archive_size": self.archive.size(),
            "explore_cells_discovered": self.archive.discovered.clone(),
            "explore_archive_start_frac": sums[_STARTS] / sums[_RESETS].clamp_min(1.0),
            "explore_reward_extrinsic_mean": sums[_EXTRINSIC] / steps,
            "explore_reward_intrinsic_mean": sums[_INTRINSIC] / steps,
            "explore_real_start_episodes": sums[_REAL_EPISODES],
            "explore_real_start_successes": sums[_REAL_SUCCESSES],
            "explore_start_state_episodes": sums[_STATE_EPISODES],
            "explore_start_state_successes": sums[_STATE_SUCCESSES],
            "explore_real_start_milestones": sums[_REAL_MILESTONES],
            "explore_start_state_milestones": sums[_STATE_MILESTONES],
            "explore_restart_episodes": sums[_RESTART_EPISODES],
            "explore_restart_successes": sums[_RESTART_SUCCESSES],
            "explore_frontier_cells": self.archive.frontier_size(),
            "explore_scout_env_steps": self._scout_sums[0].clone(),
            "explore_scout_successes": self._scout_sums[1].clone(),
            "explore_bytes": self.nbytes(),
        }

    def meta(self) -> dict[str, Any]:
        out = dict(self.env.meta()) if isinstance(self.env, EnvMeta) else {}
        out["explore"] = {"explorer": "archive", "capacity": self.config.capacity,
                          "bytes": self.nbytes(), "goal_weighting": self.use_goal}
        return out

    # -- gbx.api.StatefulEnv ---------------------------------------------------------

    def env_state_dict(self) -> dict[str, Any]:
        """The wrapped env's state plus the explorer's: archive tables, saved env states,
        step counts from the real start, the random stream and the step clock."""
        return {
            "env": self.env.env_state_dict(),
            "explore": {
                "archive": self.archive.state_dict(),
                "slots": {k: t.clone() for k, t in self.slots.tensors().items()},
                "home_slots": {k: t.clone() for k, t in self.home_slots.tensors().items()},
                "steps": self.steps.clone(),
                "since": self.since.clone(),
                "from_cell": self.from_cell.clone(),
                "start_slot": self.start_slot.clone(),
                "origin": self.origin.clone(),
                "slot_origin": self.slot_origin.clone(),
                "home_origin": self.home_origin.clone(),
                "generator": self.generator.get_state(),
                "t": self.t,
                "scouted": self.scouted,
                "scout_sums": self._scout_sums.clone(),
            },
        }

    def load_env_state_dict(self, state: Mapping[str, Any]) -> None:
        mine = state.get("explore")
        if not isinstance(mine, Mapping):
            raise ValueError("the saved env state has no explorer state: it was saved "
                             "without explore.name=archive; resume with the same config")
        slots = self.slots.tensors()
        saved = mine["slots"]
        for key, dst in slots.items():
            src = saved.get(key)
            if not isinstance(src, torch.Tensor) or src.shape != dst.shape:
                raise ValueError(f"saved env states {key!r} do not fit {list(dst.shape)}: "
                                 "resume with the same env config and explore.capacity")
        self.env.load_env_state_dict(state["env"])
        self.archive.load_state_dict(mine["archive"])
        for key, dst in slots.items():
            dst.copy_(saved[key].to(dst.device))
        self.steps.copy_(mine["steps"].to(self.device))
        # States saved before explore_steps existed have no bursts under way.
        if "since" in mine:
            self.since.copy_(mine["since"].to(self.device))
            self.from_cell.copy_(mine["from_cell"].to(self.device))
            for key, dst in self.home_slots.tensors().items():
                dst.copy_(mine["home_slots"][key].to(dst.device))
        else:
            self.since.zero_()
            self.from_cell.zero_()
        # States saved before origins (or restart slots) existed hold none: every origin
        # the real start, every restart's slot 0 (its end is then counted on slot 0).
        for key in ("origin", "slot_origin", "home_origin", "start_slot"):
            dst = getattr(self, key)
            src = mine.get(key)
            if isinstance(src, torch.Tensor):
                dst.copy_(src.to(self.device))
            else:
                dst.zero_()
        self.generator.set_state(mine["generator"])
        self.t = int(mine["t"])
        # A resumed run never scouts again (states saved before scouting existed: done).
        self.scouted = bool(mine.get("scouted", True))
        if isinstance(mine.get("scout_sums"), torch.Tensor):
            self._scout_sums.copy_(mine["scout_sums"].to(self.device))


def carry_origins(origin: torch.Tensor, env_reset: torch.Tensor, env_origin: torch.Tensor,
                  pick: torch.Tensor, slot: torch.Tensor, slot_origin: torch.Tensor,
                  home: torch.Tensor | None, home_origin: torch.Tensor) -> None:
    """Update each env's origin (``int64 [N]``, 1 = descends from a curriculum start state)
    in place after a step's restarts, the explorer's restart deciding over the env's reset
    it follows: an env restarted from archive slot ``slot[e]`` (``pick``) takes that slot's
    origin; one sent to home slot ``home[e] >= 0`` takes that home's; another one the env
    reset takes the env's word (``env_origin``, :class:`gbx.api.StartOriginEnv`); the
    others keep theirs."""
    torch.where(env_reset, env_origin.to(torch.int64), origin, out=origin)
    torch.where(pick, slot_origin[slot], origin, out=origin)
    if home is not None:
        torch.where(home >= 0, home_origin[home.clamp(min=0)], origin, out=origin)


def make_archive_explorer(config: ArchiveConfig, env: SnapshotEnv, *, seed: int
                          ) -> ArchiveExplorer:
    return ArchiveExplorer(config, env, seed=seed)
