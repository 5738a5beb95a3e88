"""``explore.weight_frontier``: each archived cell counts how its recent restarts ended, and
cells the policy reaches the goal from about half the time weigh most (toy env, CPU)."""

from __future__ import annotations

import math

import torch
from gbx_explore.archive import Archive, Weighting
from gbx_explore.config import ArchiveConfig
from gbx_explore.explorer import ArchiveExplorer

from gbx.toy import ToyConfig, ToyEnv


def _t(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def _b(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.bool)


def _slots(archive: Archive) -> dict[int, int]:
    keys = archive.keys[: archive.capacity].tolist()
    return {k: i for i, k in enumerate(keys) if k >= 0}


def test_ended_restarts_are_counted_on_the_cell_they_began_in() -> None:
    archive = Archive(4, 4, "cpu", Weighting(visits=0.0, frontier=1.0))
    archive.update(_t(1, 2, 3, 4), _b(1, 1, 1, 1), _t(0, 0, 0, 0), None, now=0)
    slot = _slots(archive)
    starts = _t(slot[1], slot[1], slot[2], slot[3])
    archive.score(starts, ended=_b(1, 1, 1, 0), won=_b(1, 0, 0, 1))
    assert archive.tries[slot[1]] == 2 and archive.wins[slot[1]] == 1
    assert archive.tries[slot[2]] == 1 and archive.wins[slot[2]] == 0
    # env 3 is still under way: its win does not count
    assert archive.tries[slot[3]] == 0 and archive.wins[slot[3]] == 0
    assert archive.tries[archive.capacity] == 0 and archive.wins[archive.capacity] == 0
    weights = archive.weights(now=0, use_goal=False)
    assert math.isclose(float(weights[slot[1]]), 1.0)  # won half the time: 4 * 0.5 * 0.5
    assert float(weights[slot[2]]) == 0.0  # never won
    assert float(weights[slot[3]]) == 0.0  # not tried
    assert int(archive.frontier_size()) == 1  # only cell 1 was won from sometimes
    archive.score(starts, ended=_b(0, 0, 1, 1), won=_b(0, 0, 1, 1))
    assert math.isclose(float(archive.weights(now=0, use_goal=False)[slot[2]]), 1.0)
    assert float(archive.weights(now=0, use_goal=False)[slot[3]]) == 0.0  # always won
    assert int(archive.frontier_size()) == 2  # cells 1 and 2; cell 3 always won


def test_the_counts_follow_the_recent_restarts() -> None:
    archive = Archive(2, 1, "cpu", Weighting(frontier=1.0, frontier_window=4.0))
    archive.update(_t(7), _b(1), _t(0), None, now=0)
    for _ in range(5):  # five losses: past the window of 4, both counts halve
        archive.score(_t(0), ended=_b(1), won=_b(0))
    assert float(archive.tries[0]) == 2.5 and float(archive.wins[0]) == 0.0
    for _ in range(2):  # two wins: 4.5 tries, halved again
        archive.score(_t(0), ended=_b(1), won=_b(1))
    assert float(archive.tries[0]) == 2.25 and float(archive.wins[0]) == 1.0


def test_a_cell_that_takes_an_evicted_slot_starts_uncounted() -> None:
    archive = Archive(1, 1, "cpu", Weighting(frontier=1.0))
    archive.update(_t(5), _b(1), _t(0), None, now=0)
    archive.score(_t(0), ended=_b(1), won=_b(1))
    archive.visit(_t(5))
    archive.update(_t(9), _b(1), _t(0), None, now=1)  # the full archive replaces cell 5
    assert _slots(archive) == {9: 0}
    assert float(archive.tries[0]) == 0.0 and float(archive.wins[0]) == 0.0


def test_an_archive_saved_before_the_counts_existed_loads_them_empty() -> None:
    archive = Archive(4, 2, "cpu")
    archive.update(_t(1, 2), _b(1, 1), _t(0, 0), None, now=0)
    archive.score(_t(0, 1), ended=_b(1, 1), won=_b(1, 0))
    old = {k: v for k, v in archive.state_dict().items() if k not in Archive.ADDED_LATER}
    copy = Archive(4, 2, "cpu")
    copy.tries.fill_(3.0)
    copy.load_state_dict(old)
    assert torch.equal(copy.keys, archive.keys)
    assert float(copy.tries.sum()) == 0.0 and float(copy.wins.sum()) == 0.0


_BOARD = ToyConfig(grid=2, random_start=False, progress_scale=0.0, max_steps=6,
                   height=40, width=40)


def test_the_explorer_scores_each_burst_on_the_cell_it_restarted_from() -> None:
    """On a 2 x 2 board (RIGHT then DOWN is the goal) every restart is a one-step burst
    from an archived cell: DOWN wins from the top-right cell and never from the start."""
    right, down = torch.full((16,), 6), torch.full((16,), 4)
    config = ArchiveConfig(capacity=16, bonus=0.0, cell_rows=8, cell_cols=8,
                           start_fraction=1.0, explore_steps=1, weight_frontier=1.0)
    env = ArchiveExplorer(config, ToyEnv(_BOARD, 16, "cpu", 0), seed=0)
    start = env.reset()
    env.step(right)
    env.step(down)  # every env at the goal from home: nothing scored (not from a cell)
    assert float(env.archive.tries.sum()) == 0.0
    hasher = env.hasher
    top_left = int(hasher(start[:, -1])[0])
    slots = _slots(env.archive)
    from_cells = env.start_slot.clone()
    assert bool(env.from_cell.all())
    env.step(down)  # one-step bursts end: those from the top-right cell won
    tries, wins = env.archive.tries, env.archive.wins
    began = torch.bincount(from_cells, minlength=env.archive.capacity + 1).float()
    assert torch.equal(tries, began)
    assert float(wins[slots[top_left]]) == 0.0 and float(tries[slots[top_left]]) > 0
    others = [s for c, s in slots.items() if c != top_left and float(tries[s]) > 0]
    assert others and all(float(wins[s]) == float(tries[s]) for s in others)
    # the records count the same restarts: every one of the 16 ended, and those not
    # from the top-left cell reached the goal
    metrics = env.window_metrics()
    assert int(metrics["explore_restart_episodes"]) == 16
    assert int(metrics["explore_restart_successes"]) == int(wins.sum())
    assert int(metrics["explore_restart_successes"]) == 16 - int(began[slots[top_left]])
    assert int(metrics["explore_frontier_cells"]) == 0  # each cell always or never won
    # the counts and each env's restart slot are part of the explorer's saved state
    state = env.env_state_dict()
    fresh = ArchiveExplorer(config, ToyEnv(_BOARD, 16, "cpu", 0), seed=0)
    fresh.reset()
    fresh.load_env_state_dict(state)
    assert torch.equal(fresh.archive.tries, tries) and torch.equal(fresh.archive.wins, wins)
    assert torch.equal(fresh.start_slot, env.start_slot)


def test_without_the_frontier_weight_nothing_is_counted() -> None:
    right, down = torch.full((16,), 6), torch.full((16,), 4)
    config = ArchiveConfig(capacity=16, bonus=0.0, cell_rows=8, cell_cols=8,
                           start_fraction=1.0, explore_steps=1)
    env = ArchiveExplorer(config, ToyEnv(_BOARD, 16, "cpu", 0), seed=0)
    env.reset()
    for action in (right, down, down, right, down):
        env.step(action)
    assert bool(env.from_cell.any())  # restarts from cells ended and began
    assert float(env.archive.tries.sum()) == 0.0 and float(env.archive.wins.sum()) == 0.0
