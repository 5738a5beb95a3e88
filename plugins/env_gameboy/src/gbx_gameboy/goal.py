"""``gameboy-goal``: reach a goal screen, scored from pixels only.

The env is the ``gameboy`` pixel env plus a goal template (``goal.npy`` made by
``gbx gameboy capture-goal``). After each step the newest observation frame is
compared with the template on the device (:mod:`gbx.goal_math`):

* ``dist = mean(|frame - goal|) / 3``;
* ``done`` once ``dist < tau`` for ``consec_k`` consecutive steps;
* ``reward = goal_bonus * done + shaping * (previous dist - dist)``
  (``shaping`` 0 = sparse, the default);
* milestones (``milestone_dirs``): screens on the way to the goal, each paying
  ``milestone_bonus`` on the first step of an episode whose frame is under its tau;
* ``trunc`` at ``max_steps`` (never on the step that reaches the goal);
  ``info["final_obs"]`` holds the last observation of every finished episode,
  taken before the masked reset, for bootstrapping.

``info_mode`` picks what else ``info`` carries: ``full`` the per-env distances
(``info["dist"]``), ``stats`` only their 10/50/90th percentiles computed on
the device (``dist_p10``, ``dist_p50``, ``dist_p90``, 0-dim tensors), ``none``
nothing more. ``tau`` and ``consec_k`` default to the goal's ``meta.json``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import torch

from gbx.config import in_range, option
from gbx.goal_math import (
    count_under,
    end_as_failure,
    goal_distance,
    goal_reward,
    pass_milestone,
    reached,
    start_milestone,
)
from gbx_gameboy.capture import FAILURE_KIND, Goal, npy_bytes
from gbx_gameboy.env import Emulators, GameBoyConfig, GameBoyEnv
from gbx_gameboy.goal_states import GoalStateRing
from gbx_toolkit.metrics import percentiles

INFO_MODES = ("full", "stats", "none")
MAX_GOAL_STATES = 4096
_QUANTILES = (0.1, 0.5, 0.9)
_v = attrs.validators


def check_tau(_inst: Any, _attr: Any, value: float | None) -> None:
    if value is not None and not 0.0 < value <= 1.0:
        raise ValueError(f"tau must be in (0, 1] (a goal distance), got {value}")


def check_consec_k(_inst: Any, _attr: Any, value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"consec_k must be >= 1, got {value}")


@attrs.frozen
class GoalConfig(GameBoyConfig):
    """The ``env`` section of ``gameboy-goal``: the ``gameboy`` fields plus the goal."""

    goal_dir: str = option(
        "", "goal folder made by `gbx gameboy capture-goal` (goal.npy + meta.json) or a .npy"
    )
    tau: float | None = option(
        None, "distance under which the goal counts as reached (None: the goal's meta.json)",
        check_tau,
    )
    consec_k: int | None = option(
        None, "consecutive steps under tau that end an episode (None: the goal's meta.json)",
        check_consec_k,
    )
    goal_bonus: float = option(1.0, "reward on the step that reaches the goal", in_range(0))
    shaping: float = option(
        0.0, "dense reward scale: shaping * (previous distance - distance); 0 = off",
        in_range(0),
    )
    info_mode: str = option(
        "stats", "info carries: full (per-env dist) | stats (dist p10/p50/p90) | none",
        _v.in_(INFO_MODES),
    )
    allow_goal_rom_mismatch: bool = option(
        False, "use a goal whose meta.json names another ROM's sha256 than env.rom's"
    )
    failure_dirs: tuple[str, ...] = option(
        (), "failure screens: folders made by `gbx gameboy capture-goal --failure` (or .npy); "
        "a step whose frame is under a failure template's tau ends the episode as a failure",
        _v.deep_iterable(_v.instance_of(str)),
    )
    failure_penalty: float = option(
        1.0, "reward taken away on the step that ends in a failure screen", in_range(0)
    )
    milestone_dirs: tuple[str, ...] = option(
        (), "screens on the way to the goal: goal folders made by `gbx gameboy capture-goal` "
        "(or .npy), or a bundled stage's env name (gbx-quest-N: its goal); each pays "
        "env.milestone_bonus once per episode, on the first step whose frame is under its "
        "tau (an episode that starts there has passed it)",
        _v.deep_iterable(_v.instance_of(str)),
    )
    milestone_bonus: float = option(
        1.0, "reward on the step an episode first passes a milestone screen", in_range(0)
    )
    save_goal_states: int = option(
        0, "keep the newest N states training envs reach at the goal; every checkpoint "
        "writes the distinct ones to <run_dir>/goal_states/ (start states of a next stage)",
        _v.and_(_v.ge(0), _v.le(MAX_GOAL_STATES)),
    )


def resolve_goal(config: Any) -> tuple[Goal, float, int]:
    """The goal of a goal env's config, with its ``tau`` and ``consec_k`` (the config's,
    else the goal's ``meta.json``), checked before any emulator is built: the goal loads
    (:func:`gbx_gameboy.capture.load_goal`), was captured on ``env.rom`` (unless
    ``env.allow_goal_rom_mismatch``) and has the observation size of ``env.obs_size``.
    Raises :class:`gbx_gameboy.capture.GoalError` (one line) otherwise."""
    from gbx_gameboy.capture import GoalError, check_goal_rom, load_goal, sha256_file
    from gbx_gameboy.env import resolve_rom
    from gbx_gameboy.obs import obs_hw

    if not config.goal_dir:
        raise GoalError(
            "gameboy-goal needs a goal: set env.goal_dir to a folder made by "
            "`gbx gameboy capture-goal` (or to a .npy template)"
        )
    goal = load_goal(config.goal_dir)
    if goal.meta.get("kind") == FAILURE_KIND:
        raise GoalError(f"env.goal_dir {goal.path} is a failure screen (captured with --failure): "
                        "name it in env.failure_dirs, and a goal in env.goal_dir")
    rom = resolve_rom(config.rom)
    check_goal_rom(goal, sha256_file(rom), rom, allow_mismatch=config.allow_goal_rom_mismatch)
    want = obs_hw(config.obs_size)
    if tuple(goal.template.shape) != want:
        raise GoalError(
            f"goal template {goal.path} is {list(goal.template.shape)} but env.obs_size="
            f"{config.obs_size} gives {list(want)}: capture the goal with that obs size"
        )
    tau = float(config.tau if config.tau is not None else goal.tau)
    consec_k = int(config.consec_k if config.consec_k is not None else goal.consec_k)
    return goal, tau, consec_k


def _load_screens(config: Any, paths: tuple[str, ...], what: str) -> list[Goal]:
    """Templates besides the goal (failure screens, milestones), each checked like a goal:
    it loads, was captured on ``env.rom`` (unless allowed otherwise) and has the obs size."""
    from gbx_gameboy.capture import GoalError, check_goal_rom, load_goal, sha256_file
    from gbx_gameboy.env import resolve_rom
    from gbx_gameboy.obs import obs_hw

    out = []
    for path in paths:
        screen = load_goal(path)
        rom = resolve_rom(config.rom)
        check_goal_rom(screen, sha256_file(rom), rom,
                       allow_mismatch=config.allow_goal_rom_mismatch)
        if tuple(screen.template.shape) != obs_hw(config.obs_size):
            raise GoalError(f"{what} template {screen.path} is "
                            f"{list(screen.template.shape)}, env.obs_size={config.obs_size} "
                            f"gives {list(obs_hw(config.obs_size))}")
        out.append(screen)
    return out


def resolve_failures(config: Any) -> list[Goal]:
    """The failure templates of ``env.failure_dirs``, each checked like a goal (loads,
    captured on ``env.rom`` unless allowed otherwise, the obs size); their tau is their
    ``meta.json``'s."""
    return _load_screens(config, config.failure_dirs, "failure")


def milestone_paths(config: Any) -> tuple[str, ...]:
    """``env.milestone_dirs`` with every bundled stage's env name (``gbx-quest-N``) replaced
    by that stage's goal folder."""
    if not any(p.startswith("gbx-quest-") for p in config.milestone_dirs):
        return tuple(config.milestone_dirs)
    from gbx_gameboy.capture import GoalError
    from gbx_gameboy.tasks import STAGES_BY_ENV

    out = []
    for path in config.milestone_dirs:
        if path.startswith("gbx-quest-") and not Path(path).exists():
            if path not in STAGES_BY_ENV:
                raise GoalError(f"env.milestone_dirs names {path!r}, no bundled stage: use one "
                                f"of {', '.join(STAGES_BY_ENV)} or a goal folder")
            path = str(STAGES_BY_ENV[path].goal_dir())
        out.append(path)
    return tuple(out)


def resolve_milestones(config: Any, goal: Goal) -> list[Goal]:
    """The milestone templates of ``env.milestone_dirs`` (checked like a goal; their tau is
    their ``meta.json``'s); a failure screen or the goal itself is refused."""
    from gbx_gameboy.capture import GoalError

    screens = _load_screens(config, milestone_paths(config), "milestone")
    for screen in screens:
        if screen.meta.get("kind") == FAILURE_KIND:
            raise GoalError(f"milestone {screen.path} is a failure screen (captured with "
                            "--failure): name it in env.failure_dirs")
        if (screen.template == goal.template).all():
            raise GoalError(f"milestone {screen.path} is the goal screen itself: the goal pays "
                            "env.goal_bonus; name screens on the way in env.milestone_dirs")
    return screens


class GoalEnv(GameBoyEnv):
    """:class:`GameBoyEnv` with reward and done from the distance to a goal screen."""

    config: GoalConfig  # or a stage's config class with the same fields (tasks.py)

    def __init__(
        self, config: GoalConfig, num_envs: int, device: torch.device | str, seed: int = 0,
        *, emulators: Emulators | None = None,
    ) -> None:
        goal, self.tau, self.consec_k = resolve_goal(config)
        self.goal = goal
        self.failures = resolve_failures(config)
        self.milestones = resolve_milestones(config, goal)
        super().__init__(config, num_envs, device, seed, emulators=emulators)
        want = self.obs_shape[1:]
        n, dev = num_envs, self.device
        self._goal = torch.from_numpy(goal.template).to(dev, torch.int16)
        self._scratch = torch.empty((n, *want), dtype=torch.int16, device=dev)
        self._dist = torch.zeros(n, dtype=torch.float32, device=dev)
        self._prev = torch.zeros(n, dtype=torch.float32, device=dev)
        self._start_dist = torch.zeros(n, dtype=torch.float32, device=dev)
        self._consec = torch.zeros(n, dtype=torch.int32, device=dev)
        self._goal_done = torch.zeros(n, dtype=torch.bool, device=dev)
        self._under = torch.zeros(n, dtype=torch.bool, device=dev)
        self._not_done = torch.zeros(n, dtype=torch.bool, device=dev)
        self._failure_templates = [torch.from_numpy(f.template).to(dev, torch.int16)
                                   for f in self.failures]
        self._failure_taus = [f.tau for f in self.failures]
        self._fdist = torch.zeros(n, dtype=torch.float32, device=dev)
        self._funder = torch.zeros(n, dtype=torch.bool, device=dev)
        self._failed = torch.zeros(n, dtype=torch.bool, device=dev)
        self._ended = torch.zeros(n, dtype=torch.bool, device=dev)
        self._milestone_templates = [torch.from_numpy(m.template).to(dev, torch.int16)
                                     for m in self.milestones]
        self._milestone_taus = [m.tau for m in self.milestones]
        # [milestone, env]: whether the env's episode has passed the milestone (rows contiguous)
        self._passed = torch.zeros((len(self.milestones), n), dtype=torch.bool, device=dev)
        self._newly = torch.zeros(n, dtype=torch.bool, device=dev)
        self._milestone_count = torch.zeros(n, dtype=torch.int64, device=dev)
        self.goal_states: GoalStateRing | None = None
        if config.save_goal_states:
            from gbx_gameboy.savestate import RomId

            self._rom_id = RomId.of(self.batch.cart)
            self.goal_states = GoalStateRing(self.batch.state_tensors(), n,
                                             config.save_goal_states, dev)
        self._scoring = True

    # ------------------------------------------------------------------ hooks
    def reward_done(self, frame: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.config
        goal_distance(frame, self._goal, out=self._dist, scratch=self._scratch)
        count_under(self._dist, self.tau, self._consec, under=self._under)
        reached(self._consec, self.consec_k, out=self._goal_done)
        goal_reward(self._prev, self._dist, self._goal_done, bonus=cfg.goal_bonus,
                    shaping=cfg.shaping, out=self._reward)
        self._prev.copy_(self._dist)
        for m, (template, tau) in enumerate(
                zip(self._milestone_templates, self._milestone_taus, strict=True)):
            goal_distance(frame, template, out=self._fdist, scratch=self._scratch)
            pass_milestone(self._fdist, tau, self._passed[m], self._reward,
                           bonus=cfg.milestone_bonus, under=self._funder, newly=self._newly)
        if self.milestones:  # counted before the reset clears the ended episodes' flags
            torch.sum(self._passed, dim=0, out=self._milestone_count)
        if self.goal_states is not None:  # before the reset restores these envs
            self.goal_states.capture(self._goal_done)
        if not self._failure_templates:
            return self._reward, self._goal_done
        # Failure screens: the same distance; any template under its tau ends the episode.
        self._failed.zero_()
        for template, tau in zip(self._failure_templates, self._failure_taus, strict=True):
            goal_distance(frame, template, out=self._fdist, scratch=self._scratch)
            self._failed.logical_or_(torch.lt(self._fdist, tau, out=self._funder))
        end_as_failure(self._failed, self._goal_done, self._reward,
                       penalty=cfg.failure_penalty, done=self._ended)
        return self._reward, self._ended

    def write_goal_states(self, folder: Path) -> int:
        """:class:`gbx.api.GoalStateSaver`: write the distinct goal states held (with
        ``env.save_goal_states``; none without) into ``folder``; return its file count."""
        if self.goal_states is None:
            return 0
        from gbx_gameboy.savestate import encode

        rom = self._rom_id  # kept: the ring outlives close()
        return self.goal_states.write(folder, lambda arrays: encode(rom, arrays))

    def on_reset(self, mask: torch.Tensor, frame: torch.Tensor) -> None:
        if not getattr(self, "_scoring", False):
            return  # the base constructor's own resets, before the goal buffers exist
        goal_distance(frame, self._goal, out=self._start_dist, scratch=self._scratch)
        torch.where(mask, self._start_dist, self._prev, out=self._prev)
        self._consec.masked_fill_(mask, 0)
        for m, (template, tau) in enumerate(
                zip(self._milestone_templates, self._milestone_taus, strict=True)):
            goal_distance(frame, template, out=self._fdist, scratch=self._scratch)
            start_milestone(self._fdist, tau, self._passed[m], mask, under=self._funder)

    # ------------------------------------------------------------------ Env API
    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        obs, reward, done, trunc, info = super().step(actions)
        # A step that reaches the goal is terminal, even on the last allowed step.
        torch.logical_not(done, out=self._not_done)
        trunc.logical_and_(self._not_done)
        info["success"] = self._goal_done
        if self._failure_templates:
            info["failure"] = self._failed
        if self.milestones:
            info["milestones"] = self._milestone_count
        mode = self.config.info_mode
        if mode == "full":
            info["dist"] = self._dist
        elif mode == "stats":
            # sorted positions known on the host: no device sync, unlike torch.quantile
            q = percentiles(self._dist, _QUANTILES)
            info["dist_p10"], info["dist_p50"], info["dist_p90"] = q[0], q[1], q[2]
        return obs, reward, done, trunc, info

    def episode_progress(self) -> torch.Tensor | None:
        """The milestones each env's episode has passed (``[milestones, N]``; None without
        milestones): a restart from an archived cell has passed what the episode it was
        saved from had passed, so walking back to a milestone pays nothing there either."""
        return self._passed if self.milestones else None

    def goal_distance(self) -> torch.Tensor:
        """Each env's distance to the goal of its current frame (:class:`gbx.api.GoalDistanceEnv`;
        for an env that was just reset, of its new first frame)."""
        return self._prev

    # ------------------------------------------------------------------ StatefulEnv
    _GOAL_FIELDS = ("_dist", "_prev", "_consec")

    def env_state_dict(self) -> dict[str, Any]:
        """The Game Boy batch's state plus the goal counters: the previous distance (for the
        shaping reward), the consecutive steps under tau and, with milestones, which ones
        each env's episode has passed."""
        state = super().env_state_dict()
        state["goal"] = {k.lstrip("_"): getattr(self, k).clone() for k in self._GOAL_FIELDS}
        if self.milestones:
            state["goal"]["milestones_passed"] = self._passed.clone()
        if self.goal_states is not None:
            state["goal_states"] = self.goal_states.state_dict()
        return state

    def load_env_state_dict(self, state: Mapping[str, Any]) -> None:
        goal = state.get("goal")
        if not isinstance(goal, Mapping):
            raise ValueError("the saved env state has no goal counters: it was saved by "
                             "another env; resume with the env the run was started with")
        for key in self._GOAL_FIELDS:
            dst, src = getattr(self, key), goal.get(key.lstrip("_"))
            if not isinstance(src, torch.Tensor) or src.shape != dst.shape:
                raise ValueError(f"saved goal counter {key.lstrip('_')!r} does not fit "
                                 f"{list(dst.shape)}: resume with the same num_envs")
        passed = goal.get("milestones_passed")
        if self.milestones and (not isinstance(passed, torch.Tensor)
                                or passed.shape != self._passed.shape):
            raise ValueError(f"the saved env state does not hold the {len(self.milestones)} "
                             "milestones' progress of every env: resume with the "
                             "env.milestone_dirs and num_envs the run was started with")
        super().load_env_state_dict(state)
        for key in self._GOAL_FIELDS:
            getattr(self, key).copy_(goal[key.lstrip("_")].to(self.device))
        if isinstance(passed, torch.Tensor) and self.milestones:
            self._passed.copy_(passed.to(self.device))
        if self.goal_states is not None:
            saved = state.get("goal_states")
            if not isinstance(saved, Mapping):
                raise ValueError("the saved env state holds no goal states: resume with the "
                                 "env.save_goal_states the run was started with")
            self.goal_states.load_state_dict(saved)

    def meta(self) -> dict[str, Any]:
        cfg = self.config
        out = super().meta()
        out.update({
            "env": "gameboy-goal",
            "goal_dir": cfg.goal_dir,
            # the template's own bytes, so a log names exactly the goal it trained towards
            "goal_sha256": hashlib.sha256(npy_bytes(self.goal.template)).hexdigest(),
            "goal_meta": self.goal.meta,
            "tau": self.tau,
            "consec_k": self.consec_k,
            "goal_bonus": cfg.goal_bonus,
            "shaping": cfg.shaping,
            "info_mode": cfg.info_mode,
            "save_goal_states": cfg.save_goal_states,
            "failure_dirs": list(cfg.failure_dirs),
            "failure_sha256": [hashlib.sha256(npy_bytes(f.template)).hexdigest()
                               for f in self.failures],
            "failure_taus": self._failure_taus,
            "failure_penalty": cfg.failure_penalty,
            "milestone_dirs": list(milestone_paths(cfg)),
            "milestone_sha256": [hashlib.sha256(npy_bytes(m.template)).hexdigest()
                                 for m in self.milestones],
            "milestone_taus": self._milestone_taus,
            "milestone_bonus": cfg.milestone_bonus,
        })
        return out


def make_goal_env(
    config: GoalConfig, num_envs: int, device: torch.device | str, seed: int
) -> GoalEnv:
    return GoalEnv(config, num_envs, device, seed)

