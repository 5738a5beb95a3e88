"""Archive rules on small tensors: insertion, improvement, eviction, visits, selection."""

from __future__ import annotations

import math

import torch
from gbx_explore.archive import Archive, Weighting


def _t(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def _all(n: int) -> torch.Tensor:
    return torch.ones(n, dtype=torch.bool)


def _cells_of(archive: Archive) -> dict[int, int]:
    """cell id -> slot of the occupied slots."""
    keys = archive.keys[: archive.capacity].tolist()
    return {k: i for i, k in enumerate(keys) if k >= 0}


def test_new_cells_are_inserted_once_by_the_env_with_fewest_steps() -> None:
    archive = Archive(8, 5, "cpu")
    cells = _t(10, 20, 10, 30, 10)
    steps = _t(5, 1, 3, 2, 4)
    save = archive.update(cells, _all(5), steps, None, now=7)
    table = _cells_of(archive)
    assert sorted(table) == [10, 20, 30]
    # cell 10: envs 0, 2, 4 with 5, 3, 4 steps; env 2 saves
    assert save.tolist()[0] == -1 and save.tolist()[4] == -1
    assert save[2] == table[10] and save[1] == table[20] and save[3] == table[30]
    assert archive.best[table[10]] == 3
    assert archive.found_at[table[10]] == 7
    assert archive.discovered == 3
    assert int(archive.size()) == 3


def test_envs_that_cannot_save_insert_nothing() -> None:
    archive = Archive(4, 2, "cpu")
    save = archive.update(_t(1, 2), torch.tensor([False, True]), _t(1, 1), None, now=0)
    assert save.tolist()[0] == -1 and save.tolist()[1] >= 0
    assert sorted(_cells_of(archive)) == [2]


def test_a_shorter_path_improves_a_known_cell_and_a_longer_one_does_not() -> None:
    archive = Archive(4, 2, "cpu")
    archive.update(_t(5, 6), _all(2), _t(10, 10), None, now=0)
    slot5 = _cells_of(archive)[5]
    save = archive.update(_t(5, 6), _all(2), _t(4, 12), None, now=1)
    assert save.tolist() == [slot5, -1]
    assert archive.best[slot5] == 4
    assert archive.found_at[slot5] == 0  # still the discovery time
    assert archive.discovered == 2


def test_visits_count_every_env_and_unknown_cells_count_once() -> None:
    archive = Archive(4, 3, "cpu")
    archive.update(_t(1, 1, 2), _all(3), _t(0, 0, 0), None, now=0)
    counts = archive.visit(_t(1, 1, 9))
    assert counts.tolist() == [2, 2, 1]
    counts = archive.visit(_t(1, 2, 2))
    assert counts.tolist() == [3, 2, 2]
    assert int(archive.visits[archive.capacity]) == 0  # the sink stays clean


def test_a_full_archive_replaces_its_most_visited_cell() -> None:
    archive = Archive(3, 3, "cpu")
    archive.update(_t(1, 2, 3), _all(3), _t(1, 1, 1), None, now=0)
    archive.visit(_t(2, 2, 2))
    archive.visit(_t(2, 1, 3))  # visits: cell 1: 1, cell 2: 4, cell 3: 1
    slot2 = _cells_of(archive)[2]
    save = archive.update(_t(4, 4, 4), _all(3), _t(3, 2, 9), None, now=5)
    table = _cells_of(archive)
    assert sorted(table) == [1, 3, 4]
    assert table[4] == slot2 and save.tolist() == [-1, slot2, -1]
    assert archive.visits[slot2] == 0 and archive.best[slot2] == 2
    assert archive.found_at[slot2] == 5


def test_a_cell_improved_in_a_step_is_not_evicted_in_it() -> None:
    archive = Archive(2, 2, "cpu")
    archive.update(_t(1, 2), _all(2), _t(5, 5), None, now=0)
    archive.visit(_t(1, 1))  # cell 1 is the most visited
    save = archive.update(_t(1, 7), _all(2), _t(2, 1), None, now=1)
    table = _cells_of(archive)
    assert sorted(table) == [1, 7]  # cell 2 made room, cell 1 was improved
    assert save.tolist() == [table[1], table[7]]


def test_more_new_cells_than_slots_keep_the_first_ones() -> None:
    archive = Archive(2, 4, "cpu")
    save = archive.update(_t(4, 3, 2, 1), _all(4), _t(0, 0, 0, 0), None, now=0)
    assert sorted(_cells_of(archive)) == [1, 2]  # in cell order
    assert sorted(s for s in save.tolist() if s >= 0) == [0, 1]
    assert archive.discovered == 2


def test_weights_follow_visits_recency_and_goal() -> None:
    w = Weighting(visits=1.0, recent=2.0, halflife=10.0, goal=3.0, goal_scale=0.1)
    archive = Archive(4, 3, "cpu", w)
    archive.update(_t(1, 2, 3), _all(3), _t(0, 0, 0), torch.tensor([0.5, 0.2, 0.3]), now=0)
    archive.visit(_t(1, 1, 1))
    table = _cells_of(archive)
    weights = archive.weights(now=10, use_goal=True)
    expect = {
        1: 1 / math.sqrt(4) + 2 * 0.5 + 3 * math.exp(-3.0),
        2: 1 / math.sqrt(1) + 2 * 0.5 + 3 * 1.0,
        3: 1 / math.sqrt(1) + 2 * 0.5 + 3 * math.exp(-1.0),
    }
    for cell, value in expect.items():
        assert math.isclose(float(weights[table[cell]]), value, rel_tol=1e-6)
    empty = [i for i in range(4) if i not in table.values()]
    assert float(weights[empty[0]]) == 0.0
    no_goal = archive.weights(now=10, use_goal=False)
    assert math.isclose(float(no_goal[table[2]]), 2.0, rel_tol=1e-6)


def test_choose_picks_only_resetting_envs_in_proportion_to_the_weights() -> None:
    n = 20000
    archive = Archive(4, n, "cpu", Weighting(visits=1.0))
    archive.update(_t(1, 2).repeat_interleave(n // 2), torch.ones(n, dtype=torch.bool),
                   torch.zeros(n, dtype=torch.int64), None, now=0)
    # three visits of cell 1 (999 is not archived): weights 1/sqrt(1 + 3) and 1/sqrt(1)
    archive.visit(torch.where(torch.arange(n) < 3, 1, 999))
    table = _cells_of(archive)
    gen = torch.Generator().manual_seed(0)
    resetting = torch.arange(n) % 2 == 0
    pick, slot = archive.choose(resetting, 1.0, gen, now=0, use_goal=False)
    assert torch.equal(pick, resetting)
    chosen = slot[pick]
    share2 = float((chosen == table[2]).float().mean())
    w1, w2 = 0.5, 1.0
    assert abs(share2 - w2 / (w1 + w2)) < 0.02
    assert int(archive.chosen[: archive.capacity].sum()) == int(pick.sum())
    none, _ = archive.choose(resetting, 0.0, gen, now=0, use_goal=False)
    assert not bool(none.any())


def test_an_empty_archive_is_never_chosen() -> None:
    archive = Archive(4, 8, "cpu")
    pick, _ = archive.choose(torch.ones(8, dtype=torch.bool), 1.0, torch.Generator(), now=0,
                             use_goal=False)
    assert not bool(pick.any())


def test_state_dict_round_trip() -> None:
    archive = Archive(4, 3, "cpu")
    archive.update(_t(1, 2, 3), _all(3), _t(3, 2, 1), None, now=0)
    archive.visit(_t(1, 2, 2))
    copy = Archive(4, 3, "cpu")
    copy.load_state_dict(archive.state_dict())
    for key in Archive.STATE:
        assert torch.equal(getattr(copy, key), getattr(archive, key)), key
