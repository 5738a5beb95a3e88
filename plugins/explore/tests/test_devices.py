"""The explorer on the Game Boy goal env and on CUDA: states archived from pixels, restarts
from them, and no host synchronisation in a step (CUDA tests skip without a GPU)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from gbx_explore.config import ArchiveConfig
from gbx_explore.explorer import ArchiveExplorer

from gbx.api import EpisodeProgressEnv
from gbx.testing import no_cuda_syncs
from gbx.toy import ToyConfig, make_toy_env


def _quest_env(n: int, device: str, *, milestone: bool = False) -> Any:
    """Stage 1's task (leave the house); with ``milestone``, stage 2's (the meadow) with
    leaving the house as a milestone on the way."""
    gameboy = pytest.importorskip("gbx_gameboy.goal")
    from gbx_gameboy.tasks import STAGE_TASKS, START_STATE, states_dir

    goal, milestones = STAGE_TASKS[0].goal_dir(), ()
    if milestone:
        goal, milestones = STAGE_TASKS[1].goal_dir(), (str(STAGE_TASKS[0].goal_dir()),)
    cfg = gameboy.GoalConfig(state=str(states_dir() / START_STATE), goal_dir=str(goal),
                             max_steps=6, milestone_dirs=milestones)
    return gameboy.GoalEnv(cfg, n, device, seed=0)


def _drive(env: ArchiveExplorer, steps: int, seed: int = 0) -> list[dict[str, Any]]:
    gen = torch.Generator(device=env.device).manual_seed(seed)
    env.reset()
    infos = []
    for _ in range(steps):
        actions = torch.randint(0, env.num_actions, (env.num_envs,), generator=gen,
                                device=env.device)
        infos.append(env.step(actions)[4])
    return infos


def test_the_quest_env_archives_cells_and_restarts_from_them() -> None:
    env = ArchiveExplorer(ArchiveConfig(capacity=32, start_fraction=1.0),
                          _quest_env(4, "cpu"), seed=0)
    assert env.use_goal  # the goal env shares its distance: the goal weighting is on
    infos = _drive(env, 14)
    metrics = env.window_metrics()
    assert int(metrics["explore_archive_size"]) > 1
    assert float(metrics["explore_archive_start_frac"]) == 1.0  # every reset (max_steps 6)
    assert sum(int(i["archive_start"].sum()) for i in infos) >= 4
    # each archived cell's saved frame stack hashes back to the cell
    size = env.archive.capacity
    keys = env.archive.keys[:size]
    used = keys >= 0
    stacks = env.slots.tensors()["stack"][used]
    hasher = type(env.hasher)(stacks.shape[-2:], 9, 10, 8, int(used.sum()), "cpu")
    assert torch.equal(hasher(stacks[:, -1]), keys[used])


def test_the_cells_keep_their_episodes_milestones_through_a_checkpoint() -> None:
    """With milestones, each saved state's episode progress is part of the explorer's
    state: a resumed explorer restarts from its cells with what they had passed."""
    def make() -> ArchiveExplorer:
        return ArchiveExplorer(ArchiveConfig(capacity=32, start_fraction=1.0),
                               _quest_env(4, "cpu", milestone=True), seed=0)

    env = make()
    _drive(env, 14)
    env.env.episode_progress()[:, :2] = True  # two episodes past the house door
    env.slots.save(torch.tensor([5, 6, -1, -1]))
    state = env.env_state_dict()
    progress = state["explore"]["slots"]["progress"]
    assert progress.shape == (1, 32) and progress[0, 5:7].tolist() == [True, True]
    resumed = make()
    resumed.load_env_state_dict(state)
    assert torch.equal(resumed.slots.tensors()["progress"], progress)
    resumed.env.episode_progress().zero_()
    resumed.slots.restore(torch.tensor([-1, -1, 6, -1]))
    assert resumed.env.episode_progress()[0].tolist() == [False, False, True, False]
    # the explorer tells a trainer the same flags (gbx.api.EpisodeProgressEnv)
    assert isinstance(resumed, EpisodeProgressEnv)
    assert resumed.episode_progress() is resumed.env.episode_progress()


def _no_syncs(env: ArchiveExplorer) -> None:
    """Steps under ``set_sync_debug_mode("error")``; after a warm-up no step asks the
    device for new memory (torch's caching allocator serves every temporary)."""
    _drive(env, 12)  # warm up past a few resets: first calls allocate and compile
    torch.cuda.synchronize()
    segments = torch.cuda.memory_stats()["segment.all.allocated"]
    with no_cuda_syncs():
        gen = torch.Generator(device=env.device).manual_seed(1)
        for _ in range(5):
            env.step(torch.randint(0, env.num_actions, (env.num_envs,), generator=gen,
                                   device=env.device))
    torch.cuda.synchronize()
    assert torch.cuda.memory_stats()["segment.all.allocated"] == segments


@pytest.mark.cuda
def test_cuda_toy_explorer_steps_without_host_syncs() -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the explorer's CUDA path needs a GPU")
    # with every selection term on, the frontier counts included
    env = ArchiveExplorer(ArchiveConfig(capacity=64, explore_steps=2, weight_frontier=1.0),
                          make_toy_env(ToyConfig(max_steps=4), 256, "cuda", 0), seed=0)
    _no_syncs(env)
    assert int(env.archive.size()) > 0
    assert float(env.archive.tries.sum()) > 0


@pytest.mark.cuda
def test_cuda_quest_explorer_steps_without_host_syncs_and_matches_the_cpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the explorer's CUDA path needs a GPU")
    env = ArchiveExplorer(ArchiveConfig(capacity=64), _quest_env(64, "cuda", milestone=True),
                          seed=0)
    _no_syncs(env)
    # the same envs, actions and seeds on both devices archive the same cells
    tables = {}
    for device in ("cpu", "cuda"):
        ex = ArchiveExplorer(ArchiveConfig(capacity=64, start_fraction=0.0),
                             _quest_env(8, device), seed=0)
        gen = torch.Generator().manual_seed(3)
        ex.reset()
        for _ in range(8):
            ex.step(torch.randint(0, ex.num_actions, (8,), generator=gen).to(device))
        tables[device] = torch.sort(ex.archive.keys).values.cpu()
    assert torch.equal(tables["cpu"], tables["cuda"])
