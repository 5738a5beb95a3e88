"""Curriculum across stages: goal states saved by a run, start states of the next stage,
and evaluation envs that always start from the task's real start state."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from plans import actions_at, scripted_policy

from gbx.config import build_config
from gbx.goal_math import goal_distance
from gbx.plugins import load_plugins
from gbx.runner import GOAL_STATES_DIR, prepare
from gbx_gameboy.game.solutions import (
    ACTIONS,
    INTO_PIT,
    LEAVE_HOUSE,
    SOLUTIONS,
    TO_CAVE,
    TO_MEADOW,
    action_indices,
)
from gbx_gameboy.savestate import SaveStateError
from gbx_gameboy.tasks import make_stage_env

B = ACTIONS.index("B")  # does nothing while walking: a wait of one step


def _play_to_goal(env, waits: list[int]) -> torch.Tensor:
    """Env e waits ``waits[e]`` steps, then plays stage 1's solution (then waits);
    returns the step at which each env reached the goal (-1: never)."""
    solution = action_indices(SOLUTIONS["leave_house"])
    plans = [[B] * w + solution for w in waits]
    length = max(len(p) for p in plans)
    reached = torch.full((env.num_envs,), -1)
    env.reset()
    for t in range(length + 1):
        actions = actions_at(plans, t)
        _, _, done, _, _ = env.step(actions)
        reached = torch.where(done & (reached < 0), torch.tensor(t), reached)
    return reached


@pytest.fixture(scope="module")
def goal_folder(tmp_path_factory) -> Path:
    """Four distinct stage-1 goal states (reached after 0, 1, 2 and 3 waiting steps)."""
    env = make_stage_env("gbx-quest-1", 4, "cpu", 0, save_goal_states=4)
    reached = _play_to_goal(env, [0, 1, 2, 3])
    assert reached.tolist() == [8, 9, 10, 11]
    folder = tmp_path_factory.mktemp("run") / GOAL_STATES_DIR
    assert env.write_goal_states(folder) == 4
    assert env.write_goal_states(folder) == 4  # the same states: nothing new
    assert len(list(folder.glob("goal_*.gbxstate"))) == 4
    return folder


def test_goal_states_are_kept_on_the_device_as_a_ring(tmp_path: Path) -> None:
    env = make_stage_env("gbx-quest-1", 3, "cpu", 0, save_goal_states=2)
    _play_to_goal(env, [0, 1, 5])  # three goals into two slots: the newest two stay
    ring = env.goal_states
    assert ring is not None and int(ring.filled) == 2 and int(ring.cursor) == 1
    assert env.write_goal_states(tmp_path) == 2
    # Kept states are whole machines at the goal screen: their frames are the goal picture.
    state = env.env_state_dict()["goal_states"]
    fb = state["arrays"]["fb"]
    assert fb.shape[0] == 2 and not torch.equal(fb[0], torch.zeros_like(fb[0]))


def test_next_stage_starts_from_the_saved_goal_states(goal_folder: Path) -> None:
    env = make_stage_env("gbx-quest-1", 64, "cpu", 1, start_states=(str(goal_folder),))
    assert env.bank.size == 5 and len(env.meta()["start_states_sha256"]) == 4
    obs = env.reset()
    dist = goal_distance(obs[:, -1], torch.from_numpy(env.goal.template))
    at_goal = dist < env.tau
    # A seeded device draw over the real start and the four goal states.
    assert 30 < int(at_goal.sum()) < 64
    again = make_stage_env("gbx-quest-1", 64, "cpu", 1, start_states=(str(goal_folder),))
    assert torch.equal(again.reset(), obs)


def test_bad_start_states_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gbxstate"
    bad.write_bytes(b"GBXSTATE" + b"\x01" * 40)
    for entry, words in ((bad, "env.start_states"), (tmp_path / "none", "not found"),
                         (tmp_path / "empty", "holds no")):
        if entry.name == "empty":
            entry.mkdir()
        with pytest.raises(SaveStateError) as err:
            make_stage_env("gbx-quest-1", 2, "cpu", 0, start_states=(str(entry),))
        assert words in str(err.value) and "\n" not in str(err.value)


def _run(tmp_path: Path, *overrides: str):
    host = load_plugins(environ={"GBX_PLUGINS": "gameboy,gameboy_tasks,ppo"})
    config = build_config(
        host.registry,
        flags={"algo": "ppo", "env": "gbx-quest-1", "device": "cpu",
               "run_dir": str(tmp_path / "run"), "observers": ("print",)},
        overrides=list(overrides),
    )
    return prepare(config, host)[0]


def test_evaluation_envs_start_from_the_real_start(goal_folder: Path, tmp_path: Path) -> None:
    run = _run(tmp_path, f"env.start_states={goal_folder}", "env.save_goal_states=4")
    train = run.make_env(8, training=True)
    evaluation = run.make_env(8)
    assert train.bank.size == 5 and train.goal_states is not None
    assert evaluation.bank.size == 1 and evaluation.goal_states is None
    assert evaluation.meta()["start_states"] == [] and evaluation.config.save_goal_states == 0
    real = make_stage_env("gbx-quest-1", 8, "cpu", 0)
    assert torch.equal(evaluation.reset(), real.reset())


def test_a_checkpoint_writes_the_goal_states_into_the_run(tmp_path: Path) -> None:
    run = _run(tmp_path, "env.save_goal_states=4")
    train = run.make_env(2, training=True)
    assert _play_to_goal(train, [0, 2]).tolist() == [8, 10]
    run.checkpoint({"x": torch.zeros(1)}, step=1)
    assert len(list((run.run_dir / GOAL_STATES_DIR).glob("goal_*.gbxstate"))) == 2


def test_stage_two_ends_as_a_failure_back_in_the_house() -> None:
    from gbx_toolkit.evaluation import evaluate_policy

    env = make_stage_env("gbx-quest-2", 2, "cpu", 0, failure_penalty=0.5, info_mode="full")
    assert len(env.failures) == 1 and env.meta()["failure_taus"] == [0.0005]
    back = action_indices(SOLUTIONS["leave_house"] + ("UP",))  # out, then in again
    env.reset()
    for t, a in enumerate(back):
        _, reward, done, _, info = env.step(torch.tensor([a, B]))
        if t < len(back) - 1:
            assert not done.any()
    assert done.tolist() == [True, False] and info["failure"].tolist() == [True, False]
    assert not info["success"].any() and reward.tolist() == [-0.5, 0.0]
    assert info["reset_mask"].tolist() == [True, False]
    # Evaluation counts it as a failure, not a success; the goal still counts as one.
    plans = [back, action_indices(SOLUTIONS["reach_meadow"])]
    out = evaluate_policy(env, scripted_policy(plans), 2, greedy=True, baseline=False)
    assert out["success_rate"] == 0.5 and out["failure_rate"] == 0.5
    assert out["median_steps_to_goal"] == len(plans[1])


@pytest.mark.parametrize("env_name", ["gbx-quest-3", "gbx-quest-4"])
def test_a_pit_in_the_cave_ends_stages_three_and_four_as_failures(env_name: str) -> None:
    """The game's own game over: stepping into a pit shows it, and the stage env ends the
    episode there as a failure."""
    env = make_stage_env(env_name, 1, "cpu", 0, info_mode="full")
    assert [Path(d).name for d in env.meta()["failure_dirs"]] == ["failure_fell_in_pit"]
    walk = action_indices(LEAVE_HOUSE + TO_MEADOW + TO_CAVE + INTO_PIT[:-1])  # into the pit
    env.reset()
    ended = []
    for a in walk:
        _, _, done, _, info = env.step(torch.tensor([a]))
        ended.append(bool(info["failure"][0]))
        if bool(done[0]):
            break
    # the game-over screen is up once the step into the pit is over
    assert ended == [False] * (len(walk) - 1) + [True]


def test_capture_goal_failure_makes_a_failure_screen(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from gbx_gameboy.capture import GoalError, capture_goal_cmd
    from gbx_gameboy.env import DEFAULT_ROM
    from gbx_gameboy.tasks import START_STATE, states_dir

    out = tmp_path / "fell"
    result = CliRunner().invoke(capture_goal_cmd, [
        "--rom", str(DEFAULT_ROM), "--state", str(states_dir() / START_STATE),
        "--steps", "DOWN*5,LEFT*3,DOWN,UP", "--tau", "0.0005", "--failure", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "meta.json").read_text())["kind"] == "failure"
    env = make_stage_env("gbx-quest-1", 1, "cpu", 0, failure_dirs=(str(out),))
    assert env.meta()["failure_dirs"] == [str(out)]
    with pytest.raises(GoalError, match="is a failure screen") as err:
        make_stage_env("gbx-quest-1", 1, "cpu", 0, goal_dir=str(out))
    assert "\n" not in str(err.value)


def test_gbx_run_with_a_bad_start_state_exits_2_in_one_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from gbx.cli import build_cli

    bad = tmp_path / "bad.gbxstate"
    bad.write_bytes(b"not a savestate")
    cli = build_cli(load_plugins(environ={"GBX_PLUGINS": "gameboy,gameboy_tasks,ppo"}))
    result = CliRunner().invoke(cli, [
        "run", "--algo", "ppo", "--env", "gbx-quest-1", "--device", "cpu", "--steps", "64",
        "--observer", "print", "--run-dir", str(tmp_path / "run"),
        "--set", f"env.start_states={bad}", "--set", "algo.num_envs=2",
        "--set", "algo.rollout_steps=32"])
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("gbx: error:")]
    assert len(errors) == 1 and "env.start_states" in errors[0] and str(bad) in errors[0]


def test_real_start_fraction_weights_the_real_start(goal_folder: Path) -> None:
    def at_goal(fraction: float) -> torch.Tensor:
        env = make_stage_env("gbx-quest-1", 64, "cpu", 1, start_states=(str(goal_folder),),
                             real_start_fraction=fraction)
        obs = env.reset()
        return goal_distance(obs[:, -1], torch.from_numpy(env.goal.template)) < env.tau

    assert not bool(at_goal(1.0).any())  # every env in the house
    assert bool(at_goal(0.0).all())  # every env at one of the saved goal states
    # Without start states the setting has nothing to weigh against: a one-line error,
    # and evaluation envs (built without start states) drop it.
    with pytest.raises(ValueError, match="needs env.start_states"):
        make_stage_env("gbx-quest-1", 2, "cpu", 0, real_start_fraction=0.5)


def test_the_env_says_which_episodes_began_at_a_start_state(goal_folder: Path) -> None:
    """gbx.api.StartOriginEnv: the flag is True exactly where the episode began at one of
    env.start_states (here: on the goal screen), also for envs reset after a step."""
    from gbx.api import StartOriginEnv

    env = make_stage_env("gbx-quest-1", 32, "cpu", 2, start_states=(str(goal_folder),),
                         real_start_fraction=0.5, max_steps=1)
    assert isinstance(env, StartOriginEnv)
    template = torch.from_numpy(env.goal.template)
    obs = env.reset()
    began = env.from_start_states().clone()
    assert torch.equal(began, goal_distance(obs[:, -1], template) < env.tau)
    assert 0 < int(began.sum()) < 32
    obs, *_ = env.step(torch.full((32,), B))  # max_steps=1: every env resets
    again = env.from_start_states()
    assert torch.equal(again, goal_distance(obs[:, -1], template) < env.tau)
    assert not torch.equal(again, began)  # a fresh draw
    restored = make_stage_env("gbx-quest-1", 32, "cpu", 2, start_states=(str(goal_folder),),
                              real_start_fraction=0.5, max_steps=1)
    restored.load_env_state_dict(env.env_state_dict())
    assert torch.equal(restored.from_start_states(), again)
    plain = make_stage_env("gbx-quest-1", 4, "cpu", 0)
    plain.reset()
    assert not bool(plain.from_start_states().any())  # no curriculum: the real start


def test_evaluation_envs_drop_the_real_start_fraction(goal_folder: Path,
                                                      tmp_path: Path) -> None:
    run = _run(tmp_path, f"env.start_states={goal_folder}", "env.real_start_fraction=0.25")
    assert run.make_env(4, training=True).config.real_start_fraction == 0.25
    assert run.make_env(4).config.real_start_fraction is None


def _first_truncations(env, steps: int) -> list[int]:
    """The step at which each env's first episode was cut (0: not within ``steps``)."""
    env.reset()
    first = torch.zeros(env.num_envs, dtype=torch.int64)
    press_a = torch.zeros(env.num_envs, dtype=torch.int64)  # A does not leave the house
    for t in range(1, steps + 1):
        _obs, _r, _done, trunc, _info = env.step(press_a)
        first = torch.where(trunc & (first == 0), t, first)
    return first.tolist()


def test_stagger_start_spreads_the_first_episodes_ends(tmp_path: Path) -> None:
    """env.stagger_start: the training envs' first episodes end at different steps (their
    step counters start part-way through max_steps), the same ones for the same seed;
    without it, or in an evaluation env, all of them end together at max_steps."""
    staggered = _first_truncations(
        make_stage_env("gbx-quest-1", 8, "cpu", 3, max_steps=12, stagger_start=True), 12)
    assert all(1 <= t <= 12 for t in staggered) and len(set(staggered)) > 2
    assert staggered == _first_truncations(
        make_stage_env("gbx-quest-1", 8, "cpu", 3, max_steps=12, stagger_start=True), 12)
    together = _first_truncations(make_stage_env("gbx-quest-1", 8, "cpu", 3, max_steps=12), 12)
    assert together == [12] * 8
    run = _run(tmp_path, "env.stagger_start=true")
    assert run.make_env(2, training=True).config.stagger_start is True
    assert run.make_env(2).config.stagger_start is False
