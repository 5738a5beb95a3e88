"""The ``gameboy-goal`` env on the bundled game: reward/done from pixels, truncation,
autoreset through the masked restore, info modes, config errors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from gbx.config import structure_section
from gbx.errors import ConfigError
from gbx_gameboy.capture import GoalError, npy_bytes
from gbx_gameboy.game.solutions import ACTIONS, SOLUTIONS
from gbx_gameboy.goal import GoalConfig, GoalEnv
from gbx_gameboy.tasks import STAGE_TASKS, START_STATE, states_dir

STAGE1 = STAGE_TASKS[0]
A = ACTIONS.index("A")  # in the house, facing a free floor block: A changes nothing


def env_for(n: int, **kw) -> GoalEnv:
    cfg = GoalConfig(state=str(states_dir() / START_STATE), goal_dir=str(STAGE1.goal_dir()),
                     **kw)
    return GoalEnv(cfg, n, "cpu", seed=0)


def test_solution_reaches_goal_and_only_that_env_resets() -> None:
    env = env_for(3, info_mode="full", max_steps=64)
    start = env.reset().clone()
    assert torch.equal(start[0], start[1]) and torch.equal(start[0], start[2])
    goal = torch.from_numpy(env.goal.template)
    sol = [ACTIONS.index(b) for b in SOLUTIONS["leave_house"]]
    # env 0 plays the solution; env 1 the same one step later; env 2 presses A throughout.
    plan = [[a, b, A] for a, b in zip([*sol, A], [A, *sol], strict=True)]
    for t, acts in enumerate(plan, start=1):
        before = env.stack.buffer.clone()
        obs, rew, done, trunc, info = env.step(torch.tensor(acts))
        assert not trunc.any()
        if t < len(sol):
            assert not done.any() and not rew.any() and not info["reset_mask"].any()
            assert (info["dist"] > env.tau).all()
        elif t == len(sol):
            assert done.tolist() == [True, False, False]
            assert info["reset_mask"].tolist() == [True, False, False]
            assert rew.tolist() == [1.0, 0.0, 0.0]
            assert float(info["dist"][0]) == 0.0  # the goal screen exactly
            assert torch.equal(info["final_obs"][0, -1], goal)
            assert torch.equal(obs[0], start[0])  # back at the start state's first frame
            assert not torch.equal(obs[1], start[1])  # env 1 walked on, untouched
            assert torch.equal(obs[2], before[2])  # A changed nothing for env 2
        else:  # the step after: env 1 arrives, env 0 starts over
            assert done.tolist() == [False, True, False]
            assert info["reset_mask"].tolist() == [False, True, False]
            assert torch.equal(obs[1], start[1])
            assert torch.equal(obs[0], start[0])  # its new episode: A from the start


def test_truncation_is_distinct_from_done() -> None:
    env = env_for(2, max_steps=3, info_mode="none")
    start = env.reset().clone()
    for t in range(1, 4):
        obs, rew, done, trunc, info = env.step(torch.tensor([ACTIONS.index("DOWN"), A]))
        assert not done.any() and "dist" not in info and "dist_p50" not in info
        assert bool(trunc.any()) == (t == 3)
    assert trunc.tolist() == [True, True] and info["reset_mask"].tolist() == [True, True]
    assert not torch.equal(info["final_obs"][0], start[0])  # the walked state, kept for bootstrap
    assert torch.equal(obs, start)


def test_stats_mode_reports_device_quantiles() -> None:
    env = env_for(4, info_mode="stats")
    env.reset()
    _, _, _, _, info = env.step(torch.tensor([A, A, ACTIONS.index("DOWN"), A]))
    p10, p50, p90 = info["dist_p10"], info["dist_p50"], info["dist_p90"]
    assert p10.shape == () and p10.device == env.device
    assert 0.0 < float(p10) <= float(p50) <= float(p90) < 1.0
    assert "dist" not in info


def test_dense_shaping_rewards_distance_change() -> None:
    env = env_for(2, info_mode="full", shaping=10.0)
    env.reset()
    first = env._prev.clone()  # start distance of each env
    _, rew, _, _, info = env.step(torch.tensor([ACTIONS.index("DOWN"), A]))
    want = 10.0 * (first - info["dist"])
    assert torch.allclose(rew, want)
    assert float(rew[1]) == 0.0 and float(rew[0]) != 0.0


def test_config_problems_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tau"):
        structure_section({"tau": 1.5}, GoalConfig, "env")
    with pytest.raises(ConfigError, match="info_mode"):
        structure_section({"info_mode": "all"}, GoalConfig, "env")
    with pytest.raises(GoalError, match="env.goal_dir"):
        GoalEnv(GoalConfig(), 1, "cpu")
    with pytest.raises(GoalError, match="not found"):
        GoalEnv(GoalConfig(goal_dir=str(tmp_path / "nowhere")), 1, "cpu")
    small = tmp_path / "small"
    small.mkdir()
    (small / "goal.npy").write_bytes(npy_bytes(np.zeros((10, 10), np.uint8)))
    with pytest.raises(GoalError, match="obs_size"):
        GoalEnv(GoalConfig(goal_dir=str(small)), 1, "cpu")


def test_meta_records_goal_settings() -> None:
    env = env_for(1)
    m = env.meta()
    assert m["env"] == "gameboy-goal" and m["tau"] == STAGE1.tau and m["consec_k"] == 1
    assert m["shaping"] == 0.0 and m["goal_meta"]["rom_sha256"] == env.rom_sha256
    goal_file = Path(m["goal_dir"]) / "goal.npy"
    assert m["goal_sha256"] == hashlib.sha256(goal_file.read_bytes()).hexdigest()


@pytest.mark.cuda
def test_cuda_env_scores_like_the_cpu_env() -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the goal env's CUDA path needs a GPU")
    sol = [ACTIONS.index(b) for b in SOLUTIONS["leave_house"]]
    dists = {}
    for device in ("cpu", "cuda"):
        cfg = GoalConfig(state=str(states_dir() / START_STATE),
                         goal_dir=str(STAGE1.goal_dir()), info_mode="full")
        env = GoalEnv(cfg, 2, device, seed=0)
        env.reset()
        seen = []
        for a in sol:
            _, _, done, _, info = env.step(torch.tensor([a, A], device=env.device))
            seen.append(info["dist"].cpu().clone())
        assert done.cpu().tolist() == [True, False]
        dists[device] = torch.stack(seen)
    assert torch.equal(dists["cpu"], dists["cuda"])
