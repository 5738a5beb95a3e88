from __future__ import annotations

import torch

from gbx_algo_dreamer.replay import Replay
from gbx_toolkit.shades import unpack_shades

SHAPE = (1, 4, 8)


def _frame(n: int, value: int) -> torch.Tensor:
    return torch.full((n, *SHAPE), value % 4, dtype=torch.uint8)


def _fill(replay: Replay, steps: int, reward_of_step) -> None:
    n = replay.num_streams
    replay.stage_first(_frame(n, 0))
    replay.commit()
    no = torch.zeros(n, dtype=torch.bool)
    for t in range(1, steps + 1):
        r = torch.full((n,), float(reward_of_step(t)))
        replay.stage(_frame(n, t), torch.ones(n, dtype=torch.int64), r, no, no, _frame(n, t))
        replay.commit()


def test_sampling_never_reads_uncommitted_or_in_flight_slots():
    replay = Replay(3, 10, SHAPE, "cpu")
    _fill(replay, 25, lambda t: t)  # wraps the ring twice
    # a write in progress: staged with a poison reward, not committed
    n = 3
    poison = torch.full((n,), -999.0)
    no = torch.zeros(n, dtype=torch.bool)
    replay.stage(_frame(n, 1), torch.ones(n, dtype=torch.int64), poison, no, no.clone() | True,
                 _frame(n, 2))
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        b = replay.sample(8, 4, g)
        assert (b.rewards != -999.0).all()
        assert (b.rewards[:, 1:] - b.rewards[:, :-1] == 1).all()  # consecutive, no wrap jump
        assert (b.rewards >= 25 - (10 - 2) + 1).all()  # only the newest cap-2 records
    replay.commit()
    b = replay.sample(64, 2, g)
    assert (b.rewards == -999.0).any()  # once committed it is sampleable


def test_reset_writes_a_first_record_and_sampling_forces_first():
    replay = Replay(2, 32, SHAPE, "cpu")
    replay.stage_first(_frame(2, 0))
    replay.commit()
    no = torch.zeros(2, dtype=torch.bool)
    reset = torch.tensor([True, False])
    replay.stage(_frame(2, 3), torch.tensor([2, 2]), torch.tensor([1.0, 0.0]), reset, reset,
                 _frame(2, 1))
    replay.commit()
    assert replay.committed.tolist() == [3, 2]
    assert replay.is_terminal[0, 1] and replay.is_first[0, 2] and not replay.is_first[1, 2]
    assert replay.rewards[0, 1] == 1.0 and replay.actions[0, 2] == 0
    assert torch.equal(unpack_shades(replay.obs[0, 1]), _frame(1, 3)[0])  # final frame
    replay.stage(_frame(2, 2), torch.tensor([1, 1]), torch.zeros(2), no, no, _frame(2, 2))
    replay.commit()
    b = replay.sample(16, 2, torch.Generator().manual_seed(1))
    assert b.is_first[:, 0].all()
