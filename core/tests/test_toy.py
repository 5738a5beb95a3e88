from __future__ import annotations

import pytest
import torch

from gbx.testing import check_env
from gbx.toy import ToyConfig, ToyEnv

UP, DOWN, LEFT, RIGHT = 3, 4, 5, 6


def env_of(n: int = 8, **kw) -> ToyEnv:
    return ToyEnv(ToyConfig(**kw), n, "cpu", seed=0)


def test_follows_the_env_contract() -> None:
    counts = check_env(env_of(16, max_steps=10), steps=40)
    assert counts["done"] > 0 and counts["trunc"] > 0


def test_observation_layout() -> None:
    env = env_of(4, stack_k=2)
    obs = env.reset()
    assert obs.shape == (4, 2, 72, 80) and obs.dtype == torch.uint8
    assert int(obs.max()) == 3 and int(obs.min()) == 0
    assert env.num_actions == 7


def test_same_seed_same_starts_other_seed_other_starts() -> None:
    a = ToyEnv(ToyConfig(grid=6), 64, "cpu", seed=1).reset()
    b = ToyEnv(ToyConfig(grid=6), 64, "cpu", seed=1).reset()
    c = ToyEnv(ToyConfig(grid=6), 64, "cpu", seed=2).reset()
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_walking_to_the_goal_gains_reward_and_ends_the_episode() -> None:
    env = env_of(1, grid=3, random_start=False)  # start top-left, goal bottom-right
    env.reset()
    rewards, dones = [], []
    for action in (RIGHT, RIGHT, DOWN, DOWN):
        _, r, d, t, info = env.step(torch.tensor([action]))
        rewards.append(float(r[0]))
        dones.append(bool(d[0]))
        assert not bool(t[0])
    assert all(r > 0 for r in rewards[:3])  # every move gets closer to the template
    assert dones == [False, False, False, True]
    assert rewards[-1] > 1.0  # goal bonus on top of the progress reward
    assert float(info["dist"][0]) == 0.0
    assert bool(info["reset_mask"][0])


def test_moving_away_is_penalised_and_walls_block() -> None:
    env = env_of(1, grid=4, random_start=False)
    env.reset()
    _, r, *_ = env.step(torch.tensor([UP]))  # into the wall: no move, no reward
    assert float(r[0]) == 0.0
    env.step(torch.tensor([RIGHT]))
    _, r, *_ = env.step(torch.tensor([LEFT]))
    assert float(r[0]) < 0.0


def test_truncation_reports_final_obs_and_resets() -> None:
    env = env_of(2, max_steps=3, random_start=False)
    env.reset()
    for _ in range(2):
        obs, _, _, trunc, _ = env.step(torch.tensor([RIGHT, UP]))
        assert not trunc.any()
    obs, _, done, trunc, info = env.step(torch.tensor([RIGHT, UP]))
    assert trunc.tolist() == [True, True] and not done.any()
    first = env_of(2, max_steps=3, random_start=False).reset()
    assert torch.equal(obs, first)  # the returned obs starts the next episode
    assert not torch.equal(info["final_obs"][0], obs[0])  # player had moved right


def test_consecutive_steps_under_tau_are_required() -> None:
    env = env_of(1, grid=2, random_start=False, consec=2)
    env.reset()
    env.step(torch.tensor([RIGHT]))
    _, _, d1, _, _ = env.step(torch.tensor([DOWN]))
    _, _, d2, _, _ = env.step(torch.tensor([0]))  # A: stay on the goal
    assert not bool(d1[0]) and bool(d2[0])


def test_random_play_reaches_the_goal_sometimes() -> None:
    env = env_of(64)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    done = 0
    for _ in range(48):
        _, _, d, _, _ = env.step(torch.randint(0, 7, (64,), generator=gen))
        done += int(d.sum())
    assert done > 10


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_runs_on_cuda_with_everything_on_device() -> None:
    env = ToyEnv(ToyConfig(), 32, "cuda", seed=0)
    check_env(env, steps=20)


def test_state_dict_restores_episodes_exactly() -> None:
    """A restored env replays the same future as the one it was saved from."""
    env = env_of(16, max_steps=6)
    env.reset()
    gen = torch.Generator().manual_seed(3)
    for _ in range(4):
        env.step(torch.randint(0, 7, (16,), generator=gen))
    saved = env.env_state_dict()
    actions = [torch.randint(0, 7, (16,), generator=gen) for _ in range(12)]
    first = [env.step(a) for a in actions]

    other = env_of(16, max_steps=6)
    other.reset()
    other.load_env_state_dict(saved)
    second = [other.step(a) for a in actions]
    for (o1, r1, d1, t1, _), (o2, r2, d2, t2, _) in zip(first, second, strict=True):
        assert torch.equal(o1, o2) and torch.equal(r1, r2)
        assert torch.equal(d1, d2) and torch.equal(t1, t2)


def test_state_dict_refuses_other_batch_size() -> None:
    saved = env_of(4).env_state_dict()
    with pytest.raises(ValueError, match="same num_envs"):
        env_of(8).load_env_state_dict(saved)


def test_a_failure_screen_ends_the_episode_with_the_penalty() -> None:
    cfg = ToyConfig(grid=4, random_start=False, failure_cell=1, failure_penalty=0.75,
                    progress_scale=0.0)
    env = ToyEnv(cfg, 3, "cpu", 0)
    env.reset()
    # RIGHT onto the failure cell (0, 1); DOWN and A stay clear of it.
    _, reward, done, trunc, info = env.step(torch.tensor([6, 4, 0]))
    assert done.tolist() == [True, False, False] and not trunc.any()
    assert info["failure"].tolist() == [True, False, False] and not info["success"].any()
    assert reward.tolist() == [-0.75, 0.0, 0.0]
    assert info["reset_mask"].tolist() == [True, False, False]
    check_env(ToyEnv(cfg, 3, "cpu", 0))
    # Starts never fall on the failure cell.
    starts = ToyEnv(ToyConfig(grid=2, failure_cell=1), 64, "cpu", 0)._start_cells()
    assert set((starts[:, 0] * 2 + starts[:, 1]).tolist()) == {0, 2}
    with pytest.raises(ValueError, match="failure_cell"):
        ToyConfig(grid=2, failure_cell=3)
