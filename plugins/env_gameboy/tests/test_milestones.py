"""Milestones: screens on the way to a goal that pay a bonus once per episode
(``env.milestone_dirs``), pixels only, kept across a resume and reset on every restore."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from plans import actions_at, scripted_policy

from gbx.api import EpisodeProgressEnv
from gbx.goal_math import goal_distance
from gbx.runner import GOAL_STATES_DIR
from gbx_gameboy.capture import GoalError
from gbx_gameboy.game.solutions import (
    ACTIONS,
    INTO_PIT,
    LEAVE_HOUSE,
    TO_CAVE,
    TO_MEADOW,
    action_indices,
)
from gbx_gameboy.tasks import STAGES_BY_ENV, make_stage_env

B = ACTIONS.index("B")  # does nothing while walking: a wait of one step
UP = ACTIONS.index("UP")
# Stage 3 has no failure screen at the house (stage 2 has): the tests walk in and out there.
OUT_AND_BACK = action_indices(LEAVE_HOUSE + ("UP", "DOWN"))  # out, in again, out again


def _play(env, plans: list[list[int]]) -> torch.Tensor:
    """Play one plan per env (then wait); rewards ``[T, N]``."""
    length = max(len(p) for p in plans)
    rewards = []
    for t in range(length):
        _, reward, _, _, _ = env.step(actions_at(plans, t))
        rewards.append(reward.clone())
    return torch.stack(rewards)


def test_each_milestone_pays_once_on_the_way() -> None:
    env = make_stage_env("gbx-quest-3", 2, "cpu", 0,
                         milestone_dirs=("gbx-quest-1", "gbx-quest-2"), milestone_bonus=0.5)
    meta = env.meta()
    assert [Path(d).name for d in meta["milestone_dirs"]] == [
        "quest1_leave_house", "quest2_reach_meadow"]
    assert meta["milestone_taus"] == [0.05, 0.05] and meta["milestone_bonus"] == 0.5
    env.reset()
    # env 0 walks out, back in and out again, then on to the meadow; env 1 stays home
    walk = OUT_AND_BACK + action_indices(TO_MEADOW)
    rewards = _play(env, [walk, []])
    paid = rewards[:, 0].nonzero().flatten().tolist()
    # out of the house on the solution's 9th step (not again on the second time out), in
    # the meadow on the last step
    assert paid == [len(LEAVE_HOUSE) - 1, len(walk) - 1]
    assert rewards[paid, 0].tolist() == [0.5, 0.5]
    assert not bool(rewards[:, 1].any())
    assert env._passed.tolist() == [[True, False], [True, False]]


@pytest.fixture(scope="module")
def village_states(tmp_path_factory) -> Path:
    """Stage 1's goal states: the hero just outside the house door."""
    env = make_stage_env("gbx-quest-1", 2, "cpu", 0, save_goal_states=2)
    env.reset()
    _play(env, [action_indices(LEAVE_HOUSE), [B] + action_indices(LEAVE_HOUSE)])
    folder = tmp_path_factory.mktemp("run") / GOAL_STATES_DIR
    assert env.write_goal_states(folder) == 2
    return folder


def test_an_episode_that_starts_at_a_milestone_has_passed_it(village_states: Path) -> None:
    """A stage begun at an earlier stage's goal pays nothing for being there, nor for
    walking back into it; an episode from the real start pays on reaching it."""
    env = make_stage_env("gbx-quest-3", 8, "cpu", 3, milestone_dirs=("gbx-quest-1",),
                         start_states=(str(village_states),), real_start_fraction=0.5)
    obs = env.reset()
    template = torch.from_numpy(env.milestones[0].template)
    outside = goal_distance(obs[:, -1], template) < env.milestones[0].tau
    assert 0 < int(outside.sum()) < 8
    assert torch.equal(env._passed[0], outside)
    # what a trainer reads (gbx.api.EpisodeProgressEnv): the env's own flags
    assert isinstance(env, EpisodeProgressEnv) and env.episode_progress() is env._passed
    # everyone walks the house's way out; those outside go in and out again
    rewards = _play(env, [OUT_AND_BACK if bool(o) else action_indices(LEAVE_HOUSE)
                          for o in outside])
    assert torch.equal(rewards.sum(0), (~outside).float())
    assert bool(env._passed.all())


def test_a_restore_keeps_the_milestones_its_snapshot_had_passed() -> None:
    """The explorer's restarts (SnapshotEnv) are new episodes that have passed what the
    saved episode had passed (and what their first screen is under): a restart beyond a
    milestone earns nothing for walking back to it, one before it earns it once."""
    env = make_stage_env("gbx-quest-3", 3, "cpu", 0, milestone_dirs=("gbx-quest-2",))
    env.reset()
    slots = env.snapshot_slots(3)
    slots.save(torch.tensor([0, -1, -1]))  # slot 0: the house, nothing passed
    to_gate = action_indices(LEAVE_HOUSE + TO_MEADOW)
    beyond = to_gate + action_indices(TO_CAVE[:4])  # four steps past the gate: scrolled
    rewards = _play(env, [beyond, [], []])
    assert rewards[:, 0].tolist().count(1.0) == 1  # the gate paid once
    template = torch.from_numpy(env.milestones[0].template)
    frame = env.stack.buffer[:, -1]
    assert float(goal_distance(frame, template)[0]) > env.milestones[0].tau  # not shown
    slots.save(torch.tensor([1, -1, -1]))  # slot 1: past the gate, passed
    assert env._passed[0].tolist() == [True, False, False]
    slots.restore(torch.tensor([0, 1, -1]))  # env 0 home, env 1 past the gate
    assert env._passed[0].tolist() == [False, True, False]
    back = action_indices(("LEFT",) * 4)  # env 1 walks back to the gate
    rewards = _play(env, [to_gate, back, []])
    assert rewards.sum(0).tolist() == [1.0, 0.0, 0.0]
    # the slots' progress is part of what a checkpoint saves
    assert slots.tensors()["progress"].tolist() == [[False, True, False]]


def test_milestone_progress_survives_a_resume() -> None:
    env = make_stage_env("gbx-quest-3", 2, "cpu", 0, milestone_dirs=("gbx-quest-1",))
    env.reset()
    _play(env, [action_indices(LEAVE_HOUSE), []])
    saved = env.env_state_dict()
    assert saved["goal"]["milestones_passed"].tolist() == [[True, False]]
    resumed = make_stage_env("gbx-quest-3", 2, "cpu", 0, milestone_dirs=("gbx-quest-1",))
    resumed.load_env_state_dict(saved)
    # back in and out again: no second bonus after the resume either
    assert not bool(_play(resumed, [[UP, ACTIONS.index("DOWN")], []]).any())
    plain = make_stage_env("gbx-quest-3", 2, "cpu", 0)
    with pytest.raises(ValueError, match="milestones' progress") as err:
        resumed.load_env_state_dict(plain.env_state_dict())
    assert "\n" not in str(err.value)


def test_stages_three_and_four_still_end_in_the_pit_with_milestones() -> None:
    """Milestones add reward; failure screens still end the episode."""
    env = make_stage_env("gbx-quest-4", 1, "cpu", 0, milestone_dirs=("gbx-quest-2",))
    env.reset()
    walk = action_indices(LEAVE_HOUSE + TO_MEADOW + TO_CAVE + INTO_PIT[:-1])
    total = 0.0
    for a in walk:
        _, reward, done, _, info = env.step(torch.tensor([a]))
        total += float(reward[0])
    assert bool(done[0]) and bool(info["failure"][0])
    assert total == 1.0 - 1.0  # the meadow's bonus, then the pit's penalty


@pytest.mark.parametrize(("milestones", "message"), [
    (("gbx-quest-9",), "no bundled stage"),
    (("gbx-quest-3",), "is the goal screen itself"),
    ((str(STAGES_BY_ENV["gbx-quest-3"].goal_dir() / "failure_fell_in_pit"),),
     "is a failure screen"),
    (("/nonexistent/milestone",), "goal not found"),
])
def test_bad_milestones_are_one_line_errors(milestones: tuple[str, ...], message: str) -> None:
    with pytest.raises(GoalError, match=message) as err:
        make_stage_env("gbx-quest-3", 1, "cpu", 0, milestone_dirs=milestones)
    assert "\n" not in str(err.value)


def test_gbx_run_with_an_unknown_milestone_exits_2_in_one_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from gbx.cli import build_cli
    from gbx.plugins import load_plugins

    cli = build_cli(load_plugins(environ={"GBX_PLUGINS": "gameboy,gameboy_tasks,ppo"}))
    result = CliRunner().invoke(cli, [
        "run", "--algo", "ppo", "--env", "gbx-quest-3", "--device", "cpu", "--steps", "64",
        "--observer", "print", "--run-dir", str(tmp_path / "run"),
        "--set", "env.milestone_dirs=gbx-quest-2,gbx-quest-9", "--set", "algo.num_envs=2",
        "--set", "algo.rollout_steps=32"])
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("gbx: error:")]
    assert len(errors) == 1 and "gbx-quest-9" in errors[0], result.output


def test_evaluation_reports_the_milestones_each_episode_passed() -> None:
    """info["milestones"] carries each episode's count (its final one on the step it ends),
    and gbx eval's summary its mean: how far episodes got when none reached the goal."""
    from gbx_toolkit.evaluation import evaluate_policy

    env = make_stage_env("gbx-quest-3", 3, "cpu", 0, max_steps=30,
                         milestone_dirs=("gbx-quest-1", "gbx-quest-2"))
    plans = [action_indices(LEAVE_HOUSE + TO_MEADOW), action_indices(LEAVE_HOUSE), []]
    out = evaluate_policy(env, scripted_policy(plans), 3, greedy=True, baseline=False)
    assert out["success_rate"] == 0.0  # all three run out of steps before the gem
    assert out["mean_milestones"] == (2 + 1 + 0) / 3
    env.reset()
    info = env.step(torch.tensor([B, B, B]))[4]
    assert info["milestones"].tolist() == [0, 0, 0]
    plain = make_stage_env("gbx-quest-3", 1, "cpu", 0)
    plain.reset()
    assert "milestones" not in plain.step(torch.tensor([B]))[4]
    assert "mean_milestones" not in evaluate_policy(plain, lambda o: torch.tensor([B]), 1,
                                                    greedy=True, baseline=False)


def test_an_env_without_milestones_tells_a_trainer_it_has_none() -> None:
    env = make_stage_env("gbx-quest-3", 2, "cpu", 0)
    assert isinstance(env, EpisodeProgressEnv) and env.episode_progress() is None
