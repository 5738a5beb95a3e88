"""``explore.split_by_start``: episodes from a curriculum's start states and from the real
start never share a cell, and every restart carries the origin of the state it restarts
from (toy env on the CPU)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from gbx_explore.config import ArchiveConfig
from gbx_explore.explorer import ORIGIN_SALT, SCOUT_CHECK_EVERY, ArchiveExplorer, carry_origins

from gbx.api import StartOriginEnv
from gbx.errors import ConfigError
from gbx.testing import no_cuda_syncs
from gbx.toy import ToyConfig, ToyEnv

_TOY = ToyConfig(grid=8, random_start=False, progress_scale=0.0, max_steps=6,
                 height=40, width=40)


class _CurriculumToy(ToyEnv):
    """The toy env whose odd envs say every episode of theirs began at a curriculum state
    (the board is the same: only the origin tells the two apart)."""

    def __init__(self, num_envs: int, device: str = "cpu") -> None:
        super().__init__(_TOY, num_envs, device, 0)
        self._origin = torch.arange(num_envs, device=device) % 2 == 1

    def from_start_states(self) -> torch.Tensor:
        return self._origin


def _explorer(n: int = 8, device: str = "cpu", **over: Any) -> ArchiveExplorer:
    config = ArchiveConfig(**{"capacity": 256, "bonus": 0.0, "cell_rows": 8, "cell_cols": 8,
                              "start_fraction": 0.5, "explore_steps": 3,
                              "split_by_start": True, **over})
    return ArchiveExplorer(config, _CurriculumToy(n, device), seed=1)


def _drive(env: ArchiveExplorer, steps: int) -> None:
    gen = torch.Generator(device=env.device).manual_seed(0)
    for _ in range(steps):  # moves only, drawn on the env's device
        env.step(torch.randint(3, 7, (env.num_envs,), generator=gen, device=env.device))


def _occupied(env: ArchiveExplorer) -> tuple[torch.Tensor, torch.Tensor]:
    used = env.archive.keys[: env.archive.capacity] >= 0
    return used, env.archive.keys[: env.archive.capacity][used]


def test_the_same_screen_from_two_origins_is_two_cells() -> None:
    env = _explorer()
    assert isinstance(env.env, StartOriginEnv)
    env.reset()  # every env on the same first frame, half of them "from a start state"
    used, keys = _occupied(env)
    assert keys.numel() == 2
    hasher = type(env.hasher)((40, 40), 8, 8, 8, 1, "cpu")
    plain = hasher(env.env.reset()[:1, -1])
    assert sorted(keys.tolist()) == sorted([int(plain), int(plain) ^ ORIGIN_SALT])
    assert sorted(env.slot_origin[: env.archive.capacity][used].tolist()) == [0, 1]
    single = ArchiveExplorer(ArchiveConfig(capacity=256, cell_rows=8, cell_cols=8),
                             _CurriculumToy(8), seed=1)
    single.reset()
    assert _occupied(single)[1].numel() == 1  # without the split: one cell


def test_every_saved_state_keeps_the_origin_its_cell_was_keyed_with() -> None:
    env = _explorer(start_fraction=0.7)
    env.reset()
    _drive(env, 40)
    used, keys = _occupied(env)
    origins = env.slot_origin[: env.archive.capacity][used]
    # each slot's saved frame, with the slot's origin, hashes back to the slot's cell
    frames = env.slots.tensors()["frames"][used][:, -1]
    hasher = type(env.hasher)((40, 40), 8, 8, 8, int(used.sum()), "cpu")
    assert torch.equal(hasher(frames) ^ (origins * ORIGIN_SALT), keys)
    assert set(origins.tolist()) == {0, 1} and keys.numel() > 10


def test_carry_origins_follows_each_kind_of_restart() -> None:
    origin = torch.tensor([0, 0, 1, 1, 0, 1])
    env_reset = torch.tensor([True, False, False, False, True, False])
    env_origin = torch.tensor([True, True, False, False, False, True])
    pick = torch.tensor([False, True, False, False, True, False])
    slot = torch.tensor([3, 1, 0, 0, 2, 0])
    slot_origin = torch.tensor([0, 1, 0, 0, 0])  # slot 1 from a start state
    home = torch.tensor([-1, -1, 0, -1, -1, -1])
    home_origin = torch.tensor([0, 1])
    carry_origins(origin, env_reset, env_origin, pick, slot, slot_origin, home, home_origin)
    # env 0: the env reset it from a start state; 1: restarted from slot 1; 2: home 0;
    # 3 and 5: kept; 4: the env reset it, then the explorer sent it to slot 2 (real start)
    assert origin.tolist() == [1, 1, 0, 1, 0, 1]


def test_origins_go_into_the_saved_state_and_come_back() -> None:
    env = _explorer()
    env.reset()
    _drive(env, 15)
    state = env.env_state_dict()
    other = _explorer()
    other.reset()
    other.load_env_state_dict(state)
    for key in ("origin", "slot_origin", "home_origin"):
        assert torch.equal(getattr(other, key), getattr(env, key)), key
    _drive(env, 10)
    _drive(other, 10)
    assert torch.equal(other.archive.keys, env.archive.keys)
    assert torch.equal(other.origin, env.origin)


def test_splitting_needs_an_env_that_says_where_episodes_began() -> None:
    config = ArchiveConfig(capacity=16, split_by_start=True)
    with pytest.raises(ConfigError, match="StartOriginEnv") as err:
        ArchiveExplorer(config, ToyEnv(_TOY, 4, "cpu", 0), seed=0)
    assert "\n" not in str(err.value) and "split_by_start=false" in str(err.value)


@pytest.mark.cuda
def test_cuda_origins_need_no_host_sync_and_keep_their_cells() -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the explorer's CUDA path needs a GPU")
    env = _explorer(64, "cuda", start_fraction=0.7)
    env.reset()
    _drive(env, 12)
    with no_cuda_syncs():
        _drive(env, 5)
    used, keys = _occupied(env)
    origins = env.slot_origin[: env.archive.capacity][used]
    frames = env.slots.tensors()["frames"][used][:, -1]
    hasher = type(env.hasher)((40, 40), 8, 8, 8, int(used.sum()), "cuda")
    assert torch.equal(hasher(frames) ^ (origins * ORIGIN_SALT), keys)
    assert set(origins.tolist()) == {0, 1}


# ---------------------------------------------------------------------------------------
# scout_steps: random play from archived cells before the first training step
# ---------------------------------------------------------------------------------------


def _sparse_explorer(**over: Any) -> ArchiveExplorer:
    config = ArchiveConfig(**{"capacity": 256, "bonus": 0.0, "cell_rows": 8, "cell_cols": 8,
                              "explore_steps": 4, **over})
    # the goal is 14 moves from the top-left cell; an episode lasts 6 steps
    return ArchiveExplorer(config, ToyEnv(_TOY, 16, "cpu", 0), seed=2)


def test_scouting_fills_the_archive_and_gives_the_trainer_back_its_envs() -> None:
    env = _sparse_explorer(scout_steps=120)
    obs = env.reset().clone()
    before = {k: t.clone() for k, t in env.env.env_state_dict().items()
              if isinstance(t, torch.Tensor)}
    assert int(env.archive.size()) == 1 and not env.scouted
    env._scout()
    assert env.scouted and env.t == 120
    after = env.env.env_state_dict()
    for key, t in before.items():
        assert torch.equal(after[key], t), key  # the trainer's envs as they were
    assert torch.equal(env.env._frames, obs)
    assert int(env.archive.size()) > 30  # most of the 64-cell board, from 6-step episodes
    metrics = env.window_metrics()
    assert int(metrics["explore_scout_env_steps"]) == 120 * 16
    assert int(metrics["explore_scout_successes"]) > 0  # the far corner was reached
    assert float(metrics["explore_reward_extrinsic_mean"]) == 0.0  # scouting not counted
    assert torch.equal(env.steps, torch.zeros_like(env.steps))


def test_the_first_step_scouts_once_and_a_resumed_explorer_never() -> None:
    env = _sparse_explorer(scout_steps=10)
    env.reset()
    actions = torch.full((16,), 6)
    env.step(actions)
    assert env.scouted and env.t == 11  # ten scouting steps, then the trainer's
    env.step(actions)
    assert env.t == 12
    state = env.env_state_dict()
    fresh = _sparse_explorer(scout_steps=10)
    fresh.reset()
    fresh.load_env_state_dict(state)
    assert fresh.scouted
    fresh.step(actions)
    assert fresh.t == 13
    assert int(fresh.window_metrics()["explore_scout_env_steps"]) == 160


def test_scouting_ends_once_it_reached_the_goal_often_enough() -> None:
    full = _sparse_explorer(scout_steps=400)
    full.reset()
    full._scout()
    reached = int(full.window_metrics()["explore_scout_successes"])
    assert reached >= 2 and full.t == 400
    early = _sparse_explorer(scout_steps=400, scout_goals=1)
    early.reset()
    early._scout()
    metrics = early.window_metrics()
    assert 1 <= int(metrics["explore_scout_successes"]) < reached
    assert early.t < 400 and early.t % SCOUT_CHECK_EVERY == 0  # stopped at a look
    assert int(metrics["explore_scout_env_steps"]) == early.t * 16


# ---------------------------------------------------------------------------------------
# training episodes that began at the task's real start, counted apart
# ---------------------------------------------------------------------------------------


class _NearGoalToy(_CurriculumToy):
    """A 2 x 2 board: RIGHT then DOWN reaches the goal from the start corner."""

    def __init__(self, num_envs: int) -> None:
        ToyEnv.__init__(self, ToyConfig(grid=2, random_start=False, progress_scale=0.0,
                                        max_steps=6, height=40, width=40), num_envs, "cpu", 0)
        self._origin = torch.arange(num_envs) % 2 == 1


@pytest.mark.parametrize("split", [False, True])
def test_real_start_episodes_and_their_successes_are_counted(split: bool) -> None:
    right, down = torch.full((8,), 6), torch.full((8,), 4)
    config = ArchiveConfig(capacity=64, bonus=0.0, cell_rows=8, cell_cols=8,
                           start_fraction=0.0, split_by_start=split)
    env = ArchiveExplorer(config, _NearGoalToy(8), seed=0)
    env.reset()
    env.step(right)
    info = env.step(down)[4]
    assert bool(info["success"].all())  # every env at the goal; the even ones began at home
    metrics = env.window_metrics()
    assert int(metrics["explore_real_start_episodes"]) == 4
    assert int(metrics["explore_real_start_successes"]) == 4
    # the odd ones began at a curriculum start state, counted apart
    assert int(metrics["explore_start_state_episodes"]) == 4
    assert int(metrics["explore_start_state_successes"]) == 4
    assert int(metrics["explore_restart_episodes"]) == 0  # none began at an archived cell
    # Then every restart from an archived cell: the episodes under way began at home and
    # count; the ones after them, from cells, do not.
    env._start_fraction = 1.0
    env.step(right)
    env.step(down)
    assert int(env.window_metrics()["explore_real_start_episodes"]) == 4
    env.step(right)
    info = env.step(down)[4]
    assert bool(info["success"].all())
    metrics = env.window_metrics()
    assert int(metrics["explore_real_start_episodes"]) == 0
    assert int(metrics["explore_real_start_successes"]) == 0
    assert int(metrics["explore_start_state_episodes"]) == 0
    # they are the restarts from archived cells, all at the goal
    assert int(metrics["explore_restart_episodes"]) == 8
    assert int(metrics["explore_restart_successes"]) == 8


def test_without_origins_every_episode_not_from_a_cell_is_the_real_starts() -> None:
    env = _sparse_explorer(start_fraction=0.0, explore_steps=0)  # plain toy: no origins
    env.reset()
    for _ in range(6):  # 6-step episodes: all 16 end on the sixth
        env.step(torch.full((16,), 6))
    assert int(env.window_metrics()["explore_real_start_episodes"]) == 16


class _MilestoneToy(_NearGoalToy):
    """:class:`_NearGoalToy` whose env counts one milestone passed by every episode that
    moved right (as the goal env reports ``info["milestones"]``)."""

    def __init__(self, num_envs: int) -> None:
        super().__init__(num_envs)
        self._passed = torch.zeros(num_envs, dtype=torch.int64)

    def step(self, actions: torch.Tensor):  # noqa: ANN201 - the env's step tuple
        self._passed += (actions == 6).to(torch.int64)
        obs, reward, done, trunc, info = super().step(actions)
        info["milestones"] = self._passed.clone()
        self._passed.masked_fill_(done | trunc, 0)
        return obs, reward, done, trunc, info


def _split_explorer(env: _NearGoalToy) -> ArchiveExplorer:
    config = ArchiveConfig(capacity=64, bonus=0.0, cell_rows=8, cell_cols=8,
                           start_fraction=0.0, split_by_start=True)
    explorer = ArchiveExplorer(config, env, seed=0)
    explorer.reset()
    return explorer


def test_milestones_of_ended_episodes_are_counted_by_where_they_began() -> None:
    right, down = torch.full((8,), 6), torch.full((8,), 4)
    env = _split_explorer(_MilestoneToy(8))
    env.step(right)
    metrics = env.window_metrics()  # nothing ended yet
    assert int(metrics["explore_real_start_milestones"]) == 0
    env.step(down)  # all 8 end at the goal, each having passed one milestone
    metrics = env.window_metrics()
    assert int(metrics["explore_real_start_milestones"]) == 4
    assert int(metrics["explore_start_state_milestones"]) == 4
    env.step(down)  # DOWN first this time: the milestone comes with the last step
    env.step(right)
    metrics = env.window_metrics()
    assert int(metrics["explore_real_start_episodes"]) == 4
    assert int(metrics["explore_real_start_milestones"]) == 4


def test_an_env_without_milestones_counts_none() -> None:
    right, down = torch.full((8,), 6), torch.full((8,), 4)
    env = _split_explorer(_NearGoalToy(8))
    env.step(right)
    env.step(down)
    metrics = env.window_metrics()
    assert int(metrics["explore_real_start_episodes"]) == 4
    assert int(metrics["explore_real_start_milestones"]) == 0
