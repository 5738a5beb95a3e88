"""``gbx chain``: the stages of a curriculum as one job, one ordinary run per stage.

Each stage is a config file that names its own run directory (``run.run_dir``); a later
stage takes an earlier one's weights and goal states the usual way, by naming its run
directory in ``run.init_from`` and ``env.start_states``. The chain adds what one job of
several runs needs:

* one clock: the chain's time is the sum of its stages' wall clocks (each run's
  ``summary.json``, a resumed run's carried time included), and ``--max-seconds`` and
  ``--deadlines`` become each stage's ``run.max_seconds``, the time left to its deadline;
* a stop where it was: a stage whose ``summary.json`` says ``completed`` is done and is
  skipped, one that was stopped (a signal, a killed machine) is resumed from its
  checkpoint, and the rest start fresh, so running the same chain again after a kill
  continues it; a run directory that holds another configuration is refused.

The decisions (what a stage's directory says, its time limit, whether a saved run is the
same stage) are plain functions of their inputs; :func:`run_chain` does the running.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from gbx.errors import ConfigError, GbxError
from gbx.runner import SUMMARY_FILE

# What a stage's run directory says about it.
NEW, RESUME, DONE = "new", "resume", "done"

# The parts of a run's config that make it the same stage: the sections the algorithm,
# the env and the explorer read, and the run settings that change what is learned. The
# time limit, the observers and the schedule of checkpoints may differ between tries.
SAME_STAGE_RUN_KEYS = ("algo", "env", "seed", "steps", "init_from")
SAME_STAGE_SECTIONS = ("algo", "env", "explore")


@attrs.frozen
class StageDir:
    """A stage's run directory as found: ``new`` (no run yet), ``resume`` (a run that did
    not complete) or ``done`` (its ``summary.json`` says completed)."""

    state: str
    seconds: float = 0.0
    summary: Mapping[str, Any] | None = None


def read_stage_dir(run_dir: Path) -> StageDir:
    """What ``run_dir`` holds: nothing yet, a run to resume, or a completed run."""
    if not (run_dir / "meta.json").exists():
        return StageDir(NEW)
    summary_path = run_dir / SUMMARY_FILE
    if summary_path.exists():
        summary = json.loads(summary_path.read_text())
        state = DONE if summary.get("status") == "completed" else RESUME
        return StageDir(state, run_seconds(summary), summary)
    return StageDir(RESUME)  # killed before it could write a summary


def run_seconds(summary: Mapping[str, Any]) -> float:
    """A run's whole wall clock from its summary (a resumed run's earlier time included)."""
    return float(summary.get("elapsed_s", summary.get("wall_time_s", 0.0)))


def parse_deadlines(text: str | None, stages: int) -> tuple[float, ...]:
    """``"420,1140"``: the chain-clock second by which each of the first stages ends."""
    if not text:
        return ()
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise ConfigError(f"--deadlines {text!r} is not a comma-separated list of seconds, "
                          "e.g. --deadlines 420,1140") from None
    if len(values) > stages:
        raise ConfigError(f"--deadlines gives {len(values)} deadlines for {stages} stages; "
                          "give at most one per stage")
    if any(v <= 0 for v in values) or any(b < a for a, b in zip(values, values[1:], strict=False)):
        raise ConfigError(f"--deadlines {text!r} must be positive and not decreasing "
                          "(seconds since the chain began)")
    return values


def stage_deadline(index: int, deadlines: Sequence[float],
                   max_seconds: float | None) -> float | None:
    """The chain-clock second by which stage ``index`` ends (None: no limit)."""
    own = deadlines[index] if index < len(deadlines) else None
    if own is None:
        return max_seconds
    return own if max_seconds is None else min(own, max_seconds)


def stage_limit(deadline: float | None, elapsed: float, own: float | None) -> float | None:
    """The stage's ``run.max_seconds``: the time left to its deadline, or its own limit
    where that is shorter; None without either. Not above 0 means no time is left."""
    if deadline is None:
        return own
    left = deadline - elapsed
    return left if own is None else min(own, left)


def stage_difference(saved: Mapping[str, Any], wanted: Mapping[str, Any]) -> str | None:
    """The first setting in which a saved run's config differs from the stage's (dotted
    key), or None when the run is this stage."""
    for key in SAME_STAGE_RUN_KEYS:
        if saved.get("run", {}).get(key) != wanted.get("run", {}).get(key):
            return f"run.{key}"
    for section in SAME_STAGE_SECTIONS:
        mine, theirs = saved.get(section) or {}, wanted.get(section) or {}
        for key in sorted(set(mine) | set(theirs)):
            if mine.get(key) != theirs.get(key):
                return f"{section}.{key}"
    return None


@attrs.frozen
class Stage:
    """One stage: its config file and the config built from it (the chain's flags and
    ``--set`` values applied)."""

    path: str
    config: Any

    @property
    def run_dir(self) -> Path:
        return Path(self.config.run.run_dir)


def check_stages(stages: Sequence[Stage]) -> None:
    """Every stage names its own run directory (the next stages refer to it)."""
    seen: dict[Path, str] = {}
    for stage in stages:
        if not stage.config.run.run_dir:
            raise ConfigError(f"{stage.path} names no run.run_dir: a chained stage needs a "
                              "fixed run directory for the next stage to start from; add "
                              "run_dir under [run]")
        if stage.run_dir in seen:
            raise ConfigError(f"{stage.path} and {seen[stage.run_dir]} both run in "
                              f"{stage.run_dir}; give each stage its own run.run_dir")
        seen[stage.run_dir] = stage.path


# execute(config, resume_dir) -> the run's summary, as :func:`gbx.runner.execute` gives it.
Execute = Callable[[Any, Path | None], Mapping[str, Any]]


def run_chain(
    stages: Sequence[Stage],
    *,
    execute: Execute,
    saved_config: Callable[[Path], Any],
    to_dict: Callable[[Any], Mapping[str, Any]],
    with_limit: Callable[[Any, float | None], Any],
    deadlines: Sequence[float] = (),
    max_seconds: float | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Run the stages in order; return the chain's summary.

    ``saved_config(run_dir)`` loads a run's saved config (for a resume), ``to_dict`` turns
    a config into plain data (to compare a saved run with its stage) and
    ``with_limit(config, seconds)`` sets ``run.max_seconds`` (None: no limit). The chain
    stops at the first stage that did not complete (a signal: its exit code is the
    chain's) and when no time is left for the next stage.
    """
    check_stages(stages)
    elapsed = 0.0
    report: list[dict[str, Any]] = []
    status, exit_code = "completed", 0
    for index, stage in enumerate(stages):
        label = f"stage {index + 1}/{len(stages)} ({stage.path})"
        found = read_stage_dir(stage.run_dir)
        config = stage.config
        if found.state != NEW:
            saved = saved_config(stage.run_dir)
            differs = stage_difference(to_dict(saved), to_dict(config))
            if differs is not None:
                raise GbxError(f"{stage.run_dir} holds a run whose {differs} differs from "
                               f"{stage.path}'s; remove that directory or give the stage "
                               "another run.run_dir")
            config = saved
        if found.state == DONE:
            say(f"gbx: chain {label}: done already in {stage.run_dir} "
                f"({found.summary.get('stop_reason', 'completed') if found.summary else ''}, "
                f"{found.seconds:.0f} s)")
            elapsed += found.seconds
            report.append(_entry(stage, found.summary or {}, "skipped: completed before"))
            continue
        deadline = stage_deadline(index, deadlines, max_seconds)
        limit = stage_limit(deadline, elapsed, stage.config.run.max_seconds or None)
        if limit is not None and limit <= 0:
            say(f"gbx: chain {label}: no time left at {elapsed:.0f} s of the chain")
            status = "out_of_time"
            report.extend(_entry(s, {}, "not run: no time left") for s in stages[index:])
            break
        verb = "resuming" if found.state == RESUME else "starting"
        budget = "" if limit is None else f", {limit:.0f} s to its deadline"
        say(f"gbx: chain {label}: {verb} in {stage.run_dir} at {elapsed:.0f} s{budget}")
        summary = execute(with_limit(config, limit),
                          stage.run_dir if found.state == RESUME else None)
        elapsed += run_seconds(summary)  # a resumed stage's earlier time included
        report.append(_entry(stage, summary, "ran"))
        if summary.get("status") != "completed":
            status = str(summary.get("status", "stopped"))
            exit_code = int(summary.get("exit_code") or 1)
            report.extend(_entry(s, {}, "not run: the chain stopped") for s in stages[index + 1:])
            break
    return {"status": status, "exit_code": exit_code, "elapsed_s": round(elapsed, 3),
            "stages": report}


def _entry(stage: Stage, summary: Mapping[str, Any], how: str) -> dict[str, Any]:
    keys = ("status", "stop_reason", "step", "elapsed_s")
    return {"config": stage.path, "run_dir": str(stage.run_dir), "how": how,
            **{k: summary[k] for k in keys if k in summary}}
