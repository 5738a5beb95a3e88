"""The PyBoy backend: shades, worker pool, env contract, stage tasks, parity with Warp."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("pyboy", reason="the PyBoy backend needs pyboy (pip install pyboy)")

from gbx.testing import check_env  # noqa: E402
from gbx_env_pyboy.pool import names_by_mask, split  # noqa: E402
from gbx_env_pyboy.shades import screen_to_shades  # noqa: E402
from gbx_env_pyboy.tasks import make_stage_env  # noqa: E402
from gbx_gameboy.actions import BUTTON_BITS  # noqa: E402
from gbx_gameboy.game.solutions import SOLUTIONS, action_indices  # noqa: E402


@pytest.fixture(scope="session")
def stage1(tmp_path_factory) -> dict[str, str]:
    """Start state and goal of stage 1 that fit this emulator build.

    The bundled ``states/`` are used when they load; otherwise (the emulator's state
    layout changed since they were made) they are regenerated into a temporary folder.
    """
    from gbx_gameboy import tasks
    from gbx_gameboy.savestate import SaveStateError

    task = tasks.STAGES_BY_ENV["gbx-quest-1"]
    root = tasks.states_dir()
    try:
        tasks.make_stage_env("gbx-quest-1", 1, "cpu").close()
    except SaveStateError:
        root = tmp_path_factory.mktemp("states")
        tasks.make_stages(root)
    return {"state": str(root / tasks.START_STATE), "goal_dir": str(task.goal_dir(root))}


def test_pyboy_palette_maps_to_shade_indices() -> None:
    screen = np.zeros((144, 160, 4), dtype=np.uint8)
    screen[0, :4, 0] = (255, 153, 85, 0)
    out = np.empty((144, 160), dtype=np.uint8)
    screen_to_shades(screen, out)
    assert out[0, :4].tolist() == [0, 1, 2, 3] and out[1, 0] == 3


def test_split_and_button_names() -> None:
    assert split(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert split(2, 8) == [(0, 1), (1, 2)]
    table = names_by_mask(BUTTON_BITS)
    assert table[0] == () and table[BUTTON_BITS["A"] | BUTTON_BITS["UP"]] == ("up", "a")


def test_stage1_solution_reaches_the_goal_on_pyboy(stage1) -> None:
    env = make_stage_env("pyboy-quest-1", 2, "cpu", 0, info_mode="full", workers=2, **stage1)
    try:
        start = env.reset().clone()
        moves = action_indices(SOLUTIONS["leave_house"])
        for i, action in enumerate(moves):
            obs, reward, done, trunc, info = env.step(torch.tensor([action, 0]))
            assert bool(done[0]) == (i == len(moves) - 1), f"step {i}: dist {info['dist']}"
            assert not done[1] and not trunc.any()
        assert float(info["dist"][0]) < env.env.tau and float(reward[0]) == 1.0
        # env 0 was reset in place: its observation is the start frame again
        assert info["reset_mask"].tolist() == [True, False]
        assert torch.equal(obs[0], start[0]) and not torch.equal(info["final_obs"][0], start[0])
        assert env.meta()["backend"] == "pyboy" and env.meta()["workers"] == 2
    finally:
        env.close()


def test_env_contract_with_truncation(stage1) -> None:
    env = make_stage_env("pyboy-quest-1", 3, "cpu", 0, max_steps=4, stack_k=2, **stage1)
    try:
        counts = check_env(env, steps=10)
        assert counts["trunc"] >= 3
    finally:
        env.close()


def test_frames_match_the_warp_backend_step_for_step(stage1) -> None:
    from gbx_gameboy.tasks import make_stage_env as make_warp_env

    over = {"info_mode": "full", "max_steps": 6, **stage1}
    pyboy = make_stage_env("pyboy-quest-1", 3, "cpu", 0, workers=2, **over)
    warp = make_warp_env("gbx-quest-1", 3, "cpu", 0, **over)
    try:
        assert torch.equal(pyboy.reset(), warp.reset())
        gen = torch.Generator().manual_seed(1)
        for step in range(14):  # crosses two truncations (masked resets)
            actions = torch.randint(0, pyboy.num_actions, (3,), generator=gen)
            a, b = pyboy.step(actions), warp.step(actions)
            assert torch.equal(a[0], b[0]), f"observations differ at step {step}"
            for x, y in zip(a[1:4], b[1:4], strict=True):
                assert torch.equal(x, y)
            assert torch.equal(a[4]["dist"], b[4]["dist"])
    finally:
        pyboy.close()
        warp.close()


def test_backend_env_names() -> None:
    from gbx_env_pyboy.bench import env_for_backend

    assert env_for_backend("gbx-quest-3", "pyboy") == "pyboy-quest-3"
    assert env_for_backend("gbx-quest-3", "gameboy") == "gbx-quest-3"
    assert env_for_backend("gameboy-goal", "pyboy") == "pyboy-goal"


def test_bench_backends_prints_records_and_ratio(stage1) -> None:
    from click.testing import CliRunner

    from gbx.cli import build_cli
    from gbx.plugins import get_host

    cli = build_cli(get_host())
    args = ["bench", "backends", "--task", "gameboy", "--backend", "gameboy,pyboy",
            "--envs", "2", "--steps", "2", "--warmup", "1", "--device", "cpu",
            "--set", f"state={stage1['state']}", "--set", "max_steps=2"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    recs = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    assert [r["env"] for r in recs[:2]] == ["gameboy", "pyboy"]
    assert recs[0]["backend"] == "gameboy" and recs[1]["backend"] == "pyboy"
    assert recs[1]["episode_resets"] == 2  # 2 envs truncated once in the 2 timed steps
    assert all(r["env_steps_per_s"] > 0 and r["versions"]["torch"] for r in recs[:2])
    assert recs[1]["config"]["state"] == stage1["state"]
    ratio = recs[2]
    assert ratio["bench"] == "backends-ratio" and ratio["relative_to"] == "gameboy"
    assert ratio["ratio"] == pytest.approx(
        recs[1]["env_steps_per_s"] / recs[0]["env_steps_per_s"], rel=1e-3)


def test_bench_backends_set_workers_reaches_only_pyboy(stage1) -> None:
    """The documented ``--env gbx-quest-1,pyboy-quest-1 --set workers=2`` (tiny sizes)."""
    from click.testing import CliRunner

    from gbx.cli import build_cli
    from gbx.plugins import get_host

    cli = build_cli(get_host())
    args = ["bench", "backends", "--env", "gbx-quest-1,pyboy-quest-1", "--envs", "2",
            "--steps", "2", "--warmup", "1", "--device", "cpu", "--set", "workers=2",
            "--set", f"state={stage1['state']}", "--set", f"goal_dir={stage1['goal_dir']}"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    recs = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    assert [r["env"] for r in recs[:2]] == ["gbx-quest-1", "pyboy-quest-1"]
    assert "workers" not in recs[0]["config"] and recs[1]["config"]["workers"] == 2
    assert recs[1]["workers"] == 2
    bad = CliRunner().invoke(cli, ["bench", "backends", "--env", "gbx-quest-1,pyboy-quest-1",
                                   "--set", "nope=1"])
    assert bad.exit_code != 0 and "no env among" in bad.output


def test_bench_env_backend_runs_both_backends_on_the_task() -> None:
    """``gbx bench env --backend gameboy,pyboy --task gbx-quest-1 --envs ...`` (tiny sizes):
    one record per backend, then their ratio."""
    from click.testing import CliRunner

    from gbx.cli import build_cli
    from gbx.plugins import get_host

    args = ["bench", "env", "--backend", "gameboy,pyboy", "--task", "gbx-quest-1",
            "--envs", "2", "--steps", "1", "--warmup", "1", "--device", "cpu"]
    result = CliRunner().invoke(build_cli(get_host()), args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    recs = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    measured = [r for r in recs if r["bench"] == "backends"]
    assert [(r["backend"], r["env"], r["num_envs"]) for r in measured] == [
        ("gameboy", "gbx-quest-1", 2), ("pyboy", "pyboy-quest-1", 2)]
    assert all(r["env_steps_per_s"] > 0 for r in measured)
    ratio = [r for r in recs if r["bench"] == "backends-ratio"]
    assert len(ratio) == 1 and ratio[0]["env"] == "pyboy-quest-1" and ratio[0]["ratio"] > 0


def test_start_state_cache_round_trip(tmp_path: Path, monkeypatch, stage1) -> None:
    from gbx_env_pyboy import start
    from gbx_gameboy.env import DEFAULT_ROM

    monkeypatch.setenv("GBX_CACHE_DIR", str(tmp_path))
    first = start.load_or_build(DEFAULT_ROM, stage1["state"])
    assert len(list((tmp_path / "pyboy-start").glob("*.state"))) == 1
    again = start.load_or_build(DEFAULT_ROM, stage1["state"])
    assert again.pyboy_state == first.pyboy_state
    assert np.array_equal(again.screen, first.screen) and first.screen.shape == (144, 160)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_observations_on_a_cuda_device_match_the_cpu(stage1) -> None:
    over = {"info_mode": "full", "max_steps": 5, "workers": 1, **stage1}
    cpu = make_stage_env("pyboy-quest-1", 2, "cpu", 0, **over)
    gpu = make_stage_env("pyboy-quest-1", 2, "cuda", 0, **over)
    try:
        assert torch.equal(cpu.reset(), gpu.reset().cpu())
        gen = torch.Generator().manual_seed(2)
        for _ in range(7):
            actions = torch.randint(0, cpu.num_actions, (2,), generator=gen)
            a, b = cpu.step(actions), gpu.step(actions.cuda())
            assert b[0].device.type == "cuda" and torch.equal(a[0], b[0].cpu())
            assert torch.equal(a[4]["reset_mask"], b[4]["reset_mask"].cpu())
    finally:
        cpu.close()
        gpu.close()


def test_stage_configs_are_built_once_and_pickle() -> None:
    """``pyboy-quest-N`` configs travel to every rank of ``gbx run --gpus N``."""
    import pickle

    from gbx_env_pyboy.tasks import stage_envs

    assert stage_envs() is stage_envs()
    for name, cls, _ in stage_envs():
        cfg = cls(workers=3)
        back = pickle.loads(pickle.dumps(cfg))
        assert type(back) is cls and back == cfg, name


def test_pyboy_envs_do_not_declare_stateful_env() -> None:
    """Their emulators live in worker processes: resume restarts episodes, declared so."""
    from gbx.api import StatefulEnv
    from gbx_env_pyboy.env import PyBoyEnv, PyBoyGoalEnv

    for cls in (PyBoyEnv, PyBoyGoalEnv):
        assert not isinstance(object.__new__(cls), StatefulEnv)
