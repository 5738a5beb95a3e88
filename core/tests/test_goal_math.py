"""Pixel-goal math on synthetic tensors: distance, consecutive-hit done, reward, quantiles."""

from __future__ import annotations

import pytest
import torch

from gbx.goal_math import (
    count_under,
    goal_distance,
    goal_reward,
    pass_milestone,
    reached,
    start_milestone,
    step_goal,
)


def test_distance_is_mean_l1_over_three() -> None:
    goal = torch.zeros(4, 5, dtype=torch.uint8)
    frames = torch.zeros(3, 4, 5, dtype=torch.uint8)
    frames[1, 0, 0] = 3  # one pixel fully off: 3 / (3 * 20)
    frames[2] = 3  # every pixel inverted
    d = goal_distance(frames, goal)
    assert d.dtype == torch.float32
    assert d.tolist() == pytest.approx([0.0, 1 / 20, 1.0])


def test_distance_is_symmetric_and_uses_buffers() -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.randint(0, 4, (6, 9, 7), generator=g, dtype=torch.uint8)
    goal = torch.randint(0, 4, (9, 7), generator=g, dtype=torch.uint8)
    out = torch.empty(6)
    scratch = torch.empty(6, 9, 7, dtype=torch.int16)
    d = goal_distance(a, goal.to(torch.int16), out=out, scratch=scratch)
    assert d.data_ptr() == out.data_ptr()
    want = (a.float() - goal.float()).abs().mean(dim=(1, 2)) / 3
    assert torch.allclose(d, want)
    # Distance of the goal to each frame: same numbers (|x - y| = |y - x|).
    back = torch.stack([goal_distance(goal[None], a[i])[0] for i in range(6)])
    assert torch.allclose(back, want)


def test_distance_refuses_a_template_of_another_size() -> None:
    with pytest.raises(ValueError, match="obs_size"):
        goal_distance(torch.zeros(2, 72, 80, dtype=torch.uint8), torch.zeros(144, 160))


def test_done_needs_k_consecutive_steps_under_tau() -> None:
    consec = torch.zeros(2, dtype=torch.int32)
    tau, k = 0.1, 3
    # env 0: under, under, over, under, under, under -> done on the 6th step only
    # env 1: always under -> done on the 3rd step
    seq0 = [0.0, 0.05, 0.2, 0.0, 0.0, 0.09]
    dones = []
    for d0 in seq0:
        dist = torch.tensor([d0, 0.0])
        count_under(dist, tau, consec)
        dones.append(reached(consec, k).tolist())
    assert [d[0] for d in dones] == [False, False, False, False, False, True]
    assert [d[1] for d in dones] == [False, False, True, True, True, True]


def test_tau_is_strict() -> None:
    consec = torch.zeros(1, dtype=torch.int32)
    count_under(torch.tensor([0.1]), 0.1, consec)
    assert int(consec[0]) == 0


def test_reached_refuses_k_below_one() -> None:
    with pytest.raises(ValueError, match="k must be >= 1"):
        reached(torch.zeros(1, dtype=torch.int32), 0)


def test_reward_bonus_and_shaping() -> None:
    prev = torch.tensor([0.5, 0.5, 0.2])
    dist = torch.tensor([0.4, 0.6, 0.0])
    done = torch.tensor([False, False, True])
    sparse = goal_reward(prev, dist, done)
    assert sparse.tolist() == [0.0, 0.0, 1.0]
    dense = goal_reward(prev, dist, done, bonus=2.0, shaping=10.0)
    assert dense.tolist() == pytest.approx([1.0, -1.0, 4.0])


def test_step_goal_composes_the_parts() -> None:
    goal = torch.zeros(2, 2, dtype=torch.uint8)
    frames = torch.tensor([[[0, 0], [0, 0]], [[3, 3], [3, 3]]], dtype=torch.uint8)
    consec = torch.zeros(2, dtype=torch.int32)
    prev = torch.tensor([0.25, 1.0])
    dist, done, reward = step_goal(frames, goal, prev, consec, tau=0.01, k=1, shaping=1.0)
    assert dist.tolist() == [0.0, 1.0]
    assert done.tolist() == [True, False]
    assert reward.tolist() == pytest.approx([1.25, 0.0])


def test_a_milestone_pays_once_per_episode_in_place() -> None:
    passed = torch.tensor([False, False, True, False])
    reward = torch.tensor([0.0, 1.0, 0.0, 0.0])
    under, newly = torch.zeros(4, dtype=torch.bool), torch.zeros(4, dtype=torch.bool)
    dist = torch.tensor([0.01, 0.01, 0.01, 0.5])  # under tau but the third passed it already
    out = pass_milestone(dist, 0.05, passed, reward, bonus=0.5, under=under, newly=newly)
    assert out is newly and newly.tolist() == [True, True, False, False]
    assert reward.tolist() == [0.5, 1.5, 0.0, 0.0]
    assert passed.tolist() == [True, True, True, False]
    # under tau again on the next step: nothing more
    reward.zero_()
    pass_milestone(dist, 0.05, passed, reward, bonus=0.5, under=under, newly=newly)
    assert reward.tolist() == [0.0, 0.0, 0.0, 0.0]
    # tau is strict, like the goal's
    pass_milestone(torch.full((4,), 0.05), 0.05, passed, reward, bonus=0.5, under=under,
                   newly=newly)
    assert passed[3].item() is False


def test_new_episodes_start_a_milestone_passed_only_when_they_start_on_it() -> None:
    passed = torch.tensor([True, True, False, False])
    mask = torch.tensor([True, True, True, False])  # the last env keeps its episode
    dist = torch.tensor([0.0, 0.3, 0.0, 0.3])
    under = torch.zeros(4, dtype=torch.bool)
    out = start_milestone(dist, 0.05, passed, mask, under=under)
    assert out is passed and passed.tolist() == [True, False, True, False]
