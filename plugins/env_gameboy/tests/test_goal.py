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


def _goal_dir(tmp_path: Path, meta: dict | None = None, name: str = "g") -> Path:
    import json

    out = tmp_path / name
    out.mkdir()
    (out / "goal.npy").write_bytes(npy_bytes(np.zeros((72, 80), np.uint8)))
    if meta is not None:
        (out / "meta.json").write_text(json.dumps(meta))
    return out


@pytest.mark.parametrize(("meta", "match"), [
    ({"tau": 1.5}, r"tau must be a number in \(0, 1\)"),
    ({"tau": 1.0}, r"tau must be a number in \(0, 1\)"),
    ({"tau": 0}, r"tau must be a number in \(0, 1\)"),
    ({"tau": "0.1"}, "tau must be"),
    ({"consec_k": 0}, "consec_k must be an integer >= 1"),
    ({"consec_k": 1.5}, "consec_k must be"),
    ({"rom_sha256": 7}, "rom_sha256 must be a hex string"),
    ([1, 2], "must be an object"),
])
def test_goal_meta_out_of_range_is_refused_on_load(tmp_path: Path, meta, match: str) -> None:
    from gbx_gameboy.capture import load_goal

    with pytest.raises(GoalError, match=match):
        load_goal(_goal_dir(tmp_path, meta))


def test_malformed_goal_files_are_one_line_errors(tmp_path: Path) -> None:
    from gbx_gameboy.capture import load_goal

    npz = tmp_path / "goal.npz"
    np.savez(npz, goal=np.zeros((72, 80), np.uint8))
    with pytest.raises(GoalError, match="not a .npy template"):
        load_goal(npz)
    zipped = _goal_dir(tmp_path, name="zipped")
    (zipped / "goal.npy").write_bytes(npz.read_bytes())  # an .npz under the .npy name
    with pytest.raises(GoalError, match="is an .npz container"):
        load_goal(zipped)
    (zipped / "goal.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(GoalError, match="not a readable .npy"):
        load_goal(zipped)
    (zipped / "goal.npy").write_bytes(npy_bytes(np.zeros((0, 80), np.uint8)))
    with pytest.raises(GoalError, match="need uint8"):
        load_goal(zipped)
    bad_meta = _goal_dir(tmp_path, name="badmeta")
    (bad_meta / "meta.json").write_bytes(b"\xff\xfe{")
    with pytest.raises(GoalError, match="not valid JSON"):
        load_goal(bad_meta)
    (bad_meta / "meta.json").write_text("[" * 100_000)
    with pytest.raises(GoalError, match="not valid JSON"):
        load_goal(bad_meta)


def test_goal_of_another_rom_is_refused_unless_allowed(tmp_path: Path) -> None:
    import json

    meta = json.loads((STAGE1.goal_dir() / "meta.json").read_text())
    meta["rom_sha256"] = "ab" * 32
    goal = _goal_dir(tmp_path, meta)
    cfg = GoalConfig(state=str(states_dir() / START_STATE), goal_dir=str(goal))
    with pytest.raises(GoalError, match="captured on ROM sha256 abab.*allow_goal_rom_mismatch"):
        GoalEnv(cfg, 1, "cpu")
    env = GoalEnv(GoalConfig(state=cfg.state, goal_dir=str(goal), allow_goal_rom_mismatch=True),
                  1, "cpu")
    assert env.goal.meta["rom_sha256"] != env.rom_sha256


def test_env_state_roundtrip_replays_the_same_future() -> None:
    """A goal env restored from env_state_dict steps exactly as the one it was saved from:
    emulator, frame stack, step and goal counters and the random start choice."""
    from gbx.api import StatefulEnv

    def make() -> GoalEnv:
        return env_for(3, info_mode="full", max_steps=3, random_noop_max=2, stack_k=2,
                       shaping=1.0)

    env = make()
    assert isinstance(env, StatefulEnv)
    env.reset()
    gen = torch.Generator().manual_seed(1)
    for _ in range(4):
        env.step(torch.randint(0, env.num_actions, (3,), generator=gen))
    saved = env.env_state_dict()
    actions = [torch.randint(0, env.num_actions, (3,), generator=gen) for _ in range(7)]
    first = [tuple(x.clone() for x in env.step(a)[:4]) for a in actions]
    other = make()
    other.reset()
    other.load_env_state_dict(saved)
    second = [tuple(x.clone() for x in other.step(a)[:4]) for a in actions]
    for a, b in zip(first, second, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    with pytest.raises(ValueError, match="same num_envs"):
        env_for(2).load_env_state_dict(saved)
