"""Saved env states of the Game Boy envs (``SnapshotEnv``): an env restored from a slot
continues the saved game exactly, as a new episode."""

from __future__ import annotations

import pytest
import torch

from gbx.api import GoalDistanceEnv, SnapshotEnv
from gbx_gameboy.game.solutions import ACTIONS, SOLUTIONS
from gbx_gameboy.goal import GoalConfig, GoalEnv
from gbx_gameboy.snapshot import MaskedRestore, SnapshotBank, capture
from gbx_gameboy.tasks import STAGE_TASKS, START_STATE, states_dir
from gbx_gameboy.tiles import tile_envs

A = ACTIONS.index("A")  # in the house, facing a free floor block: A changes nothing
SOLUTION = [ACTIONS.index(b) for b in SOLUTIONS["leave_house"]]


def devices() -> list[str]:
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def env_for(n: int, device: str = "cpu", **kw: object) -> GoalEnv:
    cfg = GoalConfig(state=str(states_dir() / START_STATE),
                     goal_dir=str(STAGE_TASKS[0].goal_dir()), info_mode="full", **kw)
    return GoalEnv(cfg, n, device, seed=0)


@pytest.mark.parametrize("device", devices())
def test_saving_into_an_empty_bank_copies_only_the_named_envs(device: str) -> None:
    g = torch.Generator().manual_seed(0)
    n = 5
    state = {
        "mem": tile_envs(torch.randint(0, 256, (n, 40), generator=g, dtype=torch.uint8)),
        "tm": tile_envs(torch.randint(-2**40, 2**40, (n, 3), generator=g, dtype=torch.int64)),
        "fb": torch.randint(0, 4, (n, 4, 6), generator=g, dtype=torch.uint8),
    }
    state = {k: v.to(device) for k, v in state.items()}
    bank = SnapshotBank.empty(state, 3)
    assert bank.nbytes() == sum(t.numel() * t.element_size() for t in bank.arrays.values())
    store = MaskedRestore(bank.arrays, SnapshotBank(state, n))
    source = torch.tensor([4, -1, 1], device=device)  # slot 0 <- env 4, slot 2 <- env 1
    store.restore(source >= 0, source.clamp_min(0))
    for slot, env in ((0, 4), (2, 1)):
        assert all(torch.equal(a, b) for a, b in zip(
            capture(bank.arrays, slot).values(), capture(state, env).values(), strict=True))
    assert all(not bool(v.any()) for v in capture(bank.arrays, 1).values())


@pytest.mark.parametrize("device", devices())
def test_a_restored_env_continues_the_saved_game_as_a_new_episode(device: str) -> None:
    env = env_for(2, device, max_steps=64, stack_k=2, shaping=1.0)
    assert isinstance(env, SnapshotEnv) and isinstance(env, GoalDistanceEnv)
    env.reset()
    slots = env.snapshot_slots(4)
    walked = 5
    for a in SOLUTION[:walked]:  # env 0 walks part of the way; env 1 presses A
        env.step(torch.tensor([a, A], device=env.device))
    saved_obs = env.stack.buffer[0].clone()
    saved_dist = env.goal_distance()[0].clone()
    saved_emu = {k: v.clone() for k, v in capture(env.batch.state_tensors(), 0).items()}
    slots.save(torch.tensor([2, -1], device=env.device))
    for _ in range(3):  # env 0 wanders off
        env.step(torch.tensor([A, A], device=env.device))
    obs = slots.restore(torch.tensor([-1, 2], device=env.device))
    assert torch.equal(obs[1], saved_obs)
    restored = capture(env.batch.state_tensors(), 1)
    assert all(torch.equal(restored[k], saved_emu[k]) for k in saved_emu)
    assert env._steps.tolist() == [walked + 3, 0]  # a new episode for env 1 only
    assert float(env.goal_distance()[1]) == pytest.approx(float(saved_dist))
    # env 1 finishes the walk from the saved state: it reaches the goal, rewarded by the
    # shaping from the restored distance, in exactly the remaining steps.
    rest = SOLUTION[walked:]
    for t, a in enumerate(rest, start=1):
        _, reward, done, trunc, _ = env.step(torch.tensor([A, a], device=env.device))
        assert not bool(trunc.any())
        assert bool(done[1]) == (t == len(rest))
    assert float(reward[1]) > 1.0  # the goal bonus plus the last step's shaping


def test_slots_and_their_bytes() -> None:
    env = env_for(2)
    slots = env.snapshot_slots(3)
    tensors = slots.tensors()
    assert "stack" in tensors and "emulator.fb" in tensors
    assert tensors["emulator.fb"].shape[0] == 3
    assert slots.nbytes() >= sum(t.numel() * t.element_size() for t in tensors.values())
    with pytest.raises(ValueError, match="capacity"):
        env.snapshot_slots(0)
