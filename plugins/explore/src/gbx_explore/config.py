"""The ``explore`` section of the ``archive`` explorer (beside ``explore.name``)."""

from __future__ import annotations

import attrs

from gbx.config import in_range, option

_v = attrs.validators

MAX_CAPACITY = 1 << 20


@attrs.frozen
class ArchiveConfig:
    """Fields of ``explore.*`` when ``explore.name = "archive"``."""

    capacity: int = option(
        4096, "cells the archive holds (each with one saved env state); fixed device memory",
        in_range(1, MAX_CAPACITY))
    start_fraction: float = option(
        0.5, "fraction of finished episodes that restart from an archived cell (the rest "
        "from the task's real start state)", in_range(0.0, 1.0))
    explore_steps: int = option(
        0, "an episode that started from an archived cell ends (truncated) after this many "
        "steps and the env restarts, from a cell or the start; 0 = it runs to the env's "
        "max_steps. Episodes from the start always run to max_steps", in_range(0))
    scout_steps: int = option(
        0, "batch steps of random play before the first training step (Go-Explore's "
        "exploration phase): every env plays uniformly random buttons, restarting from "
        "archived cells, to fill the archive; then the envs are put back as they were and "
        "training begins with the archive kept. Their env steps are reported as "
        "explore_scout_env_steps, apart from the trainer's; 0 = none", in_range(0))
    scout_goals: int = option(
        0, "scouting ends early once its episodes reached the goal this many times (looked "
        "at every 16 steps): enough of the way is archived, and the rest of the scout_steps "
        "would be spent replaying it; 0 = play all scout_steps", in_range(0))
    bonus: float = option(
        0.01, "novelty bonus coefficient: intrinsic reward bonus / sqrt(visits of the cell); "
        "0 = off", in_range(0.0))
    split_by_start: bool = option(
        False, "cells also tell where the episode began: a screen reached from one of the "
        "curriculum's start states (env.start_states, which may carry progress the screen "
        "hardly shows, such as an item won in the previous stage) and the same screen "
        "reached from the real start are two cells, each with its own saved state; needs an "
        "env with the gbx.api.StartOriginEnv capability")
    cell_rows: int = option(9, "cell grid rows: the frame is cut into rows x cols blocks",
                            in_range(1, 256))
    cell_cols: int = option(10, "cell grid columns", in_range(1, 256))
    levels: int = option(8, "levels each block's mean shade is rounded to", in_range(2, 16))
    weight_visits: float = option(
        1.0, "selection weight of rarely visited cells: w / sqrt(1 + visits)", in_range(0.0))
    weight_recent: float = option(
        0.5, "selection weight of recently discovered cells: w * 0.5**(age / halflife)",
        in_range(0.0))
    recent_halflife: float = option(
        200.0, "age (explorer steps) at which the recency weight halves",
        in_range(0.0, lo_open=True))
    weight_goal: float = option(
        0.5, "selection weight of cells closest to the goal (envs with a goal distance): "
        "w * exp(-(dist - min dist) / goal_scale)", in_range(0.0))
    goal_scale: float = option(
        0.02, "goal distance over which the goal weight falls by e", in_range(0.0, lo_open=True))
    weight_frontier: float = option(
        0.0, "selection weight of cells the policy sometimes reaches the goal from: "
        "w * 4 p (1 - p), p the share of the recent restarts from the cell that reached the "
        "goal (a reverse curriculum: restarts move back from the goal as the policy learns); "
        "0 = off", in_range(0.0))
    frontier_window: float = option(
        64.0, "restarts a cell's success share is taken over: its counts are halved whenever "
        "they pass this many", in_range(1.0))
