"""The bundled stages: registration, defaults, start states, and every scripted solution
reaching its goal screen at its last step (not before)."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import subprocess
import sys

import pytest
import torch

from gbx.config import structure_section
from gbx_gameboy.game.solutions import ACTIONS
from gbx_gameboy.tasks import (
    INDEX_FILE,
    STAGE_CONFIGS,
    STAGE_TASKS,
    START_STATE,
    make_stage_env,
    register_envs,
    states_dir,
)


def test_register_envs_registers_goal_env_and_four_stages() -> None:
    got: dict[str, tuple] = {}

    def register(name, factory, config_cls, *, description=""):
        got[name] = (factory, config_cls, description)

    register_envs(register)
    assert set(got) == {"gameboy-goal", "gbx-quest-1", "gbx-quest-2", "gbx-quest-3",
                        "gbx-quest-4"}
    cfg = structure_section({"tau": 0.1, "shaping": 2.0}, got["gbx-quest-2"][1], "env")
    assert cfg.tau == 0.1 and cfg.shaping == 2.0 and cfg.max_steps == STAGE_TASKS[1].max_steps


def test_stage_index_matches_the_stage_table() -> None:
    index = json.loads((states_dir() / INDEX_FILE).read_text())
    assert [s["env"] for s in index["stages"]] == [t.env_name for t in STAGE_TASKS]
    for row, task in zip(index["stages"], STAGE_TASKS, strict=True):
        assert (row["name"], row["max_steps"], row["tau"], row["consec_k"]) == (
            task.name, task.max_steps, task.tau, task.consec_k)
        assert (states_dir() / row["goal_dir"] / "goal.npy").is_file()
        assert (states_dir() / row["goal_dir"] / "README.md").is_file()
    # Difficulty grows: longer solutions and budgets down the list.
    lengths = [len(t.solution) for t in STAGE_TASKS]
    assert lengths == sorted(lengths) and len(set(lengths)) == 4


def test_start_state_loads_with_the_hero_in_the_house() -> None:
    from gbx_gameboy.capture import new_batch, observe
    from gbx_gameboy.env import DEFAULT_ROM

    batch = new_batch(DEFAULT_ROM, states_dir() / START_STATE)
    frame = observe(batch)
    assert frame.shape == (72, 80) and frame.max() == 3 and frame.min() < 3
    for env_name, cls in STAGE_CONFIGS.items():
        assert cls().state == str(states_dir() / START_STATE), env_name


@pytest.mark.parametrize("task", STAGE_TASKS, ids=lambda t: t.env_name)
def test_scripted_solution_reaches_goal_at_its_end(task) -> None:
    """done exactly on the solution's last step: not before, within max_steps."""
    env = make_stage_env(task.env_name, 1, "cpu", info_mode="full")
    env.reset()
    done_at = None
    closest_before = 1.0
    for t, button in enumerate(task.solution, start=1):
        _, rew, done, trunc, info = env.step(torch.tensor([ACTIONS.index(button)]))
        assert not trunc.any()
        if bool(done[0]):
            done_at = t
            assert float(rew[0]) == 1.0
            break
        closest_before = min(closest_before, float(info["dist"][0]))
    assert done_at == len(task.solution) <= task.max_steps
    # No screen of the way there comes near the goal: at least twice tau away.
    assert closest_before > 2 * task.tau


def test_tasks_module_loads_as_a_plugin_and_resolves_configs() -> None:
    """As its own entry point (``gameboy_tasks = gbx_gameboy.tasks``) beside the others."""
    import importlib.metadata as md
    from pathlib import Path

    from gbx.config import read_config_file
    from gbx.plugins import load_plugins

    ep = md.EntryPoint("gameboy_tasks", "gbx_gameboy.tasks", "gbx")
    host = load_plugins(entry_points=[ep], environ={})
    assert {"gameboy-goal", "gbx-quest-1", "gbx-quest-4"} <= set(host.registry.envs)
    examples = Path(__file__).resolve().parents[3] / "examples"
    for name in ("quest1_cpu.toml", "quest1_gpu.toml"):
        data = read_config_file(examples / name)
        env_cls = host.registry.envs[data["run"]["env"]].config_cls
        cfg = structure_section(data.get("env"), env_cls, "env")
        assert cfg.goal_dir.endswith("quest1_leave_house") and cfg.max_steps == 256


def test_baseline_command_prints_random_play_figures() -> None:
    from click.testing import CliRunner

    from gbx_gameboy.tasks import baseline_cmd

    res = CliRunner().invoke(baseline_cmd, ["--env", "gbx-quest-1", "--episodes", "2",
                                            "--num-envs", "2", "--max-steps", "6"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    # Six random steps cannot leave the house (the solution needs nine).
    assert out["success_rate"] == 0.0 and out["median_steps_to_goal"] is None
    assert out["mean_length"] == 6.0 and out["max_steps"] == 6
    assert out["min_dist_not_done"] > 2 * out["tau"]


def test_save_state_writes_the_state_at_a_stages_goal(tmp_path) -> None:
    """`gbx gameboy save-state --solution gbx-quest-1`: a savestate whose screen, restored
    as a start state, is the stage's goal."""
    from click.testing import CliRunner

    from gbx_gameboy.tasks import save_state_cmd

    out = tmp_path / "village.gbxstate"
    res = CliRunner().invoke(save_state_cmd, ["--solution", "gbx-quest-1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "9 steps" in res.output
    env = make_stage_env("gbx-quest-1", 2, "cpu", 0, start_states=(str(out),),
                         real_start_fraction=0.0)
    env.reset()
    assert bool((env.goal_distance() < env.tau).all())
    home = make_stage_env("gbx-quest-1", 1, "cpu", 0)
    home.reset()
    assert float(home.goal_distance()[0]) > env.tau
    both = CliRunner().invoke(save_state_cmd, ["--solution", "gbx-quest-1", "--steps", "UP",
                                               "--out", str(out)])
    assert both.exit_code == 2 and "drop --steps" in both.output


def test_baseline_from_start_states_begins_there(tmp_path) -> None:
    """Random play in stage 4 from the gem (stage 3's goal) falls into the cave's pit
    within 40 steps; from the house it cannot get that far."""
    from click.testing import CliRunner

    from gbx_gameboy.tasks import baseline_cmd, save_state_cmd

    gem = tmp_path / "gem.gbxstate"
    assert CliRunner().invoke(save_state_cmd, ["--solution", "gbx-quest-3", "--out",
                                               str(gem)]).exit_code == 0
    args = ["--env", "gbx-quest-4", "--episodes", "32", "--max-steps", "40"]
    res = CliRunner().invoke(baseline_cmd, [*args, "--start-states", str(gem)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    assert out["start_states"] == [str(gem)] and out["failure_rate"] > 0
    house = json.loads(CliRunner().invoke(baseline_cmd, args).output.strip().splitlines()[-1])
    assert house["failure_rate"] == 0.0 and "start_states" not in house
    record = CliRunner().invoke(baseline_cmd, [*args, "--start-states", str(gem), "--record"])
    assert record.exit_code == 2 and "drop --start-states" in record.output


@pytest.mark.parametrize("env_name", list(STAGE_CONFIGS))
def test_stage_configs_pickle(env_name: str) -> None:
    """``gbx run --gpus N`` sends the config (env section included) to every rank."""
    cfg = STAGE_CONFIGS[env_name](tau=0.2)
    back = pickle.loads(pickle.dumps(cfg))
    assert type(back) is STAGE_CONFIGS[env_name] and back == cfg


def test_run_plan_with_a_stage_env_pickles(tmp_path) -> None:
    """The exact object rank 0 broadcasts to the other ranks (``runner._plan_run``)."""
    from gbx.config import build_config
    from gbx.plugins import get_host
    from gbx.runner import _plan_run

    registry = get_host().registry
    if not registry.algorithms:
        pytest.skip("needs an algorithm plugin for the run config")
    config = build_config(registry,
                          flags={"algo": sorted(registry.algorithms)[0], "env": "gbx-quest-1",
                                 "run_dir": str(tmp_path / "run")})
    plan = _plan_run(config, None)
    back = pickle.loads(pickle.dumps(plan))
    assert back[0] == plan[0] and back[0].env.max_steps == STAGE_TASKS[0].max_steps


@pytest.mark.slow  # two ranks on the Game Boy env; the toy env's two-rank runs stay fast
@pytest.mark.skipif(importlib.util.find_spec("gbx_algo_a2c") is None,
                    reason="needs the A2C plugin (pip install -e plugins/algo_a2c)")
def test_gbx_run_gpus_2_on_a_stage_env_cpu(tmp_path) -> None:
    """``gbx run --gpus 2 --env gbx-quest-1 --device cpu``: two gloo ranks, one update."""
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "gbx", "run", "--gpus", "2", "--algo", "a2c",
           "--env", "gbx-quest-1", "--device", "cpu", "--steps", "16",
           "--run-dir", str(run_dir), "--observer", "print",
           "--set", "algo.num_envs=2", "--set", "algo.update_every=4",
           "--set", "algo.log_every=1", "--set", "run.eval_every=0",
           "--set", "algo.model_options={channels=[8,16,16], hidden=32}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ranks=2" in proc.stdout
    assert (run_dir / "checkpoints" / "ckpt_000000000016.pt").is_file()
