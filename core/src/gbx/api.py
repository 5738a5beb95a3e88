"""Protocols that plugin objects implement (the shapes behind the hooks).

These are structural (``typing.Protocol``): a plugin need not inherit from
them, only provide the attributes and methods.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

# ---------------------------------------------------------------------------
# Environments
# ---------------------------------------------------------------------------


@runtime_checkable
class Env(Protocol):
    """A batch of ``num_envs`` environments stepping together on one device.

    Observations are ``uint8`` tensors of shape ``[num_envs, *obs_shape]``
    (for pixel envs ``obs_shape == (K, H, W)``, shade indices 0..3). Every
    tensor returned lives on ``device``. Environments reset themselves:
    when an env finishes (``done | trunc``) the observation returned for it is
    already the first one of its next episode and ``info["reset_mask"]`` is
    True for it. ``info`` may carry more keys (tensors or plain numbers); the
    run loop and evaluation read ``info["success"]`` (bool ``[N]``: the episode ended at
    its goal; default ``done``), ``info["failure"]`` (bool ``[N]``: it ended ``done``
    on a failure screen, not a success) and ``info["milestones"]`` (int ``[N]``: how many
    milestone screens the episode has passed so far, for an episode that ended on this
    step its final count; an env without milestones leaves it out).

    An env may also describe itself (:class:`EnvMeta`); the run loop records that in
    the run's ``meta.json``.
    ``gbx.testing.check_env`` checks an env against this contract.
    """

    num_envs: int
    num_actions: int
    obs_shape: tuple[int, ...]
    device: torch.device

    def reset(self) -> torch.Tensor:
        """Reset all envs; return observations ``uint8 [N, *obs_shape]``."""
        ...

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Advance every env one step.

        ``actions``: int64 ``[N]`` in ``[0, num_actions)``.
        Returns ``(obs uint8 [N,*obs_shape], reward float32 [N],
        done bool [N], trunc bool [N], info)``. ``done`` marks a terminal
        state (no bootstrap); ``trunc`` a time limit (bootstrap from the
        value of the truncated state, whose observation is
        ``info["final_obs"]`` when provided).
        """
        ...

    def close(self) -> None:
        """Release device memory and any worker processes."""
        ...


@runtime_checkable
class StatefulEnv(Protocol):
    """An :class:`Env` that can save and restore everything its future depends on.

    An optional capability: trainers check it with ``isinstance(env, StatefulEnv)``
    and put ``env_state_dict()`` in their checkpoints, so a resumed run continues
    every episode exactly where the killed one was (emulator state of every env,
    frame stacks, step and goal counters, the random streams of resets and
    start states). An env without it resumes with fresh episodes, and the run
    says so on stderr.

    ``env_state_dict()`` returns tensors and plain values only (no objects of
    the env's own classes), copied so later steps do not change it.
    ``load_env_state_dict(state)`` restores it into an env built with the same
    config, ``num_envs`` and device; a state that does not fit raises
    ``ValueError`` naming the mismatch.
    """

    def env_state_dict(self) -> dict[str, Any]: ...

    def load_env_state_dict(self, state: Mapping[str, Any]) -> None: ...


@runtime_checkable
class EnvSnapshots(Protocol):
    """A fixed number of device slots, each holding the full state of one env of a batch.

    Made by :meth:`SnapshotEnv.snapshot_slots`; bound to that env. Slot and env indices are
    ``int64 [num_envs]`` device tensors, ``-1`` meaning "not this env", so a call never
    reads the device from the host and never loops over envs in Python.
    """

    capacity: int

    def save(self, slots: torch.Tensor) -> None:
        """Copy env ``e``'s full state into slot ``slots[e]`` for every ``slots[e] >= 0``
        (no two envs may name the same slot)."""
        ...

    def restore(self, slots: torch.Tensor) -> torch.Tensor:
        """Start env ``e`` from slot ``slots[e]`` for every ``slots[e] >= 0``; return the
        observations of the whole batch, ``uint8 [N, *obs_shape]``.

        A restored env begins a new episode in the saved state: its emulator (or world)
        state and frame stack are the slot's, its step counter (the time limit) and goal
        counters start afresh, as after a reset to the start state; progress the saved
        episode had made that the state's screen does not show (a Game Boy goal env's
        milestones passed) comes with it."""
        ...

    def tensors(self) -> dict[str, torch.Tensor]:
        """The slots' storage (device tensors), for checkpoints: a state saved from here
        is put back with ``copy_`` into the same tensors of an equal env."""
        ...

    def nbytes(self) -> int:
        """Device bytes the slots take."""
        ...


@runtime_checkable
class SnapshotEnv(StatefulEnv, Protocol):
    """An env that can snapshot and restore the full state of selected envs on the device.

    An optional capability (exploration by restarting from saved states needs it):
    ``snapshot_slots(capacity)`` allocates :class:`EnvSnapshots` for ``capacity`` env
    states. Everything an env's future depends on goes into a slot (for the Game Boy
    every emulator array and the frame stack), except the per-episode counters, which a
    restore starts afresh.
    """

    def snapshot_slots(self, capacity: int) -> EnvSnapshots: ...


@runtime_checkable
class StartOriginEnv(Protocol):
    """An env that says where each env's current episode began (an optional capability).

    Training envs of a curriculum start some episodes from the curriculum's states (a
    Game Boy env's ``env.start_states``, e.g. the states an earlier stage saved at its goal)
    and the others from the task's real start state. ``from_start_states()`` is
    ``bool [N]``, the env's own buffer on the device: ``True`` where the env's current
    episode began at one of the curriculum's states, ``False`` where it began at the real
    start (always ``False`` without a curriculum). Every reset the env makes updates it;
    a restore through :class:`EnvSnapshots` leaves it unchanged, so a wrapper that
    restores envs keeps their origin itself. An explorer can keep the two kinds of
    episode apart (the curriculum's states may carry progress the screen hardly shows).
    """

    def from_start_states(self) -> torch.Tensor: ...


@runtime_checkable
class GoalDistanceEnv(Protocol):
    """An env that scores pixel distance to a goal and shares it (an optional capability).

    ``goal_distance()`` is ``float32 [N]``: each env's distance to its goal from its
    current frame (0 on the goal; for an env reset in the latest step, from its new first
    frame), on the device; the tensor is the env's own buffer.
    """

    def goal_distance(self) -> torch.Tensor: ...


@runtime_checkable
class EpisodeProgressEnv(Protocol):
    """An env that tells which milestones each env's current episode has passed (an
    optional capability).

    ``episode_progress()`` is ``bool [M, N]`` (the env's own buffer on the device) for an
    env with ``M >= 1`` milestones (screens on the way to the goal, e.g. a Game Boy goal
    env's ``env.milestone_dirs``), or None for an env without any: entry ``[m, e]`` is
    True once env ``e``'s current episode has passed milestone ``m``. Every step and
    reset the env makes updates it before returning, so read before a step it describes
    the episode of the observation the policy acts on; an episode that begins at a state
    past a milestone (a curriculum's start state, a restored snapshot) has passed it from
    its first step. A wrapper (an explorer) forwards it. A trainer can treat the steps
    before the milestones differently from those after (PPO's ``algo.anchor_coef``).
    """

    def episode_progress(self) -> torch.Tensor | None: ...


@runtime_checkable
class WindowMetrics(Protocol):
    """An object (an env, an explorer) with statistics of its own for the training records.

    ``window_metrics()`` returns ``{name: value}`` over the steps since its previous call
    (and starts a new window): values are 0-d device tensors reduced on the device or
    plain numbers. The trainer's metrics accumulator reads them in the same single
    device-to-host transfer as its own record.
    """

    def window_metrics(self) -> dict[str, Any]: ...


@runtime_checkable
class RealStartConfig(Protocol):
    """An env config with settings that only training envs use (a curriculum's start
    states, the saving of reached goal states).

    An optional capability of an env's config class: ``real_start()`` returns the same
    config without them, so the env it builds starts every episode from the task's real
    start state. The run loop builds every env that is not a training env from it
    (``RunContext.make_env`` without ``training=True``): an evaluation measures the
    task itself, never the curriculum.
    """

    def real_start(self) -> Any: ...


@runtime_checkable
class DeviceDefaults(Protocol):
    """A config section (algorithm or env) whose defaults depend on the device it runs on.

    An optional capability of a config class: some of its fields default to a marker
    (``auto``, ``0``) and ``for_device(device)`` returns the config with each of them
    replaced by that device's value, explicit values unchanged (idempotent). The run loop
    applies it when it builds a run on its device, so the resolved values are what the run
    trains with and what its ``config.json`` and checkpoints hold; a resumed run or
    ``gbx eval`` on another device keeps them. The field help names each device's value
    (``gbx config --explain``).
    """

    def for_device(self, device: torch.device) -> Any: ...


@runtime_checkable
class GoalStateSaver(Protocol):
    """An :class:`Env` that keeps states its envs reached at the goal (optional).

    ``write_goal_states(folder)`` writes the distinct ones it holds into ``folder``
    (each file atomically; a file already there is kept) and returns how many files the
    folder holds. The run loop calls it on the training env at every checkpoint, into
    ``<run_dir>/goal_states/``; a later stage starts from them (a curriculum).
    """

    def write_goal_states(self, folder: Path) -> int: ...


# ---------------------------------------------------------------------------
# Runs, trainers, observers
# ---------------------------------------------------------------------------


class RunInfo(Protocol):
    """What every plugin object may know about the run it belongs to."""

    run_id: str
    run_dir: Path
    device: torch.device
    seed: int  # this rank's seed (gbx.seeds.rank_seed); other streams: gbx.seeds.derive
    config: Any  # the resolved gbx.config.RunConfig


class RunContext(RunInfo, Protocol):
    """Services the core run loop offers a trainer.

    The trainer owns its training loop (collect, update) and talks to the outside
    world only through this object, so observers, artifact writers, resume logic and
    the schedule stay in the core. The run owns the schedule: evaluations and
    checkpoints happen every ``run.eval_every`` / ``run.checkpoint_every`` env steps
    (:mod:`gbx.schedule`), called from :meth:`record`, and once more when training
    ends (a final checkpoint unless the last step has one, then a greedy evaluation
    of ``run.final_eval_episodes``). A trainer therefore neither evaluates nor
    checkpoints on its own.
    """

    def make_env(self, num_envs: int, *, seed_offset: int = 0, training: bool = False) -> Env:
        """Build the configured env with ``num_envs`` copies.

        ``training=True`` marks the trainer's training envs: they start from the config's
        curriculum (e.g. start states), keep reached goal states (:class:`GoalStateSaver`)
        and, when the config selects an explorer (``explore.name``), are wrapped in it
        (archive starts, intrinsic reward). Every other env (evaluation, rollouts) is built
        from :meth:`RealStartConfig.real_start` when the config offers it: it measures the
        task itself, from the task's real start state.
        """
        ...

    def record(self, metrics: Mapping[str, Any]) -> None:
        """Emit one metrics record (host numbers, read once per update).

        ``step`` (or ``env_steps``) is the number of env steps so far; the
        core stamps ``run_id``, ``seq``, ``wall_time_s``, ``trace_id`` and
        ``kind`` and forwards the record to every observer's ``on_record``.

        When the record's step crosses a due point of the run's schedule, the
        run calls the trainer's :meth:`Trainer.evaluate` (recorded through
        :meth:`record_eval`) and then :meth:`Trainer.state_dict` (written through
        :meth:`checkpoint`) before ``record`` returns. A trainer calls ``record``
        only where both are safe: between updates, with no work half done.
        """
        ...

    def record_eval(self, metrics: Mapping[str, Any]) -> None:
        """Emit one evaluation summary (the run's schedule calls it; a trainer may too)."""
        ...

    def checkpoint(self, state: Mapping[str, Any], *, step: int) -> Path:
        """Persist the trainer state atomically; return the checkpoint path (the run's
        schedule calls it)."""
        ...

    def should_stop(self) -> bool:
        """True once a stop was requested (SIGINT/SIGTERM) or the recorded
        ``step`` reached ``config.run.steps``."""
        ...


class Trainer(Protocol):
    """A training algorithm instance bound to one run.

    ``train`` collects and updates and reports progress with ``ctx.record``; the run
    calls ``evaluate`` and ``state_dict`` from inside ``record`` when its schedule says
    so, and after ``train`` returns (see :class:`RunContext`).
    """

    def __init__(self, config: Any, ctx: RunContext) -> None: ...

    def train(self) -> None:
        """Train until the configured budget or ``ctx.should_stop()``."""
        ...

    def evaluate(
        self, episodes: int, *, greedy: bool = True, baseline: bool = True
    ) -> dict[str, Any]:
        """Run evaluation episodes on fresh envs (``ctx.make_env`` with the eval seed
        offset, from the env's real start state); return a summary. It must not change
        what training does next (its own random streams). ``baseline=False``
        (``gbx eval --no-baseline``) skips random-policy episodes a trainer plays beside
        its own; a trainer that plays none ignores it."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly (model, optimiser, counters, RNG)."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...

    def act(self, obs: torch.Tensor, *, greedy: bool = True) -> torch.Tensor:
        """Actions int64 ``[N]`` for observations (used by ``gbx gif``/``eval``)."""
        ...



@runtime_checkable
class FailureContext(Protocol):
    """A :class:`Trainer` that can show what one env saw before a failure (optional).

    ``failure_context()`` returns ``{"frames": [T, H, W], "actions": [T]}`` of one env;
    the run loop adds them to the failure bundle when the trainer raises.
    """

    def failure_context(self) -> dict[str, Any]: ...


@runtime_checkable
class EnvMeta(Protocol):
    """An :class:`Env` that describes itself (optional): ``meta()`` returns plain data
    (action names, frames per step, ROM hash...), which the run records in ``meta.json``."""

    def meta(self) -> dict[str, Any]: ...


@runtime_checkable
class WeightInit(Protocol):
    """A :class:`Trainer` that can start from another run's weights (optional).

    ``init_weights(state, source)`` takes the trainer state of a checkpoint (what
    ``state_dict()`` returned, possibly of a run on another env) and loads the policy's
    weights only: optimiser, counters, random streams and env batch start fresh.
    ``gbx run --init-from RUN_OR_CHECKPOINT`` (``run.init_from``) calls it once, before
    training; a resumed run continues from its own checkpoint instead. A state that does
    not fit raises ``ValueError`` naming the mismatch.
    """

    def init_weights(self, state: Mapping[str, Any], source: str) -> None: ...


class Observer(Protocol):
    """Receives run events. Every method is optional; missing ones are skipped."""

    def on_run_start(self, meta: Mapping[str, Any]) -> None: ...

    def on_record(self, record: Mapping[str, Any]) -> None: ...

    def on_eval(self, record: Mapping[str, Any]) -> None: ...

    def on_checkpoint(self, path: Path, step: int) -> None: ...

    def on_failure(self, error: Mapping[str, Any]) -> None: ...

    def on_run_end(self, summary: Mapping[str, Any]) -> None: ...
